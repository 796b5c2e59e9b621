//! The command-line tool's end-to-end tests, one module a file, built as one test binary (every
//! test binary links the whole dependency tree, wgpu among it, so one link serves them all). They
//! run the built `rcannl` binary as a child process.

mod backend_cmd;
mod cache_cmd;
mod captures_cmd;
mod claim_free_unit_cmd;
mod common;
mod conv_bases_cmd;
mod dtypes;
mod einsum_cmd;
mod empty_axes_cmd;
mod explain_cmd;
mod fuzz;
mod hostile_input;
mod numpy_cmd;
mod output_file;
mod parse_cmd;
mod settings_cmd;
mod spec_ops;
