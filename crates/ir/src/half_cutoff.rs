//! OCANNL's `check_half_prec_constants_cutoff`: a constant of large magnitude in what an fp8 or
//! f16 tensor computes is an error naming the tensor, caught when its routine is compiled rather
//! than found later as an infinity in its cells.
//!
//! fp8's largest finite value is 57344 and f16's 65504, so a constant of 2¹⁴ (OCANNL's default
//! cut-off) is a few products away from overflowing. The check reads the optimized routine, after
//! constants are folded, as OCANNL's does: every constant in a value stored into a node of those
//! precisions (or into a local of them, named by the nodes that read it), every fill of such a
//! node, and every fixed index used as a number there. Infinities and NaNs are left alone: they
//! are meant (the neutral element of a maximum, a mask), not overflows. bf16 has f32's range and
//! is not checked, nor are integers, which wrap by design.

use std::collections::BTreeMap;
use std::fmt;

use crate::loops::{LocalId, Scalar, Stmt};
use crate::node::NodeId;
use crate::precision::Precision;
use crate::routine::Routine;

/// A constant at or beyond the cut-off in what a half precision tensor computes.
#[derive(Debug, Clone, PartialEq)]
pub struct CutoffError {
    /// The node whose computation holds the constant; `None` for a local no node reads.
    pub node: Option<NodeId>,
    /// Its label: the user's tensor (or the local, where no node reads it).
    pub label: String,
    /// Its precision (fp8 or f16).
    pub precision: Precision,
    /// The constant.
    pub constant: f64,
    /// The cut-off it reaches.
    pub cutoff: f64,
}

impl fmt::Display for CutoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.node {
            Some(node) => format!("tensor '{}' ({node})", self.label),
            None => self.label.clone(),
        };
        write!(
            f,
            "the constant {} in the computation of {what}, of precision {}, is at or beyond the \
             half precision cut-off {} (check_half_prec_constants_cutoff): it risks \
             overflowing; give the tensor a wider precision (f32, or bf16 for its range)",
            self.constant, self.precision, self.cutoff
        )
    }
}

impl std::error::Error for CutoffError {}

/// Whether `c` is a finite constant at or beyond `cutoff` in magnitude.
fn exceeds(c: f64, cutoff: f64) -> bool {
    c.is_finite() && c.abs() >= cutoff
}

/// The first constant of `value` at or beyond `cutoff`: constants, and indices that are numbers
/// fixed in the code.
fn first_large(value: &Scalar, cutoff: f64) -> Option<f64> {
    match value {
        Scalar::Const(c) => exceeds(*c, cutoff).then_some(*c),
        Scalar::Embed(index) if index.terms.is_empty() => {
            let c = index.offset as f64;
            exceeds(c, cutoff).then_some(c)
        }
        Scalar::Embed(_) | Scalar::Get(..) | Scalar::Local(_) => None,
        Scalar::Lookup(lookup) => first_large(&lookup.id, cutoff),
        Scalar::Unop(_, a) => first_large(a, cutoff),
        Scalar::Binop(_, a, b) => first_large(a, cutoff).or_else(|| first_large(b, cutoff)),
        Scalar::Ternop(_, a, b, c) => first_large(a, cutoff)
            .or_else(|| first_large(b, cutoff))
            .or_else(|| first_large(c, cutoff)),
    }
}

/// Checks `routine` against `cutoff` (`None`: checks nothing): the first constant at or beyond
/// it in what an fp8 or f16 node computes is the error.
pub fn check_half_prec_constants(
    routine: &Routine,
    cutoff: Option<f64>,
) -> Result<(), CutoffError> {
    let Some(cutoff) = cutoff else {
        return Ok(());
    };
    let half = |node: NodeId| {
        routine
            .nodes
            .get(&node)
            .filter(|n| n.precision.is_up_to_fp16())
    };
    let error = |node: NodeId, constant: f64| {
        let n = &routine.nodes[&node];
        CutoffError {
            node: Some(node),
            label: n.label.clone(),
            precision: n.precision,
            constant,
            cutoff,
        }
    };
    // The half precision locals, and a node each local is stored into, to name it by.
    let mut locals: BTreeMap<LocalId, Precision> = BTreeMap::new();
    let mut readers: BTreeMap<LocalId, NodeId> = BTreeMap::new();
    for stmt in &routine.body {
        stmt.walk(&mut |s| match s {
            Stmt::Local { id, precision, .. } if precision.is_up_to_fp16() => {
                locals.insert(*id, *precision);
            }
            Stmt::Set { node, value, .. } => value.for_each_local(&mut |id| {
                readers.entry(id).or_insert(*node);
            }),
            _ => {}
        });
    }
    // Nothing of half precision: nothing to look for.
    if locals.is_empty() && !routine.nodes.values().any(|n| n.precision.is_up_to_fp16()) {
        return Ok(());
    }
    let mut found = None;
    for stmt in &routine.body {
        stmt.walk(&mut |s| {
            if found.is_some() {
                return;
            }
            found = match s {
                Stmt::Set { node, value, .. } if half(*node).is_some() => {
                    first_large(value, cutoff).map(|c| error(*node, c))
                }
                Stmt::Fill { node, value } if half(*node).is_some() => {
                    exceeds(*value, cutoff).then(|| error(*node, *value))
                }
                Stmt::Local { id, value, .. } | Stmt::SetLocal { id, value }
                    if locals.contains_key(id) =>
                {
                    first_large(value, cutoff).map(|c| match readers.get(id) {
                        // The local's own precision: the node may be wider.
                        Some(node) => CutoffError {
                            precision: locals[id],
                            ..error(*node, c)
                        },
                        // A local no node reads: named as the local it is.
                        None => CutoffError {
                            node: None,
                            label: format!("local {id} of routine {}", routine.name),
                            precision: locals[id],
                            constant: c,
                            cutoff,
                        },
                    })
                }
                _ => None,
            };
        });
    }
    found.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LoopVar, Var};
    use crate::node::TensorNode;
    use crate::ops::Binop;

    fn routine(precision: Precision, body: Vec<Stmt>) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: [(NodeId(0), TensorNode::new(0, "scaled", precision, &[4]))].into(),
            statics: BTreeMap::new(),
            body,
        }
    }

    fn scaled_by(c: f64) -> Vec<Stmt> {
        let i = LoopVar(0);
        let at = vec![Index {
            terms: smallvec::smallvec![(1, Var::Loop(i))],
            offset: 0,
        }];
        vec![Stmt::For {
            var: i,
            range: 4,
            body: vec![Stmt::Set {
                node: NodeId(0),
                index: at.clone(),
                value: Scalar::Binop(
                    Binop::Mul,
                    Box::new(Scalar::Get(NodeId(0), at)),
                    Box::new(Scalar::Const(c)),
                ),
            }],
        }]
    }

    #[test]
    fn a_large_constant_in_a_half_precision_computation_names_the_tensor() {
        for precision in [Precision::F16, Precision::Fp8] {
            let e =
                check_half_prec_constants(&routine(precision, scaled_by(-20000.0)), Some(16384.0))
                    .unwrap_err();
            assert_eq!((e.node, e.constant), (Some(NodeId(0)), -20000.0));
            let message = e.to_string();
            assert!(message.contains("'scaled'"), "{message}");
            assert!(message.contains(&precision.to_string()), "{message}");
        }
        // At the cut-off itself, as OCANNL's `abs c >= cutoff`.
        assert!(
            check_half_prec_constants(&routine(Precision::F16, scaled_by(16384.0)), Some(16384.0))
                .is_err()
        );
    }

    #[test]
    fn small_constants_wide_precisions_infinities_and_no_cutoff_pass() {
        let cutoff = Some(16384.0);
        let ok =
            |precision, body, cutoff| check_half_prec_constants(&routine(precision, body), cutoff);
        assert_eq!(ok(Precision::F16, scaled_by(16383.0), cutoff), Ok(()));
        for wide in [
            Precision::Bf16,
            Precision::F32,
            Precision::I32,
            Precision::U16,
        ] {
            assert_eq!(ok(wide, scaled_by(1e6), cutoff), Ok(()), "{wide}");
        }
        assert_eq!(ok(Precision::F16, scaled_by(f64::INFINITY), cutoff), Ok(()));
        let fill = vec![Stmt::Fill {
            node: NodeId(0),
            value: f64::NEG_INFINITY,
        }];
        assert_eq!(ok(Precision::Fp8, fill, cutoff), Ok(()));
        assert_eq!(ok(Precision::F16, scaled_by(1e6), None), Ok(()));
    }

    #[test]
    fn fills_fixed_indices_and_locals_are_checked() {
        let cutoff = Some(16384.0);
        let fill = vec![Stmt::Fill {
            node: NodeId(0),
            value: 30000.0,
        }];
        let e = check_half_prec_constants(&routine(Precision::F16, fill), cutoff).unwrap_err();
        assert_eq!(e.constant, 30000.0);
        let at = vec![Index {
            terms: crate::loops::Terms::new(),
            offset: 1,
        }];
        let embedded = vec![Stmt::Set {
            node: NodeId(0),
            index: at.clone(),
            value: Scalar::Embed(Index {
                terms: crate::loops::Terms::new(),
                offset: 40000,
            }),
        }];
        let e = check_half_prec_constants(&routine(Precision::F16, embedded), cutoff).unwrap_err();
        assert_eq!(e.constant, 40000.0);
        let local = LocalId(3);
        let through_local = vec![
            Stmt::Local {
                id: local,
                precision: Precision::Fp8,
                value: Scalar::Const(0.0),
            },
            Stmt::SetLocal {
                id: local,
                value: Scalar::Const(1e5),
            },
            Stmt::Set {
                node: NodeId(0),
                index: at,
                value: Scalar::Local(local),
            },
        ];
        let e =
            check_half_prec_constants(&routine(Precision::F32, through_local), cutoff).unwrap_err();
        assert_eq!((e.label.as_str(), e.precision), ("scaled", Precision::Fp8));
    }
}
