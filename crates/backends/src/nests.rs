//! What backends learn of a routine's nests before they generate code for it: which top-level
//! statements make a kernel, which loops may run their iterations at once, and the least and
//! greatest value of an index.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use rcannl_ir::{
    GemmPlan, Index, LocalId, LoopVar, NodeId, Routine, Stmt, Symbol, Var, reads_own_iteration,
};

/// A kernel of a routine: a group of its top-level statements.
#[derive(Debug, Clone, Copy)]
pub enum Group<'a> {
    /// A loop whose iterations may run in any order, at once ([`splittable`]), after the
    /// declarations of the locals only it reads (values invariant in it, computed once per
    /// thread or invocation before its iterations).
    Parallel {
        /// The declarations of the locals only the loop reads, run before its iterations.
        preamble: &'a [Stmt],
        /// The loop (a `Stmt::For`).
        stmt: &'a Stmt,
    },
    /// Statements that run one after another.
    Serial {
        /// The statements, in order.
        stmts: &'a [Stmt],
    },
    /// A matrix product, with the nest it was recognized in.
    Gemm {
        /// The recognized product.
        plan: &'a GemmPlan,
        /// The statements it was recognized in: what it means.
        nest: &'a [Stmt],
    },
}

/// The most statements a serial kernel takes where a run can be cut (no local crosses the cut).
/// A model with thousands of scalar constants fills them all in one run: one kernel of
/// thousands of statements (and buffers) is slow to compile, while runs of a few dozen are
/// mostly alike and, alike, one function (`cc::identity`).
pub const MAX_SERIAL_STATEMENTS: usize = 64;

/// The statements `body` (a routine's top level, or a product's nest) as kernels: each
/// splittable loop alone (with the run of local declarations just before it when only it reads
/// them), the runs of other statements between them together, a run longer than
/// [`MAX_SERIAL_STATEMENTS`] cut where its content says (the same place in each repetition of a
/// pattern, whatever the depth of the model repeating it) and no local crosses the cut. A local cannot cross kernels otherwise: a statement reading a local declared at the
/// top level stays in the serial run, and a run that declares a local extends to the last
/// statement reading it.
pub fn kernel_groups<'a>(routine: &Routine, body: &'a [Stmt]) -> Vec<Group<'a>> {
    // For each top-level local, the last top-level statement reading it, and whether any
    // statement sets it after its declaration.
    let mut last_use: HashMap<LocalId, usize> = HashMap::new();
    let mut reassigned: HashSet<LocalId> = HashSet::new();
    for (i, stmt) in body.iter().enumerate() {
        stmt.walk(&mut |s| {
            for value in s.values() {
                value.for_each_local(&mut |id| {
                    last_use.insert(id, i);
                });
            }
            if let Stmt::SetLocal { id, .. } = s {
                last_use.insert(*id, i);
                reassigned.insert(*id);
            }
        });
    }
    let mut serial_until = 0;
    // Whether a serial run may be cut before each statement: no top-level local declared before
    // it is read at or after it.
    let mut cuttable = vec![false; body.len()];
    let mut groups = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        let preamble = preamble_end(body, i, &last_use, &reassigned)
            .filter(|&end| splittable(&body[end], routine));
        if let Some(end) = preamble {
            if start < i {
                push_serial(&mut groups, routine, body, start..i, &cuttable);
            }
            groups.push(Group::Parallel {
                preamble: &body[i..end],
                stmt: &body[end],
            });
            start = end + 1;
            i = end + 1;
            continue;
        }
        cuttable[i] = i > serial_until;
        let stmt = &body[i];
        if let Stmt::Local { id, .. } = stmt {
            serial_until = serial_until.max(last_use.get(id).copied().unwrap_or(i));
        }
        let group = match stmt {
            _ if i <= serial_until && serial_until > 0 => None,
            Stmt::Gemm { plan, nest } => Some(Group::Gemm { plan, nest }),
            stmt if splittable(stmt, routine) => Some(Group::Parallel {
                preamble: &[],
                stmt,
            }),
            _ => None,
        };
        if let Some(group) = group {
            if start < i {
                push_serial(&mut groups, routine, body, start..i, &cuttable);
            }
            groups.push(group);
            start = i + 1;
        }
        i += 1;
    }
    if start < body.len() {
        push_serial(&mut groups, routine, body, start..body.len(), &cuttable);
    }
    groups
}

/// The serial run `body[run]` as kernels, cut where [`serial_cuts`] says.
fn push_serial<'a>(
    groups: &mut Vec<Group<'a>>,
    routine: &Routine,
    body: &'a [Stmt],
    run: std::ops::Range<usize>,
    cuttable: &[bool],
) {
    let mut from = run.start;
    for cut in serial_cuts(routine, body, run.clone(), cuttable) {
        groups.push(Group::Serial {
            stmts: &body[from..cut],
        });
        from = cut;
    }
    groups.push(Group::Serial {
        stmts: &body[from..run.end],
    });
}

/// Where a serial run `body[run]` longer than [`MAX_SERIAL_STATEMENTS`] is cut (each a position
/// that starts a kernel), among the positions `cuttable` allows: chosen by the statements'
/// content, not their count, so that a run repeating a pattern (a deep model's gradients zeroed
/// layer by layer) is cut at the same place in each repetition, and its kernels are alike, one
/// function whatever the model's depth. A cut counted every [`MAX_SERIAL_STATEMENTS`] would fall
/// at another place in each repetition when the pattern's length does not divide it: as many
/// functions as the pattern has statements.
///
/// The choice is winnowing's (as in document fingerprinting): in every window of
/// [`MAX_SERIAL_STATEMENTS`] consecutive positions, the position whose statement's
/// [`structure_hash`] is least, the same one while it stays in the window and no lesser one
/// enters it. Every window holding a cuttable position has a cut, so kernels stay that short
/// wherever cuts are allowed; a run of identical statements is cut every window's length.
fn serial_cuts(
    routine: &Routine,
    body: &[Stmt],
    run: std::ops::Range<usize>,
    cuttable: &[bool],
) -> Vec<usize> {
    if run.len() <= MAX_SERIAL_STATEMENTS {
        return Vec::new();
    }
    let positions: Vec<usize> = (run.start + 1..run.end).collect();
    let hashes: Vec<u64> = positions
        .iter()
        .map(|&p| structure_hash(&body[p], routine))
        .collect();
    let window = MAX_SERIAL_STATEMENTS;
    let mut cuts = Vec::new();
    let mut chosen: Option<usize> = None;
    // The windows are whole ones: the run is longer than one.
    for end in window - 1..positions.len() {
        let first = end + 1 - window;
        let least = |from: usize| {
            (from..=end)
                .filter(|&k| cuttable[positions[k]])
                .min_by_key(|&k| (hashes[k], std::cmp::Reverse(k)))
        };
        chosen = match chosen {
            Some(k) if k >= first => {
                if cuttable[positions[end]] && hashes[end] < hashes[k] {
                    Some(end)
                } else {
                    Some(k)
                }
            }
            _ => least(first),
        };
        if let Some(k) = chosen
            && cuts.last() != Some(&positions[k])
        {
            cuts.push(positions[k]);
        }
    }
    cuts
}

/// A hash of what a statement computes over which sizes, blind to which nodes, loop variables
/// and locals it names: statements that differ only in those hash alike.
fn structure_hash(stmt: &Stmt, routine: &Routine) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    let node = |hasher: &mut rustc_hash::FxHasher, id: &NodeId| {
        if let Some(node) = routine.nodes.get(id) {
            node.precision.hash(hasher);
            node.buffer_dims().hash(hasher);
        }
    };
    stmt.walk(&mut |s| {
        std::mem::discriminant(s).hash(&mut hasher);
        match s {
            Stmt::For { range, .. } => range.hash(&mut hasher),
            Stmt::Set {
                node: id, index, ..
            } => {
                node(&mut hasher, id);
                index.len().hash(&mut hasher);
            }
            Stmt::SetVec { node: id, .. } => node(&mut hasher, id),
            Stmt::Fill { node: id, value } | Stmt::FillMargins { node: id, value } => {
                node(&mut hasher, id);
                value.to_bits().hash(&mut hasher);
            }
            Stmt::Local { precision, .. } => precision.hash(&mut hasher),
            Stmt::ScatterAdd { target, .. } => node(&mut hasher, &target.node),
            Stmt::SetLocal { .. } | Stmt::Gemm { .. } => {}
        }
    });
    hasher.finish()
}

/// Where the run of local declarations starting at `body[start]` ends, if it is a preamble: a
/// loop follows it, every local of the run is read by nothing after that loop and set by nothing
/// after its declaration, and the run's values read no local declared before it.
fn preamble_end(
    body: &[Stmt],
    start: usize,
    last_use: &HashMap<LocalId, usize>,
    reassigned: &HashSet<LocalId>,
) -> Option<usize> {
    let mut declared = HashSet::new();
    let mut end = start;
    while let Some(Stmt::Local { id, value, .. }) = body.get(end) {
        let mut reads_outside = false;
        value.for_each_local(&mut |read| reads_outside |= !declared.contains(&read));
        if reads_outside || reassigned.contains(id) {
            return None;
        }
        declared.insert(*id);
        end += 1;
    }
    let loop_follows = matches!(body.get(end), Some(Stmt::For { .. }));
    let used_only_there = declared
        .iter()
        .all(|id| last_use.get(id).is_none_or(|&last| last <= end));
    (end > start && loop_follows && used_only_there).then_some(end)
}

/// Whether the iterations of a top-level loop can run in any order, on any thread: every write
/// in it lands in a stretch of its buffer that no other iteration writes (the loop variable's
/// stride exceeds what the inner loops span), or along an axis whose position the loop variable
/// alone moves, and every read of a node written in it reads only its own iteration's cells
/// ([`reads_own_iteration`]).
pub fn splittable(stmt: &Stmt, routine: &Routine) -> bool {
    let Stmt::For { var, body, .. } = stmt else {
        return false;
    };
    let mut ranges: HashMap<LoopVar, usize> = HashMap::new();
    let mut writes: BTreeMap<NodeId, Vec<Vec<Index>>> = BTreeMap::new();
    let mut safe = true;
    collect(body, &mut ranges, &mut |stmt, ranges| match stmt {
        Stmt::Set { node, index, .. } => {
            let info = &routine.nodes[node];
            let (stride, span) = flat_extent(index, &info.buffer_dims(), *var, ranges);
            safe &= stride.unsigned_abs() > span || index.iter().any(|axis| axis.moves_alone(*var));
            writes.entry(*node).or_default().push(index.clone());
        }
        Stmt::SetVec {
            node, offset, op, ..
        } => {
            let length = op.length(routine.nodes[node].precision) as u64;
            let (stride, span) = flat_extent(std::slice::from_ref(offset), &[1], *var, ranges);
            safe &= stride.unsigned_abs() >= span + length;
            writes.entry(*node).or_default();
        }
        Stmt::ScatterAdd { target, .. } => {
            let dims = routine.nodes[&target.node].buffer_dims();
            let (stride, span) = flat_extent(&target.index, &dims, *var, ranges);
            // The id may select any cell along its axis, in whichever iteration.
            let axis_stride = target.stride(&dims);
            let span = span + (axis_stride * target.size.saturating_sub(1)) as u64;
            let other_axis_moves = target
                .index
                .iter()
                .enumerate()
                .any(|(axis, index)| axis != target.axis && index.moves_alone(*var));
            safe &= stride.unsigned_abs() > span || other_axis_moves;
            // No position: the cell written along the target's axis is held in data, so a read
            // of the node in the loop may be of any iteration's cell.
            writes.entry(target.node).or_default();
        }
        Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. } => safe = false,
        Stmt::For { .. } | Stmt::Local { .. } | Stmt::SetLocal { .. } => {}
    });
    if !safe || writes.is_empty() {
        return false;
    }
    let mut reads_ok = true;
    let mut check = |stmt: &Stmt| {
        for value in stmt.values() {
            // A cell read at a position held in data may be any cell another iteration writes.
            reads_ok &= !writes.keys().any(|node| value.looks_up(*node));
            value.for_each_get(&mut |node, index| {
                if let Some(written) = writes.get(&node) {
                    reads_ok &= reads_own_iteration(*var, written, index);
                }
            });
        }
    };
    for inner in body {
        inner.walk(&mut check);
    }
    reads_ok
}

/// Calls `visit` on every statement of `body`, nested ones included, with the ranges of the loops
/// around it.
pub fn collect(
    body: &[Stmt],
    ranges: &mut HashMap<LoopVar, usize>,
    visit: &mut impl FnMut(&Stmt, &HashMap<LoopVar, usize>),
) {
    for stmt in body {
        visit(stmt, ranges);
        if let Stmt::For { var, range, body } = stmt {
            ranges.insert(*var, *range);
            collect(body, ranges, visit);
            ranges.remove(var);
        }
    }
}

/// For a position in a buffer of `dims`: the flat stride of `var`, and how far the other loop
/// variables move the flat position (static indices are fixed for a run and move nothing).
pub fn flat_extent(
    index: &[Index],
    dims: &[usize],
    var: LoopVar,
    ranges: &HashMap<LoopVar, usize>,
) -> (i64, u64) {
    let mut stride = 1i64;
    let mut var_stride = 0i64;
    let mut span = 0u64;
    for (position, dim) in index.iter().zip(dims).rev() {
        for (c, v) in &position.terms {
            match v {
                Var::Loop(v) if *v == var => var_stride += c * stride,
                Var::Loop(v) => {
                    let trips = ranges.get(v).copied().unwrap_or(1).saturating_sub(1) as u64;
                    span += (c * stride).unsigned_abs() * trips;
                }
                Var::Static(_) => {}
            }
        }
        stride *= *dim as i64;
    }
    (var_stride, span)
}

/// The least and greatest values `index` takes over the loops around it (`loops`) and the static
/// indices' ranges: generated code does not check positions, so every one is checked with this.
/// Computed in 128 bits, where a 64-bit offset plus products of 64-bit coefficients and ranges
/// does not wrap (the arithmetic saturates beyond, still outside every buffer): the bounds are
/// the true ones, and so is the message that reports them.
///
/// `Ok(None)` when the access never happens: under a loop that never runs, or with a static index
/// that has no value to take (both over an empty axis, whose buffer has no position to check
/// against). An error names a variable with no range here.
pub fn index_bounds(
    index: &Index,
    loops: &HashMap<LoopVar, usize>,
    statics: &BTreeMap<Symbol, usize>,
) -> Result<Option<(i128, i128)>, String> {
    if loops.values().any(|&range| range == 0) {
        return Ok(None);
    }
    let offset = i128::from(index.offset);
    let (mut low, mut high) = (offset, offset);
    for (c, var) in &index.terms {
        let range = match var {
            Var::Loop(v) => loops.get(v).copied(),
            Var::Static(s) => statics.get(s).copied(),
        }
        .ok_or_else(|| format!("{var} has no value here"))?;
        if range == 0 {
            return Ok(None);
        }
        let top = i128::from(*c).saturating_mul(range as i128 - 1);
        low = low.saturating_add(top.min(0));
        high = high.saturating_add(top.max(0));
    }
    Ok(Some((low, high)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcannl_ir::{Precision, Scalar, TensorNode};

    /// Fills of `count` one-cell nodes, `n0` first: no statement a kernel of its own.
    fn fills(count: u32) -> Vec<Stmt> {
        (0..count)
            .map(|id| Stmt::Fill {
                node: NodeId(id),
                value: 0.5,
            })
            .collect()
    }

    /// A routine of `body` over one-cell nodes, or of the sizes `dims` gives node by node.
    fn routine_of(body: &[Stmt], dims: impl Fn(u32) -> usize) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: (0..body.len() as u32)
                .map(|id| {
                    (
                        NodeId(id),
                        TensorNode::new(id, "c", Precision::F32, &[dims(id)]),
                    )
                })
                .collect(),
            statics: Default::default(),
            body: body.to_vec(),
        }
    }

    /// The serial kernels of `routine`, each as its statements.
    fn serial_runs(routine: &Routine) -> Vec<&[Stmt]> {
        kernel_groups(routine, &routine.body)
            .into_iter()
            .map(|group| match group {
                Group::Serial { stmts } => stmts,
                other => panic!("a serial run: {other:?}"),
            })
            .collect()
    }

    fn serial_lengths(body: &[Stmt]) -> Vec<usize> {
        let routine = routine_of(body, |_| 1);
        serial_runs(&routine).iter().map(|run| run.len()).collect()
    }

    #[test]
    fn a_repeated_pattern_is_cut_alike_in_every_repetition_whatever_the_depth() {
        // Fills of 15 sizes a layer, as a deep model zeroes its gradients: a count of 64 does
        // not divide the pattern, so cuts counted every 64 would give 15 different kernels.
        const LAYER: [usize; 15] = [
            32, 128, 32, 16, 16, 512, 512, 32, 256, 512, 16, 16, 32, 32, 32,
        ];
        let kernels = |layers: u32| {
            let routine = routine_of(&fills(15 * layers), |id| LAYER[id as usize % 15]);
            let runs = serial_runs(&routine);
            assert!(runs.iter().all(|run| run.len() <= MAX_SERIAL_STATEMENTS));
            assert_eq!(
                runs.iter().map(|run| run.len()).sum::<usize>(),
                routine.body.len()
            );
            // A kernel as what identity compares: the sizes it fills, in order.
            let sizes = |run: &[Stmt]| -> Vec<usize> {
                run.iter()
                    .map(|stmt| match stmt {
                        Stmt::Fill { node, .. } => routine.nodes[node].dims[0],
                        other => panic!("a fill: {other:?}"),
                    })
                    .collect()
            };
            let all: Vec<Vec<usize>> = runs.iter().map(|run| sizes(run)).collect();
            // The first and last kernels start and end where the routine does.
            let inner: HashSet<Vec<usize>> = all[1..all.len() - 1].iter().cloned().collect();
            (all.len(), inner)
        };
        let (count_16, distinct_16) = kernels(16);
        let (count_256, distinct_256) = kernels(256);
        assert!(
            count_256 > 4 * count_16,
            "{count_16} and {count_256} kernels"
        );
        assert!(distinct_16.len() <= 3, "{distinct_16:?}");
        assert_eq!(distinct_256, distinct_16);
    }

    #[test]
    fn long_serial_runs_are_cut_where_no_local_crosses() {
        assert_eq!(serial_lengths(&fills(200)), [64, 64, 64, 8]);
        // A local declared first and read by statement 100 keeps the run whole up to there.
        let mut body = fills(200);
        body[0] = Stmt::Local {
            id: LocalId(0),
            precision: Precision::F32,
            value: Scalar::Const(2.0),
        };
        body[100] = Stmt::Set {
            node: NodeId(100),
            index: vec![Index::constant(0)],
            value: Scalar::Local(LocalId(0)),
        };
        assert_eq!(serial_lengths(&body), [101, 64, 35]);
    }
}
