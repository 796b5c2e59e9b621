//! The table filled by size under a cost cap, as opt_einsum's `dp` does: the connected sets of
//! each size from pairs of smaller ones joined by a label, a set kept only when its cheapest way
//! costs at most the cap. A set on the cheapest path costs at most the whole, so the first cap
//! under which a part is reached gives its cheapest way; the cap starts at the cells of the
//! part's result labels and grows by its smallest label size (at least 2) up to the bound. Sets
//! over the cap are never extended, which keeps the table small where cheap sets are few.

use super::{Connected, OverBudget};

/// The members of `set`, lowest first.
fn ascending(set: u128) -> impl Iterator<Item = usize> {
    let mut left = set;
    std::iter::from_fn(move || {
        (left != 0).then(|| {
            let low = left.trailing_zeros() as usize;
            left &= left - 1;
            low
        })
    })
}

impl Connected<'_> {
    /// Fills the table for each of `parts`, leaving out a part no cap up to the bound reaches.
    pub(super) fn by_levels(&mut self, parts: &[u128]) -> Result<(), OverBudget> {
        for &part in parts {
            if part.count_ones() > 1 {
                self.part_by_levels(part)?;
            }
        }
        Ok(())
    }

    fn part_by_levels(&mut self, part: u128) -> Result<(), OverBudget> {
        let labels = self.labels;
        let mut in_part: Vec<usize> = ascending(part)
            .flat_map(|i| labels.operands[i].iter().map(|&l| l as usize))
            .collect();
        in_part.sort_unstable();
        in_part.dedup();
        let in_result = in_part.iter().filter(|&&l| labels.in_result[l]);
        let start: f64 = in_result.map(|&l| labels.sizes[l]).product();
        let smallest = in_part
            .iter()
            .map(|&l| labels.sizes[l])
            .fold(f64::INFINITY, f64::min);
        let growth = smallest.max(2.0);
        self.cap = start.max(1.0).min(self.bound);
        loop {
            let made = self.fill_levels(part)?;
            if self.plans.contains_key(&part) || self.cap >= self.bound {
                return Ok(());
            }
            // Starting over under a higher cap: the sets made under this one go.
            for set in made {
                self.plans.remove(&set);
            }
            self.cap = (self.cap * growth).min(self.bound);
        }
    }

    /// One pass under the cap: the sets it made, smallest first.
    fn fill_levels(&mut self, part: u128) -> Result<Vec<u128>, OverBudget> {
        let size = part.count_ones() as usize;
        let n = self.labels.operands.len();
        let mut levels: Vec<Vec<u128>> = vec![Vec::new(); size + 1];
        levels[1] = ascending(part).map(|i| 1 << i).collect();
        // The sets of each level holding each operand.
        let mut holding: Vec<Vec<Vec<u128>>> = vec![Vec::new(); size + 1];
        holding[1] = (0..n).map(|i| vec![1u128 << i]).collect();
        for total in 2..=size {
            let mut level = Vec::new();
            for (smaller, firsts) in levels.iter().enumerate().take(total / 2 + 1).skip(1) {
                let larger = total - smaller;
                for &first in firsts {
                    let near = self.neighbourhood(first);
                    for j in ascending(near) {
                        for &second in &holding[larger][j] {
                            self.spend(1)?;
                            // Each pair once: through its lowest operand next to `first`, and
                            // with parts of one size, the lower set first.
                            let seen_at = (second & near).trailing_zeros() as usize;
                            if second & first != 0
                                || seen_at != j
                                || (smaller == larger && second < first)
                            {
                                continue;
                            }
                            if self.weigh(first, second)? {
                                level.push(first | second);
                            }
                        }
                    }
                }
            }
            let mut by_operand = vec![Vec::new(); n];
            for &set in &level {
                for i in ascending(set) {
                    by_operand[i].push(set);
                }
            }
            holding[total] = by_operand;
            levels[total] = level;
        }
        Ok(levels.into_iter().skip(2).flatten().collect())
    }
}
