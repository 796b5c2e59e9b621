//! Contexts: a graph's tensors made concrete on a backend. A context finishes shape inference,
//! gives every tensor a buffer (and a gradient buffer), compiles routines — forward, backprop
//! (forward, then gradients from `loss.grad = 1`), parameter init, and any assignments — and runs
//! them, with host access to values and gradients.
//!
//! Buffers live in the context across routines. A routine keeps what its caller may read (its
//! outputs, parameters and their gradients) and is free to fuse everything else away.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_backends::{Backend, Buffers, Executable};
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Expr, FetchOp, Index, LoopVar, MemoryMode, NodeId, Precision,
    Projections, Rhs, Routine as IrRoutine, Scalar, Stmt, Symbol, TensorNode, Unop, Value, Var,
    VecUnop,
};
use rcannl_shape::OpId;
use rcannl_shape::logic::Logic;
use rcannl_shape::spec::Kind;

use crate::array::Array;
use crate::backend_choice::{BACKEND_VARIABLE, backend_or_refusal};
use crate::define::{LoweredUpdate, Update};
use crate::graph::{
    Asg, AsgRhs, Draw, Graph, Init, LeafKind, ProjSource, Ref, StaticIndex, TensorError, error,
};
use crate::npy;
use crate::tensor::Tensor;

/// A compiled routine of a context: it runs only in the context that compiled it.
#[derive(Debug)]
pub struct Routine {
    executable: Box<dyn Executable>,
    /// The identity of the context that compiled it.
    context: u64,
    /// The tensors' buffers it reads before writing them, which must hold values before it runs.
    needs: Vec<NodeId>,
    /// The buffers it leaves holding values: those it writes and keeps.
    writes: Vec<NodeId>,
}

/// Identities of contexts, unique in the process.
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Routine {
    /// The optimized loop IR, printed.
    pub fn describe(&self) -> String {
        self.executable.routine().to_string()
    }

    /// The code the backend generated (C on the C backend), if any.
    pub fn source(&self) -> Option<String> {
        self.executable.source().map(str::to_owned)
    }
}

/// A graph's tensors on a backend.
///
/// `Send` and `Sync` (every backend is): a context built on one thread can be moved to another
/// to train there; running routines takes `&mut self`, so one thread runs them at a time.
#[derive(Debug)]
pub struct Context {
    id: u64,
    graph: Graph,
    backend: Box<dyn Backend>,
    buffers: Buffers,
    nodes: BTreeMap<NodeId, TensorNode>,
    projections: HashMap<OpId, Projections>,
    /// The buffers holding values: set from the host, initialized, or written and kept by a
    /// routine that ran. Reading any other buffer is an error, never a stand-in value.
    holds: HashSet<NodeId>,
    /// The tensors whose gradients some backprop routine keeps.
    grads_kept: HashSet<usize>,
    /// For each loss a training step computes (by tensor index), the one-cell node telling
    /// whether its cells are finite.
    finite_checks: HashMap<usize, NodeId>,
    seed: u64,
    next_scratch: u32,
    /// The numbers of tensors, inference operations and constraints on captures when the context
    /// was last made concrete: nothing to do while the graph has not changed.
    concrete: (usize, usize, usize),
}

/// The name projections give a batch slice's position until an assignment names its static index.
const SLICE_PLACEHOLDER: Symbol = Symbol(u32::MAX);

/// Node ids of the scratch nodes routines make for themselves (random bits): far above the
/// tensors' own.
const FIRST_SCRATCH: u32 = 1 << 31;

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

fn value_node(t: usize) -> NodeId {
    NodeId(2 * t as u32)
}

fn grad_node(t: usize) -> NodeId {
    NodeId(2 * t as u32 + 1)
}

fn node_of(r: Ref) -> NodeId {
    match r {
        Ref::Value(t) => value_node(t),
        Ref::Grad(t) => grad_node(t),
    }
}

impl Context {
    /// A context on the backend `RCANNL_BACKEND` chooses (`gpu`, `cc` or `interp`), else on the
    /// C backend when a C compiler runs, else on the interpreter.
    ///
    /// A choice that cannot be honoured (no GPU adapter, no C compiler, a value naming no
    /// backend) is not replaced by another backend: every routine of this context then fails to
    /// compile, with an error naming the variable, its value and what was looked for.
    /// [`chosen_backend`](crate::backend_choice::chosen_backend) asks beforehand.
    pub fn new(graph: &Graph) -> Context {
        let setting = std::env::var_os(BACKEND_VARIABLE);
        Context::with_backend(graph, backend_or_refusal(setting.as_deref()))
    }

    /// A context on `backend` for `graph`: no buffers or compiled routines yet, seed 42.
    pub fn with_backend(graph: &Graph, backend: Box<dyn Backend>) -> Context {
        Context {
            id: NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed),
            graph: graph.clone(),
            backend,
            buffers: Buffers::default(),
            nodes: BTreeMap::new(),
            projections: HashMap::new(),
            holds: HashSet::new(),
            grads_kept: HashSet::new(),
            finite_checks: HashMap::new(),
            seed: 42,
            next_scratch: FIRST_SCRATCH,
            concrete: (0, 0, 0),
        }
    }

    /// The seed of parameter initialization (default 42): the same seed gives the same values,
    /// on every backend.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// The backend's name: `interpreter`, `cc` or `gpu`.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// What the backend's generated code runs on (see [`Backend::target`]).
    pub fn backend_target(&self) -> Option<String> {
        self.backend.target()
    }

    /// Finishes shape inference and makes a buffer for every tensor not yet concrete.
    fn concretize(&mut self) -> Result<(), TensorError> {
        self.graph.check()?;
        let state = &mut *self.graph.state.lock();
        let size = (
            state.tensors.len(),
            state.inference.ops().count(),
            state.captured_constraints,
        );
        if size == self.concrete {
            return Ok(());
        }
        state
            .inference
            .finish()
            .map_err(|e| state.locate_later(e))?;
        for op in state.inference.ops() {
            // A fan-out of random words writes by offsets and has no projections.
            if matches!(state.inference.op(op).logic, Logic::Uint4x32ToPrec { .. }) {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(entry) = self.projections.entry(op) {
                // A slice's static index gets a placeholder here; each assignment renames it.
                entry.insert(
                    state
                        .inference
                        .projections(op, 0, Some(SLICE_PLACEHOLDER))?,
                );
            }
        }
        // Margins: what every access of a tensor needs, the largest per axis.
        let mut margins: HashMap<rcannl_shape::TensorId, Vec<(usize, usize)>> = HashMap::new();
        let mut widen = |tensor, padding: &[(usize, usize)]| {
            let entry = margins.entry(tensor).or_insert_with(|| padding.to_vec());
            for (have, need) in entry.iter_mut().zip(padding) {
                have.0 = have.0.max(need.0);
                have.1 = have.1.max(need.1);
            }
        };
        for (op, p) in &self.projections {
            let info = state.inference.op(*op);
            widen(info.result, &p.lhs_padding);
            for (operand, padding) in info.operands.iter().zip(&p.rhs_padding) {
                widen(*operand, padding);
            }
        }
        for (t, data) in state.tensors.iter().enumerate() {
            let shape = state.inference.closed_shape(data.shape)?;
            let dims: Vec<usize> = [Kind::Batch, Kind::Output, Kind::Input]
                .iter()
                .flat_map(|&kind| {
                    shape
                        .row(kind)
                        .dims()
                        .map(|d| d.ground_size().unwrap_or(1))
                        .collect::<Vec<_>>()
                })
                .collect();
            let padding = margins
                .get(&data.shape)
                .cloned()
                .unwrap_or_else(|| vec![(0, 0); dims.len()]);
            for (id, label) in [
                (value_node(t), data.label.clone()),
                (grad_node(t), format!("grad {}", data.label)),
            ] {
                let mut node = TensorNode::new(id.0, &label, data.precision, &dims);
                node.padding = padding.clone();
                match self.nodes.get(&id) {
                    Some(existing) if existing.padding != node.padding => {
                        return Err(error(format!(
                            "tensor '{}' needs margins {:?} after its buffer was made with {:?}",
                            data.label, node.padding, existing.padding
                        )));
                    }
                    Some(_) => {}
                    None => {
                        self.buffers.insert(node.clone()).map_err(|e| {
                            error(format!("tensor '{}' ({shape}): {e}", data.label))
                        })?;
                        self.nodes.insert(id, node);
                        if let (Some(LeafKind::Data(Some(values))), true) =
                            (&data.leaf, id == value_node(t))
                        {
                            self.buffers
                                .set_values(id, values)
                                .map_err(|e| error(e.message))?;
                            self.holds.insert(id);
                        }
                    }
                }
            }
        }
        self.concrete = size;
        Ok(())
    }

    /// The assignment `asg` stands for, over this context's nodes.
    fn assignment(&self, asg: &Asg) -> Result<Assignment, TensorError> {
        if let AsgRhs::SetVec(op, source) = &asg.rhs {
            return Ok(Assignment::SetVecUnop {
                op: *op,
                lhs: node_of(asg.lhs),
                rhs: node_of(*source),
            });
        }
        let mut p = self.projections[&asg.projections.op].clone();
        if let Some((lhs, rhs)) = &asg.projections.view {
            p = p.view(*lhs, rhs);
        }
        if let Some(slice) = asg.projections.slice {
            p = with_slice(&p, slice);
        }
        let lhs = node_of(asg.lhs);
        Ok(match &asg.rhs {
            AsgRhs::Unop(op, a) => accum(asg, lhs, Rhs::Unop(*op, node_of(*a)), p),
            AsgRhs::Binop(op, a, b) => {
                accum(asg, lhs, Rhs::Binop(*op, node_of(*a), node_of(*b)), p)
            }
            AsgRhs::Ternop(op, a, b, c) => accum(
                asg,
                lhs,
                Rhs::Ternop(*op, node_of(*a), node_of(*b), node_of(*c)),
                p,
            ),
            AsgRhs::SetVec(op, source) => Assignment::SetVecUnop {
                op: *op,
                lhs,
                rhs: node_of(*source),
            },
            AsgRhs::Expr(expr, operands) => accum(
                asg,
                lhs,
                Rhs::Expr(expr.clone(), operands.iter().map(|r| node_of(*r)).collect()),
                p,
            ),
            AsgRhs::Block(op, sources) => Assignment::Block {
                initialize_neutral: asg.initialize_neutral,
                accum: asg.accum,
                lhs,
                op: *op,
                sources: sources.iter().map(|s| node_of(*s)).collect(),
                projections: p,
            },
            AsgRhs::Gather(table, ids) => Assignment::Gather {
                initialize_neutral: asg.initialize_neutral,
                lhs,
                table: node_of(*table),
                ids: node_of(*ids),
                projections: p,
            },
            AsgRhs::ScatterAdd(source, ids) => Assignment::ScatterAdd {
                target: lhs,
                source: node_of(*source),
                ids: node_of(*ids),
                projections: p,
            },
            AsgRhs::RevSides(op, source, targets) => Assignment::RevSides {
                initialize_neutral: asg.initialize_neutral,
                accum: asg.accum,
                source: node_of(*source),
                op: *op,
                targets: targets.iter().map(|t| node_of(*t)).collect(),
                projections: p,
            },
        })
    }

    /// The ops computing `outputs`, in creation order (which is an order of dependencies), and
    /// the leaves they read.
    fn ancestry(&self, outputs: &[usize]) -> (Vec<usize>, BTreeSet<usize>) {
        let state = self.graph.state.lock();
        let mut needed: BTreeSet<usize> = BTreeSet::new();
        let mut stack: Vec<usize> = outputs.to_vec();
        let mut ops = BTreeSet::new();
        while let Some(t) = stack.pop() {
            if !needed.insert(t) {
                continue;
            }
            if let Some(op) = state.tensors[t].op
                && state.ops[op].result == t
            {
                ops.insert(op);
                stack.extend(state.ops[op].operands.iter().copied());
            }
        }
        (ops.into_iter().collect(), needed)
    }

    /// The fetches that fill constant leaves among `tensors`.
    fn leaf_fetches(&self, tensors: &BTreeSet<usize>) -> Vec<Assignment> {
        let state = self.graph.state.lock();
        tensors
            .iter()
            .filter_map(|&t| {
                let op = match state.tensors[t].leaf.as_ref()? {
                    LeafKind::Constant(c) => FetchOp::Constant(*c),
                    LeafKind::RangeOverOffsets => FetchOp::RangeOverOffsets,
                    LeafKind::SelfId => FetchOp::EmbedSelfId,
                    LeafKind::Seed => FetchOp::Constant(self.seed as f64),
                    LeafKind::Dim(capture) => {
                        FetchOp::EmbedDim(state.capture_value(capture).unwrap_or(0))
                    }
                    LeafKind::Data(_) | LeafKind::Param(_) => return None,
                };
                Some(Assignment::Fetch {
                    node: value_node(t),
                    op,
                })
            })
            .collect()
    }

    /// Compiles `assignments` over the nodes they use, keeping `keep` (and every parameter and
    /// its gradient) in buffers.
    fn compile(
        &mut self,
        name: &str,
        assignments: Vec<Assignment>,
        keep: &BTreeSet<NodeId>,
    ) -> Result<Routine, TensorError> {
        self.compile_reading(name, assignments, keep, None)
    }

    /// [`Context::compile`], the buffers the routine reads before writing them being
    /// `read_first` where given (else found from the assignments).
    fn compile_reading(
        &mut self,
        name: &str,
        assignments: Vec<Assignment>,
        keep: &BTreeSet<NodeId>,
        read_first: Option<BTreeSet<NodeId>>,
    ) -> Result<Routine, TensorError> {
        let mut used = BTreeSet::new();
        for a in &assignments {
            nodes_of(a, &mut used);
        }
        let params: BTreeSet<usize> = {
            let state = self.graph.state.lock();
            (0..state.tensors.len())
                .filter(|&t| matches!(state.tensors[t].leaf, Some(LeafKind::Param(_))))
                .collect()
        };
        let kept = |id: &NodeId| keep.contains(id) || params.contains(&((id.0 / 2) as usize));
        let (found, written) = reads_before_writes(&assignments);
        let read_first = read_first.unwrap_or(found);
        // What it keeps without writing (a forward of a leaf) it hands back as it was.
        let needs = read_first
            .into_iter()
            .chain(keep.difference(&written).copied())
            .filter(|id| self.nodes.contains_key(id))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let writes = written
            .into_iter()
            .filter(|id| self.nodes.contains_key(id) && kept(id))
            .collect();
        let nodes = used.iter().map(|id| {
            let mut node = self.nodes[id].clone();
            if kept(id) {
                node.memory_mode = Some(MemoryMode::Materialized);
            }
            node
        });
        let routine = IrRoutine::lower(name, &Assignment::Seq(assignments), nodes)
            .map_err(|e| error(format!("routine {name}: {e}")))?;
        self.compile_routine(routine, needs, writes)
    }

    /// Optimizes and compiles `routine`, which reads the buffers `needs` before writing them and
    /// leaves `writes` holding values.
    fn compile_routine(
        &mut self,
        routine: IrRoutine,
        needs: Vec<NodeId>,
        writes: Vec<NodeId>,
    ) -> Result<Routine, TensorError> {
        let optimized =
            optimize(&routine).map_err(|e| error(format!("routine {}: {e}", routine.name)))?;
        for node in optimized.nodes.values() {
            if node.memory_mode != Some(MemoryMode::Virtual) && !self.nodes.contains_key(&node.id) {
                self.buffers
                    .insert(node.clone())
                    .map_err(|e| error(format!("routine {}: {e}", routine.name)))?;
            }
        }
        let executable = self
            .backend
            .compile(&optimized)
            .map_err(|e| error(format!("routine {}: {e}", optimized.name)))?;
        Ok(Routine {
            executable,
            context: self.id,
            needs,
            writes,
        })
    }

    /// A routine computing `outputs` from the data and parameters.
    pub fn forward(&mut self, outputs: &[&Tensor]) -> Result<Routine, TensorError> {
        self.graph.check_owns("forward", outputs)?;
        self.concretize()?;
        let indices: Vec<usize> = outputs.iter().map(|t| t.index).collect();
        let (ops, tensors) = self.ancestry(&indices);
        let mut assignments = self.leaf_fetches(&tensors);
        let forward: Vec<Asg> = {
            let state = self.graph.state.lock();
            ops.iter()
                .flat_map(|&op| state.ops[op].forward.clone())
                .collect()
        };
        for asg in &forward {
            assignments.push(self.assignment(asg)?);
        }
        let keep = indices.iter().map(|&t| value_node(t)).collect();
        self.compile("forward", assignments, &keep)
    }

    /// A routine computing `loss` and then the gradient of the sum of its cells with respect to
    /// every parameter it depends on (gradients start from zero on every run). The gradients of
    /// leaves (parameters, data) are kept for [`Context::grad`]; those of computed tensors are
    /// free to be fused away ([`Context::backprop_keeping`] keeps some).
    ///
    /// The routine also runs the state updates of the blocks the loss depends on
    /// ([`Graph::update_in_steps`]: batch normalization's running statistics), unless a cell of
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
    /// the loss depends on ([`Graph::update_in_steps`]) and `updates` (as [`Context::update`]
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
        let mut lowered: Vec<LoweredUpdate> = {
            let state = self.graph.state.lock();
            state
                .step_updates
                .iter()
                .filter(|(anchor, _)| step.tensors.contains(anchor))
                .flat_map(|(_, updates)| updates.iter().cloned())
                .collect()
        };
        lowered.extend(self.lower_updates(updates)?);
        let mut assignments = step.assignments;
        let mut nodes = step.nodes;
        if !lowered.is_empty() {
            let (mut update_assignments, updated) =
                self.lowered_update_parts(&lowered, &step.ops, &step.differentiable)?;
            // What the step reads is what it reads unguarded: a fallback to what a target held
            // is no read of a value the step needs.
            let mut unguarded = assignments.clone();
            unguarded.extend(update_assignments.iter().cloned());
            let (needs, _) = reads_before_writes(&unguarded);
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
    fn finite_check(&mut self, loss: usize) -> Result<(Assignment, NodeId), TensorError> {
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
    fn lower_updates(&mut self, updates: &[Update]) -> Result<Vec<LoweredUpdate>, TensorError> {
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
    fn lowered_update_parts(
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
            let target = value_node(update.target);
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
                        lhs: Ref::Value(update.target),
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

    /// Runs `routine`.
    pub fn run(&mut self, routine: &Routine) -> Result<(), TensorError> {
        self.run_with(routine, &[])
    }

    /// Runs `routine` with a value for each static index it uses.
    pub fn run_with(
        &mut self,
        routine: &Routine,
        statics: &[(StaticIndex, i64)],
    ) -> Result<(), TensorError> {
        if routine.context != self.id {
            return Err(error(format!(
                "run: routine {} was compiled by another context",
                routine.executable.routine().name
            )));
        }
        if let Some(&node) = routine.needs.iter().find(|n| !self.holds.contains(n)) {
            let (what, remedy) = self.holds_nothing(node);
            return Err(error(format!(
                "run: routine {} reads {what}, which holds no values yet: {remedy}",
                routine.executable.routine().name,
            )));
        }
        let graph = self.graph.id();
        if statics.iter().any(|(s, _)| s.graph != graph) {
            return Err(error(
                "run: a static index belongs to another graph than the context's",
            ));
        }
        let statics: HashMap<Symbol, i64> = statics.iter().map(|(s, v)| (s.symbol, *v)).collect();
        routine
            .executable
            .run(&mut self.buffers, &statics)
            .map_err(|e| error(e.message))?;
        self.holds.extend(routine.writes.iter().copied());
        Ok(())
    }

    /// What reading `node`, which holds no values, reads: the tensor it belongs to (`parameter
    /// 'w'`, `the gradient of 'w'`), and how it gets values.
    fn holds_nothing(&self, node: NodeId) -> (String, String) {
        let t = (node.0 / 2) as usize;
        let state = self.graph.state.lock();
        let label = &state.tensors[t].label;
        if node == grad_node(t) {
            return (
                format!("the gradient of '{label}'"),
                "no routine that computes and keeps it (a backprop, a training step) has run, \
                 nor was it set"
                    .to_owned(),
            );
        }
        match state.tensors[t].leaf {
            Some(LeafKind::Param(_)) => (
                format!("parameter '{label}'"),
                "call init_params (again, for parameters added since) or set its values first"
                    .to_owned(),
            ),
            Some(LeafKind::Data(_)) => (
                format!("data tensor '{label}'"),
                "give them when building it (`.values(..)`) or set them (set_values, set_cells, \
                 load_npy) first"
                    .to_owned(),
            ),
            _ => (
                format!("'{label}'"),
                format!(
                    "no routine that computes and keeps it has run (compile one with \
                     forward(&[&{}]) and run it)",
                    variable_name(label)
                ),
            ),
        }
    }

    /// An error for reading `node` from the host while it holds no values.
    fn unheld(&self, node: NodeId) -> TensorError {
        let (what, remedy) = self.holds_nothing(node);
        error(format!("{what} holds no values yet: {remedy}"))
    }

    /// Initializes every parameter not initialized yet in this context (each exactly once; a
    /// parameter whose values were set from the host keeps them). A routine reading a parameter
    /// that holds no values refuses to run.
    pub fn init_params(&mut self) -> Result<(), TensorError> {
        self.concretize()?;
        let (params, default): (Vec<(usize, Init)>, Init) = {
            let state = self.graph.state.lock();
            let params = state
                .tensors
                .iter()
                .enumerate()
                .filter(|(t, _)| !self.holds.contains(&value_node(*t)))
                .filter_map(|(t, data)| match &data.leaf {
                    Some(LeafKind::Param(init)) if data.failed.is_none() => Some((t, init.clone())),
                    _ => None,
                })
                .collect();
            (params, state.default_init.clone())
        };
        let mut body = Vec::new();
        let mut scratch = Vec::new();
        let mut vars = 0u32;
        let mut expressions = Vec::new();
        for (t, init) in &params {
            let node = self.nodes[&value_node(*t)].clone();
            let (fan_in, fan_out) = (self.fan(*t, Kind::Input), self.fan(*t, Kind::Output));
            match init.draw(&default, fan_in, fan_out) {
                Draw::Values(values) => {
                    self.buffers
                        .set_values(node.id, &values)
                        .map_err(|e| error(format!("parameter '{}': {e}", node.label)))?;
                }
                Draw::Fill(value) => body.push(Stmt::Fill {
                    node: node.id,
                    value,
                }),
                Draw::Uniform(low, high) => {
                    let range = (low, high);
                    body.extend(self.random_init(&node, *t, range, None, &mut scratch, &mut vars));
                }
                Draw::Normal(mean, std) => {
                    body.extend(self.random_init(
                        &node,
                        *t,
                        (0.0, 1.0),
                        Some((mean, std)),
                        &mut scratch,
                        &mut vars,
                    ));
                }
                Draw::Expr(e) => expressions.push((*t, e)),
            }
        }
        if !body.is_empty() {
            let mut nodes: BTreeMap<NodeId, TensorNode> =
                scratch.into_iter().map(|n: TensorNode| (n.id, n)).collect();
            for (t, _) in &params {
                let node = self.nodes[&value_node(*t)].clone();
                nodes.insert(node.id, node.with_mode(MemoryMode::Materialized));
            }
            let routine = IrRoutine {
                name: "init".to_owned(),
                nodes,
                statics: BTreeMap::new(),
                body,
            };
            // It writes the parameters: none has to hold values before.
            let routine = self.compile_routine(routine, Vec::new(), Vec::new())?;
            self.run(&routine)?;
        }
        self.holds.extend(
            params
                .iter()
                .map(|(t, _)| *t)
                .filter(|t| expressions.iter().all(|(e, _)| e != t))
                .map(value_node),
        );
        // In creation order, so that an expression may read a parameter an earlier one set.
        for (t, e) in expressions {
            let label = self.graph.state.lock().tensors[t].label.clone();
            let failed = |e: TensorError| {
                error(format!(
                    "parameter '{label}': its init expression: {}",
                    e.message
                ))
            };
            let routine = self.forward(&[&e]).map_err(failed)?;
            self.run(&routine).map_err(failed)?;
            let values = self.values(&e).map_err(failed)?;
            self.buffers
                .set_values(value_node(t), &values)
                .map_err(|e| error(format!("parameter '{label}': {e}")))?;
            self.holds.insert(value_node(t));
        }
        Ok(())
    }

    /// The number of input or output cells of a tensor (the product of that row's axes; 0
    /// without such axes).
    fn fan(&self, t: usize, kind: Kind) -> usize {
        let state = self.graph.state.lock();
        let shape = state.inference.shape(state.tensors[t].shape);
        let row = shape.row(kind);
        if row.n_explicit() == 0 {
            return 0;
        }
        row.dims().map(|d| d.ground_size().unwrap_or(1)).product()
    }

    /// Statements filling `node` with random values keyed by (seed, tensor): uniform in
    /// `range`, or normal with `(mean, std)` by Box–Muller from two uniform draws. Cell `i` takes
    /// its bits from counter `i / k` (k values per 128-bit word), so values do not depend on the
    /// backend or the order of anything.
    fn random_init(
        &mut self,
        node: &TensorNode,
        t: usize,
        (low, high): (f64, f64),
        normal: Option<(f64, f64)>,
        scratch: &mut Vec<TensorNode>,
        next_var: &mut u32,
    ) -> Vec<Stmt> {
        let mut fresh = || {
            *next_var += 1;
            LoopVar(*next_var - 1)
        };
        let cells = node.len();
        let draws = if normal.is_some() { 2 } else { 1 };
        let mut body = Vec::new();
        let mut uniforms = Vec::new();
        for draw in 0..draws {
            let uniform = TensorNode::new(self.scratch(), "uniform", Precision::F64, &[cells])
                .with_mode(MemoryMode::Local);
            let length = VecUnop::Uint4x32ToPrecUniform.length(Precision::F64);
            let words = cells.div_ceil(length);
            let w = fresh();
            // The key: threefry(seed, tensor id); the counter: the word's position, shifted per
            // draw.
            let key = Scalar::Binop(
                Binop::Threefry4x32,
                Box::new(Scalar::Const(self.seed as f64)),
                Box::new(Scalar::Const(t as f64)),
            );
            let counter = Scalar::Embed(Index {
                terms: vec![(1, Var::Loop(w))],
                offset: (draw * words) as i64,
            });
            body.push(Stmt::For {
                var: w,
                range: words,
                body: vec![Stmt::SetVec {
                    node: uniform.id,
                    offset: Index {
                        terms: vec![(length as i64, Var::Loop(w))],
                        offset: 0,
                    },
                    op: VecUnop::Uint4x32ToPrecUniform,
                    arg: Scalar::Binop(Binop::Threefry4x32, Box::new(key), Box::new(counter)),
                }],
            });
            uniforms.push(uniform.id);
            scratch.push(uniform);
        }
        // The node's cells, row-major over its dims (inside its margins).
        let vars: Vec<LoopVar> = node.dims.iter().map(|_| fresh()).collect();
        let mut flat = Index::constant(0);
        let mut stride = 1i64;
        for (var, dim) in vars.iter().zip(&node.dims).rev() {
            flat.terms.push((stride, Var::Loop(*var)));
            stride *= *dim as i64;
        }
        let read = |id: NodeId| Box::new(Scalar::Get(id, vec![flat.clone()]));
        let value = match normal {
            None => Scalar::Binop(
                Binop::Add,
                Box::new(Scalar::Const(low)),
                Box::new(Scalar::Binop(
                    Binop::Mul,
                    Box::new(Scalar::Const(high - low)),
                    read(uniforms[0]),
                )),
            ),
            Some((mean, std)) => {
                // √(−2 ln(1 − u₁)) · cos(2π u₂): 1 − u₁ lies in (0, 1].
                let radius = Scalar::Unop(
                    Unop::Sqrt,
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Const(-2.0)),
                        Box::new(Scalar::Unop(
                            Unop::Log,
                            Box::new(Scalar::Binop(
                                Binop::Sub,
                                Box::new(Scalar::Const(1.0)),
                                read(uniforms[0]),
                            )),
                        )),
                    )),
                );
                let angle = Scalar::Unop(
                    Unop::Cos,
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Const(std::f64::consts::TAU)),
                        read(uniforms[1]),
                    )),
                );
                Scalar::Ternop(
                    rcannl_ir::Ternop::Fma,
                    Box::new(Scalar::Const(std)),
                    Box::new(Scalar::Binop(Binop::Mul, Box::new(radius), Box::new(angle))),
                    Box::new(Scalar::Const(mean)),
                )
            }
        };
        let index: Vec<Index> = vars
            .iter()
            .zip(&node.padding)
            .map(|(var, (left, _))| Index::var(*var, *left as i64))
            .collect();
        // Computed in f64 (where every backend's math library agrees bit for bit), rounded once
        // into the parameter.
        let local = rcannl_ir::LocalId(0);
        let mut stmt = Stmt::For {
            var: fresh(),
            range: 1,
            body: vec![
                Stmt::Local {
                    id: local,
                    precision: Precision::F64,
                    value,
                },
                Stmt::Set {
                    node: node.id,
                    index,
                    value: Scalar::Local(local),
                },
            ],
        };
        for (var, dim) in vars.iter().zip(&node.dims).rev() {
            stmt = Stmt::For {
                var: *var,
                range: *dim,
                body: vec![stmt],
            };
        }
        body.push(stmt);
        body
    }

    fn scratch(&mut self) -> u32 {
        let id = self.next_scratch;
        self.next_scratch += 1;
        id
    }

    fn check_tensor(&self, t: &Tensor) -> Result<(), TensorError> {
        self.graph.check_owns("context", &[t])?;
        if let Some(e) = t.error() {
            return Err(e);
        }
        if !self.nodes.contains_key(&value_node(t.index)) {
            return Err(error(format!(
                "tensor '{}' has no buffer yet: compile a routine that uses it first",
                t.label()
            )));
        }
        Ok(())
    }

    /// Whether the tensor of this context's graph holds values to read: given when it was built,
    /// set from the host, initialized (a parameter), or computed and kept by a routine that ran.
    pub fn holds_values(&self, t: &Tensor) -> bool {
        self.graph.owns(t) && self.holds.contains(&value_node(t.index))
    }

    /// An error for a tensor that holds no values yet, naming it and how it gets values.
    fn check_holds_values(&self, t: &Tensor) -> Result<(), TensorError> {
        if !self.holds_values(t) {
            return Err(self.unheld(value_node(t.index)));
        }
        Ok(())
    }

    /// The tensor's values, row-major in memory order (batch, output, input axes).
    pub fn values(&self, t: &Tensor) -> Result<Vec<f64>, TensorError> {
        self.check_tensor(t)?;
        self.check_holds_values(t)?;
        self.buffers
            .read_values(value_node(t.index))
            .map_err(|e| error(e.message))
    }

    /// The tensor's cells exactly as stored (row-major in memory order): integers as integers
    /// (all 64 bits), 128-bit words as their four words, floats as numbers.
    pub fn cells(&self, t: &Tensor) -> Result<Vec<Value>, TensorError> {
        self.check_tensor(t)?;
        self.check_holds_values(t)?;
        self.buffers
            .read_cells(value_node(t.index))
            .map_err(|e| error(e.message))
    }

    /// Sets the tensor's cells (row-major in memory order), each stored as the tensor's
    /// precision holds it.
    pub fn set_cells(&mut self, t: &Tensor, cells: &[Value]) -> Result<(), TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        self.buffers
            .set_cells(value_node(t.index), cells)
            .map_err(|e| error(format!("set cells of '{}': {e}", t.label())))?;
        self.holds.insert(value_node(t.index));
        Ok(())
    }

    /// The gradient of the last backprop's loss with respect to the tensor: a leaf, or a
    /// computed tensor a backprop routine keeps the gradient of.
    pub fn grad(&self, t: &Tensor) -> Result<Vec<f64>, TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.check_grad_holds(t)?;
        self.buffers
            .read_values(grad_node(t.index))
            .map_err(|e| error(e.message))
    }

    /// The gradient of the last backprop's loss with respect to the tensor (as [`Context::grad`]),
    /// its cells exactly as stored: integers as integers (all 64 bits).
    pub fn grad_cells(&self, t: &Tensor) -> Result<Vec<Value>, TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.check_grad_holds(t)?;
        self.buffers
            .read_cells(grad_node(t.index))
            .map_err(|e| error(e.message))
    }

    /// Sets the gradient of the tensor (row-major in memory order), as a backprop routine keeps
    /// it, for an update routine to read: gradients merged from elsewhere (other processes of a
    /// data-parallel run, say).
    pub fn set_grad(&mut self, t: &Tensor, values: &[f64]) -> Result<(), TensorError> {
        self.check_tensor(t)?;
        self.check_grad_kept(t)?;
        self.buffers
            .set_values(grad_node(t.index), values)
            .map_err(|e| error(format!("set the gradient of '{}': {e}", t.label())))?;
        self.holds.insert(grad_node(t.index));
        Ok(())
    }

    /// Refuses a gradient no routine that ran has computed (nor the host set).
    fn check_grad_holds(&self, t: &Tensor) -> Result<(), TensorError> {
        if self.holds.contains(&grad_node(t.index)) {
            return Ok(());
        }
        Err(self.unheld(grad_node(t.index)))
    }

    /// Refuses a tensor whose gradient no backprop routine keeps.
    fn check_grad_kept(&self, t: &Tensor) -> Result<(), TensorError> {
        if self.grads_kept.contains(&t.index) {
            return Ok(());
        }
        Err(error(format!(
            "no gradient of '{}' is kept: backprop keeps the gradients of the differentiable \
             leaves its loss depends on, backprop_keeping those of computed tensors too",
            t.label()
        )))
    }

    /// Sets the tensor's values (row-major in memory order).
    pub fn set_values(&mut self, t: &Tensor, values: &[f64]) -> Result<(), TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        self.buffers
            .set_values(value_node(t.index), values)
            .map_err(|e| error(format!("set values of '{}': {e}", t.label())))?;
        self.holds.insert(value_node(t.index));
        Ok(())
    }

    /// The tensor's dims in memory order (batch, output, input).
    pub fn dims(&mut self, t: &Tensor) -> Result<Vec<usize>, TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        Ok(self.nodes[&value_node(t.index)].dims.clone())
    }

    /// The tensor's dims by kind: batch, input and output axes (after inference).
    pub fn rows(&mut self, t: &Tensor) -> Result<[Vec<usize>; 3], TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let state = self.graph.state.lock();
        let shape = state.inference.closed_shape(state.tensors[t.index].shape)?;
        Ok([Kind::Batch, Kind::Input, Kind::Output].map(|kind| {
            shape
                .row(kind)
                .dims()
                .map(|d| d.ground_size().unwrap_or(1))
                .collect()
        }))
    }

    /// The projections of the assignments computing `t` (one per forward assignment of its
    /// operation), as its routine lowers them; empty for a leaf.
    pub fn projections(&mut self, t: &Tensor) -> Result<Vec<Projections>, TensorError> {
        self.concretize()?;
        self.check_tensor(t)?;
        let forward: Vec<Asg> = {
            let state = self.graph.state.lock();
            match state.tensors[t.index].op {
                Some(op) if state.ops[op].result == t.index => state.ops[op].forward.clone(),
                _ => Vec::new(),
            }
        };
        let mut records = Vec::new();
        for asg in &forward {
            match self.assignment(asg)? {
                Assignment::Accum { projections, .. }
                | Assignment::Block { projections, .. }
                | Assignment::RevSides { projections, .. }
                | Assignment::Gather { projections, .. }
                | Assignment::ScatterAdd { projections, .. } => records.push(projections),
                _ => {}
            }
        }
        Ok(records)
    }

    /// The tensor's values with its dims ([`Array`]), row-major in memory order: batch, output,
    /// then input axes.
    pub fn array(&mut self, t: &Tensor) -> Result<Array, TensorError> {
        let [batch, input, output] = self.rows(t)?;
        let values = self.values(t)?;
        Array::new(batch, output, input, values)
            .map_err(|e| error(format!("array of '{}': {e}", t.label())))
    }

    /// Writes the tensor's values to `path` as a `.npy` array, replacing the file whole or not
    /// at all: its dims in memory order (batch, output, input), the dtype of its precision
    /// ([`npy::Dtype::of_precision`]: bf16, which numpy lacks, widens exactly to float32; the
    /// 128-bit word, not a number, is refused).
    pub fn save_npy(&mut self, t: &Tensor, path: impl AsRef<Path>) -> Result<(), TensorError> {
        let path = path.as_ref();
        let fail = |why: String| {
            error(format!(
                "save_npy of '{}' to {}: {why}",
                t.label(),
                path.display()
            ))
        };
        let precision = t.precision();
        let dtype = npy::Dtype::of_precision(precision).ok_or_else(|| {
            fail(format!(
                "its precision {precision} is not a number numpy reads"
            ))
        })?;
        let dims = self.dims(t)?;
        let cells = self.cells(t).map_err(|e| fail(e.message))?;
        npy::write(path, &dims, dtype, &cells).map_err(|e| fail(e.message))
    }

    /// Sets the tensor's values from the `.npy` file at `path`, whose dims must be the tensor's
    /// in memory order (batch, output, input), in C or Fortran order, of any dtype of numbers
    /// (each cell stored as the tensor's precision holds it, as [`Context::set_cells`] stores
    /// it). A file that is not such an array, or of other dims, is an error naming the file, the
    /// tensor and both shapes; nothing is allocated for a file's claims beyond the tensor's size.
    pub fn load_npy(&mut self, t: &Tensor, path: impl AsRef<Path>) -> Result<(), TensorError> {
        let path = path.as_ref();
        let fail = |why: String| {
            error(format!(
                "load_npy of {} into '{}': {why}",
                path.display(),
                t.label()
            ))
        };
        let dims = self.dims(t)?;
        let reader = npy::open(path).map_err(|e| fail(e.message))?;
        let header = reader.header();
        let same = header.dims.len() == dims.len()
            && header.dims.iter().zip(&dims).all(|(&f, &d)| f == d as u64);
        if !same {
            let shown: Vec<String> = dims.iter().map(usize::to_string).collect();
            return Err(fail(format!(
                "the file holds an array of dims ({}), the tensor has dims ({}) (shape {})",
                header.dims_text(),
                shown.join(", "),
                t.shape()
            )));
        }
        let (_, cells) = reader
            .read_cells(dims.iter().product())
            .map_err(|e| fail(e.message))?;
        self.set_cells(t, &cells).map_err(|e| fail(e.message))
    }

    /// The tensor printed: its label, closed shape `batch|input->output` and values.
    pub fn describe(&mut self, t: &Tensor) -> Result<String, TensorError> {
        self.concretize()?;
        let values = self.values(t)?;
        let shown: Vec<String> = values.iter().map(|v| format!("{v:.6}")).collect();
        Ok(format!(
            "{} : {} = [{}]",
            t.label(),
            t.shape(),
            shown.join(", ")
        ))
    }
}

fn accum(asg: &Asg, lhs: NodeId, rhs: Rhs, projections: Projections) -> Assignment {
    Assignment::Accum {
        initialize_neutral: asg.initialize_neutral,
        accum: asg.accum,
        lhs,
        rhs,
        projections,
    }
}

/// `p` with the placeholder of a slice's position renamed to its static index.
fn with_slice(p: &Projections, slice: Symbol) -> Projections {
    let rename = |s: Symbol| if s == SLICE_PLACEHOLDER { slice } else { s };
    let mut p = p.clone();
    p.lhs_index = p.lhs_index.iter().map(|i| i.rename(&rename)).collect();
    p.rhs_index = p
        .rhs_index
        .iter()
        .map(|axes| axes.iter().map(|i| i.rename(&rename)).collect())
        .collect();
    p
}

/// Every node `assignment` reads or writes.
fn nodes_of(assignment: &Assignment, nodes: &mut BTreeSet<NodeId>) {
    if let Assignment::Seq(parts) = assignment {
        parts.iter().for_each(|a| nodes_of(a, nodes));
        return;
    }
    let (reads, writes) = accesses(assignment);
    nodes.extend(reads);
    nodes.extend(writes);
}

/// The buffers `assignments` read before any of them writes them (in order), and every buffer
/// they write.
fn reads_before_writes(assignments: &[Assignment]) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    fn walk(a: &Assignment, first: &mut BTreeSet<NodeId>, written: &mut BTreeSet<NodeId>) {
        if let Assignment::Seq(parts) = a {
            parts.iter().for_each(|part| walk(part, first, written));
            return;
        }
        let (reads, writes) = accesses(a);
        first.extend(reads.into_iter().filter(|n| !written.contains(n)));
        written.extend(writes);
    }
    let (mut first, mut written) = (BTreeSet::new(), BTreeSet::new());
    for a in assignments {
        walk(a, &mut first, &mut written);
    }
    (first, written)
}

/// What one assignment (not a sequence) reads and what it writes. An accumulation into what its
/// targets held reads them too.
fn accesses(a: &Assignment) -> (Vec<NodeId>, Vec<NodeId>) {
    let accumulating = |initialize_neutral: bool, accum: Binop, targets: &[NodeId]| {
        if !initialize_neutral && accum != Binop::Arg2 {
            targets.to_vec()
        } else {
            Vec::new()
        }
    };
    match a {
        Assignment::Noop | Assignment::Seq(_) => (Vec::new(), Vec::new()),
        Assignment::Accum {
            initialize_neutral,
            accum,
            lhs,
            rhs,
            ..
        } => {
            let mut reads: Vec<NodeId> = rhs.operands().into_iter().collect();
            reads.extend(accumulating(*initialize_neutral, *accum, &[*lhs]));
            (reads, vec![*lhs])
        }
        Assignment::Block {
            initialize_neutral,
            accum,
            lhs,
            sources,
            ..
        } => {
            let mut reads = sources.clone();
            reads.extend(accumulating(*initialize_neutral, *accum, &[*lhs]));
            (reads, vec![*lhs])
        }
        Assignment::RevSides {
            initialize_neutral,
            accum,
            source,
            targets,
            ..
        } => {
            let mut reads = vec![*source];
            reads.extend(accumulating(*initialize_neutral, *accum, targets));
            (reads, targets.clone())
        }
        Assignment::SetVecUnop { lhs, rhs, .. } => (vec![*rhs], vec![*lhs]),
        Assignment::Gather {
            lhs, table, ids, ..
        } => (vec![*table, *ids], vec![*lhs]),
        Assignment::ScatterAdd {
            target,
            source,
            ids,
            ..
        } => (vec![*source, *ids, *target], vec![*target]),
        Assignment::Fetch { node, op } => {
            let reads = match op {
                FetchOp::Slice { source, .. } => vec![*source],
                _ => Vec::new(),
            };
            (reads, vec![*node])
        }
    }
}

/// A name to write in code for the tensor labelled `label`: the label itself when it is one
/// identifier, else a placeholder.
fn variable_name(label: &str) -> &str {
    let identifier = label
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && label.chars().all(|c| c.is_alphanumeric() || c == '_');
    if identifier { label } else { "t" }
}

/// `assignment`, an update, made to keep its target as it was unless the one-cell node `ok` (a
/// finite check) is 0: a set falls back to the target's cell, an accumulation to its
/// accumulator's neutral element. An update resetting its target first has no such fallback
/// and is left as it is.
fn guard_by(assignment: &mut Assignment, ok: NodeId) {
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
