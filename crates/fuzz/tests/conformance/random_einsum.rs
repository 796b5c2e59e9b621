//! Random n-ary einsums drawn from a seeded generator: expressions of 2 to 6 operands with
//! repeated labels, labels summed within one operand and labels only the result keeps; and
//! operands of numpy-notation expressions whose `...` broadcast.

use std::collections::HashMap;

/// A small deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random expression: operand label strings and the result's, with a size per label.
pub fn expression(rng: &mut Rng) -> (Vec<String>, String, HashMap<char, usize>) {
    let pool: Vec<char> = "abcdefg".chars().collect();
    let n = 2 + rng.below(5);
    let mut operands = Vec::new();
    for _ in 0..n {
        let rank = 1 + rng.below(3);
        let labels: String = (0..rank).map(|_| pool[rng.below(pool.len())]).collect();
        operands.push(labels);
    }
    let used: Vec<char> = {
        let mut all: Vec<char> = operands.iter().flat_map(|o| o.chars()).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let result: String = used.iter().filter(|_| rng.below(3) == 0).collect();
    let sizes = used.iter().map(|&c| (c, 2 + rng.below(2))).collect();
    (operands, result, sizes)
}

/// An operand (or result) of a random broadcasting expression: its labels, where `...` stands
/// among them (if anywhere), and the axes `...` stands for.
pub struct Broadcasting {
    pub labels: Vec<char>,
    pub ellipsis: Option<usize>,
    pub dots: Vec<usize>,
}

impl Broadcasting {
    pub fn numpy(&self) -> String {
        let mut text: String = self.labels.iter().collect();
        if let Some(at) = self.ellipsis {
            text.insert_str(at, "...");
        }
        text
    }

    /// The operand's axes: its labels' sizes with the axes of `...` where it stands.
    pub fn axes(&self, sizes: &HashMap<char, usize>) -> Vec<usize> {
        let mut axes: Vec<usize> = self.labels.iter().map(|c| sizes[c]).collect();
        if let Some(at) = self.ellipsis {
            axes.splice(at..at, self.dots.iter().copied());
        }
        axes
    }

    /// The offset of the cell at label values `at` and broadcast position `b` (numpy's rule: the
    /// axes of `...` align at the right; an axis of 1 reads its only cell).
    pub fn offset(
        &self,
        sizes: &HashMap<char, usize>,
        at: &HashMap<char, usize>,
        b: &[usize],
    ) -> usize {
        let mut index: Vec<usize> = self.labels.iter().map(|c| at[c]).collect();
        if let Some(e) = self.ellipsis {
            let skip = b.len() - self.dots.len();
            let dots = self
                .dots
                .iter()
                .zip(&b[skip..])
                .map(|(&d, &i)| if d == 1 { 0 } else { i });
            index.splice(e..e, dots);
        }
        index
            .iter()
            .zip(self.axes(sizes))
            .fold(0, |acc, (i, n)| acc * n + i)
    }
}

/// The operands of a random broadcasting expression: up to two broadcast axes, each operand
/// with up to two labels and, mostly, a `...` standing for some of the broadcast axes from the
/// right (now and then as 1).
pub fn broadcasting_operands(rng: &mut Rng) -> Vec<Broadcasting> {
    let pool: Vec<char> = "abcde".chars().collect();
    let rank = rng.below(3);
    let batch: Vec<usize> = (0..rank).map(|_| 2 + rng.below(2)).collect();
    let n = 2 + rng.below(3);
    let mut operands: Vec<Broadcasting> = (0..n)
        .map(|_| {
            let labels: Vec<char> = (0..rng.below(3)).map(|_| pool[rng.below(5)]).collect();
            let ellipsis = (rng.below(3) > 0).then(|| rng.below(labels.len() + 1));
            let count = if ellipsis.is_some() {
                rng.below(rank + 1)
            } else {
                0
            };
            let dots = batch[rank - count..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect();
            Broadcasting {
                labels,
                ellipsis,
                dots,
            }
        })
        .collect();
    if operands
        .iter()
        .all(|o| o.labels.is_empty() && o.ellipsis.is_none())
    {
        operands[0].labels.push('a');
    }
    operands
}
