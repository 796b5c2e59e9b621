//! Execution backends for rcannl.
//!
//! Every backend runs routines over `buffers` (typed, aligned node memory). `interpreter` runs the
//! loop IR of `rcannl-ir` directly: the reference every other backend is differential-tested
//! against. `cc` generates C, compiles, caches and loads it, and splits kernels across threads.
//! `backend` is the trait both implement and the default choice (C when a compiler runs, else
//! the interpreter). This crate reads only the loop IR.

#![warn(missing_docs)]

pub mod backend;
pub mod buffers;
pub mod cache;
pub mod cc;
pub mod emit;
pub mod error;
pub mod interpreter;
pub mod nests;

pub use backend::{Backend, Executable, Interpreter, default_backend};
pub use buffers::{Buffers, DeviceCopies};
pub use error::{CompileError, CompileErrorKind, RunError, RunErrorKind};
