//! The nn crate's integration tests, one module a file, built as one test binary: every test
//! binary links the whole dependency tree (wgpu among it), so one link serves them all.
//! `mpi_ranks` stays a binary of its own: it has its own `main` and runs itself under mpirun.

mod blocks;
mod checkpoint;
mod checkpoint_ids;
mod cnn;
mod devices;
mod losses;
mod macro_models;
mod metrics;
mod optim;
mod precision;
mod pytorch_conv;
mod pytorch_layers;
mod pytorch_optim;
// Shared with the conformance suite of rcannl-fuzz, which includes it by path too.
#[path = "../support/mod.rs"]
mod support;
mod threads;
mod tiers;
mod train;
mod transformer;
