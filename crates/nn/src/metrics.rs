//! Metrics of predictions, computed in the graph and taking no gradient: the index of the
//! largest score over the last output axis ([`argmax`]), and the fraction of correct
//! predictions for one-hot labels ([`accuracy`]) and for ±1 labels with one score per example
//! ([`binary_accuracy`]).

use rcannl_tensor::Tensor;

use crate::loss::mean;

/// Reduces the last output axis to one position, keeping every other axis.
const LAST: &str = "...|... -> ..., c => ...|... -> ..., 0";
/// Each position of the last output axis times the position's index.
const TIMES_POSITION: &str = "...|... -> ..., c; c => ...|... -> ..., c";

/// The position of the largest value along the last output axis, as a number (0, 1, …), the
/// first one where several are equal; the axis itself is removed (`b|->k` gives `b|->`, `b|->t,
/// k` gives `b|->t`). No gradient flows through it.
#[track_caller]
pub fn argmax(scores: &Tensor) -> Tensor {
    scores.graph().called("nn::metrics::argmax", || {
        let graph = scores.graph();
        let is_max = scores.eq(&scores.einmax1(LAST));
        let positions = graph.range_of_shape("argmax positions").build();
        let at = is_max.einsum(TIMES_POSITION, &positions);
        let size = match at.capture("c") {
            Ok(c) => graph.dim(&c),
            Err(e) => return graph.failed_with(e),
        };
        // n − position where the maximum is, 0 elsewhere: its maximum marks the first position.
        let first = (&is_max.pmul(&size) - &at).einmax1(LAST);
        (&size - &first).squeeze(rcannl_tensor::Axis::output(-1))
    })
}

/// The fraction of examples whose largest score is where their one-hot label's 1 is: `scores`
/// and `labels` have the classes on their last output axis (`b|->k`; more output axes, `b|->t,
/// k`, count every position as an example). Ties go to the first class, as in [`argmax`].
#[track_caller]
pub fn accuracy(scores: &Tensor, labels: &Tensor) -> Tensor {
    scores.graph().called("nn::metrics::accuracy", || {
        mean(&argmax(scores).eq(&argmax(labels)))
    })
}

/// The fraction of examples classified right by the sign of their one score, for labels −1 and
/// 1 (`b|->1` both, say): a score counts as right when `score · label > 0`, so a score of
/// exactly 0 is wrong either way.
#[track_caller]
pub fn binary_accuracy(scores: &Tensor, labels: &Tensor) -> Tensor {
    scores.graph().called("nn::metrics::binary_accuracy", || {
        let zero = scores.graph().number(0.0);
        mean(&zero.lt(&scores.pmul(labels)))
    })
}
