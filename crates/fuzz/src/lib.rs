//! Differential fuzzing of the C backend against the interpreter, the oracle.
//!
//! `routines` makes random loop programs from assignments (product spaces, broadcasts,
//! reductions, fixed and strided reads, every accumulator, chains of results, most operations,
//! several precisions), optimizes half of them as the tensor layer does, and runs each on both
//! backends. `graphs` makes random tensor graphs (pointwise operations, contractions,
//! transposes, reductions, choices) and compares the loss and every parameter's gradient after
//! backpropagation. `programs` makes random programs against the library API, misuse included,
//! and checks them against a direct evaluation. All are deterministic functions of a seed, so a failure names the seed
//! that reproduces it. The `rcannl-fuzz` binary runs them at any budget, for the compiler and
//! flags `$CC` and `$RCANNL_CFLAGS` choose; `tests/` runs a budget sized for CI.
//!
//! `checkpoints` fuzzes checkpoint loading instead: truncated, bit-flipped and spliced copies of
//! a small checkpoint must be refused or load exactly the saved values, never panic.

pub mod checkpoints;
pub mod graphs;
pub mod programs;
pub mod rng;
pub mod routines;

/// A case whose results differ between the backends, or that one of them failed to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The seed that makes the case again.
    pub seed: u64,
    /// What differs, with the case itself.
    pub message: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed {}: {}", self.seed, self.message)
    }
}

impl std::error::Error for Mismatch {}

/// Whether two float results agree: equal (NaN to NaN), or within `relative` of the larger
/// magnitude (at least 1).
pub fn close(a: f64, b: f64, relative: f64) -> bool {
    (a.is_nan() && b.is_nan())
        || a == b
        || (a - b).abs() <= relative * a.abs().max(b.abs()).max(1.0)
}
