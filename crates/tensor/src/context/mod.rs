//! Contexts: a graph's tensors made concrete on a backend. A context finishes shape inference,
//! gives every tensor a buffer (and a gradient buffer), compiles routines — forward, backprop
//! (forward, then gradients from `loss.grad = 1`), parameter init, and any assignments — and runs
//! them, with host access to values and gradients.
//!
//! Buffers live in the context across routines. A routine keeps what its caller may read (its
//! outputs, parameters and their gradients) and is free to fuse everything else away.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use rcannl_backends::phases::{self, Phase};
use rcannl_backends::settings::install_logger;
use rcannl_backends::{Backend, Buffers, Executable};
use rcannl_ir::{Assignment, NodeId, Projections, Rhs, Symbol, TensorNode};
use rcannl_shape::OpId;
use rcannl_shape::spec::Kind;

use crate::backend_choice::configured_backend_or_refusal;
use crate::graph::precision::{self, Resolved};
use crate::graph::{
    Asg, AsgRhs, DataStart, Graph, LeafKind, Ref, TensorError, TensorErrorKind, error, error_of,
};

mod backprop;
mod compile;
mod compose;
mod draws;
mod dump;
mod host;
mod init;
mod print;
mod run;
mod update;

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
    /// The assignments it was compiled from, printed in `cd!` notation when asked.
    code: print::Code,
}

/// Identities of contexts, unique in the process.
static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Routine {
    /// The optimized loop IR, printed.
    pub fn describe(&self) -> String {
        self.executable.routine().to_string()
    }

    /// The assignments the routine was compiled from, before optimization, in `cd!` notation, one
    /// a line (see [`crate::print`]): tensors by label, gradients as `label.grad`.
    ///
    /// ```
    /// use rcannl_tensor::{Context, Graph, TensorError};
    ///
    /// let graph = Graph::new();
    /// let w = graph.param("w").shape("|2->3").build();
    /// let x = graph.data("x").shape("2").build();
    /// let y = &w * &x;
    /// let mut ctx = Context::new(&graph);
    /// let forward = ctx.forward(&[&y])?;
    /// assert_eq!(forward.code(), format!("{} =:+ w * x ~logic:\"@\";\n", y.label()));
    /// # Ok::<(), TensorError>(())
    /// ```
    pub fn code(&self) -> &str {
        self.code.text()
    }

    /// The code the backend generated (C on the C backend), if any.
    pub fn source(&self) -> Option<String> {
        self.executable.source().map(str::to_owned)
    }

    /// Which of the backend's builds runs, where it has several: on the C backend, a routine the
    /// kernel cache did not hold runs a quick build while the optimized one is made (the
    /// `tiered` setting), with the same results.
    pub fn tier(&self) -> Option<String> {
        self.executable.tier()
    }

    /// Waits until the routine runs the build it keeps (on the C backend, the optimized one:
    /// see [`Routine::tier`]); for timing steady-state steps. The error is that build's; the
    /// routine keeps running the quick build, with the same results.
    pub fn finish_compiling(&self) -> Result<(), TensorError> {
        self.executable.finish_compiling().map_err(|e| {
            error_of(
                TensorErrorKind::Compile,
                format!("routine {}: {e}", self.executable.routine().name),
            )
            .caused_by(e)
        })
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
    /// For each node an update reads as it was before the update, the scratch node holding
    /// that copy.
    prior_copies: HashMap<NodeId, NodeId>,
    seed: u64,
    next_scratch: u32,
    /// The numbers of tensors, inference operations, constraints on captures and precision
    /// choices when the context was last made concrete: nothing to do while the graph has not
    /// changed.
    concrete: (usize, usize, usize, usize),
}

/// The name projections give a batch slice's position until an assignment names its static index.
const SLICE_PLACEHOLDER: Symbol = Symbol(u32::MAX);

/// Node ids of the scratch nodes routines make for themselves (random bits): far above the
/// tensors' own.
const FIRST_SCRATCH: u32 = 1 << 31;

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
    /// A context on the backend the `backend` setting (`RCANNL_BACKEND`, see
    /// `rcannl_backends::settings`) chooses (`gpu`, `cc` or `interp`), else on the
    /// C backend when a C compiler runs, else on the interpreter.
    ///
    /// A choice that cannot be honoured (no GPU adapter, no C compiler, a value naming no
    /// backend) is not replaced by another backend: every routine of this context then fails to
    /// compile, with an error naming the variable, its value and what was looked for.
    /// [`chosen_backend`](crate::backend_choice::chosen_backend) asks beforehand.
    pub fn new(graph: &Graph) -> Context {
        Context::with_backend(graph, configured_backend_or_refusal())
    }

    /// A context on `backend` for `graph`: no buffers or compiled routines yet, seed 42. The
    /// first context gives the process the logger of the `log_level` setting, unless the program
    /// installed one of its own (see `rcannl_backends::settings::logging`).
    pub fn with_backend(graph: &Graph, backend: Box<dyn Backend>) -> Context {
        install_logger();
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
            prior_copies: HashMap::new(),
            seed: 42,
            next_scratch: FIRST_SCRATCH,
            concrete: (0, 0, 0, 0),
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
            state.precision_changes,
        );
        if size == self.concrete {
            return Ok(());
        }
        phases::timed(Phase::Inference, || state.inference.finish())
            .map_err(|e| state.locate_later(e))?;
        for op in state.inference.ops() {
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
        let precisions = precision::resolve(state, |t| {
            let settled = |id| self.nodes.get(&id).map(|node: &TensorNode| node.precision);
            Some(Resolved {
                value: settled(value_node(t))?,
                grad: settled(grad_node(t))?,
            })
        })?;
        for (data, resolved) in state.tensors.iter_mut().zip(&precisions) {
            data.precision = resolved.value;
            data.grad_resolved = Some(resolved.grad);
        }
        for (t, data) in state.tensors.iter().enumerate() {
            if let Some(existing) = self.nodes.get(&value_node(t)) {
                // Made concrete before: only its margins can have grown since (margins only
                // grow, from zero where no operation asked for any).
                match margins.get(&data.shape) {
                    Some(padding) if *padding != existing.padding => {
                        return Err(error(format!(
                            "tensor '{}' needs margins {padding:?} after its buffer was made \
                             with {:?}",
                            data.label, existing.padding
                        )));
                    }
                    _ => continue,
                }
            }
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
            for (id, label, precision) in [
                (value_node(t), data.label.clone(), precisions[t].value),
                (
                    grad_node(t),
                    format!("grad {}", data.label),
                    precisions[t].grad,
                ),
            ] {
                let mut node = TensorNode::new(id.0, &label, precision, &dims);
                node.padding = padding.clone();
                self.buffers
                    .insert(node.clone())
                    .map_err(|e| error(format!("tensor '{}' ({shape}): {e}", data.label)))?;
                // Its buffer exists: its number of cells fits in memory.
                let cells = node.len();
                self.nodes.insert(id, node);
                if id != value_node(t) {
                    continue;
                }
                let set = |buffers: &mut Buffers, values: &[f64]| {
                    buffers.set_values(id, values).map_err(|e| error(e.message))
                };
                match &data.leaf {
                    Some(LeafKind::Data(DataStart::Values(values))) => {
                        set(&mut self.buffers, values)?
                    }
                    // A buffer starts as zeros, +0.0 in every precision: filling it with +0.0
                    // writes nothing.
                    Some(LeafKind::Data(DataStart::Fill(c))) if c.to_bits() == 0 => {}
                    Some(LeafKind::Data(DataStart::Fill(c))) => {
                        set(&mut self.buffers, &vec![*c; cells])?
                    }
                    _ => continue,
                }
                self.holds.insert(id);
            }
        }
        self.concrete = size;
        Ok(())
    }

    /// The assignment `asg` stands for, over this context's nodes.
    fn assignment(&self, asg: &Asg) -> Result<Assignment, TensorError> {
        let op = &self.projections[&asg.projections.op];
        let mut p = match &asg.projections.view {
            Some((lhs, rhs)) => op.view(*lhs, rhs),
            None => op.clone(),
        };
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
                projections: p,
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
