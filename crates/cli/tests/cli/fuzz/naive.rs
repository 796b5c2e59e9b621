//! The answers the fuzzer holds `rcannl einsum` to, computed the obvious way: every assignment of
//! values to the spec's labels, each operand read where its labels point, combined and
//! accumulated into the result cell the result's labels point to.
//!
//! A tensor's labels are its rows (batch, input, output); its cells lie in memory order (batch,
//! then output, then input axes; row-major), as the command reads and prints them.

use std::collections::BTreeMap;

/// A tensor's labels by row kind.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub batch: Vec<char>,
    pub input: Vec<char>,
    pub output: Vec<char>,
}

impl Rows {
    /// The labels in memory order.
    pub fn in_memory_order(&self) -> Vec<char> {
        let mut labels = self.batch.clone();
        labels.extend(&self.output);
        labels.extend(&self.input);
        labels
    }

    /// The sizes of each row, `[batch, input, output]`, as the command's JSON gives a shape.
    pub fn dims(&self, sizes: &BTreeMap<char, usize>) -> [Vec<usize>; 3] {
        let row = |labels: &[char]| labels.iter().map(|l| sizes[l]).collect();
        [row(&self.batch), row(&self.input), row(&self.output)]
    }
}

/// What each point of the product space computes and how the result accumulates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    /// The product of the operands, summed (`einsum`; `pointwise-mul` writes each cell once).
    SumOfProducts,
    /// The sum of the operands, the largest kept (`tropical`; `einmax` of one operand).
    MaxOfSums,
    /// The sum of the operands, summed (`outer-sum`; `pointwise-add` writes each cell once).
    Sums,
}

/// An operation over labelled operands.
#[derive(Debug, Clone)]
pub struct Problem {
    pub operands: Vec<(Rows, Vec<f64>)>,
    pub result: Rows,
    pub sizes: BTreeMap<char, usize>,
    pub semantics: Semantics,
}

/// Every assignment of values to `labels`, in odometer order.
fn assignments(labels: &[char], sizes: &BTreeMap<char, usize>) -> Vec<BTreeMap<char, usize>> {
    let mut all = vec![BTreeMap::new()];
    for &label in labels {
        all = all
            .into_iter()
            .flat_map(|partial| {
                (0..sizes[&label]).map(move |value| {
                    let mut next = partial.clone();
                    next.insert(label, value);
                    next
                })
            })
            .collect();
    }
    all
}

/// The flat memory position of the cell `labels` point to under `assignment`.
fn position(labels: &[char], sizes: &BTreeMap<char, usize>, at: &BTreeMap<char, usize>) -> usize {
    labels
        .iter()
        .fold(0, |flat, label| flat * sizes[label] + at[label])
}

impl Problem {
    /// The result's cells in memory order.
    pub fn values(&self) -> Vec<f64> {
        let labels: Vec<char> = self.sizes.keys().copied().collect();
        let result_labels = self.result.in_memory_order();
        let cells: usize = result_labels.iter().map(|l| self.sizes[l]).product();
        let neutral = match self.semantics {
            Semantics::SumOfProducts | Semantics::Sums => 0.0,
            Semantics::MaxOfSums => f64::NEG_INFINITY,
        };
        let mut values = vec![neutral; cells];
        for at in assignments(&labels, &self.sizes) {
            let read = self
                .operands
                .iter()
                .map(|(rows, values)| values[position(&rows.in_memory_order(), &self.sizes, &at)]);
            let cell = &mut values[position(&result_labels, &self.sizes, &at)];
            match self.semantics {
                Semantics::SumOfProducts => *cell += read.product::<f64>(),
                Semantics::MaxOfSums => *cell = maximum(*cell, read.sum::<f64>()),
                Semantics::Sums => *cell += read.sum::<f64>(),
            }
        }
        values
    }

    /// Per operand, the gradient of the sum of the result's cells (a sum of products or of sums
    /// only: a maximum's gradient depends on how ties are split).
    pub fn grads(&self) -> Vec<Vec<f64>> {
        let labels: Vec<char> = self.sizes.keys().copied().collect();
        let mut grads: Vec<Vec<f64>> = self
            .operands
            .iter()
            .map(|(_, values)| vec![0.0; values.len()])
            .collect();
        for at in assignments(&labels, &self.sizes) {
            let positions: Vec<usize> = self
                .operands
                .iter()
                .map(|(rows, _)| position(&rows.in_memory_order(), &self.sizes, &at))
                .collect();
            for (k, grad) in grads.iter_mut().enumerate() {
                grad[positions[k]] += match self.semantics {
                    Semantics::Sums => 1.0,
                    _ => (self.operands.iter().zip(&positions))
                        .enumerate()
                        .filter(|(j, _)| *j != k)
                        .map(|(_, ((_, values), &p))| values[p])
                        .product::<f64>(),
                };
            }
        }
        grads
    }
}

/// numpy's maximum: NaN on either side is the result.
fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
