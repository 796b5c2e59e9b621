//! `rcannl cache info` and `rcannl cache clean`: the folder `$RCANNL_CACHE_DIR` names, filled by
//! a run on the C backend, listed, cleaned down to the cap and emptied; the cap from
//! `$RCANNL_CACHE_MAX_BYTES`; a folder that cannot be read is an `io` error.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{fresh_dir, stderr, stdout};
use serde_json::{Value, json};

/// Runs the binary with the cache in `folder` and the variables `env` set.
fn rcannl_with(folder: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .env("RCANNL_CACHE_DIR", folder)
        .env_remove("RCANNL_CACHE_MAX_BYTES")
        .envs(env.iter().copied())
        .output()
        .expect("the rcannl binary runs")
}

/// The one line of JSON a successful command printed.
fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}{}",
        stdout(output),
        stderr(output)
    );
    serde_json::from_str(&stdout(output)).expect("one JSON value")
}

/// The bytes of the files in `folder` whose names start with `rc_`: the C backend's entries.
fn library_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder)
        .unwrap()
        .map(Result::unwrap)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("rc_"))
        .map(|entry| entry.metadata().unwrap().len())
        .sum()
}

/// Runs a matrix product on the C backend with `folder` as the cache, which keeps its library
/// there.
fn compile_a_product(folder: &Path) {
    let args = [
        "einsum",
        "ij;jk=>ik",
        "range:2,3",
        "range:3,2",
        "--backend",
        "cc",
    ];
    let run = rcannl_with(folder, &[], &args);
    assert!(run.status.success(), "{}", stderr(&run));
}

#[test]
fn info_lists_what_a_run_kept_and_clean_removes_it() {
    let folder = fresh_dir("cache-info").join("cache");
    let empty = json_of(&rcannl_with(&folder, &[], &["cache", "info", "--json"]));
    assert_eq!(
        empty,
        json!({"folder": folder.to_str().unwrap(), "entries": 0, "bytes": 0, "cap": 512 << 20})
    );
    compile_a_product(&folder);
    let filled = json_of(&rcannl_with(&folder, &[], &["cache", "info", "--json"]));
    let entries = filled["entries"].as_u64().unwrap();
    assert!(entries >= 1, "{filled}");
    assert_eq!(filled["bytes"], library_bytes(&folder));

    let text = stdout(&rcannl_with(&folder, &[], &["cache", "info"]));
    assert!(
        text.contains(&format!("entries: {entries}\n"))
            && text.contains("cap:     512.0 MiB (536870912 bytes)"),
        "{text}"
    );

    // Under the default cap nothing goes; under a cap of 0 everything does.
    let to_cap = ["cache", "clean", "--to-cap", "--json"];
    let none = json_of(&rcannl_with(&folder, &[], &to_cap));
    assert_eq!(none["removed_entries"], 0);
    let all = json_of(&rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "0")],
        &to_cap,
    ));
    assert_eq!(all["removed_entries"], entries);
    assert_eq!(all["removed_bytes"], filled["bytes"]);
    assert_eq!(library_bytes(&folder), 0);

    compile_a_product(&folder);
    let cleaned = rcannl_with(&folder, &[], &["cache", "clean"]);
    let line = stdout(&cleaned);
    assert!(
        cleaned.status.success()
            && line.starts_with(&format!("removed {entries} entr"))
            && line.ends_with(&format!("from {}\n", folder.display())),
        "{line}"
    );
    assert_eq!(library_bytes(&folder), 0);
}

#[test]
fn the_cap_comes_from_the_environment() {
    let folder = fresh_dir("cache-cap");
    let capped = json_of(&rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "200M")],
        &["cache", "info", "--json"],
    ));
    assert_eq!(capped["cap"], 200 << 20);
    let invalid = rcannl_with(
        &folder,
        &[("RCANNL_CACHE_MAX_BYTES", "lots")],
        &["cache", "info", "--json"],
    );
    assert_eq!(json_of(&invalid)["cap"], 512 << 20);
    assert!(
        stderr(&invalid).contains("$RCANNL_CACHE_MAX_BYTES is \"lots\", not a size"),
        "{}",
        stderr(&invalid)
    );
}

#[test]
fn a_cache_folder_that_cannot_be_read_is_an_io_error() {
    let file = fresh_dir("cache-unreadable").join("a file");
    std::fs::write(&file, b"not a folder").unwrap();
    for args in [&["cache", "info"][..], &["cache", "clean"]] {
        let output = rcannl_with(&file, &[], args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.starts_with(&format!(
                "error: cannot read the cache folder {}: ",
                file.display()
            )),
            "{args:?}: {message}"
        );
    }
    let output = rcannl_with(&file, &[], &["cache", "info", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let error: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(error["error"]["kind"], "io");
}

/// Writes `path` with its own name as its bytes, dated two hours back: past the age at which
/// the cache takes a file of its own for a dead build's leftover.
fn write_old(path: &Path) {
    std::fs::write(path, path.file_name().unwrap().as_encoded_bytes()).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
    file.set_modified(then).unwrap();
}

#[test]
fn clean_leaves_the_files_of_a_folder_it_shares_alone() {
    let folder = fresh_dir("cache-shared");
    let theirs = [
        "gpu_benchmarks.md",
        "gpu_train.py",
        "rc_local.c",
        "rc_results.csv.bak",
        "ubuntu.iso.partial",
    ];
    for name in theirs {
        write_old(&folder.join(name));
    }
    compile_a_product(&folder);
    for args in [&["cache", "clean", "--to-cap"][..], &["cache", "clean"]] {
        let output = rcannl_with(&folder, &[("RCANNL_CACHE_MAX_BYTES", "0")], args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    }
    for name in theirs {
        assert_eq!(
            std::fs::read(folder.join(name)).ok().as_deref(),
            Some(name.as_bytes()),
            "{name} was removed"
        );
    }
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), theirs.len());
}

#[test]
fn clean_refuses_a_folder_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let folder = fresh_dir("cache-open");
    compile_a_product(&folder);
    let before = std::fs::read_dir(&folder).unwrap().count();
    assert!(before >= 2, "an entry is kept");
    // As `/tmp` is: anyone may write, only owners rename.
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();
    for args in [&["cache", "clean"][..], &["cache", "clean", "--to-cap"]] {
        let output = rcannl_with(&folder, &[("RCANNL_CACHE_MAX_BYTES", "0")], args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.contains(&folder.display().to_string())
                && message.contains("can be written by other users")
                && message.contains("not cleaned"),
            "{args:?}: {message}"
        );
    }
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), before);
}
