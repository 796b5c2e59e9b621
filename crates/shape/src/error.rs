//! Shape errors: what failed, in which operation, on which tensors and shapes.

use std::fmt;

use crate::spec::SpecError;

/// An error of shape inference.
///
/// `message` says what failed, in words. The solver adds the constraint it was processing (kept
/// for debugging, in the solver's notation, and not printed); the inference session adds the
/// operation (its kind and spec) and the tensors it relates, by label, with their shapes as far as
/// they were known when the error struck, printed `batch|input->output` with `?` for a size and
/// `...` for axes not known yet (see [`crate::words`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    /// What failed, in words.
    pub message: String,
    /// The failing constraint with what was known substituted in, e.g. `[$3,4] = [$5,5]`: the
    /// solver's notation, for debugging; [`fmt::Display`] leaves it out.
    pub constraint: Option<String>,
    /// The operation whose constraints failed, e.g. `einsum "i,j;j,k=>i,k"`.
    pub operation: Option<String>,
    /// The tensors of that operation.
    pub tensors: Vec<TensorContext>,
    /// Further explanation: the spec position, the parameter concerned, a hint.
    pub notes: Vec<String>,
}

/// A tensor named in an error: its label, its role in the operation and its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorContext {
    /// The tensor's label.
    pub label: String,
    /// `result`, `operand 1`, …
    pub role: String,
    /// The tensor's shape as far as it was known, printed `batch|input->output` in words (see
    /// [`crate::words::shape`]).
    pub shape: String,
}

impl ShapeError {
    /// An error saying `message`, with no context yet.
    pub fn new(message: impl Into<String>) -> Self {
        ShapeError {
            message: message.into(),
            constraint: None,
            operation: None,
            tensors: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a line of explanation.
    pub fn note(mut self, line: impl Into<String>) -> Self {
        self.notes.push(line.into());
        self
    }

    /// Records the failing constraint, unless an inner step already did.
    pub fn in_constraint(mut self, constraint: impl fmt::Display) -> Self {
        if self.constraint.is_none() {
            self.constraint = Some(constraint.to_string());
        }
        self
    }

    /// Records the operation and its tensors, unless an inner step already did.
    pub fn in_operation(
        mut self,
        operation: impl Into<String>,
        tensors: impl IntoIterator<Item = TensorContext>,
    ) -> Self {
        if self.operation.is_none() {
            self.operation = Some(operation.into());
            self.tensors = tensors.into_iter().collect();
        }
        self
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(operation) = &self.operation {
            write!(f, "\n  in operation: {operation}")?;
        }
        for tensor in &self.tensors {
            write!(
                f,
                "\n  {} '{}': {}",
                tensor.role, tensor.label, tensor.shape
            )?;
        }
        for line in &self.notes {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ShapeError {}

impl From<SpecError> for ShapeError {
    fn from(err: SpecError) -> Self {
        ShapeError::new(err.to_string())
    }
}
