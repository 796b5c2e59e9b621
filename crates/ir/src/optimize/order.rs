//! Loop order for vector units and caches: in a top-level perfect nest that stores each cell once
//! (its value reads no cell of the stored node but the one it stores, as `g += …` does), the
//! loop that moves the store by one cell runs
//! innermost, so that compiled code stores consecutive cells and can use vector instructions.
//! When an operand is read transposed (it moves by one cell along another loop, and by at least a
//! tile along the store's), the two loops run in tiles of [`TILE`], so that the operand's cache
//! lines are read whole while the store stays consecutive within a tile. The tile is short along
//! the store's loop because the operand's lines it reads at once lie a power of two apart in
//! typical shapes, in the same cache set.
//!
//! Every iteration computes its cell from the loop values and that cell alone, so the order
//! changes nothing the interpreter computes.

use super::{Fresh, PerfectNest, Renaming, reads_node, stmt_reads};
use crate::loops::{Index, LoopVar, Stmt, Var};
use crate::optimize::gemm::{flat_coefficients, injective};
use crate::routine::Routine;

/// The side of the square tiles a transposing nest runs in.
pub const TILE: (usize, usize) = (32, 8);

/// `routine` with its plain-store nests ordered for unit-stride stores, transposing ones tiled.
pub fn order_loops(mut routine: Routine) -> Routine {
    // The statements move through the pass: those it leaves alone are not copied.
    let stmts = std::mem::take(&mut routine.body);
    let mut fresh = Fresh::new(&stmts);
    routine.body = stmts
        .into_iter()
        .map(|stmt| reordered(&stmt, &routine, &mut fresh).unwrap_or(stmt))
        .collect();
    routine
}

fn reordered(stmt: &Stmt, routine: &Routine, fresh: &mut Fresh) -> Option<Stmt> {
    let nest = PerfectNest::of(stmt)?;
    if nest.pre.iter().any(|s| stmt_reads(s).contains(&nest.node)) {
        return None;
    }
    let dims = routine.nodes.get(&nest.node)?.buffer_dims();
    // A store that reads the stored node (a gradient's `g += …`) reads its own cell only, and
    // each iteration stores another cell, or its order matters.
    if reads_node(nest.value, nest.node)
        && (reads_other_cells(&nest) || !injective(nest.index, &dims, &nest.loops))
    {
        return None;
    }
    let unit = flat_coefficients(nest.index, &dims)
        .into_iter()
        .find_map(|(var, c)| match var {
            Var::Loop(l) if c == 1 => Some(l),
            _ => None,
        })?;
    let position = nest.loops.iter().position(|(var, _)| *var == unit)?;
    let across = transposed(&nest, unit, routine);
    if position + 1 == nest.loops.len() && across.is_none() {
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
    if let Some(across) = across {
        // across = TILE.0·across_block + across_within, unit = TILE.1·unit_block + unit_within;
        // the blocks of `across` outermost, the other loops in their order, then the tile.
        let mut renaming = Renaming::default();
        let mut split = |var: LoopVar, tile: usize| {
            let (block, within) = (fresh.var(), fresh.var());
            renaming.indices.insert(
                var,
                Index {
                    terms: smallvec::smallvec![
                        (tile as i64, Var::Loop(block)),
                        (1, Var::Loop(within))
                    ],
                    offset: 0,
                },
            );
            (block, within)
        };
        let range = |var: LoopVar| loops.iter().find(|(v, _)| *v == var).map(|(_, r)| *r);
        let (across_range, unit_range) = (range(across)?, range(unit)?);
        let (across_block, across_within) = split(across, TILE.0);
        let (unit_block, unit_within) = split(unit, TILE.1);
        body = body.iter().map(|s| renaming.stmt(s)).collect();
        let others = loops
            .iter()
            .filter(|(v, _)| *v != across && *v != unit)
            .copied();
        loops = [(across_block, across_range / TILE.0)]
            .into_iter()
            .chain(others)
            .chain([
                (unit_block, unit_range / TILE.1),
                (across_within, TILE.0),
                (unit_within, TILE.1),
            ])
            .collect();
    }
    for (var, range) in loops.into_iter().rev() {
        body = vec![Stmt::For { var, range, body }];
    }
    body.pop()
}

/// Whether the nest's value reads the stored node anywhere but at the cell it stores.
fn reads_other_cells(nest: &PerfectNest) -> bool {
    let mut other = nest.value.looks_up(nest.node);
    nest.value.for_each_get(&mut |node, index| {
        other |= node == nest.node && index != nest.index;
    });
    other
}

/// The loop to run in tiles with the store's unit-stride loop `unit`: one along which an operand
/// reads consecutive cells while it reads with a stride of at least a tile along `unit`, when
/// both loops run over whole tiles, at least two.
fn transposed(nest: &PerfectNest, unit: LoopVar, routine: &Routine) -> Option<LoopVar> {
    let tiles = |var: LoopVar, tile: usize| {
        nest.loops
            .iter()
            .any(|(v, range)| *v == var && *range >= 2 * tile && range % tile == 0)
    };
    if !tiles(unit, TILE.1) {
        return None;
    }
    let mut found = None;
    nest.value.for_each_get(&mut |node, index| {
        if found.is_some() || node == nest.node {
            return;
        }
        let Some(dims) = routine.nodes.get(&node).map(|n| n.buffer_dims()) else {
            return;
        };
        let coefficients = flat_coefficients(index, &dims);
        let stride = |var: LoopVar| {
            coefficients
                .iter()
                .find(|(v, _)| *v == Var::Loop(var))
                .map_or(0, |(_, c)| c.unsigned_abs())
        };
        if stride(unit) >= TILE.0 as u64 {
            found = nest
                .loops
                .iter()
                .map(|(v, _)| *v)
                .find(|&v| v != unit && stride(v) == 1 && tiles(v, TILE.0));
        }
    });
    found
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
        let after = order_loops(routine.clone());
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
        // Already in order: left alone.
        assert_eq!(order_loops(after.clone()).body, after.body);
        // A store reading its own cell, each iteration another (`g += …`), is ordered too.
        let own_cell = || Scalar::Get(NodeId(1), vec![Index::var(j, 0), Index::var(i, 0)]);
        let accumulating = Routine {
            body: vec![nest((0, 3), (1, 4), after_index(), own_cell())],
            ..routine.clone()
        };
        assert_eq!(
            order_loops(accumulating.clone()).body,
            vec![nest((1, 4), (0, 3), after_index(), own_cell())]
        );
        // Reading another cell of the stored node, or storing a cell more than once (a sum
        // over `l0`): the order matters, and the nest is left alone.
        let other_cell = Scalar::Get(NodeId(1), vec![Index::var(j, 0), Index::constant(0)]);
        let summed_index = vec![Index::var(j, 0), Index::constant(0)];
        let summed_value = Scalar::Get(NodeId(1), summed_index.clone());
        for kept in [
            nest((0, 3), (1, 4), after_index(), other_cell),
            nest((0, 3), (1, 4), summed_index, summed_value),
        ] {
            let routine = Routine {
                body: vec![kept.clone()],
                ..routine.clone()
            };
            assert_eq!(order_loops(routine.clone()).body, vec![kept]);
        }
    }

    /// `[l1, l0]`: the transposed store's index.
    fn after_index() -> Vec<Index> {
        vec![Index::var(LoopVar(1), 0), Index::var(LoopVar(0), 0)]
    }

    #[test]
    fn a_large_transposing_copy_runs_in_tiles() {
        let (i, j) = (LoopVar(0), LoopVar(1));
        // n1[j, i] := n0[i, j] + 1 over i in 0..64, j in 0..96: n0 moves by one cell along j and
        // by 96 cells along i, the store's unit-stride loop.
        let read = Scalar::Get(NodeId(0), vec![Index::var(i, 0), Index::var(j, 0)]);
        let plus_one = Scalar::Binop(
            crate::ops::Binop::Add,
            Box::new(read),
            Box::new(Scalar::Const(1.0)),
        );
        let routine = Routine {
            name: "t".to_owned(),
            nodes: [
                TensorNode::new(0, "a", Precision::F32, &[64, 96]),
                TensorNode::new(1, "b", Precision::F32, &[96, 64]),
            ]
            .map(|n| (n.id, n))
            .into(),
            statics: Default::default(),
            body: vec![nest(
                (0, 64),
                (1, 96),
                vec![Index::var(j, 0), Index::var(i, 0)],
                plus_one,
            )],
        };
        let after = order_loops(routine.clone());
        assert_eq!(
            after.body[0].to_string(),
            "for l2 in 0..3 {\n  for l4 in 0..8 {\n    for l3 in 0..32 {\n      \
             for l5 in 0..8 {\n        n1[32*l2+l3, 8*l4+l5] := (n0[8*l4+l5, 32*l2+l3] + 1)\n      \
             }\n    }\n  }\n}\n"
        );
        // A tiled nest is left as it is.
        assert_eq!(order_loops(after.clone()).body, after.body);
    }
}
