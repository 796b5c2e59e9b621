//! Fusion: a virtual node's producer is inlined wherever the node is read, and removed.
//!
//! A node can be inlined when it has no padding margins and the routine writes it with one
//! top-level nest (optionally after a top-level `fill` of it, the neutral pre-fill, with nothing
//! reading it in between) that
//! is perfect (each loop holds one statement, down to the store) and stores it exactly once:
//! each axis of the store's index a distinct loop variable of the nest running over the whole
//! axis, or 0 on an axis of one position. Loops the index does not use are "kept" loops. The
//! stored value either does not read the node (a plain store: then no loop is kept) or
//! accumulates, `n[w] := n[w] ⊕ e` with `e` not reading it, after the fill. The nest reads no
//! local declared outside it, nothing reads the node before it, and no top-level statement from
//! the producer to the node's last reader (inclusive) writes a node the producer reads: the
//! inlined computation runs there, later than the producer did.
//!
//! At each statement reading the node, each distinct read `n[idx]` becomes a local declared
//! just before the statement, of the node's precision (so that the value is rounded exactly as
//! the store rounded it), computed by the producer's value with its index variables replaced by
//! `idx`; with kept loops the local starts at the fill's value and the kept loops (under fresh
//! variables) accumulate into it, in the producer's order. Producers are inlined in program
//! order, so that what a producer reads of other virtual nodes is already inlined into it and
//! travels with it. A read inside a `where` branch is computed before the statement, whichever
//! branch is taken: values are unchanged, but a read the branch guarded could now fail.
//!
//! A producer read by one perfect nest, at one index of bare loop variables, is moved into it
//! as a fused nest (see `fused`) rather than copied, so that a chain of such nodes, each read by
//! the next, fuses in time linear in its length; the statements written out are those copying
//! makes.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::body::{Body, Entry};
use super::fused::{Fused, Segments, Statement, Substitution};
use super::{
    Fresh, OptimizeError, OptimizeErrorKind, PerfectNest, Renaming, covers_each_cell_once,
    describe, fill_constant, map_values, names, reads_node, stmt_reads,
};
use crate::loops::{Index, LocalId, Lookup, LoopVar, Scalar, Stmt};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::ops::{Binop, Unop};
use crate::precision::Precision;
use crate::routine::Routine;

/// `routine` with every node whose mode is `Virtual` inlined into its readers and its producer
/// removed; an error if one cannot be. A virtual node the routine does not mention is left alone.
pub fn virtualize(routine: &Routine) -> Result<Routine, OptimizeError> {
    with_virtual_nodes_inlined(routine.clone())
}

/// [`virtualize`] of a routine given up for it: its statements are moved, not copied.
pub(super) fn with_virtual_nodes_inlined(routine: Routine) -> Result<Routine, OptimizeError> {
    fuse(routine, Moves::SoleReaders)
}

/// Whether fusion moves producers into their sole readers as fused nests, or copies every
/// producer (what moving must reproduce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moves {
    SoleReaders,
    #[cfg(test)]
    None,
}

/// [`virtualize`], moving producers into their sole readers as `moves` says.
fn fuse(routine: Routine, moves: Moves) -> Result<Routine, OptimizeError> {
    let Routine {
        name,
        nodes,
        statics,
        body: stmts,
    } = routine;
    let mut fresh = Fresh::new(&stmts);
    let mut in_use = InUse::of(&stmts);
    let mut body = Body::new(stmts.into_iter().map(Statement::Plain).collect());
    let mut order: Vec<(Option<usize>, &TensorNode)> = nodes
        .values()
        .filter(|node| node.memory_mode == Some(MemoryMode::Virtual) && body.mentions(node.id))
        .map(|node| (body.writers(node.id).next_back(), node))
        .collect();
    order.sort_by_key(|(position, node)| (*position, node.id));
    let mut segments = Segments::default();
    for (_, node) in order {
        if moves == Moves::SoleReaders
            && move_into_sole_reader(&mut body, node, &mut segments, &mut fresh, &mut in_use)
        {
            continue;
        }
        // Copying looks at the statements writing and reading the node as statements.
        let touched: Vec<usize> = body.writers(node.id).chain(body.readers(node.id)).collect();
        for slot in touched {
            if body.entry(slot).stmt().is_none() {
                let stmt = body.take(slot).into_stmt(&mut segments);
                body.put(slot, Statement::Plain(stmt));
            }
        }
        let cannot = |reason: String| OptimizeError {
            kind: OptimizeErrorKind::NotInlinable,
            message: format!(
                "{} is virtual, but it cannot be inlined: {reason}",
                describe(node)
            ),
        };
        let producer = Producer::find(&body, node).map_err(cannot)?;
        if let Some(reason) = hazard(&body, node.id, producer.position, &producer.reads()) {
            return Err(cannot(reason));
        }
        inline(&mut body, &producer, &mut fresh, &mut in_use, &mut segments);
    }
    let body = (body.into_stmts().into_iter())
        .map(|stmt| stmt.into_stmt(&mut segments))
        .collect();
    Ok(Routine {
        name,
        nodes,
        statics,
        body,
    })
}

/// Inlines `node` by moving its producer into the one statement reading it, when copying would
/// succeed and keep every name, and both are (or can be kept as) fused nests: the producer
/// stores the node, once per cell, keeping no loops; the reader reads it in its store only, at
/// one index whose axes are distinct loop variables of the reader. Whether it did.
fn move_into_sole_reader(
    body: &mut Body<Statement>,
    node: &TensorNode,
    segments: &mut Segments,
    fresh: &mut Fresh,
    in_use: &mut InUse,
) -> bool {
    let id = node.id;
    if node.padding.iter().any(|(l, r)| *l > 0 || *r > 0) {
        return false;
    }
    let (Some(p), Some(r)) = (sole(body.writers(id)), sole(body.readers(id))) else {
        return false;
    };
    if r <= p || !keep_fused(body, p, segments, in_use) || !keep_fused(body, r, segments, in_use) {
        return false;
    }
    let (Statement::Fused(producer), Statement::Fused(reader)) = (body.entry(p), body.entry(r))
    else {
        return false;
    };
    let Some((substitution, read)) = sole_read_substitution(producer, reader, node) else {
        return false;
    };
    let mut reads = producer.pre_reads.clone();
    producer.value.for_each_get(&mut |n, _| {
        reads.insert(n);
    });
    reads.remove(&id);
    if hazard(body, id, p, &reads).is_some() {
        return false;
    }
    let Some(producer) = take_fused(body, p) else {
        return false;
    };
    let Some(mut reader) = take_fused(body, r) else {
        body.put(p, Statement::Fused(producer));
        return false;
    };
    // What copying does to the names in use: the producer's loops are gone; the names its
    // statements declare move with them (no other statement mentions them, and copying keeps
    // them); the local computing the read is new.
    for (var, _) in producer.loops() {
        uncount(&mut in_use.vars, var);
    }
    let local = fresh.local();
    *in_use.locals.entry(local).or_default() += 1;
    segments.inline(producer, &mut reader, substitution, local, node.precision);
    reader.value = replace_reads(&reader.value, id, &[(read, local)]);
    body.put(r, Statement::Fused(reader));
    true
}

/// The one slot of `slots`, if there is exactly one.
fn sole(mut slots: impl Iterator<Item = usize>) -> Option<usize> {
    match (slots.next(), slots.next()) {
        (Some(slot), None) => Some(slot),
        _ => None,
    }
}

/// Whether the statement in `slot` is, or is now, kept as a fused nest.
fn keep_fused(
    body: &mut Body<Statement>,
    slot: usize,
    segments: &mut Segments,
    in_use: &InUse,
) -> bool {
    let stmt = match body.take(slot) {
        Statement::Plain(stmt) => stmt,
        fused => {
            body.put(slot, fused);
            return true;
        }
    };
    let only_here_var = |var| in_use.vars.get(&var) == Some(&1);
    let only_here_local = |id| in_use.locals.get(&id) == Some(&1);
    let (kept, entry) = match Fused::of(stmt, segments, only_here_var, only_here_local) {
        Ok(fused) => (true, Statement::Fused(fused)),
        Err(stmt) => (false, Statement::Plain(stmt)),
    };
    body.put(slot, entry);
    kept
}

/// The fused nest in `slot`, taken out; `None`, the slot left as it was, if it holds none.
fn take_fused(body: &mut Body<Statement>, slot: usize) -> Option<Fused> {
    match body.take(slot) {
        Statement::Fused(fused) => Some(fused),
        plain => {
            body.put(slot, plain);
            None
        }
    }
}

/// What inlining `producer` (a fused nest storing `node`) into `reader` substitutes for the
/// producer's loop variables: the reader's loop variable on each axis the producer's loops
/// write, 0 for its loops of one trip. `None` unless the producer stores each cell once, reads
/// neither the node nor keeps loops of its own, and the reader reads the node in its store only,
/// at one index whose axes the producer writes are distinct loop variables of the reader. With
/// that index.
fn sole_read_substitution(
    producer: &Fused,
    reader: &Fused,
    node: &TensorNode,
) -> Option<(Substitution, Vec<Index>)> {
    let id = node.id;
    let loops: Vec<(LoopVar, usize)> = producer.loops().collect();
    if producer.node != id
        || !covers_each_cell_once(&producer.index, &loops, &node.dims)
        || producer.pre_reads.contains(&id)
        || reads_node(&producer.value, id)
        || reader.pre_reads.contains(&id)
        || reader.value.looks_up(id)
    {
        return None;
    }
    let mut reads: Vec<Vec<Index>> = Vec::new();
    reader.value.for_each_get(&mut |n, index| {
        if n == id && !reads.iter().any(|read| read == index) {
            reads.push(index.to_vec());
        }
    });
    let [read] = &reads[..] else {
        return None;
    };
    if read.len() != node.dims.len() {
        return None;
    }
    let reader_loops: HashSet<LoopVar> = reader.loops().map(|(var, _)| var).collect();
    let mut substitution = Vec::new();
    let mut targets = HashSet::new();
    for (axis, read_axis) in producer.index.iter().zip(read) {
        let Some(&(var, _)) = loops.iter().find(|(var, _)| super::is_bare(axis, *var)) else {
            continue;
        };
        let bare = reader_loops
            .iter()
            .any(|&target| super::is_bare(read_axis, target) && targets.insert(target));
        if !bare {
            return None;
        }
        substitution.push((var, read_axis.clone()));
    }
    for (var, range) in loops {
        if !substitution.iter().any(|(written, _)| *written == var) {
            if range != 1 {
                return None;
            }
            substitution.push((var, Index::constant(0)));
        }
    }
    Some((substitution, read.clone()))
}

/// A virtual node's producer, taken apart for inlining.
#[derive(Debug)]
pub(super) struct Producer {
    pub(super) node: NodeId,
    precision: Precision,
    /// The top-level positions of the fill before the nest, if any, and of the nest.
    fill: Option<usize>,
    pub(super) position: usize,
    /// Per axis of the store, the loop running over it (`None`: the axis of one position).
    write: Vec<Option<LoopVar>>,
    /// The loops the store's index does not use, outermost first, with their ranges.
    pub(super) kept: Vec<(LoopVar, usize)>,
    /// Loops of one trip the store's index does not use: their variable is 0 in every copy.
    single: Vec<LoopVar>,
    /// Statements before the store in the innermost body: what earlier inlining put there.
    pre: Vec<Stmt>,
    form: Form,
}

#[derive(Debug)]
enum Form {
    /// `n[w] := value`.
    Store(Scalar),
    /// `n[w] := n[w] ⊕ value` after a fill whose value is `start`.
    Accumulate {
        accum: Binop,
        start: f64,
        value: Scalar,
    },
}

impl Producer {
    /// The producer of `node` in `body`, or why it cannot be inlined (all but the hazard).
    pub(super) fn find<T: Entry>(body: &Body<T>, node: &TensorNode) -> Result<Producer, String> {
        let id = node.id;
        if node.padding.iter().any(|(l, r)| *l > 0 || *r > 0) {
            return Err("it has padding margins".to_owned());
        }
        let writers: Vec<usize> = body.writers(id).collect();
        let (fill, position) = match writers[..] {
            [] => return Err("the routine does not write it".to_owned()),
            [p] => (None, p),
            [f, p]
                if matches!(body.stmt(f), Stmt::Fill { .. })
                    && body.readers_in(id, f + 1..p).next().is_none() =>
            {
                (Some(f), p)
            }
            _ => {
                return Err(
                    "it is written by more than one statement besides a fill before, \
                     or read between the fill and the statement"
                        .to_owned(),
                );
            }
        };
        let nest = PerfectNest::of(body.stmt(position))
            .filter(|nest| nest.node == id)
            .ok_or("its producer is not a perfect nest around one store of it")?;
        if !nest.pre_is_self_contained(true) {
            return Err("its producer uses locals declared outside it".to_owned());
        }
        if !covers_each_cell_once(nest.index, &nest.loops, &node.dims) {
            return Err(format!(
                "its store at [{}] does not write each cell by a loop over its axis",
                nest.index
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let write: Vec<Option<LoopVar>> = nest
            .index
            .iter()
            .map(|axis| {
                nest.loops
                    .iter()
                    .find(|(var, _)| super::is_bare(axis, *var))
                    .map(|(var, _)| *var)
            })
            .collect();
        let written = nest.written_vars();
        let unwritten = || {
            nest.loops
                .iter()
                .copied()
                .filter(|(var, _)| !written.contains(var))
        };
        // A loop of no iterations is kept, not dropped: the nest then writes nothing, and
        // the inlined value is the fill's.
        let kept: Vec<(LoopVar, usize)> = unwritten().filter(|(_, range)| *range != 1).collect();
        let single: Vec<LoopVar> = unwritten()
            .filter(|(_, range)| *range == 1)
            .map(|(var, _)| var)
            .collect();
        if nest.pre.iter().any(|s| stmt_reads(s).contains(&id)) {
            return Err("its producer reads it other than by accumulating".to_owned());
        }
        let form = match nest.value {
            value if !reads_node(value, id) => {
                if !kept.is_empty() {
                    return Err(
                        "it is stored, not accumulated, inside loops its index does not use"
                            .to_owned(),
                    );
                }
                Form::Store(value.clone())
            }
            Scalar::Binop(accum, own, value)
                if **own == Scalar::Get(id, nest.index.to_vec()) && !reads_node(value, id) =>
            {
                let Some(Stmt::Fill { value: filled, .. }) = fill.map(|f| body.stmt(f)) else {
                    return Err("it accumulates into cells nothing set before".to_owned());
                };
                let start = fill_constant(*filled, node.precision)
                    .ok_or_else(|| format!("no constant starts it as `fill with {filled}` does"))?;
                Form::Accumulate {
                    accum: *accum,
                    start,
                    value: (**value).clone(),
                }
            }
            _ => return Err("its producer reads it other than by accumulating".to_owned()),
        };
        for p in body.readers(id).filter(|&p| p != position) {
            let mut axes = Vec::new();
            body.stmt(p).walk(&mut |s| {
                for value in s.values() {
                    value.for_each_get(&mut |n, index| {
                        if n == id {
                            axes.push(index.len());
                        }
                    });
                }
            });
            if !axes.is_empty() && p < position {
                return Err(format!(
                    "statement {} reads it before its producer",
                    body.position(p)
                ));
            }
            if let Some(n) = axes.iter().find(|n| **n != node.dims.len()) {
                return Err(format!(
                    "statement {} reads it with {n} indices for {} axes",
                    body.position(p),
                    node.dims.len()
                ));
            }
        }
        Ok(Producer {
            node: id,
            precision: node.precision,
            fill,
            position,
            write,
            kept,
            single,
            pre: nest.pre.to_vec(),
            form,
        })
    }

    /// The operations one cell of the node takes once the virtual nodes the producer reads are
    /// inlined into it: each operation and each read of a stored node counts one, each distinct
    /// read of a node that `inlined_cost` knows counts what that node's value takes (a reader
    /// computes each distinct read once), and kept loops repeat it all.
    pub(super) fn cost(&self, inlined_cost: &impl Fn(NodeId) -> Option<usize>) -> usize {
        self.weigh(&|_| 1, 1, inlined_cost)
    }

    /// The transcendental operations (see [`is_transcendental`]) one cell of the node takes, as
    /// [`Producer::cost`] counts operations, with `inlined` those of each virtual node.
    pub(super) fn transcendentals(&self, inlined: &impl Fn(NodeId) -> Option<usize>) -> usize {
        self.weigh(&|op| usize::from(is_transcendental(op)), 0, inlined)
    }

    /// The reads at positions held in data (gathers) one cell of the node makes, with `inlined`
    /// those of each virtual node.
    pub(super) fn lookups(&self, inlined: &impl Fn(NodeId) -> Option<usize>) -> usize {
        self.weigh(
            &|op| usize::from(matches!(op, Scalar::Lookup(_))),
            0,
            inlined,
        )
    }

    /// What one cell takes when each operation (a lookup's bounds check included) weighs `op_weight`, each read of a stored node
    /// `read_weight` and each distinct read of a virtual node what `inlined` says.
    fn weigh(
        &self,
        op_weight: &impl Fn(&Scalar) -> usize,
        read_weight: usize,
        inlined: &impl Fn(NodeId) -> Option<usize>,
    ) -> usize {
        let mut seen = HashSet::new();
        let mut count = |scalar: &Scalar| {
            let mut total = 0;
            let mut stack = vec![scalar];
            while let Some(scalar) = stack.pop() {
                match scalar {
                    Scalar::Const(_) | Scalar::Embed(_) | Scalar::Local(_) => {}
                    Scalar::Get(node, _) if *node == self.node => {}
                    // A looked-up node is stored (the memory pass never makes it virtual).
                    Scalar::Lookup(lookup) => {
                        total += read_weight + op_weight(scalar);
                        stack.push(&lookup.id);
                    }
                    Scalar::Get(node, index) => match inlined(*node) {
                        Some(weight) if seen.insert((*node, index.clone())) => total += weight,
                        Some(_) => {}
                        None => total += read_weight,
                    },
                    Scalar::Unop(_, a) => {
                        total += op_weight(scalar);
                        stack.push(a);
                    }
                    Scalar::Binop(_, a, b) => {
                        total += op_weight(scalar);
                        stack.extend([&**a, &**b]);
                    }
                    Scalar::Ternop(_, a, b, c) => {
                        total += op_weight(scalar);
                        stack.extend([&**a, &**b, &**c]);
                    }
                }
            }
            total
        };
        let value = match &self.form {
            Form::Store(value) | Form::Accumulate { value, .. } => value,
        };
        let mut weight = count(value);
        for stmt in &self.pre {
            for value in stmt.values() {
                weight += count(value);
            }
        }
        let repeats: usize = self.kept.iter().map(|(_, range)| range).product();
        weight.saturating_mul(repeats)
    }

    /// The other nodes the producer reads.
    pub(super) fn reads(&self) -> BTreeSet<NodeId> {
        let mut reads: BTreeSet<NodeId> = self.pre.iter().flat_map(stmt_reads).collect();
        let value = match &self.form {
            Form::Store(value) | Form::Accumulate { value, .. } => value,
        };
        value.for_each_get(&mut |node, _| {
            reads.insert(node);
        });
        reads.remove(&self.node);
        reads
    }
}

/// Whether `op` is an operation that costs tens of arithmetic operations (an exponential, a
/// logarithm, a trigonometric function, a power other than a square): worth computing once and
/// storing rather than again at every read.
pub(super) fn is_transcendental(op: &Scalar) -> bool {
    match op {
        Scalar::Unop(op, _) => matches!(
            op,
            Unop::Exp | Unop::Log | Unop::Exp2 | Unop::Log2 | Unop::Sin | Unop::Cos | Unop::Tanh
        ),
        Scalar::Binop(Binop::Pow, _, exponent) => **exponent != Scalar::Const(2.0),
        _ => false,
    }
}

/// Why inlining the producer of `node` at `position` where the node is read would read changed
/// values: a top-level statement after it, up to the last one reading the node, writes one of
/// `reads`.
pub(super) fn hazard<T: Entry>(
    body: &Body<T>,
    node: NodeId,
    position: usize,
    reads: &BTreeSet<NodeId>,
) -> Option<String> {
    let last = body.readers(node).rev().find(|&p| p != position)?;
    // The first such statement, and the first of `reads` it writes.
    let (p, node) = reads
        .iter()
        .filter_map(|&node| {
            let first = body.writers_in(node, position + 1..last + 1).next()?;
            Some((first, node))
        })
        .min()?;
    Some(format!(
        "statement {} writes {node}, which its producer reads, before statement {} reads it",
        body.position(p),
        body.position(last)
    ))
}

/// `body` with `producer` inlined at every read of its node, and removed. `in_use` counts the
/// names of `body`'s statements before and after.
fn inline(
    body: &mut Body<Statement>,
    producer: &Producer,
    fresh: &mut Fresh,
    in_use: &mut InUse,
    segments: &mut Segments,
) {
    for slot in [Some(producer.position), producer.fill]
        .into_iter()
        .flatten()
    {
        in_use.remove(&names([&body.take(slot).into_stmt(segments)]));
    }
    let mut inliner = Inliner {
        producer,
        fresh,
        outside: &*in_use,
        kept_vars: HashSet::new(),
        kept_locals: HashSet::new(),
    };
    // Statements the index lists without a read to inline (in a matrix product's nest) come
    // out unchanged.
    let readers: Vec<usize> = body.readers(producer.node).collect();
    let mut rewritten = Vec::with_capacity(readers.len());
    for slot in readers {
        let stmt = body.take(slot).into_stmt(segments);
        let old_names = names([&stmt]);
        let stmt = match <[Stmt; 1]>::try_from(inliner.stmt(stmt)) {
            Ok([only]) => only,
            // Only a store outside any loop becomes several statements. It keeps the locals
            // computed for it in a loop of one trip: together they stay one nest, which can
            // itself be inlined later (simplification removes the loop at the end).
            Err(stmts) => Stmt::For {
                var: inliner.fresh.var(),
                range: 1,
                body: stmts,
            },
        };
        rewritten.push((slot, old_names, stmt));
    }
    // The names in use change only now: every copy above is named against the same body.
    for (slot, old_names, stmt) in rewritten {
        in_use.remove(&old_names);
        in_use.add(&names([&stmt]));
        body.put(slot, Statement::Plain(stmt));
    }
}

/// How many top-level statements of a body mention each loop variable and each local.
#[derive(Debug)]
struct InUse {
    vars: HashMap<LoopVar, usize>,
    locals: HashMap<LocalId, usize>,
}

/// The loop variables and locals one statement mentions.
type Names = (HashSet<LoopVar>, HashSet<LocalId>);

impl InUse {
    fn of(body: &[Stmt]) -> InUse {
        let mut in_use = InUse {
            vars: HashMap::new(),
            locals: HashMap::new(),
        };
        for stmt in body {
            in_use.add(&names([stmt]));
        }
        in_use
    }

    fn add(&mut self, (vars, locals): &Names) {
        for var in vars {
            *self.vars.entry(*var).or_default() += 1;
        }
        for local in locals {
            *self.locals.entry(*local).or_default() += 1;
        }
    }

    fn remove(&mut self, (vars, locals): &Names) {
        for var in vars {
            uncount(&mut self.vars, *var);
        }
        for local in locals {
            uncount(&mut self.locals, *local);
        }
    }
}

fn uncount<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: K) {
    if let Some(count) = counts.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

/// Inlines one producer, keeping track of the loop variables and locals in use, so that the
/// first copy keeps the producer's own names, unless the rest of the body uses them, and later
/// copies get fresh ones.
struct Inliner<'a> {
    producer: &'a Producer,
    fresh: &'a mut Fresh,
    /// The names of the body's other statements, as they were before this inlining.
    outside: &'a InUse,
    /// The producer's names a copy kept.
    kept_vars: HashSet<LoopVar>,
    kept_locals: HashSet<LocalId>,
}

impl Inliner<'_> {
    fn stmt(&mut self, stmt: Stmt) -> Vec<Stmt> {
        let node = self.producer.node;
        if let Stmt::For { var, range, body } = stmt {
            let body = body.into_iter().flat_map(|s| self.stmt(s)).collect();
            return vec![Stmt::For { var, range, body }];
        }
        let mut reads: Vec<Vec<Index>> = Vec::new();
        for value in stmt.values() {
            value.for_each_get(&mut |n, index| {
                if n == node && !reads.iter().any(|r| r == index) {
                    reads.push(index.to_vec());
                }
            });
        }
        let mut stmts = Vec::new();
        let mut locals = Vec::new();
        for index in reads {
            let (computed, local) = self.instance(&index);
            stmts.extend(computed);
            locals.push((index, local));
        }
        stmts.push(map_values(&stmt, |value| {
            replace_reads(value, node, &locals)
        }));
        stmts
    }

    /// The statements computing the node at `index` into a new local, and that local.
    fn instance(&mut self, index: &[Index]) -> (Vec<Stmt>, LocalId) {
        let producer = self.producer;
        let mut renaming = Renaming::default();
        for (var, axis) in producer.write.iter().zip(index) {
            if let Some(var) = var {
                renaming.indices.insert(*var, axis.clone());
            }
        }
        for var in &producer.single {
            renaming.indices.insert(*var, Index::constant(0));
        }
        let mut bound: Vec<LoopVar> = producer.kept.iter().map(|(v, _)| *v).collect();
        let mut declared = Vec::new();
        for stmt in &producer.pre {
            stmt.walk(&mut |s| match s {
                Stmt::For { var, .. } => bound.push(*var),
                Stmt::Local { id, .. } => declared.push(*id),
                _ => {}
            });
        }
        for var in bound {
            let new = if !self.outside.vars.contains_key(&var) && self.kept_vars.insert(var) {
                var
            } else {
                self.fresh.var()
            };
            renaming.rebind(var, new);
        }
        for id in declared {
            let new = if !self.outside.locals.contains_key(&id) && self.kept_locals.insert(id) {
                id
            } else {
                self.fresh.local()
            };
            renaming.locals.insert(id, new);
        }
        let id = self.fresh.local();
        let precision = producer.precision;
        let mut stmts: Vec<Stmt> = producer.pre.iter().map(|s| renaming.stmt(s)).collect();
        match &producer.form {
            Form::Store(value) => stmts.push(Stmt::Local {
                id,
                precision,
                value: renaming.scalar(value),
            }),
            Form::Accumulate {
                accum,
                start,
                value,
            } if producer.kept.is_empty() => stmts.push(Stmt::Local {
                id,
                precision,
                value: Scalar::Binop(
                    *accum,
                    Box::new(Scalar::Const(*start)),
                    Box::new(renaming.scalar(value)),
                ),
            }),
            Form::Accumulate {
                accum,
                start,
                value,
            } => {
                stmts.push(Stmt::SetLocal {
                    id,
                    value: Scalar::Binop(
                        *accum,
                        Box::new(Scalar::Local(id)),
                        Box::new(renaming.scalar(value)),
                    ),
                });
                for (var, range) in producer.kept.iter().rev() {
                    stmts = vec![Stmt::For {
                        var: renaming.loops[var],
                        range: *range,
                        body: stmts,
                    }];
                }
                stmts.insert(
                    0,
                    Stmt::Local {
                        id,
                        precision,
                        value: Scalar::Const(*start),
                    },
                );
            }
        }
        (stmts, id)
    }
}

/// `scalar` with each read of `node` at one of `locals`' indices replaced by that local.
fn replace_reads(scalar: &Scalar, node: NodeId, locals: &[(Vec<Index>, LocalId)]) -> Scalar {
    let go = |s: &Scalar| Box::new(replace_reads(s, node, locals));
    match scalar {
        Scalar::Get(n, index) if *n == node => locals
            .iter()
            .find(|(i, _)| i == index)
            .map_or_else(|| scalar.clone(), |(_, id)| Scalar::Local(*id)),
        Scalar::Lookup(lookup) => Scalar::Lookup(Box::new(Lookup {
            id: *go(&lookup.id),
            ..(**lookup).clone()
        })),
        Scalar::Const(_) | Scalar::Get(..) | Scalar::Embed(_) | Scalar::Local(_) => scalar.clone(),
        Scalar::Unop(op, a) => Scalar::Unop(*op, go(a)),
        Scalar::Binop(op, a, b) => Scalar::Binop(*op, go(a), go(b)),
        Scalar::Ternop(op, a, b, c) => Scalar::Ternop(*op, go(a), go(b), go(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Unop;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    fn get(node: u32, index: Vec<Index>) -> Scalar {
        Scalar::Get(NodeId(node), index)
    }

    fn routine(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            statics: Default::default(),
            body,
        }
    }

    fn row_sum_then_transpose() -> Vec<Stmt> {
        // fill n1; n1[i] += n0[i, j]; n2[j, i] := n1[i] read at [l2].
        vec![
            Stmt::Fill {
                node: NodeId(1),
                value: 0.0,
            },
            Stmt::For {
                var: LoopVar(0),
                range: 2,
                body: vec![Stmt::For {
                    var: LoopVar(1),
                    range: 3,
                    body: vec![Stmt::Set {
                        node: NodeId(1),
                        index: vec![at(0)],
                        value: Scalar::Binop(
                            Binop::Add,
                            Box::new(get(1, vec![at(0)])),
                            Box::new(get(0, vec![at(0), at(1)])),
                        ),
                    }],
                }],
            },
            Stmt::For {
                var: LoopVar(2),
                range: 2,
                body: vec![Stmt::Set {
                    node: NodeId(2),
                    index: vec![at(2)],
                    value: Scalar::Unop(Unop::Neg, Box::new(get(1, vec![at(2)]))),
                }],
            },
        ]
    }

    #[test]
    fn a_reduction_inlines_as_an_accumulating_local() {
        let f = Precision::F32;
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual),
            TensorNode::new(2, "y", f, &[2]),
        ];
        let fused = virtualize(&routine(nodes, row_sum_then_transpose())).unwrap();
        let shown: String = fused.body.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            "for l2 in 0..2 {\n  local v0: f32 := 0\n  for l1 in 0..3 {\n    \
             v0 := (v0 + n0[l2, l1])\n  }\n  n2[l2] := neg(v0)\n}\n"
        );
    }

    #[test]
    fn what_cannot_be_inlined_says_why() {
        let f = Precision::F32;
        let mut padded = TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual);
        padded.padding = vec![(1, 0)];
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            padded,
            TensorNode::new(2, "y", f, &[2]),
        ];
        let error = virtualize(&routine(nodes, row_sum_then_transpose())).unwrap_err();
        assert_eq!(
            error.message,
            "n1 's' is virtual, but it cannot be inlined: it has padding margins"
        );
        // Without the fill, the accumulation reads cells nothing set.
        let mut body = row_sum_then_transpose();
        body.remove(0);
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual),
            TensorNode::new(2, "y", f, &[2]),
        ];
        let error = virtualize(&routine(nodes, body)).unwrap_err();
        assert!(error.message.contains("nothing set before"), "{error}");
    }

    /// `for l{var} in 0..2 { n{to}[l{var}] := value }`.
    fn store(var: u32, to: u32, value: Scalar) -> Stmt {
        Stmt::For {
            var: LoopVar(var),
            range: 2,
            body: vec![Stmt::Set {
                node: NodeId(to),
                index: vec![at(var)],
                value,
            }],
        }
    }

    #[test]
    fn messages_count_only_the_statements_left() {
        let f = Precision::F32;
        let nodes = |ids: &[(u32, bool)]| -> Vec<TensorNode> {
            ids.iter()
                .map(|&(id, virtual_)| {
                    let node = TensorNode::new(id, &format!("t{id}"), f, &[2]);
                    if virtual_ {
                        node.with_mode(MemoryMode::Virtual)
                    } else {
                        node
                    }
                })
                .collect()
        };
        let sum = |a: u32, b: u32, var: u32| {
            Scalar::Binop(
                Binop::Add,
                Box::new(get(a, vec![at(var)])),
                Box::new(get(b, vec![at(var)])),
            )
        };
        // t1 := t0; t2 := t3 + t1; t3 := t0. Once t1 is inlined and its producer gone, the
        // read of t3 is statement 0.
        let body = vec![
            store(0, 1, get(0, vec![at(0)])),
            store(1, 2, sum(3, 1, 1)),
            store(2, 3, get(0, vec![at(2)])),
        ];
        let error = virtualize(&routine(
            nodes(&[(0, false), (1, true), (2, false), (3, true)]),
            body,
        ))
        .unwrap_err();
        assert_eq!(
            error.message,
            "n3 't3' is virtual, but it cannot be inlined: statement 0 reads it before its \
             producer"
        );
        // t1 := t0; t3 := t4; t4 := t1; t2 := t3. Inlining t3 at its read would read t4 after
        // it changed: statements 1 and 2 once t1's producer is gone.
        let body = vec![
            store(0, 1, get(0, vec![at(0)])),
            store(1, 3, get(4, vec![at(1)])),
            store(2, 4, get(1, vec![at(2)])),
            store(3, 2, get(3, vec![at(3)])),
        ];
        let error = virtualize(&routine(
            nodes(&[(0, false), (1, true), (2, false), (3, true), (4, false)]),
            body,
        ))
        .unwrap_err();
        assert_eq!(
            error.message,
            "n3 't3' is virtual, but it cannot be inlined: statement 1 writes n4, which its \
             producer reads, before statement 2 reads it"
        );
    }

    /// Numbers from a seed, for routines made up of many kinds of nests.
    struct Draws(u64);

    impl Draws {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// A routine of `len` nodes after two inputs, each written by a nest reading earlier nodes
    /// at bare, transposed, diagonal or shifted positions, or by a row sum; loop variables
    /// shared between nests now and then; about half the nodes virtual.
    fn drawn_routine(seed: u64, len: u32) -> Routine {
        let mut draws = Draws(seed);
        let f = Precision::F32;
        let mut nodes = vec![
            TensorNode::new(0, "x", f, &[3, 3]),
            TensorNode::new(1, "y", f, &[3, 3]),
        ];
        let mut body = Vec::new();
        for k in 2..len + 2 {
            let (i, j) = if draws.below(3) == 0 {
                (LoopVar(0), LoopVar(1))
            } else {
                (LoopVar(2 * k), LoopVar(2 * k + 1))
            };
            let column = draws.below(4) == 0;
            let read = |draws: &mut Draws| {
                let from = if draws.below(3) == 0 {
                    draws.below(u64::from(k)) as u32
                } else {
                    k - 1
                };
                let rows = nodes[from as usize].dims[1] == 1;
                let var = |v: LoopVar| Index::var(v, 0);
                let index = match (rows, draws.below(6)) {
                    (true, 0) => vec![var(j), Index::constant(0)],
                    (true, _) => vec![var(i), Index::constant(0)],
                    (false, 0) => vec![var(j), var(i)],
                    (false, 1) => vec![var(i), var(i)],
                    (false, 2) => vec![Index::var(i, 1), var(j)],
                    (false, _) => vec![var(i), var(j)],
                };
                Scalar::Get(NodeId(from), index)
            };
            let a = read(&mut draws);
            let value = match draws.below(4) {
                0 => Scalar::Unop(Unop::Neg, Box::new(a)),
                1 => Scalar::Binop(Binop::Mul, Box::new(a.clone()), Box::new(a)),
                _ => Scalar::Binop(Binop::Add, Box::new(a), Box::new(read(&mut draws))),
            };
            let store = |index: Vec<Index>, value: Scalar| Stmt::Set {
                node: NodeId(k),
                index,
                value,
            };
            let nest = |outer: Vec<(LoopVar, usize)>, stmt: Stmt| {
                outer
                    .iter()
                    .rev()
                    .fold(stmt, |stmt, &(var, range)| Stmt::For {
                        var,
                        range,
                        body: vec![stmt],
                    })
            };
            let dims: &[usize] = if column { &[3, 1] } else { &[3, 3] };
            if column && draws.below(2) == 0 {
                // A row sum: a fill, then a nest keeping the loop over columns.
                let own = Scalar::Get(NodeId(k), vec![Index::var(i, 0), Index::constant(0)]);
                body.push(Stmt::Fill {
                    node: NodeId(k),
                    value: 0.0,
                });
                body.push(nest(
                    vec![(i, 3), (j, 3)],
                    store(
                        vec![Index::var(i, 0), Index::constant(0)],
                        Scalar::Binop(Binop::Add, Box::new(own), Box::new(value)),
                    ),
                ));
            } else if column {
                // The column, inside a loop of one trip its store does not use.
                body.push(nest(
                    vec![(i, 3), (j, 1)],
                    store(vec![Index::var(i, 0), Index::constant(0)], value),
                ));
            } else {
                body.push(nest(
                    vec![(i, 3), (j, 3)],
                    store(vec![Index::var(i, 0), Index::var(j, 0)], value),
                ));
            }
            if draws.below(20) == 0 {
                // Written a second time, which no virtual node may be.
                let again = body.last().cloned();
                body.extend(again);
            }
            let node = TensorNode::new(k, &format!("t{k}"), f, dims);
            nodes.push(if k < len + 1 && draws.below(3) != 0 {
                node.with_mode(MemoryMode::Virtual)
            } else {
                node
            });
        }
        routine(nodes, body)
    }

    #[test]
    fn moving_into_sole_readers_writes_what_copying_writes() {
        let mut moved = 0;
        for seed in 0..400 {
            let routine = drawn_routine(seed, 2 + (seed % 11) as u32);
            let copied = fuse(routine.clone(), Moves::None);
            assert_eq!(fuse(routine, Moves::SoleReaders), copied, "seed {seed}");
            moved += usize::from(copied.is_ok());
        }
        // Enough of the routines fuse for the comparison to mean something.
        assert!(moved > 100, "{moved} routines fused");
    }

    #[test]
    fn a_chain_of_copies_fuses_into_its_last_nest() {
        // t1 := t0, t2 := t1, …, t9 := t8, every node between virtual.
        let f = Precision::F32;
        let nodes = (0..10)
            .map(|k| {
                let node = TensorNode::new(k, &format!("t{k}"), f, &[2]);
                if (1..9).contains(&k) {
                    node.with_mode(MemoryMode::Virtual)
                } else {
                    node
                }
            })
            .collect();
        let body = (1..10)
            .map(|k| store(k, k, get(k - 1, vec![at(k)])))
            .collect();
        let fused = virtualize(&routine(nodes, body)).unwrap();
        let [Stmt::For { var, body, .. }] = &fused.body[..] else {
            panic!("one nest: {fused}");
        };
        assert_eq!(*var, LoopVar(9));
        assert_eq!(body.len(), 9);
        assert_eq!(
            body[0].to_string() + &body[8].to_string(),
            "local v0: f32 := n0[l9]\nn9[l9] := v7\n"
        );
    }
}
