//! Fills that a first write makes useless: `fill n with c`, then, with no statement between
//! mentioning `n`, a nest `n[w] := n[w] ⊕ e` (with `e` not reading `n`) that stores every cell
//! of `n` exactly once, becomes that nest storing `c ⊕ e`. A backward pass starts every
//! gradient from zero and adds each contribution into it; the first contribution then writes
//! the gradient outright, instead of a pass writing zeros and another reading them back.
//!
//! Only nodes without margins (the fill writes those too, the nest does not) and fill values
//! that a constant of the node's kind reproduces exactly (`fill_constant`), so results keep
//! their bits. Reductions are left to `accumulate`, which starts a local from the fill's value.

use super::body::Body;
use super::{PerfectNest, covers_each_cell_once, fill_constant, reads_node, stmt_reads};
use crate::loops::{Scalar, Stmt};
use crate::node::NodeId;
use crate::routine::Routine;

/// `routine` with every fill that the next statement mentioning its node overwrites dropped,
/// and that statement computing from the fill's value (found through the body's index of who
/// writes and reads each node).
pub fn absorb_fills(routine: &Routine) -> Routine {
    with_fills_absorbed(routine.clone())
}

/// [`absorb_fills`] of a routine given up for it: its statements are moved, not copied.
pub(super) fn with_fills_absorbed(mut routine: Routine) -> Routine {
    let mut body = Body::new(std::mem::take(&mut routine.body));
    for at in 0..body.end() {
        let Stmt::Fill { node, value } = *body.stmt(at) else {
            continue;
        };
        let Some(info) = routine.nodes.get(&node) else {
            continue;
        };
        if info
            .padding
            .iter()
            .any(|&(before, after)| before + after > 0)
        {
            continue;
        }
        let Some(constant) = fill_constant(value, info.precision) else {
            continue;
        };
        let after = at + 1..body.end();
        let next = [
            body.writers_in(node, after.clone()).next(),
            body.readers_in(node, after).next(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            continue;
        };
        if let Some(rewritten) = overwriting(body.stmt(next), node, constant, &info.dims) {
            body.take(at);
            body.take(next);
            body.put(next, rewritten);
        }
    }
    routine.body = body.into_stmts();
    routine
}

/// `stmt` computing from `constant` where it reads `node`, if it is a perfect nest that
/// accumulates into every cell of `node` (of `dims`) exactly once and reads it nowhere else.
fn overwriting(stmt: &Stmt, node: NodeId, constant: f64, dims: &[usize]) -> Option<Stmt> {
    let nest = PerfectNest::of(stmt)?;
    let Scalar::Binop(op, own, term) = nest.value else {
        return None;
    };
    let written = nest.written_vars();
    let overwrites = nest.node == node
        && **own == Scalar::Get(node, nest.index.to_vec())
        && !reads_node(term, node)
        && !nest.pre.iter().any(|s| stmt_reads(s).contains(&node))
        && nest.loops.iter().all(|(var, _)| written.contains(var))
        && covers_each_cell_once(nest.index, &nest.loops, dims);
    overwrites.then(|| {
        with_store_value(
            stmt,
            &Scalar::Binop(*op, Box::new(Scalar::Const(constant)), term.clone()),
        )
    })
}

/// The perfect nest `stmt` with its store's value replaced by `value`.
fn with_store_value(stmt: &Stmt, value: &Scalar) -> Stmt {
    match stmt {
        Stmt::For { var, range, body } => Stmt::For {
            var: *var,
            range: *range,
            body: body
                .iter()
                .map(|inner| match inner {
                    Stmt::For { .. } | Stmt::Set { .. } => with_store_value(inner, value),
                    other => other.clone(),
                })
                .collect(),
        },
        Stmt::Set { node, index, .. } => Stmt::Set {
            node: *node,
            index: index.clone(),
            value: value.clone(),
        },
        other => other.clone(),
    }
}
