//! `Tensor`: a handle to a tensor of a [`Graph`]. Its operator sugar is in `operators`.

use std::hash::{Hash, Hasher};

use crate::graph::Graph;

/// A tensor of a graph: a cheap handle (cloning it clones a reference).
#[derive(Debug, Clone)]
pub struct Tensor {
    pub(crate) graph: Graph,
    pub(crate) index: usize,
}

impl PartialEq for Tensor {
    /// The same tensor of the same graph.
    fn eq(&self, other: &Tensor) -> bool {
        self.index == other.index && self.graph.owns(other)
    }
}

impl Eq for Tensor {}

impl Hash for Tensor {
    /// The tensor's index in its graph: equal tensors share it (tensors of other graphs may too),
    /// so that sets and maps of a graph's tensors find one in constant time.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
    }
}

impl Tensor {
    /// The graph the tensor belongs to.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The tensor's id: its number in its graph, counting from 0 in the order the graph's
    /// tensors were made (an operation labels its result `name#n` with it). Unique in the graph,
    /// and the same in every graph that the same program builds the same way, so it names a
    /// tensor across runs, whatever its label: parameters' random draws are keyed by it, and
    /// checkpoints record it (to restore tensors by id rather than by label).
    pub fn id(&self) -> usize {
        self.index
    }

    /// The tensor's label (a leaf's name, or the expression that computed it).
    pub fn label(&self) -> String {
        self.graph.state.lock().tensors[self.index].label.clone()
    }

    /// Whether gradients flow into the tensor (it is a parameter or computed from one).
    pub fn is_differentiable(&self) -> bool {
        self.graph.state.lock().tensors[self.index].differentiable
    }

    /// The shape as known now: `batch|input->output`, with `$n` for sizes not known yet.
    pub fn shape(&self) -> String {
        let state = self.graph.state.lock();
        state
            .inference
            .shape(state.tensors[self.index].shape)
            .to_string()
    }

    /// The error that made this tensor fail, if one did.
    pub fn error(&self) -> Option<crate::graph::TensorError> {
        self.graph.state.lock().tensors[self.index].failed.clone()
    }
}
