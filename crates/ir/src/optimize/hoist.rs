//! Loop-invariant hoisting: an operation inside a loop whose value cannot change from one
//! iteration to the next (the clipping scale `min(1, max / (norm + 1e-6))` in a per-element
//! update) is computed once, into a local declared just before the loop, and read from it.
//!
//! An expression is invariant in a loop when it reads no variable of that loop or of the loops
//! inside it, no local declared or set inside it, and no node written anywhere inside it. The
//! largest invariant operations move (not bare reads or constants, nor operations on constants
//! alone, which simplification folds). The local holds the value in the use's compute precision,
//! as in `cse`, so results stay bit-identical; a draw bound to the use's own precision moves only
//! when that precision is the local's. Only float statements are hoisted from, and only what they
//! compute in their own compute precision: an integer local would be an i64, a `where`'s
//! condition an f64, which the GPU lacks.
//!
//! What moves out of a top-level loop is declared just before it, where backends compute it at
//! the start of the loop's kernel, once per thread or invocation (the locals are the kernel's
//! preamble: `backends::nests`), so the loop keeps its split. What moves out of an inner loop
//! lands in the enclosing loop's body, out of as many inner loops as it is invariant in. Loops of fewer than
//! two iterations gain nothing. Nothing moves out of a matrix product's nest, nor from inside a
//! loop of no iterations or a branch of a `where` (work the routine would have skipped), nor an
//! expression that can fail (word operations), so hoisting neither adds work nor raises an
//! error the routine would not have raised.
//!
//! [`hoist_invariants`], which `optimize` runs for every backend, leaves alone the loops of a
//! top-level loop's chain of loops nested alone (each the only statement of its parent's body):
//! the GPU backend flattens such a chain into invocations, and a local between two of its loops
//! would leave the inner ones serial in each invocation. [`hoist_invariants_into_nests`] hoists
//! out of those too, for a backend that splits only the top-level loop across threads (C): an
//! update of a `rows × cols` parameter then computes its clipping scale once per row.

use std::collections::{HashMap, HashSet};

use super::cse::{depends_on_precision, is_operation, operands, wide};
use super::{Fresh, for_each_value_mut, local_precisions, stmt_precision, stmt_writes};
use crate::loops::{Index, LocalId, LoopVar, Scalar, Stmt, Var};
use crate::node::NodeId;
use crate::ops::{Binop, Unop};
use crate::precision::Precision;
use crate::routine::Routine;
use crate::value::Kind;

/// `routine` with the invariant operations of each loop nested in another loop, outside the
/// chains of loops nested alone under top-level loops, computed once just before that loop.
pub fn hoist_invariants(routine: Routine) -> Routine {
    hoist(routine, Reach::BelowLoopChains)
}

/// `routine` with the invariant operations of each loop nested in another loop computed once,
/// just before that loop: for backends that run a top-level loop's iterations on threads and
/// everything inside it serially.
pub fn hoist_invariants_into_nests(routine: Routine) -> Routine {
    hoist(routine, Reach::EveryNestedLoop)
}

/// Which nested loops may be hoisted out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Not those of a top-level loop's chain of loops nested alone.
    BelowLoopChains,
    EveryNestedLoop,
}

fn hoist(mut routine: Routine, reach: Reach) -> Routine {
    // The statements move through the pass; what it leaves alone is neither copied nor rebuilt.
    let body = std::mem::take(&mut routine.body);
    let mut hoisting = Hoisting {
        routine: &routine,
        reach,
        locals: local_precisions(&body),
        fresh: Fresh::new(&body),
    };
    let body = hoisting.block(body, Level::Top);
    routine.body = body;
    routine
}

struct Hoisting<'a> {
    routine: &'a Routine,
    reach: Reach,
    locals: HashMap<LocalId, Precision>,
    fresh: Fresh,
}

/// What may change from one iteration of a loop to the next.
struct Variant {
    vars: HashSet<LoopVar>,
    locals: HashSet<LocalId>,
    nodes: HashSet<NodeId>,
}

impl Variant {
    /// What changes across the iterations of the loop over `var` with `body`.
    fn of(var: LoopVar, body: &[Stmt]) -> Variant {
        let mut variant = Variant {
            vars: HashSet::from([var]),
            locals: HashSet::new(),
            nodes: HashSet::new(),
        };
        for stmt in body {
            variant.nodes.extend(stmt_writes(stmt));
            stmt.walk(&mut |s| match s {
                Stmt::For { var, .. } => {
                    variant.vars.insert(*var);
                }
                Stmt::Gemm { plan, .. } => {
                    let loops = [&plan.batch, &plan.m, &plan.n, &plan.k];
                    variant
                        .vars
                        .extend(loops.into_iter().flatten().map(|(v, _)| *v));
                }
                Stmt::Local { id, .. } | Stmt::SetLocal { id, .. } => {
                    variant.locals.insert(*id);
                }
                _ => {}
            });
        }
        variant
    }

    fn index_is_invariant(&self, index: &Index) -> bool {
        index.vars().all(|v| match v {
            Var::Loop(l) => !self.vars.contains(&l),
            Var::Static(_) => true,
        })
    }

    fn is_invariant(&self, scalar: &Scalar) -> bool {
        match scalar {
            Scalar::Const(_) => true,
            Scalar::Get(node, index) => {
                !self.nodes.contains(node) && index.iter().all(|i| self.index_is_invariant(i))
            }
            Scalar::Lookup(lookup) => {
                !self.nodes.contains(&lookup.node)
                    && lookup.index.iter().all(|i| self.index_is_invariant(i))
                    && self.is_invariant(&lookup.id)
            }
            Scalar::Embed(index) => self.index_is_invariant(index),
            Scalar::Local(id) => !self.locals.contains(id),
            Scalar::Unop(_, a) => self.is_invariant(a),
            Scalar::Binop(_, a, b) => self.is_invariant(a) && self.is_invariant(b),
            Scalar::Ternop(_, a, b, c) => {
                self.is_invariant(a) && self.is_invariant(b) && self.is_invariant(c)
            }
        }
    }
}

/// The invariant operations taken out of one loop: each with the precision of its local.
type Hoisted = Vec<(Scalar, Precision, LocalId)>;

/// Where a body lies: at the routine's top level, as the body of a loop in a top-level loop's
/// chain of loops nested alone, or deeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Chain,
    Nested,
}

impl Hoisting<'_> {
    /// `stmts` (lying at `level`) with every loop in them hoisted out of where allowed.
    fn block(&mut self, stmts: Vec<Stmt>, level: Level) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        // A loop alone in a chain's loop body continues the chain.
        let inner_level = match level {
            Level::Top => Level::Chain,
            Level::Chain if stmts.len() == 1 => Level::Chain,
            Level::Chain | Level::Nested => Level::Nested,
        };
        let may_hoist = match level {
            Level::Top => true,
            Level::Chain => inner_level == Level::Nested || self.reach == Reach::EveryNestedLoop,
            Level::Nested => true,
        };
        for stmt in stmts {
            match stmt {
                Stmt::For { var, range, body } if may_hoist && range >= 2 => {
                    let variant = Variant::of(var, &body);
                    let mut hoisted = Hoisted::new();
                    let body = self.rewrite_block(body, &variant, &mut hoisted);
                    out.extend(hoisted.into_iter().map(|(value, precision, id)| {
                        self.locals.insert(id, precision);
                        Stmt::Local {
                            id,
                            precision,
                            value,
                        }
                    }));
                    out.push(Stmt::For {
                        var,
                        range,
                        body: self.block(body, inner_level),
                    });
                }
                Stmt::For { var, range, body } => out.push(Stmt::For {
                    var,
                    range,
                    body: self.block(body, inner_level),
                }),
                stmt => out.push(stmt),
            }
        }
        out
    }

    /// `stmts` (inside a loop where `variant` changes) with their invariant operations read
    /// from the locals of `hoisted`.
    fn rewrite_block(
        &mut self,
        stmts: Vec<Stmt>,
        variant: &Variant,
        hoisted: &mut Hoisted,
    ) -> Vec<Stmt> {
        stmts
            .into_iter()
            .map(|stmt| match stmt {
                Stmt::For { var, range, body } if range > 0 => Stmt::For {
                    var,
                    range,
                    body: self.rewrite_block(body, variant, hoisted),
                },
                Stmt::For { .. } | Stmt::Gemm { .. } => stmt,
                // Integer statements stay: their local would be an i64, which a GPU without
                // shader-int64 lacks, and which elsewhere turns every integer of the routine's
                // kernels to 64 bits.
                mut stmt => match stmt_precision(&stmt, self.routine, &self.locals) {
                    Some(precision) if precision.kind() == Kind::Float => {
                        for_each_value_mut(&mut stmt, &mut |value| {
                            let taken = std::mem::replace(value, Scalar::Const(0.0));
                            *value = self.rewrite(
                                taken,
                                precision,
                                false,
                                wide(precision),
                                variant,
                                hoisted,
                            );
                        });
                        stmt
                    }
                    _ => stmt,
                },
            })
            .collect()
    }

    /// `scalar` (computed in `precision`, in a `where` branch when `conditional`, in a statement
    /// computing in `width`) with its largest invariant operations replaced by locals of
    /// `width`: a `where`'s condition, computed in f64, stays in an f32 statement, whose routine
    /// may run where f64 is lacking (the GPU).
    fn rewrite(
        &mut self,
        scalar: Scalar,
        precision: Precision,
        conditional: bool,
        width: Precision,
        variant: &Variant,
        hoisted: &mut Hoisted,
    ) -> Scalar {
        // Invariance first: it fails at the first operand that varies, while being worth
        // hoisting looks through the whole expression, which at every level of a deep
        // expression would make the rewrite quadratic in its depth.
        if !conditional
            && wide(precision) == width
            && variant.is_invariant(&scalar)
            && worth_hoisting(&scalar, precision)
        {
            let id = match hoisted
                .iter()
                .find(|(value, p, _)| *value == scalar && *p == width)
            {
                Some((_, _, id)) => *id,
                None => {
                    let id = self.fresh.local();
                    hoisted.push((scalar, width, id));
                    id
                }
            };
            return Scalar::Local(id);
        }
        // Each operand's precision and whether a branch alone computes it, then the operands
        // rewritten in their boxes.
        let facts: Vec<(Precision, bool)> = operands(&scalar, precision, conditional)
            .into_iter()
            .map(|(_, p, c)| (p, c))
            .collect();
        let mut scalar = scalar;
        let mut rewrite_at = |i: usize, operand: &mut Box<Scalar>| {
            let (p, c) = facts[i];
            let taken = std::mem::replace(&mut **operand, Scalar::Const(0.0));
            **operand = self.rewrite(taken, p, c, width, variant, hoisted);
        };
        match &mut scalar {
            Scalar::Const(_)
            | Scalar::Get(..)
            | Scalar::Lookup(_)
            | Scalar::Embed(_)
            | Scalar::Local(_) => {}
            Scalar::Unop(_, a) => rewrite_at(0, a),
            Scalar::Binop(_, a, b) => {
                rewrite_at(0, a);
                rewrite_at(1, b);
            }
            Scalar::Ternop(_, a, b, c) => {
                rewrite_at(0, a);
                rewrite_at(1, b);
                rewrite_at(2, c);
            }
        }
        scalar
    }
}

/// Whether `scalar`, computed in `precision`, is an operation worth a local of its own that
/// computes the same value in it and cannot fail.
fn worth_hoisting(scalar: &Scalar, precision: Precision) -> bool {
    is_operation(scalar)
        && reads_something(scalar)
        && !may_fail(scalar, precision)
        && (wide(precision) == precision || !depends_on_precision(scalar))
}

/// Whether `scalar` reads a node, an index or a local: is more than arithmetic on constants.
fn reads_something(scalar: &Scalar) -> bool {
    match scalar {
        Scalar::Const(_) => false,
        Scalar::Get(..) | Scalar::Lookup(_) | Scalar::Embed(_) | Scalar::Local(_) => true,
        _ => operands(scalar, Precision::F64, false)
            .into_iter()
            .any(|(s, _, _)| reads_something(s)),
    }
}

/// Whether evaluating `scalar` in `precision` can be an error: an operation on words other than
/// passing one on, a random-bits operation outside words.
fn may_fail(scalar: &Scalar, precision: Precision) -> bool {
    let fails_here = match (scalar, precision.kind()) {
        (Scalar::Binop(Binop::Threefry4x32 | Binop::Threefry4x32Light, _, _), kind) => {
            kind != Kind::Word
        }
        (Scalar::Binop(Binop::Arg1 | Binop::Arg2, _, _), _) => false,
        (Scalar::Unop(Unop::Identity | Unop::Uint4x32ToPrecUniform1, _), _) => false,
        (Scalar::Unop(..) | Scalar::Binop(..) | Scalar::Ternop(..), Kind::Word) => true,
        _ => false,
    };
    fails_here
        || operands(scalar, precision, false)
            .into_iter()
            .any(|(s, p, _)| may_fail(s, p))
}
