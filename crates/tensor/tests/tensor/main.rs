//! The tensor crate's integration tests, one module a file, built as one test binary: every test
//! binary links the whole dependency tree (wgpu among it), so one link serves them all.
//!
//! Two stay binaries of their own: `macro_errors` (trybuild compiles the `ui/` cases) and
//! `einsum_suites`, which installs a panic hook, state of the whole process. proptest keeps the
//! regressions of a file here in `tests/proptest-regressions/<file>.txt`.

mod activations;
mod arrays;
mod composed;
mod conv_bases;
mod copies;
mod cpu;
mod custom_ops;
mod data_precision;
mod dependencies;
mod einsum_n;
mod einsum_path;
mod empty_axes;
mod gather;
mod inference;
mod init_schemes;
mod intermediates;
mod layout;
mod macros;
mod memory_modes;
mod messages;
mod micrograd;
mod misuse;
mod nan;
mod npy_files;
mod numpy_einsum;
mod numpy_notation;
mod op_shorthands;
mod path_captures;
mod precision_inference;
mod printing;
mod random;
mod random_histograms;
mod reductions;
mod reshape;
mod set_grad;
mod spec_ops;
mod threads;
mod trace;
mod traced;
mod u16_u64_fp8;
mod update_default_logic;
mod update_logic;
mod update_reductions;
mod update_self_reads;
