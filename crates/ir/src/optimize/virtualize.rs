//! Fusion: a virtual node's producer is inlined wherever the node is read, and removed.
//!
//! A node can be inlined when it has no padding margins and the routine writes it with one
//! top-level nest (optionally after a top-level `fill` of it, the neutral pre-fill, with nothing
//! reading it in between) that
//! is perfect (each loop holds one statement, down to the store) and stores it exactly once:
//! each axis of the store's index a distinct loop variable of the nest running over the whole
//! axis, or 0 on an axis of one position. Loops the index does not use are "kept" loops. The
//! stored value either does not read the node (a plain store: then no loop is kept) or
//! accumulates, `n[w] := n[w] ⊕ e` with `e` not reading it, after the fill. The nest reads no
//! local declared outside it, nothing reads the node before it, and no top-level statement from
//! the producer to the node's last reader (inclusive) writes a node the producer reads: the
//! inlined computation runs there, later than the producer did.
//!
//! At each statement reading the node, each distinct read `n[idx]` becomes a local declared
//! just before the statement, of the node's precision (so that the value is rounded exactly as
//! the store rounded it), computed by the producer's value with its index variables replaced by
//! `idx`; with kept loops the local starts at the fill's value and the kept loops (under fresh
//! variables) accumulate into it, in the producer's order. Producers are inlined in program
//! order, so that what a producer reads of other virtual nodes is already inlined into it and
//! travels with it. A read inside a `where` branch is computed before the statement, whichever
//! branch is taken: values are unchanged, but a read the branch guarded could now fail.

use std::collections::{BTreeSet, HashSet};

use super::{
    Fresh, OptimizeError, PerfectNest, Renaming, covers_each_cell_once, describe, fill_constant,
    map_values, names, reads_node, stmt_reads, stmt_writes,
};
use crate::loops::{Index, LocalId, LoopVar, Scalar, Stmt};
use crate::node::{MemoryMode, NodeId, TensorNode};
use crate::ops::Binop;
use crate::precision::Precision;
use crate::routine::Routine;

/// `routine` with every node whose mode is `Virtual` inlined into its readers and its producer
/// removed; an error if one cannot be. A virtual node the routine does not mention is left alone.
pub fn virtualize(routine: &Routine) -> Result<Routine, OptimizeError> {
    let mut order: Vec<(Option<usize>, &TensorNode)> = routine
        .nodes
        .values()
        .filter(|node| node.memory_mode == Some(MemoryMode::Virtual))
        .filter(|node| {
            routine.body.iter().any(|stmt| {
                stmt_writes(stmt).contains(&node.id) || stmt_reads(stmt).contains(&node.id)
            })
        })
        .map(|node| {
            let last_write = routine
                .body
                .iter()
                .rposition(|stmt| stmt_writes(stmt).contains(&node.id));
            (last_write, node)
        })
        .collect();
    order.sort_by_key(|(position, node)| (*position, node.id));
    let mut fresh = Fresh::new(&routine.body);
    let mut body = routine.body.clone();
    for (_, node) in order {
        let cannot = |reason: String| OptimizeError {
            message: format!(
                "{} is virtual, but it cannot be inlined: {reason}",
                describe(node)
            ),
        };
        let producer = Producer::find(&body, node).map_err(cannot)?;
        if let Some(reason) = hazard(&body, &producer, &producer.reads()) {
            return Err(cannot(reason));
        }
        body = inline(body, &producer, &mut fresh);
    }
    Ok(Routine {
        body,
        ..routine.clone()
    })
}

/// A virtual node's producer, taken apart for inlining.
#[derive(Debug)]
pub(super) struct Producer {
    pub(super) node: NodeId,
    precision: Precision,
    /// The top-level positions of the fill before the nest, if any, and of the nest.
    fill: Option<usize>,
    pub(super) position: usize,
    /// Per axis of the store, the loop running over it (`None`: the axis of one position).
    write: Vec<Option<LoopVar>>,
    /// The loops the store's index does not use, outermost first, with their ranges.
    pub(super) kept: Vec<(LoopVar, usize)>,
    /// Loops of one trip the store's index does not use: their variable is 0 in every copy.
    single: Vec<LoopVar>,
    /// Statements before the store in the innermost body: what earlier inlining put there.
    pre: Vec<Stmt>,
    form: Form,
}

#[derive(Debug)]
enum Form {
    /// `n[w] := value`.
    Store(Scalar),
    /// `n[w] := n[w] ⊕ value` after a fill whose value is `start`.
    Accumulate {
        accum: Binop,
        start: f64,
        value: Scalar,
    },
}

impl Producer {
    /// The producer of `node` in `body`, or why it cannot be inlined (all but the hazard).
    pub(super) fn find(body: &[Stmt], node: &TensorNode) -> Result<Producer, String> {
        let id = node.id;
        if node.padding.iter().any(|(l, r)| *l > 0 || *r > 0) {
            return Err("it has padding margins".to_owned());
        }
        let writers: Vec<usize> = (0..body.len())
            .filter(|&p| stmt_writes(&body[p]).contains(&id))
            .collect();
        let (fill, position) = match writers[..] {
            [] => return Err("the routine does not write it".to_owned()),
            [p] => (None, p),
            [f, p]
                if matches!(body[f], Stmt::Fill { .. })
                    && body[f + 1..p].iter().all(|s| !stmt_reads(s).contains(&id)) =>
            {
                (Some(f), p)
            }
            _ => {
                return Err(
                    "it is written by more than one statement besides a fill before, \
                     or read between the fill and the statement"
                        .to_owned(),
                );
            }
        };
        let nest = PerfectNest::of(&body[position])
            .filter(|nest| nest.node == id)
            .ok_or("its producer is not a perfect nest around one store of it")?;
        if !nest.pre_is_self_contained(true) {
            return Err("its producer uses locals declared outside it".to_owned());
        }
        if !covers_each_cell_once(nest.index, &nest.loops, &node.dims) {
            return Err(format!(
                "its store at [{}] does not write each cell by a loop over its axis",
                nest.index
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let write: Vec<Option<LoopVar>> = nest
            .index
            .iter()
            .map(|axis| {
                nest.loops
                    .iter()
                    .find(|(var, _)| super::is_bare(axis, *var))
                    .map(|(var, _)| *var)
            })
            .collect();
        let written = nest.written_vars();
        let unwritten = || {
            nest.loops
                .iter()
                .copied()
                .filter(|(var, _)| !written.contains(var))
        };
        let kept: Vec<(LoopVar, usize)> = unwritten().filter(|(_, range)| *range > 1).collect();
        let single: Vec<LoopVar> = unwritten()
            .filter(|(_, range)| *range == 1)
            .map(|(var, _)| var)
            .collect();
        if nest.pre.iter().any(|s| stmt_reads(s).contains(&id)) {
            return Err("its producer reads it other than by accumulating".to_owned());
        }
        let form = match nest.value {
            value if !reads_node(value, id) => {
                if !kept.is_empty() {
                    return Err(
                        "it is stored, not accumulated, inside loops its index does not use"
                            .to_owned(),
                    );
                }
                Form::Store(value.clone())
            }
            Scalar::Binop(accum, own, value)
                if **own == Scalar::Get(id, nest.index.to_vec()) && !reads_node(value, id) =>
            {
                let Some(Stmt::Fill { value: filled, .. }) = fill.map(|f| &body[f]) else {
                    return Err("it accumulates into cells nothing set before".to_owned());
                };
                let start = fill_constant(*filled, node.precision)
                    .ok_or_else(|| format!("no constant starts it as `fill with {filled}` does"))?;
                Form::Accumulate {
                    accum: *accum,
                    start,
                    value: (**value).clone(),
                }
            }
            _ => return Err("its producer reads it other than by accumulating".to_owned()),
        };
        for (p, stmt) in body.iter().enumerate() {
            if p == position {
                continue;
            }
            let mut axes = Vec::new();
            stmt.walk(&mut |s| {
                for value in s.values() {
                    value.for_each_get(&mut |n, index| {
                        if n == id {
                            axes.push(index.len());
                        }
                    });
                }
            });
            if !axes.is_empty() && p < position {
                return Err(format!("statement {p} reads it before its producer"));
            }
            if let Some(n) = axes.iter().find(|n| **n != node.dims.len()) {
                return Err(format!(
                    "statement {p} reads it with {n} indices for {} axes",
                    node.dims.len()
                ));
            }
        }
        Ok(Producer {
            node: id,
            precision: node.precision,
            fill,
            position,
            write,
            kept,
            single,
            pre: nest.pre.to_vec(),
            form,
        })
    }

    /// The other nodes the producer reads.
    /// The operations one cell of the node takes once the virtual nodes the producer reads are
    /// inlined into it: each operation and each read of a stored node counts one, each distinct
    /// read of a node that `inlined_cost` knows counts what that node's value takes (a reader
    /// computes each distinct read once), and kept loops repeat it all.
    pub(super) fn cost(&self, inlined_cost: &impl Fn(NodeId) -> Option<usize>) -> usize {
        fn count(
            scalar: &Scalar,
            own: NodeId,
            seen: &mut HashSet<(NodeId, Vec<Index>)>,
            inlined_cost: &impl Fn(NodeId) -> Option<usize>,
        ) -> usize {
            match scalar {
                Scalar::Const(_) | Scalar::Embed(_) | Scalar::Local(_) => 0,
                Scalar::Get(node, _) if *node == own => 0,
                Scalar::Get(node, index) => match inlined_cost(*node) {
                    Some(cost) if seen.insert((*node, index.clone())) => cost,
                    Some(_) => 0,
                    None => 1,
                },
                Scalar::Unop(_, a) => 1 + count(a, own, seen, inlined_cost),
                Scalar::Binop(_, a, b) => {
                    1 + count(a, own, seen, inlined_cost) + count(b, own, seen, inlined_cost)
                }
                Scalar::Ternop(_, a, b, c) => {
                    1 + count(a, own, seen, inlined_cost)
                        + count(b, own, seen, inlined_cost)
                        + count(c, own, seen, inlined_cost)
                }
            }
        }
        let value = match &self.form {
            Form::Store(value) | Form::Accumulate { value, .. } => value,
        };
        let mut seen = HashSet::new();
        let mut cost = count(value, self.node, &mut seen, inlined_cost);
        for stmt in &self.pre {
            for value in stmt.values() {
                cost += count(value, self.node, &mut seen, inlined_cost);
            }
        }
        let repeats: usize = self.kept.iter().map(|(_, range)| range).product();
        cost.saturating_mul(repeats)
    }

    pub(super) fn reads(&self) -> BTreeSet<NodeId> {
        let mut reads: BTreeSet<NodeId> = self.pre.iter().flat_map(stmt_reads).collect();
        let value = match &self.form {
            Form::Store(value) | Form::Accumulate { value, .. } => value,
        };
        value.for_each_get(&mut |node, _| {
            reads.insert(node);
        });
        reads.remove(&self.node);
        reads
    }
}

/// Why inlining `producer` where its node is read would read changed values: a top-level
/// statement after it, up to the last one reading its node, writes one of `reads`.
pub(super) fn hazard(
    body: &[Stmt],
    producer: &Producer,
    reads: &BTreeSet<NodeId>,
) -> Option<String> {
    let last = (0..body.len())
        .filter(|&p| p != producer.position && stmt_reads(&body[p]).contains(&producer.node))
        .max()?;
    (producer.position + 1..=last).find_map(|p| {
        stmt_writes(&body[p])
            .into_iter()
            .find(|node| reads.contains(node))
            .map(|node| {
                format!(
                    "statement {p} writes {node}, which its producer reads, before statement \
                     {last} reads it"
                )
            })
    })
}

/// `body` with `producer` inlined at every read of its node, and removed.
fn inline(body: Vec<Stmt>, producer: &Producer, fresh: &mut Fresh) -> Vec<Stmt> {
    let outside = body
        .iter()
        .enumerate()
        .filter(|(p, _)| *p != producer.position)
        .map(|(_, stmt)| stmt);
    let (vars, locals) = names(outside);
    let mut inliner = Inliner {
        producer,
        fresh,
        vars,
        locals,
    };
    body.into_iter()
        .enumerate()
        .filter(|(p, _)| *p != producer.position && Some(*p) != producer.fill)
        .flat_map(|(_, stmt)| {
            let top_level_store = !matches!(stmt, Stmt::For { .. });
            let mut stmts = inliner.stmt(stmt);
            // A store outside any loop keeps the locals computed for it in a loop of one trip:
            // together they stay one nest, which can itself be inlined later (simplification
            // removes the loop at the end).
            if top_level_store && stmts.len() > 1 {
                stmts = vec![Stmt::For {
                    var: inliner.fresh.var(),
                    range: 1,
                    body: stmts,
                }];
            }
            stmts
        })
        .collect()
}

/// Inlines one producer, keeping track of the loop variables and locals in use, so that the
/// first copy keeps the producer's own names and later copies get fresh ones.
struct Inliner<'a> {
    producer: &'a Producer,
    fresh: &'a mut Fresh,
    vars: HashSet<LoopVar>,
    locals: HashSet<LocalId>,
}

impl Inliner<'_> {
    fn stmt(&mut self, stmt: Stmt) -> Vec<Stmt> {
        let node = self.producer.node;
        if let Stmt::For { var, range, body } = stmt {
            let body = body.into_iter().flat_map(|s| self.stmt(s)).collect();
            return vec![Stmt::For { var, range, body }];
        }
        let mut reads: Vec<Vec<Index>> = Vec::new();
        for value in stmt.values() {
            value.for_each_get(&mut |n, index| {
                if n == node && !reads.iter().any(|r| r == index) {
                    reads.push(index.to_vec());
                }
            });
        }
        let mut stmts = Vec::new();
        let mut locals = Vec::new();
        for index in reads {
            let (computed, local) = self.instance(&index);
            stmts.extend(computed);
            locals.push((index, local));
        }
        stmts.push(map_values(&stmt, |value| {
            replace_reads(value, node, &locals)
        }));
        stmts
    }

    /// The statements computing the node at `index` into a new local, and that local.
    fn instance(&mut self, index: &[Index]) -> (Vec<Stmt>, LocalId) {
        let producer = self.producer;
        let mut renaming = Renaming::default();
        for (var, axis) in producer.write.iter().zip(index) {
            if let Some(var) = var {
                renaming.indices.insert(*var, axis.clone());
            }
        }
        for var in &producer.single {
            renaming.indices.insert(*var, Index::constant(0));
        }
        let mut bound: Vec<LoopVar> = producer.kept.iter().map(|(v, _)| *v).collect();
        let mut declared = Vec::new();
        for stmt in &producer.pre {
            stmt.walk(&mut |s| match s {
                Stmt::For { var, .. } => bound.push(*var),
                Stmt::Local { id, .. } => declared.push(*id),
                _ => {}
            });
        }
        for var in bound {
            let new = if self.vars.insert(var) {
                var
            } else {
                self.fresh.var()
            };
            renaming.rebind(var, new);
        }
        for id in declared {
            let new = if self.locals.insert(id) {
                id
            } else {
                self.fresh.local()
            };
            renaming.locals.insert(id, new);
        }
        let id = self.fresh.local();
        let precision = producer.precision;
        let mut stmts: Vec<Stmt> = producer.pre.iter().map(|s| renaming.stmt(s)).collect();
        match &producer.form {
            Form::Store(value) => stmts.push(Stmt::Local {
                id,
                precision,
                value: renaming.scalar(value),
            }),
            Form::Accumulate {
                accum,
                start,
                value,
            } if producer.kept.is_empty() => stmts.push(Stmt::Local {
                id,
                precision,
                value: Scalar::Binop(
                    *accum,
                    Box::new(Scalar::Const(*start)),
                    Box::new(renaming.scalar(value)),
                ),
            }),
            Form::Accumulate {
                accum,
                start,
                value,
            } => {
                stmts.push(Stmt::SetLocal {
                    id,
                    value: Scalar::Binop(
                        *accum,
                        Box::new(Scalar::Local(id)),
                        Box::new(renaming.scalar(value)),
                    ),
                });
                for (var, range) in producer.kept.iter().rev() {
                    stmts = vec![Stmt::For {
                        var: renaming.loops[var],
                        range: *range,
                        body: stmts,
                    }];
                }
                stmts.insert(
                    0,
                    Stmt::Local {
                        id,
                        precision,
                        value: Scalar::Const(*start),
                    },
                );
            }
        }
        (stmts, id)
    }
}

/// `scalar` with each read of `node` at one of `locals`' indices replaced by that local.
fn replace_reads(scalar: &Scalar, node: NodeId, locals: &[(Vec<Index>, LocalId)]) -> Scalar {
    let go = |s: &Scalar| Box::new(replace_reads(s, node, locals));
    match scalar {
        Scalar::Get(n, index) if *n == node => locals
            .iter()
            .find(|(i, _)| i == index)
            .map_or_else(|| scalar.clone(), |(_, id)| Scalar::Local(*id)),
        Scalar::Const(_) | Scalar::Get(..) | Scalar::Embed(_) | Scalar::Local(_) => scalar.clone(),
        Scalar::Unop(op, a) => Scalar::Unop(*op, go(a)),
        Scalar::Binop(op, a, b) => Scalar::Binop(*op, go(a), go(b)),
        Scalar::Ternop(op, a, b, c) => Scalar::Ternop(*op, go(a), go(b), go(c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Unop;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    fn get(node: u32, index: Vec<Index>) -> Scalar {
        Scalar::Get(NodeId(node), index)
    }

    fn routine(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
        Routine {
            name: "r".to_owned(),
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            statics: Default::default(),
            body,
        }
    }

    fn row_sum_then_transpose() -> Vec<Stmt> {
        // fill n1; n1[i] += n0[i, j]; n2[j, i] := n1[i] read at [l2].
        vec![
            Stmt::Fill {
                node: NodeId(1),
                value: 0.0,
            },
            Stmt::For {
                var: LoopVar(0),
                range: 2,
                body: vec![Stmt::For {
                    var: LoopVar(1),
                    range: 3,
                    body: vec![Stmt::Set {
                        node: NodeId(1),
                        index: vec![at(0)],
                        value: Scalar::Binop(
                            Binop::Add,
                            Box::new(get(1, vec![at(0)])),
                            Box::new(get(0, vec![at(0), at(1)])),
                        ),
                    }],
                }],
            },
            Stmt::For {
                var: LoopVar(2),
                range: 2,
                body: vec![Stmt::Set {
                    node: NodeId(2),
                    index: vec![at(2)],
                    value: Scalar::Unop(Unop::Neg, Box::new(get(1, vec![at(2)]))),
                }],
            },
        ]
    }

    #[test]
    fn a_reduction_inlines_as_an_accumulating_local() {
        let f = Precision::F32;
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual),
            TensorNode::new(2, "y", f, &[2]),
        ];
        let fused = virtualize(&routine(nodes, row_sum_then_transpose())).unwrap();
        let shown: String = fused.body.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            "for l2 in 0..2 {\n  local v0: f32 := 0\n  for l1 in 0..3 {\n    \
             v0 := (v0 + n0[l2, l1])\n  }\n  n2[l2] := neg(v0)\n}\n"
        );
    }

    #[test]
    fn what_cannot_be_inlined_says_why() {
        let f = Precision::F32;
        let mut padded = TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual);
        padded.padding = vec![(1, 0)];
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            padded,
            TensorNode::new(2, "y", f, &[2]),
        ];
        let error = virtualize(&routine(nodes, row_sum_then_transpose())).unwrap_err();
        assert_eq!(
            error.message,
            "n1 's' is virtual, but it cannot be inlined: it has padding margins"
        );
        // Without the fill, the accumulation reads cells nothing set.
        let mut body = row_sum_then_transpose();
        body.remove(0);
        let nodes = vec![
            TensorNode::new(0, "x", f, &[2, 3]),
            TensorNode::new(1, "s", f, &[2]).with_mode(MemoryMode::Virtual),
            TensorNode::new(2, "y", f, &[2]),
        ];
        let error = virtualize(&routine(nodes, body)).unwrap_err();
        assert!(error.message.contains("nothing set before"), "{error}");
    }
}
