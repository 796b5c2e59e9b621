//! The contraction path search over label sets: the cost model, what each search is asked for,
//! the label sets interned for the searches, and how the automatic search combines them.
//!
//! Up to [`EXHAUSTIVE_UP_TO`] operands the automatic search is `optimal` (dynamic programming
//! over every subset). Beyond, it runs several searches and keeps the cheapest path by FLOPs:
//! `greedy` (the cheapest step among candidates, n log n), `removal` (opt_einsum's `greedy`,
//! step for step, so no path is costlier than that one's), the cheaper of the two improved by
//! `reconfigure` (each part of up to 8 results below a step contracted in its cheapest order),
//! then `connected` (dynamic programming over connected subgraphs, exact for chains and rings;
//! up to 128 operands, bounded by the cost found so far, within a work budget), improved in turn
//! when it wins. Every search counts its work and gives up, or stops improving, past a fixed
//! budget, so the path found depends on the problem alone, and an einsum of thousands of
//! operands of a few labels each still plans in n log n time plus a bounded amount. As measured
//! in a release build: planning a chain of 51 matrices took about 4 ms, a chain of 1,000 about
//! 20 ms, and the exhaustive search of 16 operands, when asked for, about a fifth of a second.
//!
//! Labels are interned as ids in the order their names sort, so that a product of sizes
//! multiplies in that order whatever the representation (the same FLOPs, to the bit, as over sets
//! of names). A path is followed as merges of creation ids (operands `0..n`, then each step's
//! result), costed by replaying it.

mod connected;
mod greedy;
mod optimal;
mod reconfigure;
#[cfg(test)]
mod reference;
mod removal;

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use super::pending::Pending;
use connected::connected;
use greedy::Greedy;
use optimal::optimal;
use reconfigure::reconfigure;
use removal::removal_greedy;

/// Up to this many operands the automatic path search is exhaustive; beyond, it keeps the
/// cheapest path of several searches.
pub const EXHAUSTIVE_UP_TO: usize = 10;

/// The most operands the exhaustive search takes when asked for: its time grows as 3ⁿ and its
/// memory as 2ⁿ (16 operands take a fraction of a second).
pub const OPTIMAL_UP_TO: usize = 16;

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
    /// Optimal up to [`EXHAUSTIVE_UP_TO`] operands; beyond, the cheapest of the greedy search,
    /// opt_einsum's greedy search (so never costlier than that), dynamic programming over
    /// connected subgraphs (exact for chains and rings) and their local improvements.
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
    /// The automatic search beyond [`EXHAUSTIVE_UP_TO`] operands found no path within the memory
    /// limit (one may still exist: up to [`OPTIMAL_UP_TO`] operands, the optimal search decides).
    SearchesOverMemoryLimit {
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
            PathError::SearchesOverMemoryLimit { limit } => write!(
                f,
                "the path searches found no contraction path whose intermediate results have at \
                 most {limit} cells (the memory limit; the optimal search, up to {OPTIMAL_UP_TO} \
                 operands, may find one)"
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
    let n = operands.len();
    match options.search {
        Search::Optimal if n > OPTIMAL_UP_TO => Err(PathError::TooManyForOptimal { operands: n }),
        Search::Auto if n <= EXHAUSTIVE_UP_TO => optimal(&labels, limit),
        Search::Optimal => optimal(&labels, limit),
        Search::Greedy => (Greedy::new(&labels, limit).run().0)
            .map(|(merges, flops)| positions(n, &merges, flops)),
        Search::Auto => cheapest_found(&labels, limit),
    }
}

/// The cheapest by FLOPs of the paths the searches find (of equally cheap, the first found): the
/// greedy search by FLOPs, the one by memory removed, the cheaper of the two improved step by
/// step, then dynamic programming over connected subgraphs (bounded by the cheapest cost so far),
/// itself improved step by step when it is the cheapest.
fn cheapest_found(labels: &Interned, limit: f64) -> Result<Path, PathError> {
    let mut best = None;
    let greedy = Greedy::new(labels, limit).run().0.ok();
    keep_cheaper(&mut best, greedy.map(|(merges, _)| merges), labels, limit);
    keep_cheaper(&mut best, removal_greedy(labels).0, labels, limit);
    if let Some((merges, _)) = &best {
        let improved = reconfigure(labels, merges, limit).0;
        keep_cheaper(&mut best, Some(improved), labels, limit);
    }
    let bound = best.as_ref().map_or(f64::INFINITY, |(_, flops)| *flops);
    let dynamic = connected(labels, limit, bound).0;
    if keep_cheaper(&mut best, dynamic, labels, limit)
        && let Some((merges, _)) = &best
    {
        let improved = reconfigure(labels, merges, limit).0;
        keep_cheaper(&mut best, Some(improved), labels, limit);
    }
    let (merges, flops) = best.ok_or(PathError::SearchesOverMemoryLimit { limit })?;
    Ok(positions(labels.operands.len(), &merges, flops))
}

/// Makes `found` the best path when it keeps within `limit` and costs less; whether it did.
fn keep_cheaper(
    best: &mut Option<(Merges, f64)>,
    found: Option<Merges>,
    labels: &Interned,
    limit: f64,
) -> bool {
    let Some(merges) = found else {
        return false;
    };
    let Some(flops) = replay(labels, &merges, limit) else {
        return false;
    };
    let cheaper = best.as_ref().is_none_or(|(_, cheapest)| flops < *cheapest);
    if cheaper {
        *best = Some((merges, flops));
    }
    cheaper
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

/// A path as merges of creation ids: operands `0..n`, then each merge's result in turn.
type Merges = Vec<(usize, usize)>;

/// The FLOPs of the path `merges`, or none when an intermediate result (any but the last) has
/// more than `limit` cells.
fn replay(labels: &Interned, merges: &[(usize, usize)], limit: f64) -> Option<f64> {
    let mut follower = Follower::new(labels);
    let mut flops = 0.0;
    for (step, &(a, b)) in merges.iter().enumerate() {
        let (cells, cost) = follower.step(a, b);
        if step + 1 < merges.len() && cells > limit {
            return None;
        }
        flops += cost;
    }
    Some(flops)
}

/// The operands pending along a path, by creation id, with each label's pending holders.
struct Follower<'a> {
    labels: &'a Interned,
    holders: Vec<usize>,
    /// The labels of each operand made so far (emptied once contracted).
    sets: Vec<Vec<u32>>,
}

impl<'a> Follower<'a> {
    fn new(labels: &'a Interned) -> Follower<'a> {
        let mut holders = vec![0usize; labels.labels()];
        for set in &labels.operands {
            for &l in set {
                holders[l as usize] += 1;
            }
        }
        Follower {
            labels,
            holders,
            sets: labels.operands.clone(),
        }
    }

    /// Contracts pending `a` and `b` into a new operand, keeping the labels another pending
    /// operand or the result has: its cells and the step's FLOPs.
    fn step(&mut self, a: usize, b: usize) -> (f64, f64) {
        let (x, y) = (
            std::mem::take(&mut self.sets[a]),
            std::mem::take(&mut self.sets[b]),
        );
        let (mut i, mut j) = (0, 0);
        let mut kept = Vec::with_capacity(x.len() + y.len());
        let (mut product, mut cells, mut sums) = (1.0, 1.0, false);
        loop {
            let label = match (x.get(i), y.get(j)) {
                (Some(&l), Some(&m)) => l.min(m),
                (Some(&l), None) | (None, Some(&l)) => l,
                (None, None) => break,
            };
            let (in_x, in_y) = (x.get(i) == Some(&label), y.get(j) == Some(&label));
            i += usize::from(in_x);
            j += usize::from(in_y);
            let (l, in_pair) = (label as usize, usize::from(in_x) + usize::from(in_y));
            let size = self.labels.sizes[l];
            product *= size;
            if !self.labels.in_result[l] && self.holders[l] == in_pair {
                sums = true;
                self.holders[l] = 0;
            } else {
                kept.push(label);
                cells *= size;
                self.holders[l] = self.holders[l] + 1 - in_pair;
            }
        }
        self.sets.push(kept);
        (cells, product * if sums { 2.0 } else { 1.0 })
    }
}

/// A path given as merges of creation ids, as positions in the pending list.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels of a one-letter-per-label text.
    pub(super) fn set(labels: &str) -> BTreeSet<String> {
        labels.chars().map(|c| c.to_string()).collect()
    }

    /// Label sizes from pairs.
    pub(super) fn sizes(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
        pairs.iter().map(|&(l, s)| (l.to_owned(), s)).collect()
    }

    fn greedy(
        operands: &[BTreeSet<String>],
        result: &BTreeSet<String>,
        sizes: &HashMap<String, f64>,
    ) -> Result<Path, PathError> {
        let options = PathOptions {
            search: Search::Greedy,
            memory_limit: None,
        };
        find_path(operands, result, sizes, &options)
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
        let greedy = greedy(&operands, &set("il"), &sizes);
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
            greedy(&operands, &set("ir"), &sizes).unwrap(),
        ] {
            assert_eq!(path.steps[0], (1, 2));
            assert_eq!(path.flops, outer + 2.0 * whole);
        }
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
}
