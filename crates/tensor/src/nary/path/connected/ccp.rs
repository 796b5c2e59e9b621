//! The table filled by weighing each split of a connected set into two connected parts joined
//! by a label exactly once, as DPccp enumerates them (Moerkotte and Neumann, "Analysis of two
//! existing and one new dynamic programming algorithm for the generation of optimal bushy join
//! trees without cross products", VLDB 2006): connected sets by their lowest operand, highest
//! first, each grown through its neighbours outside the operands below; for each, the connected
//! sets of higher operands next to it. Both parts of a split are complete before it is weighed.

use super::{Connected, OverBudget, up_to};

/// The nonempty subsets of `set`, in increasing order (so each after its subsets).
fn subsets(set: u128) -> impl Iterator<Item = u128> {
    let mut sub = 0u128;
    std::iter::from_fn(move || {
        sub = sub.wrapping_sub(set) & set;
        (sub != 0).then_some(sub)
    })
}

/// The members of `set`, highest first.
fn descending(set: u128) -> impl Iterator<Item = u32> {
    let mut left = set;
    std::iter::from_fn(move || {
        (left != 0).then(|| {
            let top = 127 - left.leading_zeros();
            left &= !(1u128 << top);
            top
        })
    })
}

impl Connected<'_> {
    /// Fills the table for each of `parts`.
    pub(super) fn by_complements(&mut self, parts: &[u128]) -> Result<(), OverBudget> {
        self.cap = self.bound;
        for &part in parts {
            for i in descending(part) {
                self.spend(1)?;
                let around = self.neighbourhood(1 << i);
                self.with_complements(1 << i, around)?;
                self.grow(1 << i, around, up_to(i))?;
            }
        }
        Ok(())
    }

    /// The operands next to `set ∪ sub`, from those next to `set` (`around`): only `sub`'s
    /// neighbours are looked up.
    fn around(&self, set: u128, around: u128, sub: u128) -> u128 {
        (around | self.neighbourhood(sub)) & !(set | sub)
    }

    /// Meets the connected sets made by adding to `set` (next to `around`) operands reachable
    /// from it outside `excluded`, and weighs their splits.
    fn grow(&mut self, set: u128, around: u128, excluded: u128) -> Result<(), OverBudget> {
        let near = around & !excluded;
        if near == 0 {
            return Ok(());
        }
        for sub in subsets(near) {
            self.spend(1)?;
            if self.plans.contains_key(&(set | sub)) {
                let grown = self.around(set, around, sub);
                self.with_complements(set | sub, grown)?;
            }
        }
        for sub in subsets(near) {
            let grown = self.around(set, around, sub);
            self.grow(set | sub, grown, excluded | near)?;
        }
        Ok(())
    }

    /// Weighs the joins of `first` (next to `around`), whose cheapest way is known, with each
    /// connected set of higher-numbered operands next to it.
    fn with_complements(&mut self, first: u128, around: u128) -> Result<(), OverBudget> {
        if !self.plans.contains_key(&first) {
            return Ok(());
        }
        let excluded = first | up_to(first.trailing_zeros());
        let near = around & !excluded;
        for i in descending(near) {
            self.weigh(first, 1 << i)?;
            let second_around = self.neighbourhood(1 << i);
            self.complements(first, 1 << i, second_around, excluded | (up_to(i) & near))?;
        }
        Ok(())
    }

    /// Weighs the joins of `first` with the connected sets grown from `second` (next to
    /// `around`) outside `excluded`.
    fn complements(
        &mut self,
        first: u128,
        second: u128,
        around: u128,
        excluded: u128,
    ) -> Result<(), OverBudget> {
        let near = around & !excluded;
        if near == 0 {
            return Ok(());
        }
        for sub in subsets(near) {
            self.weigh(first, second | sub)?;
        }
        for sub in subsets(near) {
            let grown = self.around(second, around, sub);
            self.complements(first, second | sub, grown, excluded | near)?;
        }
        Ok(())
    }
}
