//! The cache's size cap: stores evict the least recently used entries beyond it, loads count as
//! uses, and the folder can be listed and cleaned; temporary files of live builds and files that
//! are not the cache's are left alone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::common::*;
use rcannl_backends::cache;
use rcannl_backends::cc::Compiler;
use rcannl_ir::{Binop, Routine, Unop};

/// Five routines of one shape and five different kernels, so five entries of about one size.
fn routines() -> Vec<Routine> {
    [
        Unop::Identity,
        Unop::Neg,
        Unop::Relu,
        Unop::Recip,
        Unop::Trunc,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, op)| {
        let assignment = unary(
            true,
            Binop::Arg2,
            1,
            op,
            0,
            projections(&[5], (&[5], vec![it(0)]), vec![(&[5], vec![it(0)])]),
        );
        Routine::lower(
            &format!("r{i}"),
            &assignment,
            vec![node(0, &[5]), node(1, &[5])],
        )
        .unwrap()
    })
    .collect()
}

/// The bytes of every file in `dir`.
fn bytes_in(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum()
}

/// Whether compiling `routine` again finds it in the cache (and so uses it).
fn cached(compiler: &Compiler, routine: &Routine) -> bool {
    compiler.compile(routine).unwrap().from_cache
}

/// Lets the clock move on, so that uses in a row have distinct times.
fn tick() {
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn stores_keep_the_folder_under_its_cap_evicting_the_least_recently_used() {
    let routines = routines();
    // Each entry's size, measured in a folder without a bound to speak of.
    let measure = Folder::new("cache-measure");
    let unbounded = Compiler::find()
        .expect("a C compiler")
        .with_cache_dir(measure.path())
        .with_cache_max_bytes(u64::MAX);
    let mut sizes = Vec::new();
    for routine in &routines {
        let before = bytes_in(measure.path());
        assert!(!cached(&unbounded, routine));
        sizes.push(bytes_in(measure.path()) - before);
    }
    sizes.sort_unstable();
    // Any three entries fit, no four do.
    let cap = sizes[2..].iter().sum::<u64>() + sizes[0] / 2;
    assert!(
        4 * sizes[0] > cap,
        "entries of too different sizes: {sizes:?}"
    );

    let folder = Folder::new("cache-bound");
    let compiler = Compiler::find()
        .expect("a C compiler")
        .with_cache_dir(folder.path())
        .with_cache_max_bytes(cap);
    for routine in &routines[..3] {
        assert!(!cached(&compiler, routine));
        tick();
    }
    // Using r0 makes r1 the least recently used.
    assert!(cached(&compiler, &routines[0]));
    tick();
    for routine in &routines[3..] {
        assert!(!cached(&compiler, routine));
        assert!(bytes_in(folder.path()) <= cap, "over the cap of {cap}");
        tick();
    }
    let info = cache::info(folder.path()).unwrap();
    assert_eq!(info.entries, 3);
    assert_eq!(info.bytes, bytes_in(folder.path()));
    assert!(info.bytes <= cap);
    assert_eq!(info.folder, folder.path());
    // r4, r3 and r0 were used last; r1 and r2 were evicted, in that order.
    for i in [4, 3, 0] {
        assert!(cached(&compiler, &routines[i]), "r{i} was evicted");
    }
    assert!(!cached(&compiler, &routines[2]), "r2 was kept");
}

/// A key of the cache's form: 64 hexadecimal digits.
const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Writes `bytes` at `path` and dates the file `hours` hours back.
fn write_aged(path: &Path, bytes: &[u8], hours: u64) {
    std::fs::write(path, bytes).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(hours * 3600))
        .unwrap();
}

/// Names a user may give files in a folder that also holds the cache: some seen deleted by
/// it, the others one step from the names it writes (another extension, a shorter or
/// upper-case key, a suffix that is not a build's).
fn users_names() -> Vec<String> {
    let mut names: Vec<String> = [
        "ubuntu.iso.partial",
        "rc_results.csv.bak",
        "gpu_benchmarks.md",
        "gpu_train.py",
        "rc_local.c",
        "rc_local.so",
        "rc_local.sha256",
        "gpu_notes.sha256",
        "gpu_notes.1-2.partial",
        "gpu_wgpu_pipeline_cache_vulkan_x_1.bin",
    ]
    .map(str::to_owned)
    .to_vec();
    names.extend([
        format!("rc_{KEY}.so.bak"),
        format!("rc_{KEY}.txt"),
        format!("rc_{}.so", &KEY[1..]),
        format!("rc_{KEY}0.so"),
        format!("rc_{}.so", KEY.to_uppercase()),
        format!("rc_{KEY}.12-3.so.partial.bak"),
        format!("rc_{KEY}.x-3.so.partial"),
        format!("rc_{KEY}.12-3.txt"),
        format!("rc_{KEY}.12-3.so.x.o"),
        format!("gpu_{KEY}.wgsl.orig"),
        format!("gpu_{KEY}.txt"),
        format!("gpu_{KEY}.wgsl.12-3.tmp"),
        format!("gpu_{KEY}.wgsl.12.partial"),
    ]);
    names
}

#[test]
fn files_that_are_not_the_caches_survive_stores_eviction_and_clean() {
    let folder = Folder::new("cache-shared-with-files");
    let at = |name: &str| folder.path().join(name);
    let names = users_names();
    for name in &names {
        write_aged(&at(name), name.as_bytes(), 2);
    }
    // What dead builds of the cache itself leave, as old: these go.
    let leftovers = [
        format!("rc_{KEY}.12-3.c"),
        format!("rc_{KEY}.12-3.so.partial"),
        format!("rc_{KEY}.12-3.sha256.partial"),
        format!("rc_{KEY}.12-3.so.0.c"),
        format!("rc_{KEY}.12-3.so.11.o"),
        format!("gpu_{KEY}.wgsl.12-3.partial"),
        format!("gpu_{KEY}.wgsl.12-3.sha256.partial"),
    ];
    for name in &leftovers {
        write_aged(&at(name), b"left over", 2);
    }
    // Stores under a cap of nothing: each evicts every other entry and every leftover.
    let compiler = Compiler::find()
        .expect("a C compiler")
        .with_cache_dir(folder.path())
        .with_cache_max_bytes(0);
    for routine in &routines()[..2] {
        assert!(!cached(&compiler, routine));
    }
    let kept = format!("gpu_{KEY}.wgsl");
    cache::keep(folder.path(), &kept, b"kept bytes").unwrap();
    for name in &leftovers {
        assert!(!at(name).exists(), "a dead build's {name} stays");
    }
    // The last library and the kept file.
    assert_eq!(cache::info(folder.path()).unwrap().entries, 2);
    assert_eq!(cache::evict(folder.path(), 0).unwrap().entries, 2);
    compiler.compile(&routines()[0]).unwrap();
    assert_eq!(cache::clean(folder.path()).unwrap().entries, 1);
    assert_eq!(cache::info(folder.path()).unwrap().entries, 0);
    for name in &names {
        assert_eq!(
            std::fs::read(at(name)).ok().as_deref(),
            Some(name.as_bytes()),
            "{name} was not the cache's"
        );
    }
    assert_eq!(
        std::fs::read_dir(folder.path()).unwrap().count(),
        names.len(),
        "only the user's files remain"
    );
}

#[test]
fn clean_refuses_a_folder_the_cache_would_not_use() {
    for mode in [0o1777, 0o777, 0o775] {
        let folder = Folder::new(&format!("cache-clean-shared-{mode:o}"));
        let entry = [format!("rc_{KEY}.so"), format!("rc_{KEY}.sha256")];
        for name in &entry {
            std::fs::write(folder.path().join(name), b"someone's").unwrap();
        }
        std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        for (what, result) in [
            ("clean", cache::clean(folder.path())),
            ("evict", cache::evict(folder.path(), 0)),
        ] {
            let error = result.unwrap_err();
            assert!(
                error.contains(&folder.path().display().to_string())
                    && error.contains("can be written by other users")
                    && error.contains("not cleaned"),
                "{what}, mode {mode:o}: {error}"
            );
        }
        for name in &entry {
            assert!(folder.path().join(name).exists(), "mode {mode:o}: {name}");
        }
    }
}

#[test]
fn clean_and_evict_remove_entries_and_dead_builds_leftovers_only() {
    let folder = Folder::new("cache-clean");
    let compiler = Compiler::find()
        .expect("a C compiler")
        .with_cache_dir(folder.path());
    let routines = routines();
    for routine in &routines[..2] {
        assert!(!cached(&compiler, routine));
        tick();
    }
    let program = format!("gpu_{KEY}.wgsl");
    cache::keep(folder.path(), &program, b"kept bytes").unwrap();
    let at = |name: &str| folder.path().join(name);
    let (dead, live) = (
        format!("rc_{KEY}.123-0.so.partial"),
        format!("rc_{KEY}.456-0.c"),
    );
    write_aged(&at(&dead), b"partial", 2);
    write_aged(&at(&live), b"partial", 0);
    std::fs::write(at("notes.txt"), b"not the cache's").unwrap();

    let info = cache::info(folder.path()).unwrap();
    assert_eq!(info.entries, 3, "two libraries and a kept file");
    let others = [dead.as_str(), &live, "notes.txt"]
        .map(|name| std::fs::metadata(at(name)).unwrap().len())
        .iter()
        .sum::<u64>();
    assert_eq!(info.bytes, bytes_in(folder.path()) - others);

    // Down to one entry's size: the newest, the kept file, stays.
    let kept = std::fs::metadata(at(&program)).unwrap().len()
        + std::fs::metadata(at(&format!("{program}.sha256")))
            .unwrap()
            .len();
    let evicted = cache::evict(folder.path(), kept).unwrap();
    assert_eq!(evicted.entries, 2);
    assert!(!at(&dead).exists(), "a dead build's file stays");
    assert!(at(&live).exists(), "a live build's file is removed");
    assert_eq!(cache::info(folder.path()).unwrap().bytes, kept);
    assert_eq!(
        cache::read_kept(folder.path(), &program).as_deref(),
        Some(&b"kept bytes"[..])
    );

    let cleaned = cache::clean(folder.path()).unwrap();
    assert_eq!((cleaned.entries, cleaned.bytes), (1, kept));
    let info = cache::info(folder.path()).unwrap();
    assert_eq!((info.entries, info.bytes), (0, 0));
    assert!(at("notes.txt").exists() && at(&live).exists());
}

#[test]
fn a_missing_folder_holds_nothing() {
    let folder = std::env::temp_dir().join(format!("rcannl-cache-none-{}", std::process::id()));
    let info = cache::info(&folder).unwrap();
    assert_eq!((info.entries, info.bytes), (0, 0));
    assert_eq!(cache::clean(&folder).unwrap(), cache::Removed::default());
    assert!(!folder.exists(), "nothing is created to be listed");
    // Nor through a symbolic link to nothing.
    let base = Folder::new("cache-dangling");
    let link = base.path().join("cache");
    std::os::unix::fs::symlink(base.path().join("gone"), &link).unwrap();
    assert_eq!(cache::clean(&link).unwrap(), cache::Removed::default());
    assert!(!base.path().join("gone").exists());
}
