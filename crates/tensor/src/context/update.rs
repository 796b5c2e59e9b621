//! Update routines (optimizer steps): updates lowered over the tensors they read, the forward of
//! the computed tensors among those, and the projections of updates without a logic.

use std::collections::BTreeSet;

use rcannl_ir::{
    Assignment, AxisIndex, Binop, FetchOp, NodeId, Projections, Rhs, Symbol, TensorNode,
};
use rcannl_shape::OpId;

use crate::define::{LoweredUpdate, Update};
use crate::graph::{Asg, AsgRhs, ProjSource, Ref, TensorError, error};
use crate::tensor::Tensor;

use super::{Context, Routine, grad_node, node_of, value_node};

impl Context {
    /// A routine running `updates` in order (an optimizer step): each over the dims its target
    /// and the tensors it reads share (see [`Update`]), a one-cell target reducing over them, or
    /// over the projections of the logic it was given ([`Update::with_logic`]).
    ///
    /// A computed tensor an update reads is computed in the routine, before the updates, from
    /// the values the data and parameters hold then (as OCANNL's `%cd` embeds the forward code
    /// of the tensors an assignment reads); a gradient it reads must be one a backprop keeps.
    pub fn update(&mut self, updates: &[Update]) -> Result<Routine, TensorError> {
        let lowered = self.lower_updates(updates)?;
        let (assignments, keep) =
            self.lowered_update_parts(&lowered, &BTreeSet::new(), &BTreeSet::new())?;
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
    /// `computed_ops` and the gradients of `computed_grads`: first the forward of every other
    /// computed tensor they read, then the updates; and the nodes they update.
    pub(super) fn lowered_update_parts(
        &mut self,
        updates: &[LoweredUpdate],
        computed_ops: &BTreeSet<usize>,
        computed_grads: &BTreeSet<usize>,
    ) -> Result<(Vec<Assignment>, BTreeSet<NodeId>), TensorError> {
        let mut read_values = Vec::new();
        {
            let state = self.graph.state.lock();
            for update in updates {
                for r in &update.refs {
                    match *r {
                        Ref::Value(t) => {
                            let computed_here = state.tensors[t]
                                .op
                                .is_none_or(|op| computed_ops.contains(&op));
                            if !computed_here {
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
            assignments.extend(self.leaf_fetches(&tensors));
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
            let assignment = match update.relation {
                None => {
                    let projections = self.update_projections(update, target)?;
                    Assignment::Accum {
                        initialize_neutral: update.initialize_neutral,
                        accum: update.accum,
                        lhs: target,
                        rhs: Rhs::Expr(
                            update.expr.clone(),
                            update.refs.iter().map(|r| node_of(*r)).collect(),
                        ),
                        projections,
                    }
                }
                Some(op) => {
                    self.check_related_reduction(update, op)?;
                    self.assignment(&Asg {
                        lhs: match update.grad {
                            false => Ref::Value(update.target),
                            true => Ref::Grad(update.target),
                        },
                        initialize_neutral: update.initialize_neutral,
                        accum: update.accum,
                        rhs: AsgRhs::Expr(update.expr.clone(), update.refs.clone()),
                        projections: ProjSource {
                            op,
                            view: None,
                            slice: None,
                        },
                    })?
                }
            };
            assignments.push(assignment);
            keep.insert(target);
        }
        Ok((assignments, keep))
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
