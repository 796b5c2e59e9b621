//! The inference session: the tensors and operations of one graph, and the solver they feed.
//!
//! A tensor is created either as a *leaf* ([`Inference::leaf`]: data, constants, parameters, with
//! whatever rows its declaration gives) or as the result of an operation ([`Inference::apply`]).
//! Every operation's constraints come from the one generator ([`crate::logic::generate`]) and are
//! solved online (stage 1: nothing is guessed). [`Inference::finish`] runs the closing policy, after
//! which every shape that took part is variable-free; the session stays open, so more operations
//! can follow and be finished in turn.
//!
//! Operations are transactional: when one fails, the session is as it was before the call. The
//! solver has no undo, so a failure rebuilds it by replaying the log of everything that succeeded
//! — deterministic, and paid only on the error path.
//!
//! A failed operation is put in the user's terms by `diagnose`: the label of the spec, the slots
//! and the tensors that clash.
//!
//! Captured dimensions (`capture`) and the constraints users put on them (`set_dim`, `set_equal`,
//! `set_scale`) live in `capture`.
//!
//! ```
//! use rcannl_shape::logic::Logic;
//! use rcannl_shape::{Inference, LeafDecl};
//!
//! let mut inf = Inference::new();
//! let x = inf.leaf("x", LeafDecl::data().batch([32]).input([0; 0]).output([2]))?;
//! // Only the hidden width is given; the input width comes from `x`.
//! let w = inf.leaf("w", LeafDecl::param().output([16]))?;
//! let b = inf.leaf("b", LeafDecl::param())?;
//! let (wx, _) = inf.apply("wx", Logic::Compose, &[w, x])?;
//! let (h, _) = inf.apply("h", Logic::Pointwise(2), &[wx, b])?;
//! inf.finish()?;
//! assert_eq!(inf.closed_shape(w)?.to_string(), "|2->16");
//! assert_eq!(inf.closed_shape(b)?.to_string(), "|->16");
//! assert_eq!(inf.closed_shape(h)?.to_string(), "32|->16");
//! # Ok::<(), rcannl_shape::ShapeError>(())
//! ```

mod capture;
mod diagnose;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;

use crate::chunked::ChunkedVec;
use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind, TensorContext};
use crate::logic::{Generated, Logic, TerminalInit, generate_from, terminal_constraints};
use crate::solver::{LeafView, Solver};
use crate::spec::{Kind, LiteralBasis, ShapeLiteral};
use crate::term::{Basis, Dim, DimVar, Row, Shape, VarSupply};
use crate::words;

pub use capture::Capture;

/// A tensor of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u32);

/// An operation of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u32);

impl TensorId {
    /// The tensor's 0-based position in its session, in order of creation.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl OpId {
    /// The operation's 0-based position in its session, in order of creation.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a leaf's declaration says: the rows it gives (the others are open and inferred), what its
/// initializer says about its size, and whether it is a parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeafDecl {
    batch: Option<Vec<Dim>>,
    input: Option<Vec<Dim>>,
    output: Option<Vec<Dim>>,
    init: TerminalInit,
    is_param: bool,
}

impl LeafDecl {
    /// A data tensor or constant: every row inferred unless given.
    pub fn data() -> Self {
        LeafDecl::default()
    }

    /// A parameter: no batch axes unless given; input and output rows inferred unless given, but
    /// never guessed (closing reports a part nothing determines as a forgotten hidden dimension).
    pub fn param() -> Self {
        LeafDecl {
            batch: Some(Vec::new()),
            is_param: true,
            ..LeafDecl::default()
        }
    }

    /// The same declaration for a parameter: its sizes are never guessed.
    pub fn as_param(mut self) -> Self {
        self.is_param = true;
        self
    }

    /// All three rows given by a shape literal (`1*` is the claim-free unit).
    pub fn literal(literal: &ShapeLiteral) -> Self {
        let row = |kind| {
            literal
                .row(kind)
                .iter()
                .map(|d| match &d.basis {
                    LiteralBasis::ClaimFree => Dim::Unit,
                    LiteralBasis::Default => Dim::size(d.size),
                    LiteralBasis::Named(name) => Dim::Atom {
                        size: d.size,
                        basis: Basis::from_name(Some(name)),
                    },
                })
                .collect()
        };
        LeafDecl {
            batch: Some(row(Kind::Batch)),
            input: Some(row(Kind::Input)),
            output: Some(row(Kind::Output)),
            ..LeafDecl::default()
        }
    }

    /// Gives the batch row exactly these axes.
    pub fn batch<D: Into<Dim>>(self, dims: impl IntoIterator<Item = D>) -> Self {
        self.row(Kind::Batch, dims)
    }

    /// Gives the input row exactly these axes.
    pub fn input<D: Into<Dim>>(self, dims: impl IntoIterator<Item = D>) -> Self {
        self.row(Kind::Input, dims)
    }

    /// Gives the output row exactly these axes.
    pub fn output<D: Into<Dim>>(self, dims: impl IntoIterator<Item = D>) -> Self {
        self.row(Kind::Output, dims)
    }

    /// Gives the row of `kind` exactly these axes.
    pub fn row<D: Into<Dim>>(mut self, kind: Kind, dims: impl IntoIterator<Item = D>) -> Self {
        let dims = Some(dims.into_iter().map(Into::into).collect());
        match kind {
            Kind::Batch => self.batch = dims,
            Kind::Input => self.input = dims,
            Kind::Output => self.output = dims,
        }
        self
    }

    /// What the initializer says about the number or the layout of the elements.
    pub fn init(mut self, init: TerminalInit) -> Self {
        self.init = init;
        self
    }

    fn given(&self, kind: Kind) -> Option<&Vec<Dim>> {
        match kind {
            Kind::Batch => self.batch.as_ref(),
            Kind::Input => self.input.as_ref(),
            Kind::Output => self.output.as_ref(),
        }
    }
}

/// Where a tensor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Created by a declaration; closes downward to what its uses demand.
    Leaf {
        /// Whether the leaf is a parameter, whose sizes closing never guesses.
        is_param: bool,
    },
    /// The result of this operation.
    Computed(OpId),
}

/// A tensor: its label, its shape as created (with variables; see [`Inference::shape`] for what
/// is known now) and its origin.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    /// The tensor's label, used in error messages.
    pub label: String,
    /// The shape as created, with variables: a leaf's given rows closed and the others open, a
    /// result's rows all open.
    pub shape: Shape,
    /// Whether the tensor was declared or computed.
    pub origin: Origin,
}

/// An operation: its logic, its result and operands, and what the generator produced for it
/// (constraints, the variables of the spec's labels, fixed indices, …), which projection inference
/// reads again.
#[derive(Debug, Clone)]
pub struct OpInfo {
    /// The shape logic relating the result to the operands.
    pub logic: Logic,
    /// The tensor the operation computes.
    pub result: TensorId,
    /// The tensors the operation reads, in operand order.
    pub operands: Vec<TensorId>,
    /// The constraints, spec variables and other names the generator produced for the operation.
    pub generated: Generated,
}

/// One successful change to the solver, in the order it happened, with the variable supply as it
/// was before the change: the solver draws fresh variables too, and a replay must hand out the
/// same ones.
#[derive(Debug, Clone)]
struct Entry {
    vars: VarSupply,
    change: Change,
}

#[derive(Debug, Clone)]
enum Change {
    Constraints {
        constraints: Vec<Constraint>,
        discardable: Vec<DimVar>,
    },
    /// The constraints of an operation, as its [`OpInfo::generated`] keeps them.
    Operation(OpId),
    /// A closing over the leaves among the tensors `from..to`.
    Close { from: usize, to: usize },
}

/// The shape inference environment of one graph.
#[derive(Debug, Clone, Default)]
pub struct Inference {
    solver: Solver,
    tensors: ChunkedVec<TensorInfo>,
    ops: ChunkedVec<OpInfo>,
    log: Vec<Entry>,
    /// The tensors the last successful closing covered: every variable of their shapes is
    /// solved, and stays so, so that a later closing need only visit the leaves after them.
    closed: usize,
    /// `set_equal` between a dimension and a row: reported by name if closing cannot decide it.
    pending_equal: Vec<(Capture, Capture)>,
    /// Projections derived, by what they are derived from (the logic, the closed shapes, the
    /// labels' sizes, the first symbol, the slice): a deep model's layers derive the same ones
    /// over and over.
    derived: RefCell<HashMap<DerivedFrom, rcannl_ir::Projections>>,
}

/// Everything an operation's projections are derived from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct DerivedFrom {
    logic: Logic,
    result: Shape,
    operands: Vec<Shape>,
    /// The sizes of the spec's labels, by name.
    sizes: Vec<(String, usize)>,
    first_symbol: u32,
    slice: Option<rcannl_ir::Symbol>,
}

impl Inference {
    /// An empty session: no tensors, no operations.
    pub fn new() -> Self {
        Inference::default()
    }

    /// Declares a leaf tensor. Rows the declaration does not give are open; the initializer's
    /// constraints (element count, exact layout) are solved at once.
    pub fn leaf(
        &mut self,
        label: impl Into<String>,
        decl: LeafDecl,
    ) -> Result<TensorId, ShapeError> {
        let label = label.into();
        let mut shape = Shape::default();
        for kind in Kind::ALL {
            *shape.row_mut(kind) = match decl.given(kind) {
                Some(dims) => Row::closed(dims.clone()),
                None => Row::var(self.solver.vars().row()),
            };
        }
        let constraints = terminal_constraints(&shape, &decl.init);
        let id = self.push_tensor(TensorInfo {
            label: label.clone(),
            shape: shape.clone(),
            origin: Origin::Leaf {
                is_param: decl.is_param,
            },
        });
        if let Err(error) = self.commit(constraints, Vec::new()) {
            self.tensors.pop();
            let role = if decl.is_param { "parameter" } else { "leaf" };
            return Err(error.in_operation(
                format!("declaration of '{label}' ({:?})", decl.init),
                [TensorContext {
                    label,
                    role: role.to_owned(),
                    shape: words::shape(&shape),
                }],
            ));
        }
        Ok(id)
    }

    /// Creates the result of an operation on `operands`: a tensor with open rows, related to the
    /// operands by `logic`.
    pub fn apply(
        &mut self,
        label: impl Into<String>,
        logic: Logic,
        operands: &[TensorId],
    ) -> Result<(TensorId, OpId), ShapeError> {
        let shape = Shape {
            batch: Row::var(self.solver.vars().row()),
            input: Row::var(self.solver.vars().row()),
            output: Row::var(self.solver.vars().row()),
        };
        let result = self.push_tensor(TensorInfo {
            label: label.into(),
            shape,
            origin: Origin::Computed(OpId(self.ops.len() as u32)),
        });
        match self.relate(logic, result, operands) {
            Ok(op) => Ok((result, op)),
            Err(error) => {
                self.tensors.pop();
                Err(error)
            }
        }
    }

    /// Relates existing tensors by `logic`: `result` is computed from `operands` (for an
    /// assignment into a tensor that already exists).
    pub fn relate(
        &mut self,
        logic: Logic,
        result: TensorId,
        operands: &[TensorId],
    ) -> Result<OpId, ShapeError> {
        let with_context = |this: &Self, error: ShapeError| {
            error.in_operation(
                this.describe_op(&logic, result, operands),
                this.op_tensors(result, operands),
            )
        };
        // The shapes are read where they lie, beside the variable supply the generator draws from.
        let shapes: Vec<&Shape> = operands
            .iter()
            .map(|&t| &self.tensors[t.index()].shape)
            .collect();
        let result_shape = &self.tensors[result.index()].shape;
        let generated = generate_from(&logic, result_shape, &shapes, self.solver.vars())
            .map_err(|error| with_context(self, error))?;
        let vars = self
            .solve_or_restore(&generated.constraints, &generated.discardable)
            .map_err(|error| with_context(self, self.in_words(&logic, result, operands, error)))?;
        let op = OpId(self.ops.len() as u32);
        self.ops.push(OpInfo {
            logic,
            result,
            operands: operands.to_vec(),
            generated,
        });
        self.log.push(Entry {
            vars,
            change: Change::Operation(op),
        });
        Ok(op)
    }

    /// Closes every shape (the staged policy of [`Solver::close`]), with every leaf declared so
    /// far as a leaf. On failure nothing is committed.
    ///
    /// The leaves an earlier closing covered are left out: that closing solved every variable of
    /// theirs, so visiting them again would only resolve ground shapes, which a graph that
    /// finishes after each step it grows by would pay for with time quadratic in its size.
    pub fn finish(&mut self) -> Result<(), ShapeError> {
        let (from, to) = (self.closed, self.tensors.len());
        let vars = self.solver.vars().clone();
        if let Err(error) = self.solver.close_views(&leaves(&self.tensors, from..to)) {
            let window = self.solver.refused_window();
            self.rebuild();
            let error = match window {
                Some(window) => self.name_window(window, error),
                None => error,
            };
            return Err(self.undecided_set_equal().unwrap_or(error));
        }
        self.log.push(Entry {
            vars,
            change: Change::Close { from, to },
        });
        self.closed = to;
        Ok(())
    }

    /// The tensor's shape with everything known so far substituted in.
    pub fn shape(&self, tensor: TensorId) -> Shape {
        self.solver.resolve_shape(&self.tensor(tensor).shape)
    }

    /// The tensor's shape, which must be fully known (after [`Inference::finish`]).
    pub fn closed_shape(&self, tensor: TensorId) -> Result<Shape, ShapeError> {
        self.ground_shape(tensor)
            .map(|shape| shape.without_markers())
    }

    /// [`Inference::closed_shape`] with its broadcast points (where broadcasting aligns).
    fn ground_shape(&self, tensor: TensorId) -> Result<Shape, ShapeError> {
        let shape = self.shape(tensor);
        let ground = Kind::ALL.iter().all(|&kind| {
            let row = shape.row(kind);
            row.var.is_none() && row.dims().all(Dim::is_ground)
        });
        if ground {
            return Ok(shape);
        }
        Err(ShapeError::of_kind(
            ShapeErrorKind::Underdetermined,
            format!(
                "Not enough shape information: tensor '{}' still has unresolved axes {}; finish \
             inference before asking for its dimensions",
                self.tensor(tensor).label,
                words::shape(&shape)
            ),
        ))
    }

    /// The tensor's label, shape as created and origin. `tensor` must come from this session.
    pub fn tensor(&self, tensor: TensorId) -> &TensorInfo {
        &self.tensors[tensor.index()]
    }

    /// The operation's logic, result, operands and generated constraints. `op` must come from this
    /// session.
    pub fn op(&self, op: OpId) -> &OpInfo {
        &self.ops[op.index()]
    }

    /// Every tensor of the session, in order of creation.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + use<> {
        (0..self.tensors.len() as u32).map(TensorId)
    }

    /// Every operation of the session, in order of creation.
    pub fn ops(&self) -> impl Iterator<Item = OpId> + use<> {
        (0..self.ops.len() as u32).map(OpId)
    }

    /// The projections of `op`, from its tensors' closed shapes (see
    /// [`crate::projection::derive_projections`]; call [`Inference::finish`] first). Fresh
    /// iterators are numbered from `first_symbol`; a batch slice reads its axis at `slice`.
    pub fn projections(
        &self,
        op: OpId,
        first_symbol: u32,
        slice: Option<rcannl_ir::Symbol>,
    ) -> Result<rcannl_ir::Projections, ShapeError> {
        let info = self.op(op);
        let context = |error: ShapeError| {
            error.in_operation(
                self.describe_op(&info.logic, info.result, &info.operands),
                self.op_tensors(info.result, &info.operands),
            )
        };
        // Closed, and with their broadcast points: broadcasting aligns at them.
        let shape = |tensor: TensorId| self.ground_shape(tensor).map_err(context);
        let operands = info
            .operands
            .iter()
            .map(|&t| shape(t))
            .collect::<Result<Vec<_>, _>>()?;
        let label_sizes: HashMap<String, usize> = info
            .generated
            .labels
            .iter()
            .filter_map(|(name, var)| {
                let size = self.solver.resolve_dim(&Dim::Var(*var)).ground_size()?;
                Some((name.clone(), size))
            })
            .collect();
        let result = shape(info.result)?;
        let mut sizes: Vec<(String, usize)> = label_sizes.clone().into_iter().collect();
        sizes.sort_unstable();
        let key = DerivedFrom {
            logic: info.logic.clone(),
            result: result.clone(),
            operands: operands.clone(),
            sizes,
            first_symbol,
            slice,
        };
        if let Some(projections) = self.derived.borrow().get(&key) {
            return Ok(projections.clone());
        }
        let projections = crate::projection::derive::derive_projections_with_labels(
            &info.logic,
            &result,
            &operands,
            &label_sizes,
            first_symbol,
            slice,
        )
        .map_err(context)?;
        self.derived.borrow_mut().insert(key, projections.clone());
        Ok(projections)
    }

    /// The padding margins of `tensor`'s buffer: the running maximum, over every operation that
    /// reads or writes it, of the margins its projections address (axes in memory order). The
    /// caller freezes them when the buffer is allocated (see [`rcannl_ir::Margins`]).
    pub fn margins(&self, tensor: TensorId) -> Result<rcannl_ir::Margins, ShapeError> {
        let rank = Kind::ALL
            .iter()
            .map(|&kind| self.shape(tensor).row(kind).n_explicit())
            .sum();
        let mut margins = rcannl_ir::Margins::new(rank);
        for op in self.ops() {
            let info = self.op(op);
            let reads = info.operands.contains(&tensor);
            if info.result != tensor && !reads {
                continue;
            }
            // The slice symbol only names a position; any symbol serves to read margins.
            let projections = self.projections(op, 0, Some(rcannl_ir::Symbol(u32::MAX)))?;
            let mut accesses = Vec::new();
            if info.result == tensor {
                accesses.push(&projections.lhs_padding);
            }
            for (i, &operand) in info.operands.iter().enumerate() {
                if operand == tensor {
                    accesses.push(&projections.rhs_padding[i]);
                }
            }
            let operation = self.describe_op(&info.logic, info.result, &info.operands);
            for needed in accesses {
                margins
                    .require(needed, &operation)
                    .map_err(ShapeError::from)?;
            }
        }
        Ok(margins)
    }

    /// The solver, for reading resolved terms (projection inference resolves its ops' variables).
    pub fn solver(&self) -> &Solver {
        &self.solver
    }

    fn push_tensor(&mut self, info: TensorInfo) -> TensorId {
        self.tensors.push(info);
        TensorId(self.tensors.len() as u32 - 1)
    }

    /// Solves `constraints`; on success logs them, on failure restores the state before the call.
    fn commit(
        &mut self,
        constraints: Vec<Constraint>,
        discardable: Vec<DimVar>,
    ) -> Result<(), ShapeError> {
        let vars = self.solve_or_restore(&constraints, &discardable)?;
        self.log.push(Entry {
            vars,
            change: Change::Constraints {
                constraints,
                discardable,
            },
        });
        Ok(())
    }

    /// Solves `constraints`, returning the variable supply as it was before, for the caller to
    /// log the change with; on failure restores the state before the call.
    fn solve_or_restore(
        &mut self,
        constraints: &[Constraint],
        discardable: &[DimVar],
    ) -> Result<VarSupply, ShapeError> {
        let vars = self.solver.vars().clone();
        self.solver.add_discardable(discardable.iter().copied());
        match self.solver.add_all(constraints) {
            Ok(()) => Ok(vars),
            Err(error) => {
                self.rebuild();
                Err(error)
            }
        }
    }

    /// Replays the log into a fresh solver. The variable supply ends where it is now: variables
    /// handed out for the failed call stay allocated and unused.
    fn rebuild(&mut self) {
        let mut solver = Solver::new();
        for entry in &self.log {
            *solver.vars() = entry.vars.clone();
            let replayed = match &entry.change {
                Change::Constraints {
                    constraints,
                    discardable,
                } => {
                    solver.add_discardable(discardable.iter().copied());
                    solver.add_all(constraints)
                }
                Change::Operation(op) => {
                    let generated = &self.op(*op).generated;
                    solver.add_discardable(generated.discardable.iter().copied());
                    solver.add_all(&generated.constraints)
                }
                Change::Close { from, to } => {
                    solver.close_views(&leaves(&self.tensors, *from..*to))
                }
            };
            if let Err(error) = replayed {
                unreachable!("replaying steps that succeeded cannot fail: {error}");
            }
        }
        *solver.vars() = self.solver.vars().clone();
        self.solver = solver;
    }

    /// `error`, for a convolution whose window and output closing would have had to guess,
    /// naming them by their labels in the spec, with the operation and how to give them.
    fn name_window(&self, (window, output): (DimVar, DimVar), error: ShapeError) -> ShapeError {
        let same = |a: DimVar, b: DimVar| {
            self.solver.resolve_dim(&Dim::Var(a)) == self.solver.resolve_dim(&Dim::Var(b))
        };
        let found = self.ops.iter().find_map(|info| {
            let name = |var: DimVar| {
                info.generated
                    .labels
                    .iter()
                    .find(|(_, v)| same(**v, var))
                    .map(|(name, _)| name.clone())
            };
            Some((info, name(window)?, name(output)?))
        });
        let Some((info, window, output)) = found else {
            return error;
        };
        // The spec alone: the logic's kind (`permute`) is not what the user called.
        let spec = match &info.logic {
            Logic::Spec(spec) | Logic::Block(spec) => format!("\"{spec}\""),
            other => other.to_string(),
        };
        let message = format!(
            "Not enough shape information: nothing determines the window `{window}` (nor the \
             output `{output}`) of {spec}: any window that fits would do, and none is guessed; \
             give the window its size (capture `{window}` and set_dim it)"
        );
        ShapeError::of_kind(ShapeErrorKind::Underdetermined, message).in_operation(
            self.describe_op(&info.logic, info.result, &info.operands),
            self.op_tensors(info.result, &info.operands),
        )
    }

    /// `error` saying which labels, slots and tensors clash, where [`diagnose`] can tell.
    fn in_words(
        &self,
        logic: &Logic,
        result: TensorId,
        operands: &[TensorId],
        mut error: ShapeError,
    ) -> ShapeError {
        let placed = |tensor: TensorId| diagnose::Placed {
            label: &self.tensor(tensor).label,
            shape: self.shape(tensor),
        };
        let operands: Vec<diagnose::Placed<'_>> = operands.iter().map(|&t| placed(t)).collect();
        if let Some(message) = diagnose::diagnose(logic, &placed(result), &operands) {
            error.message = message;
        }
        error
    }

    /// `c = einsum "i,j;j,k=>i,k" (a, b)`.
    fn describe_op(&self, logic: &Logic, result: TensorId, operands: &[TensorId]) -> String {
        let operands: Vec<&str> = operands
            .iter()
            .map(|&t| self.tensor(t).label.as_str())
            .collect();
        format!(
            "{} = {logic} ({})",
            self.tensor(result).label,
            operands.join(", ")
        )
    }

    fn op_tensors(&self, result: TensorId, operands: &[TensorId]) -> Vec<TensorContext> {
        let context = |tensor: TensorId, role: String| TensorContext {
            label: self.tensor(tensor).label.clone(),
            role,
            shape: words::shape(&self.shape(tensor)),
        };
        let mut tensors = vec![context(result, "result".to_owned())];
        tensors.extend(
            operands
                .iter()
                .enumerate()
                .map(|(i, &t)| context(t, format!("operand {}", i + 1))),
        );
        tensors
    }
}

/// The leaves among the tensors `range`, for closing: a free function, so that the solver can be
/// borrowed apart from the tensors.
fn leaves(tensors: &ChunkedVec<TensorInfo>, range: Range<usize>) -> Vec<LeafView<'_>> {
    range
        .map(|t| &tensors[t])
        .filter_map(|info| match info.origin {
            Origin::Leaf { is_param } => Some(LeafView {
                label: &info.label,
                shape: &info.shape,
                is_param,
            }),
            Origin::Computed(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
