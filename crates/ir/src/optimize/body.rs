//! A routine's top-level statements indexed by node: for each node, the statements that write it
//! and those that read it (nested statements included, a matrix product's nest too), found in
//! one walk. Passes that ask about one node at a time (its producer, its readers, what is
//! written between them) look up those statements instead of walking the whole body, and fusion,
//! which replaces and removes statements, keeps the index up to date as it goes.
//!
//! Statements live in slots: removing one empties its slot, so the others keep theirs. A
//! statement's position, which messages quote, counts the statements before it. A slot holds a
//! statement, or anything that stands for one and says which nodes it writes and reads
//! ([`Entry`]): fusion keeps the nests it builds in a form of its own.

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::ops::Range;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::{stmt_accesses, stmt_reads, stmt_writes};
use crate::loops::Stmt;
use crate::node::NodeId;

/// What a slot holds: a statement, or what stands for one.
pub(super) trait Entry {
    /// The nodes it (with everything nested in it) writes.
    fn writes(&self) -> BTreeSet<NodeId>;
    /// The nodes it (with everything nested in it) reads.
    fn reads(&self) -> BTreeSet<NodeId>;
    /// The statement itself, when the entry holds it as one.
    fn stmt(&self) -> Option<&Stmt>;
    /// The nodes it writes and those it reads, together (one walk where the entry can), each
    /// in increasing order without repeats.
    fn accesses(&self) -> (Vec<NodeId>, Vec<NodeId>) {
        (
            self.writes().into_iter().collect(),
            self.reads().into_iter().collect(),
        )
    }
}

/// A statement, owned or borrowed (a pass that only looks indexes its body without a copy).
impl<S: Borrow<Stmt>> Entry for S {
    fn writes(&self) -> BTreeSet<NodeId> {
        stmt_writes(self.borrow())
    }

    fn reads(&self) -> BTreeSet<NodeId> {
        stmt_reads(self.borrow())
    }

    fn stmt(&self) -> Option<&Stmt> {
        Some(self.borrow())
    }

    fn accesses(&self) -> (Vec<NodeId>, Vec<NodeId>) {
        stmt_accesses(self.borrow())
    }
}

/// Top-level statements in slots, with the slots that write and read each node, in order.
#[derive(Debug)]
pub(super) struct Body<T = Stmt> {
    slots: Vec<Option<T>>,
    /// How many slots are empty.
    empty: usize,
    writers: ByNode,
    readers: ByNode,
}

/// Slots in increasing order, without repeats: a sorted list rather than a tree, as an index
/// is built in order (each slot pushed at the end) and changed only here and there; kept inline
/// for the few writers and readers most nodes have, so that a routine of many nodes is indexed
/// without an allocation per node.
type Slots = SmallVec<[u32; 4]>;

impl<T: Entry> Body<T> {
    /// `stmts`, in slots from 0 on, indexed.
    pub(super) fn new(stmts: Vec<T>) -> Body<T> {
        let nodes_at_most = 4 * stmts.len() + 1024;
        let mut body = Body {
            slots: Vec::with_capacity(stmts.len()),
            empty: 0,
            writers: ByNode::Dense(Vec::new(), nodes_at_most),
            readers: ByNode::Dense(Vec::new(), nodes_at_most),
        };
        for stmt in stmts {
            body.slots.push(None);
            body.empty += 1;
            body.put(body.slots.len() - 1, stmt);
        }
        body
    }

    /// One past the last slot.
    pub(super) fn end(&self) -> usize {
        self.slots.len()
    }

    /// The entry in `slot`, which must hold one.
    pub(super) fn entry(&self, slot: usize) -> &T {
        self.slots[slot]
            .as_ref()
            .expect("the index names only slots holding a statement")
    }

    /// The statement in `slot`, which must hold one as a statement.
    pub(super) fn stmt(&self, slot: usize) -> &Stmt {
        self.entry(slot)
            .stmt()
            .expect("a statement is asked for only where the slot holds one as such")
    }

    /// The slots whose statements write `node`, first to last.
    pub(super) fn writers(&self, node: NodeId) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.writers_in(node, 0..usize::MAX)
    }

    /// The slots in `range` whose statements write `node`, first to last.
    pub(super) fn writers_in(
        &self,
        node: NodeId,
        range: Range<usize>,
    ) -> impl DoubleEndedIterator<Item = usize> + '_ {
        slots_in(self.writers.get(node), range)
    }

    /// The slots whose statements read `node`, first to last.
    pub(super) fn readers(&self, node: NodeId) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.readers_in(node, 0..usize::MAX)
    }

    /// The slots in `range` whose statements read `node`, first to last.
    pub(super) fn readers_in(
        &self,
        node: NodeId,
        range: Range<usize>,
    ) -> impl DoubleEndedIterator<Item = usize> + '_ {
        slots_in(self.readers.get(node), range)
    }

    /// Whether a statement writes or reads `node`.
    pub(super) fn mentions(&self, node: NodeId) -> bool {
        self.writers.get(node).is_some() || self.readers.get(node).is_some()
    }

    /// The position of the statement in `slot` among those left: how messages name it.
    pub(super) fn position(&self, slot: usize) -> usize {
        if self.empty == 0 {
            return slot;
        }
        self.slots[..slot].iter().filter(|s| s.is_some()).count()
    }

    /// Takes the statement out of `slot`, leaving it empty.
    pub(super) fn take(&mut self, slot: usize) -> T {
        let stmt = self.slots[slot]
            .take()
            .expect("only a slot holding a statement is emptied");
        self.empty += 1;
        let (writes, reads) = stmt.accesses();
        for node in writes {
            self.writers.unlist(node, slot);
        }
        for node in reads {
            self.readers.unlist(node, slot);
        }
        stmt
    }

    /// Puts `stmt` into the empty `slot`.
    pub(super) fn put(&mut self, slot: usize, stmt: T) {
        let (writes, reads) = stmt.accesses();
        for node in writes {
            list(self.writers.slots_mut(node), slot);
        }
        for node in reads {
            list(self.readers.slots_mut(node), slot);
        }
        let old = self.slots[slot].replace(stmt);
        debug_assert!(old.is_none(), "a statement is put only into an empty slot");
        self.empty -= usize::from(old.is_none());
    }

    /// The statements left, in order.
    pub(super) fn into_stmts(self) -> Vec<T> {
        self.slots.into_iter().flatten().collect()
    }
}

/// The slots of `list` in `range`.
fn slots_in(
    list: Option<&Slots>,
    range: Range<usize>,
) -> impl DoubleEndedIterator<Item = usize> + '_ {
    let list = list.map_or(&[][..], |slots| slots.as_slice());
    let start = list.partition_point(|&slot| (slot as usize) < range.start);
    let end = (list.partition_point(|&slot| (slot as usize) < range.end)).max(start);
    list[start..end].iter().map(|&slot| slot as usize)
}

/// `slot` as a list holds it.
fn number(slot: usize) -> u32 {
    u32::try_from(slot).expect("a routine has fewer than 2³² top-level statements")
}

/// Adds `slot` to `slots`.
fn list(slots: &mut Slots, slot: usize) {
    let slot = number(slot);
    match slots.last() {
        Some(&last) if last >= slot => {
            if let Err(at) = slots.binary_search(&slot) {
                slots.insert(at, slot);
            }
        }
        _ => slots.push(slot),
    }
}

/// Each node's slots: in a list indexed by the node's number while the numbers stay below a
/// bound that grows with the statements (a routine's own nodes, numbered densely, are looked up
/// in order without a hash, and a large routine's index stays within few cache lines per
/// statement), else by hash (a few statements over nodes of a large graph).
#[derive(Debug)]
enum ByNode {
    /// The lists by number, and the greatest length the list may take.
    Dense(Vec<Slots>, usize),
    Sparse(FxHashMap<NodeId, Slots>),
}

impl ByNode {
    /// The slots of `node`, if it has any.
    fn get(&self, node: NodeId) -> Option<&Slots> {
        match self {
            ByNode::Dense(lists, _) => lists.get(node.0 as usize),
            ByNode::Sparse(lists) => lists.get(&node),
        }
        .filter(|slots| !slots.is_empty())
    }

    /// The slots of `node`, to change.
    fn slots_mut(&mut self, node: NodeId) -> &mut Slots {
        let at = node.0 as usize;
        if let ByNode::Dense(lists, at_most) = self
            && at >= *at_most
        {
            let numbered = std::mem::take(lists).into_iter().enumerate();
            *self = ByNode::Sparse(
                numbered
                    .filter(|(_, slots)| !slots.is_empty())
                    .map(|(number, slots)| (NodeId(number as u32), slots))
                    .collect(),
            );
        }
        match self {
            ByNode::Dense(lists, _) => {
                if lists.len() <= at {
                    lists.resize_with(at + 1, Slots::new);
                }
                &mut lists[at]
            }
            ByNode::Sparse(lists) => lists.entry(node).or_default(),
        }
    }

    /// Takes `slot` from `node`'s slots.
    fn unlist(&mut self, node: NodeId, slot: usize) {
        let slots = match self {
            ByNode::Dense(lists, _) => lists.get_mut(node.0 as usize),
            ByNode::Sparse(lists) => lists.get_mut(&node),
        };
        if let Some(slots) = slots
            && let Ok(at) = slots.binary_search(&number(slot))
        {
            slots.remove(at);
        }
        if let ByNode::Sparse(lists) = self
            && lists.get(&node).is_some_and(|slots| slots.is_empty())
        {
            lists.remove(&node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LoopVar, Scalar};

    fn copy(to: u32, from: u32) -> Stmt {
        Stmt::For {
            var: LoopVar(0),
            range: 2,
            body: vec![Stmt::Set {
                node: NodeId(to),
                index: vec![Index::var(LoopVar(0), 0)],
                value: Scalar::Get(NodeId(from), vec![Index::var(LoopVar(0), 0)]),
            }],
        }
    }

    #[test]
    fn the_index_follows_replaced_and_removed_statements() {
        // n1 := n0; n2 := n1; n3 := n1.
        let mut body = Body::new(vec![copy(1, 0), copy(2, 1), copy(3, 1)]);
        let (n0, n1, n2) = (NodeId(0), NodeId(1), NodeId(2));
        assert_eq!(body.writers(n1).collect::<Vec<_>>(), [0]);
        assert_eq!(body.readers(n1).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(body.readers_in(n1, 2..9).collect::<Vec<_>>(), [2]);
        assert_eq!(body.position(2), 2);
        assert_eq!(body.readers_in(n1, 2..2).count(), 0);
        // A range that starts past its end is empty, not a panic.
        assert_eq!(body.readers_in(n1, 3..body.end() - 2).count(), 0);
        // n2 := n0 instead, and the first statement gone.
        body.take(1);
        body.put(1, copy(2, 0));
        body.take(0);
        assert!(!body.mentions(NodeId(9)));
        assert_eq!(body.writers(n1).count(), 0);
        assert_eq!(body.readers(n1).collect::<Vec<_>>(), [2]);
        assert_eq!(body.readers(n0).collect::<Vec<_>>(), [1]);
        assert_eq!(body.writers(n2).collect::<Vec<_>>(), [1]);
        assert_eq!(body.position(2), 1);
        assert_eq!(body.into_stmts(), [copy(2, 0), copy(3, 1)]);
    }

    #[test]
    fn nodes_numbered_far_beyond_the_statements_are_indexed_alike() {
        // n1 := n0; n100000 := n1; n2 := n100000: the third node's number is past what a list
        // by number holds for three statements, so the index turns to hashing midway.
        let far = 100_000;
        let mut body = Body::new(vec![copy(1, 0), copy(far, 1), copy(2, far)]);
        assert!(matches!(body.writers, ByNode::Sparse(_)));
        let (n1, n_far) = (NodeId(1), NodeId(far));
        assert_eq!(body.writers(n1).collect::<Vec<_>>(), [0]);
        assert_eq!(body.readers(n1).collect::<Vec<_>>(), [1]);
        assert_eq!(body.writers(n_far).collect::<Vec<_>>(), [1]);
        assert_eq!(body.readers(n_far).collect::<Vec<_>>(), [2]);
        body.take(2);
        assert_eq!(body.readers(n_far).count(), 0);
        assert!(body.mentions(n_far));
        body.take(1);
        assert!(!body.mentions(n_far));
        assert!(body.mentions(n1));
    }
}
