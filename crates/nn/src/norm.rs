//! Reductions over the last output axis, softmax over any axis, and layer normalization (by the
//! true mean and variance: the axis sizes come from inference, as a tensor) over the last output
//! axis or the last few; batch normalization with its train and eval [`Mode`]s and its running
//! statistics' updates (exponential or cumulative averages), group normalization and RMS
//! normalization (over the last output axis or the last few).

use rcannl_ir::Precision;
use rcannl_tensor::{Formula, Graph, Init, Tensor, TensorError, Update};

/// Reduces the last output axis to one position, keeping every other axis.
const LAST: &str = "...|... -> ..., c => ...|... -> ..., 0";

/// The sum over the last output axis (kept, of size 1).
#[track_caller]
pub fn sum_last(x: &Tensor) -> Tensor {
    x.graph().called("nn::norm::sum_last", || x.einsum1(LAST))
}

/// The largest value over the last output axis (kept, of size 1).
#[track_caller]
pub fn max_last(x: &Tensor) -> Tensor {
    x.graph().called("nn::norm::max_last", || x.einmax1(LAST))
}

/// The mean over the last output axis: its size is captured from inference.
#[track_caller]
pub fn mean_last(x: &Tensor) -> Tensor {
    x.graph()
        .called("nn::norm::mean_last", || mean_trailing(x, 1))
}

/// The trailing output axes `c0, c1, …` (`axes` of them) a spec names.
fn trailing_axis_names(axes: usize) -> String {
    (0..axes)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mean over the last `axes` output axes (kept, each of size 1): their sizes are captured
/// from inference. No axis is an error.
#[track_caller]
pub fn mean_trailing(x: &Tensor, axes: usize) -> Tensor {
    x.graph().called("nn::norm::mean_trailing", || {
        if axes == 0 {
            return x.graph().failed_with(TensorError::new(
                "a mean over 0 trailing axes: give at least one",
            ));
        }
        let names = trailing_axis_names(axes);
        let kept = vec!["0"; axes].join(", ");
        let sum = x.einsum1(&format!(
            "...|... -> ..., {names} => ...|... -> ..., {kept}"
        ));
        let captured: Vec<String> = (0..axes).map(|i| format!("c{i}")).collect();
        let captured: Vec<&str> = captured.iter().map(String::as_str).collect();
        match count_of(&sum, &captured) {
            Ok(count) => &sum / &count,
            Err(e) => x.graph().failed_with(e),
        }
    })
}

/// The spec combining `x` with a tensor whose axes are `x`'s last `axes` output axes, at every
/// position of the other axes (a gain, a bias).
fn per_position_spec(axes: usize) -> String {
    let names = trailing_axis_names(axes);
    format!("...|... -> ..., {names}; {names} => ...|... -> ..., {names}")
}

/// Softmax over the last output axis (shifted by its maximum, which takes no gradient).
#[track_caller]
pub fn softmax(x: &Tensor) -> Tensor {
    x.graph().called("nn::norm::softmax", || {
        let shifted = x - &max_last(x).stop_gradient();
        let e = shifted.exp();
        &e / &sum_last(&e)
    })
}

/// `log(softmax(x))` over the last output axis, computed without the softmax.
#[track_caller]
pub fn log_softmax(x: &Tensor) -> Tensor {
    x.graph().called("nn::norm::log_softmax", || {
        let shifted = x - &max_last(x).stop_gradient();
        &shifted - &sum_last(&shifted.exp()).log()
    })
}

/// Softmax over the axes a reduction spec reduces: `spec` maps `x` to the positions its
/// normalizing sums are kept at (as [`sum_last`]'s spec does for the last output axis, e.g.
/// `"...|... -> c, t => ...|... -> 0, t"` for the first of two output axes), and the result is
/// broadcast back over them. Shifted by the maximum over the same axes, which takes no gradient.
#[track_caller]
pub fn softmax_with(x: &Tensor, spec: &str) -> Tensor {
    x.graph().called("nn::norm::softmax_with", || {
        let shifted = x - &x.einmax1(spec).stop_gradient();
        let e = shifted.exp();
        &e / &e.einsum1(spec)
    })
}

/// `log(softmax_with(x, spec))`, computed without the softmax.
#[track_caller]
pub fn log_softmax_with(x: &Tensor, spec: &str) -> Tensor {
    x.graph().called("nn::norm::log_softmax_with", || {
        let shifted = x - &x.einmax1(spec).stop_gradient();
        &shifted - &shifted.exp().einsum1(spec).log()
    })
}

/// How far from either end of the output axes [`output_axis_spec`] reaches: far beyond any
/// model's rank, and it keeps the spec (which names every axis on the near side) small.
pub const MAX_AXIS_REACH: usize = 64;

/// The reduction spec of one output axis, counted as Python counts: `0` is the first, `-1` the
/// last (the form [`softmax_with`] takes). The axes between it and the end it is counted from
/// are named, so a tensor it applies to needs at least that many output axes more. An axis
/// farther than [`MAX_AXIS_REACH`] from its end is an error.
pub fn output_axis_spec(axis: isize) -> Result<String, TensorError> {
    let reach = if axis >= 0 {
        axis.unsigned_abs()
    } else {
        axis.unsigned_abs() - 1
    };
    if reach > MAX_AXIS_REACH {
        return Err(TensorError::new(format!(
            "softmax over output axis {axis}: an axis at most {MAX_AXIS_REACH} axes from                  either end is supported"
        )));
    }
    let names = |n: usize| -> Vec<String> { (0..n).map(|i| format!("k{i}")).collect() };
    let (before, after) = if axis >= 0 {
        (names(axis.unsigned_abs()), vec!["...".to_string()])
    } else {
        (vec!["...".to_string()], names(axis.unsigned_abs() - 1))
    };
    let row = |reduced: &str| {
        before
            .iter()
            .map(String::as_str)
            .chain([reduced])
            .chain(after.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Ok(format!(
        "...|... -> {} => ...|... -> {}",
        row("c"),
        row("0")
    ))
}

/// Softmax over one output axis, counted as Python counts (`-1` is the last).
#[track_caller]
pub fn softmax_axis(x: &Tensor, axis: isize) -> Tensor {
    x.graph()
        .called("nn::norm::softmax_axis", || match output_axis_spec(axis) {
            Ok(spec) => softmax_with(x, &spec),
            Err(e) => x.graph().failed_with(e),
        })
}

/// Log-softmax over one output axis, counted as Python counts (`-1` is the last).
#[track_caller]
pub fn log_softmax_axis(x: &Tensor, axis: isize) -> Tensor {
    x.graph().called("nn::norm::log_softmax_axis", || {
        match output_axis_spec(axis) {
            Ok(spec) => log_softmax_with(x, &spec),
            Err(e) => x.graph().failed_with(e),
        }
    })
}

/// Layer normalization over the last output axis (or, with [`LayerNorm::apply_trailing`], the
/// last few: PyTorch's `normalized_shape` of several dimensions): `(x − mean)/√(var + ε)` by
/// the biased variance, scaled and shifted by a learned gain (starting at 1) and bias (at 0) per
/// position of the normalized axes.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    /// The scale per position of the normalized axis (`-> c`, size from use), starting at 1.
    pub gain: Tensor,
    /// The shift per position of the normalized axis (`-> c`, size from use), starting at 0.
    pub bias: Tensor,
    /// Added to the variance before the square root, so that a constant input does not divide by 0
    /// (1e-5 by default).
    pub epsilon: f64,
}

impl LayerNorm {
    /// A layer norm of `label`: the parameters `<label>.gain` (starting at 1) and
    /// `<label>.bias` (at 0), sized by use, and `epsilon` 1e-5.
    pub fn new(graph: &Graph, label: &str) -> LayerNorm {
        LayerNorm {
            gain: graph
                .param(&format!("{label}.gain"))
                .init(Init::Constant(1.0))
                .build(),
            bias: graph
                .param(&format!("{label}.bias"))
                .init(Init::Constant(0.0))
                .build(),
            epsilon: 1e-5,
        }
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        precision: impl Into<Option<Precision>>,
    ) -> LayerNorm {
        let precision = precision.into();
        LayerNorm {
            gain: graph
                .param(&format!("{label}.gain"))
                .precision(precision)
                .init(Init::Constant(1.0))
                .build(),
            bias: graph
                .param(&format!("{label}.bias"))
                .precision(precision)
                .init(Init::Constant(0.0))
                .build(),
            epsilon: 1e-5,
        }
    }

    /// `x` (`… | … -> …, c`) normalized over its last output axis, then scaled by the gain and
    /// shifted by the bias per position of that axis.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph()
            .called("nn::norm::LayerNorm::apply", || self.apply_trailing(x, 1))
    }

    /// `x` normalized over its last `axes` output axes together (`2` for `… -> …, h, w` is
    /// PyTorch's `LayerNorm((h, w))`), then scaled by the gain and shifted by the bias, which
    /// have those axes. No axis is an error.
    #[track_caller]
    pub fn apply_trailing(&self, x: &Tensor, axes: usize) -> Tensor {
        x.graph().called("nn::norm::LayerNorm::apply_trailing", || {
            let centered = x - &mean_trailing(x, axes);
            let variance = mean_trailing(&centered.pmul(&centered), axes);
            let normalized = &centered / &(&variance + self.epsilon).sqrt();
            let per_position = per_position_spec(axes);
            normalized
                .einsum(&per_position, &self.gain)
                .outer_sum(&per_position, &self.bias)
        })
    }

    /// The gain and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gain.clone(), self.bias.clone()]
    }
}

/// Whether a block with batch normalization is built for training (normalizing by the batch's
/// statistics, the steps computing it updating the running statistics) or for evaluation
/// (normalizing by the running statistics). Each mode builds its own graph over the same
/// parameters, so the choice is made once per compiled routine, not read per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Batch statistics; the training steps computing it update the running statistics.
    Train,
    /// Running statistics, as constants.
    Eval,
}

/// Every axis but the last output axis summed away: per-channel sums over the batch and, for
/// images, the positions.
const PER_CHANNEL_SUM: &str = "...|...->..., c => |->c";

/// A per-channel tensor (`|->c`) combined with `x` at every position of its last output axis.
const PER_CHANNEL: &str = "...|...->..., c; c => ...|...->..., c";

/// An error naming `owner`, `setting` and `value` unless `value` is finite and `allowed`
/// (which `describe`s).
fn check_setting(
    owner: &str,
    setting: &str,
    value: f64,
    allowed: impl Fn(f64) -> bool,
    describe: &str,
) -> Result<(), TensorError> {
    if value.is_finite() && allowed(value) {
        return Ok(());
    }
    Err(TensorError::new(format!(
        "{owner}: {setting} is {value}: it must be {describe}"
    )))
}

/// Checks a normalization's `epsilon`: a finite number above 0.
fn check_epsilon(owner: &str, epsilon: f64) -> Result<(), TensorError> {
    check_setting(
        owner,
        "epsilon",
        epsilon,
        |e| e > 0.0,
        "a finite number above 0",
    )
}

/// A learned per-channel parameter of `channels` cells starting at `value`.
fn per_channel_param(
    graph: &Graph,
    label: &str,
    channels: usize,
    value: f64,
    precision: Option<Precision>,
) -> Tensor {
    graph
        .param(label)
        .shape(&format!("|->{channels}"))
        .precision(precision)
        .init(Init::Constant(value))
        .build()
}

/// Batch normalization over the last output axis (the channels), PyTorch's `BatchNorm1d` for
/// `batch | -> features` and `BatchNorm2d` for images `batch | -> h, w, c`: statistics per
/// channel over every other axis.
///
/// In [`Mode::Train`], `(x − mean)/√(var + ε)` by the batch's mean and biased variance, which
/// the gradients flow through; every training step whose loss depends on such an application
/// (a routine of `Context::backprop` or `Context::train_step`, which the optimizers' steps are)
/// also moves the running statistics towards the batch's, as PyTorch's train-mode forward does:
/// `running = (1 − momentum)·running + momentum·batch_stat`, with the variance unbiased
/// (`var·n/(n − 1)` over `n` values per channel; with one value per channel there is no
/// unbiased estimate, and the running variance becomes NaN, where PyTorch refuses the batch).
/// Nothing is handed to the optimizer, and an application no step computes (a diagnostic pass
/// built in train mode, say) never moves them. In [`Mode::Eval`], the running statistics take
/// the batch's place and are constants. Either way the result is scaled by a learned gain
/// (starting at 1) and shifted by a learned bias (at 0) per channel. PyTorch's conventions:
/// momentum 0.1, ε = 1e-5, running mean 0 and running variance 1 at the start. The running
/// statistics are the model's state (`Graph::state_tensors`), which checkpoints save with its
/// parameters.
///
/// Built by [`BatchNorm::with_cumulative_average`], the running statistics are instead the plain
/// average of every training batch's statistics so far (PyTorch's `momentum=None`): the `k`-th
/// step moves them by `1/k` of the way, counting the steps in the state tensor
/// `<label>.num_batches_tracked`, and `momentum` is not read.
#[derive(Debug, Clone)]
pub struct BatchNorm {
    /// The per-channel gain (a parameter, `|->channels`).
    pub gain: Tensor,
    /// The per-channel bias (a parameter, `|->channels`).
    pub bias: Tensor,
    /// The running mean (data, not a parameter: updated by the training steps).
    pub running_mean: Tensor,
    /// The running unbiased variance (data, updated by the training steps).
    pub running_var: Tensor,
    /// How far one step moves the running statistics, in `[0, 1]` (default 0.1), as it is when
    /// the block is applied in train mode.
    pub momentum: f64,
    /// Added to the variance under the root, above 0 (default 1e-5).
    pub epsilon: f64,
    label: String,
    /// For a cumulative average, the number of steps that updated the running statistics (a
    /// one-cell state tensor); `None` for an exponential one by `momentum`.
    batches_tracked: Option<Tensor>,
}

impl BatchNorm {
    /// Batch normalization of `channels` channels, its parameters and statistics of the precision
    /// inferred from use.
    pub fn new(graph: &Graph, label: &str, channels: usize) -> BatchNorm {
        BatchNorm::with_precision(graph, label, channels, None)
    }

    /// The same with parameters and running statistics of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        channels: usize,
        precision: impl Into<Option<Precision>>,
    ) -> BatchNorm {
        let precision = precision.into();
        BatchNorm::build(graph, label, channels, precision, false)
    }

    /// Batch normalization whose running statistics are the cumulative average of every
    /// training batch's (PyTorch's `momentum=None`), with parameters and statistics of
    /// `precision`; the count of batches is f64 state.
    pub fn with_cumulative_average(
        graph: &Graph,
        label: &str,
        channels: usize,
        precision: impl Into<Option<Precision>>,
    ) -> BatchNorm {
        let precision = precision.into();
        BatchNorm::build(graph, label, channels, precision, true)
    }

    /// The block of [`BatchNorm::with_precision`], or of
    /// [`BatchNorm::with_cumulative_average`] if `cumulative`.
    fn build(
        graph: &Graph,
        label: &str,
        channels: usize,
        precision: Option<Precision>,
        cumulative: bool,
    ) -> BatchNorm {
        let statistic = |name: &str, value: f64| {
            graph
                .data(&format!("{label}.{name}"))
                .shape(&format!("|->{channels}"))
                .precision(precision)
                .values(vec![value; channels])
                .build()
        };
        let (running_mean, running_var) = (
            statistic("running_mean", 0.0),
            statistic("running_var", 1.0),
        );
        // State from the start, whatever mode the block is applied in: a graph that only
        // evaluates still loads it from a checkpoint.
        graph.register_state(&running_mean);
        graph.register_state(&running_var);
        let batches_tracked = cumulative.then(|| {
            let count = graph
                .data(&format!("{label}.num_batches_tracked"))
                .shape("")
                .precision(Precision::F64)
                .values(vec![0.0])
                .build();
            graph.register_state(&count);
            count
        });
        BatchNorm {
            gain: per_channel_param(graph, &format!("{label}.gain"), channels, 1.0, precision),
            bias: per_channel_param(graph, &format!("{label}.bias"), channels, 0.0, precision),
            running_mean,
            running_var,
            momentum: 0.1,
            epsilon: 1e-5,
            label: label.to_owned(),
            batches_tracked,
        }
    }

    /// `x` normalized per channel, by the batch's statistics in [`Mode::Train`] (the training
    /// steps computing the result moving the running statistics towards them) or by the running
    /// statistics in [`Mode::Eval`]. A momentum outside `[0, 1]` or an ε not above 0 makes the
    /// result an error naming the block.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        x.graph().called("nn::norm::BatchNorm::apply", || {
            let graph = x.graph();
            let owner = format!("BatchNorm '{}'", self.label);
            if let Err(e) = check_epsilon(&owner, self.epsilon) {
                return graph.failed_with(e);
            }
            let (centered, variance, statistics) = match mode {
                Mode::Train => {
                    let cumulative = self.batches_tracked.is_some();
                    if let Err(e) = check_setting(
                        &owner,
                        "the momentum",
                        self.momentum,
                        |m| cumulative || (0.0..=1.0).contains(&m),
                        "a finite number in [0, 1]",
                    ) {
                        return graph.failed_with(e);
                    }
                    let sum = x.einsum1(PER_CHANNEL_SUM);
                    let count = match count_of(&sum, &["batch", "input", "output"]) {
                        Ok(count) => count,
                        Err(e) => return graph.failed_with(e),
                    };
                    let mean = &sum / &count;
                    let centered = x.sub_spec(PER_CHANNEL, &mean);
                    let variance = &centered.pmul(&centered).einsum1(PER_CHANNEL_SUM) / &count;
                    let statistics = (mean, variance.clone(), count);
                    (centered, variance, Some(statistics))
                }
                Mode::Eval => (
                    x.sub_spec(PER_CHANNEL, &self.running_mean),
                    self.running_var.clone(),
                    None,
                ),
            };
            let inverse_deviation = (&variance + self.epsilon).recip_sqrt();
            let normalized = centered
                .pmul_spec(PER_CHANNEL, &inverse_deviation)
                .pmul_spec(PER_CHANNEL, &self.gain)
                .outer_sum(PER_CHANNEL, &self.bias);
            if let Some((mean, variance, count)) = statistics {
                let n = || Formula::value(&count);
                let unbiased = Formula::value(&variance) * n() / (n() - 1.0);
                graph.update_in_steps(&normalized, &self.running_updates(mean, unbiased));
            }
            normalized
        })
    }

    /// The updates of the running statistics towards a batch's `mean` and `unbiased` variance:
    /// `(1 − factor)·running + factor·batch`, the factor `momentum`, or `1/k` at the `k`-th step
    /// of a cumulative average (whose count they advance, after reading it).
    fn running_updates(&self, mean: Tensor, unbiased: Formula) -> Vec<Update> {
        let factor = || match &self.batches_tracked {
            Some(count) => 1.0 / (Formula::value(count) + 1.0),
            None => Formula::Const(self.momentum),
        };
        let keep = || match &self.batches_tracked {
            Some(_) => 1.0 - factor(),
            None => Formula::Const(1.0 - self.momentum),
        };
        let towards = |running: &Tensor, batch: Formula| {
            Update::set(running, keep() * Formula::value(running) + factor() * batch)
        };
        let mut updates = vec![
            towards(&self.running_mean, Formula::value(&mean)),
            towards(&self.running_var, unbiased),
        ];
        if let Some(count) = &self.batches_tracked {
            updates.push(Update::set(count, Formula::value(count) + 1.0));
        }
        updates
    }

    /// The learned parameters: gain and bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gain.clone(), self.bias.clone()]
    }

    /// The running statistics (mean, variance), then the count of batches of a cumulative
    /// average, to save with the parameters.
    pub fn state(&self) -> Vec<Tensor> {
        [&self.running_mean, &self.running_var]
            .into_iter()
            .chain(&self.batches_tracked)
            .cloned()
            .collect()
    }
}

/// The product of the sizes of the captured row variables `names` of the operation that
/// computed `t`, as a one-cell tensor.
fn count_of(t: &Tensor, names: &[&str]) -> Result<Tensor, TensorError> {
    let graph = t.graph();
    let mut count: Option<Tensor> = None;
    for name in names {
        let size = graph.dim(&t.capture(name)?);
        count = Some(match count {
            None => size,
            Some(so_far) => so_far.pmul(&size),
        });
    }
    Ok(count.unwrap_or_else(|| graph.number(1.0)))
}

/// Group normalization (Wu and He): the channels (the last output axis) split into `groups`
/// groups of consecutive channels, each example normalized per group by the mean and biased
/// variance over the group's channels and every other output axis (the positions of an image),
/// then scaled and shifted by a learned gain (starting at 1) and bias (at 0) per channel. The
/// same in training and evaluation; one group is layer normalization over the whole example,
/// as many groups as channels instance normalization.
#[derive(Debug, Clone)]
pub struct GroupNorm {
    /// The per-channel gain (a parameter, `|->channels`).
    pub gain: Tensor,
    /// The per-channel bias (a parameter, `|->channels`).
    pub bias: Tensor,
    /// Added to the variance under the root, above 0 (default 1e-5).
    pub epsilon: f64,
    /// `membership[c, g]` is 1 where channel `c` is in group `g` (data, `|->channels, groups`):
    /// sums per group and their spreading back to the channels are einsums with it.
    membership: Tensor,
    channels_per_group: usize,
    label: String,
}

/// Each example's sums per group, over its positions and the group's channels.
const PER_GROUP_SUM: &str = "...|...->..s.., c; c, g => ...|...->g";
/// Per-group values of each example spread back to its channels.
const GROUP_TO_CHANNELS: &str = "...|...->g; c, g => ...|...->c";
/// Per-channel values of each example combined with `x` at every position.
const PER_EXAMPLE_CHANNEL: &str = "...|...->..s.., c; ...|...->c => ...|...->..s.., c";

impl GroupNorm {
    /// Group normalization of `channels` channels in `groups` groups, its parameters of the
    /// precision inferred from use; an
    /// error unless `groups` is at least 1 and divides `channels`.
    pub fn new(
        graph: &Graph,
        label: &str,
        channels: usize,
        groups: usize,
    ) -> Result<GroupNorm, TensorError> {
        GroupNorm::with_precision(graph, label, channels, groups, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        channels: usize,
        groups: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Result<GroupNorm, TensorError> {
        let precision = precision.into();
        if groups == 0 || !channels.is_multiple_of(groups) {
            return Err(TensorError::new(format!(
                "GroupNorm '{label}': {groups} groups do not divide {channels} channels"
            )));
        }
        let channels_per_group = channels / groups;
        let membership = (0..channels)
            .flat_map(|c| {
                (0..groups).map(move |g| f64::from(u8::from(c / channels_per_group == g)))
            })
            .collect();
        Ok(GroupNorm {
            gain: per_channel_param(graph, &format!("{label}.gain"), channels, 1.0, precision),
            bias: per_channel_param(graph, &format!("{label}.bias"), channels, 0.0, precision),
            epsilon: 1e-5,
            membership: graph
                .data(&format!("{label}.membership"))
                .shape(&format!("|->{channels},{groups}"))
                .precision(precision)
                .values(membership)
                .build(),
            channels_per_group,
            label: label.to_owned(),
        })
    }

    /// `x` (`batch | -> ..., channels`) normalized per example and group.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::norm::GroupNorm::apply", || {
            let graph = x.graph();
            if let Err(e) = check_epsilon(&format!("GroupNorm '{}'", self.label), self.epsilon) {
                return graph.failed_with(e);
            }
            let sum = x.einsum(PER_GROUP_SUM, &self.membership);
            let positions = match count_of(&sum, &["input", "s"]) {
                Ok(count) => count,
                Err(e) => return graph.failed_with(e),
            };
            let count = positions * self.channels_per_group as f64;
            let mean = &sum / &count;
            let centered = x.sub_spec(
                PER_EXAMPLE_CHANNEL,
                &mean.einsum(GROUP_TO_CHANNELS, &self.membership),
            );
            let variance = &centered
                .pmul(&centered)
                .einsum(PER_GROUP_SUM, &self.membership)
                / &count;
            let inverse_deviation = (&variance + self.epsilon).recip_sqrt();
            centered
                .pmul_spec(
                    PER_EXAMPLE_CHANNEL,
                    &inverse_deviation.einsum(GROUP_TO_CHANNELS, &self.membership),
                )
                .pmul_spec(PER_CHANNEL, &self.gain)
                .outer_sum(PER_CHANNEL, &self.bias)
        })
    }

    /// The learned parameters: gain and bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gain.clone(), self.bias.clone()]
    }
}

/// Root-mean-square normalization over the last output axis (Zhang and Sennrich), or with
/// [`RmsNorm::apply_trailing`] over the last few (PyTorch's `RMSNorm` with a `normalized_shape`
/// of several dimensions): `x/√(mean(x²) + ε)`, scaled by a learned gain per position of the
/// normalized axes (starting at 1), with no centering and no bias; ε = 1e-6.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    /// The gain per position of the last output axis; its size comes from use.
    pub gain: Tensor,
    /// Added to the mean square under the root, above 0 (default 1e-6).
    pub epsilon: f64,
}

impl RmsNorm {
    /// RMS normalization with a gain of the precision inferred from use.
    pub fn new(graph: &Graph, label: &str) -> RmsNorm {
        RmsNorm::with_precision(graph, label, None)
    }

    /// The same with a gain of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        precision: impl Into<Option<Precision>>,
    ) -> RmsNorm {
        let precision = precision.into();
        RmsNorm {
            gain: graph
                .param(&format!("{label}.gain"))
                .precision(precision)
                .init(Init::Constant(1.0))
                .build(),
            epsilon: 1e-6,
        }
    }

    /// `x` normalized over its last output axis.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph()
            .called("nn::norm::RmsNorm::apply", || self.apply_trailing(x, 1))
    }

    /// `x` normalized over its last `axes` output axes together, then scaled by the gain, which
    /// has those axes. No axis is an error.
    #[track_caller]
    pub fn apply_trailing(&self, x: &Tensor, axes: usize) -> Tensor {
        x.graph().called("nn::norm::RmsNorm::apply_trailing", || {
            let owner = format!("RmsNorm of gain '{}'", self.gain.label());
            if let Err(e) = check_epsilon(&owner, self.epsilon) {
                return x.graph().failed_with(e);
            }
            let inverse_root = (&mean_trailing(&x.pmul(x), axes) + self.epsilon).recip_sqrt();
            x.pmul(&inverse_root)
                .pmul_spec(&per_position_spec(axes), &self.gain)
        })
    }

    /// The learned parameter: the gain.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gain.clone()]
    }
}
