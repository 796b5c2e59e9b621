//! The greedy search by FLOPs: the cheapest step among candidates at each step. A priority
//! queue holds candidate pairs and, per label, its holders by size, so each step costs a few
//! pair evaluations, not one per pair of pending operands.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use super::{Interned, Merges, PathError};

/// The greedy search pairs a new operand with this many of the smallest other holders of each
/// of its labels, and pairs among this many of the smallest pending operands (outer products
/// included). Up to this many operands it therefore weighs every pair at every step.
const NEIGHBOURS: usize = 16;

/// A candidate step of the greedy search: its cost, and its operands' creation ids (ascending).
/// Ordered by cost, then by ids: of equally cheap steps, the one with the earliest operands.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    cost: f64,
    pair: (usize, usize),
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
        self.cost
            .total_cmp(&other.cost)
            .then(self.pair.cmp(&other.pair))
    }
}

/// A pending operand's place in size order: its size's bits (sizes are not negative, so their
/// bits order as they do), then its id.
type BySize = (u64, usize);

/// The greedy search's state. A candidate's cost never changes while both its operands are
/// pending: a step sums a label when its two operands are the label's last holders, and the
/// holders of a label drop only when two of them are contracted, the result then being one of
/// those left. So the queue holds each candidate once, costed when proposed, and drops those
/// whose operands are gone when they come up.
pub(super) struct Greedy<'a> {
    labels: &'a Interned,
    limit: f64,
    /// Each operand's labels by creation id (emptied once contracted).
    sets: Vec<Vec<u32>>,
    /// Each operand's cells by creation id.
    sizes: Vec<f64>,
    /// Whether each id is pending.
    alive: Vec<bool>,
    /// The pending holders of each label, smallest first.
    holders: Vec<BTreeSet<BySize>>,
    /// The pending operands, smallest first.
    by_size: BTreeSet<BySize>,
    /// The smallest pending operands, as last paired among themselves.
    smallest: Vec<usize>,
    queue: BinaryHeap<Reverse<Candidate>>,
    /// Pairs costed so far.
    evaluations: usize,
}

impl<'a> Greedy<'a> {
    pub(super) fn new(labels: &'a Interned, limit: f64) -> Greedy<'a> {
        let n = labels.operands.len();
        let mut greedy = Greedy {
            labels,
            limit,
            sets: Vec::with_capacity(2 * n),
            sizes: Vec::with_capacity(2 * n),
            alive: Vec::with_capacity(2 * n),
            holders: vec![BTreeSet::new(); labels.labels()],
            by_size: BTreeSet::new(),
            smallest: Vec::new(),
            queue: BinaryHeap::new(),
            evaluations: 0,
        };
        for set in &labels.operands {
            greedy.add(set.clone());
        }
        for id in 0..n {
            greedy.propose(id);
        }
        greedy.pair_smallest();
        greedy
    }

    /// Makes `set` a pending operand with the next id.
    fn add(&mut self, set: Vec<u32>) -> usize {
        let id = self.sets.len();
        let size: f64 = set.iter().map(|&l| self.labels.sizes[l as usize]).product();
        let key = (size.to_bits(), id);
        for &l in &set {
            self.holders[l as usize].insert(key);
        }
        self.by_size.insert(key);
        self.sets.push(set);
        self.sizes.push(size);
        self.alive.push(true);
        id
    }

    /// The labels a step over `a` and `b` keeps (ascending), the cells they have, and its cost.
    fn step(&mut self, a: usize, b: usize) -> (Vec<u32>, f64, f64) {
        self.evaluations += 1;
        let (x, y) = (&self.sets[a], &self.sets[b]);
        let (mut i, mut j) = (0, 0);
        let mut kept = Vec::with_capacity(x.len() + y.len());
        let (mut product, mut kept_cells, mut sums) = (1.0, 1.0, false);
        // The union in ascending order, each label with how many of the two hold it.
        loop {
            let label = match (x.get(i), y.get(j)) {
                (Some(&l), Some(&m)) => l.min(m),
                (Some(&l), None) | (None, Some(&l)) => l,
                (None, None) => break,
            };
            let (in_x, in_y) = (x.get(i) == Some(&label), y.get(j) == Some(&label));
            i += usize::from(in_x);
            j += usize::from(in_y);
            let size = self.labels.sizes[label as usize];
            product *= size;
            let holders = self.holders[label as usize].len();
            if !self.labels.in_result[label as usize]
                && holders == usize::from(in_x) + usize::from(in_y)
            {
                sums = true;
            } else {
                kept.push(label);
                kept_cells *= size;
            }
        }
        (kept, kept_cells, product * if sums { 2.0 } else { 1.0 })
    }

    /// Queues the step over `a` and `b` when its result is within the memory limit.
    fn offer(&mut self, a: usize, b: usize) {
        let (_, cells, cost) = self.step(a, b);
        if cells <= self.limit {
            self.queue.push(Reverse(Candidate {
                cost,
                pair: (a.min(b), a.max(b)),
            }));
        }
    }

    /// Offers the steps of `id` with the smallest other holders of each of its labels.
    fn propose(&mut self, id: usize) {
        let mut partners: Vec<usize> = Vec::new();
        for &l in &self.sets[id] {
            let holders = self.holders[l as usize].iter().map(|&(_, other)| other);
            partners.extend(holders.filter(|&other| other != id).take(NEIGHBOURS));
        }
        partners.sort_unstable();
        partners.dedup();
        for other in partners {
            self.offer(id, other);
        }
    }

    /// Offers the steps among the smallest pending operands that are new among them.
    fn pair_smallest(&mut self) {
        let now: Vec<usize> = self
            .by_size
            .iter()
            .take(NEIGHBOURS)
            .map(|&(_, id)| id)
            .collect();
        let new: Vec<bool> = now.iter().map(|id| !self.smallest.contains(id)).collect();
        for i in 0..now.len() {
            for j in i + 1..now.len() {
                if new[i] || new[j] {
                    self.offer(now[i], now[j]);
                }
            }
        }
        self.smallest = now;
    }

    /// Contracts `a` and `b`: the step's cost, positions, and the new operand's candidates.
    fn contract(&mut self, a: usize, b: usize, merges: &mut Vec<(usize, usize)>) -> f64 {
        let (kept, _, cost) = self.step(a, b);
        for id in [a, b] {
            let key = (self.sizes[id].to_bits(), id);
            for &l in &self.sets[id] {
                self.holders[l as usize].remove(&key);
            }
            self.by_size.remove(&key);
            self.alive[id] = false;
            self.sets[id] = Vec::new();
        }
        merges.push((a, b));
        let merged = self.add(kept);
        self.propose(merged);
        self.pair_smallest();
        cost
    }

    /// The path and its FLOPs, and the pairs costed finding it.
    pub(super) fn run(mut self) -> (Result<(Merges, f64), PathError>, usize) {
        let n = self.labels.operands.len();
        let mut merges = Vec::with_capacity(n.saturating_sub(1));
        let mut flops = 0.0;
        while self.by_size.len() > 2 {
            let Some(Reverse(Candidate { pair: (a, b), .. })) = self.queue.pop() else {
                let error = PathError::GreedyOverMemoryLimit { limit: self.limit };
                return (Err(error), self.evaluations);
            };
            if self.alive[a] && self.alive[b] {
                flops += self.contract(a, b, &mut merges);
            }
        }
        if let [(_, a), (_, b)] = self.by_size.iter().copied().collect::<Vec<_>>()[..] {
            // The last step makes the result, which no limit bounds.
            flops += self.contract(a.min(b), a.max(b), &mut merges);
        }
        (Ok((merges, flops)), self.evaluations)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::nary::path::tests::{set, sizes};
    use crate::nary::path::{Path, PathOptions, find_path, positions};

    fn greedy(
        operands: &[BTreeSet<String>],
        result: &BTreeSet<String>,
        sizes: &HashMap<String, f64>,
        limit: f64,
    ) -> (Result<Path, PathError>, usize) {
        let (path, evaluations) = Greedy::new(&Interned::new(operands, result, sizes), limit).run();
        let path = path.map(|(merges, flops)| positions(operands.len(), &merges, flops));
        (path, evaluations)
    }

    #[test]
    fn greedy_counts_a_label_summed_only_once_its_last_holders_meet() {
        // j is held by three operands: the first step keeps it, the second sums it.
        let sizes = sizes(&[("i", 2.0), ("j", 3.0), ("k", 5.0)]);
        let operands = [set("ij"), set("j"), set("jk")];
        let path = greedy(&operands, &set("ik"), &sizes, f64::INFINITY)
            .0
            .unwrap();
        // (ij, j) keeps j: 6 multiplies; (ij, jk) sums j: 30 points, 60 FLOPs.
        assert_eq!(path.steps, vec![(0, 1), (0, 1)]);
        assert_eq!(path.flops, 6.0 + 60.0);
        assert_eq!(
            find_path(&operands, &set("ik"), &sizes, &PathOptions::default())
                .unwrap()
                .flops,
            path.flops
        );
    }

    /// A chain `a0a1, a1a2, …` of `n` matrices keeping its ends, and a star `ia0, ia1, …` of
    /// `n` operands sharing `i`, each label of size 2, with the pairs the greedy search costs.
    fn greedy_work(n: usize) -> [usize; 2] {
        let two = |labels: &[String]| labels.iter().map(|l| (l.clone(), 2.0)).collect();
        let chain: Vec<BTreeSet<String>> = (0..n)
            .map(|i| [format!("a{i}"), format!("a{}", i + 1)].into())
            .collect();
        let ends: BTreeSet<String> = ["a0".to_owned(), format!("a{n}")].into();
        let chain_sizes: HashMap<String, f64> =
            two(&(0..=n).map(|i| format!("a{i}")).collect::<Vec<_>>());
        let star: Vec<BTreeSet<String>> = (0..n)
            .map(|i| ["i".to_owned(), format!("a{i}")].into())
            .collect();
        let hub: BTreeSet<String> = ["i".to_owned()].into();
        let mut star_labels: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        star_labels.push("i".to_owned());
        let star_sizes = two(&star_labels);
        let mut work = [0; 2];
        for (k, (operands, result, sizes)) in
            [(&chain, &ends, &chain_sizes), (&star, &hub, &star_sizes)]
                .into_iter()
                .enumerate()
        {
            let (path, evaluations) = greedy(operands, result, sizes, f64::INFINITY);
            assert_eq!(path.unwrap().steps.len(), n - 1);
            work[k] = evaluations;
        }
        work
    }

    #[test]
    fn greedy_costs_a_bounded_number_of_pairs_per_step() {
        // Every pair of pending operands at every step would be n³/6: 1.7 × 10⁸ for 1,000. Each
        // operand is paired with a few holders of each of its (two) labels, and with the
        // smallest operands when it is among them.
        let [chain, star] = greedy_work(1000);
        let bound = 5 * NEIGHBOURS * 1000;
        assert!(chain <= bound, "chain: {chain} pairs costed");
        assert!(star <= bound, "star: {star} pairs costed");
        // Twice the operands, about twice the work.
        let [chain2, star2] = greedy_work(2000);
        assert!(chain2 * 10 <= chain * 22, "chain: {chain} then {chain2}");
        assert!(star2 * 10 <= star * 22, "star: {star} then {star2}");
    }
}
