//! The compile cache and the compiler driver under hostile conditions: libraries planted in the
//! cache folder or damaged there, folders others can write, empty or relative cache variables,
//! a cache folder we cannot write, `$CC` with arguments, a compiler that fails or hangs.

mod common;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Buffers, default_backend};
use rcannl_ir::{Binop, Index, LoopVar, NodeId, Routine, Scalar, Stmt, Unop};
use sha2::{Digest, Sha256};

/// Set in a child process to the name of the test it runs.
const CHILD: &str = "RCANNL_CACHE_TEST_CHILD";

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Variables to set (`None`: to remove) in a child process.
type Env<'a> = [(&'a str, Option<&'a OsStr>)];

/// Whether this process runs as the child of the test `name`.
fn in_child(name: &str) -> bool {
    std::env::var_os(CHILD).is_some_and(|child| child == name)
}

/// Runs the test `name` of this file in a child process, with `env` set (`None`: removed) and
/// in `cwd` if given.
fn run_child(name: &str, env: &Env, cwd: Option<&Path>) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name);
    for (key, value) in env {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command.output().unwrap()
}

fn copy_routine(name: &str, op: Unop) -> Routine {
    let assignment = unary(
        true,
        Binop::Arg2,
        1,
        op,
        0,
        projections(&[5], (&[5], vec![it(0)]), vec![(&[5], vec![it(0)])]),
    );
    Routine::lower(name, &assignment, vec![node(0, &[5]), node(1, &[5])]).unwrap()
}

/// `t1 = t0`.
fn copying() -> Routine {
    copy_routine("copy", Unop::Identity)
}

/// `t1 = -t0`: the same kernel signature as [`copying`], another result.
fn negating() -> Routine {
    copy_routine("negate", Unop::Neg)
}

/// Compiles `routine` with `compiler`, runs it on `0..5` and returns the result and whether the
/// library came from the cache.
fn compile_and_run(compiler: &Compiler, routine: &Routine) -> (Vec<f64>, bool) {
    let compiled = compiler.compile(routine).unwrap();
    let mut buffers = Buffers::for_routine(routine).unwrap();
    buffers.set_values(NodeId(0), &range(5)).unwrap();
    compiled.run(&mut buffers, &HashMap::new()).unwrap();
    (buffers.values(NodeId(1)), compiled.from_cache)
}

fn compiler_in(dir: &Path) -> Compiler {
    Compiler::find().expect("a C compiler").with_cache_dir(dir)
}

/// The names of the libraries in `dir`.
fn libraries_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".so"))
        .collect();
    names.sort();
    names
}

/// The names of every file in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A shared library whose constructor creates `marker` when it is loaded, built in `dir`.
fn planted_library(dir: &Path, marker: &Path) -> Vec<u8> {
    let source = dir.join("planted.c");
    let library = dir.join("planted.so");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n\
             __attribute__((constructor)) static void planted(void) {{\n\
               FILE *marker = fopen(\"{}\", \"w\");\n\
               if (marker) fclose(marker);\n\
             }}\n\
             void rc_k0(void) {{}}\n",
            marker.display()
        ),
    )
    .unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&library).unwrap();
    std::fs::remove_file(&library).unwrap();
    std::fs::remove_file(&source).unwrap();
    bytes
}

/// Puts `bytes` at `dir/name` together with a digest record for it (`rc_<key>.sha256` in
/// `sha256sum`'s format), as someone who knows the cache's layout would.
fn plant_with_record(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap();
    let digest: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let record = name.strip_suffix(".so").unwrap().to_owned() + ".sha256";
    std::fs::write(dir.join(record), format!("{digest}  {name}\n")).unwrap();
}

#[test]
fn the_planted_library_runs_its_constructor_when_loaded() {
    // The library the other tests plant does what they guard against when it is loaded.
    let folder = Folder::new("planted-sanity");
    let marker = folder.path().join("marker");
    let bytes = planted_library(folder.path(), &marker);
    let path = folder.path().join("planted.so");
    std::fs::write(&path, bytes).unwrap();
    // SAFETY: a library built above whose constructor only creates a file.
    let library = unsafe { libloading::Library::new(&path) }.unwrap();
    assert!(marker.exists());
    drop(library);
}

#[test]
fn a_library_planted_in_a_folder_others_can_write_never_runs() {
    let private = Folder::new("planted-private");
    let expected = compile_and_run(&compiler_in(private.path()), &copying()).0;
    let names = libraries_in(private.path());
    assert!(!names.is_empty());
    for mode in [0o777, 0o1777, 0o770, 0o720] {
        let shared = Folder::new(&format!("planted-shared-{mode:o}"));
        let marker = private.path().join(format!("marker-{mode:o}"));
        let planted = planted_library(shared.path(), &marker);
        for name in &names {
            plant_with_record(shared.path(), name, &planted);
        }
        set_mode(shared.path(), mode);
        let compiler = compiler_in(shared.path());
        let (values, from_cache) = compile_and_run(&compiler, &copying());
        assert!(!marker.exists(), "mode {mode:o}: the planted library ran");
        assert_eq!(values, expected, "mode {mode:o}");
        assert!(!from_cache, "mode {mode:o}");
        // The folder is left as it was: nothing of ours is kept where others can change it.
        for name in &names {
            assert_eq!(std::fs::read(shared.path().join(name)).unwrap(), planted);
        }
    }
}

#[test]
fn a_library_planted_at_a_key_path_of_our_folder_never_runs() {
    let folder = Folder::new("planted-key");
    let compiler = compiler_in(folder.path());
    let expected = compile_and_run(&compiler, &copying()).0;
    let marker = folder.path().join("marker");
    let planted = planted_library(folder.path(), &marker);
    for name in libraries_in(folder.path()) {
        std::fs::write(folder.path().join(&name), &planted).unwrap();
    }
    let (values, from_cache) = compile_and_run(&compiler, &copying());
    assert!(!marker.exists(), "the planted library ran");
    assert_eq!(values, expected);
    assert!(
        !from_cache,
        "a library without its digest came from the cache"
    );
    // Rebuilt in place: the next compilation finds it.
    assert_eq!(compile_and_run(&compiler, &copying()), (expected, true));
}

#[test]
fn a_damaged_cached_library_is_rebuilt() {
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 4] = [
        ("truncated", |bytes| bytes.truncate(bytes.len() / 2)),
        ("empty", Vec::clear),
        ("garbled", |bytes| {
            let len = bytes.len();
            for byte in &mut bytes[len / 4..len / 2] {
                *byte ^= 0x5a;
            }
        }),
        ("one bit", |bytes| {
            let middle = bytes.len() / 2;
            bytes[middle] ^= 1;
        }),
    ];
    for (what, damage) in damages {
        let folder = Folder::new(&format!("damaged-{}", what.replace(' ', "-")));
        let compiler = compiler_in(folder.path());
        let expected = compile_and_run(&compiler, &copying()).0;
        for name in libraries_in(folder.path()) {
            let path = folder.path().join(name);
            let mut bytes = std::fs::read(&path).unwrap();
            damage(&mut bytes);
            std::fs::write(&path, bytes).unwrap();
        }
        assert_eq!(
            compile_and_run(&compiler, &copying()),
            (expected.clone(), false),
            "{what}"
        );
        assert_eq!(
            compile_and_run(&compiler, &copying()),
            (expected, true),
            "{what}"
        );
    }
}

#[test]
fn another_routines_library_at_a_key_path_is_rebuilt() {
    let (ours, theirs) = (Folder::new("swapped-ours"), Folder::new("swapped-theirs"));
    let compiler = compiler_in(ours.path());
    let copied = compile_and_run(&compiler, &copying()).0;
    let negated = compile_and_run(&compiler_in(theirs.path()), &negating()).0;
    assert_ne!(copied, negated);
    let [ours_library] = &libraries_in(ours.path())[..] else {
        panic!("one library")
    };
    let [their_library] = &libraries_in(theirs.path())[..] else {
        panic!("one library")
    };
    // The other routine's library alone under our name, then its whole entry (the library and
    // whatever is kept beside it) under our names.
    std::fs::copy(
        theirs.path().join(their_library),
        ours.path().join(ours_library),
    )
    .unwrap();
    assert_eq!(
        compile_and_run(&compiler, &copying()),
        (copied.clone(), false)
    );
    let (our_stem, their_stem) = (
        ours_library.strip_suffix(".so").unwrap(),
        their_library.strip_suffix(".so").unwrap(),
    );
    for name in files_in(theirs.path()) {
        let renamed = name.replacen(their_stem, our_stem, 1);
        std::fs::copy(theirs.path().join(&name), ours.path().join(renamed)).unwrap();
    }
    assert_eq!(compile_and_run(&compiler, &copying()), (copied, false));
}

/// Compiles and runs [`copying`] with the compiler and cache folder the environment chooses.
fn compile_from_environment() {
    let compiler = Compiler::find().expect("a C compiler");
    assert_eq!(compile_and_run(&compiler, &copying()).0, range(5));
}

/// The names of the libraries [`copying`] is cached under.
fn copying_library_names() -> Vec<String> {
    let private = Folder::new("names");
    compile_and_run(&compiler_in(private.path()), &copying());
    libraries_in(private.path())
}

/// This process's user id.
fn uid() -> u32 {
    let probe = Folder::new("uid");
    std::fs::metadata(probe.path()).unwrap().uid()
}

#[test]
fn without_home_the_cache_is_no_shared_temporary_folder() {
    if in_child("without_home_the_cache_is_no_shared_temporary_folder") {
        return compile_from_environment();
    }
    let names = copying_library_names();
    let temp = Folder::new("no-home-tmp");
    set_mode(temp.path(), 0o1777);
    let marker = temp.path().join("marker");
    let planted = planted_library(temp.path(), &marker);
    // Folders another user could have made where a cache without a home might be looked for.
    for shared in ["rcannl".to_owned(), format!("rcannl-{}", uid())] {
        let shared = temp.path().join(shared);
        std::fs::create_dir(&shared).unwrap();
        for name in &names {
            plant_with_record(&shared, name, &planted);
        }
        set_mode(&shared, 0o777);
    }
    let output = run_child(
        "without_home_the_cache_is_no_shared_temporary_folder",
        &[
            ("HOME", None),
            ("XDG_CACHE_HOME", None),
            ("RCANNL_CACHE_DIR", None),
            ("TMPDIR", Some(temp.path().as_os_str())),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!marker.exists(), "the planted library ran");
}

#[test]
fn empty_or_relative_cache_variables_count_as_unset() {
    if in_child("empty_or_relative_cache_variables_count_as_unset") {
        return compile_from_environment();
    }
    let base = Folder::new("empty-vars");
    let (home, xdg, temp, work) = (
        base.path().join("home"),
        base.path().join("xdg"),
        base.path().join("tmp"),
        base.path().join("work"),
    );
    let user_cache = home.join(".cache").join("rcannl");
    let cases: [(&Env, PathBuf); 4] = [
        (
            &[
                ("RCANNL_CACHE_DIR", Some(OsStr::new(""))),
                ("XDG_CACHE_HOME", Some(xdg.as_os_str())),
            ],
            xdg.join("rcannl"),
        ),
        (
            &[
                ("RCANNL_CACHE_DIR", None),
                ("XDG_CACHE_HOME", Some(OsStr::new(""))),
            ],
            user_cache.clone(),
        ),
        (
            &[
                ("RCANNL_CACHE_DIR", None),
                ("XDG_CACHE_HOME", Some(OsStr::new("relative"))),
            ],
            user_cache,
        ),
        (
            &[
                ("RCANNL_CACHE_DIR", None),
                ("XDG_CACHE_HOME", None),
                ("HOME", Some(OsStr::new(""))),
            ],
            temp.join(format!("rcannl-{}", uid())),
        ),
    ];
    for (env, expected) in cases {
        for dir in [&home, &xdg, &temp, &work] {
            let _ = std::fs::remove_dir_all(dir);
            std::fs::create_dir(dir).unwrap();
        }
        let mut env = env.to_vec();
        env.push(("TMPDIR", Some(temp.as_os_str())));
        if !env.iter().any(|(key, _)| *key == "HOME") {
            env.push(("HOME", Some(home.as_os_str())));
        }
        let output = run_child(
            "empty_or_relative_cache_variables_count_as_unset",
            &env,
            Some(&work),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{env:?}: {stderr}");
        assert_eq!(files_in(&work), Vec::<String>::new(), "{env:?}");
        assert!(
            expected.is_dir() && !libraries_in(&expected).is_empty(),
            "{env:?}: nothing cached in {}",
            expected.display()
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_cache_folder_we_cannot_write_falls_back_after_one_warning() {
    if in_child("a_cache_folder_we_cannot_write_falls_back_after_one_warning") {
        let compiler = Compiler::find().expect("a C compiler");
        assert_eq!(compile_and_run(&compiler, &copying()), (range(5), false));
        let negated = compile_and_run(&compiler, &negating());
        assert_eq!(negated.0, range(5).iter().map(|x| -x).collect::<Vec<_>>());
        return;
    }
    // A folder of ours that nobody, not even root, can create files in.
    let output = run_child(
        "a_cache_folder_we_cannot_write_falls_back_after_one_warning",
        &[("RCANNL_CACHE_DIR", Some(OsStr::new("/proc/self")))],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr.matches("rcannl: ").count(), 1, "{stderr}");
    assert!(stderr.contains("/proc/self"), "{stderr}");
    assert!(stderr.contains("private temporary folder"), "{stderr}");
}

/// An executable shell script `name` in `dir` with `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    set_mode(&path, 0o755);
    path
}

/// A compiler that answers questions at once (a version, no predefined macros: a target with
/// no extensions to check) and builds with `build` (a shell command).
fn fake_compiler(dir: &Path, build: &str) -> PathBuf {
    script(
        dir,
        "fake-cc",
        &format!(
            "case \" $* \" in\n  *\" --version \"*) echo 'fake-cc 1.0' ;;\n  *\" -dM \"*) ;;\n  \
             *) {build} ;;\nesac"
        ),
    )
}

#[test]
fn a_failed_compilation_leaves_no_files_behind() {
    if in_child("a_failed_compilation_leaves_no_files_behind") {
        let compiler = Compiler::find().expect("the fake compiler");
        let error = compiler.compile(&copying()).unwrap_err();
        assert!(error.message.contains("fake: no"), "{error}");
        return;
    }
    let tools = Folder::new("failing-cc");
    let cache = Folder::new("failing-cache");
    let cc = fake_compiler(tools.path(), "echo 'fake: no' >&2; exit 1");
    let output = run_child(
        "a_failed_compilation_leaves_no_files_behind",
        &[
            ("CC", Some(cc.as_os_str())),
            ("RCANNL_CACHE_DIR", Some(cache.path().as_os_str())),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(files_in(cache.path()), Vec::<String>::new());
}

#[test]
fn cc_may_carry_arguments() {
    if in_child("cc_may_carry_arguments") {
        assert_eq!(default_backend().name(), "cc");
        return compile_from_environment();
    }
    let cache = Folder::new("cc-words");
    for cc in ["cc -O1", "env cc", "  cc\t-O1 ", "'cc' \"-O1\""] {
        let output = run_child(
            "cc_may_carry_arguments",
            &[
                ("CC", Some(OsStr::new(cc))),
                ("RCANNL_CACHE_DIR", Some(cache.path().as_os_str())),
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "CC={cc:?}: {stderr}");
        assert!(!stderr.contains("rcannl:"), "CC={cc:?}: {stderr}");
    }
}

#[test]
fn without_cc_on_the_path_the_warning_says_what_was_tried() {
    if in_child("without_cc_on_the_path_the_warning_says_what_was_tried") {
        assert_eq!(default_backend().name(), "interpreter");
        return;
    }
    let empty = Folder::new("empty-path");
    let output = run_child(
        "without_cc_on_the_path_the_warning_says_what_was_tried",
        &[("CC", None), ("PATH", Some(empty.path().as_os_str()))],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("$CC is not set"), "{stderr}");
    assert!(stderr.contains("`cc --version`"), "{stderr}");
    assert!(stderr.contains("No such file"), "{stderr}");
}

#[test]
fn a_hanging_compiler_is_killed_after_the_time_limit() {
    if in_child("a_hanging_compiler_is_killed_after_the_time_limit") {
        let compiler = Compiler::find().expect("the fake compiler");
        let error = compiler.compile(&copying()).unwrap_err();
        assert!(
            error.message.contains("did not finish within 1 s"),
            "{error}"
        );
        assert!(error.message.contains("RCANNL_CC_TIMEOUT"), "{error}");
        assert!(error.message.contains("fake-cc"), "{error}");
        // The process the compiler started is gone too (or only waits to be reaped). A kill
        // is delivered asynchronously: on a loaded machine the child may still be on its way
        // out for a moment, so its state is watched for a while before it counts as alive.
        let pid = std::env::var("FAKE_CC_PID_FILE").unwrap();
        let pid = std::fs::read_to_string(pid).unwrap();
        let stat_path = format!("/proc/{}/stat", pid.trim());
        let mut last = String::new();
        let ended = (0..200).any(|_| {
            let Ok(stat) = std::fs::read_to_string(&stat_path) else {
                return true;
            };
            let state = stat.rsplit(") ").next().unwrap().chars().next();
            last = stat;
            if state == Some('Z') {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            false
        });
        assert!(ended, "the compiler's child still runs: {last}");
        return;
    }
    let tools = Folder::new("hanging-cc");
    let cache = Folder::new("hanging-cache");
    let pid_file = tools.path().join("pid");
    let cc = fake_compiler(
        tools.path(),
        "sleep 30 & echo $! > \"$FAKE_CC_PID_FILE\"; wait",
    );
    let output = run_child(
        "a_hanging_compiler_is_killed_after_the_time_limit",
        &[
            ("CC", Some(cc.as_os_str())),
            ("RCANNL_CACHE_DIR", Some(cache.path().as_os_str())),
            ("RCANNL_CC_TIMEOUT", Some(OsStr::new("1"))),
            ("FAKE_CC_PID_FILE", Some(pid_file.as_os_str())),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(files_in(cache.path()), Vec::<String>::new());
}

#[test]
fn a_compiler_that_hangs_when_asked_its_version_is_no_compiler() {
    if in_child("a_compiler_that_hangs_when_asked_its_version_is_no_compiler") {
        assert_eq!(default_backend().name(), "interpreter");
        return;
    }
    let tools = Folder::new("mute-cc");
    let cc = script(tools.path(), "mute-cc", "sleep 30");
    let output = run_child(
        "a_compiler_that_hangs_when_asked_its_version_is_no_compiler",
        &[
            ("CC", Some(cc.as_os_str())),
            ("RCANNL_CC_TIMEOUT", Some(OsStr::new("1"))),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("did not finish within 1 s"), "{stderr}");
    assert!(stderr.contains("mute-cc --version"), "{stderr}");
}

#[test]
fn an_invalid_time_limit_is_ignored_after_a_warning() {
    if in_child("an_invalid_time_limit_is_ignored_after_a_warning") {
        return compile_from_environment();
    }
    let cache = Folder::new("invalid-timeout");
    for limit in ["abc", "0", "-5", "inf", "NaN"] {
        let output = run_child(
            "an_invalid_time_limit_is_ignored_after_a_warning",
            &[
                ("RCANNL_CC_TIMEOUT", Some(OsStr::new(limit))),
                ("RCANNL_CACHE_DIR", Some(cache.path().as_os_str())),
            ],
            None,
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{limit:?}: {stderr}");
        assert_eq!(
            stderr.matches("RCANNL_CC_TIMEOUT").count(),
            1,
            "{limit:?}: {stderr}"
        );
    }
}

/// `t_k = k·t_0` over the first `64 + k` cells for `k` in `1..=outputs`, each its own top-level
/// loop (of its own range, so that no two merge): a long source of many small kernels.
fn many_kernels(outputs: u32) -> Routine {
    let cells = |k: u32| 64 + k as usize;
    let mut nodes = vec![node(0, &[cells(outputs)])];
    let mut body = Vec::new();
    for k in 1..=outputs {
        nodes.push(node(k, &[cells(k)]));
        let at = Index::var(LoopVar(k), 0);
        body.push(Stmt::For {
            var: LoopVar(k),
            range: cells(k),
            body: vec![Stmt::Set {
                node: NodeId(k),
                index: vec![at.clone()],
                value: Scalar::Binop(
                    Binop::Mul,
                    Box::new(Scalar::Get(NodeId(0), vec![at])),
                    Box::new(Scalar::Const(f64::from(k))),
                ),
            }],
        });
    }
    Routine {
        name: "many".to_owned(),
        nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
        statics: Default::default(),
        body,
    }
}

#[test]
fn a_long_source_is_compiled_in_parts_at_once_and_leaves_only_its_entry() {
    const NAME: &str = "a_long_source_is_compiled_in_parts_at_once_and_leaves_only_its_entry";
    let outputs = 300;
    if in_child(NAME) {
        let routine = many_kernels(outputs);
        let compiled = Compiler::find()
            .expect("a C compiler")
            .compile(&routine)
            .unwrap();
        assert!(
            compiled.source.len() > 48 * 1024,
            "{}",
            compiled.source.len()
        );
        let mut buffers = Buffers::for_routine(&routine).unwrap();
        buffers
            .set_values(NodeId(0), &range(64 + outputs as usize))
            .unwrap();
        compiled.run(&mut buffers, &HashMap::new()).unwrap();
        for k in 1..=outputs {
            let want: Vec<f64> = range(64 + k as usize)
                .iter()
                .map(|x| x * f64::from(k))
                .collect();
            assert_eq!(buffers.values(NodeId(k)), want, "t{k}");
        }
        // What the parent checks the compiler's runs against.
        println!("threads={}", rcannl_backends::cc::kernel_threads());
        return;
    }
    let tools = Folder::new("logging-cc");
    let cache = Folder::new("parts-cache");
    let log = tools.path().join("runs");
    let cc = script(
        tools.path(),
        "logging-cc",
        &format!("echo \"$*\" >> '{}'\nexec cc \"$@\"", log.display()),
    );
    let output = run_child(
        NAME,
        &[
            ("CC", Some(cc.as_os_str())),
            ("RCANNL_CACHE_DIR", Some(cache.path().as_os_str())),
            ("RAYON_NUM_THREADS", None),
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let threads: usize = stdout
        .split("threads=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the child prints its threads");
    let runs = std::fs::read_to_string(&log).unwrap();
    let builds: Vec<&str> = runs.lines().filter(|l| l.contains(" -o ")).collect();
    let units = builds.iter().filter(|l| l.contains(" -c ")).count();
    if threads > 1 {
        // One translation unit per thread, then one link of their objects.
        assert_eq!(units, threads, "{runs}");
        assert_eq!(builds.len(), threads + 1, "{runs}");
        assert!(builds.last().unwrap().contains("-shared"), "{runs}");
    } else {
        assert_eq!((units, builds.len()), (0, 1), "{runs}");
    }
    // Only the entry's library, record and source remain.
    let files = files_in(cache.path());
    assert_eq!(files.len(), 3, "{files:?}");
    for suffix in [".so", ".sha256", ".c"] {
        assert_eq!(
            files.iter().filter(|f| f.ends_with(suffix)).count(),
            1,
            "{files:?}"
        );
    }
}

/// Makes a FIFO at `path`.
fn fifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let made = unsafe { libc::mkfifo(path.as_ptr(), 0o600) };
    assert_eq!(made, 0, "{}", std::io::Error::last_os_error());
}

/// What `work` returns, run on a thread of its own; a panic if it has not finished within
/// `seconds` seconds, so that a test of something that would block fails instead of hanging.
fn within<T: Send + 'static>(seconds: u64, work: impl FnOnce() -> T + Send + 'static) -> T {
    use std::sync::mpsc::RecvTimeoutError;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => panic!("still blocked after {seconds} s"),
        Err(RecvTimeoutError::Disconnected) => panic!("the work panicked"),
    }
}

#[test]
fn a_fifo_at_an_entrys_name_is_replaced_not_waited_on() {
    let [library] = &copying_library_names()[..] else {
        panic!("one library")
    };
    let stem = library.strip_suffix(".so").unwrap();
    for suffixes in [&[".so"][..], &[".sha256"], &[".c"], &[".so", ".sha256"]] {
        let folder = Folder::new(&format!("fifo{}", suffixes.concat()));
        for suffix in suffixes {
            fifo(&folder.path().join(format!("{stem}{suffix}")));
        }
        let compiler = compiler_in(folder.path());
        let first = within(120, {
            let compiler = compiler.clone();
            move || compile_and_run(&compiler, &copying())
        });
        assert_eq!(first, (range(5), false), "{suffixes:?}");
        assert_eq!(
            compile_and_run(&compiler, &copying()),
            (range(5), true),
            "{suffixes:?}: the entry is kept in the FIFO's place"
        );
    }
}

#[test]
fn a_fifo_at_a_kept_files_name_is_replaced_not_waited_on() {
    use rcannl_backends::cache;
    let name = format!("gpu_{}.wgsl", cache::key(&[b"a program"]));
    for suffix in ["", ".sha256"] {
        let folder = Folder::new(&format!("fifo-kept{suffix}"));
        let path = folder.path().to_owned();
        if suffix.is_empty() {
            fifo(&path.join(&name));
        } else {
            // A record is read only after the bytes it records.
            std::fs::write(path.join(&name), b"bytes").unwrap();
            fifo(&path.join(format!("{name}{suffix}")));
        }
        let read = within(60, {
            let (path, name) = (path.clone(), name.clone());
            move || cache::read_kept(&path, &name)
        });
        assert_eq!(read, None, "{suffix:?}");
        cache::keep(&path, &name, b"kept").unwrap();
        assert_eq!(
            cache::read_kept(&path, &name).as_deref(),
            Some(&b"kept"[..]),
            "{suffix:?}"
        );
    }
}

#[test]
fn a_cached_library_that_matches_its_record_but_does_not_load_is_rebuilt() {
    let folder = Folder::new("unloadable");
    let compiler = compiler_in(folder.path());
    let expected = compile_and_run(&compiler, &copying()).0;
    let [name] = &libraries_in(folder.path())[..] else {
        panic!("one library")
    };
    let library = std::fs::read(folder.path().join(name)).unwrap();
    let mut garbled = library.clone();
    for byte in &mut garbled[..16] {
        *byte ^= 0x5a;
    }
    let damages = [
        ("not a library", b"not a library".to_vec()),
        ("garbled header", garbled),
    ];
    for (what, bytes) in damages {
        // Damaged with its record to match, as a disk that garbles both, or a faulty copy, may.
        plant_with_record(folder.path(), name, &bytes);
        assert_eq!(
            compile_and_run(&compiler, &copying()),
            (expected.clone(), false),
            "{what}"
        );
        assert_eq!(
            compile_and_run(&compiler, &copying()),
            (expected.clone(), true),
            "{what}: the rebuilt library is kept"
        );
    }
}

/// A tmpfs mounted `noexec` at a fresh folder (mode 0700), unmounted when dropped.
struct NoexecMount(Folder);

impl NoexecMount {
    /// The mount, or `None` after saying on standard error (past the test harness's capture)
    /// why it could not be made: mounting needs privileges a test may not have.
    fn new(name: &str) -> Option<NoexecMount> {
        use std::io::Write;
        let folder = Folder::new(name);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "noexec,mode=0700,size=64m", "tmpfs"])
            .arg(folder.path())
            .output();
        let why = match mounted {
            Ok(output) if output.status.success() => return Some(NoexecMount(folder)),
            Ok(output) => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        };
        let _ = writeln!(
            std::io::stderr(),
            "skipped: a noexec tmpfs cannot be mounted here ({why})"
        );
        None
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for NoexecMount {
    fn drop(&mut self) {
        // Lazily, in case a process still holds it: it goes when they end.
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

#[test]
fn a_cache_folder_on_a_noexec_mount_falls_back_after_one_warning() {
    const NAME: &str = "a_cache_folder_on_a_noexec_mount_falls_back_after_one_warning";
    if in_child(NAME) {
        let compiler = Compiler::find().expect("a C compiler");
        assert_eq!(compile_and_run(&compiler, &copying()), (range(5), false));
        let negated = compile_and_run(&compiler, &negating());
        assert_eq!(negated.0, range(5).iter().map(|x| -x).collect::<Vec<_>>());
        return;
    }
    let Some(mount) = NoexecMount::new("noexec-cache") else {
        return;
    };
    let cache = mount.path().join("cache");
    let output = run_child(NAME, &[("RCANNL_CACHE_DIR", Some(cache.as_os_str()))], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr.matches("rcannl: ").count(), 1, "{stderr}");
    assert!(
        stderr.contains("noexec") && stderr.contains(&cache.display().to_string()),
        "{stderr}"
    );
    assert_eq!(
        files_in(&cache),
        Vec::<String>::new(),
        "nothing is kept where it cannot load"
    );
}

#[test]
fn without_a_folder_that_may_run_libraries_the_default_is_the_interpreter() {
    const NAME: &str = "without_a_folder_that_may_run_libraries_the_default_is_the_interpreter";
    if in_child(NAME) {
        let error = Compiler::find()
            .expect("a C compiler")
            .compile(&copying())
            .unwrap_err();
        let temp = std::env::temp_dir();
        assert!(
            error.message.contains("noexec") && error.message.contains(&temp.display().to_string()),
            "{error}"
        );
        assert_eq!(default_backend().name(), "interpreter");
        return;
    }
    let Some(mount) = NoexecMount::new("noexec-everywhere") else {
        return;
    };
    let (cache, temp) = (mount.path().join("cache"), mount.path().join("tmp"));
    std::fs::create_dir(&temp).unwrap();
    let output = run_child(
        NAME,
        &[
            ("RCANNL_CACHE_DIR", Some(cache.as_os_str())),
            ("TMPDIR", Some(temp.as_os_str())),
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("rcannl: "))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("noexec") && w.contains("interpreter")),
        "{stderr}"
    );
}
