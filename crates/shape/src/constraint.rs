//! Shape constraints: what an operation asserts about the shapes of its operands and result.
//!
//! Equalities come from specs (einsum, permute, block), inequalities `res ⊑ opnd` ("the result
//! refines the operand": the operand may be smaller and is broadcast) from pointwise, compose and
//! transpose. The same constraints are read twice: by shape inference for sizes and by projection
//! inference for loops, so they are produced by one generator (`logic`).

use std::fmt;

use crate::term::{Dim, Row};

/// One constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Constraint {
    /// The two dimensions are equal.
    DimEq(Dim, Dim),
    /// `res ⊑ opnd`: equal, or `opnd` is the claim-free unit `1*`.
    DimLe {
        /// The result's dimension.
        res: Dim,
        /// The operand's dimension, which may be the unit `1*` broadcast to `res`.
        opnd: Dim,
    },
    /// The dimension's size is at least `size` (a fixed index `n` needs `n+1`).
    AtLeast {
        /// The constrained dimension.
        dim: Dim,
        /// The smallest size it may take.
        size: usize,
    },
    /// Flat equality: the same axes, wherever the markers sit.
    RowEq(Row, Row),
    /// Broadcast order on rows, aligned at both outer edges (broadcasting in the middle).
    RowLe {
        /// The result's row.
        res: Row,
        /// The operand's row, which may lack axes or have units `1*` where `res` has axes.
        opnd: Row,
    },
    /// The product of all axes of the rows is `coefficient · size(total)`.
    TotalElems {
        /// The rows whose axes are multiplied together.
        rows: Vec<Row>,
        /// The dimension whose size, times `coefficient`, is the product.
        total: Dim,
        /// How many elements of the rows one unit of `total` stands for.
        coefficient: usize,
    },
    /// The rows, flattened in order, are exactly these dimensions.
    Exact {
        /// The rows, in order.
        rows: Vec<Row>,
        /// The dimensions the rows' axes must be, in order.
        dims: Vec<Dim>,
    },
}

impl Constraint {
    /// The same constraint with `dim` and `row` applied to every term (substitution, renaming).
    pub fn map_terms(&self, dim: impl Fn(&Dim) -> Dim, row: impl Fn(&Row) -> Row) -> Constraint {
        let rows = |rows: &[Row]| rows.iter().map(&row).collect();
        match self {
            Constraint::DimEq(a, b) => Constraint::DimEq(dim(a), dim(b)),
            Constraint::DimLe { res, opnd } => Constraint::DimLe {
                res: dim(res),
                opnd: dim(opnd),
            },
            Constraint::AtLeast { dim: d, size } => Constraint::AtLeast {
                dim: dim(d),
                size: *size,
            },
            Constraint::RowEq(a, b) => Constraint::RowEq(row(a), row(b)),
            Constraint::RowLe { res, opnd } => Constraint::RowLe {
                res: row(res),
                opnd: row(opnd),
            },
            Constraint::TotalElems {
                rows: r,
                total,
                coefficient,
            } => Constraint::TotalElems {
                rows: rows(r),
                total: dim(total),
                coefficient: *coefficient,
            },
            Constraint::Exact { rows: r, dims } => Constraint::Exact {
                rows: rows(r),
                dims: dims.iter().map(&dim).collect(),
            },
        }
    }
}

impl fmt::Display for Constraint {
    /// `$1 = 3`, `$1 ⊑ $2`, `$1 ≥ 3`, `[..$0..,3] = [4,3]`, `[..] ⊑ [..]`,
    /// `elements of [..] [..] = 4·$2`, `[..] [..] are exactly [3,4]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = |rows: &[Row]| {
            rows.iter()
                .map(|r| format!("[{r}]"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self {
            Constraint::DimEq(a, b) => write!(f, "{a} = {b}"),
            Constraint::DimLe { res, opnd } => write!(f, "{res} ⊑ {opnd}"),
            Constraint::AtLeast { dim, size } => write!(f, "{dim} ≥ {size}"),
            Constraint::RowEq(a, b) => write!(f, "[{a}] = [{b}]"),
            Constraint::RowLe { res, opnd } => write!(f, "[{res}] ⊑ [{opnd}]"),
            Constraint::TotalElems {
                rows: r,
                total,
                coefficient,
            } => write!(f, "elements of {} = {coefficient}·{total}", rows(r)),
            Constraint::Exact { rows: r, dims } => write!(
                f,
                "{} are exactly [{}]",
                rows(r),
                dims.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}
