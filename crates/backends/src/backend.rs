//! The `Backend` trait: what turns a routine into something that runs over [`Buffers`]; and the
//! reference interpreter as one.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use rcannl_ir::{Routine, Symbol};

use crate::Buffers;
use crate::error::{CompileError, RunError};
use crate::interpreter::{run_routine, run_routine_traced};
use crate::trace::{self, Sink};

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

    /// Sends the lines of a routine built in its tracing form to `sink` from its next run on
    /// (see [`crate::trace`]); a routine built without tracing has none and ignores it.
    fn trace_into(&mut self, _sink: Sink) {}
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
    /// Where the `trace_stores` setting is on, a backend that can trace builds the routine as
    /// [`Backend::compile_traced`] does, its lines going to standard error.
    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError>;

    /// [`Backend::compile`] of a routine the caller no longer needs, which a backend may keep
    /// instead of a copy (a deep model's routine is large).
    fn compile_owned(&self, routine: Routine) -> Result<Box<dyn Executable>, CompileError> {
        self.compile(&routine)
    }

    /// Prepares `routine` to run in its tracing form, logging every store to `sink` (see
    /// [`crate::trace`]); an error naming the `trace_stores` setting where this backend cannot.
    fn compile_traced(
        &self,
        routine: &Routine,
        _sink: Sink,
    ) -> Result<Box<dyn Executable>, CompileError> {
        Err(trace::unsupported(
            self.name(),
            routine,
            "it has no way to print",
        ))
    }
}

/// The reference interpreter as a backend: nothing to compile.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interpreter;

#[derive(Debug)]
struct Interpreted {
    routine: Routine,
    /// Where the routine is traced: its tracing form, and where its lines go.
    traced: Option<(Routine, Sink)>,
}

impl Executable for Interpreted {
    fn run(&self, buffers: &mut Buffers, statics: &HashMap<Symbol, i64>) -> Result<(), RunError> {
        match &self.traced {
            None => run_routine(&self.routine, buffers, statics),
            Some((form, sink)) => {
                let mut out = sink.open()?;
                run_routine_traced(form, buffers, statics, &mut out)?;
                out.flush().map_err(|e| match sink {
                    Sink::File(path) => trace::unwritable(path, &e),
                    Sink::StandardError => trace::unwritable(Path::new("standard error"), &e),
                })
            }
        }
    }

    fn routine(&self) -> &Routine {
        &self.routine
    }

    fn trace_into(&mut self, sink: Sink) {
        if let Some((_, own)) = &mut self.traced {
            *own = sink;
        }
    }
}

impl Backend for Interpreter {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        self.compile_owned(routine.clone())
    }

    fn compile_owned(&self, routine: Routine) -> Result<Box<dyn Executable>, CompileError> {
        if trace::requested()? {
            return self.compile_traced(&routine, Sink::StandardError);
        }
        Ok(Box::new(Interpreted {
            routine,
            traced: None,
        }))
    }

    fn compile_traced(
        &self,
        routine: &Routine,
        sink: Sink,
    ) -> Result<Box<dyn Executable>, CompileError> {
        Ok(Box::new(Interpreted {
            routine: routine.clone(),
            traced: Some((trace::tracing_form(routine), sink)),
        }))
    }
}
