//! Losses and reductions: sums and means over every cell, the hinge loss, cross-entropy, the
//! mean squared error.

use rcannl_tensor::{Axes, Tensor, op};

/// Every cell of every kind reduced to one output axis of one cell.
const EVERY_CELL: &str = "...|...->... => 0";

/// The sum of every cell: one output axis of one cell.
pub fn sum(t: &Tensor) -> Tensor {
    t.einsum1(EVERY_CELL)
}

/// The mean of every cell: one output axis of one cell. The count is the tensor's number of
/// cells, which shape inference gives ([`Tensor::mean_over`]).
pub fn mean(t: &Tensor) -> Tensor {
    t.mean_over(Axes::spec(EVERY_CELL))
}

/// The mean hinge loss `max(0, 1 − y·f)` of scores `f` against labels `y` in {−1, 1}, over
/// every cell of their pointwise product.
pub fn hinge(scores: &Tensor, labels: &Tensor) -> Tensor {
    mean(&op! { relu(1 - pmul(labels, scores)) })
}

/// The cross-entropy of logits against target probabilities (one-hot labels, say) over the last
/// output axis, per example (the last axis reduced to one position).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Tensor {
    -crate::norm::sum_last(&targets.pmul(&crate::norm::log_softmax(logits)))
}

/// The mean squared error `Σ (prediction − target)² / n` over every cell of the difference (the
/// two broadcast to each other), `n` its number of cells, found by inference: one output axis
/// of one cell.
pub fn mse(prediction: &Tensor, target: &Tensor) -> Tensor {
    let difference = prediction - target;
    mean(&difference.pmul(&difference))
}
