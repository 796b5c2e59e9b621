//! Sums cut into parts for threads. A top-level loop whose every iteration adds into the same few
//! float cells — a bias's gradient, a normalization's statistics, a loss: a batch summed into a
//! value per feature — cannot run its iterations on several threads as it stands, since they all
//! write those cells, and while it runs on one thread the others wait. Here such a loop's range
//! is cut into parts, each adding into its own copy of the cells (a scratch node, `[parts, the
//! node's buffer dims]`), which makes the loop over the parts splittable like any other; one
//! nest after it adds each cell's copies, in order, into the cell.
//!
//! The number of parts depends on the loop alone (its range, its work and the cells it adds
//! into), never on the threads, so that what a routine computes does not depend on how many
//! threads run it. The sums are reordered — each part summed alone, then the parts — as the
//! generated code reorders float sums anyway (`#pragma omp simd reduction`), and so only for f32
//! and f64 cells: this pass changes what the interpreter computes by rounding. It is for backends
//! that run loops on threads, not a pass of [`optimize`](super::optimize).
//!
//! A float local that a top-level loop adds into at every iteration (a sum of every cell, which
//! `accumulate` keeps in a local) is cut likewise: each part sums its stretch into a local of its
//! own and stores it in its cell of a scratch node; the local is then its first value plus the
//! parts, in order.
//!
//! A part's copy starts at −0, the float that leaves every value unchanged when added to it, so
//! that a cell that no iteration adds into (the loop writes only some cells of a node) keeps its
//! value, its sign of zero included.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::{Fresh, Renaming};
use crate::loops::{Index, LocalId, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::ops::Binop;
use crate::precision::Precision;
use crate::routine::Routine;

/// The most parts a loop is cut into: enough for the threads of a workstation, few enough that
/// adding the parts up costs little.
pub const MAX_PARTS: usize = 16;
/// The least work (cells stored, counted over the loops' trips) a part is given: less costs more
/// to hand to a thread than it takes to run.
pub const MIN_PART_WORK: usize = 1 << 12;
/// The most cells a split loop adds into, its nodes together: a part's copy of them stays in the
/// first-level cache.
pub const MAX_CELLS: usize = 1 << 12;
/// How many times the work of zeroing the parts' copies and adding them up the loop's own work
/// must be at least.
const WORK_PER_OVERHEAD: usize = 8;

/// A routine with its sums cut into parts, and the scratch nodes the parts add into.
#[derive(Debug, Clone)]
pub struct SplitSums {
    /// The routine, the scratch nodes among its nodes.
    pub routine: Routine,
    /// The scratch nodes (memory mode `Local`): nothing in them outlives one run, and every
    /// cell a run reads it wrote first.
    pub scratch: Vec<NodeId>,
}

/// `routine` with every top-level loop that adds into the same few float cells at each iteration
/// cut into parts (see the module's documentation); the routine unchanged, with no scratch
/// nodes, where there is none.
pub fn split_sums(mut routine: Routine) -> SplitSums {
    // The statements move through the pass: what it leaves alone is not copied.
    let body = std::mem::take(&mut routine.body);
    let mut fresh = Fresh::new(&body);
    // Scratch ids follow the routine's largest (none is left for them after `u32::MAX`).
    let mut next_id = routine
        .nodes
        .keys()
        .last()
        .map_or(Some(0), |id| id.0.checked_add(1));
    let mut split = Vec::with_capacity(body.len());
    let mut scratch_nodes = Vec::new();
    let mut stmts = body.into_iter().peekable();
    while let Some(stmt) = stmts.next() {
        if let (Some(next), Some(id)) = (stmts.peek(), next_id)
            && let Some(sum) = LocalSum::of(&stmt, next)
        {
            let copy = NodeId(id);
            next_id = id.checked_add(1);
            let label = format!("{} parts", sum.local);
            let mut node = TensorNode::new(copy.0, &label, sum.precision, &[sum.parts]);
            node.memory_mode = Some(MemoryMode::Local);
            scratch_nodes.push(node);
            split.extend(sum.split(copy, &mut fresh));
            stmts.next();
            continue;
        }
        let sum = Sum::of(&stmt, &routine).filter(|sum| {
            next_id.is_some_and(|next| next.checked_add(sum.targets.len() as u32).is_some())
        });
        let (Some(sum), Some(first)) = (sum, next_id) else {
            split.push(stmt);
            continue;
        };
        let mut copies = BTreeMap::new();
        for (id, target) in (first..).zip(&sum.targets) {
            let node = &routine.nodes[target];
            let id = NodeId(id);
            next_id = id.0.checked_add(1);
            let dims: Vec<usize> = std::iter::once(sum.parts)
                .chain(node.buffer_dims())
                .collect();
            let label = format!("{} parts", node.label);
            let mut copy = TensorNode::new(id.0, &label, node.precision, &dims);
            copy.memory_mode = Some(MemoryMode::Local);
            scratch_nodes.push(copy);
            copies.insert(*target, id);
        }
        split.extend(sum.split(&routine, &copies, &mut fresh));
    }
    let scratch = scratch_nodes.iter().map(|node| node.id).collect();
    routine
        .nodes
        .extend(scratch_nodes.into_iter().map(|node| (node.id, node)));
    routine.body = split;
    SplitSums { routine, scratch }
}

/// A top-level loop that only adds into cells its variable does not move, of float nodes.
struct Sum<'a> {
    var: LoopVar,
    range: usize,
    body: &'a [Stmt],
    /// The nodes it adds into.
    targets: BTreeSet<NodeId>,
    /// How many parts its range is cut into.
    parts: usize,
}

impl<'a> Sum<'a> {
    /// `stmt` as a sum worth cutting into parts, if it is one: a loop whose stores all add a
    /// value into the cell they write (`n[i] = n[i] + v`), at positions that do not depend on the
    /// loop's variable, into f32 or f64 nodes read nowhere else in it, whose locals are its own,
    /// and with enough work for two parts or more.
    fn of(stmt: &'a Stmt, routine: &Routine) -> Option<Sum<'a>> {
        let Stmt::For { var, range, body } = stmt else {
            return None;
        };
        let moves = |index: &[Index]| index.iter().any(|i| i.vars().any(|v| v == Var::Loop(*var)));
        let mut targets = BTreeSet::new();
        let mut declared = HashSet::new();
        let mut eligible = true;
        for inner in body {
            inner.walk(&mut |s| match s {
                Stmt::Set { node, index, value } => {
                    let float = matches!(
                        routine.nodes[node].precision,
                        Precision::F32 | Precision::F64
                    );
                    eligible &= float && !moves(index) && addend(*node, index, value).is_some();
                    targets.insert(*node);
                }
                Stmt::Local { id, .. } => {
                    declared.insert(*id);
                }
                Stmt::SetLocal { id, .. } => eligible &= declared.contains(id),
                Stmt::For { .. } => {}
                Stmt::SetVec { .. }
                | Stmt::Fill { .. }
                | Stmt::FillMargins { .. }
                | Stmt::ScatterAdd { .. }
                | Stmt::Gemm { .. } => eligible = false,
            });
        }
        if !eligible || targets.is_empty() {
            return None;
        }
        // A target read anywhere but in its own store's sum would read a part's partial sums.
        let reads_target = |value: &Scalar| {
            let mut reads = targets.iter().any(|t| value.looks_up(*t));
            value.for_each_get(&mut |node, _| reads |= targets.contains(&node));
            reads
        };
        for inner in body {
            inner.walk(&mut |s| match s {
                Stmt::Set { node, index, value } => {
                    eligible &= addend(*node, index, value).is_some_and(|v| !reads_target(v));
                }
                _ => eligible &= !s.values().any(reads_target),
            });
        }
        if !eligible {
            return None;
        }
        let cells: usize = targets
            .iter()
            .map(|t| routine.nodes[t].buffer_dims().iter().product::<usize>())
            .sum();
        if cells > MAX_CELLS {
            return None;
        }
        let work = stmt.stored_cells();
        let parts = (2..=MAX_PARTS.min(*range)).rev().find(|&parts| {
            range % parts == 0
                && work / parts >= MIN_PART_WORK
                && 2 * parts * cells <= work / WORK_PER_OVERHEAD
        })?;
        Some(Sum {
            var: *var,
            range: *range,
            body,
            targets,
            parts,
        })
    }

    /// The loop over the parts (each zeroing its copies, then running its stretch of the
    /// range into them), then a nest per target adding the copies into it.
    fn split(
        &self,
        routine: &Routine,
        copies: &BTreeMap<NodeId, NodeId>,
        fresh: &mut Fresh,
    ) -> Vec<Stmt> {
        let (part, within) = (fresh.var(), fresh.var());
        let stretch = self.range / self.parts;
        let renaming = stretch_of(self.var, stretch, part, within);
        let at_part = |index: &[Index]| -> Vec<Index> {
            std::iter::once(Index::var(part, 0))
                .chain(index.iter().cloned())
                .collect()
        };
        let mut part_body: Vec<Stmt> = copies
            .iter()
            .map(|(target, copy)| {
                let dims = routine.nodes[target].buffer_dims();
                every_cell(&dims, fresh, |cell| Stmt::Set {
                    node: *copy,
                    index: at_part(&cell),
                    value: Scalar::Const(-0.0),
                })
            })
            .collect();
        part_body.push(Stmt::For {
            var: within,
            range: stretch,
            body: self
                .body
                .iter()
                .map(|s| redirect(&renaming.stmt(s), copies, &at_part))
                .collect(),
        });
        let mut split = vec![Stmt::For {
            var: part,
            range: self.parts,
            body: part_body,
        }];
        for (target, copy) in copies {
            let dims = routine.nodes[target].buffer_dims();
            split.push(every_cell(&dims, fresh, |cell| {
                let part_sum = |p: usize| {
                    let index = std::iter::once(Index::constant(p as i64))
                        .chain(cell.iter().cloned())
                        .collect();
                    Scalar::Get(*copy, index)
                };
                let parts = (1..self.parts).fold(part_sum(0), |sum, p| add(sum, part_sum(p)));
                Stmt::Set {
                    node: *target,
                    index: cell.clone(),
                    value: add(Scalar::Get(*target, cell), parts),
                }
            }));
        }
        split
    }
}

/// A float local declared at the top level and then added into by every iteration of the loop
/// that follows (a loss summed over a batch's every cell, after `accumulate` made its cell a
/// local): the loop cut into parts, each summing its stretch into a local of its own and storing
/// it in its cell of a scratch node, and the local declared as its first value plus the parts.
struct LocalSum<'a> {
    local: LocalId,
    precision: Precision,
    first: &'a Scalar,
    var: LoopVar,
    range: usize,
    body: &'a [Stmt],
    parts: usize,
}

impl<'a> LocalSum<'a> {
    /// `declaration` and `stmt` as such a sum worth cutting into parts, if they are one: `stmt`
    /// a loop that writes no node, sets no local declared outside it but the sum's, and sets
    /// that one only by adding a value that does not read it, nor does anything else in it.
    fn of(declaration: &'a Stmt, stmt: &'a Stmt) -> Option<LocalSum<'a>> {
        let (
            Stmt::Local {
                id,
                precision: precision @ (Precision::F32 | Precision::F64),
                value: first,
            },
            Stmt::For { var, range, body },
        ) = (declaration, stmt)
        else {
            return None;
        };
        let reads_sum = |value: &Scalar| {
            let mut reads = false;
            value.for_each_local(&mut |read| reads |= read == *id);
            reads
        };
        let mut declared = HashSet::new();
        let mut adds = false;
        let mut eligible = true;
        for inner in body {
            inner.walk(&mut |s| match s {
                Stmt::Local { id: own, value, .. } => {
                    eligible &= !reads_sum(value);
                    declared.insert(*own);
                }
                Stmt::SetLocal { id: set, value } if set == id => {
                    let addend = local_addend(*id, value);
                    eligible &= addend.is_some_and(|a| !reads_sum(a));
                    adds = true;
                }
                Stmt::SetLocal { id: set, value } => {
                    eligible &= declared.contains(set) && !reads_sum(value);
                }
                Stmt::For { .. } => {}
                _ => eligible = false,
            });
        }
        if !eligible || !adds {
            return None;
        }
        let work = stmt.stored_cells();
        let parts = (2..=MAX_PARTS.min(*range))
            .rev()
            .find(|&parts| range % parts == 0 && work / parts >= MIN_PART_WORK)?;
        Some(LocalSum {
            local: *id,
            precision: *precision,
            first,
            var: *var,
            range: *range,
            body,
            parts,
        })
    }

    /// The loop over the parts, each summing its stretch of the range into a local of its own
    /// and storing it in its cell of `copy`, then the local declared as its first value plus
    /// the parts' sums, in order.
    fn split(&self, copy: NodeId, fresh: &mut Fresh) -> Vec<Stmt> {
        let (part, within, own) = (fresh.var(), fresh.var(), fresh.local());
        let stretch = self.range / self.parts;
        let mut renaming = stretch_of(self.var, stretch, part, within);
        renaming.locals.insert(self.local, own);
        let part_body = vec![
            Stmt::Local {
                id: own,
                precision: self.precision,
                value: Scalar::Const(-0.0),
            },
            Stmt::For {
                var: within,
                range: stretch,
                body: self.body.iter().map(|s| renaming.stmt(s)).collect(),
            },
            Stmt::Set {
                node: copy,
                index: vec![Index::var(part, 0)],
                value: Scalar::Local(own),
            },
        ];
        let part_sum = |p: usize| Scalar::Get(copy, vec![Index::constant(p as i64)]);
        let total = (0..self.parts).fold(self.first.clone(), |sum, p| add(sum, part_sum(p)));
        vec![
            Stmt::For {
                var: part,
                range: self.parts,
                body: part_body,
            },
            Stmt::Local {
                id: self.local,
                precision: self.precision,
                value: total,
            },
        ]
    }
}

/// The renaming that runs `var`'s iterations as `stretch` iterations of `within` in each
/// iteration of `part`.
fn stretch_of(var: LoopVar, stretch: usize, part: LoopVar, within: LoopVar) -> Renaming {
    let mut renaming = Renaming::default();
    renaming.indices.insert(
        var,
        Index {
            terms: smallvec::smallvec![(stretch as i64, Var::Loop(part)), (1, Var::Loop(within))],
            offset: 0,
        },
    );
    renaming
}

/// What `local := value` adds into the local, when it is such a sum.
fn local_addend(local: LocalId, value: &Scalar) -> Option<&Scalar> {
    let Scalar::Binop(Binop::Add, a, b) = value else {
        return None;
    };
    match (&**a, &**b) {
        (Scalar::Local(id), addend) | (addend, Scalar::Local(id)) if *id == local => Some(addend),
        _ => None,
    }
}

/// What a store `node[index] = value` adds into the cell it writes, when it is such a sum.
fn addend<'v>(node: NodeId, index: &[Index], value: &'v Scalar) -> Option<&'v Scalar> {
    let Scalar::Binop(Binop::Add, a, b) = value else {
        return None;
    };
    let is_cell = |s: &Scalar| matches!(s, Scalar::Get(n, i) if *n == node && i == index);
    if is_cell(a) {
        Some(b)
    } else if is_cell(b) {
        Some(a)
    } else {
        None
    }
}

fn add(a: Scalar, b: Scalar) -> Scalar {
    Scalar::Binop(Binop::Add, Box::new(a), Box::new(b))
}

/// `stmt` with its sums into a node of `copies` made into that node's copy, at the part
/// `at_part` puts first.
fn redirect(
    stmt: &Stmt,
    copies: &BTreeMap<NodeId, NodeId>,
    at_part: &impl Fn(&[Index]) -> Vec<Index>,
) -> Stmt {
    match stmt {
        Stmt::For { var, range, body } => Stmt::For {
            var: *var,
            range: *range,
            body: body.iter().map(|s| redirect(s, copies, at_part)).collect(),
        },
        Stmt::Set { node, index, value } if copies.contains_key(node) => {
            let copy = copies[node];
            let index = at_part(index);
            let addend = addend(*node, &index[1..], value)
                .expect("a split loop's stores into its targets are sums")
                .clone();
            Stmt::Set {
                node: copy,
                index: index.clone(),
                value: add(Scalar::Get(copy, index), addend),
            }
        }
        other => other.clone(),
    }
}

/// A nest over every cell of a buffer of `dims`, fresh variables for its loops, storing what
/// `store` makes of the cell's position.
fn every_cell(dims: &[usize], fresh: &mut Fresh, store: impl FnOnce(Vec<Index>) -> Stmt) -> Stmt {
    let vars: Vec<LoopVar> = dims.iter().map(|_| fresh.var()).collect();
    let cell = vars.iter().map(|v| Index::var(*v, 0)).collect();
    vars.iter()
        .zip(dims)
        .rev()
        .fold(store(cell), |body, (var, range)| Stmt::For {
            var: *var,
            range: *range,
            body: vec![body],
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    fn get(node: u32, index: Vec<Index>) -> Box<Scalar> {
        Box::new(Scalar::Get(NodeId(node), index))
    }

    /// `n1[row, c] += n0[l0, c]` over `for l0 in 0..rows { for c in 0..16 }`: the rows of `n0`
    /// (`rows × 16`) summed into row `row` of `n1` (`2 × 16`, both of `precision`), or
    /// `value` in place of the sum.
    fn column_sums(rows: usize, row: i64, precision: Precision, value: Option<Scalar>) -> Routine {
        let index = vec![Index::constant(row), at(1)];
        let sum = Scalar::Binop(
            Binop::Add,
            get(1, index.clone()),
            get(0, vec![at(0), at(1)]),
        );
        let inner = Stmt::For {
            var: LoopVar(1),
            range: 16,
            body: vec![Stmt::Set {
                node: NodeId(1),
                index,
                value: value.unwrap_or(sum),
            }],
        };
        Routine {
            name: "sums".to_owned(),
            nodes: [
                TensorNode::new(0, "x", precision, &[rows, 16]),
                TensorNode::new(1, "totals", precision, &[2, 16]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body: vec![Stmt::For {
                var: LoopVar(0),
                range: rows,
                body: vec![inner],
            }],
        }
    }

    /// The top-level loops of a routine, with their ranges.
    fn top_loops(routine: &Routine) -> Vec<usize> {
        (routine.body.iter())
            .filter_map(|s| match s {
                Stmt::For { range, .. } => Some(*range),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn rows_summed_into_a_few_cells_are_cut_into_parts_each_with_its_copy() {
        // 4096 rows of 16: 65,536 cells stored, 16 parts of 4096.
        let routine = column_sums(4096, 1, Precision::F32, None);
        let split = split_sums(routine.clone());
        assert_eq!(split.scratch, vec![NodeId(2)]);
        let copy = &split.routine.nodes[&NodeId(2)];
        assert_eq!(copy.dims, vec![MAX_PARTS, 2, 16]);
        assert_eq!(copy.memory_mode, Some(MemoryMode::Local));
        // The parts' loop, then the nest adding the copies over every cell of the target.
        assert_eq!(top_loops(&split.routine), vec![MAX_PARTS, 2]);
        let Stmt::For { body, .. } = &split.routine.body[0] else {
            unreachable!()
        };
        // Each part zeroes its copy (with −0), then runs its stretch of the rows.
        let mut zeroes = Vec::new();
        body[0].walk(&mut |s| {
            if let Stmt::Set { node, value, .. } = s {
                zeroes.push((*node, value.clone()));
            }
        });
        assert_eq!(zeroes, vec![(NodeId(2), Scalar::Const(-0.0))]);
        assert!(matches!(&body[1], Stmt::For { range, .. } if *range == 4096 / MAX_PARTS));
    }

    #[test]
    fn the_parts_are_as_many_as_the_work_pays_for_and_divide_the_range() {
        // 1024 × 16 cells stored: 4 parts of 4096.
        let split = split_sums(column_sums(1024, 0, Precision::F64, None));
        assert_eq!(split.routine.nodes[&NodeId(2)].dims[0], 4);
        // 1000 rows: the most parts that divide 1000 and each get 4096 cells or more are 2.
        let split = split_sums(column_sums(1000, 0, Precision::F32, None));
        assert_eq!(split.routine.nodes[&NodeId(2)].dims[0], 2);
    }

    #[test]
    fn loops_that_are_no_float_sums_or_too_small_are_left_alone() {
        let unsplit = |routine: Routine| {
            let split = split_sums(routine.clone());
            assert!(split.scratch.is_empty());
            assert_eq!(split.routine, routine);
        };
        // Too little work for two parts.
        unsplit(column_sums(256, 0, Precision::F32, None));
        // Integers and halves: their sums are not reordered.
        unsplit(column_sums(4096, 0, Precision::I32, None));
        unsplit(column_sums(4096, 0, Precision::F16, None));
        // A plain store, not a sum.
        unsplit(column_sums(
            4096,
            0,
            Precision::F32,
            Some(*get(0, vec![at(0), at(1)])),
        ));
        // A sum that also reads another cell of the node it adds into.
        let reads_target = Scalar::Binop(
            Binop::Add,
            get(1, vec![Index::constant(0), at(1)]),
            get(1, vec![Index::constant(1), at(1)]),
        );
        unsplit(column_sums(4096, 0, Precision::F32, Some(reads_target)));
        // Cells that move with the loop (every iteration its own row): splittable as it is.
        let mut moving = column_sums(4096, 0, Precision::F32, None);
        moving.nodes.insert(
            NodeId(1),
            TensorNode::new(1, "rows", Precision::F32, &[4096, 16]),
        );
        let index = vec![at(0), at(1)];
        let Stmt::For { body, .. } = &mut moving.body[0] else {
            unreachable!()
        };
        let Stmt::For { body, .. } = &mut body[0] else {
            unreachable!()
        };
        body[0] = Stmt::Set {
            node: NodeId(1),
            index: index.clone(),
            value: Scalar::Binop(Binop::Add, get(1, index.clone()), get(0, index)),
        };
        unsplit(moving);
    }

    /// `v := first; for l0 in 0..cells { v := v + n0[l0] }; n1[0] := v`, in f32.
    fn total(cells: usize, first: f64) -> Routine {
        let v = LocalId(0);
        Routine {
            name: "total".to_owned(),
            nodes: [
                TensorNode::new(0, "x", Precision::F32, &[cells]),
                TensorNode::new(1, "sum", Precision::F32, &[1]),
            ]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
            statics: Default::default(),
            body: vec![
                Stmt::Local {
                    id: v,
                    precision: Precision::F32,
                    value: Scalar::Const(first),
                },
                Stmt::For {
                    var: LoopVar(0),
                    range: cells,
                    body: vec![Stmt::SetLocal {
                        id: v,
                        value: Scalar::Binop(
                            Binop::Add,
                            Box::new(Scalar::Local(v)),
                            get(0, vec![at(0)]),
                        ),
                    }],
                },
                Stmt::Set {
                    node: NodeId(1),
                    index: vec![Index::constant(0)],
                    value: Scalar::Local(v),
                },
            ],
        }
    }

    #[test]
    fn a_sum_into_a_local_is_cut_into_parts_each_with_its_own_local() {
        let split = split_sums(total(1 << 16, 1.5));
        assert_eq!(split.scratch, vec![NodeId(2)]);
        assert_eq!(split.routine.nodes[&NodeId(2)].dims, vec![MAX_PARTS]);
        let [
            Stmt::For { range, body, .. },
            Stmt::Local { id, value, .. },
            Stmt::Set { .. },
        ] = &split.routine.body[..]
        else {
            panic!("{}", split.routine)
        };
        assert_eq!(*range, MAX_PARTS);
        // Each part: its own local from −0, its stretch, its cell of the scratch node.
        let [
            Stmt::Local {
                id: own,
                value: start,
                ..
            },
            Stmt::For { range: stretch, .. },
            Stmt::Set {
                node,
                value: stored,
                ..
            },
        ] = &body[..]
        else {
            panic!("{}", split.routine)
        };
        assert_ne!(own, id);
        assert_eq!(*start, Scalar::Const(-0.0));
        assert_eq!(*stretch, (1 << 16) / MAX_PARTS);
        assert_eq!((*node, stored), (NodeId(2), &Scalar::Local(*own)));
        // The local: its first value, then each part's sum in order.
        let mut reads = Vec::new();
        value.for_each_get(&mut |node, index| reads.push((node, index[0].offset)));
        let parts: Vec<(NodeId, i64)> = (0..MAX_PARTS as i64).map(|p| (NodeId(2), p)).collect();
        assert_eq!(reads, parts);
    }

    #[test]
    fn a_small_sum_into_a_local_or_one_reading_it_stays_whole() {
        let unsplit = |routine: Routine| assert_eq!(split_sums(routine.clone()).routine, routine);
        unsplit(total(4096, 0.0));
        let mut reads_itself = total(1 << 16, 0.0);
        let Stmt::For { body, .. } = &mut reads_itself.body[1] else {
            unreachable!()
        };
        body.push(Stmt::Set {
            node: NodeId(0),
            index: vec![at(0)],
            value: Scalar::Local(LocalId(0)),
        });
        unsplit(reads_itself);
    }
}
