//! Losses and reductions: sums and means over every cell, the hinge loss, cross-entropy against
//! probabilities or class ids, the mean squared error.

use rcannl_tensor::{Axes, Tensor, TensorError, op};

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
/// output axis, per example (the last axis reduced to one position). The targets have exactly
/// the logits' shape: a distribution over the classes for every example. Class ids (one per
/// example, PyTorch's usual `target`) take [`cross_entropy_ids`]; ids given here are an error
/// saying so, never broadcast against the logits.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Tensor {
    let graph = logits.graph();
    if let Err(e) = graph.require_same_shape(targets, logits) {
        return graph.failed_with(TensorError::new(format!(
            "cross_entropy(logits '{}' of shape {}, targets '{}' of shape {}): the targets \
                 are probabilities over the classes and need exactly the logits' shape; for \
                 class ids (the logits' shape without the last output axis) use \
                 loss::cross_entropy_ids ({})",
            logits.label(),
            logits.shape(),
            targets.label(),
            targets.shape(),
            e.message
        )));
    }
    -crate::norm::sum_last(&targets.pmul(&crate::norm::log_softmax(logits)))
}

/// The last output axis (the classes) reduced away.
const CLASSES_REDUCED: &str = "...|... -> ..., c => ...|... -> ...";

/// The cross-entropy of logits against class ids, per example: `logsumexp(logits) −
/// logits[id]` over the last output axis (the classes), PyTorch's `cross_entropy(logits,
/// target, reduction="none")`. The ids (numbers `0..classes`, in any precision that holds them
/// exactly) have exactly the logits' shape without the last output axis — `batch|->t` for
/// logits `batch|->t, classes` — and the result has theirs ([`mean`] of it is PyTorch's default
/// reduction). Probabilities given here (the logits' own shape) are an error naming
/// [`cross_entropy`]. The gradient with respect to the logits is `softmax − one_hot(id)`.
pub fn cross_entropy_ids(logits: &Tensor, ids: &Tensor) -> Tensor {
    let graph = logits.graph();
    let mix_up = |e: TensorError| {
        graph.failed_with(TensorError::new(format!(
            "cross_entropy_ids(logits '{}' of shape {}, ids '{}' of shape {}): class ids \
                 need exactly the logits' shape without the last output axis (the classes); \
                 for target probabilities of the logits' shape use loss::cross_entropy ({})",
            logits.label(),
            logits.shape(),
            ids.label(),
            ids.shape(),
            e.message
        )))
    };
    // 1 at each example's class: its id minus every class number is zero exactly there. These
    // rows have the ids' axes and one more, the logits' exactly.
    let classes = graph.range_of_shape("classes").build();
    let hits = ids
        .outer_sum("...|...->...; c => ...|...->..., c", &(-&classes))
        .eq(&graph.number(0.0));
    if let Err(e) = graph.require_same_shape(&hits, logits) {
        return mix_up(e);
    }
    let largest = logits.einmax1(CLASSES_REDUCED).stop_gradient();
    let shifted = logits.sub_spec("...|...->..., c; ...|...->... => ...|...->..., c", &largest);
    let log_sum_exp = &shifted.exp().einsum1(CLASSES_REDUCED).log() + &largest;
    let picked = hits.pmul(logits).einsum1(CLASSES_REDUCED);
    let loss = &log_sum_exp - &picked;
    // Ids of fewer axes would have been broadcast: the loss has theirs exactly.
    if let Err(e) = graph.require_same_shape(ids, &loss) {
        return mix_up(e);
    }
    loss
}

/// The mean squared error `Σ (prediction − target)² / n` over every cell of the difference (the
/// two broadcast to each other), `n` its number of cells, found by inference: one output axis
/// of one cell.
pub fn mse(prediction: &Tensor, target: &Tensor) -> Tensor {
    let difference = prediction - target;
    mean(&difference.pmul(&difference))
}
