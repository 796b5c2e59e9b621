//! What every backend reports when a routine cannot be compiled ([`CompileError`]) or cannot run
//! ([`RunError`]), each with a kind a caller can branch on, and the checks of a run's inputs that
//! every backend makes alike.

use std::collections::HashMap;

use rcannl_ir::{NodeId, Routine, Symbol, TensorNode};

use crate::emit::CodegenError;

/// What kind of problem kept a routine from compiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompileErrorKind {
    /// The routine cannot be written in the backend's language; the [`CodegenError`] is the
    /// error's source.
    Codegen,
    /// The toolchain is missing or failed: no C compiler, flags that target another CPU, the
    /// compiler's own errors.
    Toolchain,
    /// The compiled code cannot be kept or loaded: the cache folder, a mount that forbids
    /// running programs, a library without its kernels.
    Load,
    /// The device cannot be found or opened, or failed while compiling.
    Device,
    /// The backend is not part of this build.
    Unavailable,
    /// A setting asks for what the backend cannot do (`trace_stores` on the GPU), or has a value
    /// not of its kind.
    Setting,
}

/// Why a routine cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// What kind of problem it is.
    pub kind: CompileErrorKind,
    /// What failed, in words (what `Display` prints).
    pub message: String,
    /// The code generator's error, when that is what failed.
    codegen: Option<CodegenError>,
}

impl CompileError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: CompileErrorKind, message: impl Into<String>) -> CompileError {
        CompileError {
            kind,
            message: message.into(),
            codegen: None,
        }
    }

    /// The same error, its message prefixed with `context` (`routine r: …`).
    pub fn context(mut self, context: impl std::fmt::Display) -> CompileError {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CompileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.codegen
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<CodegenError> for CompileError {
    fn from(error: CodegenError) -> CompileError {
        CompileError {
            kind: CompileErrorKind::Codegen,
            message: error.message.clone(),
            codegen: Some(error),
        }
    }
}

/// What kind of problem stopped a routine's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// A static index without a value, or with one outside its range.
    Statics,
    /// A buffer missing, of another shape or precision than the routine was compiled for, given
    /// the wrong number of values, or held by another device.
    Buffers,
    /// A position outside its buffer.
    OutOfBounds,
    /// The routine is not well formed: a local read before it is declared, an index of the
    /// wrong number of axes, arithmetic on 128-bit words.
    Malformed,
    /// The device failed: lost, out of memory, a copy that did not complete.
    Device,
    /// A file the run writes (a traced routine's log) cannot be written.
    Io,
}

/// Why a routine cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    /// What kind of problem it is.
    pub kind: RunErrorKind,
    /// What failed, in words (what `Display` prints).
    pub message: String,
}

impl RunError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: RunErrorKind, message: impl Into<String>) -> RunError {
        RunError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RunError {}

/// The value of each of `routine`'s static indices in `statics`, in the routine's order: an
/// error for one without a value or with one outside its range.
pub fn static_values(
    routine: &Routine,
    statics: &HashMap<Symbol, i64>,
) -> Result<Vec<i64>, RunError> {
    routine
        .statics
        .iter()
        .map(|(symbol, &range)| match statics.get(symbol) {
            Some(&value) if (0..range as i64).contains(&value) => Ok(value),
            Some(value) => Err(RunError::new(
                RunErrorKind::Statics,
                format!(
                    "routine {}: {} is {value}, outside 0..{range}",
                    routine.name,
                    routine.static_name(*symbol)
                ),
            )),
            None => Err(RunError::new(
                RunErrorKind::Statics,
                format!(
                    "routine {}: no value given for {}",
                    routine.name,
                    routine.static_name(*symbol)
                ),
            )),
        })
        .collect()
}

/// Checks that `given`, the buffer passed for node `id`, has the precision and buffer dims
/// `routine` was compiled for.
pub fn check_buffer(routine: &Routine, id: NodeId, given: &TensorNode) -> Result<(), RunError> {
    // Compared without building the dims: a small routine's run checks every buffer.
    fn widened(node: &TensorNode) -> impl Iterator<Item = usize> + '_ {
        node.dims
            .iter()
            .zip(&node.padding)
            .map(|(dim, (before, after))| dim + before + after)
    }
    let expected = &routine.nodes[&id];
    if given.precision == expected.precision
        && given.dims.len() == expected.dims.len()
        && widened(given).eq(widened(expected))
    {
        return Ok(());
    }
    Err(RunError::new(
        RunErrorKind::Buffers,
        format!(
            "routine {}: the buffer of {id} '{}' is {} {:?}, the routine was compiled for {} {:?}",
            routine.name,
            expected.label,
            given.precision,
            given.buffer_dims(),
            expected.precision,
            expected.buffer_dims()
        ),
    ))
}
