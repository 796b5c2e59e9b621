//! What backends learn of a routine's nests before they generate code for it: which top-level
//! statements make a kernel, which loops may run their iterations at once, and the least and
//! greatest value of an index.

use std::collections::{BTreeMap, HashMap, HashSet};

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
/// them), the runs of other statements between them together, cut every
/// [`MAX_SERIAL_STATEMENTS`] where no local crosses the cut. A local cannot cross kernels
/// otherwise: a statement reading a local declared at the top level stays in the serial run, and
/// a run that declares a local extends to the last statement reading it.
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
    let mut groups = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        let preamble = preamble_end(body, i, &last_use, &reassigned)
            .filter(|&end| splittable(&body[end], routine));
        if let Some(end) = preamble {
            if start < i {
                groups.push(Group::Serial {
                    stmts: &body[start..i],
                });
            }
            groups.push(Group::Parallel {
                preamble: &body[i..end],
                stmt: &body[end],
            });
            start = end + 1;
            i = end + 1;
            continue;
        }
        if i - start >= MAX_SERIAL_STATEMENTS && i > serial_until {
            groups.push(Group::Serial {
                stmts: &body[start..i],
            });
            start = i;
        }
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
                groups.push(Group::Serial {
                    stmts: &body[start..i],
                });
            }
            groups.push(group);
            start = i + 1;
        }
        i += 1;
    }
    if start < body.len() {
        groups.push(Group::Serial {
            stmts: &body[start..],
        });
    }
    groups
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

    fn serial_lengths(body: &[Stmt]) -> Vec<usize> {
        let routine = Routine {
            name: "r".to_owned(),
            nodes: (0..body.len() as u32)
                .map(|id| (NodeId(id), TensorNode::new(id, "c", Precision::F32, &[1])))
                .collect(),
            statics: Default::default(),
            body: body.to_vec(),
        };
        kernel_groups(&routine, body)
            .iter()
            .map(|group| match group {
                Group::Serial { stmts } => stmts.len(),
                other => panic!("a serial run: {other:?}"),
            })
            .collect()
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
