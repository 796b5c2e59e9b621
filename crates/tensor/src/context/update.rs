//! Update routines (optimizer steps): updates lowered over the tensors they read, the forward of
//! the computed tensors among those and the fills of the constants, the projections of updates
//! without a logic, and the copy of a target an update reads as it was before it.

use std::collections::BTreeSet;

use rcannl_ir::{
    Assignment, AxisIndex, Binop, FetchOp, NodeId, Projections, Rhs, Symbol, TensorNode, Unop,
};
use rcannl_shape::OpId;

use crate::define::{LoweredUpdate, Related, Update};
use crate::graph::{Asg, Ref, TensorError, error};
use crate::tensor::Tensor;

use super::{Context, Routine, grad_node, node_of, value_node};

impl Context {
    /// A routine running `updates` in order (an optimizer step): each over the dims its target
    /// and the tensors it reads share (see [`Update`]), a one-cell target reducing over them, or
    /// over the projections of the logic it was given ([`Update::with_logic`]).
    ///
    /// A computed tensor an update reads is computed in the routine, before the updates, from
    /// the values the data and parameters hold then (as OCANNL's `%cd` embeds the forward code
    /// of the tensors an assignment reads), and a constant it reads is filled; a gradient it
    /// reads must be one a backprop keeps.
    ///
    /// An update reads its own target as it was before the update, as NumPy's `t[:] = t.T` and
    /// `x = a @ x` do: where it would read cells it has already written (through another index
    /// map, or reducing into a cell it reads) or reset (a neutral fill before accumulating), it
    /// reads a copy of the target taken just before it. An update reading only the cell each
    /// point writes (`w =- lr * w.grad`, `m =: beta * m + …`) reads the target itself.
    pub fn update(&mut self, updates: &[Update]) -> Result<Routine, TensorError> {
        let lowered = self.lower_updates(updates)?;
        let none = BTreeSet::new();
        let (assignments, keep) = self.lowered_update_parts(&lowered, &none, &none, &none)?;
        self.compile("update", assignments, &keep)
    }

    /// `updates` over tensor references, after checking that they belong to this context's
    /// graph, related by logics that could be made.
    pub(super) fn lower_updates(
        &mut self,
        updates: &[Update],
    ) -> Result<Vec<LoweredUpdate>, TensorError> {
        // An update's own failed relation comes before the graph's first error, which may be
        // another's.
        if let Some(e) = updates.iter().find_map(Update::failed_relation) {
            return Err(e);
        }
        self.concretize()?;
        let mut lowered = Vec::new();
        for update in updates {
            let context = format!("update of '{}'", update.target.label());
            self.graph.check_owns(&context, &[&update.target])?;
            self.graph.check_owns(&context, &update.formula.tensors())?;
            self.check_tensor(&update.target)?;
            lowered.push(update.lower_update()?);
        }
        Ok(lowered)
    }

    /// The assignments of `updates` in a routine that already computes the operations
    /// `computed_ops` and the gradients of `computed_grads`, and has filled the constant leaves
    /// among `filled`: first the fills of the other constant leaves they read and the forward of
    /// every other computed tensor they read, then the updates (each reading its target as it
    /// was before it, see [`Context::update`]); and the nodes they update.
    pub(super) fn lowered_update_parts(
        &mut self,
        updates: &[LoweredUpdate],
        computed_ops: &BTreeSet<usize>,
        computed_grads: &BTreeSet<usize>,
        filled: &BTreeSet<usize>,
    ) -> Result<(Vec<Assignment>, BTreeSet<NodeId>), TensorError> {
        let mut read_values = Vec::new();
        {
            let state = self.graph.state.lock();
            for update in updates {
                for r in &update.refs {
                    match *r {
                        Ref::Value(t) => {
                            let held = match state.tensors[t].op {
                                Some(op) => computed_ops.contains(&op),
                                None => filled.contains(&t),
                            };
                            if !held {
                                read_values.push(t);
                            }
                        }
                        Ref::Grad(t) => {
                            let available = state.tensors[t].leaf.is_some()
                                || computed_grads.contains(&t)
                                || self.grads_kept.contains(&t);
                            if !available {
                                return Err(error(format!(
                                    "update of '{}' reads the gradient of '{}', which no \
                                     backprop computes and keeps: compute the update in the \
                                     training step (train_step) or keep the gradient \
                                     (backprop_keeping)",
                                    state.tensors[update.target].label, state.tensors[t].label
                                )));
                            }
                        }
                    }
                }
            }
        }
        let mut assignments = Vec::new();
        if !read_values.is_empty() {
            let (ops, tensors) = self.ancestry(&read_values);
            let unfilled = tensors.difference(filled).copied().collect();
            assignments.extend(self.leaf_fetches(&unfilled));
            let forward: Vec<Asg> = {
                let state = self.graph.state.lock();
                ops.iter()
                    .filter(|op| !computed_ops.contains(op))
                    .flat_map(|&op| state.ops[op].forward.clone())
                    .collect()
            };
            for asg in &forward {
                assignments.push(self.assignment(asg)?);
            }
        }
        let mut keep = BTreeSet::new();
        for update in updates {
            let target = match update.grad {
                false => value_node(update.target),
                true => grad_node(update.target),
            };
            let projections = match update.relation {
                None => self.update_projections(update, target)?,
                Some(Related { op, ref one_cell }) => {
                    self.check_related_reduction(update, op)?;
                    self.with_one_cell_reads(op, one_cell, &update.refs)
                }
            };
            let assignment = Assignment::Accum {
                initialize_neutral: update.initialize_neutral,
                accum: update.accum,
                lhs: target,
                rhs: Rhs::Expr(
                    update.expr.clone(),
                    update.refs.iter().map(|r| node_of(*r)).collect(),
                ),
                projections,
            };
            assignments.extend(self.reading_prior_target(assignment)?);
            keep.insert(target);
        }
        Ok((assignments, keep))
    }

    /// `assignment`, an update of its target, reading the target as it was before the update
    /// wherever a read of it would not see those values ([`Projections::reads_prior_values`]:
    /// another cell than the one written, a cell written at several points, or a target reset
    /// first): such reads go to a copy of the target taken just before. An update reading only
    /// what each point's cell held is left as it is, with no copy.
    fn reading_prior_target(
        &mut self,
        assignment: Assignment,
    ) -> Result<Vec<Assignment>, TensorError> {
        let Assignment::Accum {
            initialize_neutral,
            accum,
            lhs,
            rhs: Rhs::Expr(expr, mut operands),
            projections,
        } = assignment
        else {
            return Ok(vec![assignment]);
        };
        let stale: Vec<usize> = (0..operands.len())
            .filter(|&i| {
                operands[i] == lhs && !projections.reads_prior_values(i, initialize_neutral)
            })
            .collect();
        let mut assignments = Vec::new();
        if !stale.is_empty() {
            let prior = self.prior_copy(lhs)?;
            let dims = &self.nodes[&lhs].dims;
            let every: Vec<AxisIndex> = (0..dims.len() as u32)
                .map(|s| AxisIndex::Iterator(Symbol(s)))
                .collect();
            // A copy, not an update: the finite guard of a training step, which rewrites the
            // formulas of updates, leaves it as it is.
            assignments.push(Assignment::Accum {
                initialize_neutral: true,
                accum: Binop::Arg2,
                lhs: prior,
                rhs: Rhs::Unop(Unop::Identity, lhs),
                projections: Projections {
                    product_space: dims
                        .iter()
                        .enumerate()
                        .map(|(s, d)| rcannl_ir::Factor::single(Symbol(s as u32), *d))
                        .collect(),
                    lhs_dims: dims.clone(),
                    rhs_dims: vec![dims.clone()],
                    lhs_index: every.clone(),
                    rhs_index: vec![every],
                    lhs_padding: vec![(0, 0); dims.len()],
                    rhs_padding: vec![vec![(0, 0); dims.len()]],
                    label: "copy".to_owned(),
                },
            });
            for i in stale {
                operands[i] = prior;
            }
        }
        assignments.push(Assignment::Accum {
            initialize_neutral,
            accum,
            lhs,
            rhs: Rhs::Expr(expr, operands),
            projections,
        });
        Ok(assignments)
    }

    /// The scratch node holding a copy of `target` for the updates reading it as it was (one per
    /// target, made the first time): its dims, margins and precision.
    fn prior_copy(&mut self, target: NodeId) -> Result<NodeId, TensorError> {
        if let Some(&id) = self.prior_copies.get(&target) {
            return Ok(id);
        }
        let of = self.nodes[&target].clone();
        let mut node = TensorNode::new(
            self.scratch(),
            &format!("{} before the update", of.label),
            of.precision,
            &of.dims,
        );
        node.padding = of.padding;
        self.buffers
            .insert(node.clone())
            .map_err(|e| error(format!("'{}': {e}", of.label)))?;
        self.prior_copies.insert(target, node.id);
        self.nodes.insert(node.id, node.clone());
        Ok(node.id)
    }

    /// The label of the graph's tensor `t`.
    fn label_of(&self, t: usize) -> String {
        self.graph.state.lock().tensors[t].label.clone()
    }

    /// Refuses an update related by a logic whose projections reduce (its target lacks axes of
    /// the product space) under an accumulator that cannot reduce.
    fn check_related_reduction(&self, update: &LoweredUpdate, op: OpId) -> Result<(), TensorError> {
        let p = &self.projections[&op];
        if p.reduction_symbols().is_empty()
            || (update.accum != Binop::Arg2 && update.accum.neutral().is_some())
        {
            return Ok(());
        }
        // Concatenated components run one after another: a factor spans their sum.
        let space: Vec<usize> = p
            .product_space
            .iter()
            .map(|f| f.components.iter().map(|(_, range)| range).sum())
            .collect();
        Err(error(format!(
            "update of '{}': each of its cells (dims {:?}) takes several cells of its space \
             (dims {space:?}, {}), which needs a reducing accumulator (add, multiply, max or \
             min), not {:?}",
            self.label_of(update.target),
            p.lhs_dims,
            p.label,
            update.accum
        )))
    }

    /// The projections of the operation `op`, over the tensors `refs` but those at the
    /// positions `one_cell` (increasing, often none), with those read at their one cell at every
    /// point.
    fn with_one_cell_reads(&self, op: OpId, one_cell: &[usize], refs: &[Ref]) -> Projections {
        let mut p = self.projections[&op].clone();
        for &i in one_cell {
            let dims = self.nodes[&node_of(refs[i])].dims.clone();
            p.rhs_index.insert(i, vec![AxisIndex::Fixed(0); dims.len()]);
            p.rhs_padding.insert(i, vec![(0, 0); dims.len()]);
            p.rhs_dims.insert(i, dims);
        }
        p
    }

    /// The projections of an update over the dims its target and operands share; a target of
    /// one cell reducing over more needs a reducing accumulator.
    fn update_projections(
        &self,
        update: &LoweredUpdate,
        target: NodeId,
    ) -> Result<Projections, TensorError> {
        let refs = &update.refs;
        let target_dims = self.nodes[&target].dims.clone();
        let operands: Vec<&TensorNode> = refs.iter().map(|r| &self.nodes[&node_of(*r)]).collect();
        let one_cell = |dims: &[usize]| dims.iter().product::<usize>() == 1;
        let mut space: Option<&[usize]> = (!one_cell(&target_dims)).then_some(&target_dims[..]);
        for operand in &operands {
            if one_cell(&operand.dims) {
                continue;
            }
            match space {
                None => space = Some(&operand.dims),
                Some(dims) if dims == operand.dims.as_slice() => {}
                Some(dims) => {
                    return Err(error(format!(
                        "update of '{}' runs over dims {dims:?} but reads '{}' of dims {:?}: \
                         every tensor it reads has its dims or one cell",
                        self.label_of(update.target),
                        operand.label,
                        operand.dims
                    )));
                }
            }
        }
        let dims = space.unwrap_or(&target_dims).to_vec();
        let every = |n: usize| {
            (0..n as u32)
                .map(|s| AxisIndex::Iterator(Symbol(s)))
                .collect()
        };
        let index_of = |of: &[usize]| {
            if of == dims.as_slice() {
                every(dims.len())
            } else {
                vec![AxisIndex::Fixed(0); of.len()]
            }
        };
        let reduces = target_dims != dims;
        if reduces && (update.accum == Binop::Arg2 || update.accum.neutral().is_none()) {
            return Err(error(format!(
                "update of '{}': its one cell takes every cell of {dims:?}, which needs a \
                 reducing accumulator (add, multiply, max or min), not {:?}",
                self.label_of(update.target),
                update.accum
            )));
        }
        Ok(Projections {
            product_space: dims
                .iter()
                .enumerate()
                .map(|(s, d)| rcannl_ir::Factor::single(Symbol(s as u32), *d))
                .collect(),
            lhs_padding: vec![(0, 0); target_dims.len()],
            rhs_padding: operands
                .iter()
                .map(|o| vec![(0, 0); o.dims.len()])
                .collect(),
            lhs_index: index_of(&target_dims),
            lhs_dims: target_dims.clone(),
            rhs_index: operands.iter().map(|o| index_of(&o.dims)).collect(),
            rhs_dims: operands.iter().map(|o| o.dims.clone()).collect(),
            label: "update".to_owned(),
        })
    }

    /// A routine setting the gradients of `tensors` to zero (backprop starts from zero on its
    /// own; this is for gradients accumulated by hand).
    pub fn zero_grads(&mut self, tensors: &[&Tensor]) -> Result<Routine, TensorError> {
        self.concretize()?;
        let mut assignments = Vec::new();
        let mut keep = BTreeSet::new();
        for t in tensors {
            self.check_tensor(t)?;
            assignments.push(Assignment::Fetch {
                node: grad_node(t.index),
                op: FetchOp::Constant(0.0),
            });
            keep.insert(grad_node(t.index));
        }
        self.compile("zero_grads", assignments, &keep)
    }
}
