//! Local accumulators: a reduction keeps its running value in a scalar local instead of
//! reading and writing the node's cell at every step.
//!
//! A top-level perfect nest storing a node that is not virtual, `n[w] := n[w] ⊕ e` with `e`
//! not reading `n`, inside loops some of which `w` does not use (reduction loops), becomes
//! `local acc := n[w]; for reductions… { acc := acc ⊕ e }; n[w] := acc` inside the other loops:
//! the reduction loops move innermost, each group keeping its order. The interchange is legal
//! because the nest is perfect and its one store accumulates: iterations touch each other only
//! through `n`. It reorders the contributions a cell receives only when `w` can give one cell
//! for two assignments of its variables (not one distinct variable per axis); then a float sum
//! may round differently. The local has the node's precision, so every step rounds as the store
//! did.
//!
//! Not when the innermost reduction loop would read an operand with a stride while a kept loop
//! stores consecutive cells and reads the operands it moves with smaller strides (a sum over a
//! middle axis, a bias's gradient summed over the rows): that loop then runs innermost instead,
//! the nest accumulating in place, and vector units add neighbouring cells' terms at once; the
//! reduction loops then run outside the innermost kept loops that store at most 8 KiB of
//! distinct cells, so that consecutive stores go to different cells.
//!
//! When a fill of `n` directly precedes the nest, `n` has no margins, and the other loops store
//! every cell exactly once, the local starts from the fill's value and the fill is dropped.

use super::gemm::{flat_coefficients, injective};
use super::{Fresh, PerfectNest, covers_each_cell_once, fill_constant, reads_node, stmt_reads};
use crate::loops::{Index, LoopVar, Scalar, Stmt, Var};
use crate::node::MemoryMode;
use crate::routine::Routine;

/// `routine` with every reduction nest it can rewrite accumulating into a local.
pub fn local_accumulators(mut routine: Routine) -> Routine {
    // The statements move through the pass: those it leaves alone are not copied.
    let stmts = std::mem::take(&mut routine.body);
    let mut fresh = Fresh::new(&stmts);
    let mut body: Vec<Stmt> = Vec::with_capacity(stmts.len());
    for stmt in stmts {
        match accumulator(&stmt, body.last(), &routine, &mut fresh) {
            Some((rewritten, drops_fill)) => {
                if drops_fill {
                    body.pop();
                }
                body.extend(rewritten);
            }
            None => body.push(stmt),
        }
    }
    routine.body = body;
    routine
}

/// The rewritten nest, and whether it replaces the fill `before` it.
fn accumulator(
    stmt: &Stmt,
    before: Option<&Stmt>,
    routine: &Routine,
    fresh: &mut Fresh,
) -> Option<(Vec<Stmt>, bool)> {
    let nest = PerfectNest::of(stmt)?;
    let node = routine.nodes.get(&nest.node)?;
    if node.memory_mode == Some(MemoryMode::Virtual) {
        return None;
    }
    let Scalar::Binop(accum, own, value) = nest.value else {
        return None;
    };
    if **own != Scalar::Get(node.id, nest.index.to_vec())
        || reads_node(value, node.id)
        || nest.pre.iter().any(|s| stmt_reads(s).contains(&node.id))
        || !nest.pre_is_self_contained(false)
    {
        return None;
    }
    let written = nest.written_vars();
    let (outer, reductions): (Vec<Loop>, Vec<Loop>) = nest
        .loops
        .iter()
        .partition(|(var, _)| written.contains(var));
    if reductions.is_empty() {
        return None;
    }
    if let Some(in_place) = strided_reduction(&nest, &outer, &reductions, routine) {
        return Some((in_place, false));
    }
    let start = match before {
        Some(Stmt::Fill {
            node: filled,
            value,
        }) if *filled == node.id
            && node.padding.iter().all(|(l, r)| *l == 0 && *r == 0)
            && covers_each_cell_once(nest.index, &outer, &node.dims) =>
        {
            fill_constant(*value, node.precision)
        }
        _ => None,
    };
    let id = fresh.local();
    let mut inner = nest.pre.to_vec();
    inner.push(Stmt::SetLocal {
        id,
        value: Scalar::Binop(*accum, Box::new(Scalar::Local(id)), value.clone()),
    });
    let mut body = vec![Stmt::Local {
        id,
        precision: node.precision,
        value: start.map_or_else(|| (**own).clone(), Scalar::Const),
    }];
    body.extend(wrap(&reductions, inner));
    body.push(Stmt::Set {
        node: node.id,
        index: nest.index.to_vec(),
        value: Scalar::Local(id),
    });
    Some((wrap(&outer, body), start.is_some()))
}

/// A reduction whose innermost loop reads every operand with a stride, while a kept loop stores
/// consecutive cells and reads with smaller strides (a sum over a middle axis): the nest
/// accumulating in place with that kept loop innermost, so that compiled code runs the sums of neighbouring cells side by side in
/// vectors. Each cell still receives its terms in the order it did.
fn strided_reduction(
    nest: &PerfectNest,
    outer: &[Loop],
    reductions: &[Loop],
    routine: &Routine,
) -> Option<Vec<Stmt>> {
    let stride_of = |index: &[Index], node, var: LoopVar| {
        let dims = routine.nodes.get(&node)?.buffer_dims();
        flat_coefficients(index, &dims)
            .into_iter()
            .find(|(v, _)| *v == Var::Loop(var))
            .map(|(_, c)| c)
    };
    let &unit = outer
        .iter()
        .find(|(var, _)| stride_of(nest.index, nest.node, *var) == Some(1))?;
    let (innermost, _) = *reductions.last()?;
    // Worth it when every operand the kept loop moves reads the reduction with a stride larger
    // than the kept loop's (it then reads it consecutively), or (a bias) not at all and the kept
    // loop with stride 1; one the kept loop does not move is a scalar to its vectors. Some
    // operand must be strided along the reduction.
    // The operands are those of the stored value and of the locals computed before it.
    let (mut worth, mut strided) = (true, false);
    let mut check = |scalar: &Scalar| {
        scalar.for_each_get(&mut |node, index| {
            if node != nest.node {
                let reduced = stride_of(index, node, innermost)
                    .unwrap_or(0)
                    .unsigned_abs();
                let kept = stride_of(index, node, unit.0).unwrap_or(0).unsigned_abs();
                worth &= match (kept, reduced) {
                    (0, _) => true,
                    (_, 0) => kept <= 1,
                    (_, 1) => false,
                    _ => kept < reduced,
                };
                strided |= reduced > 1;
            }
        });
    };
    for stmt in nest.pre {
        stmt.walk(&mut |s| s.values().for_each(&mut check));
    }
    check(nest.value);
    if !(worth && strided) {
        return None;
    }
    let others: Vec<Loop> = outer
        .iter()
        .filter(|(var, _)| *var != unit.0)
        .copied()
        .collect();
    // Each iteration of a reduction loop reads and writes back the cells the loops inside it
    // store: the reductions run outside as many of the innermost kept loops as store few cells
    // (they stay in the first-level cache), so that consecutive stores go to different cells
    // instead of each waiting for the store before it to the same cell. Those kept loops store
    // distinct cells (a strided convolution's gradient adds its windows' cells, which overlap
    // across windows but not within one): each cell's terms keep their order.
    let dims = routine.nodes[&nest.node].buffer_dims();
    let size = routine.nodes[&nest.node].precision.size_in_bytes();
    let mut split = others.len();
    let mut cells = unit.1;
    while split > 0 {
        let wider = cells.saturating_mul(others[split - 1].1);
        let inside: Vec<Loop> = others[split - 1..].iter().chain([&unit]).copied().collect();
        if wider.saturating_mul(size) > SMALL_BLOCK_BYTES || !injective(nest.index, &dims, &inside)
        {
            break;
        }
        split -= 1;
        cells = wider;
    }
    let loops: Vec<Loop> = others[..split]
        .iter()
        .chain(reductions)
        .chain(&others[split..])
        .chain([&unit])
        .copied()
        .collect();
    let mut body = nest.pre.to_vec();
    body.push(Stmt::Set {
        node: nest.node,
        index: nest.index.to_vec(),
        value: nest.value.clone(),
    });
    Some(wrap(&loops, body))
}

/// The most bytes of stored cells a strided reduction keeps inside its reduction loops.
const SMALL_BLOCK_BYTES: usize = 8192;

/// A loop's variable and range.
type Loop = (LoopVar, usize);

/// `body` inside `loops`, the first outermost.
fn wrap(loops: &[Loop], body: Vec<Stmt>) -> Vec<Stmt> {
    loops.iter().rev().fold(body, |body, &(var, range)| {
        vec![Stmt::For { var, range, body }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LocalId};
    use crate::node::{NodeId, TensorNode};
    use crate::ops::Binop;
    use crate::precision::Precision;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    /// How [`maxima`] reads `n0`.
    #[derive(Clone, Copy)]
    enum Read {
        /// `n0[l0, l1]` of a 2×3 node.
        Rows,
        /// `n0[l1, l0]` of a 3×2 node.
        Columns,
        /// `n0[l0, l1, l1]` of a 2×3×3 node.
        Diagonals,
    }

    /// `n1[l0] := n1[l0] max n0[…]` inside `for l1 { for l0 }`, after `fill`: maxima of rows,
    /// columns or diagonals.
    fn maxima(fill: Option<f64>, read: Read) -> Routine {
        let mut body: Vec<Stmt> = fill
            .map(|value| Stmt::Fill {
                node: NodeId(1),
                value,
            })
            .into_iter()
            .collect();
        body.extend(wrap(
            &[(LoopVar(1), 3), (LoopVar(0), 2)],
            vec![Stmt::Set {
                node: NodeId(1),
                index: vec![at(0)],
                value: Scalar::Binop(
                    Binop::Max,
                    Box::new(Scalar::Get(NodeId(1), vec![at(0)])),
                    Box::new(Scalar::Get(
                        NodeId(0),
                        match read {
                            Read::Rows => vec![at(0), at(1)],
                            Read::Columns => vec![at(1), at(0)],
                            Read::Diagonals => vec![at(0), at(1), at(1)],
                        },
                    )),
                ),
            }],
        ));
        Routine {
            name: "r".to_owned(),
            nodes: [
                TensorNode::new(
                    0,
                    "x",
                    Precision::I32,
                    match read {
                        Read::Rows => &[2, 3],
                        Read::Columns => &[3, 2],
                        Read::Diagonals => &[2, 3, 3],
                    },
                ),
                TensorNode::new(1, "m", Precision::I32, &[2]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body,
        }
    }

    fn shown(routine: &Routine) -> String {
        routine.body.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_reduction_moves_innermost_and_the_fill_starts_the_local() {
        // The integer node filled with −∞ holds i32::MIN: the local starts there.
        let rewritten = local_accumulators(maxima(Some(f64::NEG_INFINITY), Read::Rows));
        assert_eq!(
            shown(&rewritten),
            "for l0 in 0..2 {\n  local v0: i32 := -2147483648\n  for l1 in 0..3 {\n    \
             v0 := max(v0, n0[l0, l1])\n  }\n  n1[l0] := v0\n}\n"
        );
    }

    #[test]
    fn without_a_fill_the_local_starts_from_the_cell() {
        let rewritten = local_accumulators(maxima(None, Read::Rows));
        assert_eq!(
            shown(&rewritten),
            "for l0 in 0..2 {\n  local v0: i32 := n1[l0]\n  for l1 in 0..3 {\n    \
             v0 := max(v0, n0[l0, l1])\n  }\n  n1[l0] := v0\n}\n"
        );
    }

    #[test]
    fn a_reduction_reading_with_a_stride_accumulates_in_place_beside_its_neighbours() {
        // Column maxima: the reduction reads down a column, the kept loop stores consecutive
        // cells; it goes innermost, the fill stays, no local.
        let column = maxima(Some(f64::NEG_INFINITY), Read::Columns);
        let rewritten = local_accumulators(column.clone());
        assert_eq!(
            shown(&rewritten),
            "fill n1 with -inf\nfor l1 in 0..3 {\n  for l0 in 0..2 {\n    \
             n1[l0] := max(n1[l0], n0[l1, l0])\n  }\n}\n"
        );
    }

    /// `n1[l0, l2] := n1[l0, l2] + n0[l1, l0, l2]` inside `for l0 { for l1 { for l2 } }`: sums
    /// of `k` planes of `rows × 4` cells.
    fn plane_sums(rows: usize, k: usize) -> Routine {
        let body = wrap(
            &[(LoopVar(0), rows), (LoopVar(1), k), (LoopVar(2), 4)],
            vec![Stmt::Set {
                node: NodeId(1),
                index: vec![at(0), at(2)],
                value: Scalar::Binop(
                    Binop::Add,
                    Box::new(Scalar::Get(NodeId(1), vec![at(0), at(2)])),
                    Box::new(Scalar::Get(NodeId(0), vec![at(1), at(0), at(2)])),
                ),
            }],
        );
        Routine {
            name: "r".to_owned(),
            nodes: [
                TensorNode::new(0, "x", Precision::F32, &[k, rows, 4]),
                TensorNode::new(1, "s", Precision::F32, &[rows, 4]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body,
        }
    }

    #[test]
    fn a_strided_reduction_into_few_cells_runs_outermost() {
        // 2 × 4 cells stay in the cache: each plane's pass over them stores different cells one
        // after another, where a row's pass would store its 4 cells k times in a row.
        assert_eq!(loop_order(&local_accumulators(plane_sums(2, 8))), [1, 0, 2]);
        // 4096 × 4 cells of f32 (64 KiB) do not: the rows stay outside, for threads to share.
        assert_eq!(
            loop_order(&local_accumulators(plane_sums(4096, 8))),
            [0, 1, 2]
        );
    }

    /// The loop variables of `routine`'s nests, outermost first.
    fn loop_order(routine: &Routine) -> Vec<u32> {
        let mut order = Vec::new();
        for stmt in &routine.body {
            stmt.walk(&mut |s| {
                if let Stmt::For { var, .. } = s {
                    order.push(var.0);
                }
            });
        }
        order
    }

    #[test]
    fn a_strided_reduction_runs_outside_the_kept_loops_of_a_small_window() {
        // A strided window's gradient: n1[2·l0 + l1, l2] += n0[l0, l3] · w[l3, l1, l2], the
        // windows (l1, l2) overlapping from one l0 to the next.
        let window = || Index {
            terms: smallvec::smallvec![(2, Var::Loop(LoopVar(0))), (1, Var::Loop(LoopVar(1)))],
            offset: 0,
        };
        let gradient = |rows: usize| {
            let body = wrap(
                &[
                    (LoopVar(0), rows),
                    (LoopVar(1), 3),
                    (LoopVar(3), 8),
                    (LoopVar(2), 4),
                ],
                vec![Stmt::Set {
                    node: NodeId(1),
                    index: vec![window(), at(2)],
                    value: Scalar::Binop(
                        Binop::Add,
                        Box::new(Scalar::Get(NodeId(1), vec![window(), at(2)])),
                        Box::new(Scalar::Binop(
                            Binop::Mul,
                            Box::new(Scalar::Get(NodeId(0), vec![at(0), at(3)])),
                            Box::new(Scalar::Get(NodeId(2), vec![at(3), at(1), at(2)])),
                        )),
                    ),
                }],
            );
            routine_of(
                vec![
                    TensorNode::new(0, "dy", Precision::F32, &[rows, 8]),
                    TensorNode::new(1, "dx", Precision::F32, &[2 * rows + 1, 4]),
                    TensorNode::new(2, "w", Precision::F32, &[8, 3, 4]),
                ],
                body,
            )
        };
        // One window's 3 × 4 cells are few: the reduction runs outside them, so that its
        // consecutive stores go to different cells; all 4096 windows' cells are not.
        assert_eq!(
            loop_order(&local_accumulators(gradient(4096))),
            [0, 3, 1, 2]
        );
        // Two windows' cells are few too, but they overlap: the reduction stays inside the
        // window loop, so that a shared cell receives its terms in the order it did.
        assert_eq!(loop_order(&local_accumulators(gradient(2))), [0, 3, 1, 2]);
    }

    #[test]
    fn a_kept_loop_reading_with_a_larger_stride_stays_outside() {
        // Diagonal maxima: the reduction reads with stride 4, the kept loop with stride 9, so
        // moving it innermost would not help; the reduction gets a local as usual.
        let rewritten = local_accumulators(maxima(Some(f64::NEG_INFINITY), Read::Diagonals));
        assert_eq!(
            shown(&rewritten),
            "for l0 in 0..2 {\n  local v0: i32 := -2147483648\n  for l1 in 0..3 {\n    \
             v0 := max(v0, n0[l0, l1, l1])\n  }\n  n1[l0] := v0\n}\n"
        );
    }

    /// A routine of `nodes` running `body`.
    fn routine_of(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            statics: Default::default(),
            body,
        }
    }

    #[test]
    fn operands_read_by_locals_before_the_store_count_too() {
        // Row sums of squares, the square computed in a local: the reduction reads its row
        // consecutively, so it runs innermost into a local, whatever loop order the nest came in.
        let square = Scalar::Binop(
            Binop::Mul,
            Box::new(Scalar::Local(LocalId(0))),
            Box::new(Scalar::Local(LocalId(0))),
        );
        let body = wrap(
            &[(LoopVar(1), 3), (LoopVar(0), 2)],
            vec![
                Stmt::Local {
                    id: LocalId(0),
                    precision: Precision::F32,
                    value: Scalar::Get(NodeId(0), vec![at(0), at(1)]),
                },
                Stmt::Set {
                    node: NodeId(1),
                    index: vec![at(0)],
                    value: Scalar::Binop(
                        Binop::Add,
                        Box::new(Scalar::Get(NodeId(1), vec![at(0)])),
                        Box::new(square),
                    ),
                },
            ],
        );
        let routine = routine_of(
            vec![
                TensorNode::new(0, "x", Precision::F32, &[2, 3]),
                TensorNode::new(1, "s", Precision::F32, &[2]),
            ],
            body,
        );
        assert_eq!(
            shown(&local_accumulators(routine.clone())),
            "for l0 in 0..2 {\n  local v1: f32 := n1[l0]\n  for l1 in 0..3 {\n    \
             local v0: f32 := n0[l0, l1]\n    v1 := (v1 + (v0 * v0))\n  }\n  n1[l0] := v1\n}\n"
        );
    }

    #[test]
    fn operands_moved_by_one_loop_only_leave_a_strided_reduction_in_place() {
        // Column sums of (x + bias)·scale (a bias gradient's shape, scaled per row like a
        // normalization): the bias moves with the kept loop only, the scale with the reduction
        // only, a scalar to the kept loop's vectors; so the kept loop still goes innermost.
        let body = wrap(
            &[(LoopVar(0), 2), (LoopVar(1), 3)],
            vec![Stmt::Set {
                node: NodeId(1),
                index: vec![at(0)],
                value: Scalar::Binop(
                    Binop::Add,
                    Box::new(Scalar::Get(NodeId(1), vec![at(0)])),
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Binop(
                            Binop::Add,
                            Box::new(Scalar::Get(NodeId(0), vec![at(1), at(0)])),
                            Box::new(Scalar::Get(NodeId(2), vec![at(0)])),
                        )),
                        Box::new(Scalar::Get(NodeId(3), vec![at(1)])),
                    )),
                ),
            }],
        );
        let routine = routine_of(
            vec![
                TensorNode::new(0, "x", Precision::F32, &[3, 2]),
                TensorNode::new(1, "s", Precision::F32, &[2]),
                TensorNode::new(2, "bias", Precision::F32, &[2]),
                TensorNode::new(3, "scale", Precision::F32, &[3]),
            ],
            body,
        );
        assert_eq!(
            shown(&local_accumulators(routine.clone())),
            "for l1 in 0..3 {\n  for l0 in 0..2 {\n    \
             n1[l0] := (n1[l0] + ((n0[l1, l0] + n2[l0]) * n3[l1]))\n  }\n}\n"
        );
    }
}
