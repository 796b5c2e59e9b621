//! Lowering assignments to loops: one nest per assignment from its product space, indices from
//! its projections shifted by each buffer's margins, a neutral fill first unless every cell is
//! written exactly once, and a plain store where no cell is written twice.
//!
//! A coupled factor (a concatenation) becomes consecutive loops, one per component, sharing one
//! loop variable: within a component's loop only its symbol is active. A concatenated index reads
//! the active component's symbol shifted by the sizes of the components before it; an access that
//! needs an inactive component's symbol does not happen there. A nest whose written access does
//! not happen, or that has nothing left to read, emits nothing; a block assignment with two
//! sources left at one point, or a scatter with two targets, is ambiguous, an error.

use std::collections::{HashMap, HashSet};

use crate::assignment::{Assignment, Rhs};
use crate::index::{AxisIndex, Symbol};
use crate::loops::{Index, LoopVar, Scalar, Stmt};
use crate::node::{NodeId, TensorNode};
use crate::ops::{Binop, Unop};
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
            let operands = rhs.operands();
            let lowering = Lowering {
                projections,
                nodes,
                initialize_neutral: *initialize_neutral,
                accum: *accum,
                lhs: *lhs,
            };
            lowering.run(|point| {
                // Every operand must be read here, or there is nothing to compute.
                let Some(args) = operands
                    .iter()
                    .enumerate()
                    .map(|(i, id)| point.read(Slot::Rhs(i), *id).transpose())
                    .collect::<Option<Result<Vec<Scalar>, LowerError>>>()
                    .transpose()?
                else {
                    return Ok(None);
                };
                let mut args = args.into_iter().map(Box::new);
                let mut next = || args.next().expect("one argument per operand");
                Ok(Some(match rhs {
                    Rhs::Unop(op, _) => Scalar::Unop(*op, next()),
                    Rhs::Binop(op, _, _) => Scalar::Binop(*op, next(), next()),
                    Rhs::Ternop(op, _, _, _) => Scalar::Ternop(*op, next(), next(), next()),
                }))
            })
        }
        Assignment::Block {
            initialize_neutral,
            accum,
            lhs,
            op,
            sources,
            projections,
        } => {
            let lowering = Lowering {
                projections,
                nodes,
                initialize_neutral: *initialize_neutral,
                accum: *accum,
                lhs: *lhs,
            };
            lowering.run(|point| block_value(point, projections, *op, sources))
        }
        Assignment::RevSides {
            initialize_neutral,
            accum,
            source,
            op,
            targets,
            projections,
        } => {
            check_one_target(projections, targets.len())?;
            let mut stmts = Vec::new();
            for (i, target) in targets.iter().enumerate() {
                // The target's own record: its map written, the source's read.
                let view = projections.view(Slot::Rhs(i), &[Slot::Lhs]);
                let lowering = Lowering {
                    projections: &view,
                    nodes,
                    initialize_neutral: *initialize_neutral,
                    accum: *accum,
                    lhs: *target,
                };
                stmts.extend(lowering.run(|point| {
                    let read = point.read(Slot::Rhs(0), *source)?;
                    Ok(read.map(|value| Scalar::Unop(*op, Box::new(value))))
                })?);
            }
            Ok(stmts)
        }
    }
}

/// For a scatter into several targets: no nest (one component per factor) addresses two of
/// them, or one source cell would go to two places.
fn check_one_target(projections: &Projections, n_targets: usize) -> Result<(), LowerError> {
    let mut nests: Vec<HashSet<Symbol>> = vec![HashSet::new()];
    for factor in &projections.product_space {
        nests = nests
            .into_iter()
            .flat_map(|nest| {
                factor.components.iter().map(move |(symbol, _)| {
                    let mut nest = nest.clone();
                    nest.insert(*symbol);
                    nest
                })
            })
            .collect();
    }
    let ranges = projections.ranges();
    let inactive = |nest: &HashSet<Symbol>, symbol: &Symbol| {
        !nest.contains(symbol) && ranges.contains_key(symbol)
    };
    for nest in &nests {
        let addressed = (0..n_targets)
            .filter(|&i| {
                projections.rhs_index[i].iter().all(|index| match index {
                    AxisIndex::Concat(symbols) => symbols.iter().any(|s| nest.contains(s)),
                    other => !other.symbols().iter().any(|s| inactive(nest, s)),
                })
            })
            .count();
        if addressed > 1 {
            return Err(error(format!(
                "lowering: ambiguous indices in concatenation: {addressed} targets would receive                  one cell of the source ({})",
                projections.label
            )));
        }
    }
    Ok(())
}

/// The one source a block assignment reads at `point`.
fn block_value(
    point: &Point<'_>,
    projections: &Projections,
    op: Unop,
    sources: &[NodeId],
) -> Result<Option<Scalar>, LowerError> {
    // When the written index concatenates one component per source, source i belongs to
    // component i, whatever its own map says.
    let owners: Option<&Vec<Symbol>> = match projections
        .lhs_index
        .iter()
        .filter_map(|index| match index {
            AxisIndex::Concat(symbols) => Some(symbols),
            _ => None,
        })
        .collect::<Vec<_>>()[..]
    {
        [symbols] if symbols.len() == sources.len() => Some(symbols),
        _ => None,
    };
    let mut viable = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        if owners.is_some_and(|symbols| !point.active.contains_key(&symbols[i])) {
            continue;
        }
        if let Some(read) = point.read(Slot::Rhs(i), *source)? {
            viable.push(read);
        }
    }
    match viable.len() {
        0 => Ok(None),
        1 => Ok(Some(Scalar::Unop(op, Box::new(viable.remove(0))))),
        n => Err(error(format!(
            "lowering: ambiguous indices in concatenation: {n} sources would write one cell of \
             the result ({})",
            projections.label
        ))),
    }
}

struct Lowering<'a> {
    projections: &'a Projections,
    nodes: &'a HashMap<NodeId, TensorNode>,
    initialize_neutral: bool,
    accum: Binop,
    lhs: NodeId,
}

/// One nest's view: the symbols active in it, with their loop variables, and the ranges of all
/// product symbols.
struct Point<'a> {
    lowering: &'a Lowering<'a>,
    active: HashMap<Symbol, LoopVar>,
    ranges: &'a HashMap<Symbol, usize>,
}

impl Lowering<'_> {
    /// The fill (if needed) and every nest, with `value` giving what a nest computes (`None`:
    /// nothing there).
    fn run(
        &self,
        value: impl Fn(&Point<'_>) -> Result<Option<Scalar>, LowerError>,
    ) -> Result<Vec<Stmt>, LowerError> {
        let mut stmts = Vec::new();
        let p = self.projections;
        // Both predicates walk every nest: decide once, not per nest.
        let injective = p.is_injective();
        if self.initialize_neutral && !(p.is_surjective() && injective) {
            let neutral = self.accum.neutral().ok_or_else(|| {
                error(format!(
                    "lowering: {} has no neutral element to start from",
                    self.accum
                ))
            })?;
            stmts.push(Stmt::Fill {
                node: self.lhs,
                value: neutral,
            });
        }
        let ranges = p.ranges();
        let plain_store = self.initialize_neutral && injective;
        stmts.extend(self.nest(0, HashMap::new(), &ranges, plain_store, &value)?);
        Ok(stmts)
    }

    fn nest(
        &self,
        factor: usize,
        active: HashMap<Symbol, LoopVar>,
        ranges: &HashMap<Symbol, usize>,
        plain_store: bool,
        value: &impl Fn(&Point<'_>) -> Result<Option<Scalar>, LowerError>,
    ) -> Result<Vec<Stmt>, LowerError> {
        let Some(components) = self.projections.product_space.get(factor) else {
            let point = Point {
                lowering: self,
                active,
                ranges,
            };
            let Some(target) = point.index(Slot::Lhs, self.lhs)? else {
                return Ok(Vec::new());
            };
            let Some(value) = value(&point)? else {
                return Ok(Vec::new());
            };
            let value = if plain_store {
                value
            } else {
                Scalar::Binop(
                    self.accum,
                    Box::new(Scalar::Get(self.lhs, target.clone())),
                    Box::new(value),
                )
            };
            return Ok(vec![Stmt::Set {
                node: self.lhs,
                index: target,
                value,
            }]);
        };
        let var = LoopVar(factor as u32);
        let mut stmts = Vec::new();
        for &(symbol, range) in &components.components {
            let mut active = active.clone();
            active.insert(symbol, var);
            let body = self.nest(factor + 1, active, ranges, plain_store, value)?;
            if !body.is_empty() {
                stmts.push(Stmt::For { var, range, body });
            }
        }
        Ok(stmts)
    }
}

impl Point<'_> {
    /// The read of `node` through `slot`'s map, if it happens in this nest.
    fn read(&self, slot: Slot, node: NodeId) -> Result<Option<Scalar>, LowerError> {
        Ok(self
            .index(slot, node)?
            .map(|index| Scalar::Get(node, index)))
    }

    /// The buffer positions of `slot`'s map in this nest (each axis's index plus the buffer's
    /// left margin), or `None` if the map needs a symbol that is not active here.
    fn index(&self, slot: Slot, id: NodeId) -> Result<Option<Vec<Index>>, LowerError> {
        let projections = self.lowering.projections;
        let node = self
            .lowering
            .nodes
            .get(&id)
            .ok_or_else(|| error(format!("lowering: unknown node {id}")))?;
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
        let mut positions = Vec::new();
        for (axis, (before, _)) in map.iter().zip(&node.padding) {
            let margin = *before as i64;
            let term = |symbol: &Symbol| -> Result<Option<LoopVar>, LowerError> {
                match self.active.get(symbol) {
                    Some(var) => Ok(Some(*var)),
                    None if self.ranges.contains_key(symbol) => Ok(None),
                    None => Err(error(format!(
                        "lowering: {symbol} is not a loop of this assignment (static indices \
                         are not built yet)"
                    ))),
                }
            };
            let index = match axis {
                AxisIndex::Fixed(position) => Index {
                    terms: Vec::new(),
                    offset: position + margin,
                },
                AxisIndex::Iterator(symbol) => match term(symbol)? {
                    Some(var) => Index {
                        terms: vec![(1, var)],
                        offset: margin,
                    },
                    None => return Ok(None),
                },
                AxisIndex::Affine(affine) => {
                    let mut terms = Vec::new();
                    for (c, s) in affine.terms() {
                        match term(s)? {
                            Some(var) => terms.push((*c, var)),
                            None => return Ok(None),
                        }
                    }
                    Index {
                        terms,
                        offset: affine.offset() + margin,
                    }
                }
                AxisIndex::Concat(symbols) => {
                    let Some(position) = symbols.iter().position(|s| self.active.contains_key(s))
                    else {
                        return Ok(None);
                    };
                    let before: usize = symbols[..position].iter().map(|s| self.ranges[s]).sum();
                    Index {
                        terms: vec![(1, self.active[&symbols[position]])],
                        offset: before as i64 + margin,
                    }
                }
            };
            positions.push(index);
        }
        Ok(Some(positions))
    }
}
