//! The rank facts: `rank(ρ) ≥ rank(σ) + k` for row variables (k may be negative: a binding is an
//! equality, recorded both ways). Facts are never removed, even after their variables are solved.
//! A cycle of facts with positive total weight is unsatisfiable (summing around it gives
//! `r ≥ r + k`), and rejecting it is what makes the deficit rule terminate: without it,
//! `ρ1 ⊑ [a]·ρ2, ρ2 ⊑ [b]·ρ1` would grow both rows forever.
//!
//! The check is incremental (difference constraints kept feasible by a potential, in the manner
//! of Cotton and Maler): every variable carries a potential `p` satisfying every fact so far. A new
//! fact that `p` already satisfies costs nothing, which is the common case: facts point from an
//! operation's result to its operands, and results are newer. Otherwise the violated side is
//! raised and the raise propagated, largest first, to the facts that depend on it; the fact closes
//! a positive cycle exactly when the propagation comes back to raise the fact's other side. A
//! failed insertion changes nothing.

use std::collections::{BinaryHeap, HashMap};

use crate::error::ShapeError;
use crate::term::RowVarId;

#[derive(Debug, Clone, Default)]
pub(super) struct RankGraph {
    /// A feasible rank assignment for every fact so far (indexed by variable).
    potential: Vec<i64>,
    /// For each variable σ, the facts `rank(ρ) ≥ rank(σ) + k` as `(ρ, k)`: what raising σ may
    /// violate.
    dependents: Vec<Vec<(RowVarId, i64)>>,
}

impl RankGraph {
    /// Records `rank(from) ≥ rank(to) + weight`, failing if that closes a cycle of positive total
    /// weight.
    pub(super) fn add_fact(
        &mut self,
        from: RowVarId,
        to: RowVarId,
        weight: i64,
    ) -> Result<(), ShapeError> {
        let needed = self.potential_of(to) + weight;
        if needed > self.potential_of(from) {
            let raised = self.raise(from, needed, to).ok_or_else(|| {
                ShapeError::new(
                    "no number of axes fits: two rows would each need more axes than the other",
                )
            })?;
            for (var, value) in raised {
                let index = var.0 as usize;
                if self.potential.len() <= index {
                    self.potential.resize(index + 1, 0);
                }
                self.potential[index] = value;
            }
        }
        if from != to {
            let index = to.0 as usize;
            if self.dependents.len() <= index {
                self.dependents.resize(index + 1, Vec::new());
            }
            if !self.dependents[index].contains(&(from, weight)) {
                self.dependents[index].push((from, weight));
            }
        }
        Ok(())
    }

    /// Records `rank(from) = rank(to) + weight` (a binding `from := l·to·r`).
    pub(super) fn add_equality(
        &mut self,
        from: RowVarId,
        to: RowVarId,
        weight: i64,
    ) -> Result<(), ShapeError> {
        self.add_fact(from, to, weight)?;
        self.add_fact(to, from, -weight)
    }

    /// A variable no fact has raised yet has potential 0.
    fn potential_of(&self, var: RowVarId) -> i64 {
        self.potential.get(var.0 as usize).copied().unwrap_or(0)
    }

    /// The new potentials after raising `start` to `value` and everything that depends on it as
    /// far as needed, or `None` if `forbidden` would have to rise (a positive cycle).
    ///
    /// Raises shrink along a fact by its slack, which the old potentials keep non-negative, so
    /// taking the largest pending raise first settles each variable once (Dijkstra's argument).
    fn raise(
        &self,
        start: RowVarId,
        value: i64,
        forbidden: RowVarId,
    ) -> Option<HashMap<RowVarId, i64>> {
        let mut raised: HashMap<RowVarId, i64> = HashMap::new();
        let mut pending = BinaryHeap::from([(value - self.potential_of(start), start)]);
        while let Some((delta, var)) = pending.pop() {
            if raised.contains_key(&var) {
                continue;
            }
            if var == forbidden {
                return None;
            }
            let new_value = self.potential_of(var) + delta;
            raised.insert(var, new_value);
            for &(dependent, weight) in self.dependents.get(var.0 as usize).into_iter().flatten() {
                let needed = new_value + weight;
                if !raised.contains_key(&dependent) && needed > self.potential_of(dependent) {
                    pending.push((needed - self.potential_of(dependent), dependent));
                }
            }
        }
        Some(raised)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_cycles_are_fine_positive_cycles_fail() {
        let (a, b, c) = (RowVarId(0), RowVarId(1), RowVarId(2));
        let mut graph = RankGraph::default();
        graph.add_fact(a, b, 0).unwrap();
        graph.add_fact(b, a, 0).unwrap();
        graph.add_fact(b, c, 1).unwrap();
        assert!(graph.add_fact(c, a, 0).is_err());
        assert!(graph.add_fact(a, a, 1).is_err());
        graph.add_fact(a, a, 0).unwrap();
        // An equality c = a + 1 is consistent with a ≥ b ≥ c − 1... but not with b ≥ c + 1.
        let mut graph = RankGraph::default();
        graph.add_equality(c, a, 1).unwrap();
        graph.add_fact(a, b, 0).unwrap();
        assert!(graph.add_fact(b, c, 0).is_err());
    }
}
