//! The assignment-level API: formulas over tensors, for defining new differentiable operations
//! (a forward formula and one gradient formula per operand, over the operation's slots) and for
//! updates that routines run (optimizer steps over parameters, gradients and state).
//!
//! An operation's formulas are computed at every point of its product space, which its shape
//! logic (pointwise, composition, transposition or an einsum spec) and projection inference
//! give: the forward formula accumulates into the result, each gradient formula into its
//! operand's gradient, through the same record with the slots exchanged. Nested formulas are
//! computed in place. What several formulas read, or what must be accumulated before it is read
//! (a window's maximum before the mask of the positions reaching it), is an intermediate tensor
//! of the operation ([`Intermediate`]), computed over the same record. An update may be given
//! such a logic too ([`Update::with_logic`]), relating its target to the tensors it reads as an
//! operation's result is to its operands.

use std::collections::BTreeSet;
use std::ops;

use rcannl_ir::{Binop, Expr, Slot, Ternop, Unop};
use rcannl_shape::logic::Logic;
use rcannl_shape::spec::{Kind, parse_einsum};
use rcannl_shape::{OpId, TensorId};

use crate::graph::{
    Asg, AsgRhs, Forward, GradBuilder, GradRhs, Graph, OpSpec, ProjSource, Ref, Slotted, State,
    TensorData, TensorError, error,
};
use crate::tensor::Tensor;

/// What a formula reads.
#[derive(Debug, Clone)]
pub enum Term {
    /// The operation's result (`v`).
    Result,
    /// The gradient of the operation's result (`g`).
    ResultGrad,
    /// The operation's `i`-th operand.
    Input(usize),
    /// The operation's `i`-th intermediate ([`Intermediate`]).
    Intermediate(usize),
    /// A tensor's value (in updates).
    Value(Tensor),
    /// A tensor's gradient (in updates).
    Grad(Tensor),
}

/// An expression over terms.
#[derive(Debug, Clone)]
pub enum Formula {
    /// A value or gradient the formula reads (see [`Term`]).
    Term(Term),
    /// A constant, the same at every point.
    Const(f64),
    /// A unary operation of a formula.
    Unop(Unop, Box<Formula>),
    /// A binary operation of two formulas, the first as its left operand.
    Binop(Binop, Box<Formula>, Box<Formula>),
    /// A ternary operation of three formulas (e.g. `Ternop::Where`: condition, then, otherwise).
    Ternop(Ternop, Box<Formula>, Box<Formula>, Box<Formula>),
}

impl Formula {
    /// The operation's result `v` (only in gradient formulas).
    pub fn result() -> Formula {
        Formula::Term(Term::Result)
    }

    /// The gradient `g` of the operation's result (only in gradient formulas).
    pub fn result_grad() -> Formula {
        Formula::Term(Term::ResultGrad)
    }

    /// The operation's `i`-th operand (0-based), at the point's cell.
    pub fn input(i: usize) -> Formula {
        Formula::Term(Term::Input(i))
    }

    /// The operation's `i`-th intermediate (0-based, see [`Intermediate`]), at the point's cell of
    /// its slot.
    pub fn intermediate(i: usize) -> Formula {
        Formula::Term(Term::Intermediate(i))
    }

    /// The value of `t`, in an update.
    pub fn value(t: &Tensor) -> Formula {
        Formula::Term(Term::Value(t.clone()))
    }

    /// The gradient of `t`, in an update.
    pub fn grad(t: &Tensor) -> Formula {
        Formula::Term(Term::Grad(t.clone()))
    }

    /// `op` applied to this formula.
    pub fn apply(self, op: Unop) -> Formula {
        Formula::Unop(op, Box::new(self))
    }

    /// `op` of this formula (left) and `other` (right).
    pub fn binop(self, op: Binop, other: Formula) -> Formula {
        Formula::Binop(op, Box::new(self), Box::new(other))
    }

    /// `then` where `self` is nonzero, else `otherwise`.
    pub fn select(self, then: Formula, otherwise: Formula) -> Formula {
        Formula::Ternop(
            Ternop::Where,
            Box::new(self),
            Box::new(then),
            Box::new(otherwise),
        )
    }

    /// The tensors the formula reads (values or gradients).
    pub(crate) fn tensors(&self) -> Vec<&Tensor> {
        match self {
            Formula::Term(Term::Value(t) | Term::Grad(t)) => vec![t],
            Formula::Term(_) | Formula::Const(_) => Vec::new(),
            Formula::Unop(_, a) => a.tensors(),
            Formula::Binop(_, a, b) => [a.tensors(), b.tensors()].concat(),
            Formula::Ternop(_, a, b, c) => [a.tensors(), b.tensors(), c.tensors()].concat(),
        }
    }

    /// The expression, with its distinct terms in the order they first appear.
    fn lower(&self, terms: &mut Vec<TermKey>) -> Expr {
        match self {
            Formula::Term(term) => {
                let key = TermKey::of(term);
                let position = terms.iter().position(|k| *k == key).unwrap_or_else(|| {
                    terms.push(key);
                    terms.len() - 1
                });
                Expr::Operand(position)
            }
            Formula::Const(c) => Expr::Const(*c),
            Formula::Unop(op, a) => Expr::Unop(*op, Box::new(a.lower(terms))),
            Formula::Binop(op, a, b) => {
                Expr::Binop(*op, Box::new(a.lower(terms)), Box::new(b.lower(terms)))
            }
            Formula::Ternop(op, a, b, c) => Expr::Ternop(
                *op,
                Box::new(a.lower(terms)),
                Box::new(b.lower(terms)),
                Box::new(c.lower(terms)),
            ),
        }
    }
}

/// A term, comparable: tensors by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TermKey {
    Result,
    ResultGrad,
    Input(usize),
    Intermediate(usize),
    Value(usize),
    Grad(usize),
}

impl TermKey {
    fn of(term: &Term) -> TermKey {
        match term {
            Term::Result => TermKey::Result,
            Term::ResultGrad => TermKey::ResultGrad,
            Term::Input(i) => TermKey::Input(*i),
            Term::Intermediate(i) => TermKey::Intermediate(*i),
            Term::Value(t) => TermKey::Value(t.index),
            Term::Grad(t) => TermKey::Grad(t.index),
        }
    }
}

macro_rules! formula_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl ops::$trait<Formula> for Formula {
            type Output = Formula;
            fn $method(self, other: Formula) -> Formula {
                self.binop($op, other)
            }
        }

        impl ops::$trait<f64> for Formula {
            type Output = Formula;
            fn $method(self, other: f64) -> Formula {
                self.binop($op, Formula::Const(other))
            }
        }

        impl ops::$trait<Formula> for f64 {
            type Output = Formula;
            fn $method(self, other: Formula) -> Formula {
                Formula::Const(self).binop($op, other)
            }
        }
    };
}

formula_operator!(Add, add, Binop::Add);
formula_operator!(Sub, sub, Binop::Sub);
formula_operator!(Mul, mul, Binop::Mul);
formula_operator!(Div, div, Binop::Div);

impl ops::Neg for Formula {
    type Output = Formula;
    fn neg(self) -> Formula {
        self.apply(Unop::Neg)
    }
}

/// How an operation's shapes relate (and so where its formulas are computed).
#[derive(Debug, Clone)]
pub enum OpLogic {
    /// Every operand broadcast to the result.
    Pointwise,
    /// `a * b`: `a`'s input axes contract with `b`'s output axes.
    Compose,
    /// Input and output axes exchanged.
    Transpose,
    /// An einsum spec.
    Spec(String),
}

/// A user-defined operation: the accumulator and formula computing its result, and for each
/// operand a formula accumulated (added) into its gradient.
#[derive(Debug, Clone)]
pub struct Definition {
    /// How the result's shape relates to the operands' shapes, and so the product space the
    /// formulas are computed over.
    pub logic: OpLogic,
    /// The accumulator of the forward assignment (`Binop::Arg2` sets; `Binop::Add` sums over
    /// what the result leaves out; `Binop::Max` takes the largest).
    pub accum: Binop,
    /// The formula computed at every point of the product space and accumulated into the result
    /// with `accum`; it reads only the operands ([`Formula::input`]) and the intermediates of the
    /// forward pass ([`Graph::define_with`]).
    pub forward: Formula,
    /// `(operand, formula)`: the gradient of the result with respect to the operand, times `g`.
    pub gradients: Vec<(usize, Formula)>,
}

/// A tensor an operation computes besides its result, for its own formulas to read: what
/// several of them share (`eˣ`, read by the result and by the gradient), or what has to be
/// accumulated before it is read (each window's maximum spread over the window, before the mask
/// of the positions equal to it). OCANNL writes it `{ mask_rhs1 } =: …` in an operation's code.
///
/// It is computed at every point of the operation's product space, as the result is, and is
/// written and read through the index map of one slot of the operation's record. So it has the
/// shape of that slot's tensor (the result's, or an operand's), which shape inference gives
/// with nothing more to solve, and a buffer of the same layout and margins that the map
/// addresses. It takes no gradient, and nothing but the operation's formulas reads it.
#[derive(Debug, Clone)]
pub struct Intermediate {
    /// Its name; the tensor is labelled `name#n`, `n` its number.
    pub name: String,
    /// The slot whose map indexes it: [`Slot::Lhs`], the result's; [`Slot::Rhs`]`(i)`, operand
    /// `i`'s.
    pub slot: Slot,
    /// Its accumulator, from the neutral element: `Binop::Arg2` sets; `Binop::Max` keeps the
    /// largest of the points the slot's map sends to one cell.
    pub accum: Binop,
    /// What is computed at every point and accumulated into it.
    pub formula: Formula,
    /// Whether it is computed in the backward pass, before the gradients, rather than in the
    /// forward pass, before the result. A forward one is computed wherever the result is; a
    /// backward one only where gradients are, and it may read the result and its gradient.
    pub backward: bool,
}

impl Graph {
    /// Applies a user-defined operation to `operands` ([`Graph::define_with`], computing no
    /// intermediate).
    pub fn define(&self, name: &str, operands: &[&Tensor], definition: Definition) -> Tensor {
        self.define_with(name, operands, definition, Vec::new())
    }

    /// Applies a user-defined operation computing `intermediates` besides its result
    /// ([`Formula::intermediate`]`(i)` reads the `i`-th). Every assignment runs over the
    /// operation's one projections record, each tensor through its slot's map, in this order:
    /// the forward pass's intermediates, then the result; in the backward pass, the backward
    /// pass's intermediates, then the gradients.
    ///
    /// A formula reads only what is computed before it. The forward formula and the forward
    /// pass's intermediates read the operands and the forward intermediates before them; the
    /// backward pass's intermediates and the gradient formulas also read the result, its
    /// gradient and the backward intermediates before them. The forward formula or an
    /// intermediate reading anything else fails the operation; a gradient formula that does is
    /// left out, its error recorded in the graph.
    pub fn define_with(
        &self,
        name: &str,
        operands: &[&Tensor],
        definition: Definition,
        intermediates: Vec<Intermediate>,
    ) -> Tensor {
        let Some(first) = operands.first() else {
            return self.failed(error(format!("operation '{name}' has no operands")));
        };
        let logic = match &definition.logic {
            OpLogic::Pointwise => match operands.len() {
                n @ 1..=3 => Logic::Pointwise(n),
                n => {
                    return self.failed(error(format!(
                        "operation '{name}': pointwise operations take 1 to 3 operands, not {n}"
                    )));
                }
            },
            OpLogic::Compose => Logic::Compose,
            OpLogic::Transpose => Logic::Transpose,
            OpLogic::Spec(spec) => match parse_einsum(spec) {
                Ok(parsed) => Logic::Spec(parsed),
                Err(e) => return self.failed(error(format!("operation '{name}': {e}"))),
            },
        };
        let graph = &first.graph;
        let (statements, wrong_gradients) =
            match Statements::of(&definition, &intermediates, operands.len()) {
                Ok(checked) => checked,
                Err(e) => return self.failed(error(format!("operation '{name}': {e}"))),
            };
        for e in wrong_gradients {
            graph.record(error(format!("operation '{name}': {e}")));
        }
        // The result, related to the operands by the logic. The assignment `apply` makes only
        // carries the record that the statements are seen through, and they replace it.
        let placeholder = Forward::Expr(Expr::Const(0.0), Vec::new());
        let result = graph.apply(
            name,
            logic,
            operands,
            OpSpec::new(definition.accum, placeholder),
        );
        let mut state = graph.state.lock();
        let Some(op) = state.tensors[result.index].op else {
            // A failed operation, its error recorded.
            return result;
        };
        let made = state.tensors[result.index].clone();
        let mut computed = Vec::new();
        for intermediate in &intermediates {
            let like = match intermediate.slot {
                Slot::Lhs => result.index,
                Slot::Rhs(i) => operands[i].index,
            };
            let index = state.tensors.len();
            let shape = state.tensors[like].shape;
            state.tensors.push(TensorData {
                label: format!("{}#{index}", intermediate.name),
                shape,
                differentiable: false,
                ..made.clone()
            });
            computed.push(Slotted {
                what: Ref::Value(index),
                slot: intermediate.slot,
            });
        }
        let application = Application {
            record: state.ops[op].forward[0].projections.op,
            result: result.index,
            operands: operands.iter().map(|t| t.index).collect(),
            intermediates: computed,
        };
        let forward = statements
            .forward
            .iter()
            .map(|s| application.asg(s))
            .collect();
        // No backward pass for a result taking no gradient, nor a gradient for an operand
        // taking none.
        let backward = statements
            .backward
            .iter()
            .filter(|s| {
                made.differentiable
                    && match s.target {
                        Role::OperandGrad(i) => state.tensors[operands[i].index].differentiable,
                        _ => true,
                    }
            })
            .map(|s| application.asg(s))
            .collect();
        state.ops[op].forward = forward;
        state.ops[op].backward = backward;
        drop(state);
        result
    }
}

/// A tensor of a defined operation's application, by the part it plays.
#[derive(Clone, Copy)]
enum Role {
    Result,
    ResultGrad,
    Operand(usize),
    OperandGrad(usize),
    Intermediate(usize),
}

/// One assignment of a defined operation, over the roles of its tensors.
struct Statement {
    target: Role,
    initialize_neutral: bool,
    accum: Binop,
    expr: Expr,
    reads: Vec<Role>,
}

/// A definition's assignments, checked, in the order each pass runs them.
struct Statements {
    forward: Vec<Statement>,
    backward: Vec<Statement>,
}

impl Statements {
    /// The assignments of `definition` and `intermediates` over `arity` operands, and what is
    /// wrong with the gradient formulas left out of them; an error where the forward formula or
    /// an intermediate reads what it cannot.
    fn of(
        definition: &Definition,
        intermediates: &[Intermediate],
        arity: usize,
    ) -> Result<(Statements, Vec<String>), String> {
        let reads = Reads {
            intermediates,
            arity,
        };
        let mut statements = Statements {
            forward: Vec::new(),
            backward: Vec::new(),
        };
        for (j, intermediate) in intermediates.iter().enumerate() {
            if let Slot::Rhs(i) = intermediate.slot
                && i >= arity
            {
                return Err(format!(
                    "intermediate '{}' has the slot of operand {i}, of {arity}",
                    intermediate.name
                ));
            }
            let what = format!("intermediate '{}'", intermediate.name);
            let statement = reads.statement(
                &what,
                Role::Intermediate(j),
                intermediate.accum,
                &intermediate.formula,
                intermediate.backward,
                j,
            )?;
            match intermediate.backward {
                false => statements.forward.push(statement),
                true => statements.backward.push(statement),
            }
        }
        let all = intermediates.len();
        statements.forward.push(reads.statement(
            "the forward formula",
            Role::Result,
            definition.accum,
            &definition.forward,
            false,
            all,
        )?);
        let mut wrong = Vec::new();
        for (i, formula) in &definition.gradients {
            if *i >= arity {
                wrong.push(format!("a gradient formula for operand {i} of {arity}"));
                continue;
            }
            let what = format!("the gradient formula of operand {i}");
            match reads.statement(&what, Role::OperandGrad(*i), Binop::Add, formula, true, all) {
                Ok(statement) => statements.backward.push(statement),
                Err(e) => wrong.push(e),
            }
        }
        Ok((statements, wrong))
    }
}

/// What the formulas of a definition over `arity` operands with `intermediates` may read.
struct Reads<'a> {
    intermediates: &'a [Intermediate],
    arity: usize,
}

impl Reads<'_> {
    /// `target ⟨accum⟩= formula` in the backward pass or the forward one, after the intermediates
    /// `0..before`: a target other than an operand's gradient starts from the accumulator's
    /// neutral element. Named `what` in the error of a term it cannot read.
    fn statement(
        &self,
        what: &str,
        target: Role,
        accum: Binop,
        formula: &Formula,
        backward: bool,
        before: usize,
    ) -> Result<Statement, String> {
        let mut terms = Vec::new();
        let expr = formula.lower(&mut terms);
        let reads = terms
            .iter()
            .map(|term| {
                self.role(term, backward, before).ok_or_else(|| {
                    format!(
                        "{what} can only read {}, not {term:?}",
                        if backward {
                            "the operands, the result, its gradient and the intermediates \
                             before it"
                        } else {
                            "the operands and the forward pass's intermediates before it"
                        }
                    )
                })
            })
            .collect::<Result<Vec<Role>, String>>()?;
        Ok(Statement {
            target,
            initialize_neutral: !matches!(target, Role::OperandGrad(_)),
            accum,
            expr,
            reads,
        })
    }

    /// The role a term read in the pass `backward` (or not), after the intermediates
    /// `0..before`, names, if it may read it: the operands always; the forward pass's
    /// intermediates before it; in the backward pass the result, its gradient and the backward
    /// intermediates before it too, everything of the forward pass being computed by then.
    fn role(&self, term: &TermKey, backward: bool, before: usize) -> Option<Role> {
        match *term {
            TermKey::Input(i) if i < self.arity => Some(Role::Operand(i)),
            TermKey::Intermediate(j)
                if j < before && (backward || !self.intermediates[j].backward) =>
            {
                Some(Role::Intermediate(j))
            }
            TermKey::Result if backward => Some(Role::Result),
            TermKey::ResultGrad if backward => Some(Role::ResultGrad),
            _ => None,
        }
    }
}

/// One application of a defined operation: its projections record, and its tensors with the
/// slot of the record whose map indexes each.
struct Application {
    record: OpId,
    result: usize,
    operands: Vec<usize>,
    intermediates: Vec<Slotted>,
}

impl Application {
    fn slotted(&self, role: Role) -> Slotted {
        let (what, slot) = match role {
            Role::Result => (Ref::Value(self.result), Slot::Lhs),
            Role::ResultGrad => (Ref::Grad(self.result), Slot::Lhs),
            Role::Operand(i) => (Ref::Value(self.operands[i]), Slot::Rhs(i)),
            Role::OperandGrad(i) => (Ref::Grad(self.operands[i]), Slot::Rhs(i)),
            Role::Intermediate(j) => return self.intermediates[j],
        };
        Slotted { what, slot }
    }

    /// The statement over the record, seen with its target's slot written and its reads' slots
    /// read: a gradient's view of it is the forward assignment's with the slots exchanged.
    fn asg(&self, statement: &Statement) -> Asg {
        let target = self.slotted(statement.target);
        let reads: Vec<Slotted> = statement.reads.iter().map(|&r| self.slotted(r)).collect();
        Asg {
            lhs: target.what,
            initialize_neutral: statement.initialize_neutral,
            accum: statement.accum,
            rhs: AsgRhs::Expr(
                statement.expr.clone(),
                reads.iter().map(|r| r.what).collect(),
            ),
            projections: ProjSource {
                op: self.record,
                view: Some((target.slot, reads.iter().map(|r| r.slot).collect())),
                slice: None,
            },
        }
    }
}

/// `grad(operand i) += formula`, computed at every point of the forward operation's product
/// space (of `arity` operands), as a gradient formula reads it: `g`, `v` and the operands
/// through their own maps.
pub(crate) fn accumulate_formula(
    grad: &mut GradBuilder<'_>,
    i: usize,
    arity: usize,
    formula: &Formula,
) -> Result<(), TensorError> {
    let mut terms = Vec::new();
    let expr = formula.lower(&mut terms);
    let args = terms
        .iter()
        .map(|term| match term {
            TermKey::Result => Ok(grad.v()),
            TermKey::ResultGrad => Ok(grad.g()),
            TermKey::Input(j) if *j < arity => Ok(grad.operand(*j)),
            other => Err(error(format!(
                "a gradient formula reads {other:?}, which is not a slot of the operation"
            ))),
        })
        .collect::<Result<Vec<Slotted>, TensorError>>()?;
    grad.accumulate(i, Binop::Add, GradRhs::Expr(expr, args));
    Ok(())
}

/// One update a routine runs: `target ⟨accum⟩= formula`, computed at every cell of the update's
/// space.
///
/// Without a logic, the space is the dims that the target and every tensor the formula reads
/// share, each being of those dims or of one cell (broadcast), and the update adds nothing to
/// shape inference. A target of one cell over a larger space is a reduction: every cell of the
/// formula accumulates into it, which needs a reducing accumulator (`Binop::Add`, `Binop::Mul`,
/// `Binop::Max`, `Binop::Min`). So a routine can compute a global gradient norm and then scale
/// every gradient by it.
///
/// With a logic ([`Update::with_logic`], OCANNL's `c =:+ a * b ~logic:"@"`), the update is
/// related to the tensors it reads as an operation is to its operands: shape inference relates
/// their shapes, and the update's space is the product space of that relation, which may
/// broadcast, contract and reduce as the operation would. `cd!` relates an assignment written
/// without `~logic` pointwise ([`Update::with_default_logic`]).
#[derive(Debug, Clone)]
pub struct Update {
    /// The tensor the update writes (its value).
    pub target: Tensor,
    /// `Binop::Arg2` sets; `Binop::Add`/`Binop::Sub` add or subtract; `Binop::Max` keeps the
    /// largest, and so on.
    pub accum: Binop,
    /// Whether the target is reset to the accumulator's neutral element first (`=:+` in the
    /// notation of assignments): a reduction from scratch rather than into what the target held.
    pub initialize_neutral: bool,
    /// What is computed at every cell of the update's space and accumulated into the target with
    /// `accum`.
    pub formula: Formula,
    /// The shape relation [`Update::with_logic`] made, if any.
    relation: Option<Relation>,
}

/// An update over tensor references (by index), holding no tensor handle: what the graph keeps
/// of the updates it runs in every training step ([`Graph::update_in_steps`]).
#[derive(Debug, Clone)]
pub(crate) struct LoweredUpdate {
    pub target: usize,
    /// Whether it writes the target's gradient rather than its value (a seed of backprop,
    /// [`Piece::Seed`](crate::compose::Piece::Seed)).
    pub grad: bool,
    pub accum: Binop,
    pub initialize_neutral: bool,
    pub expr: Expr,
    pub refs: Vec<Ref>,
    /// The relation it runs over, if it was given a logic.
    pub relation: Option<Related>,
}

/// The relation an update runs over: an operation of the inference session.
#[derive(Debug, Clone)]
pub(crate) struct Related {
    /// The operation, whose projections the update runs over.
    pub op: OpId,
    /// The positions, among the tensors the formula reads, of those left out of the operation
    /// (read at their one cell everywhere: [`Update::with_default_logic`]), in increasing order.
    pub one_cell: Vec<usize>,
}

/// The updates every training step runs whose loss depends on an anchor tensor (by index), kept
/// with the graph's state ([`Graph::update_in_steps`]): a model's state following the data the
/// step computed.
#[derive(Debug, Default)]
pub(crate) struct StepUpdates(Vec<(usize, Vec<LoweredUpdate>)>);

impl StepUpdates {
    /// The updates of the graph whose state is `state` anchored at one of `tensors`, in the
    /// order they were given.
    pub(crate) fn anchored_in(state: &State, tensors: &BTreeSet<usize>) -> Vec<LoweredUpdate> {
        state
            .extensions
            .get::<StepUpdates>()
            .into_iter()
            .flat_map(|steps| &steps.0)
            .filter(|(anchor, _)| tensors.contains(anchor))
            .flat_map(|(_, updates)| updates.iter().cloned())
            .collect()
    }
}

impl Graph {
    /// Runs `updates` in every training step whose loss depends on `anchor` — in the routine of
    /// [`Context::backprop`](crate::Context::backprop) or
    /// [`Context::train_step`](crate::Context::train_step) that computes it, after the
    /// gradients — and in no other routine. This is how a block keeps state that follows the
    /// data (batch normalization's running statistics): it is updated exactly by the batches a
    /// step normalized, with nothing for the user to hand to the optimizer, and never from an
    /// application a step does not compute. The targets become the model's state
    /// ([`Graph::state_tensors`]), which checkpoints save with the parameters.
    ///
    /// A problem with an update (a tensor of another graph, a formula reading no tensor) is
    /// recorded in the graph, as a failed operation's is, and reported by [`Graph::check`].
    pub fn update_in_steps(&self, anchor: &Tensor, updates: &[Update]) {
        let mut tensors = vec![anchor];
        for update in updates {
            tensors.push(&update.target);
            tensors.extend(update.formula.tensors());
        }
        if let Err(e) = self.check_owns("update_in_steps", &tensors) {
            self.record(e);
            return;
        }
        let lowered: Result<Vec<_>, TensorError> =
            updates.iter().map(Update::lower_update).collect();
        match lowered {
            Ok(lowered) => {
                for update in &lowered {
                    self.register_state_index(update.target);
                }
                self.state
                    .lock()
                    .extensions
                    .get_mut::<StepUpdates>()
                    .0
                    .push((anchor.index, lowered));
            }
            Err(e) => self.record(e),
        }
    }
}

/// Whether the shape of the tensor of index `t`, as inference knows it now, is one cell: closed
/// rows whose axes all have size 1.
fn one_cell(state: &State, t: usize) -> bool {
    let shape = state.inference.shape(state.tensors[t].shape);
    Kind::ALL.iter().all(|&kind| {
        let row = shape.row(kind);
        row.var.is_none() && row.dims().all(|d| d.ground_size() == Some(1))
    })
}

/// An update's shape relation.
#[derive(Debug, Clone)]
enum Relation {
    /// An operation of the inference session relating the target (its result) to `refs` (its
    /// operands, in the order the formula reads them; but for those at the positions
    /// `related.one_cell`), whose projections the update runs over.
    Related {
        related: Related,
        target: usize,
        refs: Vec<Ref>,
    },
    /// The relation could not be made; the graph records the error too.
    Failed(TensorError),
}

impl Update {
    /// `target := formula`.
    pub fn set(target: &Tensor, formula: Formula) -> Update {
        Update::accumulate(target, Binop::Arg2, formula)
    }

    /// `target −= formula`.
    pub fn subtract(target: &Tensor, formula: Formula) -> Update {
        Update::accumulate(target, Binop::Sub, formula)
    }

    /// `target += formula`.
    pub fn add(target: &Tensor, formula: Formula) -> Update {
        Update::accumulate(target, Binop::Add, formula)
    }

    /// `target ⟨accum⟩= formula`, into what the target holds.
    pub fn accumulate(target: &Tensor, accum: Binop, formula: Formula) -> Update {
        Update {
            target: target.clone(),
            accum,
            initialize_neutral: accum == Binop::Arg2,
            formula,
            relation: None,
        }
    }

    /// `target =:⟨accum⟩ formula`: the target reset to `accum`'s neutral element, then every
    /// cell of the formula accumulated into it. With a target of one cell, `Update::reduce(&n,
    /// Binop::Add, g * g)` is the sum of squares of `g`.
    pub fn reduce(target: &Tensor, accum: Binop, formula: Formula) -> Update {
        Update {
            target: target.clone(),
            accum,
            initialize_neutral: true,
            formula,
            relation: None,
        }
    }

    /// This update related to the tensors its formula reads by `logic`, as an operation is to
    /// its operands: the target is the result, and the operands are the distinct tensors the
    /// formula reads, in the order it first reads them (a tensor's value and its gradient are
    /// two operands, each of the tensor's shape). The update then runs over the relation's
    /// product space, as that operation would:
    ///
    /// - [`OpLogic::Pointwise`]: every operand broadcasts to the target (OCANNL's `"."`), however
    ///   many the formula reads. A formula reading no tensor stays a plain update.
    /// - [`OpLogic::Compose`]: two operands `a`, `b` (`"@"`): `a`'s input axes contract with
    ///   `b`'s output axes; the target has `a`'s output axes and `b`'s input axes. Under
    ///   `Binop::Add` the update is a matrix product.
    /// - [`OpLogic::Transpose`]: one operand (`"T"`), its input and output axes exchanged.
    /// - [`OpLogic::Spec`]: an einsum spec of one slot per operand (`"ij;jk=>ik"`); the
    ///   labels the target lacks are reduced over.
    ///
    /// The relation is made now, while the graph is built, not when a routine is compiled: a
    /// target declared with no shape (an intermediate, `graph.data("delta").build()`) takes its
    /// shape from it, and the shapes of the tensors read may be inferred from the target's. An
    /// update reducing over axes its target lacks needs a reducing accumulator (add, multiply,
    /// max or min): [`Update::set`] under a reducing logic is refused. A relation that cannot be
    /// made (the wrong number of operands for the logic, shapes that clash) is an error, named
    /// after the update's target, that the graph records as it records a failed operation's:
    /// the routine compiling the update returns it.
    ///
    /// `c =:+ a * b ~logic:"@"`, with `c`'s shape inferred:
    ///
    /// ```
    /// use rcannl_backends::Interpreter;
    /// use rcannl_ir::Binop;
    /// use rcannl_tensor::{Context, Formula, Graph, OpLogic, Update};
    ///
    /// let graph = Graph::new();
    /// let a = graph.data("a").shape("|3->2").values(vec![1., 2., 3., 4., 5., 6.]).build();
    /// let b = graph.data("b").shape("3").values(vec![1., 0., -1.]).build();
    /// let c = graph.data("c").build();
    /// let product = Update::reduce(&c, Binop::Add, Formula::value(&a) * Formula::value(&b))
    ///     .with_logic(OpLogic::Compose);
    /// let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    /// let routine = ctx.update(&[product])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.dims(&c)?, vec![2]);
    /// assert_eq!(ctx.values(&c)?, vec![-2., -2.]);
    /// # Ok::<(), rcannl_tensor::TensorError>(())
    /// ```
    pub fn with_logic(mut self, logic: OpLogic) -> Update {
        self.relation = self.relate(&logic, false);
        self.record_writes();
        self
    }

    /// The logic of an assignment written without one, as `cd!` reads `target =… formula`
    /// (the design's default, OCANNL's `"."`): [`OpLogic::Pointwise`], so that the update takes
    /// part in shape inference as a pointwise operation does — a target declared with no shape
    /// takes the broadcast shape of what it reads, and every tensor it reads broadcasts to it.
    ///
    /// Tensors of one cell are the exception, read or written. A tensor is of one cell when its
    /// shape, as far as it is known when the update is made, has closed rows of axes of size 1
    /// (`"1"`, or no axes): its one cell is what [`Update`] broadcasts and reduces into, while a
    /// pointwise relation would refuse its declared axis of size 1 beside larger ones.
    /// - A tensor of one cell read is left out of the relation and read at its one cell
    ///   everywhere: `w =- lr * w.grad` with a learning rate of shape `"1"`.
    /// - A target of one cell makes the update a plain one: every cell it reads accumulates
    ///   into that cell, so `norm =:+ w.grad * w.grad` is a sum of squares.
    ///
    /// ```
    /// use rcannl_backends::Interpreter;
    /// use rcannl_tensor::{Context, Formula, Graph, Update};
    ///
    /// let graph = Graph::new();
    /// let g = graph.data("g").shape("2, 3").values(vec![1., 2., 3., 4., 5., 6.]).build();
    /// let bias = graph.data("bias").shape("3").values(vec![10., 20., 30.]).build();
    /// // Optimizer state declared with no shape takes the shape of the update's operands.
    /// let m = graph.data("m").build();
    /// let update =
    ///     Update::set(&m, Formula::value(&g) + Formula::value(&bias)).with_default_logic();
    /// let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    /// let routine = ctx.update(&[update])?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.dims(&m)?, vec![2, 3]);
    /// assert_eq!(ctx.values(&m)?, vec![11., 22., 33., 14., 25., 36.]);
    /// # Ok::<(), rcannl_tensor::TensorError>(())
    /// ```
    pub fn with_default_logic(mut self) -> Update {
        self.record_writes();
        if one_cell(&self.target.graph.state.lock(), self.target.index) {
            return self;
        }
        self.relation = self.relate(&OpLogic::Pointwise, true);
        self
    }

    /// Records the tensors the formula reads as what the target is written from: a data
    /// tensor given no precision that nothing is computed from takes theirs (see
    /// `TensorData::written_from`), as an optimizer's state declared with none follows its
    /// parameter.
    fn record_writes(&self) {
        let graph = &self.target.graph;
        let read = self.formula.tensors();
        // A tensor of another graph is refused with the relation, naming it.
        if !read.iter().all(|t| graph.owns(t)) || !graph.owns(&self.target) {
            return;
        }
        let target = self.target.index;
        let mut state = graph.state.lock();
        let written = &mut state.tensors[target].written_from;
        for t in read {
            if t.index != target && !written.contains(&t.index) {
                written.push(t.index);
            }
        }
    }

    /// The relation of [`Update::with_logic`], leaving out the tensors of one cell it reads
    /// where `by_default` ([`Update::with_default_logic`]): `None` for a pointwise formula
    /// reading no tensor (none but tensors of one cell, `by_default`).
    fn relate(&self, logic: &OpLogic, by_default: bool) -> Option<Relation> {
        let graph = &self.target.graph;
        let name = self.target.label();
        let context = format!("update of '{name}'");
        let failed = |e: TensorError| {
            let e = graph.state.lock().locate(e);
            graph.record(e.clone());
            Some(Relation::Failed(e))
        };
        let mut tensors = vec![&self.target];
        tensors.extend(self.formula.tensors());
        if let Err(e) = graph.check_owns(&context, &tensors) {
            return failed(e);
        }
        let refs = match self.lowered() {
            Ok((_, refs)) => refs,
            Err(e) => return failed(e),
        };
        let state = graph.state.lock();
        let one_cell: Vec<usize> = match by_default {
            true => (0..refs.len())
                .filter(|&i| one_cell(&state, refs[i].tensor()))
                .collect(),
            false => Vec::new(),
        };
        let related: Vec<Ref> = (0..refs.len())
            .filter(|i| !one_cell.contains(i))
            .map(|i| refs[i])
            .collect();
        let n = related.len();
        let read: Vec<String> = related
            .iter()
            .map(|r| match r {
                Ref::Value(t) => format!("'{}'", state.tensors[*t].label),
                Ref::Grad(t) => format!("the gradient of '{}'", state.tensors[*t].label),
            })
            .collect();
        drop(state);
        let arity = |logic: &str, wanted: usize| {
            error(format!(
                "{context}: {logic} relates the target to {wanted} tensor{}, but the formula \
                 reads {n}{}{}",
                if wanted == 1 { "" } else { "s" },
                if n == 0 { "" } else { ": " },
                read.join(", ")
            ))
        };
        let logic = match logic {
            OpLogic::Pointwise => match n {
                0 => return None,
                n => Logic::Pointwise(n),
            },
            OpLogic::Compose if n != 2 => return failed(arity("composition", 2)),
            OpLogic::Compose => Logic::Compose,
            OpLogic::Transpose if n != 1 => return failed(arity("transposition", 1)),
            OpLogic::Transpose => Logic::Transpose,
            OpLogic::Spec(spec) => match parse_einsum(spec) {
                Ok(parsed) if parsed.arity() != n => {
                    return failed(arity(&format!("the spec \"{spec}\""), parsed.arity()));
                }
                Ok(parsed) => Logic::Spec(parsed),
                Err(e) => return failed(error(format!("{context}: spec \"{spec}\": {e}"))),
            },
        };
        let mut state = graph.state.lock();
        let target = self.target.index;
        let inherited = std::iter::once(target)
            .chain(refs.iter().map(|r| r.tensor()))
            .find_map(|t| state.tensors[t].failed.clone());
        if let Some(e) = inherited {
            // Already recorded, where it happened.
            return Some(Relation::Failed(e));
        }
        let shapes: Vec<TensorId> = related
            .iter()
            .map(|r| state.tensors[r.tensor()].shape)
            .collect();
        let target_shape = state.tensors[target].shape;
        match state.inference.relate(logic, target_shape, &shapes) {
            Ok(op) => Some(Relation::Related {
                related: Related { op, one_cell },
                target,
                refs,
            }),
            Err(e) => {
                let e = state.locate(error(format!("{context}: {e}")));
                state.errors.push(e.clone());
                state.tensors[target].failed = Some(e.clone());
                Some(Relation::Failed(e))
            }
        }
    }

    /// The error of a relation that could not be made, if any.
    pub(crate) fn failed_relation(&self) -> Option<TensorError> {
        match &self.relation {
            Some(Relation::Failed(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// The inference operation whose projections the update runs over (`None` for an update
    /// without a logic), given the references its formula reads now.
    pub(crate) fn relation(&self, refs: &[Ref]) -> Result<Option<Related>, TensorError> {
        match &self.relation {
            None => Ok(None),
            Some(Relation::Failed(e)) => Err(e.clone()),
            // The fields are public: a target or formula changed since the relation was made
            // would not match its projections.
            Some(Relation::Related {
                related,
                target,
                refs: read,
            }) if *target == self.target.index && read == refs => Ok(Some(related.clone())),
            Some(Relation::Related { .. }) => Err(error(format!(
                "update of '{}': its target or formula changed after `with_logic` related \
                 them; call `with_logic` again",
                self.target.label()
            ))),
        }
    }

    /// The update over tensor references, as a routine runs it.
    pub(crate) fn lower_update(&self) -> Result<LoweredUpdate, TensorError> {
        let (expr, refs) = self.lowered()?;
        let relation = self.relation(&refs)?;
        Ok(LoweredUpdate {
            target: self.target.index,
            grad: false,
            accum: self.accum,
            initialize_neutral: self.initialize_neutral,
            expr,
            refs,
            relation,
        })
    }

    /// The formula's expression and the references it reads.
    pub(crate) fn lowered(&self) -> Result<(Expr, Vec<Ref>), TensorError> {
        let mut terms = Vec::new();
        let expr = self.formula.lower(&mut terms);
        let refs = terms
            .iter()
            .map(|term| match term {
                TermKey::Value(t) => Ok(Ref::Value(*t)),
                TermKey::Grad(t) => Ok(Ref::Grad(*t)),
                other => Err(error(format!(
                    "update of '{}': a formula of an update reads tensors, not {other:?}",
                    self.target.label()
                ))),
            })
            .collect::<Result<Vec<Ref>, TensorError>>()?;
        Ok((expr, refs))
    }
}
