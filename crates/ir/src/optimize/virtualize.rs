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

use std::collections::{BTreeSet, HashMap, HashSet};

use super::body::Body;
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
    let mut body = Body::new(routine.body.clone());
    let mut order: Vec<(Option<usize>, &TensorNode)> = routine
        .nodes
        .values()
        .filter(|node| node.memory_mode == Some(MemoryMode::Virtual) && body.mentions(node.id))
        .map(|node| (body.writers(node.id).next_back(), node))
        .collect();
    order.sort_by_key(|(position, node)| (*position, node.id));
    let mut fresh = Fresh::new(&routine.body);
    let mut in_use = InUse::of(&routine.body);
    for (_, node) in order {
        let cannot = |reason: String| OptimizeError {
            kind: OptimizeErrorKind::NotInlinable,
            message: format!(
                "{} is virtual, but it cannot be inlined: {reason}",
                describe(node)
            ),
        };
        let producer = Producer::find(&body, node).map_err(cannot)?;
        if let Some(reason) = hazard(&body, &producer, &producer.reads()) {
            return Err(cannot(reason));
        }
        inline(&mut body, &producer, &mut fresh, &mut in_use);
    }
    Ok(Routine {
        body: body.into_stmts(),
        ..routine.clone()
    })
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
    pub(super) fn find(body: &Body, node: &TensorNode) -> Result<Producer, String> {
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

/// Why inlining `producer` where its node is read would read changed values: a top-level
/// statement after it, up to the last one reading its node, writes one of `reads`.
pub(super) fn hazard(body: &Body, producer: &Producer, reads: &BTreeSet<NodeId>) -> Option<String> {
    let last = body
        .readers(producer.node)
        .rev()
        .find(|&p| p != producer.position)?;
    // The first such statement, and the first of `reads` it writes.
    let (p, node) = reads
        .iter()
        .filter_map(|&node| {
            let first = body
                .writers_in(node, producer.position + 1..last + 1)
                .next()?;
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
fn inline(body: &mut Body, producer: &Producer, fresh: &mut Fresh, in_use: &mut InUse) {
    for slot in [Some(producer.position), producer.fill]
        .into_iter()
        .flatten()
    {
        in_use.remove(&names([&body.take(slot)]));
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
        let stmt = body.take(slot);
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
        body.put(slot, stmt);
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
}
