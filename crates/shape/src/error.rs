//! Shape errors: what failed, in which operation, on which tensors and shapes.

use std::fmt;

use crate::spec::SpecError;

/// An error of shape inference. `message` says what failed; `context` lists, innermost first, the
/// operation, the tensors (by label) and their shapes as far as they were known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    pub message: String,
    pub context: Vec<String>,
}

impl ShapeError {
    pub fn new(message: impl Into<String>) -> Self {
        ShapeError {
            message: message.into(),
            context: Vec::new(),
        }
    }

    /// Adds a line of context (an operation, a tensor, a constraint).
    pub fn context(mut self, line: impl Into<String>) -> Self {
        self.context.push(line.into());
        self
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for line in &self.context {
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
