//! Axes of size 0 in projections and lowering: a reduction over nothing is a reduction (its
//! cells keep the neutral element, so the written map is not surjective), a result without cells
//! is covered by nothing, and a nest over an empty axis is not emitted.

use std::collections::HashMap;

use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, NodeId, Precision, Projections, Rhs, Stmt, Symbol,
    TensorNode, Unop, lower,
};

const I: Symbol = Symbol(0);
const J: Symbol = Symbol(1);

fn it(symbol: Symbol) -> AxisIndex {
    AxisIndex::Iterator(symbol)
}

/// `out[j] =: x[i, j]` reduced over `i`, with `i` of `rows` and `j` of `columns` positions.
fn column_reduction(rows: usize, columns: usize) -> Projections {
    Projections {
        product_space: vec![Factor::single(J, columns), Factor::single(I, rows)],
        lhs_dims: vec![columns],
        rhs_dims: vec![vec![rows, columns]],
        lhs_index: vec![it(J)],
        rhs_index: vec![vec![it(I), it(J)]],
        lhs_padding: vec![(0, 0)],
        rhs_padding: vec![vec![(0, 0); 2]],
        label: "i, j => j".to_owned(),
    }
}

#[test]
fn a_reduction_over_an_empty_axis_writes_no_cell() {
    let record = column_reduction(0, 3);
    assert_eq!(record.reduction_symbols(), vec![I]);
    assert!(
        !record.is_surjective(),
        "no point of the product space writes"
    );
    assert!(record.is_injective(), "nothing is written twice");
}

#[test]
fn a_result_without_cells_is_covered_even_by_an_empty_product_space() {
    let record = column_reduction(0, 0);
    assert!(record.is_surjective());
    assert!(record.is_injective());
}

#[test]
fn a_loop_of_one_trip_still_reduces_nothing() {
    let record = column_reduction(1, 3);
    assert!(record.reduction_symbols().is_empty());
    assert!(record.is_surjective() && record.is_injective());
}

fn nodes(rows: usize, columns: usize) -> HashMap<NodeId, TensorNode> {
    [
        TensorNode::new(0, "x", Precision::F64, &[rows, columns]),
        TensorNode::new(1, "out", Precision::F64, &[columns]),
    ]
    .into_iter()
    .map(|node| (node.id, node))
    .collect()
}

fn reduction(accum: Binop, rows: usize, columns: usize) -> Assignment {
    Assignment::Accum {
        initialize_neutral: true,
        accum,
        lhs: NodeId(1),
        rhs: Rhs::Unop(Unop::Identity, NodeId(0)),
        projections: column_reduction(rows, columns),
    }
}

#[test]
fn lowering_an_empty_reduction_leaves_only_the_neutral_fill() {
    for (accum, neutral) in [
        (Binop::Add, 0.0),
        (Binop::Max, f64::NEG_INFINITY),
        (Binop::Mul, 1.0),
    ] {
        let stmts = lower(&reduction(accum, 0, 3), &nodes(0, 3)).unwrap();
        assert_eq!(
            stmts,
            vec![Stmt::Fill {
                node: NodeId(1),
                value: neutral
            }],
            "{accum}"
        );
    }
}

#[test]
fn lowering_into_a_result_without_cells_emits_nothing() {
    let stmts = lower(&reduction(Binop::Add, 4, 0), &nodes(4, 0)).unwrap();
    assert!(stmts.is_empty(), "{stmts:?}");
}
