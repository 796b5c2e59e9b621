//! The tensor library's error, and the errors of the graph's own checks.

use std::sync::Arc;

use rcannl_shape::ShapeError;

use crate::tensor::Tensor;

/// An error of the tensor library: a shape problem (with the operation, its tensors and their
/// shapes), a use of a failed tensor, a compilation or run failure.
///
/// `kind` says what kind of problem it is, for callers that act on it; `message` (what `Display`
/// prints) says exactly what; the error it came from, if any, is its
/// [`source`](std::error::Error::source).
#[derive(Debug, Clone)]
pub struct TensorError {
    /// What kind of problem it is.
    pub kind: TensorErrorKind,
    /// What went wrong, with the operation, tensors and shapes concerned.
    pub message: String,
    /// The error this one reports, if it came from another.
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// What kind of problem a [`TensorError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorErrorKind {
    /// Shapes that cannot agree or cannot be inferred (the source is the [`ShapeError`]).
    Shape,
    /// The library used in a way it refuses: a tensor of another graph, an argument out of its
    /// range, an operation it cannot build.
    Misuse,
    /// A tensor or gradient read, or a routine run, while a buffer it needs holds no values (a
    /// parameter not initialized, data never given, a gradient not computed).
    NoValues,
    /// A routine could not be lowered, optimized or compiled on the backend, or the backend
    /// asked for cannot be had.
    Compile,
    /// A compiled routine failed while it ran, or a buffer could not be read or written.
    Run,
    /// A file could not be read or written, or is not what it should be.
    Io,
}

impl TensorError {
    /// An error of misuse ([`TensorErrorKind::Misuse`]) saying `message`.
    pub fn new(message: impl Into<String>) -> TensorError {
        TensorError::of_kind(TensorErrorKind::Misuse, message)
    }

    /// An error of the kind `kind` saying `message`.
    pub fn of_kind(kind: TensorErrorKind, message: impl Into<String>) -> TensorError {
        TensorError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, reporting `source` (its [`source`](std::error::Error::source)).
    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same error saying `message` instead, of the same kind and source.
    pub(crate) fn reworded(self, message: String) -> TensorError {
        TensorError { message, ..self }
    }
}

impl PartialEq for TensorError {
    /// The same kind and message.
    fn eq(&self, other: &TensorError) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl std::fmt::Display for TensorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TensorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl From<ShapeError> for TensorError {
    fn from(error: ShapeError) -> TensorError {
        TensorError::of_kind(TensorErrorKind::Shape, error.to_string()).caused_by(error)
    }
}

/// An error of misuse ([`TensorErrorKind::Misuse`]) saying `message`.
pub(crate) fn error(message: impl Into<String>) -> TensorError {
    TensorError::new(message)
}

/// An error of the kind `kind` saying `message`.
pub(crate) fn error_of(kind: TensorErrorKind, message: impl Into<String>) -> TensorError {
    TensorError::of_kind(kind, message)
}

/// The error of a tensor used with a graph it does not belong to.
pub(crate) fn foreign(context: &str, t: &Tensor) -> TensorError {
    // A tensor standing for an error made with no graph to hold it (an operation given no
    // operands) is foreign to every graph; its error is what the user needs to read.
    let carried = t
        .graph
        .state
        .lock()
        .tensors
        .get(t.index)
        .and_then(|d| d.failed.clone());
    if let Some(e) = carried {
        return e;
    }
    error(format!(
        "{context}: tensor '{}' belongs to another graph (tensors of different graphs cannot be \
         mixed)",
        t.label()
    ))
}
