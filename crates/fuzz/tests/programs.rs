//! A CI-sized budget of random API programs, misuse included: no panic, every misuse an error,
//! every success the values a direct evaluation gives. `rcannl-fuzz programs` runs any budget.

use rcannl_backends::cc::Compiler;
use rcannl_fuzz::programs;

#[test]
fn random_programs_hold() {
    let compiler = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"));
    match programs::check(Some(&compiler), 0..400) {
        Ok(tally) => {
            // Every outcome must occur, or the generator has lost its reach.
            assert!(
                tally.agreed > 100 && tally.refused > 20 && tally.state_misuses > 50,
                "{tally:?}"
            );
        }
        Err(mismatch) => panic!("{mismatch}"),
    }
}
