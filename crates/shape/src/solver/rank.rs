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

use std::collections::BinaryHeap;

use super::var_set::VarSet;
use crate::error::ShapeError;
use crate::term::RowVarId;

#[derive(Debug, Clone, Default)]
pub(super) struct RankGraph {
    /// A feasible rank assignment for every fact so far (indexed by variable).
    potential: Vec<i64>,
    /// For each variable σ, the facts `rank(ρ) ≥ rank(σ) + k` as `(ρ, k)`: what raising σ may
    /// violate.
    dependents: FactLists,
    /// The work space of one raise, kept so that raising allocates nothing once it has grown:
    /// the variables raised, each with its new potential, the same as a set, and the raises
    /// pending. Empty between raises.
    raised: Vec<(RowVarId, i64)>,
    raised_set: VarSet<RowVarId>,
    pending: BinaryHeap<(i64, RowVarId)>,
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
            let feasible = self.raise(from, needed, to);
            // Applied only when feasible: a failed insertion changes nothing.
            for &(var, value) in &self.raised {
                self.raised_set.remove(var);
                let index = var.0 as usize;
                if feasible {
                    if self.potential.len() <= index {
                        self.potential.resize(index + 1, 0);
                    }
                    self.potential[index] = value;
                }
            }
            self.raised.clear();
            self.pending.clear();
            if !feasible {
                return Err(ShapeError::new(
                    "no number of axes fits: two rows would each need more axes than the other",
                ));
            }
        }
        if from != to && !self.dependents.of(to).any(|fact| fact == (from, weight)) {
            self.dependents.push(to, (from, weight));
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

    /// Raises `start` to `value` and everything that depends on it as far as needed, into
    /// `raised` (the potentials stay as they were); false if `forbidden` would have to rise (a
    /// positive cycle).
    ///
    /// Raises shrink along a fact by its slack, which the old potentials keep non-negative, so
    /// taking the largest pending raise first settles each variable once (Dijkstra's argument).
    fn raise(&mut self, start: RowVarId, value: i64, forbidden: RowVarId) -> bool {
        self.pending.push((value - self.potential_of(start), start));
        while let Some((delta, var)) = self.pending.pop() {
            if self.raised_set.contains(var) {
                continue;
            }
            if var == forbidden {
                return false;
            }
            let new_value = self.potential_of(var) + delta;
            self.raised.push((var, new_value));
            self.raised_set.insert(var);
            for (dependent, weight) in self.dependents.of(var) {
                let needed = new_value + weight;
                if !self.raised_set.contains(dependent) && needed > self.potential_of(dependent) {
                    self.pending
                        .push((needed - self.potential_of(dependent), dependent));
                }
            }
        }
        true
    }
}

/// A list of facts `(ρ, k)` for each variable, all kept in one arena: every row variable may
/// get a few, and a vector of its own for each would be an allocation apiece. Positions in the
/// arena are 32-bit, [`NO_ENTRY`] standing for none: a session holds far fewer facts than that
/// (each costs a step of solving and bytes of memory).
#[derive(Debug, Clone, Default)]
struct FactLists {
    /// For each variable, the positions of its list's first and last entries.
    ends: Vec<[u32; 2]>,
    entries: Vec<FactEntry>,
}

const NO_ENTRY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct FactEntry {
    var: RowVarId,
    /// The position of the next entry of the same list.
    next: u32,
    weight: i64,
}

impl FactLists {
    /// The facts of `var`, in the order they were pushed.
    fn of(&self, var: RowVarId) -> impl Iterator<Item = (RowVarId, i64)> + '_ {
        let mut position = self
            .ends
            .get(var.0 as usize)
            .map_or(NO_ENTRY, |ends| ends[0]);
        std::iter::from_fn(move || {
            let entry = self.entries.get(position as usize)?;
            position = entry.next;
            Some((entry.var, entry.weight))
        })
    }

    /// Appends `fact` to the list of `var`.
    fn push(&mut self, var: RowVarId, (other, weight): (RowVarId, i64)) {
        let position = self.entries.len() as u32;
        self.entries.push(FactEntry {
            var: other,
            next: NO_ENTRY,
            weight,
        });
        let index = var.0 as usize;
        if self.ends.len() <= index {
            self.ends.resize(index + 1, [NO_ENTRY; 2]);
        }
        let [first, last] = self.ends[index];
        self.ends[index] = if first == NO_ENTRY {
            [position, position]
        } else {
            self.entries[last as usize].next = position;
            [first, position]
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_lists_keep_each_variables_facts_in_order() {
        let [a, b, c] = [0, 1, 2].map(RowVarId);
        let mut lists = FactLists::default();
        assert_eq!(lists.of(b).count(), 0, "a variable never seen has no facts");
        lists.push(b, (a, 1));
        lists.push(a, (c, -2));
        lists.push(b, (c, 0));
        lists.push(b, (a, 3));
        assert_eq!(lists.of(b).collect::<Vec<_>>(), [(a, 1), (c, 0), (a, 3)]);
        assert_eq!(lists.of(a).collect::<Vec<_>>(), [(c, -2)]);
        assert_eq!(lists.of(c).count(), 0);
    }

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

    #[test]
    fn a_failed_raise_leaves_the_potentials_and_the_next_raise_as_they_were() {
        let [a, b, c, d] = [0, 1, 2, 3].map(RowVarId);
        let mut graph = RankGraph::default();
        graph.add_fact(b, a, 1).unwrap();
        graph.add_fact(c, b, 1).unwrap();
        let before: Vec<i64> = [a, b, c, d].map(|v| graph.potential_of(v)).to_vec();
        // Raising a would raise b and c, and c must stay below a: a positive cycle.
        assert!(graph.add_fact(a, c, 0).is_err());
        let after: Vec<i64> = [a, b, c, d].map(|v| graph.potential_of(v)).to_vec();
        assert_eq!(before, after, "a failed insertion changes nothing");
        // The next raise goes through the same variables from a clean slate.
        graph.add_fact(a, d, 5).unwrap();
        assert_eq!(graph.potential_of(a), graph.potential_of(d) + 5);
        assert_eq!(graph.potential_of(b), graph.potential_of(a) + 1);
        assert_eq!(graph.potential_of(c), graph.potential_of(b) + 1);
    }
}
