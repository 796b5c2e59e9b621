//! Execution backends for rcannl.
//!
//! Every backend runs routines over `buffers` (typed, aligned node memory) and speaks the same
//! vocabulary: `backend` (the `Backend` and `Executable` traits), `error` (what fails to compile
//! or to run, with kinds), `cache` (the private folder compiled code is kept in). `interpreter`
//! runs the loop IR of `rcannl-ir` directly: the reference every other backend is
//! differential-tested against. `emit` is the one kernel writer every code-generating backend
//! shares, a target language being a `Dialect` of it; `nests` groups a routine's statements into
//! kernels. `cc` writes C, compiles, caches and loads it, splits kernels across threads, and
//! makes the default choice of backend (C when a compiler runs, else the interpreter).
//! `trace` builds routines that log every store as they run (the `trace_stores` setting);
//! `traffic` counts what the compiled backends run, copy and hold; `phases` times the phases of
//! turning a graph into running code. `settings` holds the one list of settings every crate reads
//! (from the command line, the environment and a config file) and the per-module logger. This
//! crate reads only the loop IR.

#![warn(missing_docs)]

pub mod backend;
pub mod buffers;
pub mod cache;
pub mod cc;
pub mod emit;
pub mod error;
pub mod interpreter;
pub mod nests;
pub mod phases;
pub mod settings;
pub mod trace;
pub mod traffic;

pub use backend::{Backend, Executable, Interpreter};
pub use buffers::{Buffers, DeviceCopies};
pub use cc::default_backend;
pub use error::{CompileError, CompileErrorKind, RunError, RunErrorKind};
