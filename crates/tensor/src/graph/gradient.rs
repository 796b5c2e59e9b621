//! Gradient assignments: what a gradient function reads by slot, and how it accumulates into an
//! operand's gradient through the forward operation's record with the slots exchanged.

use rcannl_ir::{Binop, Expr, Slot, Ternop, Unop};

use super::Graph;
use super::apply::{Asg, AsgRhs, ProjSource, Ref};

/// A tensor as a gradient assignment names it: a reference and the slot of the forward
/// operation's record whose index map reads it (result-shaped tensors read through the result's
/// map, operand-shaped ones through that operand's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Slotted {
    pub what: Ref,
    pub slot: Slot,
}

/// The builder gradient functions receive: the forward operation's tensors by slot, and ways to
/// accumulate into an operand's gradient through the forward record.
pub(crate) struct GradBuilder<'a> {
    pub(super) graph: &'a Graph,
    pub(super) source: ProjSource,
    pub(super) result: usize,
    pub(super) operands: Vec<usize>,
    pub(super) backward: Vec<Asg>,
}

impl GradBuilder<'_> {
    /// The result's gradient (`g`), read through the result's map.
    pub fn g(&self) -> Slotted {
        Slotted {
            what: Ref::Grad(self.result),
            slot: Slot::Lhs,
        }
    }

    /// The result's value (`v`).
    pub fn v(&self) -> Slotted {
        Slotted {
            what: Ref::Value(self.result),
            slot: Slot::Lhs,
        }
    }

    /// Operand `i`'s value (`v1`, `v2`, … counting from 0).
    pub fn operand(&self, i: usize) -> Slotted {
        Slotted {
            what: Ref::Value(self.operands[i]),
            slot: Slot::Rhs(i),
        }
    }

    /// Whether operand `i` takes a gradient.
    pub fn wants(&self, i: usize) -> bool {
        self.graph.state.lock().tensors[self.operands[i]].differentiable
    }

    /// Scatters the result's gradient back into every operand's gradient through the forward
    /// record (a concatenation's gradient: each cell of the result came from one operand).
    pub fn scatter(&mut self) {
        let targets = self.operands.iter().map(|&t| Ref::Grad(t)).collect();
        self.backward.push(Asg {
            lhs: Ref::Grad(self.result),
            initialize_neutral: false,
            accum: Binop::Add,
            rhs: AsgRhs::RevSides(Unop::Identity, Ref::Grad(self.result), targets),
            projections: self.source.clone(),
        });
    }

    /// A gather's gradient: the result's gradient rows added into the rows of operand 0's
    /// gradient that the ids (operand 1, which takes none) select.
    pub fn scatter_rows(&mut self) {
        if !self.wants(0) {
            return;
        }
        self.backward.push(Asg {
            lhs: Ref::Grad(self.operands[0]),
            initialize_neutral: false,
            accum: Binop::Add,
            rhs: AsgRhs::ScatterAdd(Ref::Grad(self.result), Ref::Value(self.operands[1])),
            projections: self.source.clone(),
        });
    }

    /// `grad(operand i) ⟨accum⟩= rhs`, through the forward record with the slots exchanged.
    pub fn accumulate(&mut self, i: usize, accum: Binop, rhs: GradRhs) {
        if !self.wants(i) {
            return;
        }
        let (rhs, slots) = rhs.resolve();
        self.backward.push(Asg {
            lhs: Ref::Grad(self.operands[i]),
            initialize_neutral: false,
            accum,
            rhs,
            projections: ProjSource {
                view: Some((Slot::Rhs(i), slots)),
                ..self.source.clone()
            },
        });
    }
}

/// A gradient right-hand side: an operation over slotted tensors, or an expression over them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GradRhs {
    Unop(Unop, Slotted),
    Binop(Binop, Slotted, Slotted),
    Ternop(Ternop, Slotted, Slotted, Slotted),
    Expr(Expr, Vec<Slotted>),
}

impl GradRhs {
    fn args(&self) -> Vec<Slotted> {
        match self {
            GradRhs::Unop(_, a) => vec![*a],
            GradRhs::Binop(_, a, b) => vec![*a, *b],
            GradRhs::Ternop(_, a, b, c) => vec![*a, *b, *c],
            GradRhs::Expr(_, args) => args.clone(),
        }
    }

    fn resolve(&self) -> (AsgRhs, Vec<Slot>) {
        let slots = self.args().iter().map(|a| a.slot).collect();
        let rhs = match self {
            GradRhs::Unop(op, a) => AsgRhs::Unop(*op, a.what),
            GradRhs::Binop(op, a, b) => AsgRhs::Binop(*op, a.what, b.what),
            GradRhs::Ternop(op, a, b, c) => AsgRhs::Ternop(*op, a.what, b.what, c.what),
            GradRhs::Expr(expr, args) => {
                AsgRhs::Expr(expr.clone(), args.iter().map(|a| a.what).collect())
            }
        };
        (rhs, slots)
    }
}
