//! Operations: assignments over tensor references, what an operation is besides its shape logic
//! ([`OpSpec`]), and the one function applying every operation: its shape logic in the inference
//! session, its forward assignment, and its gradient builder; and a spec read as the logic of an
//! operation's spec form.

use rcannl_ir::{Binop, Expr, Precision, Slot, Symbol, Ternop, Unop, VecUnop};
use rcannl_shape::logic::Logic;
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::{LeafDecl, OpId, TensorId};

use crate::tensor::Tensor;

use super::error::{TensorError, error};
use super::gradient::GradBuilder;
use super::{Graph, OpData, PrecisionRule, Site, TensorData};

/// A tensor's value or its gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ref {
    /// The value of the graph's tensor with this index (tensors are numbered in order of creation).
    Value(usize),
    /// The gradient of the graph's tensor with this index.
    Grad(usize),
}

impl Ref {
    /// The index of the tensor whose value or gradient this is.
    pub(crate) fn tensor(self) -> usize {
        match self {
            Ref::Value(t) | Ref::Grad(t) => t,
        }
    }
}

/// The right-hand side of an assignment over tensor references.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AsgRhs {
    Unop(Unop, Ref),
    Binop(Binop, Ref, Ref),
    Ternop(Ternop, Ref, Ref, Ref),
    /// Concatenation: the sources through `op`.
    Block(Unop, Vec<Ref>),
    /// A concatenation's gradient: `source` scattered into the targets (the lhs is unused).
    RevSides(Unop, Ref, Vec<Ref>),
    /// An expression over these operands.
    Expr(Expr, Vec<Ref>),
    /// One 128-bit word fanned out into consecutive cells.
    SetVec(VecUnop, Ref),
    /// A gather: the table's rows (read map 0) the ids (read map 1) select.
    Gather(Ref, Ref),
    /// A gather's gradient over the gather's own record: the source (read through the written
    /// map) added into the rows of the lhs (read map 0) the ids (read map 1) select.
    ScatterAdd(Ref, Ref),
}

/// Where an assignment's projections come from: an operation of the inference session, read as
/// is or through a slot permutation (a gradient reads the forward operation's record with the
/// roles of its tensors exchanged).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjSource {
    pub op: OpId,
    pub view: Option<(Slot, Vec<Slot>)>,
    /// The static index a batch slice reads its axis at.
    pub slice: Option<Symbol>,
}

/// An assignment over tensor references.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asg {
    pub lhs: Ref,
    pub initialize_neutral: bool,
    pub accum: Binop,
    pub rhs: AsgRhs,
    pub projections: ProjSource,
}

impl Graph {
    /// Creates the result of `logic` over `operands`: its shape related to theirs, its forward
    /// assignments and gradient assignments from the builders. The result is differentiable when
    /// an operand is and `differentiable` allows. It is labelled `name#n`, `n` its number; built
    /// inside a library function the user called, `function#n` instead (`nn::loss::mse#12`),
    /// which says more to the user than the operation inside it.
    pub(crate) fn apply(
        &self,
        name: &str,
        logic: Logic,
        operands: &[&Tensor],
        op: OpSpec,
    ) -> Tensor {
        let label = {
            let state = self.state.lock();
            let name = match state.site {
                Some(Site::Call(function, _)) => function,
                _ => name,
            };
            format!("{name}#{}", state.tensors.len())
        };
        match self.try_apply(&label, logic, operands, op) {
            Ok(t) => t,
            Err(failed) => failed,
        }
    }

    /// [`Graph::apply`], with the error of a failed operation as `Err` of a failed tensor.
    fn try_apply(
        &self,
        label: &str,
        logic: Logic,
        operands: &[&Tensor],
        op: OpSpec,
    ) -> Result<Tensor, Tensor> {
        if let Err(e) = self.check_owns(&format!("operation '{label}'"), operands) {
            return Err(self.failed(e));
        }
        let mut state = self.state.lock();
        let indices: Vec<usize> = operands.iter().map(|t| t.index).collect();
        let (precision_rule, precision_from) = match op.precision {
            ResultPrecision::Promoted => (PrecisionRule::FromOperands, indices.clone()),
            ResultPrecision::PromotedFrom(from) => (PrecisionRule::FromOperands, from),
            ResultPrecision::Converted(precision) => (PrecisionRule::Given(precision), Vec::new()),
            ResultPrecision::ToUsers => (PrecisionRule::FromUsers, Vec::new()),
        };
        let precision = state.provisional_precision(precision_rule, &precision_from);
        let inherited = indices
            .iter()
            .find_map(|&i| state.tensors[i].failed.clone());
        let shapes: Vec<TensorId> = indices.iter().map(|&i| state.tensors[i].shape).collect();
        let related = match &inherited {
            Some(e) => Err(e.clone()),
            None => match state.inference.apply(label, logic.clone(), &shapes) {
                Ok(pair) => Ok(pair),
                Err(e) => Err(state.locate(TensorError::from(e))),
            },
        };
        let index = state.tensors.len();
        let (shape, shape_op) = match related {
            Ok(pair) => pair,
            Err(e) => {
                if inherited.is_none() {
                    state.errors.push(e.clone());
                }
                let shape = state
                    .inference
                    .leaf(label, LeafDecl::data())
                    .expect("an unconstrained leaf always fits");
                state.tensors.push(TensorData {
                    label: label.to_owned(),
                    shape,
                    precision,
                    precision_rule,
                    precision_from,
                    precision_users: Vec::new(),
                    written_from: Vec::new(),
                    grad_precision: None,
                    grad_resolved: None,
                    leaf: None,
                    differentiable: false,
                    failed: Some(e),
                    op: None,
                });
                state.link_precision_users(index);
                state.note_site(index);
                drop(state);
                return Err(Tensor {
                    graph: self.clone(),
                    index,
                });
            }
        };
        let differentiable =
            op.differentiable && indices.iter().any(|&i| state.tensors[i].differentiable);
        let op_index = state.ops.len();
        state.tensors.push(TensorData {
            label: label.to_owned(),
            shape,
            precision,
            precision_rule,
            precision_from,
            precision_users: Vec::new(),
            written_from: Vec::new(),
            grad_precision: None,
            grad_resolved: None,
            leaf: None,
            differentiable,
            failed: None,
            op: Some(op_index),
        });
        state.link_precision_users(index);
        state.note_site(index);
        let source = ProjSource {
            op: shape_op,
            view: None,
            slice: op.slice,
        };
        let (rhs, view) = op.rhs.forward(&indices);
        let forward = vec![Asg {
            lhs: Ref::Value(index),
            initialize_neutral: true,
            accum: op.accum,
            rhs,
            projections: ProjSource {
                view,
                ..source.clone()
            },
        }];
        state.ops.push(OpData {
            result: index,
            operands: indices.clone(),
            forward,
            backward: Vec::new(),
        });
        drop(state);
        if differentiable && let Some(gradient) = op.gradient {
            let mut builder = GradBuilder {
                graph: self,
                source,
                result: index,
                operands: indices,
                backward: Vec::new(),
            };
            if let Err(e) = gradient(&mut builder) {
                self.record(e);
            }
            let backward = builder.backward;
            self.state.lock().ops[op_index].backward = backward;
        }
        Ok(Tensor {
            graph: self.clone(),
            index,
        })
    }
}

impl Graph {
    /// Adds to the operation computing `result` one more assignment from `operands`, related by
    /// `logic` (an operation defined by several assignments, as `interleave` writes even and
    /// odd positions from two tensors). It accumulates into what the earlier ones wrote.
    pub(crate) fn also(&self, result: &Tensor, logic: Logic, operands: &[&Tensor], op: OpSpec) {
        let mut all = vec![result];
        all.extend_from_slice(operands);
        if let Err(e) = self.check_owns(&format!("operation '{}'", result.label()), &all) {
            self.record(e);
            return;
        }
        let mut state = self.state.lock();
        if state.tensors[result.index].failed.is_some() {
            return;
        }
        let Some(op_index) = state.tensors[result.index].op else {
            drop(state);
            self.record(error(format!(
                "'{}' is not computed by an operation",
                result.label()
            )));
            return;
        };
        let indices: Vec<usize> = operands.iter().map(|t| t.index).collect();
        if let Some(e) = indices
            .iter()
            .find_map(|&i| state.tensors[i].failed.clone())
        {
            state.tensors[result.index].failed = Some(e);
            return;
        }
        let shapes: Vec<TensorId> = indices.iter().map(|&i| state.tensors[i].shape).collect();
        let result_shape = state.tensors[result.index].shape;
        let shape_op = match state.inference.relate(logic, result_shape, &shapes) {
            Ok(op) => op,
            Err(e) => {
                let e = state.locate(TensorError::from(e));
                state.errors.push(e.clone());
                state.tensors[result.index].failed = Some(e);
                return;
            }
        };
        let source = ProjSource {
            op: shape_op,
            view: None,
            slice: op.slice,
        };
        let (rhs, view) = op.rhs.forward(&indices);
        let differentiable = indices.iter().any(|&i| state.tensors[i].differentiable);
        state.tensors[result.index].differentiable |= differentiable && op.differentiable;
        let data = &mut state.ops[op_index];
        data.forward.push(Asg {
            lhs: Ref::Value(result.index),
            initialize_neutral: false,
            accum: op.accum,
            rhs,
            projections: ProjSource {
                view,
                ..source.clone()
            },
        });
        data.operands.extend(indices.iter().copied());
        drop(state);
        if let (true, Some(gradient)) = (differentiable, op.gradient) {
            let mut builder = GradBuilder {
                graph: self,
                source,
                result: result.index,
                operands: indices,
                backward: Vec::new(),
            };
            if let Err(e) = gradient(&mut builder) {
                self.record(e);
            }
            let backward = builder.backward;
            self.state.lock().ops[op_index].backward.extend(backward);
        }
    }
}

/// The forward computation of an operation, over its result and operand slots.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Forward {
    Unop(Unop),
    Binop(Binop),
    Ternop(Ternop),
    Block(Unop),
    /// An expression over the operands in the slots given (each read through its map).
    Expr(Expr, Vec<Slot>),
    /// One word of the operand fanned out into consecutive cells of the result.
    SetVec(VecUnop),
    /// The rows of operand 0 that the ids of operand 1 select.
    Gather,
}

impl Forward {
    /// The right-hand side over the operands, and the slot view it reads the record through
    /// (`None`: as the record is).
    fn forward(&self, operands: &[usize]) -> (AsgRhs, Option<(Slot, Vec<Slot>)>) {
        let v = |i: usize| Ref::Value(operands[i]);
        let rhs = match self {
            Forward::Unop(op) => AsgRhs::Unop(*op, v(0)),
            Forward::Binop(op) => AsgRhs::Binop(*op, v(0), v(1)),
            Forward::Ternop(op) => AsgRhs::Ternop(*op, v(0), v(1), v(2)),
            Forward::Block(op) => {
                AsgRhs::Block(*op, operands.iter().map(|&t| Ref::Value(t)).collect())
            }
            Forward::SetVec(op) => AsgRhs::SetVec(*op, v(0)),
            Forward::Gather => AsgRhs::Gather(v(0), v(1)),
            Forward::Expr(expr, slots) => {
                let refs = slots
                    .iter()
                    .map(|slot| match slot {
                        Slot::Rhs(i) => v(*i),
                        Slot::Lhs => unreachable!("a forward formula reads operands only"),
                    })
                    .collect();
                return (
                    AsgRhs::Expr(expr.clone(), refs),
                    Some((Slot::Lhs, slots.clone())),
                );
            }
        };
        (rhs, None)
    }
}

/// Where an operation's result gets its precision (see [`super::precision`]).
pub(crate) enum ResultPrecision {
    /// Promoted from every operand's.
    Promoted,
    /// Promoted from these tensors' (by index).
    PromotedFrom(Vec<usize>),
    /// Its own: the operation converts into it (a cast, random bits).
    Converted(Precision),
    /// Its users': the operation converts into whatever they compute in, a float (OCANNL's
    /// `uniform1` under `top_down_prec`).
    ToUsers,
}

/// Builds the gradient assignments of one operation.
pub(crate) type Gradient = Box<dyn FnOnce(&mut GradBuilder<'_>) -> Result<(), TensorError>>;

/// What an operation is, besides its shape logic.
pub(crate) struct OpSpec {
    pub accum: Binop,
    pub rhs: Forward,
    pub gradient: Option<Gradient>,
    pub differentiable: bool,
    /// Where the result's precision comes from.
    pub precision: ResultPrecision,
    pub slice: Option<Symbol>,
}

impl OpSpec {
    pub fn new(accum: Binop, rhs: Forward) -> OpSpec {
        OpSpec {
            accum,
            rhs,
            gradient: None,
            differentiable: true,
            precision: ResultPrecision::Promoted,
            slice: None,
        }
    }

    pub fn gradient(
        mut self,
        gradient: impl FnOnce(&mut GradBuilder<'_>) -> Result<(), TensorError> + 'static,
    ) -> OpSpec {
        self.gradient = Some(Box::new(gradient));
        self
    }

    pub fn not_differentiable(mut self) -> OpSpec {
        self.differentiable = false;
        self
    }

    /// The result is converted into `precision`, whatever its operands hold.
    pub fn precision(mut self, precision: Precision) -> OpSpec {
        self.precision = ResultPrecision::Converted(precision);
        self
    }

    /// The result is converted into the float its users compute in (the widest, if several;
    /// the default precision where none is a float).
    pub fn precision_of_users(mut self) -> OpSpec {
        self.precision = ResultPrecision::ToUsers;
        self
    }

    /// The result's precision is promoted from these tensors' only.
    pub fn precision_from(mut self, tensors: &[&Tensor]) -> OpSpec {
        self.precision = ResultPrecision::PromotedFrom(tensors.iter().map(|t| t.index).collect());
        self
    }

    pub fn slice(mut self, slice: Symbol) -> OpSpec {
        self.slice = Some(slice);
        self
    }
}

/// `spec` parsed into the logic of `name`'s spec form, or an error naming the operation.
pub(crate) fn spec_logic(name: &str, spec: &str) -> Result<Logic, TensorError> {
    parse_einsum(spec)
        .map(Logic::Spec)
        .map_err(|e| error(format!("{name} {spec:?}: {e}")))
}
