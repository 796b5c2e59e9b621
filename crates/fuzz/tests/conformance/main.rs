//! The conformance suite: each case written once over a backend, and instantiated by
//! `conformance!` as one test per backend — `…::interpreter`, `…::cc` and `…::gpu` — so that every
//! backend meets the same cases (`cargo test -p rcannl-fuzz --test conformance ::gpu` runs the
//! GPU's). A case compares what its backend gives with an oracle written here (a naive
//! evaluator, a closed form, finite differences) or with the interpreter, the oracle of every
//! compiled backend; those comparing with the interpreter are not instantiated for it. `gpu`
//! holds the cases of the GPU backend itself.
//!
//! Without a GPU adapter the GPU tests pass after one line saying the GPU suite did not run,
//! unless `RCANNL_REQUIRE_GPU` is set (see `target`).

#[macro_use]
mod target;

mod blocks;
mod differential;
mod einsum;
mod empty;
mod gather;
mod gpu;
mod gradients;
mod moons;
mod numpy_draws;
mod precisions;
mod random;
mod random_einsum;
mod statics;
// Shared with the nn crate's tests: its models and checks, run here on every backend.
#[path = "../../../nn/tests/support/mod.rs"]
mod support;
