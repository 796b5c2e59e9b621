//! A convolution's input gradient as a matrix product. Backprop through `y[h] += x[h + j] · w[j]`
//! adds each output gradient into a window of input cells, `dx[h + j] += dy[h] · w[j]`: a product
//! whose written position does not determine its row loop, which no matrix-product routine runs.
//! Over `i = h + j` the same sums are a gather, `dx[i] += dy[i − j] · w[j]` summed over `j`, where
//! `dy` reads zero outside its range: a plan that reads `dy` through a copy widened by zero
//! margins ([`GemmPlan::a_margins`]), with `j` a reduction loop (run backwards, `j' = J − 1 − j`,
//! so that the copy is read at `i + j'`).
//!
//! The gather adds, to each cell, the nest's terms and products of a margin's zero with a filter
//! value; those leave the sum as it is unless the filter holds an infinity or a NaN (or the sum is
//! −0, which becomes +0). The terms arrive in another order, as they do in any tuned product.

use super::gemm::injective;
use crate::loops::{GemmPlan, Index, LoopVar, Var};
use crate::routine::Routine;

/// How many times the nest's multiply-adds a gather may do, counting the margins' zeros.
const MAX_GROWTH: u128 = 4;

/// `plan` (a product whose written index is not one-to-one) as a gather over a zero-widened
/// operand, if each of `c`'s axes that the written index does not determine adds a row and a
/// column loop, `u + d·v`, where `u` runs over the whole of one axis of the operand it reads
/// (the output gradient) and over nothing else. Of the two ways to choose that operand, the one
/// with less work.
pub fn as_gather(plan: GemmPlan, routine: &Routine) -> Option<GemmPlan> {
    // A static index would make the plan's reach known only when it runs.
    let statics = [&plan.a_index, &plan.b_index, &plan.c_index]
        .into_iter()
        .flatten()
        .flat_map(Index::vars)
        .any(|var| matches!(var, Var::Static(_)));
    if statics {
        return None;
    }
    let swapped = GemmPlan {
        a: plan.b,
        b: plan.a,
        m: plan.n.clone(),
        n: plan.m.clone(),
        a_index: plan.b_index.clone(),
        b_index: plan.a_index.clone(),
        ..plan.clone()
    };
    let work = |plan: &GemmPlan| {
        [&plan.batch, &plan.m, &plan.n, &plan.k]
            .into_iter()
            .flatten()
            .map(|(_, range)| *range as u128)
            .product::<u128>()
    };
    // Where the margins are wide next to what they pad (a strided convolution's gradient
    // gathered over its filter), most terms would be zeros: the nest is better.
    let bound = work(&plan).saturating_mul(MAX_GROWTH);
    [plan, swapped]
        .into_iter()
        .filter_map(|plan| gather_over_a(plan, routine))
        .filter(|gathered| work(gathered) <= bound)
        .min_by_key(work)
}

/// `plan` as a gather reading `a` through zero margins, if `a` can be the widened operand.
fn gather_over_a(mut plan: GemmPlan, routine: &Routine) -> Option<GemmPlan> {
    let a_dims = routine.nodes.get(&plan.a)?.buffer_dims();
    let mut margins = vec![(0usize, 0usize); a_dims.len()];
    let mut next_var = [&plan.batch, &plan.m, &plan.n, &plan.k]
        .into_iter()
        .flatten()
        .map(|(var, _)| var.0)
        .max()?
        .checked_add(1)?;
    let mut gathered = false;
    for axis in 0..plan.c_index.len() {
        let loops: Vec<(i64, LoopVar)> = plan.c_index[axis]
            .terms
            .iter()
            .filter(|(coefficient, _)| *coefficient != 0)
            .map(|&(coefficient, var)| match var {
                Var::Loop(var) => Some((coefficient, var)),
                Var::Static(_) => None,
            })
            .collect::<Option<_>>()?;
        if loops.len() < 2 {
            continue;
        }
        let [first, second] = loops[..] else {
            return None;
        };
        // `u` is a row loop (in `c` and `a`) entering with coefficient 1; `v` a column loop.
        let ((_, u), (dilation, v)) =
            [(first, second), (second, first)]
                .into_iter()
                .find(|((cu, u), (_, v))| {
                    *cu == 1 && in_group(&plan.m, *u).is_some() && in_group(&plan.n, *v).is_some()
                })?;
        let (&(_, u_range), &(_, v_range)) = (in_group(&plan.m, u)?, in_group(&plan.n, v)?);
        if dilation < 1
            || axes_mentioning(&plan.c_index, u) != [axis]
            || axes_mentioning(&plan.c_index, v) != [axis]
        {
            return None;
        }
        let [a_axis] = axes_mentioning(&plan.a_index, u)[..] else {
            return None;
        };
        if plan.a_index[a_axis] != Index::var(u, 0)
            || a_dims[a_axis] != u_range
            || margins[a_axis] != (0, 0)
        {
            return None;
        }
        let margin = usize::try_from(dilation)
            .ok()?
            .checked_mul(v_range.checked_sub(1)?)?;
        let i = LoopVar(next_var);
        next_var = next_var.checked_add(1)?;
        // With `v` counting down (`v' = taps − 1 − v`), the widened operand reads `i + d·v'`:
        // its addresses rise with both loops, and each cell takes its terms in the nest's order
        // of `u`.
        plan.c_index[axis] = Index::var(i, plan.c_index[axis].offset);
        plan.a_index[a_axis] = Index {
            terms: smallvec::smallvec![(1, Var::Loop(i)), (dilation, Var::Loop(v))],
            offset: 0,
        };
        let last = i64::try_from(v_range).ok()? - 1;
        for b_axis in &mut plan.b_index {
            for (coefficient, var) in &mut b_axis.terms {
                if *var == Var::Loop(v) {
                    b_axis.offset = b_axis.offset.checked_add(coefficient.checked_mul(last)?)?;
                    *coefficient = -*coefficient;
                }
            }
        }
        margins[a_axis] = (margin, margin);
        for entry in &mut plan.m {
            if entry.0 == u {
                *entry = (i, u_range.checked_add(margin)?);
            }
        }
        plan.n.retain(|(var, _)| *var != v);
        plan.k.push((v, v_range));
        gathered = true;
    }
    if !gathered {
        return None;
    }
    plan.a_margins = margins;
    let c_dims = routine.nodes.get(&plan.c)?.buffer_dims();
    let written = plan.written_loops();
    injective(&plan.c_index, &c_dims, &written).then_some(plan)
}

/// The entry of `var` in `group`.
fn in_group(group: &[(LoopVar, usize)], var: LoopVar) -> Option<&(LoopVar, usize)> {
    group.iter().find(|(v, _)| *v == var)
}

/// The positions of the axes of `index` that mention `var`.
fn axes_mentioning(index: &[Index], var: LoopVar) -> Vec<usize> {
    index
        .iter()
        .enumerate()
        .filter(|(_, axis)| {
            axis.terms
                .iter()
                .any(|(c, v)| *c != 0 && *v == Var::Loop(var))
        })
        .map(|(position, _)| position)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{NodeId, TensorNode};
    use crate::precision::Precision;

    /// `dx[h + d·j, c] += g[h, o] · w[j, o, c]`, `h < 40`, `j < taps`, over nodes dx 0, g 1, w 2;
    /// with `swap`, `g` and `w` trade places as `a` and `b`.
    fn scatter(taps: usize, dilation: i64, swap: bool) -> (GemmPlan, Routine) {
        let (h, j, c, o) = (LoopVar(0), LoopVar(1), LoopVar(2), LoopVar(3));
        let span = 40 + dilation as usize * (taps - 1);
        let node = |id, dims: &[usize]| {
            let node = TensorNode::new(id, "t", Precision::F32, dims);
            (node.id, node)
        };
        let routine = Routine {
            name: "scatter".to_owned(),
            nodes: [
                node(0, &[span, 5]),
                node(1, &[40, 7]),
                node(2, &[taps, 7, 5]),
            ]
            .into_iter()
            .collect(),
            statics: Default::default(),
            body: Vec::new(),
        };
        let g_index = vec![Index::var(h, 0), Index::var(o, 0)];
        let w_index = vec![Index::var(j, 0), Index::var(o, 0), Index::var(c, 0)];
        let mut plan = GemmPlan {
            c: NodeId(0),
            a: NodeId(1),
            b: NodeId(2),
            zero_first: false,
            batch: Vec::new(),
            m: vec![(h, 40)],
            n: vec![(j, taps), (c, 5)],
            k: vec![(o, 7)],
            c_index: vec![
                Index {
                    terms: smallvec::smallvec![(1, Var::Loop(h)), (dilation, Var::Loop(j))],
                    offset: 0,
                },
                Index::var(c, 0),
            ],
            a_index: g_index,
            b_index: w_index,
            a_margins: Vec::new(),
        };
        if swap {
            std::mem::swap(&mut plan.a, &mut plan.b);
            std::mem::swap(&mut plan.m, &mut plan.n);
            std::mem::swap(&mut plan.a_index, &mut plan.b_index);
        }
        (plan, routine)
    }

    #[test]
    fn overlapping_windows_become_a_gather_over_the_widened_gradient() {
        for swap in [false, true] {
            let (plan, routine) = scatter(3, 2, swap);
            let gathered = as_gather(plan, &routine).expect("a gather");
            let (j, c, o, i) = (LoopVar(1), LoopVar(2), LoopVar(3), LoopVar(4));
            // dx[i, c] += g'[i + 2j', o] · w[2 − j', o, c], g' being g with 4 zero rows either
            // side and j' = 2 − j.
            assert_eq!(gathered.a, NodeId(1), "swap {swap}");
            assert_eq!(gathered.a_margins, vec![(4, 4), (0, 0)]);
            assert_eq!(gathered.c_index, vec![Index::var(i, 0), Index::var(c, 0)]);
            assert_eq!(
                gathered.a_index,
                vec![
                    Index {
                        terms: smallvec::smallvec![(1, Var::Loop(i)), (2, Var::Loop(j))],
                        offset: 0,
                    },
                    Index::var(o, 0),
                ]
            );
            assert_eq!(
                gathered.b_index,
                vec![
                    Index {
                        terms: smallvec::smallvec![(-1, Var::Loop(j))],
                        offset: 2,
                    },
                    Index::var(o, 0),
                    Index::var(c, 0),
                ]
            );
            assert_eq!(gathered.m, vec![(i, 44)]);
            assert_eq!(gathered.n, vec![(c, 5)]);
            assert_eq!(gathered.k, vec![(o, 7), (j, 3)]);
        }
    }

    #[test]
    fn a_gather_mostly_over_zeros_or_over_part_of_an_axis_is_refused() {
        // Strided, `dx[2h + j]`: only the filter could be widened, by 78 rows of zeros on either
        // side of its 3.
        let (mut strided, routine) = scatter(3, 1, false);
        strided.c_index[0].terms =
            smallvec::smallvec![(2, Var::Loop(LoopVar(0))), (1, Var::Loop(LoopVar(1)))];
        let mut taller = routine.clone();
        taller.nodes.get_mut(&NodeId(0)).unwrap().dims[0] = 81;
        assert_eq!(as_gather(strided, &taller), None);
        // `g` has a row the nest never reads: a gather would add it in.
        let (plan, routine) = scatter(3, 1, false);
        let mut longer = routine.clone();
        longer.nodes.get_mut(&NodeId(1)).unwrap().dims[0] = 41;
        assert_eq!(as_gather(plan.clone(), &longer), None);
        assert!(as_gather(plan, &routine).is_some());
    }
}
