//! Composed routines: pieces (a tensor's forward, backprop and zeroed gradients, seeds, updates,
//! block comments) turned into one routine's assignments in the order written, each computing
//! only what the routine does not already hold (see [`crate::compose`]).

use std::collections::BTreeSet;

use rcannl_ir::{Assignment, FetchOp, NodeId};

use crate::compose::{IntoPieces, Piece};
use crate::define::{LoweredUpdate, StepUpdates, Update};
use crate::graph::{Asg, Ref, TensorError, error};
use crate::tensor::Tensor;

use super::backprop::guard_by;
use super::compile::reads_before_writes;
use super::{Context, Routine, grad_node, value_node};

/// What the routine holds after the pieces composed so far.
#[derive(Default)]
struct Composed {
    /// The operations whose results hold values computed in the routine from what their
    /// operands hold now.
    computed: BTreeSet<usize>,
    /// The constant leaves (constants, ranges, the seed, …) the routine has filled.
    fetched: BTreeSet<usize>,
    /// The tensors whose gradients the routine has written.
    grads: BTreeSet<usize>,
    /// Those whose gradients hold zeros written by a `zero_grads` since.
    zeroed: BTreeSet<usize>,
    /// Those whose gradients hold a seed written since.
    seeded: BTreeSet<usize>,
    /// The buffers the routine keeps for the host.
    keep: BTreeSet<NodeId>,
    /// The tensors whose gradients it keeps.
    kept_grads: BTreeSet<usize>,
    /// Every assignment in order, as it reads its buffers without the finite guards of the
    /// blocks' state updates (a fallback to what a target held is no read of a value needed).
    unguarded: Vec<Assignment>,
}

impl Composed {
    /// `a`, the next assignment, into `out`.
    fn emit(&mut self, out: &mut Vec<Assignment>, a: Assignment) {
        self.unguarded.push(a.clone());
        out.push(a);
    }
}

impl Context {
    /// One routine running `code`, its pieces in the order written (see [`crate::compose`] for
    /// what each computes): OCANNL's `%cd` code composed from `t.forward`, `t.zero_grads`,
    /// `t.backprop`, updates and block comments. `code` is [`Piece`]s or [`Update`]s, owned or
    /// borrowed ([`IntoPieces`]), as `cd!` writes them:
    ///
    /// ```
    /// use rcannl_tensor::{Context, Graph, TensorError, cd};
    ///
    /// let graph = Graph::new();
    /// let w = graph.param("w").shape("2").values(vec![3.0, -1.0]).build();
    /// let x = graph.data("x").shape("2").values(vec![1.0, 2.0]).build();
    /// let loss = (&w - &x).pmul(&(&w - &x)).einsum1("i=>");
    /// let step = cd! {
    ///     ~~("sgd step on" loss;
    ///         loss.forward;
    ///         loss.zero_grads;
    ///         loss.backprop;
    ///         w =- 0.25 * w.grad;
    ///     );
    /// };
    /// let mut ctx = Context::new(&graph);
    /// ctx.init_params()?;
    /// let routine = ctx.compose(&step)?;
    /// ctx.run(&routine)?;
    /// assert_eq!(ctx.values(&loss)?, vec![13.0]);
    /// assert_eq!(ctx.grad(&w)?, vec![4.0, -6.0]);
    /// assert_eq!(ctx.values(&w)?, vec![2.0, 0.5]);
    /// assert!(routine.code().starts_with(&format!("~~(\"sgd step on {}\";\n", loss.label())));
    /// # Ok::<(), TensorError>(())
    /// ```
    ///
    /// The routine is named after its outermost comments (`sgd_step_on_…`), else `composed`.
    /// A piece naming a tensor of another graph, a backprop of a tensor depending on no
    /// parameter or of more than one cell with no seed, and the errors of the updates
    /// [`Context::update`] refuses are errors naming the tensor.
    pub fn compose(&mut self, code: impl IntoPieces) -> Result<Routine, TensorError> {
        let code = code.into_pieces();
        self.check_pieces(&code)?;
        self.concretize()?;
        let mut composed = Composed::default();
        let assignments = self.compose_pieces(&mut composed, &code)?;
        let (needs, _) = reads_before_writes(&composed.unguarded);
        let name = routine_name(&code);
        let routine = self.compile_reading(&name, assignments, &composed.keep, Some(needs))?;
        self.grads_kept.extend(composed.kept_grads);
        Ok(routine)
    }

    /// An error for the first tensor of a piece (an update's target or what it reads included)
    /// that belongs to another graph.
    fn check_pieces(&self, code: &[Piece]) -> Result<(), TensorError> {
        for piece in code {
            match piece {
                Piece::Forward(t) => self.graph.check_owns(&piece_name(t, "forward"), &[t])?,
                Piece::Backprop(t) => self.graph.check_owns(&piece_name(t, "backprop"), &[t])?,
                Piece::ZeroGrads(t) => self.graph.check_owns(&piece_name(t, "zero_grads"), &[t])?,
                Piece::Seed { tensor, formula } => {
                    let context = seed_name(tensor);
                    self.graph.check_owns(&context, &[tensor])?;
                    self.graph.check_owns(&context, &formula.tensors())?;
                }
                Piece::Update(update) => {
                    let context = format!("update of '{}'", update.target.label());
                    self.graph.check_owns(&context, &[&update.target])?;
                    self.graph.check_owns(&context, &update.formula.tensors())?;
                }
                Piece::Comment { body, .. } => self.check_pieces(body)?,
            }
        }
        Ok(())
    }

    /// The assignments of `code`, after what `composed` says the routine holds.
    fn compose_pieces(
        &mut self,
        composed: &mut Composed,
        code: &[Piece],
    ) -> Result<Vec<Assignment>, TensorError> {
        let mut out = Vec::new();
        for piece in code {
            match piece {
                Piece::Forward(t) => {
                    self.check_tensor(t)?;
                    self.forward_into(composed, &mut out, &[t.index])?;
                    composed.keep.insert(value_node(t.index));
                }
                Piece::Backprop(t) => self.backprop_into(composed, &mut out, t)?,
                Piece::ZeroGrads(t) => self.zero_grads_into(composed, &mut out, t)?,
                Piece::Seed { tensor, formula } => {
                    self.seed_into(composed, &mut out, tensor, formula)?
                }
                Piece::Update(update) => {
                    let lowered = self.lower_updates(std::slice::from_ref(update))?;
                    self.updates_into(composed, &mut out, &lowered, None)?;
                }
                Piece::Comment { text, body } => {
                    let body = self.compose_pieces(composed, body)?;
                    out.push(Assignment::BlockComment {
                        text: text.clone(),
                        body: Box::new(Assignment::Seq(body)),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The forward of the operations computing `tensors` that the routine does not hold, after
    /// the constant leaves they read that it has not filled.
    fn forward_into(
        &mut self,
        composed: &mut Composed,
        out: &mut Vec<Assignment>,
        tensors: &[usize],
    ) -> Result<(), TensorError> {
        let (ops, read) = self.ancestry(tensors);
        let unfilled: BTreeSet<usize> = read.difference(&composed.fetched).copied().collect();
        for fetch in self.leaf_fetches(&unfilled) {
            composed.emit(out, fetch);
        }
        composed.fetched.extend(unfilled);
        let forward: Vec<Asg> = {
            let state = self.graph.state.lock();
            ops.iter()
                .filter(|op| !composed.computed.contains(op))
                .flat_map(|&op| state.ops[op].forward.clone())
                .collect()
        };
        for asg in &forward {
            let assignment = self.assignment(asg)?;
            composed.emit(out, assignment);
        }
        composed.computed.extend(ops);
        Ok(())
    }

    /// `t.zero_grads`: every gradient of `t`'s subgraph set to zero.
    fn zero_grads_into(
        &mut self,
        composed: &mut Composed,
        out: &mut Vec<Assignment>,
        t: &Tensor,
    ) -> Result<(), TensorError> {
        self.check_tensor(t)?;
        let (_, differentiable) = self.differentiable_of(t, "zero_grads")?;
        for &d in &differentiable {
            composed.emit(
                out,
                Assignment::Fetch {
                    node: grad_node(d),
                    op: FetchOp::Constant(0.0),
                },
            );
            composed.seeded.remove(&d);
        }
        composed.zeroed.extend(differentiable.iter().copied());
        self.wrote_grads(composed, &differentiable);
        Ok(())
    }

    /// `t.backprop`: `t`'s forward where the routine lacks it, every other gradient of its
    /// subgraph from zero, `t`'s from its seed, the gradients in reverse order of the forward,
    /// then the state updates of the blocks `t` depends on, guarded by `t` being finite.
    fn backprop_into(
        &mut self,
        composed: &mut Composed,
        out: &mut Vec<Assignment>,
        t: &Tensor,
    ) -> Result<(), TensorError> {
        self.check_tensor(t)?;
        let (ops, differentiable) = self.differentiable_of(t, "backprop")?;
        let seeded = composed.seeded.contains(&t.index);
        let cells: usize = self.nodes[&value_node(t.index)].dims.iter().product();
        if !seeded && cells != 1 {
            return Err(error(format!(
                "{}: '{}' has {cells} cells (dims {:?}) and nothing seeds its gradient: write \
                 the seed before the backprop, `{label}.grad =: 1` for the gradient of the sum \
                 of its cells (what Context::backprop computes) or another weighting of them",
                piece_name(t, "backprop"),
                t.label(),
                self.nodes[&value_node(t.index)].dims,
                label = t.label(),
            )));
        }
        self.forward_into(composed, out, &[t.index])?;
        for &d in &differentiable {
            let fill = match d == t.index {
                true if seeded => continue,
                true => 1.0,
                false if composed.zeroed.contains(&d) => continue,
                false => 0.0,
            };
            composed.emit(
                out,
                Assignment::Fetch {
                    node: grad_node(d),
                    op: FetchOp::Constant(fill),
                },
            );
        }
        let backward: Vec<Asg> = {
            let state = self.graph.state.lock();
            ops.iter()
                .rev()
                .filter(|&&op| state.tensors[state.ops[op].result].differentiable)
                .flat_map(|&op| state.ops[op].backward.clone())
                .collect()
        };
        for asg in &backward {
            let assignment = self.assignment(asg)?;
            composed.emit(out, assignment);
        }
        for d in &differentiable {
            composed.zeroed.remove(d);
        }
        self.wrote_grads(composed, &differentiable);
        composed.keep.insert(value_node(t.index));
        let subgraph = self.ancestry(&[t.index]).1;
        let states = StepUpdates::anchored_in(&self.graph.state.lock(), &subgraph);
        if !states.is_empty() {
            let (finite, ok) = self.finite_check(t.index)?;
            composed.emit(out, finite);
            self.updates_into(composed, out, &states, Some(ok))?;
        }
        Ok(())
    }

    /// `t.grad =: formula`.
    fn seed_into(
        &mut self,
        composed: &mut Composed,
        out: &mut Vec<Assignment>,
        t: &Tensor,
        formula: &crate::define::Formula,
    ) -> Result<(), TensorError> {
        self.check_tensor(t)?;
        if !self.graph.state.lock().tensors[t.index].differentiable {
            return Err(error(format!(
                "{}: '{}' takes no gradient (it depends on no parameter, nor on data built with \
                 `requires_grad`)",
                seed_name(t),
                t.label()
            )));
        }
        let mut seed = Update::set(t, formula.clone())
            .lower_update()
            .map_err(|e| {
                error(
                    e.message
                        .replacen("update of", "seed of the gradient of", 1),
                )
            })?;
        seed.grad = true;
        self.updates_into(composed, out, &[seed], None)?;
        composed.seeded.insert(t.index);
        composed.zeroed.remove(&t.index);
        Ok(())
    }

    /// `updates` in order, each after the forward of what it reads that the routine lacks;
    /// guarded by the finite check `guard` where given.
    fn updates_into(
        &mut self,
        composed: &mut Composed,
        out: &mut Vec<Assignment>,
        updates: &[LoweredUpdate],
        guard: Option<NodeId>,
    ) -> Result<(), TensorError> {
        for update in updates {
            let values: Vec<usize> = update
                .refs
                .iter()
                .filter_map(|r| match r {
                    Ref::Value(t) => Some(*t),
                    Ref::Grad(_) => None,
                })
                .collect();
            self.forward_into(composed, out, &values)?;
            let (assignments, keep) = self.lowered_update_parts(
                std::slice::from_ref(update),
                &composed.computed,
                &composed.grads,
                &composed.fetched,
            )?;
            for mut assignment in assignments {
                composed.unguarded.push(assignment.clone());
                if let Some(ok) = guard {
                    guard_by(&mut assignment, ok);
                }
                out.push(assignment);
            }
            composed.keep.extend(keep);
            match update.grad {
                true => self.wrote_grads(composed, &[update.target]),
                false => self.wrote_value(composed, update.target),
            }
        }
        Ok(())
    }

    /// The operations computing `t` and the tensors of its subgraph that take gradients; an
    /// error naming the piece `what` of `t` where `t` takes none.
    fn differentiable_of(
        &self,
        t: &Tensor,
        what: &str,
    ) -> Result<(Vec<usize>, Vec<usize>), TensorError> {
        let (ops, tensors) = self.ancestry(&[t.index]);
        let state = self.graph.state.lock();
        if !state.tensors[t.index].differentiable {
            drop(state);
            return Err(error(format!(
                "{}: '{}' does not depend on any parameter (or data tensor built with \
                 `requires_grad`)",
                piece_name(t, what),
                t.label()
            )));
        }
        let differentiable = tensors
            .into_iter()
            .filter(|&d| state.tensors[d].differentiable)
            .collect();
        Ok((ops, differentiable))
    }

    /// Notes that the routine wrote the gradients of `tensors`: those of leaves it keeps.
    fn wrote_grads(&self, composed: &mut Composed, tensors: &[usize]) {
        let state = self.graph.state.lock();
        for &t in tensors {
            composed.grads.insert(t);
            if state.tensors[t].leaf.is_some() {
                composed.keep.insert(grad_node(t));
                composed.kept_grads.insert(t);
            }
        }
    }

    /// Notes that the routine wrote `t`'s value: what it computed from `t` is no longer what
    /// `t` holds, while `t` holds values of its own (not to be computed again for a reader).
    fn wrote_value(&self, composed: &mut Composed, t: usize) {
        let state = self.graph.state.lock();
        if let Some(op) = state.tensors[t].op
            && state.ops[op].result == t
        {
            composed.computed.insert(op);
        }
        // Operations come in an order of dependencies: one pass finds every dependent.
        let mut changed: BTreeSet<usize> = [t].into();
        let computed: Vec<usize> = composed.computed.iter().copied().collect();
        for op in computed {
            let data = &state.ops[op];
            if data.result != t && data.operands.iter().any(|o| changed.contains(o)) {
                composed.computed.remove(&op);
                changed.insert(data.result);
            }
        }
    }
}

/// `` `t.what` ``, as an error names a piece.
fn piece_name(t: &Tensor, what: &str) -> String {
    format!("`{}.{what}`", t.label())
}

/// How an error names the seed of `t`'s gradient.
fn seed_name(t: &Tensor) -> String {
    format!("seed `{}.grad =: …`", t.label())
}

/// A composed routine's name: its outermost comments' words, `_then_` between two comments
/// (OCANNL names routines from their comments so), else `composed`.
fn routine_name(code: &[Piece]) -> String {
    let words: Vec<String> = code
        .iter()
        .filter_map(|piece| match piece {
            Piece::Comment { text, .. } => {
                let word: String = text
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                let word = word
                    .split('_')
                    .filter(|part| !part.is_empty())
                    .collect::<Vec<_>>()
                    .join("_");
                (!word.is_empty()).then_some(word)
            }
            _ => None,
        })
        .collect();
    match words.is_empty() {
        true => "composed".to_owned(),
        false => words.join("_then_").chars().take(80).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;

    #[test]
    fn a_routine_is_named_after_its_outermost_comments() {
        let graph = Graph::new();
        let x = graph.data("x").shape("2").build();
        let comment = |text: &str| Piece::comment(text, [Piece::forward(&x)]);
        assert_eq!(routine_name(&[Piece::forward(&x)]), "composed");
        assert_eq!(
            routine_name(&[comment("loss: forward & backprop"), Piece::forward(&x)]),
            "loss_forward_backprop"
        );
        assert_eq!(
            routine_name(&[comment("grad update"), comment("sgd update")]),
            "grad_update_then_sgd_update"
        );
        assert_eq!(routine_name(&[comment("…")]), "composed");
    }
}
