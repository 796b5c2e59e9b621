//! Tensor nodes: the buffers assignments read and write.

use std::fmt;

use crate::precision::Precision;

/// The most axes a node may have, numpy's own limit: lowering refuses a node with more (see
/// [`mod@crate::lower`]). Thousands of unit axes cost nothing to shape inference but make loop nests
/// and indices thousands deep, which no C compiler accepts.
pub const MAX_AXES: usize = 64;

/// Identifies a tensor node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Where a node's values live while (and after) a routine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryMode {
    /// No storage: every read recomputes the value where it is needed (fusion).
    Virtual,
    /// Scratch storage for one run of a routine, not kept afterwards.
    Local,
    /// A buffer that outlives the routine: inputs, results, state.
    Materialized,
}

impl fmt::Display for MemoryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryMode::Virtual => "virtual",
            MemoryMode::Local => "local",
            MemoryMode::Materialized => "materialized",
        })
    }
}

/// A tensor's buffer: its dims (axes in memory order, without padding), element precision, the
/// padding margins its buffer adds around each axis, and its memory mode (`None` until the
/// routine's rule decides, see `memory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorNode {
    /// The node's identity: what statements, assignments and buffers refer to it by.
    pub id: NodeId,
    /// A name for printing and error messages (the tensor's label).
    pub label: String,
    /// The element type of the buffer.
    pub precision: Precision,
    /// The size of each axis, outermost first (row-major), margins excluded.
    pub dims: Vec<usize>,
    /// `(before, after)` per axis.
    pub padding: Vec<(usize, usize)>,
    /// Where the values live; `None` until the optimizer decides (unless set in advance with
    /// [`TensorNode::with_mode`]).
    pub memory_mode: Option<MemoryMode>,
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
            memory_mode: None,
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

    /// [`TensorNode::buffer_dims`], or `None` where an axis with its margins overflows.
    pub fn buffer_dims_checked(&self) -> Option<Vec<usize>> {
        self.dims
            .iter()
            .zip(&self.padding)
            .map(|(dim, (before, after))| dim.checked_add(*before)?.checked_add(*after))
            .collect()
    }

    /// The node with its memory mode decided in advance (the rule keeps it).
    pub fn with_mode(mut self, mode: MemoryMode) -> TensorNode {
        self.memory_mode = Some(mode);
        self
    }

    /// The number of cells inside the margins.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Whether the node has no cells (an axis of size 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of cells of the buffer, margins included.
    pub fn buffer_len(&self) -> usize {
        self.buffer_dims().iter().product()
    }
}
