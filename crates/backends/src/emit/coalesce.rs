//! Which loops the C dialect writes as one loop, which loops only add into a local, and which
//! only keep a maximum or minimum in one (the analyses behind `Dialect::coalesces_loops` and
//! `Dialect::lane_array`).

use std::collections::HashMap;

use rcannl_ir::{Binop, Index, LocalId, LoopVar, NodeId, Precision, Routine, Scalar, Stmt, Var};

/// The loops from `var` down that can run as one loop, outermost first, with the body inside
/// them, if more than one: each holds only the next, and every index moves by as much over a
/// whole run of the next loop as over one step of this one (`(a·B + b)·s` for loops `a`, `b`
/// of ranges `A`, `B`): consecutive cells across the loops stay consecutive in one loop,
/// which vector units and vectorized sums run longer over.
pub(super) fn coalescible<'s>(
    routine: &Routine,
    var: LoopVar,
    range: usize,
    body: &'s [Stmt],
) -> Option<(Vec<Loop>, &'s [Stmt])> {
    let mut chain = vec![(var, range)];
    let mut inner = body;
    while let [Stmt::For { var, range, body }] = inner {
        chain.push((*var, *range));
        inner = body;
    }
    if chain.len() < 2 {
        return None;
    }
    let mut strides: Vec<Vec<i64>> = Vec::new();
    for stmt in inner {
        stmt.walk(&mut |s| strides_in(routine, s, &chain, &mut strides));
    }
    // The longest prefix of the chain whose neighbours nest in every index.
    let nests = |k: usize| {
        strides.iter().all(|coefficients| {
            coefficients[k - 1] == coefficients[k].saturating_mul(chain[k].1 as i64)
        })
    };
    let length = (1..chain.len()).take_while(|&k| nests(k)).count() + 1;
    if length < 2 {
        return None;
    }
    chain.truncate(length);
    let mut inner = body;
    for _ in 1..length {
        let [Stmt::For { body, .. }] = inner else {
            unreachable!("the chain is a run of single loops");
        };
        inner = body;
    }
    Some((chain, inner))
}

/// For each index `stmt` evaluates itself, the flat step each of `chain`'s loops moves it by.
fn strides_in(routine: &Routine, stmt: &Stmt, chain: &[Loop], strides: &mut Vec<Vec<i64>>) {
    let flat = |index: &[Index], dims: &[usize]| -> Vec<i64> {
        let mut steps = vec![0i64; chain.len()];
        let mut stride = 1i64;
        for (axis, dim) in index.iter().zip(dims).rev() {
            for (c, v) in &axis.terms {
                if let Some(k) = chain.iter().position(|(var, _)| Var::Loop(*var) == *v) {
                    steps[k] = steps[k].saturating_add(c.saturating_mul(stride));
                }
            }
            stride = stride.saturating_mul(*dim as i64);
        }
        steps
    };
    let dims = |node: &NodeId| {
        routine
            .nodes
            .get(node)
            .map(|n| n.buffer_dims())
            .unwrap_or_default()
    };
    match stmt {
        Stmt::Set { node, index, .. } => strides.push(flat(index, &dims(node))),
        Stmt::ScatterAdd { target, .. } => {
            strides.push(flat(&target.index, &dims(&target.node)));
        }
        Stmt::SetVec { offset, .. } => strides.push(flat(std::slice::from_ref(offset), &[1])),
        _ => {}
    }
    for value in stmt.values() {
        scalar_strides(value, &mut |node, index| match node {
            Some(node) => strides.push(flat(index, &dims(&node))),
            None => strides.push(flat(index, &[1])),
        });
    }
}

/// The local a loop's body only adds into, if that is all it does besides declaring locals of
/// its own: `v = v + e` with `v` a float or double declared outside and `e` not reading `v`. Such
/// a loop may add its terms in another order than the interpreter's (as a matrix product does),
/// so it is written as a sum in vector lanes, in an order fixed by its range.
pub(super) fn summed_local(
    body: &[Stmt],
    declared: &HashMap<LocalId, Precision>,
) -> Option<LocalId> {
    let mut sum = None;
    for stmt in body {
        match stmt {
            Stmt::Local { .. } => {}
            Stmt::SetLocal {
                id,
                value: Scalar::Binop(Binop::Add, a, b),
            } if sum.is_none() => {
                let term = match (a.as_ref(), b.as_ref()) {
                    (Scalar::Local(v), term) | (term, Scalar::Local(v)) if v == id => term,
                    _ => return None,
                };
                sum = Some((*id, term));
            }
            _ => return None,
        }
    }
    let (id, term) = sum?;
    let reads = |scalar: &Scalar| {
        let mut found = false;
        scalar.for_each_local(&mut |v| found |= v == id);
        found
    };
    let others_read = body.iter().any(|stmt| match stmt {
        Stmt::Local { value, .. } => reads(value),
        _ => false,
    });
    let float = matches!(declared.get(&id), Some(Precision::F32 | Precision::F64));
    (float && !others_read && !reads(term)).then_some(id)
}

/// The local a loop's body only keeps the maximum (or minimum) of its terms in, with the
/// operation, if that is all it does besides declaring locals of its own: `v = max(v, e)` (or
/// `max(e, v)`) with `v` a float or double declared outside and `e` not reading `v`.
pub(super) fn extremum_local(
    body: &[Stmt],
    declared: &HashMap<LocalId, Precision>,
) -> Option<(LocalId, Binop)> {
    let [locals @ .., Stmt::SetLocal { id, value }] = body else {
        return None;
    };
    let Scalar::Binop(op @ (Binop::Max | Binop::Min), a, b) = value else {
        return None;
    };
    let term = match (a.as_ref(), b.as_ref()) {
        (Scalar::Local(v), term) | (term, Scalar::Local(v)) if v == id => term,
        _ => return None,
    };
    let reads = |scalar: &Scalar| {
        let mut found = false;
        scalar.for_each_local(&mut |v| found |= v == *id);
        found
    };
    let only_locals = locals.iter().all(|stmt| match stmt {
        Stmt::Local { id: own, value, .. } => own != id && !reads(value),
        _ => false,
    });
    let float = matches!(declared.get(id), Some(Precision::F32 | Precision::F64));
    (float && only_locals && !reads(term)).then_some((*id, *op))
}

/// A loop's variable and range.
pub(super) type Loop = (LoopVar, usize);

/// Calls `visit` on every index `scalar` evaluates: a read's (with its node), an embedded one's.
fn scalar_strides(scalar: &Scalar, visit: &mut impl FnMut(Option<NodeId>, &[Index])) {
    match scalar {
        Scalar::Const(_) | Scalar::Local(_) => {}
        Scalar::Get(node, index) => visit(Some(*node), index),
        Scalar::Lookup(lookup) => {
            visit(Some(lookup.node), &lookup.index);
            scalar_strides(&lookup.id, visit);
        }
        Scalar::Embed(index) => visit(None, std::slice::from_ref(index)),
        Scalar::Unop(_, a) => scalar_strides(a, visit),
        Scalar::Binop(_, a, b) => {
            scalar_strides(a, visit);
            scalar_strides(b, visit);
        }
        Scalar::Ternop(_, a, b, c) => {
            scalar_strides(a, visit);
            scalar_strides(b, visit);
            scalar_strides(c, visit);
        }
    }
}
