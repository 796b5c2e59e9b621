//! The reference interpreter: runs loop IR over `f64` buffers, rounding every stored value to its
//! node's precision. It is the oracle the other backends are tested against, so it is written for
//! obviousness, not speed.

use std::collections::HashMap;

use rcannl_ir::{Index, LoopVar, NodeId, Scalar, Stmt, TensorNode};

/// Why a routine cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    pub message: String,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RunError {}

/// The buffers of a routine's nodes: each a row-major array over the node's buffer dims.
#[derive(Debug, Clone, Default)]
pub struct Buffers {
    nodes: HashMap<NodeId, TensorNode>,
    data: HashMap<NodeId, Vec<f64>>,
}

impl Buffers {
    /// Allocates a zeroed buffer for each node.
    pub fn new(nodes: impl IntoIterator<Item = TensorNode>) -> Buffers {
        let mut buffers = Buffers::default();
        for node in nodes {
            buffers.data.insert(node.id, vec![0.0; node.buffer_len()]);
            buffers.nodes.insert(node.id, node);
        }
        buffers
    }

    pub fn nodes(&self) -> &HashMap<NodeId, TensorNode> {
        &self.nodes
    }

    /// The whole buffer, margins included.
    pub fn get(&self, node: NodeId) -> &[f64] {
        &self.data[&node]
    }

    /// Sets the cells inside the margins (row-major over the node's dims), rounded to the node's
    /// precision.
    pub fn set_values(&mut self, node: NodeId, values: &[f64]) -> Result<(), RunError> {
        let info = &self.nodes[&node];
        let n: usize = info.dims.iter().product();
        if values.len() != n {
            return Err(RunError {
                message: format!(
                    "{node} '{}' has {n} cells, {} values given",
                    info.label,
                    values.len()
                ),
            });
        }
        let positions: Vec<usize> = (0..n).map(|cell| interior_offset(info, cell)).collect();
        let precision = info.precision;
        let data = self.data.get_mut(&node).expect("allocated");
        for (position, value) in positions.into_iter().zip(values) {
            data[position] = precision.round(*value);
        }
        Ok(())
    }

    /// The cells inside the margins, row-major over the node's dims.
    pub fn values(&self, node: NodeId) -> Vec<f64> {
        let info = &self.nodes[&node];
        let n: usize = info.dims.iter().product();
        (0..n)
            .map(|cell| self.data[&node][interior_offset(info, cell)])
            .collect()
    }
}

/// The buffer position of the `cell`-th interior cell (row-major over the unpadded dims).
fn interior_offset(node: &TensorNode, cell: usize) -> usize {
    let buffer_dims = node.buffer_dims();
    let mut rest = cell;
    let mut position = 0;
    let mut stride = 1;
    for axis in (0..node.dims.len()).rev() {
        let coordinate = rest % node.dims[axis] + node.padding[axis].0;
        rest /= node.dims[axis];
        position += coordinate * stride;
        stride *= buffer_dims[axis];
    }
    position
}

/// Runs `stmts` over `buffers`.
pub fn run(stmts: &[Stmt], buffers: &mut Buffers) -> Result<(), RunError> {
    let mut env = HashMap::new();
    for stmt in stmts {
        exec(stmt, buffers, &mut env)?;
    }
    Ok(())
}

fn exec(
    stmt: &Stmt,
    buffers: &mut Buffers,
    env: &mut HashMap<LoopVar, i64>,
) -> Result<(), RunError> {
    match stmt {
        Stmt::For { var, range, body } => {
            for i in 0..*range as i64 {
                env.insert(*var, i);
                for stmt in body {
                    exec(stmt, buffers, env)?;
                }
            }
            env.remove(var);
        }
        Stmt::Set { node, index, value } => {
            let value = eval(value, buffers, env)?;
            let position = position(buffers, *node, index, env)?;
            let precision = buffers.nodes[node].precision;
            buffers.data.get_mut(node).expect("allocated")[position] = precision.round(value);
        }
        Stmt::Fill { node, value } => {
            let precision = buffers.nodes[node].precision;
            buffers
                .data
                .get_mut(node)
                .ok_or_else(|| RunError {
                    message: format!("no buffer for {node}"),
                })?
                .fill(precision.round(*value));
        }
    }
    Ok(())
}

fn eval(scalar: &Scalar, buffers: &Buffers, env: &HashMap<LoopVar, i64>) -> Result<f64, RunError> {
    Ok(match scalar {
        Scalar::Const(x) => *x,
        Scalar::Get(node, index) => buffers.data[node][position(buffers, *node, index, env)?],
        Scalar::Unop(op, x) => op.apply(eval(x, buffers, env)?),
        Scalar::Binop(op, a, b) => op.apply(eval(a, buffers, env)?, eval(b, buffers, env)?),
        Scalar::Ternop(op, a, b, c) => op.apply(
            eval(a, buffers, env)?,
            eval(b, buffers, env)?,
            eval(c, buffers, env)?,
        ),
    })
}

/// The row-major buffer position of `index`, checked against the buffer's dims.
fn position(
    buffers: &Buffers,
    node: NodeId,
    index: &[Index],
    env: &HashMap<LoopVar, i64>,
) -> Result<usize, RunError> {
    let info = buffers.nodes.get(&node).ok_or_else(|| RunError {
        message: format!("no buffer for {node}"),
    })?;
    let dims = info.buffer_dims();
    let mut position = 0usize;
    for (axis, (index, dim)) in index.iter().zip(&dims).enumerate() {
        let value = index.offset
            + index
                .terms
                .iter()
                .map(|(c, var)| c * env.get(var).copied().unwrap_or(0))
                .sum::<i64>();
        if value < 0 || value >= *dim as i64 {
            return Err(RunError {
                message: format!(
                    "{node} '{}': position {value} on axis {axis} is outside its buffer of {dim}",
                    info.label
                ),
            });
        }
        position = position * dim + value as usize;
    }
    Ok(position)
}
