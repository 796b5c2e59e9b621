//! Captured dimensions: a label (or row variable) of an operation's spec, named to read its size
//! once inference knows it, to constrain it (`set_dim`, `set_equal`, `set_scale`), or to use its
//! size as a tensor (`dim`).
//!
//! An einsum made along a contraction path is computed by its last step, whose spec lacks what
//! earlier steps summed away (a label one operand alone has, a label contracted before the end);
//! such a name is captured on the latest earlier step whose spec has it, which sizes it as the
//! whole einsum does.

use std::collections::HashMap;

use rcannl_ir::Precision;
use rcannl_shape::spec::EinsumSpec;
use rcannl_shape::term::Dim;
use rcannl_shape::{LeafDecl, OpId};

use crate::graph::{Graph, LeafKind, State, TensorError, error};
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
    /// tensor (for an einsum along a contraction path, of the whole einsum's spec).
    pub fn capture(&self, name: &str) -> Result<Capture, TensorError> {
        let state = self.graph.state.lock();
        let shape_op = shape_op(&state, self.index).ok_or_else(|| {
            let label = &state.tensors[self.index].label;
            error(format!("capture '{name}': '{label}' is a leaf"))
        })?;
        let capture = match (
            state.inference.capture(shape_op, name),
            state
                .extensions
                .get::<PathsOfEinsums>()
                .and_then(|paths| paths.0.get(&self.index)),
        ) {
            (Ok(capture), _) => capture,
            (Err(err), None) => return Err(err.into()),
            (Err(_), Some(path)) => path
                .ops
                .iter()
                .rev()
                .find_map(|&op| state.inference.capture(op, name).ok())
                .ok_or_else(|| {
                    let why = match path.spec.capture(name) {
                        Err(spec_error) => spec_error.to_string(),
                        Ok(_) => "no step of its contraction path has it".to_owned(),
                    };
                    error(format!("capture '{name}': {why}"))
                })?,
        };
        Ok(Capture {
            capture,
            graph: state.id,
        })
    }
}

impl State {
    /// [`Graph::capture_value`], for callers already holding the state.
    pub(crate) fn capture_value(&self, capture: &Capture) -> Option<usize> {
        if capture.graph != self.id {
            return None;
        }
        self.inference.capture_value(&capture.capture)
    }
}

/// The shape operation of the operation that computed tensor `index` (`None` for a leaf).
fn shape_op(state: &State, index: usize) -> Option<OpId> {
    let op = state.tensors[index].op?;
    Some(state.ops[op].forward[0].projections.op)
}

/// Where the names of an einsum made along a contraction path are captured besides its last
/// step: the whole einsum's spec, and the shape operations of the earlier steps (single-operand
/// sums included), in the order they were made.
#[derive(Debug, Clone)]
struct PathSteps {
    spec: EinsumSpec,
    ops: Vec<OpId>,
}

/// For each tensor an einsum made along a contraction path (by tensor index), its
/// [`PathSteps`], kept with the graph's state.
#[derive(Debug, Default)]
struct PathsOfEinsums(HashMap<usize, PathSteps>);

/// Records that `result` is the last step of the einsum `spec` along a path whose earlier steps
/// made `steps`, so that [`Tensor::capture`] finds the names those steps summed away. Nothing is
/// recorded for a failed result, which has no operation to capture on.
pub(crate) fn record_path_steps(result: &Tensor, spec: &EinsumSpec, steps: &[Tensor]) {
    let mut state = result.graph.state.lock();
    if shape_op(&state, result.index).is_none() {
        return;
    }
    let ops = steps
        .iter()
        .filter_map(|step| shape_op(&state, step.index))
        .collect();
    state.extensions.get_mut::<PathsOfEinsums>().0.insert(
        result.index,
        PathSteps {
            spec: spec.clone(),
            ops,
        },
    );
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
        let mut state = self.state.lock();
        state.captured_constraints += 1;
        Ok(state.inference.set_dim(&capture.capture, size)?)
    }

    /// Constrains two captures to be equal.
    pub fn set_equal(&self, a: &Capture, b: &Capture) -> Result<(), TensorError> {
        self.check_captures("set_equal", &[a, b])?;
        let mut state = self.state.lock();
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
        let mut state = self.state.lock();
        state.captured_constraints += 1;
        Ok(state
            .inference
            .set_scale(factor, &large.capture, &small.capture)?)
    }

    /// The captured size, once inference knows it (`None` also for a capture of another graph).
    pub fn capture_value(&self, capture: &Capture) -> Option<usize> {
        self.state.lock().capture_value(capture)
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
            LeafKind::Dim(capture.capture.clone()),
            Precision::F32,
            false,
        )
    }
}
