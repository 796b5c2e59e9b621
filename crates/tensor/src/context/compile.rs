//! Compiling routines: the operations a set of outputs needs, the fetches filling constant
//! leaves, and the buffers a routine reads before writing them and leaves holding values.

use std::collections::{BTreeMap, BTreeSet};

use rcannl_backends::phases::{self, Phase};
use rcannl_backends::settings;
use rcannl_backends::trace::{Sink, TRACE_FILE};
use rcannl_ir::optimize::optimize_owned;
use rcannl_ir::{
    Assignment, Binop, FetchOp, MemoryMode, NodeId, Routine as IrRoutine, check_half_prec_constants,
};

use crate::graph::{Asg, LeafKind, TensorError, TensorErrorKind, error_of};
use crate::tensor::Tensor;

use super::print::Code;
use super::{Context, Routine, dump, value_node};

impl Context {
    /// The ops computing `outputs`, in creation order (which is an order of dependencies), and
    /// the leaves they read.
    pub(super) fn ancestry(&self, outputs: &[usize]) -> (Vec<usize>, BTreeSet<usize>) {
        let (ops, needed) = self.graph.state.lock().subgraph(outputs);
        (ops.into_iter().collect(), needed)
    }

    /// The fetches that fill constant leaves among `tensors`.
    pub(super) fn leaf_fetches(&self, tensors: &BTreeSet<usize>) -> Vec<Assignment> {
        let state = self.graph.state.lock();
        tensors
            .iter()
            .filter_map(|&t| {
                let op = match state.tensors[t].leaf.as_ref()? {
                    LeafKind::Constant(c) => FetchOp::Constant(*c),
                    LeafKind::RangeOverOffsets => FetchOp::RangeOverOffsets,
                    LeafKind::SelfId => FetchOp::EmbedSelfId,
                    LeafKind::Seed => FetchOp::Constant(self.seed as f64),
                    LeafKind::Static(symbol) => FetchOp::EmbedStatic(*symbol),
                    LeafKind::Dim(capture) => {
                        FetchOp::EmbedDim(state.inference.capture_value(capture).unwrap_or(0))
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
    pub(super) fn compile(
        &mut self,
        name: &str,
        assignments: Vec<Assignment>,
        keep: &BTreeSet<NodeId>,
    ) -> Result<Routine, TensorError> {
        self.compile_reading(name, assignments, keep, None)
    }

    /// [`Context::compile`], the buffers the routine reads before writing them being
    /// `read_first` where given (else found from the assignments).
    pub(super) fn compile_reading(
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
        let (params, chosen) = {
            let state = self.graph.state.lock();
            let params: BTreeSet<usize> = (0..state.tensors.len())
                .filter(|&t| matches!(state.tensors[t].leaf, Some(LeafKind::Param(_))))
                .collect();
            let chosen: BTreeMap<NodeId, (MemoryMode, String)> = state
                .memory_modes
                .iter()
                .map(|(&t, &mode)| (value_node(t), (mode, state.tensors[t].label.clone())))
                .filter(|(id, _)| used.contains(id))
                .collect();
            (params, chosen)
        };
        let kept_by_routine =
            |id: &NodeId| keep.contains(id) || params.contains(&((id.0 / 2) as usize));
        if let Some((_, (mode, label))) = chosen
            .iter()
            .find(|(id, (mode, _))| *mode != MemoryMode::Materialized && kept_by_routine(id))
        {
            return Err(error_of(
                TensorErrorKind::Compile,
                format!(
                    "routine {name}: tensor '{label}' was made {mode}, but this routine keeps its \
                 values (a parameter, or a tensor it hands back): it stays materialized"
                ),
            ));
        }
        let kept = |id: &NodeId| {
            kept_by_routine(id)
                || chosen
                    .get(id)
                    .is_some_and(|(mode, _)| *mode == MemoryMode::Materialized)
        };
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
            } else if let Some((mode, _)) = chosen.get(id) {
                node.memory_mode = Some(*mode);
            }
            node
        });
        let assignments = Assignment::Seq(assignments);
        let routine = phases::timed(Phase::Lowering, || {
            IrRoutine::lower(name, &assignments, nodes)
        })
        .map_err(|e| {
            error_of(TensorErrorKind::Compile, format!("routine {name}: {e}")).caused_by(e)
        })?;
        let code = Code::new(self, assignments, &used);
        self.compile_routine(routine, needs, writes, code)
    }

    /// Optimizes and compiles `routine`, which reads the buffers `needs` before writing them and
    /// leaves `writes` holding values; `code` is its assignments. Where the
    /// `debug_dir` setting names a folder, all of them are written there (see `dump`).
    pub(super) fn compile_routine(
        &mut self,
        routine: IrRoutine,
        needs: Vec<NodeId>,
        writes: Vec<NodeId>,
        code: Code,
    ) -> Result<Routine, TensorError> {
        let lowered = dump::lowered_if_asked(&routine);
        let name = routine.name.clone();
        let optimized =
            phases::timed(Phase::Optimization, || optimize_owned(routine)).map_err(|e| {
                error_of(TensorErrorKind::Compile, format!("routine {name}: {e}")).caused_by(e)
            })?;
        // OCANNL's check of large constants in fp8 and f16 computations, after folding.
        let cutoff = settings::limit(&settings::CHECK_HALF_PREC_CONSTANTS_CUTOFF)
            .map_err(|e| error_of(TensorErrorKind::Compile, e.message))?;
        check_half_prec_constants(&optimized, cutoff).map_err(|e| {
            error_of(TensorErrorKind::Compile, format!("routine {name}: {e}")).caused_by(e)
        })?;
        for node in optimized.nodes.values() {
            if node.memory_mode != Some(MemoryMode::Virtual) && !self.nodes.contains_key(&node.id) {
                self.buffers.insert(node.clone()).map_err(|e| {
                    error_of(TensorErrorKind::Compile, format!("routine {name}: {e}")).caused_by(e)
                })?;
            }
        }
        let mut executable = self.backend.compile_owned(optimized).map_err(|e| {
            error_of(TensorErrorKind::Compile, format!("routine {name}: {e}")).caused_by(e)
        })?;
        log::debug!("routine {name}: compiled on {}", self.backend.name());
        let folder = dump::write_if_asked(&dump::Compiled {
            code: &code,
            lowered,
            optimized: executable.routine(),
            source: executable.source(),
            backend: self.backend.name(),
        })?;
        if let Some(folder) = folder {
            // A traced routine's lines go beside its code.
            executable.trace_into(Sink::File(folder.join(TRACE_FILE)));
        }
        Ok(Routine {
            executable,
            context: self.id,
            needs,
            writes,
            code,
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
}

/// Every node `assignment` reads or writes.
fn nodes_of(assignment: &Assignment, nodes: &mut BTreeSet<NodeId>) {
    match assignment {
        Assignment::Seq(parts) => return parts.iter().for_each(|a| nodes_of(a, nodes)),
        Assignment::BlockComment { body, .. } => return nodes_of(body, nodes),
        _ => {}
    }
    let (reads, writes) = accesses(assignment);
    nodes.extend(reads);
    nodes.extend(writes);
}

/// The buffers `assignments` read before any of them writes them (in order), and every buffer
/// they write.
pub(super) fn reads_before_writes<'a>(
    assignments: impl IntoIterator<Item = &'a Assignment>,
) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    fn walk(a: &Assignment, first: &mut BTreeSet<NodeId>, written: &mut BTreeSet<NodeId>) {
        match a {
            Assignment::Seq(parts) => return parts.iter().for_each(|p| walk(p, first, written)),
            Assignment::BlockComment { body, .. } => return walk(body, first, written),
            _ => {}
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
        Assignment::Noop | Assignment::Seq(_) | Assignment::BlockComment { .. } => {
            (Vec::new(), Vec::new())
        }
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
