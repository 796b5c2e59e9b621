//! Slices read where they lie: a node that a top-level nest fills as a plain copy of another
//! node's cells at a position depending on a static index (`xs[s]`, a batch sliced from a data
//! set) is not copied. Every read of it reads the source at the matching position instead, and
//! the copy is dropped, the node left virtual: a matrix product over the slice then reads the
//! data set at the batch's offset, which both tuned products take as it is.
//!
//! The copy must be a perfect nest storing `n[l₀, …] := src[idx]`, each axis of `n` a distinct
//! loop variable over the whole axis (or 0 on an axis of one position), of a node without
//! margins, in the source's precision (a conversion would round), whose memory mode nothing
//! chose (a node the routine keeps, or one a user chose, stays a buffer). The routine must write
//! the node there only, read it only after, never look it up (a gather's table), and write the
//! source nowhere from the copy to the node's last reader: each read then finds in the source
//! the cell the copy would have held. Reads are rewritten before matrix products are recognized,
//! so that a product reads the source directly.

use super::body::Body;
use super::{PerfectNest, Renaming, covers_each_cell_once, replace_reads};
use crate::loops::{Index, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId};
use crate::ops::Unop;
use crate::routine::Routine;

/// `routine` with every slice copy that can be dropped dropped, its reads reading the source.
pub fn forward_slices(routine: &Routine) -> Routine {
    with_slices_forwarded(routine.clone())
}

/// [`forward_slices`] of a routine given up for it: its statements are moved, not copied.
pub(super) fn with_slices_forwarded(mut routine: Routine) -> Routine {
    // Most routines slice nothing: they are not indexed for nothing.
    if !routine
        .body
        .iter()
        .any(|stmt| Slice::of(stmt, &routine).is_some())
    {
        return routine;
    }
    let mut body = Body::new(std::mem::take(&mut routine.body));
    for at in 0..body.end() {
        let Some(slice) = Slice::of(body.stmt(at), &routine) else {
            continue;
        };
        if !forwardable(&body, at, &slice) {
            continue;
        }
        let readers: Vec<usize> = body.readers(slice.node).collect();
        for slot in readers {
            let mut stmt = body.take(slot);
            replace_reads(&mut stmt, &mut |node, index| {
                (node == slice.node).then(|| slice.read_at(index))
            });
            body.put(slot, stmt);
        }
        body.take(at);
        if let Some(node) = routine.nodes.get_mut(&slice.node) {
            node.memory_mode = Some(MemoryMode::Virtual);
        }
    }
    routine.body = body.into_stmts();
    routine
}

/// A copy `node[axes] := source[source_index]`.
#[derive(Debug)]
struct Slice {
    node: NodeId,
    source: NodeId,
    source_index: Vec<Index>,
    /// For each axis of `node`, the loop variable storing along it; `None` on an axis of one
    /// position, stored at 0.
    axes: Vec<Option<LoopVar>>,
}

impl Slice {
    /// The copy `stmt` makes, if it is a slice that may be read in place (as far as the
    /// statement and the nodes' declarations tell).
    fn of(stmt: &Stmt, routine: &Routine) -> Option<Slice> {
        let nest = PerfectNest::of(stmt)?;
        // Lowering writes a copy as the identity of the cell read.
        let mut value = nest.value;
        while let Scalar::Unop(Unop::Identity, inner) = value {
            value = inner;
        }
        let Scalar::Get(source, source_index) = value else {
            return None;
        };
        let (info, from) = (routine.nodes.get(&nest.node)?, routine.nodes.get(source)?);
        let plain = nest.pre.is_empty()
            && *source != nest.node
            && info.memory_mode.is_none()
            && info.precision == from.precision
            && info.padding.iter().all(|&(before, after)| before + after == 0)
            && covers_each_cell_once(nest.index, &nest.loops, &info.dims)
            // Every loop stores along an axis: none repeats the copy.
            && nest.written_vars().len() == nest.loops.len();
        let sliced = source_index.iter().any(|axis| {
            axis.terms
                .iter()
                .any(|&(c, v)| c != 0 && matches!(v, Var::Static(_)))
        });
        if !plain || !sliced {
            return None;
        }
        let axes = nest
            .index
            .iter()
            .map(|axis| match axis.terms.as_slice() {
                [(_, Var::Loop(var))] => Some(*var),
                _ => None,
            })
            .collect();
        Some(Slice {
            node: nest.node,
            source: *source,
            source_index: source_index.clone(),
            axes,
        })
    }

    /// What reading the slice at `index` reads of the source.
    fn read_at(&self, index: &[Index]) -> Scalar {
        let mut renaming = Renaming::default();
        for (axis, position) in self.axes.iter().zip(index) {
            if let Some(var) = axis {
                renaming.indices.insert(*var, position.clone());
            }
        }
        let index = self
            .source_index
            .iter()
            .map(|i| renaming.index(i))
            .collect();
        Scalar::Get(self.source, index)
    }
}

/// Whether `slice`, copied by the statement in slot `at`, may be read in place: written there
/// only, read only after, never looked up, and its source written nowhere from the copy to its
/// last reader.
fn forwardable(body: &Body, at: usize, slice: &Slice) -> bool {
    if body.writers(slice.node).any(|slot| slot != at) {
        return false;
    }
    let readers: Vec<usize> = body.readers(slice.node).collect();
    let Some(&last) = readers.last() else {
        // Read nowhere here: the copy is this routine's result.
        return false;
    };
    if readers[0] <= at
        || body
            .writers_in(slice.source, at + 1..last + 1)
            .next()
            .is_some()
    {
        return false;
    }
    readers.iter().all(|&slot| {
        let mut in_place = true;
        body.stmt(slot).walk(&mut |s| {
            in_place &= !matches!(s, Stmt::Gemm { .. })
                && s.values().all(|value| !value.looks_up(slice.node));
        });
        in_place
    })
}
