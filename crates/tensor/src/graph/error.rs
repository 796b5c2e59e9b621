//! The tensor library's error, and the errors of the graph's own checks.

use rcannl_shape::ShapeError;

use crate::tensor::Tensor;

/// An error of the tensor library: a shape problem (with the operation, its tensors and their
/// shapes), a use of a failed tensor, a compilation or run failure.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorError {
    /// What went wrong, with the operation, tensors and shapes concerned.
    pub message: String,
}

impl std::fmt::Display for TensorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TensorError {}

impl From<ShapeError> for TensorError {
    fn from(error: ShapeError) -> TensorError {
        TensorError {
            message: error.to_string(),
        }
    }
}

pub(crate) fn error(message: impl Into<String>) -> TensorError {
    TensorError {
        message: message.into(),
    }
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
