//! Numbers held in buffers, read as numbers: a node whose one write is a top-level fill (`fill n
//! with c`: a number of the graph, a mean's count, a layer norm's epsilon) and that nothing reads
//! before that fill is no buffer at all. Its reads become the constant the fill stores, and the
//! fill and the node go.
//!
//! A number then costs no buffer, no store at each run and no load in the nests that read it,
//! the C compiler folds it into their arithmetic, and kernels that differ only in which number
//! buffer they read, or in how many fills come before them, stop being different kernels (a
//! deep model fills the same few numbers once per layer).
//!
//! The constant is what a read of the cell gives: the fill's value stored in the node's
//! precision (`fill_constant`), so results keep their bits. A node kept in a buffer
//! (materialized beforehand: the host or another routine reads it), a 128-bit word, a node with
//! a second write, or one read through a lookup or by a matrix product is left as it is.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{fill_constant, for_each_read, replace_reads, stmt_reads};
use crate::loops::{Scalar, Stmt};
use crate::node::{MemoryMode, NodeId};
use crate::precision::Precision;
use crate::routine::Routine;

/// `routine` with every node that only a fill writes read as the fill's constant.
pub fn inline_constants(mut routine: Routine) -> Routine {
    let constants = constant_nodes(&routine);
    if constants.is_empty() {
        return routine;
    }
    routine
        .body
        .retain(|stmt| !matches!(stmt, Stmt::Fill { node, .. } if constants.contains_key(node)));
    for stmt in &mut routine.body {
        replace_reads(stmt, &mut |node, _| {
            constants
                .get(&node)
                .map(|&constant| Scalar::Const(constant))
        });
    }
    routine.nodes.retain(|id, _| !constants.contains_key(id));
    routine
}

/// The nodes read as constants, with the constant each one's cells hold.
fn constant_nodes(routine: &Routine) -> FxHashMap<NodeId, f64> {
    // The top-level fills, by node: where each is and what it stores.
    let mut fills: FxHashMap<NodeId, Option<(usize, f64)>> = FxHashMap::default();
    for (at, stmt) in routine.body.iter().enumerate() {
        if let Stmt::Fill { node, value } = *stmt {
            fills
                .entry(node)
                .and_modify(|fill| *fill = None)
                .or_insert(Some((at, value)));
        }
    }
    let mut candidates: FxHashMap<NodeId, (usize, f64)> = fills
        .into_iter()
        .filter_map(|(node, fill)| {
            let (at, value) = fill?;
            let info = routine.nodes.get(&node)?;
            let kept = info.memory_mode == Some(MemoryMode::Materialized);
            if kept || info.precision == Precision::Uint4x32 {
                return None;
            }
            Some((node, (at, fill_constant(value, info.precision)?)))
        })
        .collect();
    // Out go those written otherwise, read before their fill, through a lookup or by a
    // product (whose plan names its buffers).
    let mut disqualified: FxHashSet<NodeId> = FxHashSet::default();
    for (at, stmt) in routine.body.iter().enumerate() {
        for_each_read(stmt, &mut |read| {
            if candidates.get(&read).is_some_and(|&(fill, _)| at < fill) {
                disqualified.insert(read);
            }
        });
        stmt.walk(&mut |s| {
            if let Some(node) = s.written_node()
                && !matches!(s, Stmt::Fill { .. } if std::ptr::eq(s, stmt))
            {
                disqualified.insert(node);
            }
            if let Stmt::Gemm { nest, .. } = s {
                for inner in nest {
                    disqualified.extend(stmt_reads(inner));
                }
            }
            for value in s.values() {
                value.for_each_get(&mut |node, _| {
                    if value.looks_up(node) {
                        disqualified.insert(node);
                    }
                });
            }
        });
    }
    candidates.retain(|node, _| !disqualified.contains(node));
    candidates
        .into_iter()
        .map(|(node, (_, constant))| (node, constant))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{Index, LoopVar};
    use crate::node::TensorNode;
    use crate::ops::Binop;

    const OUT: NodeId = NodeId(0);
    const NUMBER: NodeId = NodeId(1);
    const INPUT: NodeId = NodeId(2);

    fn fill(node: NodeId, value: f64) -> Stmt {
        Stmt::Fill { node, value }
    }

    /// `out[i] := input[i] · number[0]` over 4 cells.
    fn scale() -> Stmt {
        let product = Scalar::Binop(
            Binop::Mul,
            Box::new(Scalar::Get(INPUT, vec![Index::var(LoopVar(0), 0)])),
            Box::new(Scalar::Get(NUMBER, vec![Index::constant(0)])),
        );
        Stmt::For {
            var: LoopVar(0),
            range: 4,
            body: vec![Stmt::Set {
                node: OUT,
                index: vec![Index::var(LoopVar(0), 0)],
                value: product,
            }],
        }
    }

    fn routine(number: TensorNode, body: Vec<Stmt>) -> Routine {
        let nodes = [
            TensorNode::new(0, "out", Precision::F32, &[4]),
            number,
            TensorNode::new(2, "input", Precision::F32, &[4]),
        ];
        Routine {
            name: "r".to_owned(),
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            statics: Default::default(),
            body,
        }
    }

    fn number(precision: Precision) -> TensorNode {
        TensorNode::new(1, "0.9", precision, &[1])
    }

    /// Whether `routine`'s body reads `number[0]` as the constant `value`.
    fn reads_constant(routine: &Routine, value: f64) -> bool {
        let mut found = false;
        for stmt in &routine.body {
            stmt.walk(&mut |s| {
                for v in s.values() {
                    found |= matches!(v, Scalar::Binop(_, _, b) if **b == Scalar::Const(value));
                }
            });
        }
        found
    }

    #[test]
    fn a_filled_number_is_read_as_the_constant_its_cells_hold() {
        let r = routine(number(Precision::F32), vec![fill(NUMBER, 0.9), scale()]);
        let inlined = inline_constants(r.clone());
        // The cell holds 0.9 rounded to f32, which is what the read gives.
        assert!(reads_constant(&inlined, f64::from(0.9f32)));
        assert_eq!(inlined.body.len(), 1, "the fill is gone");
        assert!(!inlined.nodes.contains_key(&NUMBER));
        assert_eq!(inlined.nodes.len(), 2);
    }

    #[test]
    fn kept_word_early_read_and_rewritten_numbers_stay_buffers() {
        let mut kept = number(Precision::F32);
        kept.memory_mode = Some(MemoryMode::Materialized);
        let cases = [
            routine(kept, vec![fill(NUMBER, 0.9), scale()]),
            routine(
                number(Precision::Uint4x32),
                vec![fill(NUMBER, 7.0), scale()],
            ),
            // Read before its fill: the first read sees the previous run's value.
            routine(
                number(Precision::F32),
                vec![scale(), fill(NUMBER, 0.9), scale()],
            ),
            // Filled twice.
            routine(
                number(Precision::F32),
                vec![fill(NUMBER, 0.9), scale(), fill(NUMBER, 0.5), scale()],
            ),
            // Written by a store besides its fill.
            routine(
                number(Precision::F32),
                vec![
                    fill(NUMBER, 0.9),
                    Stmt::Set {
                        node: NUMBER,
                        index: vec![Index::constant(0)],
                        value: Scalar::Const(2.0),
                    },
                    scale(),
                ],
            ),
        ];
        for r in cases {
            assert_eq!(inline_constants(r.clone()), r);
        }
    }
}
