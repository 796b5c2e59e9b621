//! Execution backends for rcannl.
//!
//! `interpreter` runs the loop IR of `rcannl-ir` directly: the reference every other backend is
//! differential-tested against. The `Backend` trait, the C backend (code generation, compilation,
//! caching, loading, threads) and GEMM dispatch are to come. This crate reads only the loop IR.

pub mod buffers;
pub mod cc;
pub mod interpreter;

pub use buffers::Buffers;
