//! Lowering assignments to loops: one nest per assignment from its product space, indices from
//! its projections shifted by each buffer's margins, a neutral fill first unless every cell is
//! written exactly once, and a plain store where no cell is written twice.

use std::collections::HashMap;

use crate::assignment::{Assignment, Rhs};
use crate::index::{AxisIndex, Symbol};
use crate::loops::{Index, LoopVar, Scalar, Stmt};
use crate::node::{NodeId, TensorNode};
use crate::projections::{Projections, Slot};

/// Why an assignment cannot be lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerError {
    pub message: String,
}

impl std::fmt::Display for LowerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LowerError {}

fn error(message: String) -> LowerError {
    LowerError { message }
}

/// The statements of `assignment`, over the nodes `nodes`.
pub fn lower(
    assignment: &Assignment,
    nodes: &HashMap<NodeId, TensorNode>,
) -> Result<Vec<Stmt>, LowerError> {
    match assignment {
        Assignment::Noop => Ok(Vec::new()),
        Assignment::Seq(parts) => {
            let mut stmts = Vec::new();
            for part in parts {
                stmts.extend(lower(part, nodes)?);
            }
            Ok(stmts)
        }
        Assignment::Accum {
            initialize_neutral,
            accum,
            lhs,
            rhs,
            projections,
        } => {
            let mut stmts = Vec::new();
            let exact = projections.is_surjective() && projections.is_injective();
            if *initialize_neutral && !exact {
                let neutral = accum.neutral().ok_or_else(|| {
                    error(format!(
                        "lowering: {accum} has no neutral element to start from"
                    ))
                })?;
                stmts.push(Stmt::Fill {
                    node: *lhs,
                    value: neutral,
                });
            }
            let mut vars = HashMap::new();
            for (i, factor) in projections.product_space.iter().enumerate() {
                let [(symbol, _)] = factor.components[..] else {
                    return Err(error(
                        "lowering: concatenated (coupled) factors are not built yet".to_owned(),
                    ));
                };
                vars.insert(symbol, LoopVar(i as u32));
            }
            let node = |id: &NodeId| {
                nodes
                    .get(id)
                    .ok_or_else(|| error(format!("lowering: unknown node {id}")))
            };
            let at = |slot: Slot, id: &NodeId| -> Result<Scalar, LowerError> {
                Ok(Scalar::Get(
                    *id,
                    index(projections, slot, node(id)?, &vars)?,
                ))
            };
            let operands = rhs.operands();
            let args: Vec<Scalar> = operands
                .iter()
                .enumerate()
                .map(|(i, id)| at(Slot::Rhs(i), id))
                .collect::<Result<_, _>>()?;
            let mut args = args.into_iter().map(Box::new);
            let mut next = || args.next().expect("one argument per operand");
            let value = match rhs {
                Rhs::Unop(op, _) => Scalar::Unop(*op, next()),
                Rhs::Binop(op, _, _) => Scalar::Binop(*op, next(), next()),
                Rhs::Ternop(op, _, _, _) => Scalar::Ternop(*op, next(), next(), next()),
            };
            let target = index(projections, Slot::Lhs, node(lhs)?, &vars)?;
            let value = if *initialize_neutral && projections.is_injective() {
                value
            } else {
                Scalar::Binop(
                    *accum,
                    Box::new(Scalar::Get(*lhs, target.clone())),
                    Box::new(value),
                )
            };
            let mut body = vec![Stmt::Set {
                node: *lhs,
                index: target,
                value,
            }];
            for (i, factor) in projections.product_space.iter().enumerate().rev() {
                body = vec![Stmt::For {
                    var: LoopVar(i as u32),
                    range: factor.components[0].1,
                    body,
                }];
            }
            stmts.extend(body);
            Ok(stmts)
        }
    }
}

/// The buffer positions of one tensor's map: each axis's index plus its left margin.
fn index(
    projections: &Projections,
    slot: Slot,
    node: &TensorNode,
    vars: &HashMap<Symbol, LoopVar>,
) -> Result<Vec<Index>, LowerError> {
    let (map, dims) = match slot {
        Slot::Lhs => (&projections.lhs_index, &projections.lhs_dims),
        Slot::Rhs(i) => (&projections.rhs_index[i], &projections.rhs_dims[i]),
    };
    if *dims != node.dims {
        return Err(error(format!(
            "lowering: {} '{}' has dims {:?}, its projections expect {dims:?}",
            node.id, node.label, node.dims
        )));
    }
    let var = |symbol: &Symbol| {
        vars.get(symbol).copied().ok_or_else(|| {
            error(format!("lowering: {symbol} is not a loop of this assignment (static indices are not built yet)"))
        })
    };
    map.iter()
        .zip(&node.padding)
        .map(|(axis, (before, _))| {
            let margin = *before as i64;
            Ok(match axis {
                AxisIndex::Fixed(position) => Index {
                    terms: Vec::new(),
                    offset: position + margin,
                },
                AxisIndex::Iterator(symbol) => Index {
                    terms: vec![(1, var(symbol)?)],
                    offset: margin,
                },
                AxisIndex::Affine(affine) => Index {
                    terms: affine
                        .terms()
                        .iter()
                        .map(|(c, s)| Ok((*c, var(s)?)))
                        .collect::<Result<_, LowerError>>()?,
                    offset: affine.offset() + margin,
                },
                AxisIndex::Concat(_) => {
                    return Err(error(
                        "lowering: concatenated indices are not built yet".to_owned(),
                    ));
                }
            })
        })
        .collect()
}
