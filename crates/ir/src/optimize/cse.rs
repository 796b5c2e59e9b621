//! Shared subexpressions: an operation (unary, binary or ternary; not a bare read, constant or
//! local) computed more than once is computed once, into a local, and read from it.
//!
//! Within one statement's expressions, the local is declared just before the statement. Across
//! the statements of one loop body (the steps of a softmax or a layer norm merged into one loop,
//! a virtual node inlined into each of its readers there), an operation the first statement
//! computes and later ones compute again is declared before the first and read by all, provided
//! no statement between them writes a node or sets a local it reads (so every occurrence
//! computes the same value); at most [`WINDOW`] statements on. Top-level statements share
//! nothing with each other: a local there would tie the kernels around it into one.
//!
//! The local holds the value in the statement's compute precision (f32 for f16, bf16 and f32
//! statements, f64 for f64, `i64` for integers, the word for words), which is what intermediate
//! values are computed and rounded in, so each statement's result is bit-identical; statements
//! share an operation only where they compute it in the same precision. A subexpression whose
//! value depends on more than the kind, one drawing uniform values from random bits in the
//! statement's own precision, is shared only when that precision is the local's. The largest
//! repeated subexpression goes first, then the statement (and the new local) are searched
//! again. A subexpression is shared only if it is evaluated whichever branch a `where` takes
//! (within a statement, one of its occurrences lies outside every branch, or it lies in both
//! branches of a `where` that does; across statements, the first statement computes it so), so
//! that sharing computes nothing a branch would have skipped.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{Fresh, local_precisions, map_values, stmt_precision};
use crate::loops::{LocalId, Scalar, Stmt};
use crate::node::NodeId;
use crate::ops::{Ternop, Unop};
use crate::precision::Precision;
use crate::routine::Routine;

/// How many statements after the one computing an operation are searched for it again: a loop
/// body's statements are searched in time linear in their number.
pub const WINDOW: usize = 16;

/// `routine` with repeated subexpressions of each statement, and of the statements of each loop
/// body, computed once.
pub fn cse(mut routine: Routine) -> Routine {
    // The statements move through the pass: those it leaves alone are not copied.
    let body = std::mem::take(&mut routine.body);
    let mut sharing = Sharing {
        routine: &routine,
        locals: local_precisions(&body),
        fresh: Fresh::new(&body),
    };
    let body = sharing.block(body, true);
    routine.body = body;
    routine
}

struct Sharing<'a> {
    routine: &'a Routine,
    locals: HashMap<LocalId, Precision>,
    fresh: Fresh,
}

impl Sharing<'_> {
    /// `stmts` with what each statement repeats shared, then (unless they are the routine's
    /// top-level statements) what they repeat after one another.
    fn block(&mut self, stmts: Vec<Stmt>, top: bool) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            match stmt {
                Stmt::For { var, range, body } => out.push(Stmt::For {
                    var,
                    range,
                    body: self.block(body, false),
                }),
                stmt => match stmt_precision(&stmt, self.routine, &self.locals) {
                    Some(precision) => out.extend(self.share(stmt, precision)),
                    None => out.push(stmt),
                },
            }
        }
        if top { out } else { self.share_across(out) }
    }

    /// `stmts` (one loop body, each statement's own repeats shared) with every operation that
    /// a statement computes unconditionally and later statements compute again, reading the
    /// same values, computed once before it.
    fn share_across(&mut self, mut stmts: Vec<Stmt>) -> Vec<Stmt> {
        let mut at = 0;
        while at < stmts.len() {
            let Some(precision) = stmt_precision(&stmts[at], self.routine, &self.locals)
                .filter(|_| !matches!(stmts[at], Stmt::For { .. }))
            else {
                at += 1;
                continue;
            };
            match self.repeated_after(&stmts, at, precision) {
                Some((shared, context, later)) => {
                    let id = self.fresh.local();
                    let local = Scalar::Local(id);
                    for j in std::iter::once(at).chain(later) {
                        let p = stmt_precision(&stmts[j], self.routine, &self.locals)
                            .expect("a statement found computing the operation has a precision");
                        stmts[j] = map_values(&stmts[j], |value| {
                            replace(value, p, &shared, context, &local)
                        });
                    }
                    let width = wide(context);
                    self.locals.insert(id, width);
                    let declared = Stmt::Local {
                        id,
                        precision: width,
                        value: shared,
                    };
                    // The new local may repeat what the statement still computes: both are
                    // searched again, from the local.
                    stmts.insert(at, declared);
                }
                None => at += 1,
            }
        }
        stmts
    }

    /// The largest operation `stmts[at]` (computed in `precision`) computes unconditionally
    /// and a statement of the next [`WINDOW`] computes again, with the precision it is computed
    /// in and the positions of the statements computing it again: those before the first
    /// statement that writes a node or sets a local the operation reads.
    fn repeated_after(
        &self,
        stmts: &[Stmt],
        at: usize,
        precision: Precision,
    ) -> Option<(Scalar, Precision, Vec<usize>)> {
        let mut seen = Vec::new();
        for value in stmts[at].values() {
            occurrences(value, precision, false, &mut seen);
        }
        let mut candidates: Vec<(&Scalar, Precision)> = seen
            .into_iter()
            .filter(|(scalar, context, _, unconditional)| {
                // A `where`'s condition is computed in f64 whatever the statement's precision:
                // a backend without f64 (the GPU) computes it in its own way, which a local of
                // f64 would not leave it.
                let in_condition = *context == Precision::F64 && wide(precision) != Precision::F64;
                *unconditional
                    && !in_condition
                    && (wide(*context) == *context || !depends_on_precision(scalar))
            })
            .map(|(scalar, context, _, _)| (scalar, context))
            .collect();
        // The first of the largest, reading left to right.
        candidates.sort_by_key(|(scalar, _)| std::cmp::Reverse(size(scalar)));
        // The operations of each statement of the window, found once for every candidate.
        let window: Vec<Vec<(&Scalar, Precision)>> = stmts
            [at + 1..stmts.len().min(at + 1 + WINDOW)]
            .iter()
            .map(|stmt| {
                let mut found = Vec::new();
                if let Some(p) = stmt_precision(stmt, self.routine, &self.locals) {
                    for value in stmt.values() {
                        operations(value, p, &mut found);
                    }
                }
                found
            })
            .collect();
        for (candidate, context) in candidates {
            let (nodes, locals) = reads(candidate);
            let mut later = Vec::new();
            for (j, found) in (at + 1..).zip(&window) {
                if writes_any_of(&stmts[j - 1], &nodes, &locals) {
                    break;
                }
                if found.iter().any(|(s, c)| *s == candidate && *c == context) {
                    later.push(j);
                }
            }
            if !later.is_empty() {
                return Some((candidate.clone(), context, later));
            }
        }
        None
    }

    /// `stmt` (computed in `precision`) preceded by the locals its repeated subexpressions
    /// moved into.
    fn share(&mut self, mut stmt: Stmt, precision: Precision) -> Vec<Stmt> {
        let mut before = Vec::new();
        while let Some((shared, context)) = most_shared(&stmt, precision) {
            let id = self.fresh.local();
            let local = Scalar::Local(id);
            stmt = map_values(&stmt, |value| {
                replace(value, precision, &shared, context, &local)
            });
            let width = wide(context);
            let declared = Stmt::Local {
                id,
                precision: width,
                value: shared,
            };
            before.extend(self.share(declared, width));
        }
        before.push(stmt);
        before
    }
}

/// The nodes and the locals `scalar` reads.
fn reads(scalar: &Scalar) -> (BTreeSet<NodeId>, HashSet<LocalId>) {
    let mut nodes = BTreeSet::new();
    scalar.for_each_get(&mut |node, _| {
        nodes.insert(node);
    });
    let mut locals = HashSet::new();
    scalar.for_each_local(&mut |id| {
        locals.insert(id);
    });
    (nodes, locals)
}

/// Whether `stmt`, or a statement nested in it, writes one of `nodes` or sets one of `locals`.
fn writes_any_of(stmt: &Stmt, nodes: &BTreeSet<NodeId>, locals: &HashSet<LocalId>) -> bool {
    let mut writes = false;
    stmt.walk(&mut |s| {
        writes |= s.written_node().is_some_and(|node| nodes.contains(&node))
            || matches!(s, Stmt::SetLocal { id, .. } if locals.contains(id));
    });
    writes
}

/// The precision that holds a value computed in `precision`'s kind exactly: its compute
/// precision.
pub(super) fn wide(precision: Precision) -> Precision {
    precision.compute()
}

/// One operand of an expression, with the precision it is computed in and whether only some
/// branch of a `where` computes it.
pub(super) type Operand<'a> = (&'a Scalar, Precision, bool);

/// The operands of `scalar` (computed in `precision`, conditionally or not).
pub(super) fn operands(
    scalar: &Scalar,
    precision: Precision,
    conditional: bool,
) -> Vec<Operand<'_>> {
    match scalar {
        Scalar::Const(_)
        | Scalar::Get(..)
        | Scalar::Lookup(_)
        | Scalar::Embed(_)
        | Scalar::Local(_) => Vec::new(),
        Scalar::Unop(Unop::Uint4x32ToPrecUniform1, a) => {
            vec![(a, Precision::Uint4x32, conditional)]
        }
        Scalar::Unop(_, a) => vec![(a, precision, conditional)],
        Scalar::Binop(_, a, b) => vec![(a, precision, conditional), (b, precision, conditional)],
        Scalar::Ternop(Ternop::Where, c, a, b) => vec![
            (c, Precision::F64, conditional),
            (a, precision, true),
            (b, precision, true),
        ],
        Scalar::Ternop(_, a, b, c) => vec![
            (a, precision, conditional),
            (b, precision, conditional),
            (c, precision, conditional),
        ],
    }
}

pub(super) fn is_operation(scalar: &Scalar) -> bool {
    matches!(
        scalar,
        Scalar::Unop(..) | Scalar::Binop(..) | Scalar::Ternop(..)
    )
}

fn size(scalar: &Scalar) -> usize {
    1 + operands(scalar, Precision::F64, false)
        .into_iter()
        .map(|(s, _, _)| size(s))
        .sum::<usize>()
}

/// Whether `scalar`'s value depends on the precision it is computed in beyond its kind.
pub(super) fn depends_on_precision(scalar: &Scalar) -> bool {
    match scalar {
        Scalar::Unop(Unop::Uint4x32ToPrecUniform1, _) => true,
        Scalar::Ternop(Ternop::Where, _, a, b) => {
            depends_on_precision(a) || depends_on_precision(b)
        }
        _ => operands(scalar, Precision::F64, false)
            .into_iter()
            .any(|(s, _, _)| depends_on_precision(s)),
    }
}

/// The largest operation of `stmt` that occurs more than once in one precision and may be
/// shared, with that precision.
fn most_shared(stmt: &Stmt, precision: Precision) -> Option<(Scalar, Precision)> {
    let mut seen = Vec::new();
    for value in stmt.values() {
        occurrences(value, precision, false, &mut seen);
    }
    seen.into_iter()
        .filter(|(scalar, context, count, unconditional)| {
            *count > 1
                && *unconditional
                && (wide(*context) == *context || !depends_on_precision(scalar))
        })
        // The first of the largest, reading left to right.
        .rev()
        .max_by_key(|(scalar, ..)| size(scalar))
        .map(|(scalar, context, _, _)| (scalar.clone(), context))
}

/// Counts the operations in `scalar`, left to right: each with its precision, its number of
/// occurrences, and whether one of them is computed unconditionally.
fn occurrences<'a>(
    scalar: &'a Scalar,
    precision: Precision,
    conditional: bool,
    seen: &mut Vec<(&'a Scalar, Precision, usize, bool)>,
) {
    if is_operation(scalar) {
        match seen
            .iter_mut()
            .find(|(s, p, _, _)| *s == scalar && *p == precision)
        {
            Some(entry) => {
                entry.2 += 1;
                entry.3 |= !conditional;
            }
            None => seen.push((scalar, precision, 1, !conditional)),
        }
    }
    for (operand, p, c) in operands(scalar, precision, conditional) {
        occurrences(operand, p, c, seen);
    }
    // An operation in both branches of a `where` that is itself computed unconditionally is
    // computed whichever branch is taken (GELU's `erfc`, in `x < 0 ? t : 1 - t`).
    if let (Scalar::Ternop(Ternop::Where, _, a, b), false) = (scalar, conditional) {
        let mut in_a = Vec::new();
        operations(a, precision, &mut in_a);
        let mut in_b = Vec::new();
        operations(b, precision, &mut in_b);
        for entry in seen.iter_mut() {
            let here = |(s, p): &(&Scalar, Precision)| *s == entry.0 && *p == entry.1;
            if in_a.iter().any(here) && in_b.iter().any(here) {
                entry.3 = true;
            }
        }
    }
}

/// Every operation in `scalar` (computed in `precision`), with the precision it is computed in.
fn operations<'a>(
    scalar: &'a Scalar,
    precision: Precision,
    out: &mut Vec<(&'a Scalar, Precision)>,
) {
    if is_operation(scalar) {
        out.push((scalar, precision));
    }
    for (operand, p, _) in operands(scalar, precision, false) {
        operations(operand, p, out);
    }
}

/// `scalar` (computed in `precision`) with every occurrence of `target` computed in `context`
/// replaced by `local`.
fn replace(
    scalar: &Scalar,
    precision: Precision,
    target: &Scalar,
    context: Precision,
    local: &Scalar,
) -> Scalar {
    if precision == context && scalar == target {
        return local.clone();
    }
    let mut replaced = operands(scalar, precision, false)
        .into_iter()
        .map(|(s, p, _)| Box::new(replace(s, p, target, context, local)));
    let mut next = || replaced.next().expect("one replacement per operand");
    match scalar {
        Scalar::Const(_)
        | Scalar::Get(..)
        | Scalar::Lookup(_)
        | Scalar::Embed(_)
        | Scalar::Local(_) => scalar.clone(),
        Scalar::Unop(op, _) => Scalar::Unop(*op, next()),
        Scalar::Binop(op, _, _) => Scalar::Binop(*op, next(), next()),
        Scalar::Ternop(op, _, _, _) => Scalar::Ternop(*op, next(), next(), next()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LoopVar};
    use crate::node::TensorNode;
    use crate::ops::Binop;

    fn read(node: u32) -> Box<Scalar> {
        Box::new(Scalar::Get(NodeId(node), vec![Index::var(LoopVar(0), 0)]))
    }

    fn sum() -> Box<Scalar> {
        Box::new(Scalar::Binop(Binop::Add, read(0), read(1)))
    }

    #[test]
    fn the_largest_repeat_goes_first() {
        // ((a + b) * c) twice: one local for the product, none for the sum inside it.
        let product = || Box::new(Scalar::Binop(Binop::Mul, sum(), read(2)));
        let stmt = Stmt::Set {
            node: NodeId(3),
            index: vec![Index::var(LoopVar(0), 0)],
            value: Scalar::Binop(Binop::Sub, product(), product()),
        };
        let (shared, context) = most_shared(&stmt, Precision::F32).unwrap();
        assert_eq!(shared, *product());
        assert_eq!(context, Precision::F32);
        assert_eq!(wide(context), Precision::F32);
    }

    #[test]
    fn one_branch_alone_and_precision_bound_draws_are_not_shared() {
        let set = |value| Stmt::Set {
            node: NodeId(3),
            index: vec![Index::var(LoopVar(0), 0)],
            value,
        };
        let twice = || Box::new(Scalar::Binop(Binop::Mul, sum(), sum()));
        // Twice in one branch: the other branch would not compute it.
        let in_one_branch = set(Scalar::Ternop(Ternop::Where, read(2), twice(), read(1)));
        assert_eq!(most_shared(&in_one_branch, Precision::F32), None);
        // In both branches: computed whichever is taken.
        let in_both = set(Scalar::Ternop(Ternop::Where, read(2), twice(), sum()));
        assert_eq!(most_shared(&in_both, Precision::F32).unwrap().0, *sum());
        // In both branches of a `where` inside a branch: not computed when that branch is not.
        let nested = Scalar::Ternop(Ternop::Where, read(1), twice(), sum());
        let inside = set(Scalar::Ternop(
            Ternop::Where,
            read(2),
            Box::new(nested),
            read(0),
        ));
        assert_eq!(most_shared(&inside, Precision::F32), None);
        let draw = || {
            Box::new(Scalar::Unop(
                Unop::Uint4x32ToPrecUniform1,
                Box::new(Scalar::Binop(Binop::Threefry4x32, read(0), read(1))),
            ))
        };
        let draws = Stmt::Set {
            node: NodeId(3),
            index: vec![Index::var(LoopVar(0), 0)],
            value: Scalar::Binop(Binop::Add, draw(), draw()),
        };
        // In f16 the draw differs from one in f16's compute precision (f32); its word argument
        // does not.
        let (shared, context) = most_shared(&draws, Precision::F16).unwrap();
        assert_eq!(context, Precision::Uint4x32);
        assert!(matches!(shared, Scalar::Binop(Binop::Threefry4x32, ..)));
        assert_eq!(most_shared(&draws, Precision::F32).unwrap().0, *draw());
        assert_eq!(most_shared(&draws, Precision::F64).unwrap().0, *draw());
    }

    /// A routine of f32 nodes 0..=4 of 8 cells whose body is one loop over them.
    fn in_one_loop(stmts: Vec<Stmt>) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: (0..5)
                .map(|n| (NodeId(n), TensorNode::new(n, "t", Precision::F32, &[8])))
                .collect(),
            statics: Default::default(),
            body: vec![Stmt::For {
                var: LoopVar(0),
                range: 8,
                body: stmts,
            }],
        }
    }

    fn store(node: u32, value: Scalar) -> Stmt {
        Stmt::Set {
            node: NodeId(node),
            index: vec![Index::var(LoopVar(0), 0)],
            value,
        }
    }

    fn exp_of_sum() -> Scalar {
        Scalar::Unop(Unop::Exp, sum())
    }

    /// The loop body of `routine`.
    fn loop_body(routine: &Routine) -> &[Stmt] {
        match &routine.body[..] {
            [Stmt::For { body, .. }] => body,
            other => panic!("not one loop: {other:?}"),
        }
    }

    #[test]
    fn statements_of_one_loop_body_share_what_they_compute_alike() {
        // c = exp(a + b); d = exp(a + b) * c: one local, read by both.
        let routine = in_one_loop(vec![
            store(2, exp_of_sum()),
            store(
                3,
                Scalar::Binop(Binop::Mul, Box::new(exp_of_sum()), read(2)),
            ),
        ]);
        let shared = cse(routine);
        let body = loop_body(&shared);
        let [Stmt::Local { id, value, .. }, first, second] = body else {
            panic!("expected a local before the two stores: {body:?}");
        };
        assert_eq!(*value, exp_of_sum());
        let local = Box::new(Scalar::Local(*id));
        assert_eq!(*first, store(2, Scalar::Local(*id)));
        assert_eq!(*second, store(3, Scalar::Binop(Binop::Mul, local, read(2))));
    }

    #[test]
    fn a_write_between_two_statements_keeps_each_computing_its_own() {
        // a = …  between them: the second exp(a + b) reads another a.
        let routine = in_one_loop(vec![
            store(2, exp_of_sum()),
            store(0, Scalar::Const(1.0)),
            store(3, exp_of_sum()),
        ]);
        assert_eq!(cse(routine.clone()).body, routine.body);
        // The first statement writing what the operation reads counts too.
        let overwriting = in_one_loop(vec![store(0, exp_of_sum()), store(3, exp_of_sum())]);
        assert_eq!(cse(overwriting.clone()).body, overwriting.body);
        // A write of something else does not.
        let other = in_one_loop(vec![
            store(2, exp_of_sum()),
            store(4, Scalar::Const(1.0)),
            store(3, exp_of_sum()),
        ]);
        assert_eq!(loop_body(&cse(other)).len(), 4);
    }

    #[test]
    fn an_operation_the_first_statement_computes_in_a_branch_only_is_not_shared() {
        let routine = in_one_loop(vec![
            store(
                2,
                Scalar::Ternop(Ternop::Where, read(4), Box::new(exp_of_sum()), read(1)),
            ),
            store(3, exp_of_sum()),
        ]);
        assert_eq!(cse(routine.clone()).body, routine.body);
        // The other way round, the later branch reads the local.
        let routine = in_one_loop(vec![
            store(3, exp_of_sum()),
            store(
                2,
                Scalar::Ternop(Ternop::Where, read(4), Box::new(exp_of_sum()), read(1)),
            ),
        ]);
        assert_eq!(loop_body(&cse(routine)).len(), 3);
    }

    #[test]
    fn statements_computing_in_other_precisions_or_at_top_level_share_nothing() {
        let mut routine = in_one_loop(vec![store(2, exp_of_sum()), store(3, exp_of_sum())]);
        routine.nodes.get_mut(&NodeId(3)).unwrap().precision = Precision::F64;
        assert_eq!(cse(routine.clone()).body, routine.body);
        // Top-level statements are kernels of their own.
        let mut top = in_one_loop(Vec::new());
        top.body = vec![
            Stmt::For {
                var: LoopVar(0),
                range: 8,
                body: vec![store(2, exp_of_sum())],
            },
            Stmt::For {
                var: LoopVar(0),
                range: 8,
                body: vec![store(3, exp_of_sum())],
            },
        ];
        assert_eq!(cse(top.clone()).body, top.body);
    }

    #[test]
    fn only_statements_within_the_window_are_searched() {
        let mut stmts = vec![store(2, exp_of_sum())];
        stmts.extend((0..WINDOW).map(|_| store(4, Scalar::Const(0.0))));
        stmts.push(store(3, exp_of_sum()));
        let routine = in_one_loop(stmts);
        assert_eq!(cse(routine.clone()).body, routine.body);
    }

    #[test]
    fn a_condition_computed_in_f64_is_shared_only_by_f64_statements() {
        // The lesser and the greater of a and b: only the comparison is common.
        let pick = |then: u32, otherwise: u32| {
            let below = Box::new(Scalar::Binop(Binop::Lt, read(0), read(1)));
            Scalar::Ternop(Ternop::Where, below, read(then), read(otherwise))
        };
        let routine = in_one_loop(vec![store(2, pick(0, 1)), store(3, pick(1, 0))]);
        assert_eq!(cse(routine.clone()).body, routine.body);
        let mut doubles = routine;
        for node in doubles.nodes.values_mut() {
            node.precision = Precision::F64;
        }
        assert_eq!(loop_body(&cse(doubles)).len(), 3);
    }
}
