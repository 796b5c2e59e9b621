//! Solver tests on hand-written constraint sets: the examples of the reference's §2–§4 and the
//! seeds, each error message with a constraint set that triggers it.

use super::*;
use crate::term::{Basis, Border, ConvDim};

mod derived;
mod dims;
mod order;
mod rows;

fn n(size: usize) -> Dim {
    Dim::size(size)
}

fn named(size: usize, basis: &str) -> Dim {
    Dim::Atom {
        size,
        basis: Basis::Named(basis.into()),
    }
}

fn le(res: Dim, opnd: Dim) -> Constraint {
    Constraint::DimLe { res, opnd }
}

fn row_le(res: Row, opnd: Row) -> Constraint {
    Constraint::RowLe { res, opnd }
}

fn closed(dims: &[Dim]) -> Row {
    Row::closed(dims.to_vec())
}

fn open(leading: &[Dim], var: RowVarId, trailing: &[Dim]) -> Row {
    Row {
        leading: leading.to_vec(),
        var: Some(var),
        trailing: trailing.to_vec(),
    }
}

/// A leaf whose only row of interest is its output row.
fn leaf(label: &str, output: Row, is_param: bool) -> Leaf {
    Leaf {
        label: label.to_owned(),
        shape: Shape {
            output,
            ..Shape::default()
        },
        is_param,
    }
}

/// `N` fresh dimension variables.
fn fresh_dims<const N: usize>(s: &mut Solver) -> [DimVar; N] {
    std::array::from_fn(|_| s.vars().dim())
}

fn error_of(result: Result<(), ShapeError>) -> String {
    result.expect_err("expected a shape error").to_string()
}

fn affine(stride: usize, over: Dim, conv: Option<(usize, Dim, bool)>) -> Dim {
    Dim::Affine(Box::new(AffineDim {
        stride,
        over,
        conv: conv.map(|(dilation, kernel, padded)| ConvDim {
            dilation,
            kernel,
            border: if padded { Border::Same } else { Border::Valid },
        }),
        offset: 0,
    }))
}

fn flat(row: &Row) -> Vec<Dim> {
    row.dims().cloned().collect()
}
