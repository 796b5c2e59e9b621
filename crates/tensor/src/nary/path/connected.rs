//! Dynamic programming over connected subgraphs (the idea of opt_einsum's `dp`): the cheapest
//! path that joins only operands sharing a label outside the result, the connected parts then
//! joined by outer products (in result labels), the smallest two first. Operands are a graph's
//! vertices, joined when they share a label outside the result; for each connected set the table
//! keeps the cheapest way found to contract it, from the ways of two connected parts joined by a
//! label. Subsets are 128-bit masks, so the search takes at most [`CONNECTED_UP_TO`] operands.
//!
//! Two enumerations fill the table. First `ccp`, which weighs each split once, in an order where
//! both parts are known before their union: n³/6 splits for a chain of n operands, about n³/2
//! for a ring, but as many as there are connected sets otherwise (exponentially many in a grid
//! or around an operand of many neighbours). Past [`COMPLEMENTS_BUDGET`] units of work (a split
//! weighed counts [`WEIGHING`], a set met one), `levels` starts over: connected sets by size, a
//! set kept only when it costs at most a cap that grows until the whole is reached, so that only
//! cheap sets are ever extended (opt_einsum's cost cap), up to [`LEVELS_BUDGET`] units (a pair
//! passed over counts one). Either way a set costing more than a bound (the cheapest path found
//! by other means) is dropped, since no path through it can beat that. A unit takes a few
//! nanoseconds, so each enumeration gives up within some tens of milliseconds.

mod ccp;
mod levels;

use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::{Interned, Merges, bitset, points};

/// The most operands the search takes.
pub(super) const CONNECTED_UP_TO: usize = 128;

/// The most work units `ccp` spends before giving up: a chain of 92 operands takes 4.2 million.
pub(super) const COMPLEMENTS_BUDGET: usize = 1 << 22;

/// The most work units `levels` spends before giving up.
pub(super) const LEVELS_BUDGET: usize = 1 << 23;

/// The work units of weighing a split, against one for meeting a set or passing over a pair
/// (about their costs in time).
const WEIGHING: usize = 32;

/// The budget is spent.
struct OverBudget;

/// Hashes a set by multiplying it by a large odd constant: the standard hasher guards against
/// keys chosen to collide, needless for sets of operands, at several times the cost.
#[derive(Default)]
struct SetHasher(u64);

impl Hasher for SetHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u128(&mut self, set: u128) {
        let folded = (set as u64) ^ ((set >> 64) as u64).rotate_left(29);
        self.0 = folded.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// The search's state: the cheapest way found to contract each connected set.
struct Connected<'a> {
    labels: &'a Interned,
    limit: f64,
    /// No path through a set costing more can beat one found otherwise.
    bound: f64,
    /// Sets costing more are dropped (at most `bound`).
    cap: f64,
    words: usize,
    /// Every operand.
    all: u128,
    /// The operands holding each label.
    holders: Vec<u128>,
    /// The operands sharing a label outside the result with each operand.
    neighbours: Vec<u128>,
    /// Each connected set's plan, by index.
    plans: HashMap<u128, usize, BuildHasherDefault<SetHasher>>,
    /// Each plan's cost.
    costs: Vec<f64>,
    /// Each plan's first part (none for an operand).
    firsts: Vec<u128>,
    /// Each plan's labels kept (those in the result or held outside the set), `words` words
    /// each.
    kept: Vec<u64>,
    /// Work units left.
    budget: usize,
    /// Room for a step's labels and its result's, reused from step to step.
    union: Vec<u64>,
    result: Vec<u64>,
    /// Work units spent.
    work: usize,
}

/// The path, as merges of creation ids, and the work done finding it; no path when there are
/// more than [`CONNECTED_UP_TO`] operands, both budgets are spent, no path costs at most
/// `bound`, or none keeps its intermediates within `limit` cells.
pub(super) fn connected(labels: &Interned, limit: f64, bound: f64) -> (Option<Merges>, usize) {
    let n = labels.operands.len();
    if !(2..=CONNECTED_UP_TO).contains(&n) {
        return (None, 0);
    }
    let mut search = Connected::new(labels, limit, bound);
    let parts = search.parts();
    let filled = search.by_complements(&parts).is_ok() || {
        search.start_over(LEVELS_BUDGET);
        search.by_levels(&parts).is_ok()
    };
    let solved = filled && parts.iter().all(|part| search.plans.contains_key(part));
    (solved.then(|| search.join(&parts)), search.work)
}

/// The operands numbered at most `i`.
fn up_to(i: u32) -> u128 {
    if i >= 127 {
        u128::MAX
    } else {
        (1u128 << (i + 1)) - 1
    }
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
            cap: bound,
            words,
            all: up_to(n as u32 - 1),
            holders,
            neighbours,
            plans: HashMap::default(),
            costs: Vec::new(),
            firsts: Vec::new(),
            kept: Vec::new(),
            budget: 0,
            union: Vec::with_capacity(words),
            result: Vec::with_capacity(words),
            work: 0,
        };
        search.start_over(COMPLEMENTS_BUDGET);
        search
    }

    /// Empties the table but for the operands, with `budget` work units to come.
    fn start_over(&mut self, budget: usize) {
        self.plans.clear();
        self.costs.clear();
        self.firsts.clear();
        self.kept.clear();
        self.budget = budget;
        for (i, set) in self.labels.operands.iter().enumerate() {
            let kept = bitset(set.iter().copied(), self.words);
            self.insert(1 << i, 0.0, 0, &kept);
        }
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

    /// Counts `units` of work against the budget.
    fn spend(&mut self, units: usize) -> Result<(), OverBudget> {
        self.work += units;
        self.budget = self.budget.checked_sub(units).ok_or(OverBudget)?;
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

    /// The connected parts, by lowest operand.
    fn parts(&self) -> Vec<u128> {
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
        parts
    }

    /// The merges contracting each part along its plan, then joining the parts, the two with
    /// the fewest cells first. They share no label outside the result.
    fn join(&self, parts: &[u128]) -> Merges {
        let mut merges = Vec::with_capacity(self.labels.operands.len() - 1);
        let mut made = self.labels.operands.len();
        let mut joined = BinaryHeap::new();
        for &part in parts {
            let id = self.unfold(part, &mut made, &mut merges);
            let plan = self.plans[&part];
            let in_result = (self.kept(plan).iter().enumerate())
                .map(|(w, &word)| word & self.result_word(w))
                .collect::<Vec<u64>>();
            let cells = points(&in_result, &self.labels.sizes);
            joined.push(std::cmp::Reverse((cells.to_bits(), id, in_result)));
        }
        while let (Some(a), Some(b)) = (joined.pop(), joined.pop()) {
            let (std::cmp::Reverse((_, x, x_set)), std::cmp::Reverse((_, y, y_set))) = (a, b);
            merges.push((x.min(y), x.max(y)));
            let union: Vec<u64> = x_set.iter().zip(&y_set).map(|(p, q)| p | q).collect();
            let cells = points(&union, &self.labels.sizes);
            joined.push(std::cmp::Reverse((cells.to_bits(), made, union)));
            made += 1;
        }
        merges
    }

    /// Word `w` of the result's labels.
    fn result_word(&self, w: usize) -> u64 {
        let labels = (w * 64)..((w + 1) * 64).min(self.labels.labels());
        (labels.filter(|&l| self.labels.in_result[l])).fold(0, |word, l| word | 1 << (l % 64))
    }

    /// Weighs contracting `first` and `second` (disjoint, joined by a label) as the last step of
    /// their union; whether their union is new to the table.
    fn weigh(&mut self, first: u128, second: u128) -> Result<bool, OverBudget> {
        self.spend(WEIGHING)?;
        let (Some(&a), Some(&b)) = (self.plans.get(&first), self.plans.get(&second)) else {
            return Ok(false);
        };
        let parts = self.costs[a] + self.costs[b];
        if parts > self.cap {
            return Ok(false);
        }
        let set = first | second;
        let (mut union, mut kept) = (
            std::mem::take(&mut self.union),
            std::mem::take(&mut self.result),
        );
        union.clear();
        union.extend(self.kept(a).iter().zip(self.kept(b)).map(|(x, y)| x | y));
        let existing = self.plans.get(&set).copied();
        kept.clear();
        match existing {
            Some(plan) => kept.extend_from_slice(self.kept(plan)),
            None => {
                kept.extend_from_slice(&union);
                self.drop_summed(set, &mut kept);
            }
        }
        let sums = kept != union;
        let step = points(&union, &self.labels.sizes) * if sums { 2.0 } else { 1.0 };
        let cost = parts + step;
        let mut new = false;
        match existing {
            _ if cost > self.cap => {}
            Some(plan) if cost < self.costs[plan] => {
                self.costs[plan] = cost;
                self.firsts[plan] = first;
            }
            Some(_) => {}
            None if set != self.all && points(&kept, &self.labels.sizes) > self.limit => {}
            None => {
                self.insert(set, cost, first, &kept);
                new = true;
            }
        }
        (self.union, self.result) = (union, kept);
        Ok(new)
    }

    /// Takes out of `labels` those contracting `set` sums: held by no operand outside it and
    /// missing from the result.
    fn drop_summed(&self, set: u128, labels: &mut [u64]) {
        for (w, word) in labels.iter_mut().enumerate() {
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

    /// Random connected problems of 2 to 9 operands over 6 labels (xorshift draws), with their
    /// cheapest cost.
    fn connected_problems() -> Vec<(Interned, f64)> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut draw = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let pool = ['a', 'b', 'c', 'd', 'e', 'f'];
        let mut problems = Vec::new();
        for _ in 0..1000 {
            let n = 2 + draw(8) as usize;
            let operands: Vec<String> = (0..n)
                .map(|_| (0..1 + draw(3)).map(|_| pool[draw(6) as usize]).collect())
                .collect();
            let result: String = pool.iter().filter(|_| draw(5) == 0).collect();
            let sizes: Vec<(char, f64)> = pool.iter().map(|&c| (c, (1 + draw(4)) as f64)).collect();
            let refs: Vec<&str> = operands.iter().map(String::as_str).collect();
            let labels = interned(&refs, &result, &sizes);
            if let Some(cheapest) = cheapest_connected(&labels) {
                problems.push((labels, cheapest));
            }
        }
        assert!(
            problems.len() >= 300,
            "{} connected problems",
            problems.len()
        );
        problems
    }

    fn assert_close(labels: &Interned, merges: &[(usize, usize)], cheapest: f64) {
        let flops = replay(labels, merges, f64::INFINITY).unwrap();
        let operands = &labels.operands;
        assert!(
            (flops - cheapest).abs() <= 1e-9 * cheapest,
            "{operands:?}: {flops} against {cheapest}"
        );
    }

    #[test]
    fn the_search_finds_the_cheapest_path_joining_connected_parts() {
        for (labels, cheapest) in connected_problems() {
            let merges = connected(&labels, f64::INFINITY, f64::INFINITY).0.unwrap();
            assert_close(&labels, &merges, cheapest);
        }
    }

    #[test]
    fn the_search_by_levels_finds_it_too() {
        for (labels, cheapest) in connected_problems() {
            let mut search = Connected::new(&labels, f64::INFINITY, f64::INFINITY);
            let parts = search.parts();
            search.start_over(LEVELS_BUDGET);
            assert!(search.by_levels(&parts).is_ok());
            assert_close(&labels, &search.join(&parts), cheapest);
        }
    }

    #[test]
    fn a_chain_weighs_each_split_once() {
        // A chain of n matrices has n(n+1)/2 connected sets (its runs) and (n-1)n(n+1)/6 splits
        // of a run into two runs.
        let n = 80;
        let operands: Vec<BTreeSet<String>> = (0..n)
            .map(|i| [format!("a{i:03}"), format!("a{:03}", i + 1)].into())
            .collect();
        let ends: BTreeSet<String> = ["a000".to_owned(), format!("a{n:03}")].into();
        let labels = Interned::new(&operands, &ends, &HashMap::new());
        let (merges, work) = connected(&labels, f64::INFINITY, f64::INFINITY);
        assert_eq!(merges.unwrap().len(), n - 1);
        assert_eq!(work, n * (n + 1) / 2 + WEIGHING * (n - 1) * n * (n + 1) / 6);
    }

    #[test]
    fn the_search_gives_up_past_its_budgets() {
        // A star of 40 operands around one sharing a label with each: 2^39 connected sets, all
        // cheap (every size is 1).
        let mut operands: Vec<BTreeSet<String>> = vec![(0..39).map(|i| format!("s{i}")).collect()];
        operands.extend((0..39).map(|i| [format!("s{i}"), format!("o{i}")].into()));
        let result: BTreeSet<String> = (0..39).map(|i| format!("o{i}")).collect();
        let labels = Interned::new(&operands, &result, &HashMap::new());
        let (merges, work) = connected(&labels, f64::INFINITY, f64::INFINITY);
        assert_eq!(merges, None);
        let budgets = COMPLEMENTS_BUDGET + LEVELS_BUDGET;
        assert!(work > budgets && work <= budgets + 2 * WEIGHING, "{work}");
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
