//! Memory modes: where each node of a routine lives. The rule, node by node in the order the
//! routine first writes them:
//!
//! - A mode set beforehand (`TensorNode::memory_mode`) is kept. A node set to be virtual must be
//!   inlinable (see `virtualize`), or the routine is an error, unless the routine neither writes
//!   nor reads it (as after optimizing).
//! - A node the routine never writes (an input) is materialized.
//! - A node the routine writes but never reads (a result) is materialized. A node's own
//!   accumulation, `n[w] := n[w] ⊕ e`, is not a read of it.
//! - A node read before it is written is materialized: its values come from an earlier run
//!   (parameters, optimizer state). Precisely, every read (the accumulation's included) must come
//!   after top-level statements that together write every cell of its buffer; a write that
//!   cannot be enumerated within a budget, or that indexes by a static index, counts as writing
//!   nothing. This covers reads before the first write and a nest that accumulates into cells
//!   nothing has set (`x =+ g`).
//! - A node written and then read is virtual when it is inlinable and cheap to recompute: its
//!   producer keeps no loops of its own (no reduction) and computes no transcendental function
//!   (exp, log, tanh, …: see `virtualize::is_transcendental`), its inlined reads included, or it
//!   is read at a single site whose loops each run over an axis of the read (so that each cell
//!   is computed at most once: softmax's exponentials, read by the sum and by the division, are
//!   stored once rather than computed at both), and,
//!   where that site lies in the producer of another virtual node, that node is read so too
//!   (else the reduction would be recomputed wherever the other node is inlined); and one cell
//!   takes at most [`INLINE_COST_LIMIT`] operations once what it reads of other virtual nodes
//!   is inlined into it (else a chain of nodes each reading the previous at several positions,
//!   a stack of blurs, would grow exponentially), of them at most
//!   [`INLINE_TRANSCENDENTAL_LIMIT`] transcendental functions (each is tens of operations in
//!   generated code, and a compiler's time on one loop body grows faster than the body: a chain
//!   of a thousand `tanh(sin(…))` fused whole took gcc 25 s and 1.5 GB), and at most
//!   [`SHARED_COST_LIMIT`] where it is read at several sites (each computes it again); and,
//!   unless a cell is one operation, every
//!   loop around each read moves the read (else a loop the read ignores, as a product's inner
//!   loop ignores one operand's axis, would recompute the same cell at each of its iterations);
//!   and recomputing it wherever it is read moves no more memory than storing it once and
//!   loading it there (reads of buffers of at most [`CACHED_READ_BYTES`] count as free: they
//!   stay in cache).
//! - Otherwise it is local (scratch storage for one run) when its buffer takes at most
//!   [`LOCAL_LIMIT_BYTES`], else materialized.

use std::collections::{BTreeSet, HashMap};

use rustc_hash::{FxHashMap, FxHashSet};

use super::body::Body;
use super::virtualize::{Producer, hazard};
use super::{OptimizeError, OptimizeErrorKind, covers_each_cell_once, describe, stmt_writes};
use crate::loops::{Index, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::routine::Routine;

/// The largest buffer, in bytes, that is kept as scratch storage rather than materialized.
pub const LOCAL_LIMIT_BYTES: usize = 16384;

/// The most operations one cell of a virtual node may take, its inlined reads included.
pub const INLINE_COST_LIMIT: usize = 128;

/// The most operations one cell of a virtual node read at several sites may take, its inlined
/// reads included: each site computes it again, and a chain of such nodes (a residual stream,
/// read by each layer's normalization and by the next sum) would otherwise grow up to
/// [`INLINE_COST_LIMIT`], every layer reading a longer prefix of the chain.
pub const SHARED_COST_LIMIT: usize = 16;

/// The most transcendental functions one cell of a virtual node may take, its inlined reads
/// included.
pub const INLINE_TRANSCENDENTAL_LIMIT: usize = 8;

/// The largest buffer, in bytes, whose reads cost no memory traffic when deciding whether to
/// recompute a node: it stays in the first-level cache while a nest runs (a bias, a row's
/// statistics).
pub const CACHED_READ_BYTES: usize = 4096;

/// How many cell positions the coverage check enumerates per node before it gives up.
const COVERAGE_BUDGET: usize = 1 << 20;

/// A routine's statements, indexed where they lie.
type Stmts<'a> = Body<&'a Stmt>;

/// `routine` with a memory mode on every node, by the rule above.
pub fn decide_memory_modes(routine: &Routine) -> Result<Routine, OptimizeError> {
    with_memory_modes(routine.clone())
}

/// [`decide_memory_modes`] of a routine given up for it: its statements are not copied.
pub(super) fn with_memory_modes(mut routine: Routine) -> Result<Routine, OptimizeError> {
    let modes = memory_modes(&routine)?;
    for node in routine.nodes.values_mut() {
        node.memory_mode = modes.get(&node.id).copied();
    }
    Ok(routine)
}

/// The memory mode of every node of `routine`, by the rule above.
fn memory_modes(routine: &Routine) -> Result<FxHashMap<NodeId, MemoryMode>, OptimizeError> {
    let body = Body::new(routine.body.iter().collect());
    let Uses { consumed, by_data } = Uses::of(&routine.body);
    let first_write = |node: NodeId| body.writers(node).next();
    let first_read = |node: NodeId| body.readers(node).next();
    let mut order: Vec<&TensorNode> = routine.nodes.values().collect();
    order.sort_by_cached_key(|node| (first_write(node.id), node.id));

    let mut modes: FxHashMap<NodeId, MemoryMode> = FxHashMap::default();
    let mut inlined: FxHashMap<NodeId, Inlined> = FxHashMap::default();
    for node in &order {
        let mode = match node.memory_mode {
            // Nothing to inline: an already optimized routine no longer mentions it.
            Some(MemoryMode::Virtual) if !body.mentions(node.id) => MemoryMode::Virtual,
            Some(MemoryMode::Virtual) => {
                let producer =
                    inlinable(&body, node, &inlined, &by_data).map_err(|reason| OptimizeError {
                        kind: OptimizeErrorKind::NotInlinable,
                        message: format!(
                            "{} is set to be virtual, but it cannot be inlined: {reason}",
                            describe(node)
                        ),
                    })?;
                record(&mut inlined, node.id, &producer);
                MemoryMode::Virtual
            }
            Some(mode) => mode,
            None if first_write(node.id).is_none() || !consumed.contains(&node.id) => {
                MemoryMode::Materialized
            }
            None => match inlinable(&body, node, &inlined, &by_data) {
                Ok(producer)
                    if (producer.kept.is_empty()
                        && inlined_transcendentals(&producer, &inlined) == 0
                        || single_site(&body, &producer).is_some())
                        && inlined_transcendentals(&producer, &inlined)
                            <= INLINE_TRANSCENDENTAL_LIMIT
                        && cheap_where_read(
                            &body,
                            &producer,
                            inlined_cost(&producer, &inlined),
                        )
                        && recomputing_moves_less(routine, &body, &producer, &inlined) =>
                {
                    record(&mut inlined, node.id, &producer);
                    MemoryMode::Virtual
                }
                _ => stored_mode(&body, node, first_read(node.id)),
            },
        };
        modes.insert(node.id, mode);
    }

    // Later nodes first, so that whether a consumer is itself read once is final when asked.
    let mut once: FxHashMap<NodeId, bool> = FxHashMap::default();
    for node in order.iter().rev() {
        let Some(Inlined { position, kept, .. }) = inlined.get(&node.id) else {
            continue;
        };
        let site = single_site_at(&body, node.id, *position);
        let within = site.and_then(|pos| {
            stmt_writes(body.stmt(pos))
                .into_iter()
                .find(|n| modes.get(n) == Some(&MemoryMode::Virtual))
        });
        let read_once = site.is_some() && within.is_none_or(|n| once.get(&n) == Some(&true));
        if *kept && !read_once && node.memory_mode.is_none() {
            modes.insert(node.id, stored_mode(&body, node, first_read(node.id)));
        } else {
            once.insert(node.id, read_once);
        }
    }

    Ok(modes)
}

/// A virtual node as its readers see it.
#[derive(Debug)]
struct Inlined {
    /// What its producer reads once the virtual nodes it reads are inlined into it.
    reads: BTreeSet<NodeId>,
    /// Its producer's top-level position.
    position: usize,
    /// Whether its producer keeps loops of its own (a reduction).
    kept: bool,
    /// The operations one of its cells takes, its inlined reads included.
    cost: usize,
    /// The transcendental operations among them.
    transcendentals: usize,
    /// The reads at positions held in data among them.
    lookups: usize,
}

fn record(inlined: &mut FxHashMap<NodeId, Inlined>, node: NodeId, producer: &Producer) {
    let reads = inlined_reads(producer, inlined);
    inlined.insert(
        node,
        Inlined {
            reads,
            position: producer.position,
            kept: !producer.kept.is_empty(),
            cost: inlined_cost(producer, inlined),
            transcendentals: inlined_transcendentals(producer, inlined),
            lookups: inlined_lookups(producer, inlined),
        },
    );
}

/// The operations one cell of `producer`'s node takes once the virtual nodes among its reads
/// are inlined into it.
fn inlined_cost(producer: &Producer, inlined: &FxHashMap<NodeId, Inlined>) -> usize {
    producer.cost(&|node| inlined.get(&node).map(|v| v.cost))
}

/// The transcendental operations one cell of `producer`'s node takes once the virtual nodes
/// among its reads are inlined into it.
fn inlined_transcendentals(producer: &Producer, inlined: &FxHashMap<NodeId, Inlined>) -> usize {
    producer.transcendentals(&|node| inlined.get(&node).map(|v| v.transcendentals))
}

/// The reads at positions held in data one cell of `producer`'s node makes once the virtual
/// nodes among its reads are inlined into it.
fn inlined_lookups(producer: &Producer, inlined: &FxHashMap<NodeId, Inlined>) -> usize {
    producer.lookups(&|node| inlined.get(&node).map(|v| v.lookups))
}

/// What `producer` reads once the virtual nodes among its reads are inlined into it.
fn inlined_reads(producer: &Producer, inlined: &FxHashMap<NodeId, Inlined>) -> BTreeSet<NodeId> {
    producer
        .reads()
        .into_iter()
        .flat_map(|node| match inlined.get(&node) {
            Some(virtual_node) => virtual_node.reads.clone(),
            None => BTreeSet::from([node]),
        })
        .collect()
}

/// The producer of `node`, if it can be inlined where it is read: its shape (see `virtualize`),
/// and no statement between it and its last reader writes what it reads, directly or through
/// the virtual nodes inlined into it.
fn inlinable(
    body: &Stmts,
    node: &TensorNode,
    inlined: &FxHashMap<NodeId, Inlined>,
    by_data: &FxHashSet<NodeId>,
) -> Result<Producer, String> {
    // A cell chosen by data has no index to inline the producer at.
    if by_data.contains(&node.id) {
        return Err(
            "it is read or written at positions held in data (a gather or its \
                    gradient)"
                .to_owned(),
        );
    }
    let producer = Producer::find(body, node)?;
    let reads = inlined_reads(&producer, inlined);
    match hazard(body, producer.node, producer.position, &reads) {
        Some(reason) => Err(reason),
        None => Ok(producer),
    }
}

/// Local when the node fits [`LOCAL_LIMIT_BYTES`] and is written everywhere before its first
/// read, else materialized.
fn stored_mode(body: &Stmts, node: &TensorNode, first_read: Option<usize>) -> MemoryMode {
    let small = buffer_len(node)
        .and_then(|len| len.checked_mul(node.precision.size_in_bytes()))
        .is_some_and(|bytes| bytes <= LOCAL_LIMIT_BYTES);
    if small && covered(body, first_read.unwrap_or(body.end()), node) {
        MemoryMode::Local
    } else {
        MemoryMode::Materialized
    }
}

/// What one walk of a body finds of how its nodes are used.
struct Uses {
    /// The nodes read other than by their own accumulation, `n[w] := n[w] ⊕ e`.
    consumed: FxHashSet<NodeId>,
    /// The nodes read or written at positions held in data (a gather, a scatter).
    by_data: FxHashSet<NodeId>,
}

impl Uses {
    fn of(body: &[Stmt]) -> Uses {
        let (mut consumed, mut by_data) = (FxHashSet::default(), FxHashSet::default());
        for stmt in body {
            stmt.walk(&mut |s| {
                if let Stmt::ScatterAdd { target, .. } = s {
                    by_data.insert(target.node);
                }
                for value in s.values() {
                    value.for_each_lookup(&mut |node| {
                        by_data.insert(node);
                    });
                }
                let mut consume = |scalar: &Scalar| {
                    scalar.for_each_get(&mut |node, _| {
                        consumed.insert(node);
                    });
                };
                match s {
                    Stmt::Set {
                        node,
                        index,
                        value: Scalar::Binop(_, own, rest),
                    } if matches!(&**own, Scalar::Get(n, i) if n == node && i == index) => {
                        consume(rest)
                    }
                    _ => s.values().for_each(&mut consume),
                }
            });
        }
        Uses { consumed, by_data }
    }
}

/// Whether inlining `producer`, whose cell takes `cost` operations, keeps the work bounded: at
/// most [`INLINE_COST_LIMIT`] operations, and, unless it is a single operation, recomputed only
/// once per iteration of the loops around each read (every loop there of more than one
/// iteration moves the read).
fn cheap_where_read(body: &Stmts, producer: &Producer, cost: usize) -> bool {
    if cost > INLINE_COST_LIMIT {
        return false;
    }
    if cost <= 1 {
        return true;
    }
    let mut moves = true;
    let mut sites = 0;
    for_each_site(body, producer.node, producer.position, |_, loops, index| {
        sites += 1;
        moves &= loops.iter().all(|&(var, range)| {
            range <= 1
                || index
                    .iter()
                    .any(|axis| axis.vars().any(|v| v == Var::Loop(var)))
        });
    });
    moves && (sites <= 1 || cost <= SHARED_COST_LIMIT)
}

/// Whether computing `producer`'s cells again wherever they are read moves no more memory than
/// storing them once: with `sites` distinct reads and `streams` buffers read by the producer
/// (its inlined reads included) that do not stay in the first-level cache, recomputing loads
/// `sites × streams` cells where storing loads `streams`, stores one and loads `sites`. A
/// residual stream read by a layer norm's statistics, its normalization and their gradients is
/// stored; a bias add or an activation read once is not. A producer that gathers (reads at
/// positions held in data, an embedding's rows) is recomputed at one site at most: its reads
/// go wherever the data points and do not vectorize.
fn recomputing_moves_less(
    routine: &Routine,
    body: &Stmts,
    producer: &Producer,
    inlined: &FxHashMap<NodeId, Inlined>,
) -> bool {
    let mut sites: usize = 0;
    for_each_site(body, producer.node, producer.position, |_, _, _| sites += 1);
    let streams = inlined_reads(producer, inlined)
        .into_iter()
        .filter(|read| {
            routine.nodes.get(read).is_none_or(|node| {
                buffer_len(node)
                    .and_then(|len| len.checked_mul(node.precision.size_in_bytes()))
                    .is_none_or(|bytes| bytes > CACHED_READ_BYTES)
            })
        })
        .count();
    if inlined_lookups(producer, inlined) > 0 {
        sites <= 1
    } else {
        sites * streams <= streams + 1 + sites
    }
}

/// The top-level statement holding the one site that reads `producer`'s node, if there is one
/// site and each cell is read there at most once.
fn single_site(body: &Stmts, producer: &Producer) -> Option<usize> {
    single_site_at(body, producer.node, producer.position)
}

fn single_site_at(body: &Stmts, node: NodeId, producer: usize) -> Option<usize> {
    let mut sites = Vec::new();
    for_each_site(body, node, producer, |position, loops, index| {
        sites.push((position, visits_once(loops, index)));
    });
    match sites[..] {
        [(position, true)] => Some(position),
        _ => None,
    }
}

/// Calls `site` with the top-level position, the loops around it and the index of every
/// distinct read of `node` outside its producer's statement (at `producer`).
fn for_each_site(
    body: &Stmts,
    node: NodeId,
    producer: usize,
    mut site: impl FnMut(usize, &[(LoopVar, usize)], &[Index]),
) {
    for position in body.readers(node) {
        if position != producer {
            collect_sites(
                body.stmt(position),
                node,
                &mut Vec::new(),
                &mut |loops, index| site(position, loops, index),
            );
        }
    }
}

/// Calls `site` once per distinct index `node` is read at in each statement, with the loops
/// around the statement.
fn collect_sites(
    stmt: &Stmt,
    node: NodeId,
    loops: &mut Vec<(LoopVar, usize)>,
    site: &mut impl FnMut(&[(LoopVar, usize)], &[Index]),
) {
    if let Stmt::For { var, range, body } = stmt {
        loops.push((*var, *range));
        for inner in body {
            collect_sites(inner, node, loops, site);
        }
        loops.pop();
        return;
    }
    let mut indices: Vec<Vec<Index>> = Vec::new();
    for value in stmt.values() {
        value.for_each_get(&mut |n, index| {
            if n == node && !indices.iter().any(|i| i == index) {
                indices.push(index.to_vec());
            }
        });
    }
    for index in &indices {
        site(loops, index);
    }
}

/// Whether a read at `index` inside `loops` reads each cell at most once: every loop of more
/// than one iteration is the only term, with coefficient 1, of an axis of the index.
fn visits_once(loops: &[(LoopVar, usize)], index: &[Index]) -> bool {
    loops.iter().all(|&(var, range)| {
        range <= 1
            || index
                .iter()
                .any(|axis| axis.terms[..] == [(1, Var::Loop(var))])
    })
}

/// The node's buffer length, if it does not overflow.
fn buffer_len(node: &TensorNode) -> Option<usize> {
    buffer_dims(node)?
        .into_iter()
        .try_fold(1usize, |len, dim| len.checked_mul(dim))
}

fn buffer_dims(node: &TensorNode) -> Option<Vec<usize>> {
    node.dims
        .iter()
        .zip(&node.padding)
        .map(|(dim, (before, after))| dim.checked_add(*before)?.checked_add(*after))
        .collect()
}

/// Whether the top-level statements before `end` write every cell of `node`'s buffer.
fn covered(body: &Stmts, end: usize, node: &TensorNode) -> bool {
    let (Some(dims), Some(len)) = (buffer_dims(node), buffer_len(node)) else {
        return false;
    };
    if dims.len() != node.dims.len() || node.padding.len() != node.dims.len() {
        return false;
    }
    if len == 0 {
        return true;
    }
    let mut cover = Cover {
        node,
        dims,
        marks: vec![false; len],
        budget: COVERAGE_BUDGET,
    };
    // Only statements writing the node mark cells, or give up.
    for position in body.writers_in(node.id, 0..end) {
        if !cover.stmt(body.stmt(position), &mut Vec::new()) {
            return false;
        }
    }
    cover.marks.iter().all(|m| *m)
}

/// The cells of one node's buffer marked as written so far.
#[derive(Debug)]
struct Cover<'a> {
    node: &'a TensorNode,
    dims: Vec<usize>,
    marks: Vec<bool>,
    budget: usize,
}

impl Cover<'_> {
    /// Marks what `stmt` writes; `false` when that is more than the budget allows enumerating.
    fn stmt(&mut self, stmt: &Stmt, loops: &mut Vec<(LoopVar, usize)>) -> bool {
        let id = self.node.id;
        match stmt {
            Stmt::For { var, range, body } => {
                loops.push((*var, *range));
                let ok = body.iter().all(|s| self.stmt(s, loops));
                loops.pop();
                ok
            }
            Stmt::Fill { node, .. } if *node == id => {
                self.marks.fill(true);
                true
            }
            Stmt::FillMargins { node, .. } if *node == id => {
                for cell in 0..self.marks.len() {
                    if self.in_margins(cell) {
                        self.marks[cell] = true;
                    }
                }
                true
            }
            // Each axis a loop over all of it: every cell, with no need to enumerate them.
            Stmt::Set { node, index, .. }
                if *node == id
                    && loops.iter().all(|(_, range)| *range > 0)
                    && covers_each_cell_once(index, loops, &self.dims) =>
            {
                self.marks.fill(true);
                true
            }
            Stmt::Set { node, index, .. } if *node == id && index.len() == self.dims.len() => {
                let strides = row_major_strides(&self.dims);
                self.each_point(loops, index, |cover, values| {
                    let position = index.iter().zip(&cover.dims).zip(&strides).try_fold(
                        0usize,
                        |position, ((axis, &dim), &stride)| {
                            let value = usize::try_from(evaluate(axis, values)?).ok()?;
                            (value < dim).then(|| position + value * stride)
                        },
                    );
                    if let Some(position) = position {
                        cover.marks[position] = true;
                    }
                })
            }
            Stmt::SetVec {
                node, offset, op, ..
            } if *node == id => {
                let length = op.length(self.node.precision);
                self.each_point(loops, std::slice::from_ref(offset), |cover, values| {
                    let Some(start) =
                        evaluate(offset, values).and_then(|s| usize::try_from(s).ok())
                    else {
                        return;
                    };
                    let end = start.saturating_add(length).min(cover.marks.len());
                    for mark in cover.marks.iter_mut().take(end).skip(start) {
                        *mark = true;
                    }
                })
            }
            _ => true,
        }
    }

    /// Calls `mark` at every assignment of the loop variables `index` mentions. A store under a
    /// loop that never runs, or indexed by a static index or an unknown variable, marks nothing.
    fn each_point(
        &mut self,
        loops: &[(LoopVar, usize)],
        index: &[Index],
        mut mark: impl FnMut(&mut Self, &HashMap<LoopVar, i64>),
    ) -> bool {
        if loops.iter().any(|(_, range)| *range == 0) {
            return true;
        }
        let mut vars: Vec<(LoopVar, usize)> = Vec::new();
        for var in index.iter().flat_map(Index::vars) {
            let Var::Loop(var) = var else {
                return true;
            };
            let Some(&(_, range)) = loops.iter().find(|(v, _)| *v == var) else {
                return true;
            };
            if !vars.iter().any(|(v, _)| *v == var) {
                vars.push((var, range));
            }
        }
        let points = vars
            .iter()
            .try_fold(1usize, |n, (_, range)| n.checked_mul(*range));
        match points {
            Some(points) if points <= self.budget => self.budget -= points,
            _ => return false,
        }
        let mut values: HashMap<LoopVar, i64> = vars.iter().map(|(v, _)| (*v, 0)).collect();
        loop {
            mark(self, &values);
            // The next assignment, the last variable fastest.
            let mut carried = true;
            for (var, range) in vars.iter().rev() {
                let value = values.get_mut(var).expect("every variable has a value");
                *value += 1;
                if (*value as usize) < *range {
                    carried = false;
                    break;
                }
                *value = 0;
            }
            if carried {
                return true;
            }
        }
    }

    fn in_margins(&self, cell: usize) -> bool {
        let mut rest = cell;
        let mut inside = true;
        for axis in (0..self.dims.len()).rev() {
            let coordinate = rest % self.dims[axis];
            rest /= self.dims[axis];
            let (before, _) = self.node.padding[axis];
            inside &= coordinate >= before && coordinate < before + self.node.dims[axis];
        }
        !inside
    }
}

fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for axis in (0..dims.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * dims[axis + 1];
    }
    strides
}

/// The value of `index` where the loop variables hold `values`, if it does not overflow.
fn evaluate(index: &Index, values: &HashMap<LoopVar, i64>) -> Option<i64> {
    index.terms.iter().try_fold(index.offset, |sum, (c, var)| {
        let Var::Loop(var) = var else {
            return None;
        };
        sum.checked_add(c.checked_mul(*values.get(var)?)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Binop;
    use crate::precision::Precision;

    fn node(id: u32, dims: &[usize]) -> TensorNode {
        TensorNode::new(id, &format!("t{id}"), Precision::F32, dims)
    }

    fn get(node: u32, index: Vec<Index>) -> Scalar {
        Scalar::Get(NodeId(node), index)
    }

    /// `for l{var} in 0..range { body }`.
    fn for_(var: u32, range: usize, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: LoopVar(var),
            range,
            body,
        }
    }

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    fn set(node: u32, index: Vec<Index>, value: Scalar) -> Stmt {
        Stmt::Set {
            node: NodeId(node),
            index,
            value,
        }
    }

    fn modes(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Vec<MemoryMode> {
        let routine = Routine {
            name: "r".to_owned(),
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            statics: Default::default(),
            body,
        };
        let decided = decide_memory_modes(&routine).unwrap();
        decided
            .nodes
            .values()
            .map(|n| n.memory_mode.unwrap())
            .collect()
    }

    #[test]
    fn inputs_results_and_intermediates() {
        use MemoryMode::*;
        // n1[i] := n0[i]; n2[i] := n1[i].
        let body = vec![
            for_(0, 4, vec![set(1, vec![at(0)], get(0, vec![at(0)]))]),
            for_(1, 4, vec![set(2, vec![at(1)], get(1, vec![at(1)]))]),
        ];
        let nodes = vec![node(0, &[4]), node(1, &[4]), node(2, &[4])];
        assert_eq!(
            modes(nodes.clone(), body.clone()),
            [Materialized, Virtual, Materialized]
        );
        // Read before it is written: the order reversed.
        let reversed = vec![body[1].clone(), body[0].clone()];
        assert_eq!(
            modes(nodes, reversed),
            [Materialized, Materialized, Materialized]
        );
    }

    #[test]
    fn partial_writes_do_not_cover() {
        use MemoryMode::*;
        // n1[i] := n0[i] for i < 2 of 4 cells, then a reduction of n1 read at two sites.
        let body = vec![
            for_(0, 2, vec![set(1, vec![at(0)], get(0, vec![at(0)]))]),
            for_(
                1,
                4,
                vec![set(
                    2,
                    vec![at(1)],
                    Scalar::Binop(
                        Binop::Add,
                        Box::new(get(1, vec![at(1)])),
                        Box::new(get(1, vec![Index::constant(0)])),
                    ),
                )],
            ),
        ];
        let nodes = vec![node(0, &[2]), node(1, &[4]), node(2, &[4])];
        assert_eq!(
            modes(nodes, body),
            [Materialized, Materialized, Materialized]
        );
    }

    #[test]
    fn accumulating_into_what_is_there_is_a_read_first() {
        use MemoryMode::*;
        // n1[i] := n1[i] + n0[i]; n2[i] := n1[i].
        let body = vec![
            for_(
                0,
                4,
                vec![set(
                    1,
                    vec![at(0)],
                    Scalar::Binop(
                        Binop::Add,
                        Box::new(get(1, vec![at(0)])),
                        Box::new(get(0, vec![at(0)])),
                    ),
                )],
            ),
            for_(1, 4, vec![set(2, vec![at(1)], get(1, vec![at(1)]))]),
        ];
        let nodes = vec![node(0, &[4]), node(1, &[4]), node(2, &[4])];
        assert_eq!(
            modes(nodes, body),
            [Materialized, Materialized, Materialized]
        );
    }

    fn times_two(node: u32, index: Vec<Index>) -> Scalar {
        Scalar::Binop(
            Binop::Mul,
            Box::new(get(node, index)),
            Box::new(Scalar::Const(2.0)),
        )
    }

    #[test]
    fn a_node_read_again_at_each_iteration_of_a_loop_is_inlined_only_if_trivial() {
        use MemoryMode::*;
        // t1[i] := f(t0[i]); t3[i, j] := t1[i] + t2[i, j]: the j loop does not move the read.
        let body = |value: Scalar| {
            vec![
                for_(0, 4, vec![set(1, vec![at(0)], value)]),
                for_(
                    1,
                    4,
                    vec![for_(
                        2,
                        5,
                        vec![set(
                            3,
                            vec![at(1), at(2)],
                            Scalar::Binop(
                                Binop::Add,
                                Box::new(get(1, vec![at(1)])),
                                Box::new(get(2, vec![at(1), at(2)])),
                            ),
                        )],
                    )],
                ),
            ]
        };
        let nodes = vec![
            node(0, &[4]),
            node(1, &[4]),
            node(2, &[4, 5]),
            node(3, &[4, 5]),
        ];
        // A copy is as cheap to repeat as to load; 2·t0[i] is stored.
        assert_eq!(
            modes(nodes.clone(), body(get(0, vec![at(0)]))),
            [Materialized, Virtual, Materialized, Materialized]
        );
        assert_eq!(
            modes(nodes, body(times_two(0, vec![at(0)]))),
            [Materialized, Local, Materialized, Materialized]
        );
    }

    #[test]
    fn a_sum_of_streams_read_at_many_sites_is_stored_once() {
        use MemoryMode::*;
        // t3[i] := t0[i] + t1[i] + t2[i], then read by `readers` nests t4[i] := 2·t3[i], ….
        let add = |a: Scalar, b: Scalar| Scalar::Binop(Binop::Add, Box::new(a), Box::new(b));
        let decide = |cells: usize, readers: u32| {
            let mut body = vec![for_(
                0,
                cells,
                vec![set(
                    3,
                    vec![at(0)],
                    add(
                        add(get(0, vec![at(0)]), get(1, vec![at(0)])),
                        get(2, vec![at(0)]),
                    ),
                )],
            )];
            let mut nodes: Vec<TensorNode> = (0..4).map(|id| node(id, &[cells])).collect();
            for reader in 0..readers {
                body.push(for_(
                    reader + 1,
                    cells,
                    vec![set(
                        4 + reader,
                        vec![at(reader + 1)],
                        times_two(3, vec![at(reader + 1)]),
                    )],
                ));
                nodes.push(node(4 + reader, &[cells]));
            }
            modes(nodes, body)[3]
        };
        // Three streams of 8 KiB: recomputed at two sites they load 6 buffers, as many as
        // storing (3 loaded, 1 stored, 2 loaded); at three sites, 9 against 7.
        assert_eq!(decide(2048, 2), Virtual);
        assert_eq!(decide(2048, 3), Local);
        // Buffers that stay in cache cost nothing to read again.
        assert_eq!(decide(64, 3), Virtual);
    }

    #[test]
    fn a_pre_fill_need_not_be_right_before_the_accumulation() {
        use MemoryMode::*;
        // fill t1; t2 := t0 (or := t1, a read of the fill); t1 += t0; t3 := 2 t1.
        let accumulate = for_(
            1,
            4,
            vec![set(
                1,
                vec![at(1)],
                Scalar::Binop(
                    Binop::Add,
                    Box::new(get(1, vec![at(1)])),
                    Box::new(get(0, vec![at(1)])),
                ),
            )],
        );
        let body = |between: u32| {
            vec![
                Stmt::Fill {
                    node: NodeId(1),
                    value: 0.0,
                },
                for_(0, 4, vec![set(2, vec![at(0)], get(between, vec![at(0)]))]),
                accumulate.clone(),
                for_(2, 4, vec![set(3, vec![at(2)], times_two(1, vec![at(2)]))]),
            ]
        };
        let nodes: Vec<TensorNode> = (0..4).map(|k| node(k, &[4])).collect();
        assert_eq!(
            modes(nodes.clone(), body(0)),
            [Materialized, Virtual, Materialized, Materialized]
        );
        assert_eq!(
            modes(nodes, body(1)),
            [Materialized, Local, Materialized, Materialized]
        );
    }

    #[test]
    fn a_write_hazards_what_is_inlined_through_another_node() {
        use MemoryMode::*;
        // t := −a; u := 2t; a := c; r := u. Inlining u into r would read t's input a after
        // it changed, though u does not read a itself.
        let body = vec![
            for_(
                0,
                4,
                vec![set(
                    1,
                    vec![at(0)],
                    Scalar::Unop(crate::ops::Unop::Neg, Box::new(get(0, vec![at(0)]))),
                )],
            ),
            for_(1, 4, vec![set(2, vec![at(1)], times_two(1, vec![at(1)]))]),
            for_(2, 4, vec![set(0, vec![at(2)], get(3, vec![at(2)]))]),
            for_(3, 4, vec![set(4, vec![at(3)], get(2, vec![at(3)]))]),
        ];
        let nodes = (0..5).map(|id| node(id, &[4])).collect();
        assert_eq!(
            modes(nodes, body),
            [Materialized, Virtual, Local, Materialized, Materialized]
        );
    }

    #[test]
    fn a_chain_read_once_is_stored_where_inlining_grows_past_the_limit() {
        use MemoryMode::*;
        // t{k+1}[i] := t{k}[i] + x[i], seventy times: each level is read at one site, and
        // inlined, t{k} takes 2k + 1 operations per cell: t64's 129 are over the limit, so t64
        // is stored and t65 starts again from 3.
        const LEVELS: u32 = 70;
        let x = LEVELS + 1;
        let add = |level: u32| {
            let sum = Scalar::Binop(
                Binop::Add,
                Box::new(get(level, vec![at(level)])),
                Box::new(get(x, vec![at(level)])),
            );
            for_(level, 8, vec![set(level + 1, vec![at(level)], sum)])
        };
        let body: Vec<Stmt> = (0..LEVELS).map(add).collect();
        let nodes: Vec<TensorNode> = (0..=x).map(|k| node(k, &[8])).collect();
        // The first k with 2k + 1 over the limit.
        let stored = INLINE_COST_LIMIT as u32 / 2;
        let expected: Vec<MemoryMode> = (0..=x)
            .map(|k| match k {
                0 => Materialized,
                k if k == stored => Local,
                k if k == LEVELS || k == x => Materialized,
                _ => Virtual,
            })
            .collect();
        assert_eq!(stored, 64);
        assert_eq!(modes(nodes, body), expected);
    }

    #[test]
    fn a_chain_of_blurs_is_stored_before_inlining_grows_too_large() {
        use MemoryMode::*;
        // t{k+1}[i] := t{k}[i] + t{k}[i + 1] + t{k}[i + 2], eight times over a 20-cell t0. Each
        // level is read at three sites, and inlined it computes three of the previous: 5, then
        // 17 operations per cell, over the limit of a node computed again at each of its sites,
        // so every second level is stored and the next starts again from 5.
        let blur = |level: u32| {
            let read = |offset| get(level, vec![Index::var(LoopVar(level), offset)]);
            let sum = Scalar::Binop(
                Binop::Add,
                Box::new(Scalar::Binop(
                    Binop::Add,
                    Box::new(read(0)),
                    Box::new(read(1)),
                )),
                Box::new(read(2)),
            );
            for_(
                level,
                20 - 2 * (level as usize + 1),
                vec![set(level + 1, vec![at(level)], sum)],
            )
        };
        let body: Vec<Stmt> = (0..8).map(blur).collect();
        let nodes: Vec<TensorNode> = (0..9).map(|k| node(k, &[20 - 2 * k as usize])).collect();
        assert_eq!(
            modes(nodes, body),
            [
                Materialized,
                Virtual,
                Local,
                Virtual,
                Local,
                Virtual,
                Local,
                Virtual,
                Materialized
            ]
        );
    }

    #[test]
    fn a_chain_of_transcendentals_is_stored_every_few_functions() {
        use MemoryMode::*;
        // t{k+1}[i] := tanh(t{k}[i]), twenty times: each node read once, where each cell is
        // computed once, but at most eight functions go into one cell, so every ninth node is
        // stored and the chain starts again from it.
        let body: Vec<Stmt> = (0..20)
            .map(|k| {
                let value = Scalar::Unop(crate::ops::Unop::Tanh, Box::new(get(k, vec![at(k)])));
                for_(k, 16, vec![set(k + 1, vec![at(k)], value)])
            })
            .collect();
        let nodes: Vec<TensorNode> = (0..21).map(|k| node(k, &[16])).collect();
        let decided = modes(nodes, body);
        let stored: Vec<usize> = (1..20).filter(|&k| decided[k] != Virtual).collect();
        assert_eq!(stored, [9, 18], "{decided:?}");
        assert_eq!((decided[0], decided[20]), (Materialized, Materialized));
    }

    #[test]
    fn a_reduction_inlined_into_a_node_read_many_times_is_stored() {
        use MemoryMode::*;
        // s[i] += m[i, j]; u[i] := s[i]; r[i, j] := u[i] + m[i, j]. s is read once, by u, and
        // u at every j: with the sum inlined into it, u is too costly to repeat there, so it is
        // stored, and the sum is computed once per cell of u.
        let body = vec![
            Stmt::Fill {
                node: NodeId(1),
                value: 0.0,
            },
            for_(
                0,
                2,
                vec![for_(
                    1,
                    3,
                    vec![set(
                        1,
                        vec![at(0)],
                        Scalar::Binop(
                            Binop::Add,
                            Box::new(get(1, vec![at(0)])),
                            Box::new(get(0, vec![at(0), at(1)])),
                        ),
                    )],
                )],
            ),
            for_(2, 2, vec![set(2, vec![at(2)], get(1, vec![at(2)]))]),
            for_(
                3,
                2,
                vec![for_(
                    4,
                    3,
                    vec![set(
                        3,
                        vec![at(3), at(4)],
                        Scalar::Binop(
                            Binop::Add,
                            Box::new(get(2, vec![at(3)])),
                            Box::new(get(0, vec![at(3), at(4)])),
                        ),
                    )],
                )],
            ),
        ];
        let nodes = vec![
            node(0, &[2, 3]),
            node(1, &[2]),
            node(2, &[2]),
            node(3, &[2, 3]),
        ];
        assert_eq!(
            modes(nodes.clone(), body.clone()),
            [Materialized, Virtual, Local, Materialized]
        );
        // Read once per cell by r instead, the sum is inlined through u.
        let mut once = body;
        once[3] = for_(
            3,
            2,
            vec![set(3, vec![at(3), Index::constant(0)], get(2, vec![at(3)]))],
        );
        let mut nodes = nodes;
        nodes[3] = node(3, &[2, 1]);
        assert_eq!(
            modes(nodes, once),
            [Materialized, Virtual, Virtual, Materialized]
        );
    }

    #[test]
    fn reads_visit_each_cell_once() {
        let (i, j) = (LoopVar(0), LoopVar(1));
        let loops = [(i, 2), (j, 3)];
        assert!(visits_once(&loops, &[at(1), at(0)]));
        assert!(visits_once(&loops, &[Index::var(j, 1), at(0)]));
        // j does not move the read: the same cell three times.
        assert!(!visits_once(&loops, &[at(0)]));
        // A loop of one iteration visits nothing twice.
        assert!(visits_once(&[(i, 2), (j, 1)], &[at(0)]));
    }

    #[test]
    fn coverage_enumerates_stores() {
        let mut padded = node(0, &[3]);
        padded.padding = vec![(1, 1)];
        let interior = for_(
            0,
            3,
            vec![set(0, vec![Index::var(LoopVar(0), 1)], Scalar::Const(1.0))],
        );
        let margins = Stmt::FillMargins {
            node: NodeId(0),
            value: 0.0,
        };
        assert!(!covered(&Body::new(vec![&interior]), 1, &padded));
        assert!(covered(&Body::new(vec![&interior, &margins]), 2, &padded));
        let statics = set(
            0,
            vec![Index {
                terms: smallvec::smallvec![(1, Var::Static(crate::index::Symbol(0)))],
                offset: 0,
            }],
            Scalar::Const(1.0),
        );
        assert!(!covered(&Body::new(vec![&statics]), 1, &node(0, &[1])));
    }
}
