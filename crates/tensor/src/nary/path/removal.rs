//! The greedy search by memory removed, step for step the one opt_einsum 3.4 calls `greedy`, so
//! that the automatic search never does worse than it: operands with equal label sets are
//! multiplied first; then, among pairs sharing a label outside the result, the step whose
//! result's cells less its operands' cells are fewest, ties going to the pair whose later
//! operand, then earlier one, was made first; what is left is joined by outer products, the
//! smallest two first.
//!
//! Its particulars are kept as they are there, since they decide which step comes next: a label
//! every operand has counts as a result label; pending operands are known by their label sets,
//! so a step whose result has the labels of a pending operand is followed by their product, and
//! a queued pair is taken whenever operands with its two label sets are pending; each new
//! operand queues only its best pair (with the holders of its labels), costed when queued. Its
//! time grows with the square of the most operands holding one label outside the result, so it
//! gives up past [`BUDGET`] pairs costed.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use super::Interned;

/// The most pairs the search costs before it gives up.
pub(super) const BUDGET: usize = 1 << 21;

/// An interned label set, standing for the pending operand that has it.
type Key = usize;

/// A queued step: its cost, then the creation ids of its operands when it was queued (the later
/// first), which order equally cheap steps; its operands' label sets; its result's labels.
#[derive(Debug)]
struct Candidate {
    cost: f64,
    later: usize,
    earlier: usize,
    first: Key,
    second: Key,
    merged: Vec<u32>,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Candidate) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Candidate) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Candidate) -> Ordering {
        (self.cost.total_cmp(&other.cost))
            .then(self.later.cmp(&other.later))
            .then(self.earlier.cmp(&other.earlier))
    }
}

/// The search's state.
struct Removal<'a> {
    labels: &'a Interned,
    /// The result's labels and those every operand has.
    kept: Vec<bool>,
    /// The label sets met so far, and their keys.
    keys: Vec<Vec<u32>>,
    key_of: HashMap<Vec<u32>, Key>,
    /// Each key's cells.
    cells: Vec<f64>,
    /// The creation id of the pending operand with each key.
    pending: Vec<Option<usize>>,
    /// The pending keys holding each label that is not kept.
    holders: Vec<BTreeSet<Key>>,
    queue: BinaryHeap<Reverse<Candidate>>,
    /// The creation ids made so far.
    made: usize,
    merges: Vec<(usize, usize)>,
    /// Pairs costed so far.
    evaluations: usize,
}

/// The path, as merges of creation ids, and the pairs costed finding it; no path when it would
/// cost more than [`BUDGET`] pairs.
pub(super) fn removal_greedy(labels: &Interned) -> (Option<Vec<(usize, usize)>>, usize) {
    let mut search = Removal::new(labels);
    let merges = search.run();
    (merges, search.evaluations)
}

impl<'a> Removal<'a> {
    fn new(labels: &'a Interned) -> Removal<'a> {
        let mut holders = vec![0usize; labels.labels()];
        for set in &labels.operands {
            for &l in set {
                holders[l as usize] += 1;
            }
        }
        let everywhere = |l: usize| holders[l] == labels.operands.len();
        Removal {
            labels,
            kept: (0..labels.labels())
                .map(|l| labels.in_result[l] || everywhere(l))
                .collect(),
            keys: Vec::new(),
            key_of: HashMap::new(),
            cells: Vec::new(),
            pending: Vec::new(),
            holders: vec![BTreeSet::new(); labels.labels()],
            queue: BinaryHeap::new(),
            made: labels.operands.len(),
            merges: Vec::new(),
            evaluations: 0,
        }
    }

    fn key(&mut self, set: &[u32]) -> Key {
        if let Some(&key) = self.key_of.get(set) {
            return key;
        }
        let key = self.keys.len();
        self.keys.push(set.to_vec());
        self.key_of.insert(set.to_vec(), key);
        self.cells.push(self.points(set));
        self.pending.push(None);
        key
    }

    fn points(&self, set: &[u32]) -> f64 {
        set.iter().map(|&l| self.labels.sizes[l as usize]).product()
    }

    /// A new creation id.
    fn make(&mut self) -> usize {
        self.made += 1;
        self.made - 1
    }

    /// The labels of `key` that are not kept.
    fn open_labels(&self, key: Key) -> impl Iterator<Item = usize> + '_ {
        (self.keys[key].iter())
            .map(|&l| l as usize)
            .filter(|&l| !self.kept[l])
    }

    /// The step over pending `a` and `b`: its result keeps a label both have if a third pending
    /// operand has it, one of them has if another has it, and every kept label.
    fn candidate(&self, a: Key, b: Key) -> Candidate {
        let (x, y) = (&self.keys[a], &self.keys[b]);
        let (mut i, mut j) = (0, 0);
        let mut merged = Vec::with_capacity(x.len() + y.len());
        loop {
            let label = match (x.get(i), y.get(j)) {
                (Some(&l), Some(&m)) => l.min(m),
                (Some(&l), None) | (None, Some(&l)) => l,
                (None, None) => break,
            };
            let (in_x, in_y) = (x.get(i) == Some(&label), y.get(j) == Some(&label));
            i += usize::from(in_x);
            j += usize::from(in_y);
            let l = label as usize;
            let in_pair = usize::from(in_x) + usize::from(in_y);
            if self.kept[l] || self.holders[l].len() > in_pair {
                merged.push(label);
            }
        }
        let cost = self.points(&merged) - self.cells[a] - self.cells[b];
        let (id_a, id_b) = (self.pending[a].unwrap(), self.pending[b].unwrap());
        let ((first, earlier), (second, later)) = if id_a < id_b {
            ((a, id_a), (b, id_b))
        } else {
            ((b, id_b), (a, id_a))
        };
        Candidate {
            cost,
            later,
            earlier,
            first,
            second,
            merged,
        }
    }

    /// Queues the best step of `key` with one of `others`; false once over budget.
    fn queue_best(&mut self, key: Key, others: &[Key]) -> bool {
        self.evaluations += others.len();
        if self.evaluations > BUDGET {
            return false;
        }
        let best = (others.iter())
            .map(|&other| self.candidate(key, other))
            .min();
        self.queue.extend(best.map(Reverse));
        true
    }

    /// Makes the operand `id` with labels `key` pending; when one with the same labels is
    /// pending, their product takes its place.
    fn add(&mut self, key: Key, id: usize) {
        match self.pending[key] {
            Some(twin) => {
                self.merges.push((twin, id));
                let product = self.make();
                self.pending[key] = Some(product);
            }
            None => {
                self.pending[key] = Some(id);
                for l in self.open_labels(key).collect::<Vec<_>>() {
                    self.holders[l].insert(key);
                }
            }
        }
    }

    fn run(&mut self) -> Option<Vec<(usize, usize)>> {
        let labels = self.labels;
        for (id, set) in labels.operands.iter().enumerate() {
            let key = self.key(set);
            if self.pending[key].is_none() {
                self.pending[key] = Some(id);
            } else {
                self.add(key, id);
            }
        }
        for key in 0..self.keys.len() {
            for l in self.open_labels(key).collect::<Vec<_>>() {
                self.holders[l].insert(key);
            }
        }
        for l in 0..self.labels.labels() {
            let mut holders: Vec<Key> = self.holders[l].iter().copied().collect();
            holders.sort_by_key(|&key| self.pending[key]);
            for i in 0..holders.len().saturating_sub(1) {
                if !self.queue_best(holders[i], &holders[i + 1..]) {
                    return None;
                }
            }
        }
        while let Some(Reverse(step)) = self.queue.pop() {
            let (Some(a), Some(b)) = (self.pending[step.first], self.pending[step.second]) else {
                continue;
            };
            for key in [step.first, step.second] {
                for l in self.open_labels(key).collect::<Vec<_>>() {
                    self.holders[l].remove(&key);
                }
                self.pending[key] = None;
            }
            self.merges.push((a, b));
            let merged = self.key(&step.merged);
            let id = self.make();
            self.add(merged, id);
            let mut others: BTreeSet<Key> = BTreeSet::new();
            for l in self.open_labels(merged) {
                others.extend(&self.holders[l]);
            }
            others.remove(&merged);
            if !others.is_empty() {
                let others: Vec<Key> = others.into_iter().collect();
                if !self.queue_best(merged, &others) {
                    return None;
                }
            }
        }
        self.outer_products();
        Some(std::mem::take(&mut self.merges))
    }

    /// Joins the pending operands, the two with the fewest kept cells first.
    fn outer_products(&mut self) {
        let mut left: BinaryHeap<Reverse<(u64, usize, Vec<u32>)>> = BinaryHeap::new();
        for key in 0..self.keys.len() {
            if let Some(id) = self.pending[key] {
                let kept: Vec<u32> = (self.keys[key].iter().copied())
                    .filter(|&l| self.kept[l as usize])
                    .collect();
                left.push(Reverse((self.points(&kept).to_bits(), id, kept)));
            }
        }
        let Some(Reverse((_, mut id, mut set))) = left.pop() else {
            return;
        };
        while let Some(Reverse((_, other, other_set))) = left.pop() {
            self.merges.push((id.min(other), id.max(other)));
            let union: BTreeSet<u32> = set.iter().chain(&other_set).copied().collect();
            let union: Vec<u32> = union.into_iter().collect();
            let product = self.make();
            left.push(Reverse((self.points(&union).to_bits(), product, union)));
            let Reverse((_, next, next_set)) = left.pop().expect("just pushed");
            (id, set) = (next, next_set);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::nary::path::{positions, reference, replay};

    #[test]
    fn the_search_takes_the_steps_opt_einsum_takes() {
        let cases = reference::cases();
        assert!(cases.len() >= 70);
        for case in cases {
            let labels = Interned::new(&case.operands, &case.result, &case.sizes);
            let merges = removal_greedy(&labels).0.expect("within budget");
            let flops = replay(&labels, &merges, f64::INFINITY).unwrap();
            let path = positions(case.operands.len(), &merges, flops);
            let steps: Vec<(usize, usize)> = (path.steps.iter())
                .map(|&(a, b)| (a.min(b), a.max(b)))
                .collect();
            assert_eq!(steps, case.greedy_steps, "{}", case.name);
            assert_eq!(flops, case.greedy_flops, "{}", case.name);
        }
    }

    /// The pairs costed for a chain `a0a1, a1a2, …` of `n` matrices keeping its ends, and for
    /// a star `ia0, ia1, …` of `n` operands summing `i` away, each label of size 2.
    fn work(n: usize) -> [usize; 2] {
        let chain: Vec<BTreeSet<String>> = (0..n)
            .map(|i| [format!("a{i}"), format!("a{}", i + 1)].into())
            .collect();
        let ends: BTreeSet<String> = ["a0".to_owned(), format!("a{n}")].into();
        let star: Vec<BTreeSet<String>> = (0..n)
            .map(|i| ["i".to_owned(), format!("a{i}")].into())
            .collect();
        let rays: BTreeSet<String> = (0..n).map(|i| format!("a{i}")).collect();
        let mut work = [0; 2];
        for (k, (operands, result)) in [(chain, ends), (star, rays)].into_iter().enumerate() {
            let sizes: HashMap<String, f64> = (operands.iter().flatten())
                .map(|l| (l.clone(), 2.0))
                .collect();
            let labels = Interned::new(&operands, &result, &sizes);
            let (merges, evaluations) = removal_greedy(&labels);
            assert_eq!(merges.unwrap().len(), n - 1);
            work[k] = evaluations;
        }
        work
    }

    #[test]
    fn operands_of_few_holders_each_cost_a_few_pairs_each() {
        // The chain's labels have two holders each; the star's shared label is held by every
        // operand, so it counts as a result label and pairs nothing.
        let [chain, star] = work(1000);
        assert!(chain <= 4 * 1000, "chain: {chain} pairs costed");
        assert_eq!(star, 0);
        let [chain2, _] = work(2000);
        assert!(chain2 * 10 <= chain * 22, "chain: {chain} then {chain2}");
    }

    #[test]
    fn a_label_held_by_most_operands_exhausts_the_budget() {
        // 3,000 operands hold `i` but one: about 4.5 million pairs share it.
        let mut operands: Vec<BTreeSet<String>> = (0..3000)
            .map(|k| ["i".to_owned(), format!("a{k}")].into())
            .collect();
        operands.push(["b".to_owned()].into());
        let result: BTreeSet<String> = (0..3000).map(|k| format!("a{k}")).collect();
        let labels = Interned::new(&operands, &result, &HashMap::new());
        let (merges, evaluations) = removal_greedy(&labels);
        assert_eq!(merges, None);
        assert!(evaluations > BUDGET && evaluations <= BUDGET + 3000);
    }
}
