//! The labels `--capture` and `--set` name, captured on the result: the tensor library finds a
//! name of an einsum run along a contraction path on the step whose spec has it, so labels the
//! path sums away before its last step are captured too.

use rcannl_tensor::{Capture, Graph, Tensor};

use crate::report::{CliError, ErrorKind};

/// A label captured on the result.
#[derive(Debug)]
pub struct Captured(Capture);

impl Captured {
    /// The size, if inference determined it.
    pub fn size(&self, graph: &Graph) -> Option<usize> {
        graph.capture_value(&self.0)
    }
}

/// Finds labels on the result of the command's operation.
pub struct Finder<'a> {
    pub result: &'a Tensor,
}

impl Finder<'_> {
    /// The label or row variable `name`.
    pub fn find(&self, name: &str) -> Result<Captured, CliError> {
        self.result
            .capture(name)
            .map(Captured)
            .map_err(|err| CliError::new(ErrorKind::Capture, err.message))
    }

    /// Applies `--set NAME=SIZE`: a constraint on a captured label.
    pub fn set(&self, graph: &Graph, name: &str, size: usize) -> Result<(), CliError> {
        let Captured(capture) = self.find(name)?;
        graph
            .set_dim(&capture, size)
            .map_err(|err| CliError::new(ErrorKind::Shape, err.message))
    }
}
