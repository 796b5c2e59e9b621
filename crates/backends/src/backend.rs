//! The `Backend` trait: what turns a routine into something that runs over [`Buffers`]; and the
//! reference interpreter as one.

use std::collections::HashMap;

use rcannl_ir::{Routine, Symbol};

use crate::Buffers;
use crate::error::{CompileError, RunError};
use crate::interpreter::run_routine;

/// A routine ready to run.
pub trait Executable: std::fmt::Debug + Send + Sync {
    /// Runs the routine over `buffers`, with a value for each of its static indices.
    fn run(&self, buffers: &mut Buffers, statics: &HashMap<Symbol, i64>) -> Result<(), RunError>;

    /// The routine this was prepared from.
    fn routine(&self) -> &Routine;

    /// The code the backend generated for the routine, if it generates any.
    fn source(&self) -> Option<&str> {
        None
    }

    /// Waits until the routine runs the code it will keep running, where a backend first runs
    /// code that is quicker to build (the C backend's tiers); the error is that build's.
    fn finish_compiling(&self) -> Result<(), CompileError> {
        Ok(())
    }

    /// Which of a backend's builds runs, where it has several (the C backend's tiers).
    fn tier(&self) -> Option<String> {
        None
    }
}

/// Something that prepares routines to run.
///
/// `Send + Sync`, as its routines are, so that a context holding one can move to another thread
/// or be shared: every backend satisfies it (the interpreter holds nothing, the C backend its
/// settings, its routines their loaded libraries behind `Arc`s, the GPU backend the process's
/// device, whose `wgpu` handles are thread-safe).
pub trait Backend: std::fmt::Debug + Send + Sync {
    /// The backend's short name, for reports and test messages (`interpreter`, `cc`, …).
    fn name(&self) -> &'static str;

    /// What the backend's generated code runs on, for reports (the compiler, its flags and the
    /// instruction set they choose); `None` for a backend that generates no code.
    fn target(&self) -> Option<String> {
        None
    }

    /// Prepares `routine` (optimized or not) to run; an error says why this backend cannot run it.
    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError>;
}

/// The reference interpreter as a backend: nothing to compile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interpreter;

#[derive(Debug)]
struct Interpreted(Routine);

impl Executable for Interpreted {
    fn run(&self, buffers: &mut Buffers, statics: &HashMap<Symbol, i64>) -> Result<(), RunError> {
        run_routine(&self.0, buffers, statics)
    }

    fn routine(&self) -> &Routine {
        &self.0
    }
}

impl Backend for Interpreter {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        Ok(Box::new(Interpreted(routine.clone())))
    }
}
