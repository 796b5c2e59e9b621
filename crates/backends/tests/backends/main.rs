//! The backends crate's integration tests, one module a file, built as one test binary.
//! `backend_choice` and `cache` stay binaries of their own: their tests rerun the binary on
//! themselves by name, with other environment variables, folders and compilers.

mod cache_bound;
mod codegen_rules;
mod conv;
mod empty_axes;
mod fetches_and_precisions;
mod gemm;
mod hoist;
mod interpreter;
mod optimize;
mod trace;
// Shared with backend_choice and cache.
#[path = "../common/mod.rs"]
mod common;
