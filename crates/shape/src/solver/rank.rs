//! The rank-fact graph: an edge `ρ →k σ` records that every solution has
//! `rank(ρ) ≥ rank(σ) + k` (k may be negative: a binding is an equality, recorded both ways). Edges are never removed, even after their variables are solved. A cycle
//! through an edge of positive weight is unsatisfiable (summing around it gives `r ≥ r + k`), and
//! rejecting it is what makes the deficit rule terminate: without it, `ρ1 ⊑ [a]·ρ2, ρ2 ⊑ [b]·ρ1`
//! would grow both rows forever.

use std::collections::{HashMap, HashSet};

use crate::error::ShapeError;
use crate::term::RowVarId;

#[derive(Debug, Clone, Default)]
pub(super) struct RankGraph {
    edges: HashMap<RowVarId, Vec<(RowVarId, i64)>>,
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
        if let Some(back) = self.longest_path(to, from)
            && back + weight > 0
        {
            return Err(ShapeError::new(format!(
                "Infinite number of axes by rank cycle among row variables (..${}.. and ..${}.. \
                 would each need more axes than the other)",
                from.0, to.0
            )));
        }
        let out = self.edges.entry(from).or_default();
        if !out.contains(&(to, weight)) {
            out.push((to, weight));
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

    /// The greatest total weight of a path from `start` to `target`, if there is one. The graph
    /// has no positive cycle (every insertion checks), so relaxation settles.
    fn longest_path(&self, start: RowVarId, target: RowVarId) -> Option<i64> {
        let mut best: HashMap<RowVarId, i64> = HashMap::from([(start, 0)]);
        let mut work = vec![start];
        let mut queued: HashSet<RowVarId> = HashSet::from([start]);
        while let Some(node) = work.pop() {
            queued.remove(&node);
            let here = best[&node];
            for &(next, weight) in self.edges.get(&node).into_iter().flatten() {
                let candidate = here + weight;
                if best.get(&next).is_none_or(|&old| candidate > old) {
                    best.insert(next, candidate);
                    if queued.insert(next) {
                        work.push(next);
                    }
                }
            }
        }
        best.get(&target).copied()
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
