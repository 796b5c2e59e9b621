//! Margins filled by loops. A top-level `fill margins of n with c` becomes nests of stores over
//! the margins' slabs, two per padded axis: the cells before or after the interior on that axis,
//! inside it on every axis before and anywhere on every axis after. Each margin cell lies in
//! exactly one slab and the interior in none. As loops, the slabs split across threads and merge
//! with their neighbours like any nest (the C backend runs this before merging sibling loops: a
//! padded image's margins are then stored by the kernel that stores its interior, where the
//! fill alone was a serial pass over scattered cache lines).
//!
//! Only where a constant of the node's kind reproduces the fill's cells exactly
//! (`fill_constant`), so results keep their bits; other fills stay. Like `split_sums`, this is
//! not one of [`optimize`](super::optimize)'s passes: the fill is the compact form the GPU and
//! the interpreter run.

use std::borrow::Cow;
use std::ops::Range;

use super::{Fresh, fill_constant};
use crate::loops::{Index, Scalar, Stmt};
use crate::node::TensorNode;
use crate::routine::Routine;

/// `routine` with each top-level margin fill that a constant reproduces turned into loops;
/// `routine` itself, not a copy, where it has none.
pub fn margins_as_loops(routine: &Routine) -> Cow<'_, Routine> {
    let looped = |stmt: &Stmt| match stmt {
        Stmt::FillMargins { node, value } => {
            fill_constant(*value, routine.nodes[node].precision).is_some()
        }
        _ => false,
    };
    if !routine.body.iter().any(looped) {
        return Cow::Borrowed(routine);
    }
    let mut fresh = Fresh::new(&routine.body);
    let body = routine
        .body
        .iter()
        .flat_map(|stmt| match stmt {
            Stmt::FillMargins { node, value } => {
                let info = &routine.nodes[node];
                match fill_constant(*value, info.precision) {
                    Some(constant) => slabs(info, constant, &mut fresh),
                    None => vec![stmt.clone()],
                }
            }
            _ => vec![stmt.clone()],
        })
        .collect();
    Cow::Owned(Routine {
        name: routine.name.clone(),
        nodes: routine.nodes.clone(),
        statics: routine.statics.clone(),
        body,
    })
}

/// The margins of `info` as slabs, each a range of positions per axis of its buffer: two per
/// padded axis, the cells before or after the interior on that axis, inside it on every axis
/// before and anywhere on every axis after. Each margin cell lies in exactly one slab and no
/// interior cell in any; empty slabs are left out.
pub fn margin_slabs(info: &TensorNode) -> Vec<Vec<Range<usize>>> {
    let dims = info.buffer_dims();
    let interior: Vec<Range<usize>> = info
        .padding
        .iter()
        .zip(&info.dims)
        .map(|((before, _), dim)| *before..before + dim)
        .collect();
    let mut slabs = Vec::new();
    for (axis, inside) in interior.iter().enumerate() {
        for margin in [0..inside.start, inside.end..dims[axis]] {
            let slab: Vec<Range<usize>> = (0..dims.len())
                .map(|a| match a.cmp(&axis) {
                    std::cmp::Ordering::Less => interior[a].clone(),
                    std::cmp::Ordering::Equal => margin.clone(),
                    std::cmp::Ordering::Greater => 0..dims[a],
                })
                .collect();
            if slab.iter().all(|range| !range.is_empty()) {
                slabs.push(slab);
            }
        }
    }
    slabs
}

/// The nests storing `constant` in every margin cell of `info`, slab by slab (an axis of one
/// position gets no loop).
fn slabs(info: &TensorNode, constant: f64, fresh: &mut Fresh) -> Vec<Stmt> {
    margin_slabs(info)
        .into_iter()
        .map(|ranges| {
            let loops: Vec<_> = ranges
                .iter()
                .map(|range| (range.len() > 1).then(|| fresh.var()))
                .collect();
            let index = ranges
                .iter()
                .zip(&loops)
                .map(|(range, var)| match var {
                    Some(var) => Index::var(*var, range.start as i64),
                    None => Index::constant(range.start as i64),
                })
                .collect();
            let store = Stmt::Set {
                node: info.id,
                index,
                value: Scalar::Const(constant),
            };
            ranges
                .iter()
                .zip(&loops)
                .rev()
                .fold(store, |body, (range, var)| match var {
                    Some(var) => Stmt::For {
                        var: *var,
                        range: range.len(),
                        body: vec![body],
                    },
                    None => body,
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeId;
    use crate::precision::Precision;

    fn padded(
        padding: Vec<(usize, usize)>,
        dims: &[usize],
        precision: Precision,
        value: f64,
    ) -> Routine {
        let mut node = TensorNode::new(0, "image", precision, dims);
        node.padding = padding;
        Routine {
            name: "margins".to_owned(),
            nodes: [(NodeId(0), node)].into_iter().collect(),
            statics: Default::default(),
            body: vec![Stmt::FillMargins {
                node: NodeId(0),
                value,
            }],
        }
    }

    /// How many times each cell of node 0's buffer is stored, the body's loops run in full.
    fn stores(routine: &Routine) -> Vec<usize> {
        fn walk(
            stmts: &[Stmt],
            at: &mut Vec<(crate::loops::LoopVar, i64)>,
            dims: &[usize],
            counts: &mut [usize],
        ) {
            for stmt in stmts {
                match stmt {
                    Stmt::For { var, range, body } => {
                        for i in 0..*range as i64 {
                            at.push((*var, i));
                            walk(body, at, dims, counts);
                            at.pop();
                        }
                    }
                    Stmt::Set { index, .. } => {
                        let cell = index.iter().zip(dims).fold(0, |flat, (index, dim)| {
                            let value = index.offset
                                + index
                                    .terms
                                    .iter()
                                    .map(|(c, v)| {
                                        let crate::loops::Var::Loop(v) = v else {
                                            panic!()
                                        };
                                        c * at.iter().find(|(w, _)| w == v).unwrap().1
                                    })
                                    .sum::<i64>();
                            assert!((0..*dim as i64).contains(&value));
                            flat * dim + value as usize
                        });
                        counts[cell] += 1;
                    }
                    other => panic!("not a store: {other:?}"),
                }
            }
        }
        let dims = routine.nodes[&NodeId(0)].buffer_dims();
        let mut counts = vec![0; dims.iter().product()];
        walk(&routine.body, &mut Vec::new(), &dims, &mut counts);
        counts
    }

    #[test]
    fn every_margin_cell_is_stored_once_and_no_interior_cell() {
        // Margins on both sides of an axis, on none, on one side only, and around one cell.
        let routine = padded(
            vec![(1, 2), (0, 0), (0, 1), (1, 1)],
            &[3, 4, 5, 1],
            Precision::F32,
            f64::NEG_INFINITY,
        );
        let looped = margins_as_loops(&routine);
        let info = &routine.nodes[&NodeId(0)];
        let dims = info.buffer_dims();
        let counts = stores(&looped);
        let mut cell = 0;
        for a in 0..dims[0] {
            for b in 0..dims[1] {
                for c in 0..dims[2] {
                    for d in 0..dims[3] {
                        let inside = (1..4).contains(&a) && b < 4 && c < 5 && d == 1;
                        assert_eq!(counts[cell], usize::from(!inside), "{:?}", [a, b, c, d]);
                        cell += 1;
                    }
                }
            }
        }
        for stmt in &looped.body {
            let mut value = None;
            let mut inner = stmt;
            while let Stmt::For { body, .. } = inner {
                inner = &body[0];
            }
            if let Stmt::Set { value: v, .. } = inner {
                value = Some(v.clone());
            }
            assert_eq!(value, Some(Scalar::Const(f64::NEG_INFINITY)));
        }
    }

    #[test]
    fn a_fill_that_no_constant_reproduces_stays() {
        // A NaN's payload is not a number's to give back; an integer's −∞ (its least value) is.
        let nan = padded(vec![(1, 1)], &[4], Precision::F32, f64::NAN);
        let kept = margins_as_loops(&nan).into_owned().body;
        assert!(
            matches!(kept[..], [Stmt::FillMargins { value, .. }] if value.is_nan()),
            "{kept:?}"
        );
        let least = padded(vec![(1, 1)], &[4], Precision::I32, f64::NEG_INFINITY);
        assert_eq!(stores(&margins_as_loops(&least)), vec![1, 0, 0, 0, 0, 1]);
    }
}
