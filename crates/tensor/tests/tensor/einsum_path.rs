//! Property tests of the contraction path search on random label sets, sizes and memory limits:
//! the optimal search finds the cost of the cheapest of all contraction orders (enumerated one by
//! one, up to 6 operands) and a path that has it; the greedy search always gives a valid path
//! that costs what it reports (within the limit when it succeeds, never failing without one),
//! and up to 16 operands takes the same steps as weighing every pair at every step; beyond 10
//! operands the automatic search gives a valid path no costlier than the greedy one's.
//!
//! And the automatic search against opt_einsum's paths on einsums of 11 to 60 operands (matrix
//! chains, trees, grids, rings, hypergraphs, disconnected networks; `tests/data/
//! einsum_path_reference.txt`, written by `scripts/einsum_path_reference.py`): never costlier
//! than its `greedy`, matrix chains no costlier than their cheapest order of products of
//! adjacent runs (by the classic dynamic programming, which `dp` matches), and the ratios to its
//! `dp` printed.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use proptest::sample::subsequence;

use rcannl_tensor::nary::{Path, PathError, PathOptions, Search, find_path};

/// A path search problem: operands' label sets, the result's, each label's size, a memory limit.
#[derive(Debug, Clone)]
struct Problem {
    operands: Vec<BTreeSet<String>>,
    result: BTreeSet<String>,
    sizes: HashMap<String, f64>,
    limit: Option<f64>,
}

const POOL: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

fn problem(operands: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Problem> {
    let operand = subsequence(&POOL[..], 0..=3);
    (
        proptest::collection::vec(operand, operands),
        subsequence(&POOL[..], 0..=POOL.len()),
        proptest::collection::vec(1..=4u32, POOL.len()),
        proptest::option::of(1..=64u32),
    )
        .prop_map(|(operands, result, sizes, limit)| {
            let operands: Vec<BTreeSet<String>> = operands
                .into_iter()
                .map(|o| o.into_iter().map(str::to_owned).collect())
                .collect();
            let used: BTreeSet<&String> = operands.iter().flatten().collect();
            Problem {
                result: result
                    .into_iter()
                    .map(str::to_owned)
                    .filter(|l| used.contains(l))
                    .collect(),
                sizes: POOL
                    .iter()
                    .zip(sizes)
                    .map(|(l, s)| ((*l).to_owned(), f64::from(s)))
                    .collect(),
                limit: limit.map(f64::from),
                operands,
            }
        })
}

impl Problem {
    fn points<'a>(&self, labels: impl Iterator<Item = &'a String>) -> f64 {
        labels.map(|l| self.sizes[l]).product()
    }

    /// The step over pending operands `i` and `j`: its cost and its result's labels.
    fn step(&self, pending: &[BTreeSet<String>], i: usize, j: usize) -> (f64, BTreeSet<String>) {
        let (a, b) = (&pending[i], &pending[j]);
        let union: BTreeSet<String> = a.union(b).cloned().collect();
        let needed = |l: &String| {
            self.result.contains(l)
                || pending
                    .iter()
                    .enumerate()
                    .any(|(k, o)| k != i && k != j && o.contains(l))
        };
        let kept: BTreeSet<String> = union.iter().filter(|l| needed(l)).cloned().collect();
        let factor = if kept.len() < union.len() { 2.0 } else { 1.0 };
        (self.points(union.iter()) * factor, kept)
    }

    /// Whether `labels`, the result of a step before the last, is within the memory limit.
    fn within(&self, labels: &BTreeSet<String>) -> bool {
        self.points(labels.iter()) <= self.limit.unwrap_or(f64::INFINITY)
    }

    /// The cost of `path`, checking each step names two pending operands and each intermediate
    /// is within the limit.
    fn replay(&self, path: &Path) -> Result<f64, String> {
        let mut pending = self.operands.clone();
        let mut flops = 0.0;
        for (s, &(i, j)) in path.steps.iter().enumerate() {
            if i == j || i >= pending.len() || j >= pending.len() {
                return Err(format!("step {s} ({i}, {j}) of {} pending", pending.len()));
            }
            let (cost, kept) = self.step(&pending, i, j);
            if s + 1 < path.steps.len() && !self.within(&kept) {
                return Err(format!("step {s} makes {kept:?}, over the limit"));
            }
            flops += cost;
            pending = pending
                .into_iter()
                .enumerate()
                .filter(|(k, _)| *k != i && *k != j)
                .map(|(_, o)| o)
                .collect();
            pending.push(kept);
        }
        if pending.len() != 1 {
            return Err(format!("{} operands left", pending.len()));
        }
        Ok(flops)
    }

    /// The cheapest cost over every order of contraction within the limit.
    fn cheapest(&self, pending: &[BTreeSet<String>]) -> Option<f64> {
        if pending.len() <= 1 {
            return Some(0.0);
        }
        let mut best: Option<f64> = None;
        for i in 0..pending.len() {
            for j in i + 1..pending.len() {
                let (cost, kept) = self.step(pending, i, j);
                if pending.len() > 2 && !self.within(&kept) {
                    continue;
                }
                let mut rest: Vec<BTreeSet<String>> = pending
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != i && *k != j)
                    .map(|(_, o)| o.clone())
                    .collect();
                rest.push(kept);
                if let Some(after) = self.cheapest(&rest) {
                    let total = cost + after;
                    if best.is_none_or(|b| total < b) {
                        best = Some(total);
                    }
                }
            }
        }
        best
    }

    /// The greedy path by weighing every pair at every step: the cheapest, of equally cheap the
    /// first pair in the pending list.
    fn every_pair_greedy(&self) -> Option<Path> {
        let mut pending = self.operands.clone();
        let (mut steps, mut flops) = (Vec::new(), 0.0);
        while pending.len() > 1 {
            let mut choice: Option<(f64, usize, usize, BTreeSet<String>)> = None;
            for i in 0..pending.len() {
                for j in i + 1..pending.len() {
                    let (cost, kept) = self.step(&pending, i, j);
                    if pending.len() > 2 && !self.within(&kept) {
                        continue;
                    }
                    if choice.as_ref().is_none_or(|(c, ..)| cost < *c) {
                        choice = Some((cost, i, j, kept));
                    }
                }
            }
            let (cost, i, j, kept) = choice?;
            flops += cost;
            steps.push((i, j));
            pending = pending
                .into_iter()
                .enumerate()
                .filter(|(k, _)| *k != i && *k != j)
                .map(|(_, o)| o)
                .collect();
            pending.push(kept);
        }
        Some(Path { steps, flops })
    }

    fn search(&self, search: Search) -> Result<Path, PathError> {
        let options = PathOptions {
            search,
            memory_limit: self.limit,
        };
        find_path(&self.operands, &self.result, &self.sizes, &options)
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(7),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_optimal_search_finds_the_cheapest_order(problem in problem(1..=6)) {
        let cheapest = problem.cheapest(&problem.operands);
        match (problem.search(Search::Optimal), cheapest) {
            (Ok(path), Some(cheapest)) => {
                prop_assert_eq!(path.flops, cheapest);
                prop_assert_eq!(problem.replay(&path), Ok(cheapest));
                prop_assert_eq!(problem.search(Search::Auto), Ok(path));
            }
            (Err(error), None) => {
                prop_assert_eq!(error, PathError::OverMemoryLimit { limit: problem.limit.unwrap() });
            }
            (found, cheapest) => prop_assert!(false, "{found:?}, cheapest {cheapest:?}"),
        }
    }

    #[test]
    fn the_greedy_search_gives_a_valid_path(problem in problem(1..=16)) {
        let greedy = problem.search(Search::Greedy);
        prop_assert_eq!(&greedy.clone().ok(), &problem.every_pair_greedy());
        match greedy {
            Ok(path) => {
                prop_assert_eq!(path.steps.len(), problem.operands.len() - 1);
                prop_assert_eq!(problem.replay(&path), Ok(path.flops));
                if problem.operands.len() <= 6 {
                    prop_assert!(path.flops >= problem.cheapest(&problem.operands).unwrap());
                }
            }
            Err(error) => {
                prop_assert!(problem.limit.is_some(), "{error}");
                prop_assert_eq!(
                    error,
                    PathError::GreedyOverMemoryLimit { limit: problem.limit.unwrap() }
                );
            }
        }
        let unlimited = Problem { limit: None, ..problem };
        prop_assert!(unlimited.search(Search::Greedy).is_ok());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(11),
        ..ProptestConfig::default()
    })]

    #[test]
    fn beyond_ten_operands_the_automatic_search_beats_the_greedy_one(problem in problem(11..=13)) {
        let auto = problem.search(Search::Auto);
        let greedy = problem.search(Search::Greedy);
        let optimal = problem.search(Search::Optimal);
        match (&auto, &greedy) {
            (Ok(path), _) => {
                prop_assert_eq!(problem.replay(path), Ok(path.flops));
                if let Ok(greedy) = &greedy {
                    prop_assert!(path.flops <= greedy.flops, "{} > {}", path.flops, greedy.flops);
                }
                prop_assert!(path.flops >= optimal.unwrap().flops);
            }
            (Err(error), Err(_)) => {
                prop_assert_eq!(
                    error,
                    &PathError::SearchesOverMemoryLimit { limit: problem.limit.unwrap() }
                );
            }
            (Err(error), Ok(_)) => prop_assert!(false, "{error}, yet the greedy search found one"),
        }
    }
}

/// An einsum of the reference file and opt_einsum's costs for it.
struct Reference {
    name: String,
    problem: Problem,
    greedy: f64,
    dp: Option<f64>,
}

fn reference_cases() -> Vec<Reference> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/einsum_path_reference.txt"
    );
    let text = std::fs::read_to_string(path).expect("the reference file is readable");
    let words = |s: &str| -> BTreeSet<String> { s.split_whitespace().map(str::to_owned).collect() };
    (text.lines())
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            assert_eq!(fields.len(), 7, "{line}");
            let sizes = (fields[3].split(','))
                .map(|s| {
                    let (label, size) = s.split_once('=').expect("a size is label=size");
                    (label.to_owned(), size.parse().unwrap())
                })
                .collect();
            Reference {
                name: fields[0].to_owned(),
                problem: Problem {
                    operands: fields[1].split(',').map(words).collect(),
                    result: words(fields[2]),
                    sizes,
                    limit: None,
                },
                greedy: fields[4].parse().unwrap(),
                dp: fields[6].parse().ok(),
            }
        })
        .collect()
}

/// The smallest, geometric mean and largest of `ratios`.
fn summary(ratios: &[f64]) -> String {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(0.0, f64::max);
    let mean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    format!(
        "{} cases, min {min:.3}, geometric mean {mean:.3}, max {max:.3}",
        ratios.len()
    )
}

#[test]
fn beyond_ten_operands_no_path_costs_more_than_opt_einsums_greedy_one() {
    let cases = reference_cases();
    assert!(cases.len() >= 70);
    let (mut to_greedy, mut to_dp) = (Vec::new(), Vec::new());
    for case in &cases {
        let n = case.problem.operands.len();
        assert!((11..=60).contains(&n), "{}: {n} operands", case.name);
        let path = case.problem.search(Search::Auto).unwrap();
        // The same path again: nothing depends on hashing's per-map seeds or on time.
        assert_eq!(
            case.problem.search(Search::Auto).as_ref(),
            Ok(&path),
            "{}",
            case.name
        );
        // Every step's cost and every partial sum is an integer below 2^53: exact in f64.
        assert_eq!(case.problem.replay(&path), Ok(path.flops), "{}", case.name);
        assert!(
            path.flops <= case.greedy,
            "{}: {} > {}",
            case.name,
            path.flops,
            case.greedy
        );
        println!(
            "{}: ours {} greedy {} dp {}",
            case.name,
            path.flops,
            case.greedy,
            case.dp.map_or("-".to_owned(), |dp| dp.to_string())
        );
        to_greedy.push(path.flops / case.greedy);
        to_dp.extend(case.dp.map(|dp| path.flops / dp));
    }
    println!("ours / opt_einsum greedy: {}", summary(&to_greedy));
    println!("ours / opt_einsum dp: {}", summary(&to_dp));
}

#[test]
fn matrix_chains_cost_no_more_than_their_cheapest_order_of_products() {
    let chains: Vec<Reference> = (reference_cases().into_iter())
        .filter(|case| case.name.starts_with("chain"))
        .collect();
    assert_eq!(chains.len(), 8);
    for case in chains {
        // Operand i holds c{i} and c{i+1}; multiplying runs i..k and k..j costs a multiply and an
        // add per point of c{i}, c{k}, c{j}.
        let n = case.problem.operands.len();
        let size = |i: usize| case.problem.sizes[&format!("c{i}")];
        let mut cheapest = vec![vec![0.0f64; n + 1]; n + 1];
        for length in 2..=n {
            for i in 0..=n - length {
                let j = i + length;
                cheapest[i][j] = (i + 1..j)
                    .map(|k| cheapest[i][k] + cheapest[k][j] + 2.0 * size(i) * size(k) * size(j))
                    .fold(f64::INFINITY, f64::min);
            }
        }
        // opt_einsum's `dp` multiplies adjacent runs only, as the classic order does; a path may
        // do better by joining matrices that are not adjacent when one has a dimension of 1.
        assert_eq!(case.dp, Some(cheapest[0][n]), "{}", case.name);
        let path = case.problem.search(Search::Auto).unwrap();
        assert!(path.flops <= cheapest[0][n], "{}", case.name);
        let has_one = (0..=n).any(|i| size(i) == 1.0);
        assert!(has_one || path.flops == cheapest[0][n], "{}", case.name);
    }
}
