//! Assignments built by hand for the benchmarks that time the IR and the backends on routines
//! of their own (`rcannl-ir`'s `optimize`, `rcannl-backends`' `cpu`, `rcannl-gpu`'s `gpu`),
//! each including this file.

use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, NodeId, Precision, Projections, Rhs, Symbol, TensorNode,
};

/// The iterator of symbol `s`.
pub fn it(s: u32) -> AxisIndex {
    AxisIndex::Iterator(Symbol(s))
}

/// An f32 node `t{id}` of `dims`.
pub fn f32_node(id: u32, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, &format!("t{id}"), Precision::F32, dims)
}

/// An `=:` assignment of `rhs` into node `lhs` over the product space `ranges` (symbol `i` of
/// range `ranges[i]`), reading `reads` (the dims and index of each operand).
pub fn accumulate(
    accum: Binop,
    ranges: &[usize],
    lhs: (u32, Vec<usize>, Vec<AxisIndex>),
    rhs: Rhs,
    reads: Vec<(Vec<usize>, Vec<AxisIndex>)>,
) -> Assignment {
    Assignment::Accum {
        initialize_neutral: true,
        accum,
        lhs: NodeId(lhs.0),
        rhs,
        projections: Projections {
            product_space: ranges
                .iter()
                .enumerate()
                .map(|(i, r)| Factor::single(Symbol(i as u32), *r))
                .collect(),
            lhs_padding: vec![(0, 0); lhs.1.len()],
            rhs_padding: reads.iter().map(|(d, _)| vec![(0, 0); d.len()]).collect(),
            lhs_dims: lhs.1,
            lhs_index: lhs.2,
            rhs_dims: reads.iter().map(|(d, _)| d.clone()).collect(),
            rhs_index: reads.into_iter().map(|(_, i)| i).collect(),
            label: "bench".to_owned(),
        },
    }
}
