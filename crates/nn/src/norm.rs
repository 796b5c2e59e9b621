//! Reductions over the last output axis, softmax and layer normalization (by the true mean and
//! variance: the axis size comes from inference, as a tensor).

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Init, Tensor, TensorError};

/// Reduces the last output axis to one position, keeping every other axis.
const LAST: &str = "...|... -> ..., c => ...|... -> ..., 0";

/// The sum over the last output axis (kept, of size 1).
pub fn sum_last(x: &Tensor) -> Tensor {
    x.einsum1(LAST)
}

/// The largest value over the last output axis (kept, of size 1).
pub fn max_last(x: &Tensor) -> Tensor {
    x.einmax1(LAST)
}

/// The mean over the last output axis: its size is captured from inference.
pub fn mean_last(x: &Tensor) -> Tensor {
    let sum = sum_last(x);
    match sum.capture("c") {
        Ok(c) => &sum / &x.graph().dim(&c),
        Err(e) => x.graph().failed_with(e),
    }
}

/// Softmax over the last output axis (shifted by its maximum, which takes no gradient).
pub fn softmax(x: &Tensor) -> Tensor {
    let shifted = x - &max_last(x).stop_gradient();
    let e = shifted.exp();
    &e / &sum_last(&e)
}

/// `log(softmax(x))` over the last output axis, computed without the softmax.
pub fn log_softmax(x: &Tensor) -> Tensor {
    let shifted = x - &max_last(x).stop_gradient();
    &shifted - &sum_last(&shifted.exp()).log()
}

/// Softmax over the axes a reduction spec reduces: `spec` maps `x` to the positions its
/// normalizing sums are kept at (as [`sum_last`]'s spec does for the last output axis, e.g.
/// `"...|... -> c, t => ...|... -> 0, t"` for the first of two output axes), and the result is
/// broadcast back over them. Shifted by the maximum over the same axes, which takes no gradient.
pub fn softmax_with(x: &Tensor, spec: &str) -> Tensor {
    let shifted = x - &x.einmax1(spec).stop_gradient();
    let e = shifted.exp();
    &e / &e.einsum1(spec)
}

/// `log(softmax_with(x, spec))`, computed without the softmax.
pub fn log_softmax_with(x: &Tensor, spec: &str) -> Tensor {
    let shifted = x - &x.einmax1(spec).stop_gradient();
    &shifted - &shifted.exp().einsum1(spec).log()
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
        return Err(TensorError {
            message: format!(
                "softmax over output axis {axis}: an axis at most {MAX_AXIS_REACH} axes from                  either end is supported"
            ),
        });
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
pub fn softmax_axis(x: &Tensor, axis: isize) -> Tensor {
    match output_axis_spec(axis) {
        Ok(spec) => softmax_with(x, &spec),
        Err(e) => x.graph().failed_with(e),
    }
}

/// Log-softmax over one output axis, counted as Python counts (`-1` is the last).
pub fn log_softmax_axis(x: &Tensor, axis: isize) -> Tensor {
    match output_axis_spec(axis) {
        Ok(spec) => log_softmax_with(x, &spec),
        Err(e) => x.graph().failed_with(e),
    }
}

/// Layer normalization over the last output axis: `(x − mean)/√(var + ε)`, scaled and shifted
/// by a learned gain (starting at 1) and bias (at 0) per position of that axis.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub gain: Tensor,
    pub bias: Tensor,
    pub epsilon: f64,
}

impl LayerNorm {
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
    pub fn with_precision(graph: &Graph, label: &str, precision: Precision) -> LayerNorm {
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

    pub fn apply(&self, x: &Tensor) -> Tensor {
        let centered = x - &mean_last(x);
        let variance = mean_last(&centered.pmul(&centered));
        let normalized = &centered / &(&variance + self.epsilon).sqrt();
        let per_position = "...|... -> ..., c; c => ...|... -> ..., c";
        normalized
            .einsum(per_position, &self.gain)
            .outer_sum(per_position, &self.bias)
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gain.clone(), self.bias.clone()]
    }
}
