//! Loop order for vector units: in a top-level perfect nest that stores each cell once (its value
//! does not read the stored node), the loop that moves the store by one cell runs innermost, so
//! that compiled code stores consecutive cells and can use vector instructions.
//!
//! Every iteration computes its cell from the loop values alone, so the order changes nothing
//! the interpreter computes.

use super::{PerfectNest, reads_node, stmt_reads};
use crate::loops::{Stmt, Var};
use crate::optimize::gemm::flat_coefficients;
use crate::routine::Routine;

/// `routine` with its plain-store nests ordered for unit-stride stores.
pub fn order_loops(routine: &Routine) -> Routine {
    let body = routine
        .body
        .iter()
        .map(|stmt| reordered(stmt, routine).unwrap_or_else(|| stmt.clone()))
        .collect();
    Routine {
        body,
        ..routine.clone()
    }
}

fn reordered(stmt: &Stmt, routine: &Routine) -> Option<Stmt> {
    let nest = PerfectNest::of(stmt)?;
    if reads_node(nest.value, nest.node)
        || nest.pre.iter().any(|s| stmt_reads(s).contains(&nest.node))
    {
        return None;
    }
    let dims = routine.nodes.get(&nest.node)?.buffer_dims();
    let unit = flat_coefficients(nest.index, &dims)
        .into_iter()
        .find_map(|(var, c)| match var {
            Var::Loop(l) if c == 1 => Some(l),
            _ => None,
        })?;
    let position = nest.loops.iter().position(|(var, _)| *var == unit)?;
    if position + 1 == nest.loops.len() {
        return None;
    }
    let mut loops = nest.loops.clone();
    let innermost = loops.remove(position);
    loops.push(innermost);
    let mut body: Vec<Stmt> = nest.pre.to_vec();
    body.push(Stmt::Set {
        node: nest.node,
        index: nest.index.to_vec(),
        value: nest.value.clone(),
    });
    for (var, range) in loops.into_iter().rev() {
        body = vec![Stmt::For { var, range, body }];
    }
    body.pop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LoopVar, Scalar};
    use crate::node::{NodeId, TensorNode};
    use crate::precision::Precision;

    fn nest(outer: (u32, usize), inner: (u32, usize), store: Vec<Index>, value: Scalar) -> Stmt {
        Stmt::For {
            var: LoopVar(outer.0),
            range: outer.1,
            body: vec![Stmt::For {
                var: LoopVar(inner.0),
                range: inner.1,
                body: vec![Stmt::Set {
                    node: NodeId(1),
                    index: store,
                    value,
                }],
            }],
        }
    }

    #[test]
    fn a_transposing_copy_stores_consecutive_cells_innermost() {
        let (i, j) = (LoopVar(0), LoopVar(1));
        // n1[j, i] := n0[i, j] over i in 0..3 (outer), j in 0..4 (inner).
        let read = Scalar::Get(NodeId(0), vec![Index::var(i, 0), Index::var(j, 0)]);
        let before = nest(
            (0, 3),
            (1, 4),
            vec![Index::var(j, 0), Index::var(i, 0)],
            read.clone(),
        );
        let routine = Routine {
            name: "t".to_owned(),
            nodes: [
                TensorNode::new(0, "a", Precision::F32, &[3, 4]),
                TensorNode::new(1, "b", Precision::F32, &[4, 3]),
            ]
            .map(|n| (n.id, n))
            .into(),
            statics: Default::default(),
            body: vec![before.clone()],
        };
        let after = order_loops(&routine);
        assert_eq!(
            after.body,
            vec![nest(
                (1, 4),
                (0, 3),
                vec![Index::var(j, 0), Index::var(i, 0)],
                read
            )]
        );
        assert_eq!(
            after.body[0].to_string(),
            "for l1 in 0..4 {\n  for l0 in 0..3 {\n    n1[l1, l0] := n0[l0, l1]\n  }\n}\n"
        );
        // Already in order, or accumulating (which reads the stored node): left alone.
        assert_eq!(order_loops(&after).body, after.body);
        let accumulating = nest(
            (0, 3),
            (1, 4),
            vec![Index::var(j, 0), Index::var(i, 0)],
            Scalar::Get(NodeId(1), vec![Index::var(j, 0), Index::var(i, 0)]),
        );
        let kept = Routine {
            body: vec![accumulating.clone()],
            ..routine
        };
        assert_eq!(order_loops(&kept).body, vec![accumulating]);
    }
}
