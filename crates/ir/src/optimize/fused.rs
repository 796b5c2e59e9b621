//! Fused nests: the form in which fusion keeps the perfect nests it builds by inlining a
//! producer into the one nest that reads it, so that each such inlining costs what the two nests
//! add, not what they hold.
//!
//! Inlining copies the producer's statements into the reader with the producer's loop variables
//! replaced by the read's index. Down a chain of nodes each read by the next, everything inlined
//! so far would be copied and renamed again at every link: quadratic in the chain's length. A
//! fused nest instead keeps the statements before its store in a segment, which holds statements
//! and the segments of the producers inlined into it, each with the substitution of its read.
//! Inlining a fused producer into a fused reader moves the producer's segment, under its
//! substitution, into the reader's, and adds the local computing the read: the producer's value
//! renamed. Writing the nest out composes the substitutions from the outermost segment in.
//!
//! The composition renames as link-by-link renaming does because each substitution maps the
//! producer's loop variables one-to-one onto variables its statements do not bind (or a loop of
//! one trip to 0), so that it commutes with normalizing indices. That holds by what a nest must
//! satisfy to be kept fused ([`Fused::of`]): besides being perfect, its statements mention no
//! loop variable but its loops' and those they bind, read only locals they declare, and declare
//! each loop and local once, under a name no other top-level statement mentions. Inlining then
//! keeps every name the producer declares, as copying would, and the fused nest it makes
//! satisfies the same.

use std::collections::{BTreeSet, HashSet};

use super::body::Entry;
use super::{PerfectNest, Renaming, for_each_index, stmt_reads, stmt_writes};
use crate::loops::{Index, LocalId, LoopVar, Scalar, Stmt, Var};
use crate::node::NodeId;
use crate::precision::Precision;

/// The producer's loop variables, each with the index it becomes where it is inlined.
pub(super) type Substitution = Vec<(LoopVar, Index)>;

/// A top-level statement while fusion runs: as it is, or kept as a fused nest.
#[derive(Debug)]
pub(super) enum Statement {
    Plain(Stmt),
    Fused(Fused),
}

impl Entry for Statement {
    fn writes(&self) -> BTreeSet<NodeId> {
        match self {
            Statement::Plain(stmt) => stmt_writes(stmt),
            Statement::Fused(fused) => BTreeSet::from([fused.node]),
        }
    }

    fn reads(&self) -> BTreeSet<NodeId> {
        match self {
            Statement::Plain(stmt) => stmt_reads(stmt),
            Statement::Fused(fused) => {
                let mut reads = fused.pre_reads.clone();
                fused.value.for_each_get(&mut |node, _| {
                    reads.insert(node);
                });
                reads
            }
        }
    }

    fn stmt(&self) -> Option<&Stmt> {
        match self {
            Statement::Plain(stmt) => Some(stmt),
            Statement::Fused(_) => None,
        }
    }
}

/// A perfect nest kept for fusion: its loops, the statements before its store (in a segment),
/// the nodes they read, and its store.
#[derive(Debug)]
pub(super) struct Fused {
    /// The loops around the innermost one, outermost first, with their ranges.
    outer: Vec<(LoopVar, usize)>,
    /// The innermost loop, holding the statements and the store.
    innermost: (LoopVar, usize),
    /// The segment holding the statements before the store.
    pre: usize,
    /// The nodes those statements read.
    pub(super) pre_reads: BTreeSet<NodeId>,
    pub(super) node: NodeId,
    pub(super) index: Vec<Index>,
    pub(super) value: Scalar,
}

/// The segments of a routine's fused nests.
#[derive(Debug, Default)]
pub(super) struct Segments {
    segments: Vec<Segment>,
}

/// Statements before a store, in order, with the segments inlined among them.
#[derive(Debug, Default)]
struct Segment {
    /// Whether the segment was inlined from a producer: its statements are then renamed by
    /// `substitution` and by those of the segments around it, as copying renames them.
    inlined: bool,
    substitution: Substitution,
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Stmt(Stmt),
    Segment(usize),
}

impl Fused {
    /// Its loops, outermost first, with their ranges.
    pub(super) fn loops(&self) -> impl Iterator<Item = (LoopVar, usize)> + '_ {
        self.outer.iter().copied().chain([self.innermost])
    }

    /// `stmt` as a fused nest, or `stmt` back if it cannot be one: it must be a perfect nest of
    /// at least one loop whose statements read only the locals they declare, mention only their loops' variables
    /// and those they bind, and declare each loop and local once, under a name none of the
    /// nest's loops has and that `exclusive` says no other top-level statement mentions.
    pub(super) fn of(
        stmt: Stmt,
        segments: &mut Segments,
        exclusive_var: impl Fn(LoopVar) -> bool,
        exclusive_local: impl Fn(LocalId) -> bool,
    ) -> Result<Fused, Stmt> {
        let keep = PerfectNest::of(&stmt).is_some_and(|nest| {
            !nest.loops.is_empty() && keepable(&nest, exclusive_var, exclusive_local)
        });
        if !keep {
            return Err(stmt);
        }
        let (mut outer, mut pre) = take_apart(stmt);
        let (Some(innermost), Some(Stmt::Set { node, index, value })) = (outer.pop(), pre.pop())
        else {
            unreachable!("a perfect nest of loops ends in its store");
        };
        let pre_reads = pre.iter().flat_map(stmt_reads).collect();
        segments.segments.push(Segment {
            parts: pre.into_iter().map(Part::Stmt).collect(),
            ..Segment::default()
        });
        Ok(Fused {
            outer,
            innermost,
            pre: segments.segments.len() - 1,
            pre_reads,
            node,
            index,
            value,
        })
    }
}

/// Whether a fused nest can keep `nest` (see [`Fused::of`]).
fn keepable(
    nest: &PerfectNest,
    exclusive_var: impl Fn(LoopVar) -> bool,
    exclusive_local: impl Fn(LocalId) -> bool,
) -> bool {
    if !nest.pre_is_self_contained(true) {
        return false;
    }
    let loops: HashSet<LoopVar> = nest.loops.iter().map(|(var, _)| *var).collect();
    let (mut bound, mut declared) = (HashSet::new(), HashSet::new());
    let mut ok = true;
    for stmt in nest.pre {
        stmt.walk(&mut |s| match s {
            Stmt::For { var, .. } => {
                ok &= !loops.contains(var) && bound.insert(*var) && exclusive_var(*var);
            }
            Stmt::Local { id, .. } => ok &= declared.insert(*id) && exclusive_local(*id),
            _ => {}
        });
    }
    let mentions_only = |stmt: &Stmt, vars: &dyn Fn(LoopVar) -> bool| {
        let mut ok = true;
        stmt.walk(&mut |s| {
            for_each_index(s, &mut |index| {
                ok &= index.vars().all(|var| match var {
                    Var::Loop(var) => vars(var),
                    Var::Static(_) => true,
                });
            });
        });
        ok
    };
    let in_pre = |var| loops.contains(&var) || bound.contains(&var);
    let store = Stmt::Set {
        node: nest.node,
        index: nest.index.to_vec(),
        value: Scalar::Const(0.0),
    };
    ok && nest.pre.iter().all(|s| mentions_only(s, &in_pre))
        && mentions_only(&store, &|var| loops.contains(&var))
        && {
            let mut in_loops = true;
            scalar_vars(nest.value, &mut |var| in_loops &= loops.contains(&var));
            in_loops
        }
}

/// Calls `visit` on every loop variable the indices of `scalar` mention.
fn scalar_vars(scalar: &Scalar, visit: &mut impl FnMut(LoopVar)) {
    super::scalar_indices(scalar, &mut |index: &Index| {
        for var in index.vars() {
            if let Var::Loop(var) = var {
                visit(var);
            }
        }
    });
}

/// The loops of a nest whose loops each hold one statement, outermost first, and the innermost
/// body.
fn take_apart(stmt: Stmt) -> (Vec<(LoopVar, usize)>, Vec<Stmt>) {
    let mut loops = Vec::new();
    let mut body = vec![stmt];
    while matches!(body[..], [Stmt::For { .. }]) {
        if let Some(Stmt::For {
            var,
            range,
            body: inner,
        }) = body.pop()
        {
            loops.push((var, range));
            body = inner;
        }
    }
    (loops, body)
}

impl Segments {
    /// Inlines `producer` into `reader`, before its store: `producer`'s statements renamed by
    /// `substitution` (each of the producer's loop variables with the index it becomes), then
    /// `local` of `precision` set to its value renamed. The reader's store is left as it is.
    pub(super) fn inline(
        &mut self,
        producer: Fused,
        reader: &mut Fused,
        substitution: Substitution,
        local: LocalId,
        precision: Precision,
    ) {
        let renaming = Renaming {
            indices: substitution.iter().cloned().collect(),
            ..Renaming::default()
        };
        let value = renaming.scalar(&producer.value);
        let mut reads = producer.pre_reads;
        value.for_each_get(&mut |node, _| {
            reads.insert(node);
        });
        // The larger set takes the smaller one's nodes.
        if reads.len() < reader.pre_reads.len() {
            std::mem::swap(&mut reads, &mut reader.pre_reads);
        }
        reads.append(&mut reader.pre_reads);
        reader.pre_reads = reads;
        let segment = &mut self.segments[producer.pre];
        segment.inlined = true;
        segment.substitution = substitution;
        self.segments[reader.pre].parts.extend([
            Part::Segment(producer.pre),
            Part::Stmt(Stmt::Local {
                id: local,
                precision,
                value,
            }),
        ]);
    }

    /// `fused` as a statement: its segments written out, each renamed by its substitution and
    /// those of the segments around it, in one pass over their statements.
    pub(super) fn write_out(&mut self, fused: Fused) -> Stmt {
        let mut stmts = Vec::new();
        let mut renaming = Renaming::default();
        // Per segment entered: its parts left, whether they are renamed, and the bindings of
        // the renaming its substitution replaced.
        let root = std::mem::take(&mut self.segments[fused.pre]);
        let mut open = vec![(root.parts.into_iter(), root.inlined, Vec::new())];
        while let Some((parts, renamed, _)) = open.last_mut() {
            let renamed = *renamed;
            match parts.next() {
                Some(Part::Stmt(stmt)) if renamed => stmts.push(renaming.stmt(&stmt)),
                Some(Part::Stmt(stmt)) => stmts.push(stmt),
                Some(Part::Segment(id)) => {
                    let segment = std::mem::take(&mut self.segments[id]);
                    let bindings: Vec<(LoopVar, Index)> = (segment.substitution.iter())
                        .map(|(var, index)| (*var, renaming.index(index)))
                        .collect();
                    let replaced: Vec<(LoopVar, Option<Index>)> = (bindings.into_iter())
                        .map(|(var, index)| (var, renaming.indices.insert(var, index)))
                        .collect();
                    open.push((segment.parts.into_iter(), true, replaced));
                }
                None => {
                    let replaced = open.pop().map(|(_, _, replaced)| replaced);
                    for (var, index) in replaced.into_iter().flatten().rev() {
                        match index {
                            Some(index) => renaming.indices.insert(var, index),
                            None => renaming.indices.remove(&var),
                        };
                    }
                }
            }
        }
        stmts.push(Stmt::Set {
            node: fused.node,
            index: fused.index,
            value: fused.value,
        });
        let (var, range) = fused.innermost;
        let innermost = Stmt::For {
            var,
            range,
            body: stmts,
        };
        (fused.outer.iter().rev()).fold(innermost, |stmt, &(var, range)| Stmt::For {
            var,
            range,
            body: vec![stmt],
        })
    }
}

impl Statement {
    /// The statement, a fused nest written out.
    pub(super) fn into_stmt(self, segments: &mut Segments) -> Stmt {
        match self {
            Statement::Plain(stmt) => stmt,
            Statement::Fused(fused) => segments.write_out(fused),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Unop;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    /// `for l{var} in 0..4 { pre; n{to}[l{var}] := value }`.
    fn nest(var: u32, to: u32, pre: Vec<Stmt>, value: Scalar) -> Stmt {
        let mut body = pre;
        body.push(Stmt::Set {
            node: NodeId(to),
            index: vec![at(var)],
            value,
        });
        Stmt::For {
            var: LoopVar(var),
            range: 4,
            body,
        }
    }

    fn local(id: u32, value: Scalar) -> Stmt {
        Stmt::Local {
            id: LocalId(id),
            precision: Precision::F32,
            value,
        }
    }

    fn get(node: u32, var: u32) -> Scalar {
        Scalar::Get(NodeId(node), vec![at(var)])
    }

    fn fused(stmt: Stmt, segments: &mut Segments) -> Fused {
        Fused::of(stmt, segments, |_| true, |_| true).unwrap()
    }

    #[test]
    fn a_nest_written_out_unchanged_is_the_nest() {
        let stmt = nest(
            0,
            1,
            vec![local(0, get(0, 0))],
            Scalar::Unop(Unop::Neg, Box::new(Scalar::Local(LocalId(0)))),
        );
        let mut segments = Segments::default();
        let kept = fused(stmt.clone(), &mut segments);
        assert_eq!(kept.pre_reads, BTreeSet::from([NodeId(0)]));
        assert_eq!(segments.write_out(kept), stmt);
    }

    #[test]
    fn nests_that_cannot_be_kept_come_back() {
        let mut segments = Segments::default();
        let reads_outside = nest(0, 1, vec![], Scalar::Local(LocalId(3)));
        let unbound = nest(0, 1, vec![local(0, get(0, 5))], Scalar::Local(LocalId(0)));
        let twice = nest(
            0,
            1,
            vec![local(0, get(0, 0)), local(0, get(0, 0))],
            Scalar::Local(LocalId(0)),
        );
        let not_perfect = Stmt::For {
            var: LoopVar(0),
            range: 2,
            body: vec![],
        };
        for stmt in [reads_outside, unbound, twice, not_perfect] {
            let back = Fused::of(stmt.clone(), &mut segments, |_| true, |_| true);
            assert_eq!(back.unwrap_err(), stmt);
        }
        // A local another statement mentions.
        let shared = nest(0, 1, vec![local(0, get(0, 0))], Scalar::Local(LocalId(0)));
        let back = Fused::of(
            shared.clone(),
            &mut segments,
            |_| true,
            |id| id != LocalId(0),
        );
        assert_eq!(back.unwrap_err(), shared);
    }

    #[test]
    fn substitutions_compose_from_the_outermost_segment_in() {
        // n1[l0] := neg(n0[l0]) inlined into n2[l1] := n1[l1], that into n3[l2] := n2[l2].
        let mut segments = Segments::default();
        let first = fused(
            nest(0, 1, vec![], Scalar::Unop(Unop::Neg, Box::new(get(0, 0)))),
            &mut segments,
        );
        let mut second = fused(nest(1, 2, vec![], get(1, 1)), &mut segments);
        segments.inline(
            first,
            &mut second,
            vec![(LoopVar(0), at(1))],
            LocalId(0),
            Precision::F32,
        );
        second.value = Scalar::Local(LocalId(0));
        let mut third = fused(nest(2, 3, vec![], get(2, 2)), &mut segments);
        segments.inline(
            second,
            &mut third,
            vec![(LoopVar(1), at(2))],
            LocalId(1),
            Precision::F32,
        );
        third.value = Scalar::Local(LocalId(1));
        assert_eq!(third.pre_reads, BTreeSet::from([NodeId(0)]));
        let written = segments.write_out(third);
        assert_eq!(
            written,
            nest(
                2,
                3,
                vec![
                    local(0, Scalar::Unop(Unop::Neg, Box::new(get(0, 2)))),
                    local(1, Scalar::Local(LocalId(0))),
                ],
                Scalar::Local(LocalId(1)),
            )
        );
    }
}
