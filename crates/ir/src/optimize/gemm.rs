//! Matrix products: a top-level nest whose one statement is `c[ic] := c[ic] + a[ia] * b[ib]`
//! (optionally right after `fill c with 0`), where every loop is a batch, row, column or
//! reduction loop of the product, becomes a [`Stmt::Gemm`] that keeps the nest as its meaning.
//! Backends with a tuned matrix product run the plan; the others run the nest.
//!
//! This pass runs before memory modes are decided. A product reads its operands from buffers, so
//! an operand the routine computes is materialized (never fused into the product), and so is the
//! result (fused into its reader, the product would be loops again); neither an operand nor the
//! result may have been forced virtual. Products too small for a tuned routine
//! to win stay loops, and so do batches of dot products.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{PerfectNest, for_each_access, gather};
use crate::loops::{GemmPlan, Index, LoopVar, Scalar, Stmt, Var};
use crate::node::{MemoryMode, NodeId};
use crate::ops::Binop;
use crate::precision::Precision;
use crate::routine::Routine;

/// Below this many multiply-adds per batch element a product stays loops. Above it a blocked
/// kernel wins even on small matrices (a 32×16 by 16×16 product, say): generated loops reduce a
/// short sum by adding its vector's lanes one after another, once per result cell.
pub const MIN_GEMM_WORK: usize = 1 << 12;

/// `routine` with its matrix-product nests recognized.
pub fn extract_gemms(mut routine: Routine) -> Routine {
    // The statements move through the pass: those it leaves alone are not copied.
    let stmts = std::mem::take(&mut routine.body);
    let mut written: FxHashSet<NodeId> = FxHashSet::default();
    for stmt in &stmts {
        stmt.walk(&mut |s| written.extend(s.written_node()));
    }
    let mut body = Emitted::default();
    for stmt in stmts {
        let Some(mut plan) = plan_of(&stmt, &routine) else {
            body.push(stmt);
            continue;
        };
        let mut nest = vec![stmt];
        // A fill of zeros a few statements back, none between them mentioning `c`, moves into
        // the product (which then writes its sums instead of adding them).
        if let Some(&at) = body.zero_fills.get(&plan.c) {
            plan.zero_first = true;
            nest.splice(0..0, body.slots[at].take());
        }
        for operand in [plan.a, plan.b, plan.c] {
            let node = routine.nodes.get_mut(&operand).expect("checked by plan_of");
            if node.memory_mode.is_none() && (written.contains(&operand) || operand == plan.c) {
                node.memory_mode = Some(MemoryMode::Materialized);
            }
        }
        body.push(Stmt::Gemm {
            plan: Box::new(plan),
            nest,
        });
    }
    routine.body = body.slots.into_iter().flatten().collect();
    routine
}

/// The statements written so far, in slots (a fill moved into a product leaves its slot empty),
/// with the fills of zeros that no later statement mentions, by node: few at a time, where a
/// map of every node's last mention would grow with the routine.
#[derive(Debug, Default)]
struct Emitted {
    slots: Vec<Option<Stmt>>,
    zero_fills: FxHashMap<NodeId, usize>,
}

impl Emitted {
    fn push(&mut self, stmt: Stmt) {
        if !self.zero_fills.is_empty() {
            for_each_access(&stmt, &mut |node, _| {
                self.zero_fills.remove(&node);
            });
        }
        if let Stmt::Fill { node, value } = stmt
            && value == 0.0
        {
            self.zero_fills.insert(node, self.slots.len());
        }
        self.slots.push(Some(stmt));
    }
}

/// The product `stmt` computes, if it is one worth a tuned routine.
fn plan_of(stmt: &Stmt, routine: &Routine) -> Option<GemmPlan> {
    let nest = PerfectNest::of(stmt)?;
    // A nest with a loop over an empty axis does nothing (and `simplify` drops it).
    if !nest.pre.is_empty() || nest.loops.iter().any(|&(_, range)| range == 0) {
        return None;
    }
    let Scalar::Binop(Binop::Add, accumulated, term) = nest.value else {
        return None;
    };
    let (Scalar::Get(c, c_index), Scalar::Binop(Binop::Mul, a, b)) = (&**accumulated, &**term)
    else {
        return None;
    };
    let (Scalar::Get(a, a_index), Scalar::Get(b, b_index)) = (&**a, &**b) else {
        return None;
    };
    if *c != nest.node || c_index.as_slice() != nest.index || a == c || b == c {
        return None;
    }
    let precision = routine.nodes.get(c)?.precision;
    if !matches!(precision, Precision::F16 | Precision::F32 | Precision::F64) {
        return None;
    }
    for id in [c, a, b] {
        let node = routine.nodes.get(id)?;
        if node.precision != precision || node.memory_mode == Some(MemoryMode::Virtual) {
            return None;
        }
    }
    let mentions = |index: &[Index], var: LoopVar| {
        index.iter().any(|axis| {
            axis.terms
                .iter()
                .any(|(c, v)| *c != 0 && *v == Var::Loop(var))
        })
    };
    let (mut batch, mut m, mut n, mut k) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &(var, range) in &nest.loops {
        let group = match (
            mentions(c_index, var),
            mentions(a_index, var),
            mentions(b_index, var),
        ) {
            // A loop of one trip changes nothing wherever it goes.
            _ if range == 1 => &mut batch,
            (true, true, true) => &mut batch,
            (true, true, false) => &mut m,
            (true, false, true) => &mut n,
            (false, true, true) => &mut k,
            _ => return None,
        };
        group.push((var, range));
    }
    let total = |loops: &[(LoopVar, usize)]| loops.iter().map(|(_, r)| *r).product::<usize>();
    if k.is_empty() || total(&m) * total(&n) * total(&k) < MIN_GEMM_WORK {
        return None;
    }
    // A batch of dot products (a batch norm's per-channel sums of products) is a reduction:
    // as loops, the batch's unit-stride axis runs innermost and vectorizes, where a product
    // per batch element would read each operand a cell per cache line.
    if total(&m) * total(&n) == 1 && total(&batch) > 1 {
        return None;
    }
    let plan = GemmPlan {
        c: *c,
        a: *a,
        b: *b,
        zero_first: false,
        batch,
        m,
        n,
        k,
        c_index: c_index.clone(),
        a_index: a_index.clone(),
        b_index: b_index.clone(),
        a_margins: Vec::new(),
    };
    // Each cell of `c` must receive one sum: the written position determines every loop but the
    // reduction's. A convolution's input gradient, which adds each output position into a
    // window of cells, is one once turned into a gather.
    let dims = routine.nodes[c].buffer_dims();
    let written = plan.written_loops();
    if injective(c_index, &dims, &written) {
        Some(plan)
    } else {
        gather::as_gather(plan, routine)
    }
}

/// The coefficient of each loop variable in the row-major flat offset of `index` into a buffer of
/// `dims`.
pub fn flat_coefficients(index: &[Index], dims: &[usize]) -> Vec<(Var, i64)> {
    let flat = Index::flat(index, dims);
    flat.terms.into_iter().map(|(c, var)| (var, c)).collect()
}

/// Whether distinct values of the `loops` give distinct flat offsets of `index`: sorted by the size
/// of their coefficients, each coefficient exceeds how far all smaller ones reach.
pub(super) fn injective(index: &[Index], dims: &[usize], loops: &[(LoopVar, usize)]) -> bool {
    let coefficients = flat_coefficients(index, dims);
    let mut steps: Vec<(u64, u64)> = Vec::new();
    for &(var, range) in loops {
        if range <= 1 {
            continue;
        }
        let coefficient = coefficients
            .iter()
            .find(|(v, _)| *v == Var::Loop(var))
            .map_or(0, |(_, c)| c.unsigned_abs());
        steps.push((coefficient, range as u64 - 1));
    }
    steps.sort();
    let mut reach = 0u64;
    for (coefficient, trips) in steps {
        if coefficient <= reach {
            return false;
        }
        reach += coefficient * trips;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_offsets_are_linear_in_the_loops() {
        let (i, j) = (LoopVar(0), LoopVar(1));
        // [i, j + 2i + 1] in a 3×10 buffer: 10·i + j + 2i + 1.
        let index = [
            Index::var(i, 0),
            Index {
                terms: smallvec::smallvec![(1, Var::Loop(j)), (2, Var::Loop(i))],
                offset: 1,
            },
        ];
        assert_eq!(
            flat_coefficients(&index, &[3, 10]),
            vec![(Var::Loop(j), 1), (Var::Loop(i), 12)]
        );
        assert!(injective(&index, &[3, 10], &[(i, 3), (j, 5)]));
        // With j running over 12 positions, i + 1 and j − 12 collide.
        assert!(!injective(&index, &[3, 10], &[(i, 3), (j, 13)]));
        // The same loop on both axes of a diagonal is one variable: injective.
        let diagonal = [Index::var(i, 0), Index::var(i, 0)];
        assert!(injective(&diagonal, &[4, 4], &[(i, 4)]));
        assert!(!injective(&[Index::constant(0)], &[1], &[(i, 2)]));
    }

    #[test]
    fn a_zero_fill_moves_into_the_product_unless_its_result_is_read_between() {
        use crate::node::TensorNode;
        let (a, b, c, d) = (NodeId(0), NodeId(1), NodeId(2), NodeId(3));
        let at = |vars: [u32; 2]| vars.map(|v| Index::var(LoopVar(v), 0)).to_vec();
        let nest = |loops: &[u32], stmt: Stmt| {
            loops.iter().rev().fold(stmt, |stmt, &var| Stmt::For {
                var: LoopVar(var),
                range: 16,
                body: vec![stmt],
            })
        };
        // c[i, j] += a[i, k] · b[k, j], with i, j, k the loops 0, 1, 2.
        let product = nest(
            &[0, 1, 2],
            Stmt::Set {
                node: c,
                index: at([0, 1]),
                value: Scalar::Binop(
                    Binop::Add,
                    Box::new(Scalar::Get(c, at([0, 1]))),
                    Box::new(Scalar::Binop(
                        Binop::Mul,
                        Box::new(Scalar::Get(a, at([0, 2]))),
                        Box::new(Scalar::Get(b, at([2, 1]))),
                    )),
                ),
            },
        );
        let fill = |node| Stmt::Fill { node, value: 0.0 };
        let copy_of_c = nest(
            &[3, 4],
            Stmt::Set {
                node: d,
                index: at([3, 4]),
                value: Scalar::Get(c, at([3, 4])),
            },
        );
        let routine = |body| Routine {
            name: "r".to_owned(),
            nodes: (0..4)
                .map(|id| {
                    let node = TensorNode::new(id, "t", Precision::F32, &[16, 16]);
                    (node.id, node)
                })
                .collect(),
            statics: Default::default(),
            body,
        };
        let moved = extract_gemms(routine(vec![fill(c), fill(d), product.clone()]));
        let [Stmt::Fill { node, .. }, Stmt::Gemm { plan, nest }] = &moved.body[..] else {
            panic!("the fill of d, then the product: {moved}");
        };
        assert_eq!((*node, plan.zero_first), (d, true));
        assert_eq!(nest[..], [fill(c), product.clone()]);
        let kept = extract_gemms(routine(vec![fill(c), copy_of_c, product]));
        let [
            Stmt::Fill { .. },
            Stmt::For { .. },
            Stmt::Gemm { plan, nest },
        ] = &kept.body[..]
        else {
            panic!("the fill, the copy, then the product: {kept}");
        };
        assert!(!plan.zero_first);
        assert_eq!(nest.len(), 1);
    }
}
