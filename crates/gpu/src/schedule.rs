//! How nests are laid over invocations and dispatches.
//!
//! A loop whose iterations write disjoint cells moves outward in a nest that holds nothing but
//! loops down to its body, so that more of the nest becomes invocations: a cell then receives
//! its terms in the same order (only loops that never write the same cell move, and the others
//! keep their order), while the work one invocation does shrinks.
//!
//! Every invocation's loop iterations are counted against [`ITERATION_BUDGET`]: llvmpipe
//! (lavapipe) ends a shader after 65535 iterations of all its loops together, without an error,
//! and on every GPU a long serial loop in one invocation is slow. A serial statement beyond the
//! budget runs as a sequence of dispatches, each a chunk of one of its loops, in order
//! ([`Chunked`]); what cannot be cut so is an error, never a truncated loop.

use std::collections::HashSet;

use rcannl_backends::nests::splittable;
use rcannl_ir::{LocalId, LoopVar, Routine, Stmt};

/// The loop iterations one invocation may run, all its loops together.
pub const ITERATION_BUDGET: u64 = 60_000;

/// The most dispatches one chunked statement may take.
pub const MAX_DISPATCHES: u64 = 1 << 20;

/// The loop iterations `stmts` run: each iteration of a loop counts once, with what its body
/// runs; a fill is a loop over its buffer.
pub fn iterations(routine: &Routine, stmts: &[Stmt]) -> u64 {
    stmts
        .iter()
        .map(|stmt| match stmt {
            Stmt::For { range, body, .. } => {
                (*range as u64).saturating_mul(iterations(routine, body).saturating_add(1))
            }
            Stmt::Fill { node, .. } | Stmt::FillMargins { node, .. } => {
                routine.nodes[node].buffer_len() as u64
            }
            Stmt::Gemm { nest, .. } => iterations(routine, nest),
            Stmt::Set { .. }
            | Stmt::SetVec { .. }
            | Stmt::ScatterAdd { .. }
            | Stmt::Local { .. }
            | Stmt::SetLocal { .. } => 0,
        })
        .fold(0, u64::saturating_add)
}

/// `inner` under the loops `chain`, outermost first.
fn nest(chain: &[(LoopVar, usize)], inner: &[Stmt]) -> Vec<Stmt> {
    chain
        .iter()
        .rev()
        .fold(inner.to_vec(), |body, (var, range)| {
            vec![Stmt::For {
                var: *var,
                range: *range,
                body,
            }]
        })
}

/// Whether `body` reads or sets a local it does not declare itself: such a nest carries a value
/// from one iteration to the next, and its loops keep their order.
fn uses_outer_locals(body: &[Stmt]) -> bool {
    let mut declared = HashSet::new();
    for stmt in body {
        stmt.walk(&mut |s| {
            if let Stmt::Local { id, .. } = s {
                declared.insert(*id);
            }
        });
    }
    let mut outer = false;
    let mut check = |id: LocalId| outer |= !declared.contains(&id);
    for stmt in body {
        stmt.walk(&mut |s| {
            if let Stmt::SetLocal { id, .. } = s {
                check(*id);
            }
            for value in s.values() {
                value.for_each_local(&mut check);
            }
        });
    }
    outer
}

/// `stmt` with the loops of its perfect nest (loops holding only the next loop) reordered so
/// that those whose iterations write disjoint cells come first; `None` when nothing moves.
fn hoisted(routine: &Routine, stmt: &Stmt) -> Option<Stmt> {
    let mut chain = Vec::new();
    let mut inner = std::slice::from_ref(stmt);
    while let [Stmt::For { var, range, body }] = inner {
        chain.push((*var, *range));
        inner = body;
    }
    if chain.len() < 2 || uses_outer_locals(inner) {
        return None;
    }
    let mut front = Vec::new();
    let mut rest = chain.clone();
    'pick: loop {
        for i in 0..rest.len() {
            let mut others = rest.clone();
            let candidate = others.remove(i);
            let [candidate_nest] = &nest(&[candidate], &nest(&others, inner))[..] else {
                unreachable!("one loop")
            };
            if splittable(candidate_nest, routine) {
                front.push(candidate);
                rest = others;
                continue 'pick;
            }
        }
        break;
    }
    front.extend(rest);
    if front == chain {
        return None;
    }
    nest(&front, inner).pop()
}

/// `body` with every top-level perfect nest's disjoint loops moved outward (see the module).
pub fn hoist_parallel_loops(routine: &Routine, body: &[Stmt]) -> Vec<Stmt> {
    body.iter()
        .map(|stmt| hoisted(routine, stmt).unwrap_or_else(|| stmt.clone()))
        .collect()
}

/// A serial loop statement run as a sequence of dispatches: the loops `outer` (each holding only
/// the next) decoded from the dispatch's number, then a chunk of `per_chunk` iterations of the
/// loop `var` over `body`, so that each dispatch stays within the budget. Dispatches run in
/// order, so the statement's cells receive their terms in its order.
#[derive(Debug)]
pub struct Chunked<'a> {
    pub outer: Vec<(LoopVar, usize)>,
    pub var: LoopVar,
    pub range: usize,
    pub per_chunk: usize,
    pub chunks: usize,
    pub body: &'a [Stmt],
    /// The dispatches: every position of the outer loops times the chunks.
    pub dispatches: u64,
}

/// How `stmt` runs in chunks within the budget, if its loops allow: `None` for a statement that
/// is no loop, or whose every level down to a body within the budget holds more than one loop.
pub fn chunked<'a>(routine: &Routine, stmt: &'a Stmt) -> Option<Chunked<'a>> {
    let mut outer = Vec::new();
    let mut stmt = stmt;
    loop {
        let Stmt::For { var, range, body } = stmt else {
            return None;
        };
        let per_iteration = iterations(routine, body).saturating_add(1);
        if per_iteration <= ITERATION_BUDGET {
            let per_chunk = ((ITERATION_BUDGET / per_iteration) as usize).clamp(1, *range);
            let chunks = range.div_ceil(per_chunk);
            let dispatches = outer
                .iter()
                .fold(chunks as u64, |n, (_, r): &(LoopVar, usize)| {
                    n.saturating_mul(*r as u64)
                });
            return Some(Chunked {
                outer,
                var: *var,
                range: *range,
                per_chunk,
                chunks,
                body,
                dispatches,
            });
        }
        match &body[..] {
            [inner @ Stmt::For { .. }] => {
                outer.push((*var, *range));
                stmt = inner;
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rcannl_ir::{Binop, Index, Precision, Scalar, TensorNode, Var};

    use super::*;

    /// `for i<4> { for k<3> { for j<5> { n0[i+k, j] := n0[i+k, j] + 1 } } }`: windows along the
    /// first axis overlap, the second axis moves with `j` alone.
    fn windows() -> (Routine, Stmt) {
        let node = TensorNode::new(0, "sums", Precision::F32, &[6, 5]);
        let index = vec![
            Index {
                terms: vec![(1, Var::Loop(LoopVar(0))), (1, Var::Loop(LoopVar(1)))].into(),
                offset: 0,
            },
            Index::var(LoopVar(2), 0),
        ];
        let set = Stmt::Set {
            node: node.id,
            index: index.clone(),
            value: Scalar::Binop(
                Binop::Add,
                Box::new(Scalar::Get(node.id, index)),
                Box::new(Scalar::Const(1.0)),
            ),
        };
        let stmt = nest(&[(LoopVar(0), 4), (LoopVar(1), 3), (LoopVar(2), 5)], &[set])
            .pop()
            .unwrap();
        let routine = Routine {
            name: "windows".to_owned(),
            nodes: BTreeMap::from([(node.id, node)]),
            statics: BTreeMap::new(),
            body: vec![stmt.clone()],
        };
        (routine, stmt)
    }

    fn loop_order(stmt: &Stmt) -> Vec<u32> {
        let mut order = Vec::new();
        stmt.walk(&mut |s| {
            if let Stmt::For { var, .. } = s {
                order.push(var.0);
            }
        });
        order
    }

    #[test]
    fn disjoint_loops_move_out_and_the_others_keep_their_order() {
        let (routine, stmt) = windows();
        assert!(!splittable(&stmt, &routine));
        let moved = hoisted(&routine, &stmt).unwrap();
        assert_eq!(loop_order(&moved), [2, 0, 1]);
        assert!(splittable(&moved, &routine));
        assert_eq!(iterations(&routine, &[moved]), 5 + 5 * 4 + 5 * 4 * 3);
    }

    #[test]
    fn long_loops_are_cut_into_chunks_within_the_budget() {
        let (routine, _) = windows();
        let long = nest(&[(LoopVar(7), 3), (LoopVar(8), 100_000)], &[])
            .pop()
            .unwrap();
        let plan = chunked(&routine, &long).unwrap();
        assert_eq!(plan.outer, [(LoopVar(7), 3)]);
        assert_eq!((plan.var, plan.range), (LoopVar(8), 100_000));
        assert_eq!(plan.per_chunk, ITERATION_BUDGET as usize);
        assert_eq!(plan.chunks, 2);
        assert_eq!(plan.dispatches, 6);
    }
}
