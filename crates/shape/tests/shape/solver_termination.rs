//! Property test: the shape solver terminates by reasoning.
//!
//! Arbitrary constraint sets over a few variables (cyclic, self-referential, with derived
//! dimensions, element counts and exact axes) make `add` and `close` return without panicking,
//! and never by exhausting the step budget: that budget is a safety net, the rank-cycle check and
//! the bound on row growth are what should stop the solver.
//!
//! Cases run in a child process with a time limit (see [`config`]), so that a solver that never
//! returns fails the property, with a shrunk case, instead of hanging the run.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use rcannl_shape::constraint::Constraint;
use rcannl_shape::solver::{Leaf, Solver};
use rcannl_shape::term::{
    AffineDim, Border, ConvDim, Dim, DimVar, ExplicitPadding, Row, RowVarId, Shape,
};

use crate::common::{config, pool_dim};

// ---------------------------------------------------------------------------------------------
// Arbitrary constraint sets
// ---------------------------------------------------------------------------------------------

/// Few variables, so that one row variable often sits on both sides of a constraint or closes a
/// cycle through two: the shapes that growing rows forever would come from.
const N_DIM_VARS: u32 = 4;
const N_ROW_VARS: u32 = 2;

fn simple_dim() -> impl Strategy<Value = Dim> {
    prop_oneof![
        4 => (0..N_DIM_VARS).prop_map(|v| Dim::Var(DimVar(v))),
        1 => Just(Dim::Unit),
        1 => Just(Dim::size(1)),
        3 => (0..4u32).prop_map(pool_dim),
    ]
}

fn any_dim() -> impl Strategy<Value = Dim> {
    let border = prop_oneof![
        Just(Border::Same),
        Just(Border::Valid),
        (0usize..3, 0usize..3, any::<bool>()).prop_map(|(before, after, ceil)| {
            Border::Explicit(ExplicitPadding {
                before,
                after,
                ceil,
            })
        }),
    ];
    let conv = (1usize..3, simple_dim(), border).prop_map(|(dilation, kernel, border)| ConvDim {
        dilation,
        kernel,
        border,
    });
    prop_oneof![
        8 => simple_dim(),
        1 => (1usize..4, simple_dim(), option::of(conv), 0usize..2).prop_map(
            |(stride, over, conv, offset)| Dim::Affine(Box::new(AffineDim {
                stride,
                over,
                conv,
                offset,
            }))
        ),
        1 => vec(simple_dim(), 1..4).prop_map(Dim::Concat),
    ]
}

fn any_row() -> impl Strategy<Value = Row> {
    (
        vec(any_dim(), 0..3),
        option::weighted(0.7, (0..N_ROW_VARS).prop_map(RowVarId)),
        vec(any_dim(), 0..3),
    )
        .prop_map(|(leading, var, trailing)| Row {
            leading,
            var,
            trailing,
        })
}

fn any_constraint() -> impl Strategy<Value = Constraint> {
    prop_oneof![
        3 => (any_dim(), any_dim()).prop_map(|(a, b)| Constraint::DimEq(a, b)),
        3 => (any_dim(), any_dim()).prop_map(|(res, opnd)| Constraint::DimLe { res, opnd }),
        1 => (any_dim(), 0usize..4).prop_map(|(dim, size)| Constraint::AtLeast { dim, size }),
        4 => (any_row(), any_row()).prop_map(|(a, b)| Constraint::RowEq(a, b)),
        6 => (any_row(), any_row()).prop_map(|(res, opnd)| Constraint::RowLe { res, opnd }),
        1 => (vec(any_row(), 1..3), any_dim(), 0usize..4).prop_map(|(rows, total, coefficient)| {
            Constraint::TotalElems {
                rows,
                total,
                coefficient,
            }
        }),
        1 => (vec(any_row(), 1..3), vec(any_dim(), 0..4))
            .prop_map(|(rows, dims)| Constraint::Exact { rows, dims }),
    ]
}

fn any_leaf() -> impl Strategy<Value = Leaf> {
    (any_row(), any_row(), any_row(), any::<bool>()).prop_map(|(batch, input, output, is_param)| {
        Leaf {
            label: "leaf".to_owned(),
            shape: Shape {
                batch,
                input,
                output,
            },
            is_param,
        }
    })
}

proptest! {
    #![proptest_config(config(30_000))]

    #[test]
    fn solving_and_closing_terminate_by_reasoning(
        constraints in vec(any_constraint(), 1..8),
        leaves in vec(any_leaf(), 0..3),
        discardable in vec((0..N_DIM_VARS).prop_map(DimVar), 0..2),
    ) {
        let mut solver = Solver::new();
        for _ in 0..N_DIM_VARS {
            solver.vars().dim();
        }
        for _ in 0..N_ROW_VARS {
            solver.vars().row();
        }
        solver.add_discardable(discardable);
        // Errors are fine (most of these sets are unsatisfiable); giving up is not.
        if let Err(err) = solver.add(constraints).and_then(|()| solver.close(&leaves)) {
            prop_assert!(
                !err.message.starts_with("shape inference did not converge"),
                "the step budget stopped the solver: {err}"
            );
        }
    }
}
