//! Execution backends for rcannl.
//!
//! This crate will own the `Backend` trait, the reference interpreter (the oracle every other backend
//! is differential-tested against), the C backend (code generation, compilation, caching, loading,
//! threads) and GEMM dispatch. It reads only the loop IR of `rcannl-ir`.
