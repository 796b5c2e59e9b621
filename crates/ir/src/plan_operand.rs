//! How a matrix-product plan's loops move through one of its operands: the analysis every
//! backend that runs a [`GemmPlan`](crate::GemmPlan) on a kernel of its own starts from.
//!
//! An operand's flat offset is linear in the plan's loops ([`flat_coefficients`]): a coefficient
//! per loop, a constant from the indices' offsets, and a coefficient per static index. From them
//! follow whether a group of loops (rows, columns, reduction, batch) walks the operand as one
//! strided dimension, whether the written loops cover every cell of the result once, and the
//! offsets each position of a group adds.

use std::collections::HashMap;

use crate::index::Symbol;
use crate::loops::{Index, LoopVar, Var};
use crate::optimize::gemm::flat_coefficients;

/// A loop of a plan with its range.
pub type PlanLoop = (LoopVar, usize);

/// One operand of a matrix product as the plan's loops move through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOperand {
    /// Each loop's step in the flat offset (loops absent move nothing).
    pub coefficients: HashMap<LoopVar, i64>,
    /// The offset when every loop and static index is 0.
    pub constant: i64,
    /// Each static index's step in the flat offset (those of step 0 left out).
    pub statics: Vec<(Symbol, i64)>,
}

impl PlanOperand {
    /// The operand read or written at `index` in a buffer of `dims`.
    pub fn new(index: &[Index], dims: &[usize]) -> PlanOperand {
        let mut constant = 0i64;
        let mut stride = 1i64;
        for (axis, dim) in index.iter().zip(dims).rev() {
            constant += axis.offset * stride;
            stride *= *dim as i64;
        }
        let mut coefficients = HashMap::new();
        let mut statics = Vec::new();
        for (var, c) in flat_coefficients(index, dims) {
            match var {
                Var::Loop(l) => {
                    coefficients.insert(l, c);
                }
                Var::Static(s) if c != 0 => statics.push((s, c)),
                Var::Static(_) => {}
            }
        }
        PlanOperand {
            coefficients,
            constant,
            statics,
        }
    }

    /// The step of loop `var`.
    pub fn coefficient(&self, var: LoopVar) -> i64 {
        self.coefficients.get(&var).copied().unwrap_or(0)
    }

    /// The group's loops, taken in the given order (outermost first), as one dimension
    /// `(stride, size)`, if their strides nest in that order.
    pub fn merged(&self, group: &[PlanLoop]) -> Option<(isize, usize)> {
        let Some(&(innermost, _)) = group.last() else {
            return Some((0, 1));
        };
        for pair in group.windows(2) {
            let ((outer, _), (inner, inner_range)) = (pair[0], pair[1]);
            if self.coefficient(outer) != self.coefficient(inner) * inner_range as i64 {
                return None;
            }
        }
        Some((
            self.coefficient(innermost) as isize,
            group.iter().map(|(_, r)| r).product(),
        ))
    }

    /// Whether the loops address each of the first `cells` cells exactly once.
    pub fn covers(&self, loops: &[PlanLoop], cells: usize) -> bool {
        let mut strides: Vec<(i64, usize)> = loops
            .iter()
            .filter(|(_, range)| *range > 1)
            .map(|&(var, range)| (self.coefficient(var), range))
            .collect();
        strides.sort_by_key(|(stride, _)| stride.unsigned_abs());
        let mut next = 1i64;
        for (stride, range) in strides {
            if stride != next {
                return false;
            }
            next *= range as i64;
        }
        self.constant == 0 && self.statics.is_empty() && next as usize == cells
    }

    /// Each loop's step in this operand, with its range.
    pub fn strides(&self, loops: &[PlanLoop]) -> Vec<(i64, usize)> {
        loops
            .iter()
            .map(|&(var, range)| (self.coefficient(var), range))
            .collect()
    }

    /// The flat offsets of every combination of the group's loops, row-major in the group's
    /// order.
    pub fn offsets(&self, group: &[PlanLoop]) -> Vec<i64> {
        let mut offsets = vec![0i64];
        for &(var, range) in group {
            let c = self.coefficient(var);
            offsets = offsets
                .iter()
                .flat_map(|o| (0..range as i64).map(move |i| o + c * i))
                .collect();
        }
        offsets
    }

    /// How far the operand moves per step of the group's innermost loop that moves at all
    /// (`u64::MAX` when none does: no loop moving it is the farthest).
    pub fn unit(&self, group: &[PlanLoop]) -> u64 {
        group
            .iter()
            .rev()
            .find(|(_, range)| *range > 1)
            .map_or(u64::MAX, |(var, _)| self.coefficient(*var).unsigned_abs())
    }

    /// Whether every step and the constant fit 32-bit signed integers.
    pub fn fits_i32(&self) -> bool {
        let fits = |x: i64| i32::try_from(x).is_ok();
        fits(self.constant)
            && self.coefficients.values().all(|&c| fits(c))
            && self.statics.iter().all(|&(_, c)| fits(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(var: u32) -> Index {
        Index::var(LoopVar(var), 0)
    }

    #[test]
    fn a_row_major_matrix_merges_its_loops_and_covers_its_cells() {
        // c[i, j] of a 3×4 buffer over loops i (0) and j (1).
        let c = PlanOperand::new(&[at(0), at(1)], &[3, 4]);
        let (i, j) = ((LoopVar(0), 3), (LoopVar(1), 4));
        assert_eq!(c.merged(&[i, j]), Some((1, 12)));
        assert_eq!(c.merged(&[j, i]), None);
        assert!(c.covers(&[i, j], 12));
        assert!(!c.covers(&[i], 12));
        assert_eq!(c.offsets(&[i]), vec![0, 4, 8]);
        assert_eq!(c.strides(&[i, j]), vec![(4, 3), (1, 4)]);
        assert_eq!(c.unit(&[i, j]), 1);
        assert_eq!(c.unit(&[(LoopVar(2), 5)]), 0);
        assert!(c.fits_i32());
    }

    #[test]
    fn offsets_and_statics_move_the_start_and_forbid_covering() {
        // x[i + 1, s0] of a 4×2 buffer: constant 2, static step 1.
        let mut first = at(0);
        first.offset = 1;
        let second = Index {
            terms: smallvec::smallvec![(1, Var::Static(Symbol(0)))],
            offset: 0,
        };
        let x = PlanOperand::new(&[first, second], &[4, 2]);
        assert_eq!(x.constant, 2);
        assert_eq!(x.statics, vec![(Symbol(0), 1)]);
        assert!(!x.covers(&[(LoopVar(0), 3)], 3));
        let wide = PlanOperand::new(&[at(0)], &[1 << 40]);
        assert!(wide.fits_i32());
        let far = PlanOperand::new(&[at(0), at(1)], &[2, 1 << 40]);
        assert!(!far.fits_i32());
    }
}
