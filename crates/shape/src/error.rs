//! Shape errors: what failed, in which operation, on which tensors and shapes.

use std::fmt;

use rcannl_ir::MarginError;

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
    /// What kind of failure it is.
    pub kind: ShapeErrorKind,
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

/// What kind of failure a [`ShapeError`] is, for callers that act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShapeErrorKind {
    /// Shapes that cannot agree: sizes, bases, numbers of axes, strides.
    Mismatch,
    /// A spec or shape literal that is malformed or cannot be used as written.
    Spec,
    /// An operation given another number of operands than its logic takes.
    Arity,
    /// Nothing determines part of a parameter's shape: "you forgot to specify the hidden
    /// dimension".
    HiddenDimension,
    /// Not enough shape information to decide (a relation, a window, a tensor's dims).
    Underdetermined,
    /// A capture that names nothing in the operation's spec.
    Capture,
    /// An access needing padding margins a buffer cannot have.
    Padding,
    /// Projection inference could not derive an operation's loops.
    Projection,
    /// A size or a search beyond what inference handles.
    Limit,
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
    /// An error of shapes that cannot agree ([`ShapeErrorKind::Mismatch`]) saying `message`,
    /// with no context yet.
    pub fn new(message: impl Into<String>) -> Self {
        ShapeError::of_kind(ShapeErrorKind::Mismatch, message)
    }

    /// An error of the kind `kind` saying `message`, with no context yet.
    pub fn of_kind(kind: ShapeErrorKind, message: impl Into<String>) -> Self {
        ShapeError {
            kind,
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

impl std::error::Error for ShapeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

impl From<SpecError> for ShapeError {
    fn from(err: SpecError) -> Self {
        ShapeError::of_kind(ShapeErrorKind::Spec, err.to_string())
    }
}

impl From<MarginError> for ShapeError {
    /// Its message, of kind [`ShapeErrorKind::Padding`].
    fn from(err: MarginError) -> Self {
        ShapeError::of_kind(ShapeErrorKind::Padding, err.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_einsum;

    #[test]
    fn a_spec_error_is_reported_as_its_message() {
        let spec_error = parse_einsum("ij;jk=>i?k").unwrap_err();
        let error = ShapeError::from(spec_error.clone());
        assert_eq!(error.kind, ShapeErrorKind::Spec);
        assert_eq!(error.to_string(), spec_error.to_string());
    }

    #[test]
    fn a_margin_error_is_a_padding_error() {
        let mut margins = rcannl_ir::Margins::new(1);
        margins.freeze();
        let margin_error = margins.require(&[(1, 1)], "conv").unwrap_err();
        let error = ShapeError::from(margin_error.clone());
        assert_eq!(error.kind, ShapeErrorKind::Padding);
        assert_eq!(error.message, margin_error.message);
    }

    #[test]
    fn a_plain_error_is_a_mismatch() {
        assert_eq!(
            ShapeError::new("sizes differ").kind,
            ShapeErrorKind::Mismatch
        );
    }
}
