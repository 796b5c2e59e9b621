//! Captured dimensions: a label (or row variable) of an operation's spec, named to read its size
//! once inference knows it, to constrain it (`set_dim`, `set_equal`, `set_scale`), or to use its
//! size as a tensor (`dim`).

use rcannl_ir::Precision;
use rcannl_shape::LeafDecl;
use rcannl_shape::term::Dim;

use crate::graph::{Graph, LeafKind, TensorError, error};
use crate::tensor::Tensor;

/// A captured label of one operation's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub(crate) capture: rcannl_shape::Capture,
    /// The identity of the graph that made it.
    pub(crate) graph: u64,
}

impl Tensor {
    /// Captures `name`, a label or row variable of the spec of the operation that computed this
    /// tensor.
    pub fn capture(&self, name: &str) -> Result<Capture, TensorError> {
        let state = self.graph.state.borrow();
        let op = state.tensors[self.index]
            .op
            .ok_or_else(|| error(format!("capture '{name}': '{}' is a leaf", self.label())))?;
        let shape_op = state.ops[op].forward[0].projections.op;
        Ok(Capture {
            capture: state.inference.capture(shape_op, name)?,
            graph: state.id,
        })
    }
}

impl Graph {
    /// An error unless every capture of `captures` is of this graph.
    fn check_captures(&self, context: &str, captures: &[&Capture]) -> Result<(), TensorError> {
        let id = self.id();
        match captures.iter().find(|c| c.graph != id) {
            None => Ok(()),
            Some(c) => Err(error(format!(
                "{context}: the capture '{}' belongs to another graph",
                c.capture.name
            ))),
        }
    }

    /// Constrains a captured dimension to `size` (a row variable: the product of its axes).
    pub fn set_dim(&self, capture: &Capture, size: usize) -> Result<(), TensorError> {
        self.check_captures("set_dim", &[capture])?;
        let mut state = self.state.borrow_mut();
        state.captured_constraints += 1;
        Ok(state.inference.set_dim(&capture.capture, size)?)
    }

    /// Constrains two captures to be equal.
    pub fn set_equal(&self, a: &Capture, b: &Capture) -> Result<(), TensorError> {
        self.check_captures("set_equal", &[a, b])?;
        let mut state = self.state.borrow_mut();
        state.captured_constraints += 1;
        Ok(state.inference.set_equal(&a.capture, &b.capture)?)
    }

    /// Constrains `large = factor · small` (dimensions only).
    pub fn set_scale(
        &self,
        factor: usize,
        large: &Capture,
        small: &Capture,
    ) -> Result<(), TensorError> {
        self.check_captures("set_scale", &[large, small])?;
        let mut state = self.state.borrow_mut();
        state.captured_constraints += 1;
        Ok(state
            .inference
            .set_scale(factor, &large.capture, &small.capture)?)
    }

    /// The captured size, once inference knows it (`None` also for a capture of another graph).
    pub fn capture_value(&self, capture: &Capture) -> Option<usize> {
        let state = self.state.borrow();
        if capture.graph != state.id {
            return None;
        }
        state.inference.capture_value(&capture.capture)
    }

    /// The captured size as a tensor (one cell), filled when a routine runs.
    pub fn dim(&self, capture: &Capture) -> Tensor {
        if let Err(e) = self.check_captures("dim", &[capture]) {
            return self.failed(e);
        }
        self.leaf(
            &format!("dim {}", capture.capture.name),
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([Dim::Unit]),
            LeafKind::Dim(capture.clone()),
            Precision::F32,
            false,
        )
    }
}
