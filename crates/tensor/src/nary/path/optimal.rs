//! The exhaustive search: dynamic programming over every subset of the operands, with label
//! sets as bitsets. A split is costed only when the cost of its parts plus the cells of its
//! result (a lower bound of its step) can beat the subset's best so far.

use super::{Interned, Merges, Path, PathError, bitset, points, positions};

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

/// The cheapest path, as positions.
pub(super) fn optimal(labels: &Interned, limit: f64) -> Result<Path, PathError> {
    let (merges, flops) = cheapest(labels, limit)?;
    Ok(positions(labels.operands.len(), &merges, flops))
}

/// Dynamic programming over subsets: for each subset, the cheapest way to contract it into one
/// operand, from the cheapest ways for its two parts. Of equally cheap splits, the first in the
/// order enumerated (the first part largest first). The path as merges, and its cost.
pub(super) fn cheapest(labels: &Interned, limit: f64) -> Result<(Merges, f64), PathError> {
    let n = labels.operands.len();
    if n <= 1 {
        return Ok((Vec::new(), 0.0));
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
    Ok((merges, cost[full]))
}
