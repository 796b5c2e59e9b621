//! Losses and reductions: means over every cell, the hinge loss, the mean squared error.

use rcannl_tensor::{Tensor, TensorError, op};

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

/// The mean squared error `Σ (prediction − target)² / n` over every cell of the difference (the
/// two broadcast to each other), `n` its number of cells, found by inference: one output axis
/// of one cell.
pub fn mse(prediction: &Tensor, target: &Tensor) -> Tensor {
    let difference = prediction - target;
    mean_of_cells(&difference.pmul(&difference))
}

/// The mean of every cell, their number found by inference (a tensor of the graph, filled when
/// a routine runs).
pub(crate) fn mean_of_cells(t: &Tensor) -> Tensor {
    let total = sum(t);
    match cells_summed(&total) {
        Ok(count) => &total / &count,
        Err(e) => t.graph().failed_with(e),
    }
}

/// The number of cells [`sum`] added up into `total`: the product of its operand's rows, the
/// row variables `batch`, `input` and `output` of its spec.
fn cells_summed(total: &Tensor) -> Result<Tensor, TensorError> {
    let graph = total.graph();
    let mut count = graph.dim(&total.capture("batch")?);
    for row in ["input", "output"] {
        count = count.pmul(&graph.dim(&total.capture(row)?));
    }
    Ok(count)
}
