//! A CI-sized budget of differential fuzzing: random routines and random graphs must give the
//! interpreter's results on the C backend, for the compiler and flags `$CC` and `$RCANNL_CFLAGS`
//! choose (`.ci/matrix` runs this for every target and compiler). `rcannl-fuzz` runs the same
//! checks at any budget.

use rcannl_backends::cc::Compiler;
use rcannl_fuzz::{graphs, routines};

fn compiler() -> Compiler {
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

#[test]
fn random_routines_agree() {
    let compiler = compiler();
    let seeds: Vec<u64> = (0..300).collect();
    for batch in seeds.chunks(100) {
        if let Err(mismatch) = routines::check(&compiler, batch) {
            panic!("{mismatch}");
        }
    }
}

#[test]
fn random_graphs_agree() {
    let compiler = compiler();
    for seed in 0..40 {
        if let Err(mismatch) = graphs::check(&compiler, seed) {
            panic!("{mismatch}");
        }
    }
}
