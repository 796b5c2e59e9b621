//! Dynamic programming over connected subgraphs: the cheapest path that joins only operands
//! sharing a label outside the result, save for joining the connected parts at the end, the
//! smallest two first (the idea of opt_einsum's `dp`). Operands are a graph's vertices, joined
//! when they share a label outside the result; the search weighs each split of a connected set of
//! operands into two connected parts joined by a label once, enumerating them as DPccp does
//! (Moerkotte and Neumann, "Analysis of two existing and one new dynamic programming algorithm
//! for the generation of optimal bushy join trees without cross products", VLDB 2006) in an order
//! where both parts' cheapest ways are known before their union is weighed. A chain of n operands
//! has n³/6 such splits, a ring about n³/2, a tree as many as its subtrees allow: chains and rings
//! are solved exactly in polynomial time. Subsets are 128-bit masks, so the search takes at most
//! [`CONNECTED_UP_TO`] operands, and it gives up past [`BUDGET`] splits weighed or connected sets
//! met; a set costing more than a bound (the cheapest path found so far) is dropped, since no path
//! through it can beat that.

use std::collections::{BinaryHeap, HashMap};

use super::{Interned, Merges, bitset, points};

/// The most operands the search takes.
pub(super) const CONNECTED_UP_TO: usize = 128;

/// The most splits weighed and connected sets met before the search gives up.
pub(super) const BUDGET: usize = 1 << 19;

/// The budget is spent.
struct OverBudget;

/// The search's state: the cheapest way found to contract each connected set.
struct Connected<'a> {
    labels: &'a Interned,
    limit: f64,
    bound: f64,
    words: usize,
    /// Every operand.
    all: u128,
    /// The operands holding each label.
    holders: Vec<u128>,
    /// The operands sharing a label outside the result with each operand.
    neighbours: Vec<u128>,
    /// Each connected set's plan, by index.
    plans: HashMap<u128, usize>,
    /// Each plan's cost.
    costs: Vec<f64>,
    /// Each plan's first part (none for an operand).
    firsts: Vec<u128>,
    /// Each plan's labels kept (those in the result or held outside the set), `words` words
    /// each.
    kept: Vec<u64>,
    /// Weighings left.
    budget: usize,
    /// Splits weighed and sets met.
    work: usize,
}

/// The path, as merges of creation ids, and the work done finding it; no path when there are
/// more than [`CONNECTED_UP_TO`] operands, the budget is spent, no path costs at most `bound`,
/// or none keeps its intermediates within `limit` cells.
pub(super) fn connected(labels: &Interned, limit: f64, bound: f64) -> (Option<Merges>, usize) {
    let n = labels.operands.len();
    if !(2..=CONNECTED_UP_TO).contains(&n) {
        return (None, 0);
    }
    let mut search = Connected::new(labels, limit, bound);
    let merges = search.run().ok().flatten();
    (merges, search.work)
}

/// The operands numbered at most `i`.
fn up_to(i: u32) -> u128 {
    if i >= 127 {
        u128::MAX
    } else {
        (1u128 << (i + 1)) - 1
    }
}

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

impl<'a> Connected<'a> {
    fn new(labels: &'a Interned, limit: f64, bound: f64) -> Connected<'a> {
        let n = labels.operands.len();
        let words = labels.labels().div_ceil(64).max(1);
        let mut holders = vec![0u128; labels.labels()];
        for (i, set) in labels.operands.iter().enumerate() {
            for &l in set {
                holders[l as usize] |= 1 << i;
            }
        }
        let neighbours = (labels.operands.iter().enumerate())
            .map(|(i, set)| {
                let open = set.iter().filter(|&&l| !labels.in_result[l as usize]);
                open.fold(0, |near, &l| near | holders[l as usize]) & !(1 << i)
            })
            .collect();
        let mut search = Connected {
            labels,
            limit,
            bound,
            words,
            all: up_to(n as u32 - 1),
            holders,
            neighbours,
            plans: HashMap::new(),
            costs: Vec::new(),
            firsts: Vec::new(),
            kept: Vec::new(),
            budget: BUDGET,
            work: 0,
        };
        for (i, set) in labels.operands.iter().enumerate() {
            let kept = bitset(set.iter().copied(), words);
            search.insert(1 << i, 0.0, 0, &kept);
        }
        search
    }

    fn insert(&mut self, set: u128, cost: f64, first: u128, kept: &[u64]) {
        self.plans.insert(set, self.costs.len());
        self.costs.push(cost);
        self.firsts.push(first);
        self.kept.extend_from_slice(kept);
    }

    fn kept(&self, plan: usize) -> &[u64] {
        &self.kept[plan * self.words..(plan + 1) * self.words]
    }

    fn spend(&mut self) -> Result<(), OverBudget> {
        self.work += 1;
        self.budget = self.budget.checked_sub(1).ok_or(OverBudget)?;
        Ok(())
    }

    /// The operands outside `set` sharing a label outside the result with one in it.
    fn neighbourhood(&self, set: u128) -> u128 {
        let mut near = 0;
        let mut left = set;
        while left != 0 {
            near |= self.neighbours[left.trailing_zeros() as usize];
            left &= left - 1;
        }
        near & !set
    }

    /// The merges of the cheapest path: each connected part's, then the parts joined.
    fn run(&mut self) -> Result<Option<Merges>, OverBudget> {
        let mut parts = Vec::new();
        let mut left = self.all;
        while left != 0 {
            let mut part = left & left.wrapping_neg();
            loop {
                let grown = part | self.neighbourhood(part);
                if grown == part {
                    break;
                }
                part = grown;
            }
            left &= !part;
            parts.push(part);
        }
        for &part in &parts {
            for i in descending(part) {
                self.spend()?;
                self.with_complements(1 << i)?;
                self.grow(1 << i, up_to(i))?;
            }
            if !self.plans.contains_key(&part) {
                return Ok(None);
            }
        }
        let mut merges = Vec::with_capacity(self.labels.operands.len() - 1);
        let mut made = self.labels.operands.len();
        let mut joined = BinaryHeap::new();
        for &part in &parts {
            let id = self.unfold(part, &mut made, &mut merges);
            let plan = self.plans[&part];
            let in_result = (self.kept(plan).iter().enumerate())
                .map(|(w, &word)| word & self.result_word(w))
                .collect::<Vec<u64>>();
            let cells = points(&in_result, &self.labels.sizes);
            joined.push(std::cmp::Reverse((cells.to_bits(), id, in_result)));
        }
        // The parts share no label outside the result: their products are outer products but
        // for result labels, smallest first.
        while let (Some(a), Some(b)) = (joined.pop(), joined.pop()) {
            let (std::cmp::Reverse((_, x, x_set)), std::cmp::Reverse((_, y, y_set))) = (a, b);
            merges.push((x.min(y), x.max(y)));
            let union: Vec<u64> = x_set.iter().zip(&y_set).map(|(p, q)| p | q).collect();
            let cells = points(&union, &self.labels.sizes);
            joined.push(std::cmp::Reverse((cells.to_bits(), made, union)));
            made += 1;
        }
        Ok(Some(merges))
    }

    /// Word `w` of the result's labels.
    fn result_word(&self, w: usize) -> u64 {
        let labels = (w * 64)..((w + 1) * 64).min(self.labels.labels());
        (labels.filter(|&l| self.labels.in_result[l])).fold(0, |word, l| word | 1 << (l % 64))
    }

    /// Meets the connected sets made by adding to `set` operands reachable from it outside
    /// `excluded`, and weighs their splits.
    fn grow(&mut self, set: u128, excluded: u128) -> Result<(), OverBudget> {
        let near = self.neighbourhood(set) & !excluded;
        if near == 0 {
            return Ok(());
        }
        for sub in subsets(near) {
            self.spend()?;
            self.with_complements(set | sub)?;
        }
        for sub in subsets(near) {
            self.grow(set | sub, excluded | near)?;
        }
        Ok(())
    }

    /// Weighs the joins of `first`, whose cheapest way is known, with each connected set of
    /// higher-numbered operands next to it.
    fn with_complements(&mut self, first: u128) -> Result<(), OverBudget> {
        if !self.plans.contains_key(&first) {
            return Ok(());
        }
        let excluded = first | up_to(first.trailing_zeros());
        let near = self.neighbourhood(first) & !excluded;
        for i in descending(near) {
            self.weigh(first, 1 << i)?;
            self.complements(first, 1 << i, excluded | (up_to(i) & near))?;
        }
        Ok(())
    }

    /// Weighs the joins of `first` with the connected sets grown from `second` outside
    /// `excluded`.
    fn complements(&mut self, first: u128, second: u128, excluded: u128) -> Result<(), OverBudget> {
        let near = self.neighbourhood(second) & !excluded;
        if near == 0 {
            return Ok(());
        }
        for sub in subsets(near) {
            self.weigh(first, second | sub)?;
        }
        for sub in subsets(near) {
            self.complements(first, second | sub, excluded | near)?;
        }
        Ok(())
    }

    /// Weighs contracting `first` and `second` (disjoint, joined by a label) as the last step of
    /// their union.
    fn weigh(&mut self, first: u128, second: u128) -> Result<(), OverBudget> {
        self.spend()?;
        let (Some(&a), Some(&b)) = (self.plans.get(&first), self.plans.get(&second)) else {
            return Ok(());
        };
        let set = first | second;
        let union: Vec<u64> = (self.kept(a).iter().zip(self.kept(b)))
            .map(|(x, y)| x | y)
            .collect();
        let existing = self.plans.get(&set).copied();
        let kept = match existing {
            Some(plan) => self.kept(plan).to_vec(),
            None => self.kept_of(set, &union),
        };
        let sums = kept != union;
        let step = points(&union, &self.labels.sizes) * if sums { 2.0 } else { 1.0 };
        let cost = self.costs[a] + self.costs[b] + step;
        if cost > self.bound {
            return Ok(());
        }
        match existing {
            Some(plan) if cost < self.costs[plan] => {
                self.costs[plan] = cost;
                self.firsts[plan] = first;
            }
            Some(_) => {}
            None if set != self.all && points(&kept, &self.labels.sizes) > self.limit => {}
            None => self.insert(set, cost, first, &kept),
        }
        Ok(())
    }

    /// The labels of `union` that contracting `set` keeps: those in the result or held outside.
    fn kept_of(&self, set: u128, union: &[u64]) -> Vec<u64> {
        let mut kept = union.to_vec();
        for (w, word) in kept.iter_mut().enumerate() {
            let mut left = *word;
            while left != 0 {
                let bit = left.trailing_zeros() as usize;
                let l = w * 64 + bit;
                if !self.labels.in_result[l] && self.holders[l] & !set == 0 {
                    *word &= !(1 << bit);
                }
                left &= left - 1;
            }
        }
        kept
    }

    /// Appends the merges contracting `set` along its plan; its result's creation id.
    fn unfold(&self, set: u128, made: &mut usize, merges: &mut Merges) -> usize {
        let first = self.firsts[self.plans[&set]];
        if first == 0 {
            return set.trailing_zeros() as usize;
        }
        let a = self.unfold(first, made, merges);
        let b = self.unfold(set & !first, made, merges);
        merges.push((a, b));
        *made += 1;
        *made - 1
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::nary::path::replay;

    /// A problem's label sets, from labels named by one character each.
    fn interned(operands: &[&str], result: &str, sizes: &[(char, f64)]) -> Interned {
        let set = |s: &str| s.chars().map(String::from).collect::<BTreeSet<String>>();
        let operands: Vec<BTreeSet<String>> = operands.iter().map(|o| set(o)).collect();
        let sizes: HashMap<String, f64> = sizes.iter().map(|&(c, s)| (c.into(), s)).collect();
        Interned::new(&operands, &set(result), &sizes)
    }

    /// The cheapest cost of contracting every operand, over every subset, joining two parts only
    /// when an operand of one shares a label outside the result with an operand of the other;
    /// none when the operands are not connected so.
    fn cheapest_connected(labels: &Interned) -> Option<f64> {
        let n = labels.operands.len();
        let labels_of = |set: usize| -> BTreeSet<u32> {
            (0..n)
                .filter(|i| set >> i & 1 == 1)
                .flat_map(|i| labels.operands[i].iter().copied())
                .collect()
        };
        let kept = |set: usize| -> BTreeSet<u32> {
            if set.count_ones() == 1 {
                return labels_of(set);
            }
            let outside = labels_of(((1 << n) - 1) & !set);
            (labels_of(set).into_iter())
                .filter(|l| labels.in_result[*l as usize] || outside.contains(l))
                .collect()
        };
        let mut best: Vec<Option<f64>> = vec![None; 1 << n];
        for i in 0..n {
            best[1 << i] = Some(0.0);
        }
        for set in 1usize..1 << n {
            if set.count_ones() < 2 {
                continue;
            }
            for first in 1..set {
                let second = set & !first;
                if first & set != first || second == 0 || first & set & set.wrapping_neg() == 0 {
                    continue;
                }
                let (Some(a), Some(b)) = (best[first], best[second]) else {
                    continue;
                };
                let joined = labels_of(first)
                    .intersection(&labels_of(second))
                    .any(|&l| !labels.in_result[l as usize]);
                if !joined {
                    continue;
                }
                let union: BTreeSet<u32> = kept(first).union(&kept(second)).copied().collect();
                let product: f64 = union.iter().map(|&l| labels.sizes[l as usize]).product();
                let factor = if kept(set) == union { 1.0 } else { 2.0 };
                let cost = a + b + product * factor;
                if best[set].is_none_or(|c| cost < c) {
                    best[set] = Some(cost);
                }
            }
        }
        best[(1 << n) - 1]
    }

    #[test]
    fn the_search_finds_the_cheapest_path_joining_connected_parts() {
        // Random problems of 2 to 9 operands over 6 labels: xorshift draws.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut draw = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let pool = ['a', 'b', 'c', 'd', 'e', 'f'];
        let mut compared = 0;
        for _ in 0..1000 {
            let n = 2 + draw(8) as usize;
            let operands: Vec<String> = (0..n)
                .map(|_| (0..1 + draw(3)).map(|_| pool[draw(6) as usize]).collect())
                .collect();
            let result: String = pool.iter().filter(|_| draw(5) == 0).collect();
            let sizes: Vec<(char, f64)> = pool.iter().map(|&c| (c, (1 + draw(4)) as f64)).collect();
            let refs: Vec<&str> = operands.iter().map(String::as_str).collect();
            let labels = interned(&refs, &result, &sizes);
            let Some(cheapest) = cheapest_connected(&labels) else {
                continue;
            };
            compared += 1;
            let merges = connected(&labels, f64::INFINITY, f64::INFINITY).0.unwrap();
            let flops = replay(&labels, &merges, f64::INFINITY).unwrap();
            assert!(
                (flops - cheapest).abs() <= 1e-9 * cheapest,
                "{operands:?} -> {result}: {flops} against {cheapest}"
            );
        }
        assert!(compared >= 300, "{compared} connected problems");
    }

    #[test]
    fn a_chain_weighs_each_split_once() {
        // A chain of n matrices has n(n+1)/2 connected sets (its runs) and (n-1)n(n+1)/6 splits
        // of a run into two runs.
        let n = 100;
        let operands: Vec<BTreeSet<String>> = (0..n)
            .map(|i| [format!("a{i:03}"), format!("a{:03}", i + 1)].into())
            .collect();
        let ends: BTreeSet<String> = ["a000".to_owned(), format!("a{n:03}")].into();
        let labels = Interned::new(&operands, &ends, &HashMap::new());
        let (merges, work) = connected(&labels, f64::INFINITY, f64::INFINITY);
        assert_eq!(merges.unwrap().len(), n - 1);
        assert_eq!(work, n * (n + 1) / 2 + (n - 1) * n * (n + 1) / 6);
    }

    #[test]
    fn the_search_gives_up_past_its_budget() {
        // A star of 40 operands around one sharing a label with each: 2^39 connected sets.
        let mut operands: Vec<BTreeSet<String>> = vec![(0..39).map(|i| format!("s{i}")).collect()];
        operands.extend((0..39).map(|i| [format!("s{i}"), format!("o{i}")].into()));
        let result: BTreeSet<String> = (0..39).map(|i| format!("o{i}")).collect();
        let labels = Interned::new(&operands, &result, &HashMap::new());
        let (merges, work) = connected(&labels, f64::INFINITY, f64::INFINITY);
        assert_eq!(merges, None);
        assert_eq!(work, BUDGET + 1);
    }

    #[test]
    fn disconnected_parts_are_joined_smallest_first() {
        // ab,bc (3·5 after summing b) and de,ef (2·2 after summing e), and g alone (7): the
        // parts' results have 15, 4 and 7 cells; 4·7 first, then 15·28.
        let sizes = [
            ('a', 3.0),
            ('b', 4.0),
            ('c', 5.0),
            ('d', 2.0),
            ('e', 9.0),
            ('f', 2.0),
        ];
        let labels = interned(
            &["ab", "bc", "de", "ef", "g"],
            "acdfg",
            &[sizes.as_slice(), &[('g', 7.0)]].concat(),
        );
        let merges = connected(&labels, f64::INFINITY, f64::INFINITY).0.unwrap();
        assert_eq!(merges, vec![(0, 1), (2, 3), (4, 6), (5, 7)]);
        let flops = replay(&labels, &merges, f64::INFINITY).unwrap();
        assert_eq!(flops, 2.0 * 36.0 + 2.0 * 60.0 + 28.0 + 420.0);
    }
}
