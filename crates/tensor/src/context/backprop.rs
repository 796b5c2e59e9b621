//! Backprop and training steps: gradients from `loss.grad = 1` in reverse order, the state
//! updates of the blocks the loss depends on, and the guard keeping every target when a step's loss
//! is not finite.

use std::collections::BTreeSet;

use rcannl_ir::{
    Assignment, AxisIndex, Binop, Expr, FetchOp, NodeId, Projections, Rhs, Symbol, TensorNode,
};

use crate::define::{LoweredUpdate, StepUpdates, Update};
use crate::graph::{Asg, TensorError, error};
use crate::tensor::Tensor;

use super::compile::reads_before_writes;
use super::{Context, Routine, grad_node, value_node};

/// What backprop compiles, and what it computes for updates compiled with it.
struct StepParts {
    /// The loss (a tensor index).
    loss: usize,
    assignments: Vec<Assignment>,
    /// The nodes the assignments leave in buffers.
    nodes: BTreeSet<NodeId>,
    /// The tensors whose gradients those nodes keep.
    kept: Vec<usize>,
    /// The operations whose forward the assignments compute.
    ops: BTreeSet<usize>,
    /// The tensors the loss depends on, itself included.
    tensors: BTreeSet<usize>,
    /// Those of them whose gradients the assignments compute.
    differentiable: BTreeSet<usize>,
}

impl Context {
    /// A routine computing `loss` and then the gradient of the sum of its cells with respect to
    /// every parameter it depends on (gradients start from zero on every run). The gradients of
    /// leaves (parameters, data) are kept for [`Context::grad`]; those of computed tensors are
    /// free to be fused away ([`Context::backprop_keeping`] keeps some).
    ///
    /// The routine also runs the state updates of the blocks the loss depends on
    /// ([`Graph::update_in_steps`](crate::Graph::update_in_steps): batch normalization's running statistics), unless a cell of
    /// the loss is not a finite number: then every tensor they update keeps what it held.
    pub fn backprop(&mut self, loss: &Tensor) -> Result<Routine, TensorError> {
        self.backprop_keeping(loss, &[])
    }

    /// [`Context::backprop`], also keeping the gradients of the computed tensors `keep`.
    pub fn backprop_keeping(
        &mut self,
        loss: &Tensor,
        keep: &[&Tensor],
    ) -> Result<Routine, TensorError> {
        let step = self.backprop_parts(loss, keep)?;
        self.compile_step("backprop", step, &[])
    }

    /// One routine for a whole training step: the loss and the gradients of every parameter
    /// (as [`Context::backprop`] computes and keeps them), then the state updates of the blocks
    /// the loss depends on ([`Graph::update_in_steps`](crate::Graph::update_in_steps)) and `updates` (as [`Context::update`]
    /// runs them), which read them. One run per step instead of two, and the optimizer's
    /// arithmetic compiled with the gradients'.
    ///
    /// A step whose loss has a cell that is not a finite number (NaN, ±∞) updates nothing:
    /// every tensor the updates write keeps what it held before the step (updates resetting
    /// their target first, `Update::reduce`, are scratch and not kept back), so training
    /// stopped on such a loss leaves the model as the last good step left it.
    pub fn train_step(
        &mut self,
        loss: &Tensor,
        updates: &[Update],
    ) -> Result<Routine, TensorError> {
        let step = self.backprop_parts(loss, &[])?;
        self.compile_step("train_step", step, updates)
    }

    /// Compiles `step`, then the state updates of the blocks its loss depends on, then
    /// `updates`, each guarded by the loss being finite.
    fn compile_step(
        &mut self,
        name: &str,
        step: StepParts,
        updates: &[Update],
    ) -> Result<Routine, TensorError> {
        let mut lowered: Vec<LoweredUpdate> =
            StepUpdates::anchored_in(&self.graph.state.lock(), &step.tensors);
        lowered.extend(self.lower_updates(updates)?);
        let mut assignments = step.assignments;
        let mut nodes = step.nodes;
        if !lowered.is_empty() {
            let (mut update_assignments, updated) = self.lowered_update_parts(
                &lowered,
                &step.ops,
                &step.differentiable,
                &step.tensors,
            )?;
            // What the step reads is what it reads unguarded: a fallback to what a target held
            // is no read of a value the step needs.
            let (needs, _) = reads_before_writes(assignments.iter().chain(&update_assignments));
            let (finite, ok) = self.finite_check(step.loss)?;
            for assignment in &mut update_assignments {
                guard_by(assignment, ok);
            }
            assignments.push(finite);
            assignments.extend(update_assignments);
            nodes.extend(updated);
            let routine = self.compile_reading(name, assignments, &nodes, Some(needs))?;
            self.grads_kept.extend(step.kept);
            return Ok(routine);
        }
        let routine = self.compile(name, assignments, &nodes)?;
        self.grads_kept.extend(step.kept);
        Ok(routine)
    }

    /// An assignment summing `loss`'s cells times zero into a one-cell node of this context:
    /// 0 when every cell is a finite number, NaN otherwise (no overflow either way), and that
    /// node.
    pub(super) fn finite_check(
        &mut self,
        loss: usize,
    ) -> Result<(Assignment, NodeId), TensorError> {
        let loss_node = self.nodes[&value_node(loss)].clone();
        let id = match self.finite_checks.get(&loss) {
            Some(id) => *id,
            None => {
                let node = TensorNode::new(
                    self.scratch(),
                    &format!("{} is finite", loss_node.label),
                    loss_node.precision,
                    &[1],
                );
                self.buffers
                    .insert(node.clone())
                    .map_err(|e| error(format!("'{}': {e}", loss_node.label)))?;
                self.nodes.insert(node.id, node.clone());
                self.finite_checks.insert(loss, node.id);
                node.id
            }
        };
        let dims = loss_node.dims.clone();
        let projections = Projections {
            product_space: dims
                .iter()
                .enumerate()
                .map(|(s, d)| rcannl_ir::Factor::single(Symbol(s as u32), *d))
                .collect(),
            lhs_padding: vec![(0, 0)],
            rhs_padding: vec![vec![(0, 0); dims.len()]],
            lhs_index: vec![AxisIndex::Fixed(0)],
            lhs_dims: vec![1],
            rhs_index: vec![
                (0..dims.len() as u32)
                    .map(|s| AxisIndex::Iterator(Symbol(s)))
                    .collect(),
            ],
            rhs_dims: vec![dims],
            label: "finite check".to_owned(),
        };
        let times_zero = Expr::Binop(
            Binop::Mul,
            Box::new(Expr::Operand(0)),
            Box::new(Expr::Const(0.0)),
        );
        Ok((
            Assignment::Accum {
                initialize_neutral: true,
                accum: Binop::Add,
                lhs: id,
                rhs: Rhs::Expr(times_zero, vec![loss_node.id]),
                projections,
            },
            id,
        ))
    }

    /// The assignments of backprop from `loss` (keeping the gradients of `keep` too), the nodes
    /// they leave in buffers, and the tensors whose gradients those are.
    fn backprop_parts(
        &mut self,
        loss: &Tensor,
        keep: &[&Tensor],
    ) -> Result<StepParts, TensorError> {
        self.graph.check_owns("backprop", &[loss])?;
        self.graph.check_owns("backprop", keep)?;
        self.concretize()?;
        for t in keep {
            self.check_tensor(t)?;
        }
        let (ops, tensors) = self.ancestry(&[loss.index]);
        let mut assignments = self.leaf_fetches(&tensors);
        let (forward, backward, differentiable): (Vec<Asg>, Vec<Asg>, Vec<usize>) = {
            let state = self.graph.state.lock();
            let forward = ops
                .iter()
                .flat_map(|&op| state.ops[op].forward.clone())
                .collect();
            let backward = ops
                .iter()
                .rev()
                .filter(|&&op| state.tensors[state.ops[op].result].differentiable)
                .flat_map(|&op| state.ops[op].backward.clone())
                .collect();
            let differentiable = tensors
                .iter()
                .copied()
                .filter(|&t| state.tensors[t].differentiable)
                .collect();
            (forward, backward, differentiable)
        };
        if !differentiable.contains(&loss.index) {
            return Err(error(format!(
                "backprop: '{}' does not depend on any parameter (or data tensor built with \
                 `requires_grad`)",
                loss.label()
            )));
        }
        for asg in &forward {
            assignments.push(self.assignment(asg)?);
        }
        for &t in &differentiable {
            let value = if t == loss.index { 1.0 } else { 0.0 };
            assignments.push(Assignment::Fetch {
                node: grad_node(t),
                op: FetchOp::Constant(value),
            });
        }
        for asg in &backward {
            assignments.push(self.assignment(asg)?);
        }
        let kept: Vec<usize> = {
            let state = self.graph.state.lock();
            differentiable
                .iter()
                .copied()
                .filter(|&t| state.tensors[t].leaf.is_some() || keep.iter().any(|k| k.index == t))
                .collect()
        };
        let mut nodes: BTreeSet<NodeId> = [value_node(loss.index)].into();
        nodes.extend(kept.iter().map(|&t| grad_node(t)));
        Ok(StepParts {
            loss: loss.index,
            assignments,
            nodes,
            kept,
            ops: ops.into_iter().collect(),
            tensors,
            differentiable: differentiable.into_iter().collect(),
        })
    }
}

/// `assignment`, an update, made to keep its target as it was unless the one-cell node `ok` (a
/// finite check) is 0: a set falls back to the target's cell, an accumulation to its
/// accumulator's neutral element. An update resetting its target first has no such fallback
/// and is left as it is.
pub(super) fn guard_by(assignment: &mut Assignment, ok: NodeId) {
    let Assignment::Accum {
        initialize_neutral,
        accum,
        lhs,
        rhs: Rhs::Expr(expr, operands),
        projections,
    } = assignment
    else {
        return;
    };
    let fallback = if *accum == Binop::Arg2 {
        operands.push(*lhs);
        projections.rhs_index.push(projections.lhs_index.clone());
        projections.rhs_dims.push(projections.lhs_dims.clone());
        projections
            .rhs_padding
            .push(projections.lhs_padding.clone());
        Expr::Operand(operands.len() - 1)
    } else if *initialize_neutral {
        return;
    } else {
        match accum.neutral() {
            Some(neutral) => Expr::Const(neutral),
            None => return,
        }
    };
    operands.push(ok);
    projections.rhs_index.push(vec![AxisIndex::Fixed(0)]);
    projections.rhs_dims.push(vec![1]);
    projections.rhs_padding.push(vec![(0, 0)]);
    let finite = Expr::Binop(
        Binop::Eq,
        Box::new(Expr::Operand(operands.len() - 1)),
        Box::new(Expr::Const(0.0)),
    );
    *expr = Expr::Ternop(
        rcannl_ir::Ternop::Where,
        Box::new(finite),
        Box::new(std::mem::replace(expr, Expr::Const(0.0))),
        Box::new(fallback),
    );
}
