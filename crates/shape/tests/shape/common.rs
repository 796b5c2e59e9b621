//! Helpers shared by the solver's property tests.

use proptest::prelude::ProptestConfig;
use proptest::test_runner::RngSeed;
use rcannl_shape::term::{Basis, Dim};

/// Sizes of generated axes: a few distinct primes, and one named basis to catch basis mix-ups.
pub fn pool_dim(index: u32) -> Dim {
    match index % 4 {
        0 => Dim::size(2),
        1 => Dim::size(3),
        2 => Dim::size(5),
        _ => Dim::Atom {
            size: 3,
            basis: Basis::Named("rgb".into()),
        },
    }
}

/// Cases run in a forked child with a time limit: a solver stuck in a loop is a failure to shrink
/// ("Timed out waiting for child process"), not a hung test run. The solver's step budget is
/// fixed when a call starts, but a case must not even come near it. A case takes well under a
/// millisecond; the limit leaves ample room for a loaded machine and for starting the child.
/// Failures are not persisted: a failure message carries its shrunk case.
///
/// The cases are drawn from a fixed seed, so that a run is reproducible; explore beyond them with
/// `PROPTEST_RNG_SEED=<n>` (and `PROPTEST_CASES=<n>`), as every change to the solver should.
pub fn config(cases: u32) -> ProptestConfig {
    let defaults = ProptestConfig::default();
    let rng_seed = match defaults.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x5eed_0001),
        chosen => chosen,
    };
    ProptestConfig {
        cases,
        fork: true,
        timeout: 10_000,
        failure_persistence: None,
        rng_seed,
        ..defaults
    }
}
