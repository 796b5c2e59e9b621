//! The loop-IR optimizer: `optimize` runs its passes in order (numbers that only a fill writes
//! read as constants, fills a first write makes useless dropped, slices read where they lie
//! instead of copied, matrix products recognized, memory modes, fusion of virtual nodes, local accumulators, loop order for unit-stride stores,
//! sibling loops merged, simplification, loop-invariant hoisting, shared subexpressions), and this module holds what
//! they share: the error, fresh loop variables and locals, substitution into indices, the shape of
//! a perfect nest, and the reads and writes of statements; `body` indexes a body's statements by
//! the nodes they write and read, so that a pass asking about one node looks at its statements only;
//! `fused` keeps the nests fusion builds link by link down a chain, so that the chain fuses in time
//! linear in its length; `repeats` runs the passes after the memory modes chunk by chunk on a
//! large routine, each distinct chunk once, so that a deep model's repeated layers are
//! transformed once.
//!
//! Every pass is a pure function from a routine to a routine, public so that it can be run alone.
//! None changes what the reference interpreter computes, bit for bit, except where a pass's own
//! documentation says so. `split_sums`, which cuts sums into parts for threads, is not one of
//! `optimize`'s passes: backends that run loops on threads call it.

pub mod accumulate;
mod body;
pub mod constants;
pub mod cse;
pub mod fills;
mod fused;
pub mod gather;
pub mod gemm;
pub mod hoist;
pub mod margins;
pub mod memory;
pub mod merge;
pub mod order;
mod repeats;
pub mod simplify;
pub mod slices;
pub mod split_sums;
pub mod virtualize;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::loops::{Index, LocalId, Lookup, LoopVar, Scalar, Stmt, Terms, Var};
use crate::node::{NodeId, TensorNode};
use crate::precision::Precision;
use crate::routine::Routine;
use crate::value::Value;

/// Why a routine cannot be optimized: a node forced to be virtual that cannot be inlined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OptimizeError {
    /// What kind of problem it is.
    pub kind: OptimizeErrorKind,
    /// Which node cannot be inlined and why (what `Display` prints).
    pub message: String,
}

/// What kind of problem stops a routine from being optimized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OptimizeErrorKind {
    /// A node that must be virtual (forced so, or by its memory mode) cannot be inlined where
    /// it is read.
    NotInlinable,
}

/// `routine` with its numbers read as constants, the fills its first writes overwrite dropped,
/// its slices read where they lie, its matrix products recognized,
/// a memory mode on every node, virtual nodes
/// inlined where they are read, local accumulators for reductions, unit-stride stores innermost,
/// sibling loops over the same cells merged, constants folded, loop-invariant operations computed before inner loops and repeated
/// subexpressions shared.
pub fn optimize(routine: &Routine) -> Result<Routine, OptimizeError> {
    optimize_owned(routine.clone())
}

/// [`optimize`] of a routine the caller no longer needs: its statements move through the passes
/// that change them in place instead of being copied first.
pub fn optimize_owned(routine: Routine) -> Result<Routine, OptimizeError> {
    in_chunks(Cow::Owned(decided(routine)?), |_, _| true, transformed)
}

/// `routine`, its memory modes decided, rewritten by `transform`: chunk by chunk where it is
/// large, each distinct chunk once (see `repeats`), else whole. Two top-level statements fall in
/// different chunks only where `may_cut` allows it (where what `transform` does with the first
/// never depends on the second), and never where a local declared before is used after. For
/// passes that rewrite nests by the memory modes and the nests themselves, adding no nodes: the
/// optimizer's own after the modes, and a backend's before it writes kernels. A routine lent
/// rather than given is copied only where it is transformed whole: chunks are read where they
/// lie, and only the distinct ones copied.
pub fn in_chunks<E: Send>(
    routine: Cow<'_, Routine>,
    may_cut: impl Fn(&Stmt, &Stmt) -> bool,
    transform: impl Fn(Routine) -> Result<Routine, E> + Sync,
) -> Result<Routine, E> {
    if routine.body.len() < repeats::CHUNKED_FROM {
        return transform(routine.into_owned());
    }
    repeats::transform_in_chunks(routine, may_cut, transform)
}

/// The passes up to the memory modes, which decide over the whole routine: constants, fills,
/// slices, matrix products, and where each node lives.
fn decided(routine: Routine) -> Result<Routine, OptimizeError> {
    // A pass that changes the routine in place takes it; the others build a new one from it.
    // Each routine is dropped as soon as the next pass has made its own: a large routine's
    // intermediates, all alive at once, would hold many times its memory.
    let decisions: [Pass; 4] = [
        |r| Ok(fills::with_fills_absorbed(r)),
        |r| Ok(slices::with_slices_forwarded(r)),
        |r| Ok(gemm::extract_gemms(r)),
        memory::with_memory_modes,
    ];
    decisions
        .into_iter()
        .try_fold(constants::inline_constants(routine), |routine, pass| {
            pass(routine)
        })
}

/// A pass of `optimize`.
type Pass = fn(Routine) -> Result<Routine, OptimizeError>;

/// The passes that follow the memory modes: each rewrites nests by what the modes decided and
/// what the nests themselves hold.
fn transformed(routine: Routine) -> Result<Routine, OptimizeError> {
    let passes: [Pass; 7] = [
        virtualize::with_virtual_nodes_inlined,
        |r| Ok(accumulate::local_accumulators(r)),
        |r| Ok(order::order_loops(r)),
        |r| Ok(merge::merge_loops(r, merge::Chains::Kept)),
        |r| Ok(simplify::simplify(&r)),
        |r| Ok(hoist::hoist_invariants(r)),
        |r| Ok(cse::cse(r)),
    ];
    passes
        .into_iter()
        .try_fold(routine, |routine, pass| pass(routine))
}

/// `routine`'s name, nodes and static indices around `body`: what a pass returns, without
/// cloning the body it replaces.
fn with_body(routine: &Routine, body: Vec<Stmt>) -> Routine {
    Routine {
        name: routine.name.clone(),
        nodes: routine.nodes.clone(),
        statics: routine.statics.clone(),
        body,
    }
}

/// How messages name a node: `n3 'hidden'`.
fn describe(node: &TensorNode) -> String {
    format!("{} '{}'", node.id, node.label)
}

/// Loop variables and locals not used anywhere in a routine, handed out in increasing order.
#[derive(Debug)]
struct Fresh {
    next_var: u32,
    next_local: u32,
}

impl Fresh {
    /// Numbers past every loop variable and local that `body` mentions.
    fn new(body: &[Stmt]) -> Fresh {
        let mut fresh = Fresh {
            next_var: 0,
            next_local: 0,
        };
        for stmt in body {
            for_each_name(
                stmt,
                &mut |var| fresh.next_var = fresh.next_var.max(var.0.saturating_add(1)),
                &mut |id| fresh.next_local = fresh.next_local.max(id.0.saturating_add(1)),
            );
        }
        fresh
    }

    fn var(&mut self) -> LoopVar {
        let var = LoopVar(self.next_var);
        self.next_var = self.next_var.saturating_add(1);
        var
    }

    fn local(&mut self) -> LocalId {
        let id = LocalId(self.next_local);
        self.next_local = self.next_local.saturating_add(1);
        id
    }
}

/// The loop variables and the locals `stmts` mention anywhere.
fn names<'a>(stmts: impl IntoIterator<Item = &'a Stmt>) -> (HashSet<LoopVar>, HashSet<LocalId>) {
    let (mut vars, mut locals) = (HashSet::new(), HashSet::new());
    for stmt in stmts {
        for_each_name(
            stmt,
            &mut |var| {
                vars.insert(var);
            },
            &mut |id| {
                locals.insert(id);
            },
        );
    }
    (vars, locals)
}

/// Calls `var` on every loop variable and `local` on every local `stmt` mentions anywhere, as
/// often as it mentions them.
fn for_each_name(stmt: &Stmt, var: &mut impl FnMut(LoopVar), local: &mut impl FnMut(LocalId)) {
    stmt.walk(&mut |s| {
        match s {
            Stmt::For { var: bound, .. } => var(*bound),
            Stmt::Local { id, .. } | Stmt::SetLocal { id, .. } => local(*id),
            _ => {}
        }
        for_each_index(s, &mut |index| {
            for mentioned in index.vars() {
                if let Var::Loop(l) = mentioned {
                    var(l);
                }
            }
        });
        for value in s.values() {
            value.for_each_local(&mut *local);
        }
    });
}

/// `stmt` with each of its own expressions replaced by `rewrite` of it.
fn map_values(stmt: &Stmt, mut rewrite: impl FnMut(&Scalar) -> Scalar) -> Stmt {
    match stmt {
        Stmt::Set { node, index, value } => Stmt::Set {
            node: *node,
            index: index.clone(),
            value: rewrite(value),
        },
        Stmt::SetVec {
            node,
            offset,
            op,
            arg,
        } => Stmt::SetVec {
            node: *node,
            offset: offset.clone(),
            op: *op,
            arg: rewrite(arg),
        },
        Stmt::Local {
            id,
            precision,
            value,
        } => Stmt::Local {
            id: *id,
            precision: *precision,
            value: rewrite(value),
        },
        Stmt::SetLocal { id, value } => Stmt::SetLocal {
            id: *id,
            value: rewrite(value),
        },
        Stmt::ScatterAdd { target, value } => {
            let id = rewrite(&target.id);
            Stmt::ScatterAdd {
                target: Box::new(Lookup {
                    id,
                    ..(**target).clone()
                }),
                value: rewrite(value),
            }
        }
        Stmt::For { .. } | Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => {
            stmt.clone()
        }
    }
}

/// Calls `rewrite` on every value `stmt` computes itself (not those of nested statements), in
/// place: for a pass that owns the routine and changes some values, so that the rest of each
/// statement stays where it is.
fn for_each_value_mut(stmt: &mut Stmt, rewrite: &mut impl FnMut(&mut Scalar)) {
    match stmt {
        Stmt::Set { value, .. }
        | Stmt::Local { value, .. }
        | Stmt::SetLocal { value, .. }
        | Stmt::SetVec { arg: value, .. } => rewrite(value),
        Stmt::ScatterAdd { target, value } => {
            rewrite(&mut target.id);
            rewrite(value);
        }
        Stmt::For { .. } | Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => {}
    }
}

/// `stmt`, with the statements nested in its loops, each read `node[index]` replaced by
/// `read(node, index)` where that gives a value (see [`Scalar::replace_gets`]).
fn replace_reads(stmt: &mut Stmt, read: &mut impl FnMut(NodeId, &[Index]) -> Option<Scalar>) {
    match stmt {
        Stmt::For { body, .. } => {
            for stmt in body {
                replace_reads(stmt, read);
            }
        }
        _ => for_each_value_mut(stmt, &mut |value| value.replace_gets(read)),
    }
}

/// Calls `visit` on every index `stmt` evaluates itself: its store's and its reads'.
fn for_each_index(stmt: &Stmt, visit: &mut impl FnMut(&Index)) {
    match stmt {
        Stmt::Set { index, .. } => index.iter().for_each(&mut *visit),
        Stmt::SetVec { offset, .. } => visit(offset),
        Stmt::ScatterAdd { target, .. } => target.index.iter().for_each(&mut *visit),
        _ => {}
    }
    for value in stmt.values() {
        scalar_indices(value, visit);
    }
}

fn scalar_indices(scalar: &Scalar, visit: &mut impl FnMut(&Index)) {
    match scalar {
        Scalar::Const(_) | Scalar::Local(_) => {}
        Scalar::Get(_, index) => index.iter().for_each(&mut *visit),
        Scalar::Lookup(lookup) => {
            lookup.index.iter().for_each(&mut *visit);
            scalar_indices(&lookup.id, visit);
        }
        Scalar::Embed(index) => visit(index),
        Scalar::Unop(_, a) => scalar_indices(a, visit),
        Scalar::Binop(_, a, b) => {
            scalar_indices(a, visit);
            scalar_indices(b, visit);
        }
        Scalar::Ternop(_, a, b, c) => {
            scalar_indices(a, visit);
            scalar_indices(b, visit);
            scalar_indices(c, visit);
        }
    }
}

/// Whether `scalar` reads `node`.
fn reads_node(scalar: &Scalar, node: NodeId) -> bool {
    let mut found = false;
    scalar.for_each_get(&mut |n, _| found |= n == node);
    found
}

/// The nodes `stmt` (with everything nested in it) reads.
fn stmt_reads(stmt: &Stmt) -> BTreeSet<NodeId> {
    let mut reads = BTreeSet::new();
    for_each_read(stmt, &mut |node| {
        reads.insert(node);
    });
    reads
}

/// Calls `visit` on each node `stmt` (with everything nested in it) reads, once per read (a
/// matrix product's through the nest it keeps).
fn for_each_read(stmt: &Stmt, visit: &mut impl FnMut(NodeId)) {
    for_each_access(stmt, &mut |node, written| {
        if !written {
            visit(node);
        }
    });
}

/// Calls `visit` on each node `stmt` (with everything nested in it) writes, with `true`, and on
/// each it reads, with `false`: once per access, a matrix product's through the nest it keeps.
fn for_each_access(stmt: &Stmt, visit: &mut impl FnMut(NodeId, bool)) {
    stmt.walk(&mut |s| {
        if let Some(node) = s.written_node() {
            visit(node, true);
        }
        for value in s.values() {
            value.for_each_get(&mut |node, _| visit(node, false));
        }
    });
}

/// The nodes `stmt` (with everything nested in it) writes.
fn stmt_writes(stmt: &Stmt) -> BTreeSet<NodeId> {
    let mut writes = BTreeSet::new();
    stmt.walk(&mut |s| writes.extend(s.written_node()));
    writes
}

/// The nodes `stmt` (with everything nested in it) writes and those it reads, found in one walk,
/// each in increasing order without repeats (lists rather than trees: every top-level statement
/// of a large routine is asked, and most mention a handful of nodes).
fn stmt_accesses(stmt: &Stmt) -> (Vec<NodeId>, Vec<NodeId>) {
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for_each_access(stmt, &mut |node, written| {
        if written { &mut writes } else { &mut reads }.push(node)
    });
    for nodes in [&mut writes, &mut reads] {
        nodes.sort_unstable();
        nodes.dedup();
    }
    (writes, reads)
}

/// Whether any statement of `stmts` writes a node.
fn writes_any_node(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|stmt| !stmt_writes(stmt).is_empty())
}

/// The precision of every local `body` declares.
fn local_precisions(body: &[Stmt]) -> HashMap<LocalId, Precision> {
    let mut precisions = HashMap::new();
    for stmt in body {
        stmt.walk(&mut |s| {
            if let Stmt::Local { id, precision, .. } = s {
                precisions.entry(*id).or_insert(*precision);
            }
        });
    }
    precisions
}

/// The precision `stmt`'s own expressions are computed in: the written node's for a store, the
/// word for a vector store's argument, the local's for a local. `None` when the statement has
/// no expression or names what the routine does not declare.
fn stmt_precision(
    stmt: &Stmt,
    routine: &Routine,
    locals: &HashMap<LocalId, Precision>,
) -> Option<Precision> {
    match stmt {
        Stmt::Set { node, .. } => routine.nodes.get(node).map(|n| n.precision),
        // The id's kind is its own (f64); the value is computed in the target's.
        Stmt::ScatterAdd { target, .. } => routine.nodes.get(&target.node).map(|n| n.precision),
        Stmt::SetVec { .. } => Some(Precision::Uint4x32),
        Stmt::Local { precision, .. } => Some(*precision),
        Stmt::SetLocal { id, .. } => locals.get(id).copied(),
        Stmt::For { .. } | Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => None,
    }
}

/// The constant that, computed in `precision`'s kind and stored as `precision`, gives exactly
/// what `fill … with value` leaves in a cell of that precision; `None` if no constant does (a
/// word from a number, a NaN).
fn fill_constant(value: f64, precision: Precision) -> Option<f64> {
    let filled = Value::Float(value).stored_as(precision);
    let constant = filled.as_f64();
    let computed = Value::Float(constant)
        .to_kind(precision.kind(), Precision::I64)
        .stored_as(precision);
    (computed == filled).then_some(constant)
}

/// `index` with the terms of one variable added up and zero terms dropped.
fn normalize(index: &Index) -> Index {
    let mut terms = Terms::new();
    for (c, v) in &index.terms {
        match terms.iter_mut().find(|(_, w)| w == v) {
            Some((d, _)) => *d = d.wrapping_add(*c),
            None => terms.push((*c, *v)),
        }
    }
    terms.retain(|(c, _)| *c != 0);
    Index {
        terms,
        offset: index.offset,
    }
}

/// What copying statements into another place changes: loop variables replaced by indices
/// (substitution, or another variable), loops bound under new variables, locals under new ids.
#[derive(Debug, Default)]
struct Renaming {
    indices: HashMap<LoopVar, Index>,
    loops: HashMap<LoopVar, LoopVar>,
    locals: HashMap<LocalId, LocalId>,
}

impl Renaming {
    /// Binds the loop `var` under `new`, in loops and in indices.
    fn rebind(&mut self, var: LoopVar, new: LoopVar) {
        self.loops.insert(var, new);
        self.indices.insert(var, Index::var(new, 0));
    }

    fn index(&self, index: &Index) -> Index {
        let mut result = Index::constant(index.offset);
        for (c, var) in &index.terms {
            match var {
                Var::Loop(l) if self.indices.contains_key(l) => {
                    let replacement = &self.indices[l];
                    result.offset = result
                        .offset
                        .wrapping_add(c.wrapping_mul(replacement.offset));
                    result.terms.extend(
                        replacement
                            .terms
                            .iter()
                            .map(|(d, w)| (c.wrapping_mul(*d), *w)),
                    );
                }
                _ => result.terms.push((*c, *var)),
            }
        }
        normalize(&result)
    }

    fn local(&self, id: LocalId) -> LocalId {
        self.locals.get(&id).copied().unwrap_or(id)
    }

    fn scalar(&self, scalar: &Scalar) -> Scalar {
        let boxed = |s: &Scalar| Box::new(self.scalar(s));
        match scalar {
            Scalar::Const(c) => Scalar::Const(*c),
            Scalar::Get(node, index) => {
                Scalar::Get(*node, index.iter().map(|i| self.index(i)).collect())
            }
            Scalar::Lookup(lookup) => Scalar::Lookup(Box::new(self.lookup(lookup))),
            Scalar::Embed(index) => Scalar::Embed(self.index(index)),
            Scalar::Local(id) => Scalar::Local(self.local(*id)),
            Scalar::Unop(op, a) => Scalar::Unop(*op, boxed(a)),
            Scalar::Binop(op, a, b) => Scalar::Binop(*op, boxed(a), boxed(b)),
            Scalar::Ternop(op, a, b, c) => Scalar::Ternop(*op, boxed(a), boxed(b), boxed(c)),
        }
    }

    fn lookup(&self, lookup: &Lookup) -> Lookup {
        Lookup {
            node: lookup.node,
            index: lookup.index.iter().map(|i| self.index(i)).collect(),
            axis: lookup.axis,
            size: lookup.size,
            id: self.scalar(&lookup.id),
        }
    }

    fn stmt(&self, stmt: &Stmt) -> Stmt {
        match stmt {
            Stmt::ScatterAdd { target, value } => Stmt::ScatterAdd {
                target: Box::new(self.lookup(target)),
                value: self.scalar(value),
            },
            Stmt::For { var, range, body } => Stmt::For {
                var: self.loops.get(var).copied().unwrap_or(*var),
                range: *range,
                body: body.iter().map(|s| self.stmt(s)).collect(),
            },
            Stmt::Set { node, index, value } => Stmt::Set {
                node: *node,
                index: index.iter().map(|i| self.index(i)).collect(),
                value: self.scalar(value),
            },
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => Stmt::SetVec {
                node: *node,
                offset: self.index(offset),
                op: *op,
                arg: self.scalar(arg),
            },
            // Never copied: a matrix product's operands are never virtual.
            Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => stmt.clone(),
            Stmt::Local {
                id,
                precision,
                value,
            } => Stmt::Local {
                id: self.local(*id),
                precision: *precision,
                value: self.scalar(value),
            },
            Stmt::SetLocal { id, value } => Stmt::SetLocal {
                id: self.local(*id),
                value: self.scalar(value),
            },
        }
    }
}

/// A top-level nest in which each loop holds exactly one statement, down to an innermost body
/// of statements that write no node (`pre`: locals an earlier inlining placed there) followed by
/// one store.
#[derive(Debug)]
struct PerfectNest<'a> {
    /// Outermost first, with their ranges.
    loops: Vec<(LoopVar, usize)>,
    pre: &'a [Stmt],
    node: NodeId,
    index: &'a [Index],
    value: &'a Scalar,
}

impl<'a> PerfectNest<'a> {
    fn of(stmt: &'a Stmt) -> Option<PerfectNest<'a>> {
        let mut loops = Vec::new();
        let mut body = std::slice::from_ref(stmt);
        while let [
            Stmt::For {
                var,
                range,
                body: inner,
            },
        ] = body
        {
            if loops.iter().any(|(v, _)| v == var) {
                return None;
            }
            loops.push((*var, *range));
            body = inner;
        }
        let (Stmt::Set { node, index, value }, pre) = body.split_last()? else {
            return None;
        };
        if writes_any_node(pre) {
            return None;
        }
        Some(PerfectNest {
            loops,
            pre,
            node: *node,
            index,
            value,
        })
    }

    /// The loop variables the store's index mentions.
    fn written_vars(&self) -> HashSet<LoopVar> {
        self.index
            .iter()
            .flat_map(Index::vars)
            .filter_map(|v| match v {
                Var::Loop(l) => Some(l),
                Var::Static(_) => None,
            })
            .collect()
    }

    /// Whether `pre` sets only the locals it declares itself, and (`closed`) reads no other
    /// local either, nor does the stored value.
    fn pre_is_self_contained(&self, closed: bool) -> bool {
        let mut declared = HashSet::new();
        let mut ok = true;
        for stmt in self.pre {
            stmt.walk(&mut |s| match s {
                Stmt::Local { id, .. } => {
                    declared.insert(*id);
                }
                Stmt::SetLocal { id, .. } => ok &= declared.contains(id),
                _ => {}
            });
        }
        if closed {
            let mut check = |scalar: &Scalar| {
                scalar.for_each_local(&mut |id| ok &= declared.contains(&id));
            };
            for stmt in self.pre {
                stmt.walk(&mut |s| s.values().for_each(&mut check));
            }
            check(self.value);
        }
        ok
    }
}

/// Whether `index` is exactly the loop variable `var`.
fn is_bare(index: &Index, var: LoopVar) -> bool {
    index.offset == 0 && index.terms[..] == [(1, Var::Loop(var))]
}

/// Whether the store `index` inside `loops` writes every cell of a node of `dims` once per
/// iteration of the loops it mentions: each axis a distinct loop variable running over the whole
/// axis, or 0 on an axis of one position.
fn covers_each_cell_once(index: &[Index], loops: &[(LoopVar, usize)], dims: &[usize]) -> bool {
    if index.len() != dims.len() {
        return false;
    }
    let mut used = HashSet::new();
    index.iter().zip(dims).all(|(axis, &dim)| {
        if axis.terms.is_empty() {
            return axis.offset == 0 && dim == 1;
        }
        loops
            .iter()
            .any(|&(var, range)| is_bare(axis, var) && range == dim && used.insert(var))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_merges_terms_and_drops_zeros() {
        let (i, j, k) = (LoopVar(0), LoopVar(1), LoopVar(2));
        let mut renaming = Renaming::default();
        // i ↦ 2j − 1, k ↦ −j.
        renaming.indices.insert(
            i,
            Index {
                terms: smallvec::smallvec![(2, Var::Loop(j))],
                offset: -1,
            },
        );
        renaming.indices.insert(
            k,
            Index {
                terms: smallvec::smallvec![(-1, Var::Loop(j))],
                offset: 0,
            },
        );
        let index = Index {
            terms: smallvec::smallvec![(3, Var::Loop(i)), (6, Var::Loop(k))],
            offset: 5,
        };
        // 3(2j − 1) + 6(−j) + 5 = 2.
        assert_eq!(renaming.index(&index), Index::constant(2));
        let index = Index {
            terms: smallvec::smallvec![(1, Var::Loop(i)), (1, Var::Loop(j))],
            offset: 0,
        };
        assert_eq!(renaming.index(&index).to_string(), "3*l1-1");
    }

    #[test]
    fn fill_constants_reproduce_what_a_fill_stores() {
        assert_eq!(fill_constant(0.0, Precision::F32), Some(0.0));
        assert_eq!(
            fill_constant(f64::NEG_INFINITY, Precision::F32),
            Some(f64::NEG_INFINITY)
        );
        // An integer node filled with −∞ holds its smallest value, not what −∞ would wrap to.
        assert_eq!(
            fill_constant(f64::NEG_INFINITY, Precision::I32),
            Some(f64::from(i32::MIN))
        );
        assert_eq!(
            fill_constant(0.1, Precision::F16),
            Some(Precision::F16.round(0.1))
        );
        assert_eq!(fill_constant(f64::NAN, Precision::F32), None);
    }

    #[test]
    fn fresh_numbers_pass_every_use() {
        let body = vec![Stmt::For {
            var: LoopVar(3),
            range: 2,
            body: vec![Stmt::Local {
                id: LocalId(4),
                precision: Precision::F32,
                value: Scalar::Embed(Index::var(LoopVar(7), 0)),
            }],
        }];
        let mut fresh = Fresh::new(&body);
        assert_eq!(fresh.var(), LoopVar(8));
        assert_eq!(fresh.local(), LocalId(5));
        assert_eq!(fresh.local(), LocalId(6));
    }

    #[test]
    fn covering_stores() {
        let (i, j) = (LoopVar(0), LoopVar(1));
        let loops = [(i, 2), (j, 3)];
        let bare = |v| Index::var(v, 0);
        assert!(covers_each_cell_once(&[bare(i), bare(j)], &loops, &[2, 3]));
        assert!(covers_each_cell_once(
            &[bare(j), Index::constant(0)],
            &loops,
            &[3, 1]
        ));
        // A loop shorter than its axis, a variable twice, a shifted index.
        assert!(!covers_each_cell_once(&[bare(i)], &loops, &[3]));
        assert!(!covers_each_cell_once(&[bare(i), bare(i)], &loops, &[2, 2]));
        assert!(!covers_each_cell_once(&[Index::var(i, 1)], &loops, &[2]));
    }
}
