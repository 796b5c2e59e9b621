//! Shared subexpressions: within one statement's expressions, an operation (unary, binary or
//! ternary; not a bare read, constant or local) that occurs more than once is computed once,
//! into a local declared just before the statement, and read from it.
//!
//! The local holds the value in the statement's compute precision (f32 for f16, bf16 and f32
//! statements, f64 for f64, `i64` for integers, the word for words), which is what intermediate
//! values are computed and rounded in, so the statement's result is bit-identical. A subexpression whose value depends on more than the kind, one
//! drawing uniform values from random bits in the statement's own precision, is shared only
//! when that precision is the local's. The largest repeated subexpression goes first, then the
//! statement (and the new local) are searched again. A subexpression is shared only if it is
//! evaluated whichever branch a `where` takes (one of its occurrences lies outside every
//! branch, or it lies in both branches of a `where` that does), so that sharing computes nothing
//! a branch would have skipped.

use super::{Fresh, local_precisions, map_values, stmt_precision, with_body};
use crate::loops::{Scalar, Stmt};
use crate::ops::{Ternop, Unop};
use crate::precision::Precision;
use crate::routine::Routine;

/// `routine` with repeated subexpressions of each statement computed once.
pub fn cse(routine: &Routine) -> Routine {
    let mut sharing = Sharing {
        routine,
        locals: local_precisions(&routine.body),
        fresh: Fresh::new(&routine.body),
    };
    let body = sharing.block(&routine.body);
    with_body(routine, body)
}

struct Sharing<'a> {
    routine: &'a Routine,
    locals: std::collections::HashMap<crate::loops::LocalId, Precision>,
    fresh: Fresh,
}

impl Sharing<'_> {
    fn block(&mut self, stmts: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            match stmt {
                Stmt::For { var, range, body } => out.push(Stmt::For {
                    var: *var,
                    range: *range,
                    body: self.block(body),
                }),
                _ => match stmt_precision(stmt, self.routine, &self.locals) {
                    Some(precision) => out.extend(self.share(stmt.clone(), precision)),
                    None => out.push(stmt.clone()),
                },
            }
        }
        out
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
    use crate::node::NodeId;
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
}
