//! Tensor nodes: the buffers assignments read and write.

use std::fmt;

use crate::precision::Precision;

/// Identifies a tensor node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// A tensor's buffer: its dims (axes in memory order, without padding), element precision, and
/// the padding margins its buffer adds around each axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorNode {
    pub id: NodeId,
    pub label: String,
    pub precision: Precision,
    pub dims: Vec<usize>,
    /// `(before, after)` per axis.
    pub padding: Vec<(usize, usize)>,
}

impl TensorNode {
    /// A node without padding.
    pub fn new(id: u32, label: &str, precision: Precision, dims: &[usize]) -> TensorNode {
        TensorNode {
            id: NodeId(id),
            label: label.to_owned(),
            precision,
            dims: dims.to_vec(),
            padding: vec![(0, 0); dims.len()],
        }
    }

    /// The buffer's dims: each axis widened by its margins.
    pub fn buffer_dims(&self) -> Vec<usize> {
        self.dims
            .iter()
            .zip(&self.padding)
            .map(|(dim, (before, after))| dim + before + after)
            .collect()
    }

    /// The number of cells of the buffer, margins included.
    pub fn buffer_len(&self) -> usize {
        self.buffer_dims().iter().product()
    }
}
