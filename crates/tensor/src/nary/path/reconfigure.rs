//! Local improvement of a path seen as a tree of steps: around each step, costliest first, the
//! steps between it and up to [`LEAVES`] of the results (or operands) below it are replaced by
//! the cheapest way to contract those into its result, by the exhaustive search, when that is
//! cheaper. A step's cost depends only on the operands below it (the labels it keeps are those
//! the result or an operand outside has), so a replacement lowers the path's cost by what it
//! saves and changes no other step. Rounds repeat until one improves nothing or the searches
//! have weighed [`BUDGET`] splits (3ᵏ for k results), so very long paths are improved around
//! their costliest steps only.

use super::optimal::cheapest;
use super::{Follower, Interned, Merges};

/// The most results a replaced part of the tree joins.
const LEAVES: usize = 8;

/// The most splits the exhaustive searches weigh, all rounds together.
pub(super) const BUDGET: usize = 1 << 22;

/// A step of the tree, or an operand (no children).
struct Node {
    children: Option<(usize, usize)>,
    /// The labels its result keeps.
    kept: Vec<u32>,
    /// Its FLOPs.
    cost: f64,
}

/// `merges` improved, and the splits weighed.
pub(super) fn reconfigure(
    labels: &Interned,
    merges: &[(usize, usize)],
    limit: f64,
) -> (Merges, usize) {
    let n = labels.operands.len();
    let mut nodes: Vec<Node> = (labels.operands.iter())
        .map(|set| Node {
            children: None,
            kept: set.clone(),
            cost: 0.0,
        })
        .collect();
    let mut follower = Follower::new(labels);
    for &(a, b) in merges {
        let (_, cost) = follower.step(a, b);
        let kept = follower.sets.last().cloned().unwrap_or_default();
        nodes.push(Node {
            children: Some((a, b)),
            kept,
            cost,
        });
    }
    let mut work = 0;
    'rounds: loop {
        let mut order: Vec<usize> = (n..nodes.len()).collect();
        order.sort_by(|&x, &y| nodes[y].cost.total_cmp(&nodes[x].cost).then(x.cmp(&y)));
        let mut improved = false;
        for step in order {
            if work >= BUDGET {
                break 'rounds;
            }
            improved |= improve(labels, &mut nodes, step, limit, &mut work);
        }
        if !improved {
            break;
        }
    }
    (unfold(&nodes, n), work)
}

/// Replaces the steps between `top` and the results below it by the cheapest way to contract
/// those, when cheaper; whether it did.
fn improve(
    labels: &Interned,
    nodes: &mut [Node],
    top: usize,
    limit: f64,
    work: &mut usize,
) -> bool {
    let Some((a, b)) = nodes[top].children else {
        return false;
    };
    // Open up the costliest step below until there are enough results.
    let mut frontier = vec![a, b];
    let mut inner = Vec::new();
    while frontier.len() < LEAVES {
        let costliest = (frontier.iter().enumerate())
            .filter(|&(_, &node)| nodes[node].children.is_some())
            .max_by(|&(_, &x), &(_, &y)| nodes[x].cost.total_cmp(&nodes[y].cost).then(y.cmp(&x)));
        let Some((i, &node)) = costliest else {
            break;
        };
        let (c, d) = nodes[node].children.expect("a step");
        frontier[i] = c;
        frontier.push(d);
        inner.push(node);
    }
    if frontier.len() < 3 {
        return false;
    }
    *work += 3usize.pow(frontier.len() as u32);
    let now = nodes[top].cost + inner.iter().map(|&node| nodes[node].cost).sum::<f64>();
    // The part as a problem of its own: the results' labels, renumbered in the same order, to
    // the labels `top` keeps.
    let mut ids: Vec<u32> = (frontier.iter())
        .flat_map(|&node| nodes[node].kept.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let local = |l: &u32| ids.binary_search(l).expect("a label of the part") as u32;
    let part = Interned {
        operands: (frontier.iter())
            .map(|&node| nodes[node].kept.iter().map(local).collect())
            .collect(),
        in_result: ids
            .iter()
            .map(|l| nodes[top].kept.binary_search(l).is_ok())
            .collect(),
        sizes: ids.iter().map(|&l| labels.sizes[l as usize]).collect(),
    };
    let Ok((merges, cost)) = cheapest(&part, limit) else {
        return false;
    };
    // Rounding aside: a saving below a part in 10¹² is none.
    if cost >= now * (1.0 - 1e-12) {
        return false;
    }
    let mut follower = Follower::new(&part);
    let mut made = frontier;
    for (m, &(x, y)) in merges.iter().enumerate() {
        let (_, cost) = follower.step(x, y);
        let node = if m + 1 == merges.len() { top } else { inner[m] };
        let kept = follower.sets.last().expect("just made");
        nodes[node] = Node {
            children: Some((made[x], made[y])),
            kept: kept.iter().map(|&l| ids[l as usize]).collect(),
            cost,
        };
        made.push(node);
    }
    true
}

/// The tree's steps as merges of creation ids, each step after those below it.
fn unfold(nodes: &[Node], operands: usize) -> Merges {
    let mut merges = Vec::with_capacity(nodes.len() - operands);
    if nodes.len() == operands {
        return merges;
    }
    let mut ids = vec![usize::MAX; nodes.len()];
    ids[..operands].copy_from_slice(&(0..operands).collect::<Vec<_>>());
    // Depth-first without recursion: a path may be thousands of steps deep.
    let mut stack = vec![nodes.len() - 1];
    while let Some(&node) = stack.last() {
        let (a, b) = nodes[node].children.expect("operands are numbered already");
        match (ids[a], ids[b]) {
            (usize::MAX, _) => stack.push(a),
            (_, usize::MAX) => stack.push(b),
            (x, y) => {
                merges.push((x, y));
                ids[node] = operands + merges.len() - 1;
                stack.pop();
            }
        }
    }
    merges
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::nary::path::{reference, removal::removal_greedy, replay};

    fn chain(n: usize, size: impl Fn(usize) -> f64) -> Interned {
        let name = |i: usize| format!("c{i:05}");
        let operands: Vec<BTreeSet<String>> =
            (0..n).map(|i| [name(i), name(i + 1)].into()).collect();
        let ends: BTreeSet<String> = [name(0), name(n)].into();
        let sizes: HashMap<String, f64> = (0..=n).map(|i| (name(i), size(i))).collect();
        Interned::new(&operands, &ends, &sizes)
    }

    #[test]
    fn a_path_of_up_to_eight_operands_becomes_optimal() {
        // Matrices multiplied left to right, whatever their sizes: the whole tree is one part.
        for seed in 0..20u64 {
            let labels = chain(8, |i| ((i as u64 * 7919 + seed * 104_729) % 97 + 2) as f64);
            let left_to_right: Merges = (0..7)
                .map(|i| (if i == 0 { 0 } else { 7 + i }, i + 1))
                .collect();
            let (improved, _) = reconfigure(&labels, &left_to_right, f64::INFINITY);
            let flops = replay(&labels, &improved, f64::INFINITY).unwrap();
            assert_eq!(
                flops,
                cheapest(&labels, f64::INFINITY).unwrap().1,
                "seed {seed}"
            );
        }
    }

    #[test]
    fn improving_a_path_never_makes_it_costlier() {
        for case in reference::cases() {
            let labels = Interned::new(&case.operands, &case.result, &case.sizes);
            let merges = removal_greedy(&labels).0.unwrap();
            let (improved, _) = reconfigure(&labels, &merges, f64::INFINITY);
            assert_eq!(improved.len(), case.operands.len() - 1);
            let flops = replay(&labels, &improved, f64::INFINITY).unwrap();
            assert!(flops <= case.greedy_flops, "{}", case.name);
        }
    }

    #[test]
    fn a_long_path_is_improved_within_the_budget() {
        // 20,000 matrices multiplied left to right, the first with many rows: a tree 20,000
        // steps deep, each step a product with those rows.
        let n = 20_000;
        let labels = chain(n, |i| if i == 0 { 1000.0 } else { (i % 13 + 2) as f64 });
        let left_to_right: Merges = (0..n - 1)
            .map(|i| (if i == 0 { 0 } else { n + i - 1 }, i + 1))
            .collect();
        let before = replay(&labels, &left_to_right, f64::INFINITY).unwrap();
        let (improved, work) = reconfigure(&labels, &left_to_right, f64::INFINITY);
        assert!(work < BUDGET + 3usize.pow(LEAVES as u32));
        let after = replay(&labels, &improved, f64::INFINITY).unwrap();
        assert!(after < before, "{after} against {before}");
    }
}
