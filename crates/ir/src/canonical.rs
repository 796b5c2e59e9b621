//! Statements in their own names. A deep model repeats the same nests over other nodes; the
//! optimizer and the code generators do each distinct nest's work once by comparing statements
//! with their names (nodes, loop variables, locals) numbered in the order the statements first
//! use them: two runs of statements alike in their own names, over nodes alike (precision,
//! dims, margins, memory mode; labels aside), compute alike, and the work done for one, renamed
//! ([`in_routine`]), stands for the other.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::mem::discriminant;

use rustc_hash::{FxHashMap, FxHasher};

use crate::loops::{Index, LocalId, Lookup, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::precision::Precision;

/// Statements in their own names, with the routine's nodes behind their numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnNames {
    /// The statements, every node, loop variable and local numbered from 0 in the order of its
    /// first use.
    pub stmts: Vec<Stmt>,
    /// The routine's node behind each number: `nodes[i]` is the statements' `NodeId(i)`.
    pub nodes: Vec<NodeId>,
}

impl OwnNames {
    /// `stmts` in their own names.
    pub fn of(mut stmts: Vec<Stmt>) -> OwnNames {
        let mut numbering = Numbering::default();
        for stmt in &mut stmts {
            rename_stmt(stmt, &mut numbering);
        }
        OwnNames {
            stmts,
            nodes: numbering.nodes,
        }
    }
}

/// Statements' own names found in one walk, without renaming them: the routine's node behind
/// each number, and the statements written out byte by byte in those numbers, every list
/// preceded by its length, so that two writings are equal exactly when the statements are
/// alike in their own names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnKey {
    /// The routine's node behind each number, as [`OwnNames::of`] numbers them.
    pub nodes: Vec<NodeId>,
    written: Vec<u8>,
}

impl OwnKey {
    /// The key of `stmts`.
    pub fn of<'a>(stmts: impl IntoIterator<Item = &'a Stmt>) -> OwnKey {
        let mut writing = Hashing {
            hasher: Writing(Vec::new()),
            naming: Naming::Own(Numbering::default()),
        };
        for stmt in stmts {
            writing.stmt(stmt);
        }
        let Naming::Own(numbering) = writing.naming else {
            unreachable!("the naming set above")
        };
        OwnKey {
            nodes: numbering.nodes,
            written: writing.hasher.0,
        }
    }

    /// A hash of the statements and of their nodes as `nodes` (the routine's) describes them:
    /// the same for statements alike.
    pub fn hash(&self, nodes: &BTreeMap<NodeId, TensorNode>) -> u64 {
        let mut hasher = FxHasher::default();
        self.written.hash(&mut hasher);
        for node in &self.nodes {
            nodes.get(node).map(described).hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Whether these statements over `nodes` and `other` over `other_nodes` are alike.
    pub fn alike(
        &self,
        nodes: &BTreeMap<NodeId, TensorNode>,
        other: &OwnKey,
        other_nodes: &BTreeMap<NodeId, TensorNode>,
    ) -> bool {
        self.written == other.written
            && self.nodes.len() == other.nodes.len()
            && (self.nodes.iter().zip(&other.nodes))
                .all(|(a, b)| nodes.get(a).map(described) == other_nodes.get(b).map(described))
    }
}

/// Which items are alike in their own names: for each item, the routine's nodes behind its
/// numbers (`None` for an item without own names), and the first item alike it (itself where
/// none comes before it, or where it has no own names).
#[derive(Debug, Clone, PartialEq)]
pub struct Alike {
    /// Each item's nodes, as [`OwnKey::nodes`].
    pub nodes: Vec<Option<Vec<NodeId>>>,
    /// Each item's first alike item.
    pub first: Vec<usize>,
}

/// How many items' keys [`Alike::of`] holds at once beyond the distinct ones.
const KEYS_AT_ONCE: usize = 4096;

impl Alike {
    /// The items of `items` compared by their keys (`key`, computed on up to `threads` threads,
    /// `None` for an item that is alike no other), over the routine's `nodes`. Keys are made a
    /// batch at a time and a key's writing is kept only while its item is the first of its
    /// kind: memory holds the distinct items' writings, not every item's.
    pub fn of<T: Sync>(
        items: &[T],
        nodes: &BTreeMap<NodeId, TensorNode>,
        threads: usize,
        key: impl Fn(&T) -> Option<OwnKey> + Sync,
    ) -> Alike {
        let mut alike = Alike {
            nodes: Vec::with_capacity(items.len()),
            first: Vec::with_capacity(items.len()),
        };
        // The first items' keys, by hash.
        let mut firsts: FxHashMap<u64, Vec<(usize, OwnKey)>> = FxHashMap::default();
        for (batch, part) in items.chunks(KEYS_AT_ONCE).enumerate() {
            let keys = crate::in_parallel::map_in_order(part, threads, &key);
            for (offset, key) in keys.into_iter().enumerate() {
                let at = batch * KEYS_AT_ONCE + offset;
                let Some(key) = key else {
                    alike.nodes.push(None);
                    alike.first.push(at);
                    continue;
                };
                let candidates = firsts.entry(key.hash(nodes)).or_default();
                let earlier = candidates
                    .iter()
                    .find(|(_, first)| first.alike(nodes, &key, nodes))
                    .map(|(first, _)| *first);
                match earlier {
                    Some(first) => {
                        alike.first.push(first);
                        alike.nodes.push(Some(key.nodes));
                    }
                    None => {
                        alike.first.push(at);
                        alike.nodes.push(Some(key.nodes.clone()));
                        candidates.push((at, key));
                    }
                }
            }
        }
        alike
    }
}

/// A "hasher" keeping every byte written to it: the writing an [`OwnKey`] compares.
struct Writing(Vec<u8>);

impl Hasher for Writing {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        let mut hasher = FxHasher::default();
        self.0.hash(&mut hasher);
        hasher.finish()
    }
}

/// What of a node the statements over it depend on: all but its id and label.
type Described<'a> = (
    Precision,
    &'a [usize],
    &'a [(usize, usize)],
    Option<MemoryMode>,
);

fn described(node: &TensorNode) -> Described<'_> {
    (node.precision, &node.dims, &node.padding, node.memory_mode)
}

/// `stmts`, in their own names, renamed into a routine: node `i` becomes `nodes[i]`, loop
/// variable `v` becomes `var_base + v` and local `l` becomes `local_base + l`.
pub fn in_routine(stmts: &[Stmt], nodes: &[NodeId], var_base: u32, local_base: u32) -> Vec<Stmt> {
    let mut back = Back {
        nodes,
        var_base,
        local_base,
    };
    stmts
        .iter()
        .map(|stmt| {
            let mut stmt = stmt.clone();
            rename_stmt(&mut stmt, &mut back);
            stmt
        })
        .collect()
}

/// A hash of `stmt`'s form: all of it but its names (nodes, loop variables, locals), so that
/// statements alike in their own names have the same form (and others most often not).
pub fn form(stmt: &Stmt) -> u64 {
    let mut hashing = Hashing {
        hasher: FxHasher::default(),
        naming: Naming::Without,
    };
    hashing.stmt(stmt);
    hashing.hasher.finish()
}

/// A hasher of statements (or a [`Writing`] of them), their names left out or numbered in the
/// order of first use. A fast hasher rather than a collision-resistant one: a form only places
/// chunk boundaries, and statements are compared by their writings before one stands for
/// another.
struct Hashing<H: Hasher> {
    hasher: H,
    naming: Naming,
}

/// What a [`Hashing`] does with names.
enum Naming {
    Without,
    Own(Numbering),
}

impl<H: Hasher> Hashing<H> {
    fn node(&mut self, node: &NodeId) {
        if let Naming::Own(numbering) = &mut self.naming {
            numbering.node(*node).hash(&mut self.hasher);
        }
    }

    fn var(&mut self, var: &LoopVar) {
        if let Naming::Own(numbering) = &mut self.naming {
            numbering.var(*var).hash(&mut self.hasher);
        }
    }

    fn local(&mut self, id: &LocalId) {
        if let Naming::Own(numbering) = &mut self.naming {
            numbering.local(*id).hash(&mut self.hasher);
        }
    }

    fn index(&mut self, index: &Index) {
        index.offset.hash(&mut self.hasher);
        index.terms.len().hash(&mut self.hasher);
        for (coefficient, var) in &index.terms {
            coefficient.hash(&mut self.hasher);
            discriminant(var).hash(&mut self.hasher);
            match var {
                Var::Loop(var) => self.var(var),
                Var::Static(symbol) => symbol.hash(&mut self.hasher),
            }
        }
    }

    fn indices(&mut self, index: &[Index]) {
        index.len().hash(&mut self.hasher);
        index.iter().for_each(|axis| self.index(axis));
    }

    fn stmt(&mut self, stmt: &Stmt) {
        discriminant(stmt).hash(&mut self.hasher);
        match stmt {
            Stmt::For { var, range, body } => {
                self.var(var);
                range.hash(&mut self.hasher);
                body.len().hash(&mut self.hasher);
                body.iter().for_each(|s| self.stmt(s));
            }
            Stmt::Set { node, index, value } => {
                self.node(node);
                self.indices(index);
                self.scalar(value);
            }
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => {
                self.node(node);
                self.index(offset);
                op.hash(&mut self.hasher);
                self.scalar(arg);
            }
            Stmt::Fill { node, value } | Stmt::FillMargins { node, value } => {
                self.node(node);
                value.to_bits().hash(&mut self.hasher);
            }
            Stmt::Local {
                id,
                precision,
                value,
            } => {
                self.local(id);
                precision.hash(&mut self.hasher);
                self.scalar(value);
            }
            Stmt::SetLocal { id, value } => {
                self.local(id);
                self.scalar(value);
            }
            Stmt::ScatterAdd { target, value } => {
                self.lookup(target);
                self.scalar(value);
            }
            Stmt::Gemm { plan, nest } => {
                [plan.c, plan.a, plan.b]
                    .iter()
                    .for_each(|node| self.node(node));
                plan.zero_first.hash(&mut self.hasher);
                for loops in [&plan.batch, &plan.m, &plan.n, &plan.k] {
                    loops.len().hash(&mut self.hasher);
                    for (var, range) in loops {
                        self.var(var);
                        range.hash(&mut self.hasher);
                    }
                }
                for index in [&plan.c_index, &plan.a_index, &plan.b_index] {
                    self.indices(index);
                }
                plan.a_margins.hash(&mut self.hasher);
                nest.len().hash(&mut self.hasher);
                nest.iter().for_each(|s| self.stmt(s));
            }
        }
    }

    fn scalar(&mut self, scalar: &Scalar) {
        discriminant(scalar).hash(&mut self.hasher);
        match scalar {
            Scalar::Const(c) => c.to_bits().hash(&mut self.hasher),
            Scalar::Get(node, index) => {
                self.node(node);
                self.indices(index);
            }
            Scalar::Lookup(lookup) => self.lookup(lookup),
            Scalar::Embed(index) => self.index(index),
            Scalar::Local(id) => self.local(id),
            Scalar::Unop(op, a) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
            }
            Scalar::Binop(op, a, b) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
                self.scalar(b);
            }
            Scalar::Ternop(op, a, b, c) => {
                op.hash(&mut self.hasher);
                self.scalar(a);
                self.scalar(b);
                self.scalar(c);
            }
        }
    }

    fn lookup(&mut self, lookup: &Lookup) {
        self.node(&lookup.node);
        self.indices(&lookup.index);
        (lookup.axis, lookup.size).hash(&mut self.hasher);
        self.scalar(&lookup.id);
    }
}

/// What each name of a statement becomes.
trait Names {
    fn node(&mut self, node: NodeId) -> NodeId;
    fn var(&mut self, var: LoopVar) -> LoopVar;
    fn local(&mut self, id: LocalId) -> LocalId;
}

/// Names numbered in the order of their first use.
#[derive(Default)]
struct Numbering {
    /// The routine's node behind each own number.
    nodes: Vec<NodeId>,
    node_numbers: FxHashMap<NodeId, u32>,
    vars: FxHashMap<LoopVar, u32>,
    locals: FxHashMap<LocalId, u32>,
}

impl Names for Numbering {
    fn node(&mut self, node: NodeId) -> NodeId {
        let next = self.nodes.len() as u32;
        let own = *self.node_numbers.entry(node).or_insert(next);
        if own == next {
            self.nodes.push(node);
        }
        NodeId(own)
    }

    fn var(&mut self, var: LoopVar) -> LoopVar {
        let next = self.vars.len() as u32;
        LoopVar(*self.vars.entry(var).or_insert(next))
    }

    fn local(&mut self, id: LocalId) -> LocalId {
        let next = self.locals.len() as u32;
        LocalId(*self.locals.entry(id).or_insert(next))
    }
}

/// Own names back in a routine.
struct Back<'a> {
    nodes: &'a [NodeId],
    var_base: u32,
    local_base: u32,
}

impl Names for Back<'_> {
    fn node(&mut self, node: NodeId) -> NodeId {
        self.nodes[node.0 as usize]
    }

    fn var(&mut self, var: LoopVar) -> LoopVar {
        LoopVar(self.var_base.saturating_add(var.0))
    }

    fn local(&mut self, id: LocalId) -> LocalId {
        LocalId(self.local_base.saturating_add(id.0))
    }
}

/// `stmt` with every name renamed by `names`, in the order the statement is written.
fn rename_stmt(stmt: &mut Stmt, names: &mut impl Names) {
    match stmt {
        Stmt::For { var, body, .. } => {
            *var = names.var(*var);
            for stmt in body {
                rename_stmt(stmt, names);
            }
        }
        Stmt::Set { node, index, value } => {
            *node = names.node(*node);
            rename_indices(index, names);
            rename_scalar(value, names);
        }
        Stmt::SetVec {
            node, offset, arg, ..
        } => {
            *node = names.node(*node);
            rename_index(offset, names);
            rename_scalar(arg, names);
        }
        Stmt::Fill { node, .. } | Stmt::FillMargins { node, .. } => *node = names.node(*node),
        Stmt::Local { id, value, .. } | Stmt::SetLocal { id, value } => {
            *id = names.local(*id);
            rename_scalar(value, names);
        }
        Stmt::ScatterAdd { target, value } => {
            rename_lookup(target, names);
            rename_scalar(value, names);
        }
        Stmt::Gemm { plan, nest } => {
            plan.c = names.node(plan.c);
            plan.a = names.node(plan.a);
            plan.b = names.node(plan.b);
            for (var, _) in plan
                .batch
                .iter_mut()
                .chain(&mut plan.m)
                .chain(&mut plan.n)
                .chain(&mut plan.k)
            {
                *var = names.var(*var);
            }
            rename_indices(&mut plan.c_index, names);
            rename_indices(&mut plan.a_index, names);
            rename_indices(&mut plan.b_index, names);
            for stmt in nest {
                rename_stmt(stmt, names);
            }
        }
    }
}

fn rename_scalar(scalar: &mut Scalar, names: &mut impl Names) {
    match scalar {
        Scalar::Const(_) => {}
        Scalar::Get(node, index) => {
            *node = names.node(*node);
            rename_indices(index, names);
        }
        Scalar::Lookup(lookup) => rename_lookup(lookup, names),
        Scalar::Embed(index) => rename_index(index, names),
        Scalar::Local(id) => *id = names.local(*id),
        Scalar::Unop(_, a) => rename_scalar(a, names),
        Scalar::Binop(_, a, b) => {
            rename_scalar(a, names);
            rename_scalar(b, names);
        }
        Scalar::Ternop(_, a, b, c) => {
            rename_scalar(a, names);
            rename_scalar(b, names);
            rename_scalar(c, names);
        }
    }
}

fn rename_lookup(lookup: &mut Lookup, names: &mut impl Names) {
    lookup.node = names.node(lookup.node);
    rename_indices(&mut lookup.index, names);
    rename_scalar(&mut lookup.id, names);
}

fn rename_indices(index: &mut [Index], names: &mut impl Names) {
    for axis in index {
        rename_index(axis, names);
    }
}

fn rename_index(index: &mut Index, names: &mut impl Names) {
    for (_, var) in &mut index.terms {
        if let Var::Loop(l) = var {
            *l = names.var(*l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Symbol;

    /// `y[i] := x[i] + 1` over 4 cells, `y` and `x` the given nodes and `i` the given variable.
    fn add_one(y: u32, x: u32, i: u32, index: impl Fn(LoopVar) -> Index) -> Stmt {
        let at = index(LoopVar(i));
        Stmt::For {
            var: LoopVar(i),
            range: 4,
            body: vec![Stmt::Set {
                node: NodeId(y),
                index: vec![at.clone()],
                value: Scalar::Binop(
                    crate::ops::Binop::Add,
                    Box::new(Scalar::Get(NodeId(x), vec![at])),
                    Box::new(Scalar::Const(1.0)),
                ),
            }],
        }
    }

    fn nodes(ids: &[u32]) -> BTreeMap<NodeId, TensorNode> {
        ids.iter()
            .map(|&id| (NodeId(id), TensorNode::new(id, "n", Precision::F32, &[4])))
            .collect()
    }

    #[test]
    fn keys_are_alike_exactly_when_the_statements_are_in_their_own_names() {
        let plain = |var| Index::var(var, 0);
        let routine = nodes(&[0, 1, 2, 3, 4]);
        let first = [add_one(1, 0, 0, plain), add_one(2, 1, 1, plain)];
        let renamed = [add_one(3, 2, 7, plain), add_one(4, 3, 9, plain)];
        let (a, b) = (OwnKey::of(&first), OwnKey::of(&renamed));
        assert!(a.alike(&routine, &b, &routine));
        assert_eq!(a.hash(&routine), b.hash(&routine));
        // The nodes in the order renaming numbers them, so that one stands for the other.
        assert_eq!(a.nodes, OwnNames::of(first.to_vec()).nodes);
        assert_eq!(b.nodes, vec![NodeId(3), NodeId(2), NodeId(4)]);
        // Another order of reads and writes, a static index in place of a loop variable, another
        // precision: not alike.
        let crossed = [add_one(1, 0, 0, plain), add_one(0, 1, 1, plain)];
        assert!(!a.alike(&routine, &OwnKey::of(&crossed), &routine));
        let by_static = |_| Index {
            terms: smallvec::smallvec![(1, Var::Static(Symbol(0)))],
            offset: 0,
        };
        let statics = [add_one(1, 0, 0, by_static), add_one(2, 1, 1, by_static)];
        assert!(!a.alike(&routine, &OwnKey::of(&statics), &routine));
        let mut wider = routine.clone();
        wider.get_mut(&NodeId(3)).unwrap().precision = Precision::F64;
        assert!(!a.alike(&routine, &b, &wider));
    }

    /// Across the batches keys are made in, each item stands for the first alike it, however far
    /// before; an item without a key stands for itself.
    #[test]
    fn items_stand_for_the_first_alike_them_across_batches() {
        let plain = |var| Index::var(var, 0);
        let mut routine = nodes(&[0, 1, 2]);
        routine.get_mut(&NodeId(2)).unwrap().precision = Precision::F64;
        // Item i: y = x + 1 from node i % 2 into the other, or (every seventh) into the f64
        // node; every eleventh has no key.
        let count = 2 * KEYS_AT_ONCE + 5;
        let items: Vec<usize> = (0..count).collect();
        let stmt = |i: usize| {
            let x = (i % 2) as u32;
            let y = if i % 7 == 6 { 2 } else { 1 - x };
            add_one(y, x, i as u32, plain)
        };
        let alike = Alike::of(&items, &routine, 2, |&i| {
            (i % 11 != 10).then(|| OwnKey::of(&[stmt(i)]))
        });
        for i in 0..count {
            let want = if i % 11 == 10 {
                i
            } else if i % 7 == 6 {
                6
            } else {
                0
            };
            assert_eq!(alike.first[i], want, "item {i}");
            let nodes = OwnKey::of(&[stmt(i)]).nodes;
            assert_eq!(alike.nodes[i], (i % 11 != 10).then_some(nodes), "item {i}");
        }
    }
}
