//! Shape constraints: what an operation asserts about the shapes of its operands and result.
//!
//! Equalities come from specs (einsum, permute, block), inequalities `res ⊑ opnd` ("the result
//! refines the operand": the operand may be smaller and is broadcast) from pointwise, compose and
//! transpose. The same constraints are read twice: by shape inference for sizes and by projection
//! inference for loops, so they are produced by one generator (`logic`).

use crate::term::{Dim, Row};

/// One constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Constraint {
    DimEq(Dim, Dim),
    /// `res ⊑ opnd`: equal, or `opnd` is the claim-free unit `1*`.
    DimLe {
        res: Dim,
        opnd: Dim,
    },
    /// The dimension's size is at least `size` (a fixed index `n` needs `n+1`).
    AtLeast {
        dim: Dim,
        size: usize,
    },
    /// Flat equality: the same axes, wherever the markers sit.
    RowEq(Row, Row),
    /// Broadcast order on rows, aligned at both outer edges (broadcasting in the middle).
    RowLe {
        res: Row,
        opnd: Row,
    },
    /// The product of all axes of the rows is `coefficient · size(total)`.
    TotalElems {
        rows: Vec<Row>,
        total: Dim,
        coefficient: usize,
    },
    /// The rows, flattened in order, are exactly these dimensions.
    Exact {
        rows: Vec<Row>,
        dims: Vec<Dim>,
    },
}
