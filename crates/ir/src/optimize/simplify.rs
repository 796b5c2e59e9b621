//! Simplification: constant folding, algebraic identities, index arithmetic, and the removal of
//! loops and locals that do nothing.
//!
//! Folding computes as the interpreter would: in the kind of the precision the expression is
//! evaluated in (a store's node, a vector store's word, a local's own precision; a `where`
//! condition in `f64`, the argument of `uint4x32_to_prec_uniform1` as a word), so that the value
//! is unchanged. It never folds threefry or `uint4x32_to_prec_uniform1`, nor an integer division
//! by zero, nor an integer result that a constant could not hold exactly.
//!
//! The identities: `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1` to `x` (on numbers, not
//! words, where they are undefined), `id(x)` to `x`, `arg1(a, b)` to `a`, `arg2(a, b)` to `b`,
//! `neg(neg(x))` to `x`, a `where` with a constant condition to its branch, and `x * 0` to `0` in
//! integer kind only (in floats `x` may be NaN or ∞, or the zero negative). Adding a zero can
//! turn a sum of `−0` into `+0`; dropping it keeps `−0`, which compares equal. Dropping an
//! operand drops the reads in it, and with them any error those reads would have raised.
//!
//! Index arithmetic: terms of one variable are merged and zero terms dropped; a loop of one
//! iteration becomes its body with its variable 0; a loop of none, or with an empty body,
//! disappears; a local no expression reads disappears, with the statements setting it.

use std::collections::{HashMap, HashSet};

use super::{Renaming, local_precisions, normalize, stmt_precision, with_body};
use crate::loops::{Index, LocalId, Lookup, Scalar, Stmt};
use crate::ops::{Binop, Ternop, Unop};
use crate::precision::Precision;
use crate::routine::Routine;
use crate::value::Kind;

/// `routine` simplified.
pub fn simplify(routine: &Routine) -> Routine {
    let simplifier = Simplifier {
        routine,
        locals: local_precisions(&routine.body),
    };
    let body = simplifier.block(&routine.body);
    let live = live_locals(&body);
    with_body(routine, prune(body, &live))
}

/// The locals still read once every statement setting a local nothing reads is gone, and with
/// it what it read, again and again: what pruning until nothing changes leaves, found in one
/// pass by counting each local's readers. A local that reads itself (`v := v + x`) stays.
fn live_locals(body: &[Stmt]) -> HashSet<LocalId> {
    // For each local, the locals read by the statements setting it; how often each is read.
    let mut reads_of: HashMap<LocalId, Vec<LocalId>> = HashMap::new();
    let mut readers: HashMap<LocalId, usize> = HashMap::new();
    for stmt in body {
        stmt.walk(&mut |s| {
            let setting = match s {
                Stmt::Local { id, .. } | Stmt::SetLocal { id, .. } => Some(*id),
                _ => None,
            };
            for value in s.values() {
                value.for_each_local(&mut |read| {
                    *readers.entry(read).or_default() += 1;
                    if let Some(id) = setting {
                        reads_of.entry(id).or_default().push(read);
                    }
                });
            }
        });
    }
    let mut unread: Vec<LocalId> = (reads_of.keys())
        .filter(|id| !readers.contains_key(id))
        .copied()
        .collect();
    while let Some(id) = unread.pop() {
        for read in reads_of.remove(&id).into_iter().flatten() {
            if let Some(count) = readers.get_mut(&read) {
                *count -= 1;
                if *count == 0 {
                    readers.remove(&read);
                    unread.push(read);
                }
            }
        }
    }
    readers.into_keys().collect()
}

struct Simplifier<'a> {
    routine: &'a Routine,
    locals: HashMap<LocalId, Precision>,
}

impl Simplifier<'_> {
    fn block(&self, stmts: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for stmt in stmts {
            self.stmt(stmt, &mut out);
        }
        out
    }

    fn stmt(&self, stmt: &Stmt, out: &mut Vec<Stmt>) {
        let precision = stmt_precision(stmt, self.routine, &self.locals);
        let value = |scalar: &Scalar| match precision {
            Some(precision) => fold(scalar, precision),
            // What the routine does not declare is left for running it to report.
            None => Renaming::default().scalar(scalar),
        };
        match stmt {
            Stmt::For { range: 0, .. } => {}
            Stmt::For {
                var,
                range: 1,
                body,
            } => {
                let mut first = Renaming::default();
                first.indices.insert(*var, Index::constant(0));
                let body: Vec<Stmt> = body.iter().map(|s| first.stmt(s)).collect();
                out.extend(self.block(&body));
            }
            Stmt::For { var, range, body } => {
                let body = self.block(body);
                if !body.is_empty() {
                    out.push(Stmt::For {
                        var: *var,
                        range: *range,
                        body,
                    });
                }
            }
            Stmt::Set {
                node,
                index,
                value: v,
            } => out.push(Stmt::Set {
                node: *node,
                index: index.iter().map(normalize).collect(),
                value: value(v),
            }),
            Stmt::SetVec {
                node,
                offset,
                op,
                arg,
            } => out.push(Stmt::SetVec {
                node: *node,
                offset: normalize(offset),
                op: *op,
                arg: value(arg),
            }),
            Stmt::Local {
                id,
                precision: p,
                value: v,
            } => out.push(Stmt::Local {
                id: *id,
                precision: *p,
                value: value(v),
            }),
            Stmt::SetLocal { id, value: v } => out.push(Stmt::SetLocal {
                id: *id,
                value: value(v),
            }),
            Stmt::ScatterAdd { target, value: v } => out.push(Stmt::ScatterAdd {
                target: Box::new(fold_lookup(target)),
                value: value(v),
            }),
            // A matrix product is left as recognized: its plan names its nest's loops.
            Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => {
                out.push(stmt.clone());
            }
        }
    }
}

/// `stmts` without the locals `live` does not hold, their settings, and loops left empty.
fn prune(stmts: Vec<Stmt>, live: &HashSet<LocalId>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    for stmt in stmts {
        match stmt {
            Stmt::Local { id, .. } | Stmt::SetLocal { id, .. } if !live.contains(&id) => {}
            Stmt::For { var, range, body } => {
                let body = prune(body, live);
                if !body.is_empty() {
                    out.push(Stmt::For { var, range, body });
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `lookup` with its indices normalized and its id (a number in f64) simplified.
fn fold_lookup(lookup: &Lookup) -> Lookup {
    Lookup {
        node: lookup.node,
        index: lookup.index.iter().map(normalize).collect(),
        axis: lookup.axis,
        size: lookup.size,
        id: fold(&lookup.id, Precision::F64),
    }
}

/// `scalar`, evaluated in `precision`, simplified.
pub fn fold(scalar: &Scalar, precision: Precision) -> Scalar {
    let kind = precision.kind();
    let numbers = kind != Kind::Word;
    match scalar {
        Scalar::Const(_) | Scalar::Local(_) => scalar.clone(),
        Scalar::Get(node, index) => Scalar::Get(*node, index.iter().map(normalize).collect()),
        Scalar::Lookup(lookup) => Scalar::Lookup(Box::new(fold_lookup(lookup))),
        Scalar::Embed(index) => {
            let index = normalize(index);
            match index.terms.is_empty() {
                true if numbers && exact(index.offset) => Scalar::Const(index.offset as f64),
                _ => Scalar::Embed(index),
            }
        }
        Scalar::Unop(op, x) => {
            let inner = if *op == Unop::Uint4x32ToPrecUniform1 {
                Precision::Uint4x32
            } else {
                precision
            };
            match (op, fold(x, inner)) {
                (Unop::Identity, x) => x,
                (Unop::Neg, Scalar::Unop(Unop::Neg, y)) if numbers => *y,
                (op, Scalar::Const(c)) if numbers && *op != Unop::Uint4x32ToPrecUniform1 => {
                    match kind {
                        Kind::Float => Scalar::Const(op.apply_in(precision, c)),
                        _ => integer(op.apply_int_in(precision, c as i64))
                            .unwrap_or_else(|| Scalar::Unop(*op, Box::new(Scalar::Const(c)))),
                    }
                }
                (op, x) => Scalar::Unop(*op, Box::new(x)),
            }
        }
        Scalar::Binop(op, a, b) => binop(*op, fold(a, precision), fold(b, precision), precision),
        Scalar::Ternop(Ternop::Where, condition, then, otherwise) => {
            match fold(condition, Precision::F64) {
                // NaN is not 0: it selects `then`, as the interpreter's test does.
                Scalar::Const(c) if c != 0.0 => fold(then, precision),
                Scalar::Const(_) => fold(otherwise, precision),
                condition => Scalar::Ternop(
                    Ternop::Where,
                    Box::new(condition),
                    Box::new(fold(then, precision)),
                    Box::new(fold(otherwise, precision)),
                ),
            }
        }
        Scalar::Ternop(op, a, b, c) => {
            let (a, b, c) = (fold(a, precision), fold(b, precision), fold(c, precision));
            match (&a, &b, &c, kind) {
                (Scalar::Const(x), Scalar::Const(y), Scalar::Const(z), Kind::Float) => {
                    Scalar::Const(op.apply(*x, *y, *z))
                }
                (Scalar::Const(x), Scalar::Const(y), Scalar::Const(z), Kind::Int) => {
                    integer(op.apply_int(*x as i64, *y as i64, *z as i64)).unwrap_or_else(|| {
                        Scalar::Ternop(*op, Box::new(a), Box::new(b), Box::new(c))
                    })
                }
                _ => Scalar::Ternop(*op, Box::new(a), Box::new(b), Box::new(c)),
            }
        }
    }
}

fn binop(op: Binop, a: Scalar, b: Scalar, precision: Precision) -> Scalar {
    let kind = precision.kind();
    let is = |x: &Scalar, n: i64| match (x, kind) {
        (Scalar::Const(c), Kind::Float) => *c == n as f64,
        (Scalar::Const(c), Kind::Int) => *c as i64 == n,
        _ => false,
    };
    match (op, kind) {
        (Binop::Threefry4x32 | Binop::Threefry4x32Light, _) => {}
        (Binop::Arg1, _) => return a,
        (Binop::Arg2, _) => return b,
        (_, Kind::Word) => {}
        (Binop::Add, _) if is(&b, 0) => return a,
        (Binop::Add, _) if is(&a, 0) => return b,
        (Binop::Sub, _) if is(&b, 0) => return a,
        (Binop::Mul | Binop::Div, _) if is(&b, 1) => return a,
        (Binop::Mul, _) if is(&a, 1) => return b,
        (Binop::Mul, Kind::Int) if is(&a, 0) || is(&b, 0) => return Scalar::Const(0.0),
        _ => {
            if let (Scalar::Const(x), Scalar::Const(y)) = (&a, &b) {
                let folded = match kind {
                    Kind::Float => Some(Scalar::Const(op.apply_in(precision, *x, *y))),
                    _ => op
                        .apply_int_in(precision, *x as i64, *y as i64)
                        .and_then(integer),
                };
                if let Some(folded) = folded {
                    return folded;
                }
            }
        }
    }
    Scalar::Binop(op, Box::new(a), Box::new(b))
}

/// The constant that computes to `value` in integer kind, if one does.
fn integer(value: i64) -> Option<Scalar> {
    exact(value).then_some(Scalar::Const(value as f64))
}

/// Whether `value` survives the trip through a constant (`f64`, read back by truncation).
fn exact(value: i64) -> bool {
    (value as f64) as i64 == value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::LoopVar;
    use crate::node::NodeId;

    fn c(x: f64) -> Box<Scalar> {
        Box::new(Scalar::Const(x))
    }

    fn x() -> Box<Scalar> {
        Box::new(Scalar::Get(NodeId(0), vec![Index::var(LoopVar(0), 0)]))
    }

    fn shown(scalar: &Scalar, precision: Precision) -> String {
        fold(scalar, precision).to_string()
    }

    #[test]
    fn constants_fold_to_what_their_precision_computes() {
        // f32 (and f16, computed in f32) folds with the functions compiled code runs.
        let exp = fold(&Scalar::Unop(Unop::Exp, c(0.3)), Precision::F32);
        assert_eq!(exp, Scalar::Const(f64::from(crate::fmath::exp(0.3))));
        let pow = fold(&Scalar::Binop(Binop::Pow, c(1.7), c(0.3)), Precision::F16);
        assert_eq!(pow, Scalar::Const(f64::from(crate::fmath::pow(1.7, 0.3))));
        let exp = fold(&Scalar::Unop(Unop::Exp, c(0.3)), Precision::F64);
        assert_eq!(exp, Scalar::Const(0.3f64.exp()));
    }

    #[test]
    fn folding_follows_the_kind() {
        let half_sum = Scalar::Binop(Binop::Add, c(1.5), c(2.5));
        assert_eq!(shown(&half_sum, Precision::F32), "4");
        // Integers truncate each constant first.
        assert_eq!(shown(&half_sum, Precision::I32), "3");
        let by_zero = Scalar::Binop(Binop::Div, c(1.0), c(0.0));
        assert_eq!(shown(&by_zero, Precision::F64), "inf");
        // An integer quotient by zero folds to 0, as every backend computes it.
        assert_eq!(shown(&by_zero, Precision::I64), "0");
        // A where condition computes in f64 whatever the store's kind.
        let choose = Scalar::Ternop(
            Ternop::Where,
            Box::new(Scalar::Binop(Binop::Lt, c(0.25), c(0.5))),
            x(),
            c(7.0),
        );
        assert_eq!(shown(&choose, Precision::I32), "n0[l0]");
    }

    #[test]
    fn identities_and_what_stays() {
        let f = Precision::F32;
        let e = Scalar::Binop(
            Binop::Mul,
            c(1.0),
            Box::new(Scalar::Binop(Binop::Sub, x(), c(0.0))),
        );
        assert_eq!(shown(&e, f), "n0[l0]");
        let twice = Scalar::Unop(Unop::Neg, Box::new(Scalar::Unop(Unop::Neg, x())));
        assert_eq!(shown(&twice, f), "n0[l0]");
        let times_zero = Scalar::Binop(Binop::Mul, x(), c(0.0));
        assert_eq!(shown(&times_zero, f), "(n0[l0] * 0)");
        assert_eq!(shown(&times_zero, Precision::U8), "0");
        // Words have no arithmetic: only the argument selectors go.
        let word = Scalar::Binop(Binop::Add, x(), c(0.0));
        assert_eq!(shown(&word, Precision::Uint4x32), "(n0[l0] + 0)");
        let bits = Scalar::Unop(
            Unop::Uint4x32ToPrecUniform1,
            Box::new(Scalar::Binop(Binop::Arg2, c(1.0), c(2.0))),
        );
        assert_eq!(shown(&bits, f), "uint4x32_to_prec_uniform1(2)");
    }

    #[test]
    fn integer_results_a_constant_cannot_hold_stay() {
        let big = Scalar::Binop(Binop::Add, c(9.007_199_254_740_992e15), c(1.0));
        assert_eq!(shown(&big, Precision::I64), "(9007199254740992 + 1)");
    }

    #[test]
    fn locals_read_only_by_dead_locals_go_with_them() {
        let local = |id: u32, value: Scalar| Stmt::Local {
            id: LocalId(id),
            precision: Precision::F32,
            value,
        };
        let read = |id: u32| Box::new(Scalar::Local(LocalId(id)));
        // v0 ← v1 ← v2 unread, v3 ← v4 read by the store, v5 reading only itself.
        let body = vec![Stmt::For {
            var: LoopVar(0),
            range: 2,
            body: vec![
                local(0, *x()),
                local(1, Scalar::Unop(Unop::Neg, read(0))),
                local(2, Scalar::Binop(Binop::Add, read(1), read(0))),
                local(3, *x()),
                local(4, Scalar::Unop(Unop::Neg, read(3))),
                local(5, Scalar::Const(0.0)),
                Stmt::SetLocal {
                    id: LocalId(5),
                    value: Scalar::Binop(Binop::Add, read(5), read(3)),
                },
                Stmt::Set {
                    node: NodeId(1),
                    index: vec![Index::var(LoopVar(0), 0)],
                    value: *read(4),
                },
            ],
        }];
        let live = live_locals(&body);
        assert_eq!(live, HashSet::from([LocalId(3), LocalId(4), LocalId(5)]));
        let Stmt::For { body: pruned, .. } = &prune(body.clone(), &live)[0] else {
            panic!("the loop stays");
        };
        let Stmt::For { body, .. } = &body[0] else {
            panic!("a loop");
        };
        assert_eq!(pruned[..], body[3..]);
        // A loop left empty goes too.
        let emptied = Stmt::For {
            var: LoopVar(0),
            range: 2,
            body: vec![local(0, *x())],
        };
        assert!(prune(vec![emptied], &HashSet::new()).is_empty());
    }
}
