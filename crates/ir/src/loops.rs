//! The loop IR: what assignments lower to and backends run. Indices are buffer positions (padding
//! margins already added); values are computed in `f64` and rounded to the stored node's
//! precision on every store.

use std::fmt;

use crate::node::NodeId;
use crate::ops::{Binop, Ternop, Unop};

/// A loop variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoopVar(pub u32);

impl fmt::Display for LoopVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "l{}", self.0)
    }
}

/// A buffer position along one axis: `Σ cᵢ·lᵢ + offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub terms: Vec<(i64, LoopVar)>,
    pub offset: i64,
}

/// A scalar computation.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Const(f64),
    Get(NodeId, Vec<Index>),
    Unop(Unop, Box<Scalar>),
    Binop(Binop, Box<Scalar>, Box<Scalar>),
    Ternop(Ternop, Box<Scalar>, Box<Scalar>, Box<Scalar>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `for var in 0..range { body }`.
    For {
        var: LoopVar,
        range: usize,
        body: Vec<Stmt>,
    },
    /// Stores `value` at `index` of `node`.
    Set {
        node: NodeId,
        index: Vec<Index>,
        value: Scalar,
    },
    /// Sets every cell of `node`'s buffer, margins included.
    Fill { node: NodeId, value: f64 },
}

impl fmt::Display for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .terms
            .iter()
            .map(|(c, v)| {
                if *c == 1 {
                    v.to_string()
                } else {
                    format!("{c}*{v}")
                }
            })
            .collect();
        if self.offset != 0 || parts.is_empty() {
            parts.push(self.offset.to_string());
        }
        f.write_str(&parts.join("+").replace("+-", "-"))
    }
}

fn indices(index: &[Index]) -> String {
    index
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Const(x) => write!(f, "{x}"),
            Scalar::Get(node, index) => write!(f, "{node}[{}]", indices(index)),
            Scalar::Unop(op, x) => write!(f, "{op}({x})"),
            Scalar::Binop(op, a, b) => write!(f, "({a} {op} {b})"),
            Scalar::Ternop(op, a, b, c) => write!(f, "{op:?}({a}, {b}, {c})"),
        }
    }
}

impl Stmt {
    fn write(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        match self {
            Stmt::For { var, range, body } => {
                writeln!(f, "{pad}for {var} in 0..{range} {{")?;
                for stmt in body {
                    stmt.write(f, depth + 1)?;
                }
                writeln!(f, "{pad}}}")
            }
            Stmt::Set { node, index, value } => {
                writeln!(f, "{pad}{node}[{}] := {value}", indices(index))
            }
            Stmt::Fill { node, value } => writeln!(f, "{pad}fill {node} with {value}"),
        }
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}
