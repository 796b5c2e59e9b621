//! Differential fuzzing of the compiled backends against the interpreter, the oracle.
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
//! Routines and graphs run on the C backend (`check`) or on any [`rcannl_backends::Backend`]
//! (`check_on`) under a [`Comparison`]: the precisions the generators may draw (a GPU holds fewer
//! than the host) and the tolerance on float results.
//!
//! `checkpoints` fuzzes checkpoint loading instead: truncated, bit-flipped and spliced copies of
//! a small checkpoint must be refused or load exactly the saved values, never panic.

pub mod checkpoints;
pub mod graphs;
pub mod programs;
pub mod rng;
pub mod routines;
mod state;

use rcannl_ir::{Kind, Precision, Unop};

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

/// The precisions the generators draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precisions {
    /// Every precision a generator knows.
    All,
    /// Those a GPU holds: f32, bf16, fp8, i32, u32, u16, u8, i8 and 128-bit words, f16 where
    /// `f16` says the device has it, i64 and u64 where `int64` does, f64 where `f64` and
    /// `int64` do (`rcannl_gpu::holds` decides the same). A precision it lacks is drawn as f32
    /// (f64, f16) or i32 (i64, u64), so that a seed makes the same case otherwise (the same
    /// draws follow). Integers stay within the 32
    /// bits a GPU computes 32-bit programs in: no integer program takes an exponential, a
    /// reciprocal or a logarithm (which leave 32 bits at 0 and beyond, and which a GPU computes
    /// through f32 where the host computes through f64), the identity instead.
    Gpu { f16: bool, int64: bool, f64: bool },
}

impl Precisions {
    /// The operation a generator that drew `op` for values of `kind` uses.
    pub fn fit_unop(self, op: Unop, kind: Kind) -> Unop {
        match (self, kind, op) {
            (Precisions::Gpu { .. }, Kind::Int, Unop::Exp | Unop::Recip | Unop::Log) => {
                Unop::Identity
            }
            _ => op,
        }
    }

    /// What a generator that drew `precision` uses.
    pub fn fit(self, precision: Precision) -> Precision {
        match (self, precision) {
            (Precisions::All, p) => p,
            (
                Precisions::Gpu { .. },
                p @ (Precision::F32
                | Precision::Bf16
                | Precision::Fp8
                | Precision::I32
                | Precision::U32
                | Precision::U16
                | Precision::U8
                | Precision::I8
                | Precision::Uint4x32),
            ) => p,
            (Precisions::Gpu { f16: true, .. }, Precision::F16) => Precision::F16,
            (Precisions::Gpu { int64: true, .. }, p @ (Precision::I64 | Precision::U64)) => p,
            (
                Precisions::Gpu {
                    int64: true,
                    f64: true,
                    ..
                },
                Precision::F64,
            ) => Precision::F64,
            (Precisions::Gpu { .. }, p) => match p.kind() {
                Kind::Int => Precision::I32,
                _ => Precision::F32,
            },
        }
    }
}

/// Relative tolerances on float results (absolute below a magnitude of 1, see [`close`]), by the
/// precision a result is stored in; integers and random bits always agree exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// f16 and bf16 results (fp8 results to at least a quarter, its step: see
    /// [`Tolerance::of`]).
    pub half: f64,
    /// f32 results.
    pub single: f64,
    /// f64 results.
    pub double: f64,
}

impl Tolerance {
    /// The C backend's: f16 and bf16 to their rounding, f32 to a few roundings (C computes them
    /// in `float` where the interpreter computes in f64 and rounds on the store, and sums some
    /// reductions in another order), f64 nearly exactly.
    pub const HOST: Tolerance = Tolerance {
        half: 1e-2,
        single: 1e-4,
        double: 1e-9,
    };

    /// The relative tolerance on a result stored in `precision`: fp8's 2 significand bits make
    /// one rounding that a sum in another order takes a different way up to a quarter of the
    /// value.
    pub fn of(&self, precision: Precision) -> f64 {
        match precision {
            Precision::Fp8 => self.half.max(0.25),
            Precision::F16 | Precision::Bf16 => self.half,
            Precision::F32 => self.single,
            _ => self.double,
        }
    }
}

/// How a backend's results are compared with the interpreter's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// The precisions the generated cases use.
    pub precisions: Precisions,
    /// How far float results may be from the interpreter's.
    pub tolerance: Tolerance,
}

impl Comparison {
    /// The C backend's comparison: every precision, [`Tolerance::HOST`].
    pub const HOST: Comparison = Comparison {
        precisions: Precisions::All,
        tolerance: Tolerance::HOST,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_integer_programs_take_no_operation_that_leaves_32_bits() {
        let gpu = Precisions::Gpu {
            f16: true,
            int64: true,
            f64: true,
        };
        for op in [Unop::Exp, Unop::Recip, Unop::Log] {
            assert_eq!(gpu.fit_unop(op, Kind::Int), Unop::Identity);
            assert_eq!(gpu.fit_unop(op, Kind::Float), op);
            assert_eq!(Precisions::All.fit_unop(op, Kind::Int), op);
        }
        assert_eq!(gpu.fit_unop(Unop::Neg, Kind::Int), Unop::Neg);
    }

    #[test]
    fn every_precision_fits_itself_unless_a_gpu_lacks_it() {
        for p in Precision::ALL {
            assert_eq!(Precisions::All.fit(p), p);
        }
        // Columns: drawn, fitted for a GPU offering none of f16, int64 and f64, for one offering
        // all three.
        let bare = Precisions::Gpu {
            f16: false,
            int64: false,
            f64: false,
        };
        let full = Precisions::Gpu {
            f16: true,
            int64: true,
            f64: true,
        };
        let expected = [
            (Precision::U8, Precision::U8, Precision::U8),
            (Precision::I8, Precision::I8, Precision::I8),
            (Precision::U16, Precision::U16, Precision::U16),
            (Precision::I32, Precision::I32, Precision::I32),
            (Precision::U32, Precision::U32, Precision::U32),
            (Precision::I64, Precision::I32, Precision::I64),
            (Precision::U64, Precision::I32, Precision::U64),
            (Precision::Fp8, Precision::Fp8, Precision::Fp8),
            (Precision::F16, Precision::F32, Precision::F16),
            (Precision::Bf16, Precision::Bf16, Precision::Bf16),
            (Precision::F32, Precision::F32, Precision::F32),
            (Precision::F64, Precision::F32, Precision::F64),
            (
                Precision::Uint4x32,
                Precision::Uint4x32,
                Precision::Uint4x32,
            ),
        ];
        assert_eq!(expected.len(), Precision::ALL.len());
        for (drawn, without, with) in expected {
            assert_eq!(
                bare.fit(drawn),
                without,
                "{drawn} without f16, int64 and f64"
            );
            assert_eq!(full.fit(drawn), with, "{drawn} with f16, int64 and f64");
        }
    }
}
