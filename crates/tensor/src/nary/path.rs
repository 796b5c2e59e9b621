//! The contraction path search over label sets: the cost model, the optimal search and the
//! greedy one.
//!
//! Labels are interned as ids in the order their names sort, so that a product of sizes
//! multiplies in that order whatever the representation (the same FLOPs, to the bit, as over sets
//! of names). The optimal search is dynamic programming over subsets with label sets as bitsets;
//! a split is costed only when the cost of its parts plus the cells of its result (a lower bound
//! of its step) can beat the subset's best so far. The greedy search keeps a priority queue of
//! candidate pairs and, per label, its holders by size, so each step costs a few pair
//! evaluations, not one per pair of pending operands.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::fmt;

use super::pending::Pending;

/// Up to this many operands the automatic path search is exhaustive.
pub const EXHAUSTIVE_UP_TO: usize = 10;

/// The most operands the exhaustive search takes when asked for: its time grows as 3ⁿ and its
/// memory as 2ⁿ (16 operands take a fraction of a second).
pub const OPTIMAL_UP_TO: usize = 16;

/// The greedy search pairs a new operand with this many of the smallest other holders of each
/// of its labels, and pairs among this many of the smallest pending operands (outer products
/// included). Up to this many operands it therefore weighs every pair at every step.
const NEIGHBOURS: usize = 16;

/// A contraction path: the pairs contracted in order, as positions in the list of operands still
/// pending (each step removes its two and appends its result), and the total cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// The pairs contracted, as positions in the pending list at their step.
    pub steps: Vec<(usize, usize)>,
    /// The FLOPs of the steps, summed.
    pub flops: f64,
}

/// How the path is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Optimal up to [`EXHAUSTIVE_UP_TO`] operands, greedy beyond.
    #[default]
    Auto,
    /// Dynamic programming over subsets, up to [`OPTIMAL_UP_TO`] operands (beyond, an error).
    Optimal,
    /// The cheapest pair at each step, among candidates: pairs sharing a label (with up to 16
    /// of each label's smallest holders) and pairs among the 16 smallest operands; every pair
    /// up to 16 operands. Its time grows as n log n for operands of a few labels each.
    Greedy,
}

/// What the path search is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathOptions {
    /// The search.
    pub search: Search,
    /// The most cells an intermediate result may have (the operands and the final result are
    /// what they are); `None` for no limit.
    pub memory_limit: Option<f64>,
}

/// Why no path was found.
#[derive(Debug, Clone, PartialEq)]
pub enum PathError {
    /// The optimal search was asked for more than [`OPTIMAL_UP_TO`] operands.
    TooManyForOptimal {
        /// The operands given.
        operands: usize,
    },
    /// Every path has an intermediate result over the memory limit.
    OverMemoryLimit {
        /// The limit, in cells.
        limit: f64,
    },
    /// The greedy search found no step within the memory limit at some point (a path within it
    /// may still exist: the optimal search decides).
    GreedyOverMemoryLimit {
        /// The limit, in cells.
        limit: f64,
    },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::TooManyForOptimal { operands } => write!(
                f,
                "the optimal path search takes at most {OPTIMAL_UP_TO} operands, {operands} \
                 given (the greedy search takes any number)"
            ),
            PathError::OverMemoryLimit { limit } => write!(
                f,
                "every contraction path has an intermediate result of more than {limit} cells \
                 (the memory limit)"
            ),
            PathError::GreedyOverMemoryLimit { limit } => write!(
                f,
                "the greedy path search found no step whose result has at most {limit} cells \
                 (the memory limit; the optimal search, up to {OPTIMAL_UP_TO} operands, may \
                 find a path within it)"
            ),
        }
    }
}

impl std::error::Error for PathError {}

/// The cheapest path contracting `operands` (label sets) into one with `result`'s labels, under
/// `options`. `sizes` gives labels' sizes (those missing count as 1). The cost of a step is its
/// FLOPs: a multiply per point of its product space (the labels either operand has), and an add
/// per point when it sums a label away (one no other pending operand has and the result lacks).
/// An error when the optimal search is asked for more than [`OPTIMAL_UP_TO`] operands, or no
/// path found keeps every intermediate within the memory limit.
pub fn find_path(
    operands: &[BTreeSet<String>],
    result: &BTreeSet<String>,
    sizes: &HashMap<String, f64>,
    options: &PathOptions,
) -> Result<Path, PathError> {
    let labels = Interned::new(operands, result, sizes);
    let limit = options.memory_limit.unwrap_or(f64::INFINITY);
    match options.search {
        Search::Optimal if operands.len() > OPTIMAL_UP_TO => Err(PathError::TooManyForOptimal {
            operands: operands.len(),
        }),
        Search::Auto if operands.len() <= EXHAUSTIVE_UP_TO => optimal(&labels, limit),
        Search::Optimal => optimal(&labels, limit),
        Search::Auto | Search::Greedy => Greedy::new(&labels, limit).run().0,
    }
}

/// The label sets with labels as ids, numbered in the order their names sort.
struct Interned {
    /// Each operand's labels, ascending.
    operands: Vec<Vec<u32>>,
    /// Whether the result has each label.
    in_result: Vec<bool>,
    /// Each label's size.
    sizes: Vec<f64>,
}

impl Interned {
    fn new(
        operands: &[BTreeSet<String>],
        result: &BTreeSet<String>,
        sizes: &HashMap<String, f64>,
    ) -> Interned {
        let names: BTreeSet<&String> = operands.iter().flatten().chain(result).collect();
        let ids: HashMap<&String, u32> = names.iter().zip(0..).map(|(n, i)| (*n, i)).collect();
        Interned {
            // Sets iterate in name order, so the ids come ascending.
            operands: operands
                .iter()
                .map(|set| set.iter().map(|l| ids[l]).collect())
                .collect(),
            in_result: names.iter().map(|n| result.contains(*n)).collect(),
            sizes: names
                .iter()
                .map(|n| sizes.get(*n).copied().unwrap_or(1.0))
                .collect(),
        }
    }

    fn labels(&self) -> usize {
        self.sizes.len()
    }
}

/// A path given as merges of creation ids (operands `0..n`, then each merge's result in turn),
/// as positions in the pending list.
fn positions(operands: usize, merges: &[(usize, usize)], flops: f64) -> Path {
    let mut pending = Pending::new(operands);
    let mut steps = Vec::with_capacity(merges.len());
    for &(a, b) in merges {
        steps.push((pending.position(a), pending.position(b)));
        pending.remove(a);
        pending.remove(b);
        pending.push();
    }
    Path { steps, flops }
}

/// What the contraction of each subset of the operands keeps, as bitsets of `words` words.
struct Subsets {
    words: usize,
    /// The labels each subset's contraction keeps, `words` words per subset: those needed
    /// outside the subset or in the result (an operand, contracted by nothing, keeps all of its
    /// own).
    keep: Vec<u64>,
    /// How many labels each subset keeps.
    count: Vec<u32>,
    /// The cells of each subset's contraction.
    cells: Vec<f64>,
}

impl Subsets {
    fn new(labels: &Interned) -> Subsets {
        let n = labels.operands.len();
        let full = (1usize << n) - 1;
        let words = labels.labels().div_ceil(64).max(1);
        let operands: Vec<Vec<u64>> = (labels.operands.iter())
            .map(|o| bitset(o.iter().copied(), words))
            .collect();
        let in_result = (0..labels.labels() as u32).filter(|&l| labels.in_result[l as usize]);
        let result = bitset(in_result, words);
        // The labels each subset's operands have.
        let mut all = vec![0u64; (full + 1) * words];
        for set in 1..=full {
            let low = set.trailing_zeros() as usize;
            let rest = set & (set - 1);
            for w in 0..words {
                all[set * words + w] = all[rest * words + w] | operands[low][w];
            }
        }
        let mut subsets = Subsets {
            words,
            keep: vec![0u64; (full + 1) * words],
            count: vec![0; full + 1],
            cells: vec![0.0; full + 1],
        };
        for set in 1..=full {
            let needed = if set.count_ones() == 1 {
                full
            } else {
                full ^ set
            };
            for w in 0..words {
                subsets.keep[set * words + w] =
                    all[set * words + w] & (result[w] | all[needed * words + w]);
            }
            let kept = &subsets.keep[set * words..(set + 1) * words];
            subsets.count[set] = kept.iter().map(|w| w.count_ones()).sum();
            subsets.cells[set] = points(kept, &labels.sizes);
        }
        subsets
    }

    fn keep(&self, set: usize) -> &[u64] {
        &self.keep[set * self.words..(set + 1) * self.words]
    }
}

/// The bitset of `words` words holding `ids`.
fn bitset(ids: impl Iterator<Item = u32>, words: usize) -> Vec<u64> {
    let mut set = vec![0u64; words];
    for l in ids {
        set[l as usize / 64] |= 1 << (l % 64);
    }
    set
}

/// The product of the sizes of the labels in a bitset, multiplied in ascending order.
fn points(set: &[u64], sizes: &[f64]) -> f64 {
    let mut product = 1.0;
    for (w, &word) in set.iter().enumerate() {
        let mut word = word;
        while word != 0 {
            product *= sizes[w * 64 + word.trailing_zeros() as usize];
            word &= word - 1;
        }
    }
    product
}

/// Dynamic programming over subsets: for each subset, the cheapest way to contract it into one
/// operand, from the cheapest ways for its two parts. Of equally cheap splits, the first in the
/// order enumerated (the first part largest first).
fn optimal(labels: &Interned, limit: f64) -> Result<Path, PathError> {
    let n = labels.operands.len();
    if n <= 1 {
        return Ok(Path {
            steps: Vec::new(),
            flops: 0.0,
        });
    }
    let full = (1usize << n) - 1;
    let subsets = Subsets::new(labels);
    let words = subsets.words;
    // The cheapest cost of each subset and its first part (0: no split within the limit yet).
    let mut cost = vec![0.0f64; full + 1];
    let mut first_part = vec![0usize; full + 1];
    for i in 0..n {
        first_part[1 << i] = 1 << i;
    }
    let mut union = vec![0u64; words];
    for set in 1..=full {
        if set.count_ones() == 1 || (set != full && subsets.cells[set] > limit) {
            continue;
        }
        // Splits with the lowest member in the first part, so each split is seen once.
        let low = set & set.wrapping_neg();
        let rest = set & !low;
        let floor = subsets.cells[set];
        let mut part = rest;
        loop {
            let first = part | low;
            let second = set & !first;
            if second != 0 && first_part[first] != 0 && first_part[second] != 0 {
                let parts = cost[first] + cost[second];
                // A step costs at least a multiply per cell of its result.
                if first_part[set] == 0 || parts + floor < cost[set] {
                    let mut count = 0;
                    for (w, (a, b)) in subsets
                        .keep(first)
                        .iter()
                        .zip(subsets.keep(second))
                        .enumerate()
                    {
                        union[w] = a | b;
                        count += union[w].count_ones();
                    }
                    let sums = count != subsets.count[set];
                    let step = points(&union, &labels.sizes) * if sums { 2.0 } else { 1.0 };
                    let total = parts + step;
                    if first_part[set] == 0 || total < cost[set] {
                        cost[set] = total;
                        first_part[set] = first;
                    }
                }
            }
            if part == 0 {
                break;
            }
            part = (part - 1) & rest;
        }
    }
    if first_part[full] == 0 {
        return Err(PathError::OverMemoryLimit { limit });
    }
    // Unfold the chosen splits into merges: each part contracted in turn, then the two joined.
    let mut merges = Vec::with_capacity(n - 1);
    fn unfold(
        set: usize,
        first_part: &[usize],
        made: &mut usize,
        merges: &mut Vec<(usize, usize)>,
    ) -> usize {
        if set.count_ones() == 1 {
            return set.trailing_zeros() as usize;
        }
        let first = first_part[set];
        let a = unfold(first, first_part, made, merges);
        let b = unfold(set & !first, first_part, made, merges);
        merges.push((a, b));
        *made += 1;
        *made - 1
    }
    let mut made = n;
    unfold(full, &first_part, &mut made, &mut merges);
    Ok(positions(n, &merges, cost[full]))
}

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
struct Greedy<'a> {
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
    fn new(labels: &'a Interned, limit: f64) -> Greedy<'a> {
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

    /// The path, and the pairs costed finding it.
    fn run(mut self) -> (Result<Path, PathError>, usize) {
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
        (Ok(positions(n, &merges, flops)), self.evaluations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(labels: &str) -> BTreeSet<String> {
        labels.chars().map(|c| c.to_string()).collect()
    }

    fn sizes(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
        pairs.iter().map(|&(l, s)| (l.to_owned(), s)).collect()
    }

    fn greedy(
        operands: &[BTreeSet<String>],
        result: &BTreeSet<String>,
        sizes: &HashMap<String, f64>,
        limit: f64,
    ) -> (Result<Path, PathError>, usize) {
        Greedy::new(&Interned::new(operands, result, sizes), limit).run()
    }

    #[test]
    fn a_matrix_chain_is_multiplied_in_its_cheapest_order() {
        // (10×100)(100×5)(5×50): ((AB)C) takes 5000 + 2500 multiply-adds; (A(BC)) 25000 + 50000.
        let sizes = sizes(&[("i", 10.0), ("j", 100.0), ("k", 5.0), ("l", 50.0)]);
        let operands = [set("ij"), set("jk"), set("kl")];
        let path = find_path(&operands, &set("il"), &sizes, &PathOptions::default()).unwrap();
        // A·B first; then the product with C.
        assert_eq!(path.steps.len(), 2);
        assert_eq!(path.steps[0], (0, 1));
        assert_eq!(path.flops, 2.0 * (5000.0 + 2500.0));
        let greedy = greedy(&operands, &set("il"), &sizes, f64::INFINITY).0;
        assert_eq!(greedy.unwrap().flops, 15000.0);
    }

    #[test]
    fn an_outer_product_costs_a_multiply_per_point_and_a_contraction_two() {
        // ijk,jr,kr->ir: (jr·kr) is an outer product of 128·128·16 points, then one contraction
        // over the whole space; contracting ijk with jr first sums j over the same space, then
        // k over 128·128·16 points. As many multiply-adds, but the first has fewer adds.
        let sizes = sizes(&[("i", 128.0), ("j", 128.0), ("k", 128.0), ("r", 16.0)]);
        let operands = [set("ijk"), set("jr"), set("kr")];
        let outer = 128.0 * 128.0 * 16.0;
        let whole = 128.0 * outer;
        for path in [
            find_path(&operands, &set("ir"), &sizes, &PathOptions::default()).unwrap(),
            greedy(&operands, &set("ir"), &sizes, f64::INFINITY)
                .0
                .unwrap(),
        ] {
            assert_eq!(path.steps[0], (1, 2));
            assert_eq!(path.flops, outer + 2.0 * whole);
        }
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

    #[test]
    fn a_memory_limit_keeps_intermediates_small() {
        // i,j,ijk->k with i = 150, j = 10, k = 100. Cheapest: the outer product i·j (1,500
        // cells, 1,500 FLOPs), then ij·ijk (2 × 150,000). Within 1,000 cells: i·ijk makes jk
        // (1,000 cells, 2 × 150,000), then j·jk (2 × 1,000). Within 999 cells: no path.
        let sizes = sizes(&[("i", 150.0), ("j", 10.0), ("k", 100.0)]);
        let operands = [set("i"), set("j"), set("ijk")];
        for search in [Search::Optimal, Search::Greedy] {
            let within = |limit| PathOptions {
                search,
                memory_limit: limit,
            };
            let free = find_path(&operands, &set("k"), &sizes, &within(None)).unwrap();
            assert_eq!(
                (free.steps[0], free.flops),
                ((0, 1), 301_500.0),
                "{search:?}"
            );
            let small = find_path(&operands, &set("k"), &sizes, &within(Some(1000.0))).unwrap();
            assert_eq!(
                (small.steps[0], small.flops),
                ((0, 2), 302_000.0),
                "{search:?}"
            );
            let none = find_path(&operands, &set("k"), &sizes, &within(Some(999.0)));
            let limit = 999.0;
            let expected = match search {
                Search::Greedy => PathError::GreedyOverMemoryLimit { limit },
                _ => PathError::OverMemoryLimit { limit },
            };
            assert_eq!(none, Err(expected), "{search:?}");
        }
    }

    #[test]
    fn the_optimal_search_refuses_more_operands_than_it_takes() {
        let operands: Vec<BTreeSet<String>> = (0..=OPTIMAL_UP_TO).map(|_| set("i")).collect();
        let optimal = PathOptions {
            search: Search::Optimal,
            memory_limit: None,
        };
        let error = find_path(&operands, &set("i"), &HashMap::new(), &optimal).unwrap_err();
        assert_eq!(
            error,
            PathError::TooManyForOptimal {
                operands: OPTIMAL_UP_TO + 1
            }
        );
        assert!(error.to_string().contains("at most 16 operands, 17 given"));
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
