//! The cache's size cap: stores evict the least recently used entries beyond it, loads count as
//! uses, and the folder can be listed and cleaned; temporary files of live builds and files that
//! are not the cache's are left alone.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::*;
use rcannl_backends::cc::{Compiler, cache};
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
    cache::keep(folder.path(), "gpu_program.wgsl", b"kept bytes").unwrap();
    let at = |name: &str| folder.path().join(name);
    let hours_ago = |name: &str, hours: u64| {
        std::fs::write(at(name), b"partial").unwrap();
        let file = std::fs::File::options().write(true).open(at(name)).unwrap();
        let then = SystemTime::now() - Duration::from_secs(hours * 3600);
        file.set_modified(then).unwrap();
    };
    hours_ago("rc_dead.123-0.so.partial", 2);
    hours_ago("rc_live.456-0.c", 0);
    std::fs::write(at("notes.txt"), b"not the cache's").unwrap();

    let info = cache::info(folder.path()).unwrap();
    assert_eq!(info.entries, 3, "two libraries and a kept file");
    let others = ["rc_dead.123-0.so.partial", "rc_live.456-0.c", "notes.txt"]
        .map(|name| std::fs::metadata(at(name)).unwrap().len())
        .iter()
        .sum::<u64>();
    assert_eq!(info.bytes, bytes_in(folder.path()) - others);

    // Down to one entry's size: the newest, the kept file, stays.
    let kept = std::fs::metadata(at("gpu_program.wgsl")).unwrap().len()
        + std::fs::metadata(at("gpu_program.wgsl.sha256"))
            .unwrap()
            .len();
    let evicted = cache::evict(folder.path(), kept).unwrap();
    assert_eq!(evicted.entries, 2);
    assert!(
        !at("rc_dead.123-0.so.partial").exists(),
        "a dead build's file stays"
    );
    assert!(
        at("rc_live.456-0.c").exists(),
        "a live build's file is removed"
    );
    assert_eq!(cache::info(folder.path()).unwrap().bytes, kept);
    assert_eq!(
        cache::read_kept(folder.path(), "gpu_program.wgsl").as_deref(),
        Some(&b"kept bytes"[..])
    );

    let cleaned = cache::clean(folder.path()).unwrap();
    assert_eq!((cleaned.entries, cleaned.bytes), (1, kept));
    let info = cache::info(folder.path()).unwrap();
    assert_eq!((info.entries, info.bytes), (0, 0));
    assert!(at("notes.txt").exists() && at("rc_live.456-0.c").exists());
}

#[test]
fn a_missing_folder_holds_nothing() {
    let folder = std::env::temp_dir().join(format!("rcannl-cache-none-{}", std::process::id()));
    let info = cache::info(&folder).unwrap();
    assert_eq!((info.entries, info.bytes), (0, 0));
    assert_eq!(cache::clean(&folder).unwrap(), cache::Removed::default());
    assert!(!folder.exists(), "nothing is created to be listed");
}
