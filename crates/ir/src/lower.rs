//! Lowering assignments to loops: one nest per assignment from its product space, indices from
//! its projections shifted by each buffer's margins, a neutral fill first unless every cell is
//! written exactly once, and a plain store where no cell is written twice.
//!
//! A coupled factor (a concatenation) becomes consecutive loops, one per component, sharing one
//! loop variable: within a component's loop only its symbol is active. A concatenated index reads
//! the active component's symbol shifted by the sizes of the components before it; an access that
//! needs an inactive component's symbol does not happen there. A nest whose written access does
//! not happen, or that has nothing left to read, emits nothing; a block assignment with two
//! sources left at one point, or a scatter with two targets, is ambiguous, an error. A block's
//! or a scatter's nest runs no loop that neither its written cell nor its one read depends on
//! (a label only another source has): each cell takes its source's sum once, not once per
//! position of that label. A nest with a loop over an empty axis is not emitted at all: it
//! would write nothing.
//!
//! A gather lowers as the one-hot product its record describes, without the loop over the
//! vocabulary: the table is read at the id (a `Lookup`); its gradient adds each point's value
//! into the cell the id selects (`Stmt::ScatterAdd`), the loops choosing the written cell
//! outermost (see `gather`). A fan-out (`SetVecUnop`) is a nest over its source's cells, each
//! point writing its values from the linear position of the written map's cell.
//!
//! Before an assignment reads a padded node, the node's margins are set to the assignment's
//! neutral element (0 under a sum, −∞ under a maximum), so that reads there change nothing. A
//! node of more than [`MAX_AXES`] axes is an error: its nests and indices would be as deep. A
//! symbol that no factor of the product space has is a static index: a routine parameter. Loop
//! variables are numbered afresh across one lowering, so that no two nests share one.

mod gather;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::assignment::{Assignment, FetchOp, Rhs};
use crate::index::{AxisIndex, Symbol};
use crate::loops::{Index, Lookup, LoopVar, Scalar, Stmt, Terms, Var, VecUnop};
use crate::node::{MAX_AXES, NodeId, TensorNode};
use crate::ops::{Binop, Unop};
use crate::projections::{Projections, Slot};
use crate::routine::UNRANGED_STATIC;

/// Why an assignment cannot be lowered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LowerError {
    /// What kind of problem it is.
    pub kind: LowerErrorKind,
    /// What cannot be lowered, naming the assignment (what `Display` prints).
    pub message: String,
}

/// What kind of problem stops an assignment from being lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LowerErrorKind {
    /// The assignment and its nodes disagree: an unknown node, dims other than the projections
    /// expect, a number of values other than the cells, a static index no slice selects with.
    Inconsistent,
    /// A concatenation's indices are ambiguous (several sources for one cell, or one source for
    /// several targets), or an operand is not read where the result is written.
    Concatenation,
    /// Something lowering does not express: too many axes, margins on a buffer written by
    /// offsets, an accumulator without a neutral element to start from.
    Unsupported,
}

/// An error of the assignment and its nodes disagreeing ([`LowerErrorKind::Inconsistent`]).
fn error(message: String) -> LowerError {
    error_of(LowerErrorKind::Inconsistent, message)
}

fn error_of(kind: LowerErrorKind, message: String) -> LowerError {
    LowerError { kind, message }
}

/// The statements of `assignment`, over the nodes `nodes`.
pub fn lower(
    assignment: &Assignment,
    nodes: &HashMap<NodeId, TensorNode>,
) -> Result<Vec<Stmt>, LowerError> {
    Ok(lower_with_statics(assignment, nodes)?.0)
}

/// The statements of `assignment`, and the static indices they use with the range of each
/// (the size of the axis it selects along).
pub fn lower_with_statics(
    assignment: &Assignment,
    nodes: &HashMap<NodeId, TensorNode>,
) -> Result<(Vec<Stmt>, BTreeMap<Symbol, usize>), LowerError> {
    lower_over(assignment, nodes)
}

/// Nodes by id, as lowering looks them up: a routine's own map, or a caller's table.
pub(crate) trait Nodes {
    /// The node `id`, if there is one.
    fn node(&self, id: NodeId) -> Option<&TensorNode>;
}

impl Nodes for HashMap<NodeId, TensorNode> {
    fn node(&self, id: NodeId) -> Option<&TensorNode> {
        self.get(&id)
    }
}

impl Nodes for BTreeMap<NodeId, TensorNode> {
    fn node(&self, id: NodeId) -> Option<&TensorNode> {
        self.get(&id)
    }
}

/// [`lower_with_statics`] over any table of nodes (a routine's own map, which a copy into a
/// hash table would double for a large graph).
pub(crate) fn lower_over(
    assignment: &Assignment,
    nodes: &dyn Nodes,
) -> Result<(Vec<Stmt>, BTreeMap<Symbol, usize>), LowerError> {
    let context = Context {
        nodes,
        next_var: Cell::new(0),
        statics: RefCell::new(BTreeMap::new()),
        static_nodes: RefCell::new(HashMap::new()),
    };
    let stmts = context.lower(assignment)?;
    Ok((stmts, context.statics.into_inner()))
}

/// What one lowering shares across its assignments.
struct Context<'a> {
    nodes: &'a dyn Nodes,
    next_var: Cell<u32>,
    statics: RefCell<BTreeMap<Symbol, usize>>,
    /// The label of the first node each static index selects along, for messages.
    static_nodes: RefCell<HashMap<Symbol, String>>,
}

impl Context<'_> {
    fn fresh_var(&self) -> LoopVar {
        let var = LoopVar(self.next_var.get());
        self.next_var.set(var.0 + 1);
        var
    }

    /// The node `id`; an error where it is unknown or has more than [`MAX_AXES`] axes (every
    /// node an assignment reads or writes is looked up here, so none of them reaches a
    /// backend).
    fn node(&self, id: NodeId) -> Result<&TensorNode, LowerError> {
        let node =
            (self.nodes.node(id)).ok_or_else(|| error(format!("lowering: unknown node {id}")))?;
        if node.dims.len() > MAX_AXES {
            return Err(error_of(
                LowerErrorKind::Unsupported,
                format!(
                    "lowering: {id} '{}' has {} axes, more than the {MAX_AXES} supported",
                    node.label,
                    node.dims.len()
                ),
            ));
        }
        Ok(node)
    }

    /// Records the static index `symbol`, selecting along an axis of `range` positions of
    /// `node`; an error, naming the nodes (its symbol means nothing to whoever made it), where
    /// it selected along an axis of another size before.
    fn static_index(
        &self,
        symbol: Symbol,
        range: usize,
        node: &TensorNode,
    ) -> Result<(), LowerError> {
        let mut statics = self.statics.borrow_mut();
        let mut first = self.static_nodes.borrow_mut();
        let before = first.entry(symbol).or_insert_with(|| node.label.clone());
        match statics.insert(symbol, range) {
            // An embedding alone gave it no range of its own: the slice's is the range.
            Some(UNRANGED_STATIC) => {
                *before = node.label.clone();
                Ok(())
            }
            Some(other) if other != range => Err(error(format!(
                "lowering: a static index selects along an axis of {other} positions of '{before}' \
                 and along one of {range} of '{}'",
                node.label
            ))),
            _ => Ok(()),
        }
    }

    fn lower(&self, assignment: &Assignment) -> Result<Vec<Stmt>, LowerError> {
        match assignment {
            Assignment::Noop => Ok(Vec::new()),
            Assignment::Seq(parts) => {
                let mut stmts = Vec::new();
                for part in parts {
                    stmts.extend(self.lower(part)?);
                }
                Ok(stmts)
            }
            Assignment::BlockComment { body, .. } => self.lower(body),
            Assignment::Accum {
                initialize_neutral,
                accum,
                lhs,
                rhs,
                projections,
            } => {
                let operands = rhs.operands();
                let lowering = Lowering {
                    context: self,
                    projections,
                    initialize_neutral: *initialize_neutral,
                    accum: *accum,
                    lhs: *lhs,
                    skip_idle_loops: false,
                    store: Store::Cell,
                };
                let mut stmts = self.margin_resets(*accum, &operands)?;
                stmts.extend(lowering.run(|point| {
                    let reads = operands
                        .iter()
                        .enumerate()
                        .map(|(i, id)| point.read(Slot::Rhs(i), *id))
                        .collect::<Result<Vec<Option<Scalar>>, LowerError>>()?;
                    // A nest reading no operand leaves its cells at the neutral element (a
                    // component the result alone has, as padding). One reading some operands
                    // but not others has no value to give: the product of `a;b=>a^b` would
                    // multiply by a cell that is not there.
                    if let Some(missing) = reads.iter().position(Option::is_none) {
                        let read_some = reads.iter().any(Option::is_some);
                        if read_some && point.index(Slot::Lhs, *lhs)?.is_some() {
                            return Err(error_of(
                                LowerErrorKind::Concatenation,
                                format!(
                                    "lowering: {} writes cells where operand {} is not read (its \
                                 index needs a concatenation component inactive there): an \
                                 operation of several operands needs each of them at every cell \
                                 it writes; to join tensors, concatenate them",
                                    projections.label,
                                    missing + 1
                                ),
                            ));
                        }
                        return Ok(None);
                    }
                    let args: Vec<Scalar> = reads.into_iter().flatten().collect();
                    if let Rhs::Expr(expr, _) = rhs {
                        return Ok(Some(expr.map_operands(
                            &|i| args[i].clone(),
                            &Scalar::Const,
                            &|op, a| Scalar::Unop(op, Box::new(a)),
                            &|op, a, b| Scalar::Binop(op, Box::new(a), Box::new(b)),
                            &|op, a, b, c| {
                                Scalar::Ternop(op, Box::new(a), Box::new(b), Box::new(c))
                            },
                        )));
                    }
                    let mut args = args.into_iter().map(Box::new);
                    let mut next = || args.next().expect("one argument per operand");
                    Ok(Some(match rhs {
                        Rhs::Unop(op, _) => Scalar::Unop(*op, next()),
                        Rhs::Binop(op, _, _) => Scalar::Binop(*op, next(), next()),
                        Rhs::Ternop(op, _, _, _) => Scalar::Ternop(*op, next(), next(), next()),
                        Rhs::Expr(..) => unreachable!("handled above"),
                    }))
                })?);
                Ok(stmts)
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
                    context: self,
                    projections,
                    initialize_neutral: *initialize_neutral,
                    accum: *accum,
                    lhs: *lhs,
                    skip_idle_loops: true,
                    store: Store::Cell,
                };
                let mut stmts = self.margin_resets(*accum, sources)?;
                stmts.extend(lowering.run(|point| block_value(point, projections, *op, sources))?);
                Ok(stmts)
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
                let mut stmts = self.margin_resets(*accum, &[*source])?;
                for (i, target) in targets.iter().enumerate() {
                    // The target's own record: its map written, the source's read.
                    let view = projections.view(Slot::Rhs(i), &[Slot::Lhs]);
                    let lowering = Lowering {
                        context: self,
                        projections: &view,
                        initialize_neutral: *initialize_neutral,
                        accum: *accum,
                        lhs: *target,
                        skip_idle_loops: true,
                        store: Store::Cell,
                    };
                    stmts.extend(lowering.run(|point| {
                        let read = point.read(Slot::Rhs(0), *source)?;
                        Ok(read.map(|value| Scalar::Unop(*op, Box::new(value))))
                    })?);
                }
                Ok(stmts)
            }
            Assignment::Gather {
                initialize_neutral,
                lhs,
                table,
                ids,
                projections,
            } => self.gather(*initialize_neutral, *lhs, *table, *ids, projections),
            Assignment::ScatterAdd {
                target,
                source,
                ids,
                projections,
            } => self.scatter_add(*target, *source, *ids, projections),
            Assignment::SetVecUnop {
                op,
                lhs,
                rhs,
                projections,
            } => self.set_vec(*op, *lhs, *rhs, projections),
            Assignment::Fetch { node, op } => self.fetch(*node, op),
        }
    }

    /// Sets the margins of every padded node among `read` to `accum`'s neutral element.
    fn margin_resets(&self, accum: Binop, read: &[NodeId]) -> Result<Vec<Stmt>, LowerError> {
        let Some(value) = accum.neutral() else {
            return Ok(Vec::new());
        };
        let mut stmts = Vec::new();
        let mut seen = HashSet::new();
        for id in read {
            let node = self.node(*id)?;
            if seen.insert(*id) && node.padding.iter().any(|(l, r)| l + r > 0) {
                stmts.push(Stmt::FillMargins { node: *id, value });
            }
        }
        Ok(stmts)
    }

    /// A nest over `dims` (axes of one position get no loop), with `body` building the innermost
    /// statement from each axis's position.
    fn over_dims(&self, dims: &[usize], body: impl FnOnce(&[Index]) -> Stmt) -> Vec<Stmt> {
        let vars: Vec<Option<LoopVar>> = dims
            .iter()
            .map(|&dim| (dim != 1).then(|| self.fresh_var()))
            .collect();
        let positions: Vec<Index> = vars
            .iter()
            .map(|var| match var {
                Some(var) => Index::var(*var, 0),
                None => Index::constant(0),
            })
            .collect();
        if dims.contains(&0) {
            return Vec::new();
        }
        let mut stmt = body(&positions);
        for (var, &range) in vars.iter().zip(dims).rev() {
            if let Some(var) = var {
                stmt = Stmt::For {
                    var: *var,
                    range,
                    body: vec![stmt],
                };
            }
        }
        vec![stmt]
    }

    /// One application of `op` per cell of `rhs`, each writing its values from the cell the
    /// projections' written map gives.
    fn set_vec(
        &self,
        op: VecUnop,
        lhs: NodeId,
        rhs: NodeId,
        projections: &Projections,
    ) -> Result<Vec<Stmt>, LowerError> {
        let (target, source) = (self.node(lhs)?, self.node(rhs)?);
        let length = op.length(target.precision);
        if target.padding.iter().any(|(l, r)| l + r > 0) {
            return Err(error_of(
                LowerErrorKind::Unsupported,
                format!(
                    "lowering: {} writes {lhs} '{}' by offsets, so it cannot have margins",
                    op.name(),
                    target.label
                ),
            ));
        }
        if target.len().div_ceil(length) != source.len() {
            return Err(error(format!(
                "lowering: {} makes {length} cells of {} from each cell of {rhs} '{}' ({} cells), \
                 but {lhs} '{}' has {} cells",
                op.name(),
                target.precision,
                source.label,
                source.len(),
                target.label,
                target.len()
            )));
        }
        // A write of several cells from one position has no part of a concatenation to write.
        let concatenated = projections
            .product_space
            .iter()
            .any(|factor| factor.components.len() > 1);
        if concatenated {
            return Err(error_of(
                LowerErrorKind::Concatenation,
                format!(
                    "lowering: {} writes {lhs} '{}' from a concatenated index ({})",
                    op.name(),
                    target.label,
                    projections.label
                ),
            ));
        }
        let lowering = Lowering {
            context: self,
            projections,
            // Every cell is written by the vector stores: nothing to fill first.
            initialize_neutral: false,
            accum: Binop::Arg2,
            lhs,
            skip_idle_loops: false,
            store: Store::Vector(op),
        };
        lowering.run(|point| point.read(Slot::Rhs(0), rhs))
    }

    fn fetch(&self, id: NodeId, op: &FetchOp) -> Result<Vec<Stmt>, LowerError> {
        let node = self.node(id)?;
        let margins = left_margins(node);
        let each_cell = |value: &dyn Fn(&[Index]) -> Scalar| {
            self.over_dims(&node.dims, |positions| Stmt::Set {
                node: id,
                index: shifted(positions, &margins),
                value: value(positions),
            })
        };
        Ok(match op {
            FetchOp::Constant(c) => vec![Stmt::Fill {
                node: id,
                value: *c,
            }],
            FetchOp::EmbedDim(d) => vec![Stmt::Fill {
                node: id,
                value: *d as f64,
            }],
            FetchOp::EmbedSelfId => vec![Stmt::Fill {
                node: id,
                value: f64::from(id.0),
            }],
            FetchOp::ConstantFill(values) => {
                if values.len() != node.len() {
                    return Err(error(format!(
                        "lowering: {id} '{}' has {} cells, {} values given",
                        node.label,
                        node.len(),
                        values.len()
                    )));
                }
                let strides = row_major_strides(&node.dims);
                values
                    .iter()
                    .enumerate()
                    .map(|(cell, value)| {
                        let positions: Vec<Index> = strides
                            .iter()
                            .zip(&node.dims)
                            .map(|(stride, dim)| {
                                Index::constant((cell as i64 / stride) % *dim as i64)
                            })
                            .collect();
                        Stmt::Set {
                            node: id,
                            index: shifted(&positions, &margins),
                            value: Scalar::Const(*value),
                        }
                    })
                    .collect()
            }
            FetchOp::RangeOverOffsets => {
                let strides = row_major_strides(&node.dims);
                each_cell(&|positions| {
                    let mut offset = Index::constant(0);
                    for (position, stride) in positions.iter().zip(&strides) {
                        offset
                            .terms
                            .extend(position.terms.iter().map(|(c, v)| (c * stride, *v)));
                    }
                    Scalar::Embed(offset)
                })
            }
            FetchOp::EmbedStatic(symbol) => {
                // Where no slice selects with it (before or after), any position may be embedded.
                (self.statics.borrow_mut())
                    .entry(*symbol)
                    .or_insert(UNRANGED_STATIC);
                each_cell(&|_| {
                    Scalar::Embed(Index {
                        terms: smallvec::smallvec![(1, Var::Static(*symbol))],
                        offset: 0,
                    })
                })
            }
            FetchOp::Slice { source, batch } => {
                let sliced = self.node(*source)?;
                if sliced.dims.is_empty() || sliced.dims[1..] != node.dims[..] {
                    return Err(error(format!(
                        "lowering: {id} '{}' of dims {:?} cannot be a slice of {source} '{}' of \
                         dims {:?} along its leading axis",
                        node.label, node.dims, sliced.label, sliced.dims
                    )));
                }
                self.static_index(*batch, sliced.dims[0], sliced)?;
                let source_margins = left_margins(sliced);
                each_cell(&|positions| {
                    let mut index = vec![Index {
                        terms: smallvec::smallvec![(1, Var::Static(*batch))],
                        offset: source_margins[0],
                    }];
                    index.extend(shifted(positions, &source_margins[1..]));
                    Scalar::Get(*source, index)
                })
            }
            FetchOp::FromHost => Vec::new(),
        })
    }
}

fn left_margins(node: &TensorNode) -> Vec<i64> {
    node.padding.iter().map(|(left, _)| *left as i64).collect()
}

/// Interior positions as buffer positions: each moved past its axis's left margin.
fn shifted(positions: &[Index], margins: &[i64]) -> Vec<Index> {
    positions
        .iter()
        .zip(margins)
        .map(|(p, m)| Index {
            terms: p.terms.clone(),
            offset: p.offset + m,
        })
        .collect()
}

/// The row-major stride of each axis of `dims`.
fn row_major_strides(dims: &[usize]) -> Vec<i64> {
    let mut strides = vec![1i64; dims.len()];
    for axis in (0..dims.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * dims[axis + 1] as i64;
    }
    strides
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
                    other => !other.symbols().any(|s| inactive(nest, &s)),
                })
            })
            .count();
        if addressed > 1 {
            return Err(error_of(
                LowerErrorKind::Concatenation,
                format!(
                    "lowering: ambiguous indices in concatenation: {addressed} targets would receive                  one cell of the source ({})",
                    projections.label
                ),
            ));
        }
    }
    Ok(())
}

/// Whether a statement of `body` indexes by `var`.
fn mentions(body: &[Stmt], var: LoopVar) -> bool {
    let uses = |index: &[Index]| index.iter().any(|i| i.vars().any(|v| v == Var::Loop(var)));
    let mut found = false;
    for stmt in body {
        stmt.walk(&mut |stmt| {
            if let Stmt::Set { index, .. } = stmt {
                found |= uses(index);
            }
            for value in stmt.values() {
                value.for_each_get(&mut |_, index| found |= uses(index));
            }
        });
    }
    found
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
        if owners.is_some_and(|symbols| !point.active.contains(&symbols[i])) {
            continue;
        }
        if let Some(read) = point.read(Slot::Rhs(i), *source)? {
            viable.push(read);
        }
    }
    match viable.len() {
        0 => Ok(None),
        1 => Ok(Some(Scalar::Unop(op, Box::new(viable.remove(0))))),
        n => Err(error_of(
            LowerErrorKind::Concatenation,
            format!(
                "lowering: ambiguous indices in concatenation: {n} sources would write one cell of \
             the result ({})",
                projections.label
            ),
        )),
    }
}

struct Lowering<'a> {
    context: &'a Context<'a>,
    projections: &'a Projections,
    initialize_neutral: bool,
    accum: Binop,
    lhs: NodeId,
    /// Whether a loop of one component whose variable no access of the nest uses is left out
    /// (block assignments and scatters, whose nests read one source of several).
    skip_idle_loops: bool,
    /// How each point's value is stored.
    store: Store,
}

/// What a nest's innermost statement does with the value of its point.
enum Store {
    /// Accumulates it into the written cell.
    Cell,
    /// For a gather's gradient: adds it into the cell the id (read map 1) selects along the
    /// written axis (its position, then its size).
    Scatter(NodeId, usize, usize),
    /// Applies the vector operation to it and writes its values from the written cell's flat
    /// offset on.
    Vector(VecUnop),
}

/// One nest's view: the symbols active in it, with their loop variables, and the ranges of all
/// product symbols.
struct Point<'a> {
    lowering: &'a Lowering<'a>,
    active: &'a Active,
    ranges: &'a HashMap<Symbol, usize>,
}

/// The symbols of the loops a nest is inside, each with its loop variable: one per factor of
/// the product space, so a short list, grown and shrunk as the nests are built rather than
/// copied into each.
#[derive(Default)]
struct Active(Vec<(Symbol, LoopVar)>);

impl Active {
    fn get(&self, symbol: &Symbol) -> Option<LoopVar> {
        (self.0.iter().rev()).find_map(|(active, var)| (active == symbol).then_some(*var))
    }

    fn contains(&self, symbol: &Symbol) -> bool {
        self.get(symbol).is_some()
    }
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
                error_of(
                    LowerErrorKind::Unsupported,
                    format!(
                        "lowering: {} has no neutral element to start from",
                        self.accum
                    ),
                )
            })?;
            stmts.push(Stmt::Fill {
                node: self.lhs,
                value: neutral,
            });
        }
        let ranges = p.ranges();
        let plain_store = self.initialize_neutral && injective;
        stmts.extend(self.nest(0, &mut Active::default(), &ranges, plain_store, &value)?);
        Ok(stmts)
    }

    /// What a cell written once holds: the accumulator applied to its neutral element and
    /// `value`. That is `value` itself for a sum, product, maximum, minimum or plain set, but
    /// `−value` under subtraction, `1/value` under division and a truth value under `||`/`&&`.
    fn first_accumulation(&self, value: Scalar) -> Scalar {
        match (self.accum, self.accum.neutral()) {
            (Binop::Sub | Binop::Div | Binop::Or | Binop::And, Some(neutral)) => Scalar::Binop(
                self.accum,
                Box::new(Scalar::Const(neutral)),
                Box::new(value),
            ),
            _ => value,
        }
    }

    fn nest(
        &self,
        factor: usize,
        active: &mut Active,
        ranges: &HashMap<Symbol, usize>,
        plain_store: bool,
        value: &impl Fn(&Point<'_>) -> Result<Option<Scalar>, LowerError>,
    ) -> Result<Vec<Stmt>, LowerError> {
        let Some(components) = self.projections.product_space.get(factor) else {
            let point = Point {
                lowering: self,
                active: &*active,
                ranges,
            };
            let Some(target) = point.index(Slot::Lhs, self.lhs)? else {
                return Ok(Vec::new());
            };
            let Some(value) = value(&point)? else {
                return Ok(Vec::new());
            };
            match &self.store {
                Store::Cell => {}
                Store::Scatter(ids, axis, size) => {
                    let Some(id) = point.read(Slot::Rhs(1), *ids)? else {
                        return Ok(Vec::new());
                    };
                    let target = Lookup {
                        node: self.lhs,
                        index: target,
                        axis: *axis,
                        size: *size,
                        id,
                    };
                    return Ok(vec![Stmt::ScatterAdd {
                        target: Box::new(target),
                        value,
                    }]);
                }
                Store::Vector(op) => {
                    let dims = &self.context.node(self.lhs)?.dims;
                    return Ok(vec![Stmt::SetVec {
                        node: self.lhs,
                        offset: Index::flat(&target, dims),
                        op: *op,
                        arg: value,
                    }]);
                }
            }
            let value = if plain_store {
                self.first_accumulation(value)
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
        let var = self.context.fresh_var();
        let mut stmts = Vec::new();
        let single = components.components.len() == 1;
        for &(symbol, range) in &components.components {
            // A loop over an empty axis never runs: its nest writes nothing (what the fill set
            // stays), and no later pass has to reason about a loop without iterations.
            if range == 0 {
                continue;
            }
            active.0.push((symbol, var));
            let body = self.nest(factor + 1, active, ranges, plain_store, value);
            active.0.pop();
            let body = body?;
            if body.is_empty() {
                continue;
            }
            if self.skip_idle_loops && single && !mentions(&body, var) {
                stmts.extend(body);
            } else {
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
        let context = self.lowering.context;
        let node = context.node(id)?;
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
        for ((axis, (before, _)), dim) in map.iter().zip(&node.padding).zip(dims) {
            let margin = *before as i64;
            // A symbol with no factor is a static index; inside a sum it has no range to check.
            let term = |symbol: &Symbol, range: Option<usize>| -> Result<Option<Var>, LowerError> {
                match self.active.get(symbol) {
                    Some(var) => Ok(Some(Var::Loop(var))),
                    None if self.ranges.contains_key(symbol) => Ok(None),
                    None => {
                        if let Some(range) = range {
                            context.static_index(*symbol, range, node)?;
                        }
                        Ok(Some(Var::Static(*symbol)))
                    }
                }
            };
            let index = match axis {
                AxisIndex::Fixed(position) => Index {
                    terms: Terms::new(),
                    offset: position + margin,
                },
                AxisIndex::Iterator(symbol) => match term(symbol, Some(*dim))? {
                    Some(var) => Index {
                        terms: smallvec::smallvec![(1, var)],
                        offset: margin,
                    },
                    None => return Ok(None),
                },
                AxisIndex::Affine(affine) => {
                    let mut terms = Terms::new();
                    for (c, s) in affine.terms() {
                        match term(s, None)? {
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
                    let Some((position, var)) = (symbols.iter().enumerate())
                        .find_map(|(i, s)| self.active.get(s).map(|var| (i, var)))
                    else {
                        return Ok(None);
                    };
                    let before: usize = symbols[..position].iter().map(|s| self.ranges[s]).sum();
                    Index::var(var, before as i64 + margin)
                }
            };
            positions.push(index);
        }
        Ok(Some(positions))
    }
}
