//! Losses and reductions: sums and means over every cell, the hinge loss, cross-entropy against
//! probabilities or class ids (with PyTorch's `ignore_index`, `label_smoothing` and `reduction`,
//! and over padded sequences), the mean squared error.

use rcannl_tensor::{Axes, Tensor, TensorError, op};

/// Every cell of every kind reduced to one output axis of one cell.
const EVERY_CELL: &str = "...|...->... => 0";

/// The sum of every cell: one output axis of one cell.
#[track_caller]
pub fn sum(t: &Tensor) -> Tensor {
    t.graph().called("nn::loss::sum", || t.einsum1(EVERY_CELL))
}

/// The mean of every cell: one output axis of one cell. The count is the tensor's number of
/// cells, which shape inference gives ([`Tensor::mean_over`]).
#[track_caller]
pub fn mean(t: &Tensor) -> Tensor {
    t.graph()
        .called("nn::loss::mean", || t.mean_over(Axes::spec(EVERY_CELL)))
}

/// The mean hinge loss `max(0, 1 − y·f)` of scores `f` against labels `y` in {−1, 1}, over
/// every cell of their pointwise product.
#[track_caller]
pub fn hinge(scores: &Tensor, labels: &Tensor) -> Tensor {
    scores.graph().called("nn::loss::hinge", || {
        mean(&op! { relu(1 - pmul(labels, scores)) })
    })
}

/// The cross-entropy of logits against target probabilities (one-hot labels, say) over the last
/// output axis, per example (the last axis reduced to one position). The targets have exactly
/// the logits' shape: a distribution over the classes for every example. Class ids (one per
/// example, PyTorch's usual `target`) take [`cross_entropy_ids`]; ids given here are an error
/// saying so, never broadcast against the logits.
#[track_caller]
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Tensor {
    logits.graph().called("nn::loss::cross_entropy", || {
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
    })
}

/// The last output axis (the classes) reduced away.
const CLASSES_REDUCED: &str = "...|... -> ..., c => ...|... -> ...";

/// How the per-example losses of [`cross_entropy_ids_with`] are reduced: PyTorch's `reduction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    /// One loss per example, of the ids' shape, 0 at ignored ones (`"none"`).
    None,
    /// The mean over the examples not ignored (`"mean"`, PyTorch's default): one output axis of
    /// one cell. With every example ignored it is NaN (0 / 0), as PyTorch's.
    #[default]
    Mean,
    /// The sum over every example (`"sum"`): one output axis of one cell.
    Sum,
}

/// The keyword arguments of PyTorch's `F.cross_entropy` with class ids, built as
/// `IdsOptions::new().ignore_index(0).label_smoothing(0.1)`. By default no smoothing and the
/// mean, as PyTorch's, and no id ignored (PyTorch ignores `-100` unless told otherwise).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdsOptions {
    /// Examples whose id is this contribute nothing, to the loss or its gradient, and the mean
    /// counts the others only (PyTorch's `ignore_index`: a padding token, say). It need not be a
    /// class (`-100`, PyTorch's usual one, is fine).
    pub ignore_index: Option<i64>,
    /// `ε` in `0..=1`: the target is `1 − ε` on the example's class plus `ε / classes` on every
    /// class (PyTorch's `label_smoothing`).
    pub label_smoothing: f64,
    /// How the per-example losses are reduced.
    pub reduction: Reduction,
}

impl Default for IdsOptions {
    fn default() -> IdsOptions {
        IdsOptions {
            ignore_index: None,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

impl IdsOptions {
    /// No ignored id, no smoothing, the mean over the examples.
    pub fn new() -> IdsOptions {
        IdsOptions::default()
    }

    /// The same, leaving out the examples whose id is `id`.
    pub fn ignore_index(mut self, id: i64) -> IdsOptions {
        self.ignore_index = Some(id);
        self
    }

    /// The same with targets smoothed by `epsilon` (in `0..=1`).
    pub fn label_smoothing(mut self, epsilon: f64) -> IdsOptions {
        self.label_smoothing = epsilon;
        self
    }

    /// The same reduced as `reduction` says.
    pub fn reduction(mut self, reduction: Reduction) -> IdsOptions {
        self.reduction = reduction;
        self
    }
}

/// The cross-entropy of logits against class ids, per example: `logsumexp(logits) −
/// logits[id]` over the last output axis (the classes), PyTorch's `cross_entropy(logits,
/// target, reduction="none")`. The ids (numbers `0..classes`, in any precision that holds them
/// exactly) have exactly the logits' shape without the last output axis — `batch|->t` for
/// logits `batch|->t, classes` — and the result has theirs ([`mean`] of it is PyTorch's default
/// reduction). Probabilities given here (the logits' own shape) are an error naming
/// [`cross_entropy`]. The gradient with respect to the logits is `softmax − one_hot(id)`.
/// [`cross_entropy_ids_with`] takes PyTorch's other options.
#[track_caller]
pub fn cross_entropy_ids(logits: &Tensor, ids: &Tensor) -> Tensor {
    logits.graph().called("nn::loss::cross_entropy_ids", || {
        cross_entropy_ids_with(logits, ids, &IdsOptions::new().reduction(Reduction::None))
    })
}

/// The cross-entropy of logits against class ids with PyTorch's options, `F.cross_entropy(logits,
/// ids, ignore_index=k, label_smoothing=ε, reduction=…)` for logits whose classes are the last
/// output axis (a sequence's logits `batch|->t, classes` with ids `batch|->t` is PyTorch's
/// `F.cross_entropy(logits.transpose(1, 2), ids, …)`). Per example it is `logsumexp(logits) −
/// (1 − ε)·logits[id] − ε·mean(logits)`, and 0 where the id is the ignored one; the result is
/// reduced as `options.reduction` says ([`Reduction::Mean`] by default, over the examples not
/// ignored). The ids are as [`cross_entropy_ids`] takes them; a smoothing outside `0..=1` is an
/// error.
#[track_caller]
pub fn cross_entropy_ids_with(logits: &Tensor, ids: &Tensor, options: &IdsOptions) -> Tensor {
    logits
        .graph()
        .called("nn::loss::cross_entropy_ids_with", || {
            let graph = logits.graph();
            let epsilon = options.label_smoothing;
            if !(0.0..=1.0).contains(&epsilon) {
                return graph.failed_with(TensorError::new(format!(
                    "cross_entropy_ids_with(logits '{}', ids '{}'): label_smoothing is {epsilon}, \
                     but it must be between 0 and 1",
                    logits.label(),
                    ids.label()
                )));
            }
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
            let shifted =
                logits.sub_spec("...|...->..., c; ...|...->... => ...|...->..., c", &largest);
            let log_sum_exp = &shifted.exp().einsum1(CLASSES_REDUCED).log() + &largest;
            // Smoothed, the target is 1 − ε at the id and ε / classes at every class: the picked logit
            // weighs 1 − ε, and ε times the mean of the logits comes off. Numbers scale the logits, whose
            // classes axis a number's one axis broadcasts against (the ids' shape may have no output
            // axis at all), in their precision.
            let loss = if epsilon == 0.0 {
                &log_sum_exp - &hits.pmul(logits).einsum1(CLASSES_REDUCED)
            } else {
                let picked = hits
                    .pmul(&(logits * (1.0 - epsilon)))
                    .einsum1(CLASSES_REDUCED);
                let spread = (logits * epsilon).mean_over(Axes::spec(CLASSES_REDUCED));
                &(&log_sum_exp - &picked) - &spread
            };
            // Ids of fewer axes would have been broadcast: the loss has theirs exactly.
            if let Err(e) = graph.require_same_shape(ids, &loss) {
                return mix_up(e);
            }
            let Some(ignored) = options.ignore_index else {
                return match options.reduction {
                    Reduction::None => loss,
                    Reduction::Mean => mean(&loss),
                    Reduction::Sum => sum(&loss),
                };
            };
            // A choice, not a product with a mask: an ignored example's loss is 0 whatever its logits
            // hold (an infinite one times 0 would be NaN).
            let counted = ids.ne_spec(
                WITH_A_NUMBER,
                &graph.number_in(ignored as f64, ids.precision()),
            );
            let kept = Tensor::where_spec(
                CHOICE_WITH_A_NUMBER,
                &counted,
                &loss,
                &graph.number_in(0.0, loss.precision()),
            );
            match options.reduction {
                Reduction::None => kept,
                Reduction::Mean => &sum(&kept) / &sum(&counted),
                Reduction::Sum => sum(&kept),
            }
        })
}

/// A pointwise operation of a tensor and a number (whose one cell sits on one output axis): the
/// tensor's shape exactly, where the number's axis would give a tensor without output axes one.
const WITH_A_NUMBER: &str = "...|...->...; 0 => ...|...->...";

/// `where` of a condition, a tensor of its shape and a number, in the shape of both.
const CHOICE_WITH_A_NUMBER: &str = "...|...->...; ...|...->...; 0 => ...|...->...";

/// The mean cross-entropy of `logits` (`batch | -> t, classes`) against `targets` ids
/// (`batch | -> t`) over the positions where `mask` (`batch | -> t`) is 1: padded positions add
/// nothing and do not count ([`cross_entropy_ids`] per position, weighted by the mask, over the
/// mask's sum). One output axis of one cell. Where the padding has an id of its own,
/// [`cross_entropy_ids_with`] and [`IdsOptions::ignore_index`] say the same without a mask.
#[track_caller]
pub fn sequence_cross_entropy(logits: &Tensor, targets: &Tensor, mask: &Tensor) -> Tensor {
    logits
        .graph()
        .called("nn::loss::sequence_cross_entropy", || {
            &sum(&cross_entropy_ids(logits, targets).pmul(mask)) / &sum(mask)
        })
}

/// The mean squared error `Σ (prediction − target)² / n` over every cell of the difference (the
/// two broadcast to each other), `n` its number of cells, found by inference: one output axis
/// of one cell.
#[track_caller]
pub fn mse(prediction: &Tensor, target: &Tensor) -> Tensor {
    prediction.graph().called("nn::loss::mse", || {
        let difference = prediction - target;
        mean(&difference.pmul(&difference))
    })
}
