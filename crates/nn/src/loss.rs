//! Losses and reductions: means over every cell, the hinge loss.

use rcannl_tensor::{Tensor, op};

/// The sum of every cell: one output axis of one cell.
pub fn sum(t: &Tensor) -> Tensor {
    t.einsum1("...|...->... => 0")
}

/// The mean of every cell (the count comes from the closed shape, so it is a constant of the
/// graph once inference has run: `count` is given here to keep the graph free of host reads).
pub fn mean(t: &Tensor, count: usize) -> Tensor {
    let scale = 1.0 / count as f64;
    op! { sum(t) * scale }
}

/// The mean hinge loss `max(0, 1 − y·f)` of scores `f` against labels `y` in {−1, 1}.
pub fn hinge(scores: &Tensor, labels: &Tensor, count: usize) -> Tensor {
    mean(&op! { relu(1 - pmul(labels, scores)) }, count)
}

/// The cross-entropy of logits against target probabilities (one-hot labels, say) over the last
/// output axis, per example (the last axis reduced to one position).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Tensor {
    -crate::norm::sum_last(&targets.pmul(&crate::norm::log_softmax(logits)))
}
