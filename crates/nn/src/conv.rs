//! Convolutions (full, grouped and depthwise) and pooling over images laid out
//! `batch | -> height, width, channels`, with PyTorch's options: stride, padding (a number, per
//! side, `same`, `valid`), dilation, groups, output sizes rounded down or (pooling) up, windows
//! other than strides, padded pooling.
//!
//! Each is one einsum spec whose spatial axes are convolution axes (`2*h[1,1]+1*kh`: stride,
//! padding, dilation, window; see the spec notation): the window sizes are captured labels set
//! from the arguments, and the output sizes are inferred from the input's as PyTorch computes
//! them, `⌊(input + before + after − dilation·(window − 1) − 1)/stride⌋ + 1`. A padded position
//! reads as the reduction's neutral value: 0 for a convolution, −∞ for max-pooling.

use rcannl_ir::Precision;
use rcannl_tensor::{Axis, AxisKind, Graph, Tensor};

/// A size per spatial axis, height then width: `3` is `(3, 3)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair(pub usize, pub usize);

impl From<usize> for Pair {
    fn from(both: usize) -> Pair {
        Pair(both, both)
    }
}

impl From<(usize, usize)> for Pair {
    fn from((height, width): (usize, usize)) -> Pair {
        Pair(height, width)
    }
}

/// How a convolution pads its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// As many output positions as input positions over the stride (`input = stride·output`),
    /// the padding split as PyTorch's `padding='same'` splits it (the odd one after).
    Same,
    /// Positions added before and after each axis, height then width: `Padding::from(1)` is
    /// PyTorch's `padding=1`, [`Padding::VALID`] its `padding=0` (or `'valid'`).
    Sides {
        /// Before and after the first row.
        height: (usize, usize),
        /// Before and after the first column.
        width: (usize, usize),
    },
}

impl Padding {
    /// No padding: only windows inside the input, as many as fit.
    pub const VALID: Padding = Padding::Sides {
        height: (0, 0),
        width: (0, 0),
    };
}

impl From<usize> for Padding {
    /// The same padding on every side.
    fn from(all: usize) -> Padding {
        Padding::from((all, all))
    }
}

impl From<(usize, usize)> for Padding {
    /// `(height, width)`: each on both sides of its axis, as PyTorch's `padding=(1, 2)`.
    fn from((height, width): (usize, usize)) -> Padding {
        Padding::Sides {
            height: (height, height),
            width: (width, width),
        }
    }
}

/// A convolution's options besides its window; the default is PyTorch's: stride 1, no padding,
/// dilation 1, one group, a bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvOptions {
    /// The step between windows.
    pub stride: Pair,
    /// How the input is padded.
    pub padding: Padding,
    /// The step between a window's taps.
    pub dilation: Pair,
    /// The channel groups: each output group sees only its input group (PyTorch's `groups`).
    pub groups: usize,
    /// Whether [`Conv2d`] adds a bias per output channel.
    pub bias: bool,
    /// The precision of [`Conv2d`]'s kernel and bias; `None` (the default) leaves it to
    /// precision inference: what the convolution's users compute in, else the graph's default.
    pub precision: Option<Precision>,
}

impl Default for ConvOptions {
    fn default() -> ConvOptions {
        ConvOptions {
            stride: Pair(1, 1),
            padding: Padding::VALID,
            dilation: Pair(1, 1),
            groups: 1,
            bias: true,
            precision: None,
        }
    }
}

impl ConvOptions {
    /// With windows `stride` apart.
    pub fn stride(self, stride: impl Into<Pair>) -> ConvOptions {
        ConvOptions {
            stride: stride.into(),
            ..self
        }
    }

    /// With `padding` (`1`, `(1, 2)`, [`Padding::Same`], [`Padding::Sides`]).
    pub fn padding(self, padding: impl Into<Padding>) -> ConvOptions {
        ConvOptions {
            padding: padding.into(),
            ..self
        }
    }

    /// With taps `dilation` apart.
    pub fn dilation(self, dilation: impl Into<Pair>) -> ConvOptions {
        ConvOptions {
            dilation: dilation.into(),
            ..self
        }
    }

    /// In `groups` channel groups.
    pub fn groups(self, groups: usize) -> ConvOptions {
        ConvOptions { groups, ..self }
    }

    /// With or without a bias.
    pub fn bias(self, bias: bool) -> ConvOptions {
        ConvOptions { bias, ..self }
    }

    /// With the kernel and bias in `precision` (`None`: inferred from use).
    pub fn precision(self, precision: impl Into<Option<Precision>>) -> ConvOptions {
        ConvOptions {
            precision: precision.into(),
            ..self
        }
    }
}

/// A pooling's options besides its window; the default is PyTorch's: stride = window, no
/// padding, dilation 1, output sizes rounded down, padding counted in averages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// The step between windows; `None`: the window's size.
    pub stride: Option<Pair>,
    /// Positions added on both sides of each axis (height, width).
    pub padding: Pair,
    /// The step between a window's taps (max-pooling).
    pub dilation: Pair,
    /// Whether the output size is rounded up: a last window that starts inside the input or its
    /// left padding is kept even if it overruns the right padding (PyTorch's `ceil_mode`).
    pub ceil_mode: bool,
    /// Whether an average divides by the window's positions inside the padded input (PyTorch's
    /// `count_include_pad=True`, the default) or by those inside the input alone.
    pub count_include_pad: bool,
    /// Which of a window's tied maxima max-pooling's gradient goes to.
    pub ties: Ties,
}

/// Which of a window's tied maxima max-pooling's gradient goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ties {
    /// Every position holding the maximum receives the whole gradient: one reduction, as every
    /// `einmax` differentiates.
    #[default]
    Shared,
    /// The first of them in the window (row by row) receives it alone, as in PyTorch; the
    /// windows are laid out one tap per cell to find it, which costs the window's size in
    /// memory and time.
    First,
}

impl Default for PoolOptions {
    fn default() -> PoolOptions {
        PoolOptions {
            stride: None,
            padding: Pair(0, 0),
            dilation: Pair(1, 1),
            ceil_mode: false,
            count_include_pad: true,
            ties: Ties::Shared,
        }
    }
}

impl PoolOptions {
    /// With windows `stride` apart.
    pub fn stride(self, stride: impl Into<Pair>) -> PoolOptions {
        PoolOptions {
            stride: Some(stride.into()),
            ..self
        }
    }

    /// With `padding` positions on both sides of each axis.
    pub fn padding(self, padding: impl Into<Pair>) -> PoolOptions {
        PoolOptions {
            padding: padding.into(),
            ..self
        }
    }

    /// With taps `dilation` apart.
    pub fn dilation(self, dilation: impl Into<Pair>) -> PoolOptions {
        PoolOptions {
            dilation: dilation.into(),
            ..self
        }
    }

    /// With output sizes rounded up.
    pub fn ceil_mode(self, ceil_mode: bool) -> PoolOptions {
        PoolOptions { ceil_mode, ..self }
    }

    /// With max-pooling's gradient going to `ties` of a window's tied maxima.
    pub fn ties(self, ties: Ties) -> PoolOptions {
        PoolOptions { ties, ..self }
    }

    /// Dividing averages by the positions inside the padded input (`true`) or the input alone.
    pub fn count_include_pad(self, count_include_pad: bool) -> PoolOptions {
        PoolOptions {
            count_include_pad,
            ..self
        }
    }
}

/// One spatial axis of a window: its labels and how the window moves along it.
struct WindowAxis<'a> {
    output: &'a str,
    kernel: &'a str,
    stride: usize,
    dilation: usize,
    /// `None`: padded to `input = stride·output` (`=+`).
    sides: Option<(usize, usize)>,
    ceil: bool,
}

impl WindowAxis<'_> {
    /// The convolution axis in the spec notation: `2*h[1,1]+1*kh`, `1*h=+2*kh`.
    fn spec(&self) -> String {
        let border = match self.sides {
            None => "=".to_owned(),
            Some((before, after)) => {
                format!("[{before},{after}]{}", if self.ceil { "^" } else { "" })
            }
        };
        format!(
            "{}*{}{border}+{}*{}",
            self.stride, self.output, self.dilation, self.kernel
        )
    }
}

/// The height and width axes of a window over `h, w`.
fn window_axes(
    stride: Pair,
    dilation: Pair,
    padding: Padding,
    ceil: bool,
) -> (WindowAxis<'static>, WindowAxis<'static>) {
    let (height, width) = match padding {
        Padding::Same => (None, None),
        Padding::Sides { height, width } => (Some(height), Some(width)),
    };
    (
        WindowAxis {
            output: "h",
            kernel: "kh",
            stride: stride.0,
            dilation: dilation.0,
            sides: height,
            ceil,
        },
        WindowAxis {
            output: "w",
            kernel: "kw",
            stride: stride.1,
            dilation: dilation.1,
            sides: width,
            ceil,
        },
    )
}

/// Sets the captured window labels `kh`, `kw` of `t`'s spec to `window`.
fn set_window(t: &Tensor, window: Pair) -> Tensor {
    let graph = t.graph();
    for (label, size) in [("kh", window.0), ("kw", window.1)] {
        let set = t
            .capture(label)
            .and_then(|capture| graph.set_dim(&capture, size));
        if let Err(e) = set {
            return graph.failed_with(e);
        }
    }
    t.clone()
}

/// The convolution of `x` (`batch | -> height, width, channels`) with `kernel` (`kh, kw, c ->
/// d`, or `kh, kw, c -> groups, d` in groups: one filter per output channel over the input
/// channels of its group) of `window` taps, without a bias: `batch | -> h, w, out_channels`,
/// output channels in PyTorch's order (group-major). Grouping needs `x`'s channel count known
/// when it is built.
#[track_caller]
pub fn conv2d_with(
    x: &Tensor,
    kernel: &Tensor,
    window: impl Into<Pair>,
    options: &ConvOptions,
) -> Tensor {
    x.graph().called("nn::conv::conv2d_with", || {
        let (h, w) = window_axes(options.stride, options.dilation, options.padding, false);
        let (h, w) = (h.spec(), w.spec());
        if options.groups == 1 {
            let spec = format!("...|...->{h}, {w}, c; kh, kw, c -> d => ...|...->h, w, d");
            return set_window(&x.einsum(&spec, kernel), window.into());
        }
        let grouped = x.unflatten(Axis::output(-1), &[options.groups as isize, -1]);
        let spec = format!("...|...->{h}, {w}, g, c; kh, kw, c -> g, d => ...|...->h, w, g, d");
        set_window(&grouped.einsum(&spec, kernel), window.into()).flatten_axes(
            AxisKind::Output,
            -2,
            -1,
        )
    })
}

/// The convolution of `x` with `kernel` (`kh, kw, c -> d`: `size × size` windows over every
/// input channel `c`, one filter per output channel `d`) `stride` apart, padded to
/// `input = stride·output` or not padded, without a bias (see [`conv2d_with`] for the rest of
/// PyTorch's options).
#[track_caller]
pub fn conv2d(x: &Tensor, kernel: &Tensor, size: usize, stride: usize, padded: bool) -> Tensor {
    x.graph().called("nn::conv::conv2d", || {
        conv2d_with(x, kernel, size, &simple(stride, padded))
    })
}

fn simple(stride: usize, padded: bool) -> ConvOptions {
    let padding = if padded {
        Padding::Same
    } else {
        Padding::VALID
    };
    ConvOptions::default().stride(stride).padding(padding)
}

/// The depthwise convolution of `x` with `kernel` (`kh, kw -> c`: one `size × size` filter per
/// channel, each channel convolved with its own filter alone), without a bias. The window is
/// the kernel's input, so that its default init is scaled by the window's size.
#[track_caller]
pub fn depthwise_conv2d(
    x: &Tensor,
    kernel: &Tensor,
    size: usize,
    stride: usize,
    padded: bool,
) -> Tensor {
    x.graph().called("nn::conv::depthwise_conv2d", || {
        let options = simple(stride, padded);
        let (h, w) = window_axes(options.stride, options.dilation, options.padding, false);
        let spec = format!(
            "...|...->{}, {}, c; kh, kw -> c => ...|...->h, w, c",
            h.spec(),
            w.spec()
        );
        set_window(&x.einsum(&spec, kernel), Pair(size, size))
    })
}

/// A 2-D convolution, PyTorch's `nn.Conv2d` channels-last: `out_channels` filters of a window
/// over the input channels (of their group), plus a bias per output channel; the input
/// channels come from use.
#[derive(Debug, Clone)]
pub struct Conv2d {
    /// The filters, labelled `<label>.kernel`: `kh, kw, c -> out_channels` (in groups,
    /// `kh, kw, c -> groups, out_channels/groups`), the input channels `c` of a group from use.
    /// `kh, kw` are its window axes: its fans are PyTorch's, `kh·kw·c` in and
    /// `kh·kw·out_channels` out.
    pub kernel: Tensor,
    /// The bias, labelled `<label>.bias`: one value per output channel (its rows from use);
    /// `None` when the options leave it out.
    pub bias: Option<Tensor>,
    /// The window's height and width, in taps.
    pub window: Pair,
    /// Stride, padding, dilation and groups.
    pub options: ConvOptions,
}

impl Conv2d {
    /// The kernel `<label>.kernel` and the bias `<label>.bias`, both starting from the graph's
    /// default [`Init`](rcannl_tensor::Init), under which the bias, which has no input axes,
    /// starts at 0. `Conv2d::new(&graph, "conv", 16, 3, ConvOptions::default().padding(1))` is
    /// PyTorch's `nn.Conv2d(c, 16, 3, padding=1)`. `out_channels` must be a multiple of the
    /// groups.
    pub fn new(
        graph: &Graph,
        label: &str,
        out_channels: usize,
        window: impl Into<Pair>,
        options: ConvOptions,
    ) -> Conv2d {
        let outputs = if options.groups == 1 {
            vec![out_channels]
        } else {
            vec![options.groups, out_channels / options.groups.max(1)]
        };
        let kernel = if options.groups == 0 || !out_channels.is_multiple_of(options.groups) {
            graph.failed_with(rcannl_tensor::TensorError::new(format!(
                "Conv2d '{label}': {out_channels} output channels do not split into {} groups",
                options.groups
            )))
        } else {
            graph
                .param(&format!("{label}.kernel"))
                .output(outputs)
                .window_axes(2)
                .precision(options.precision)
                .build()
        };
        Conv2d {
            kernel,
            bias: options.bias.then(|| {
                graph
                    .param(&format!("{label}.bias"))
                    .precision(options.precision)
                    .build()
            }),
            window: window.into(),
            options,
        }
    }

    /// The convolution of `x` (`batch | -> height, width, channels`) plus the bias:
    /// `batch | -> h, w, out_channels`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::conv::Conv2d::apply", || {
            let convolved = conv2d_with(x, &self.kernel, self.window, &self.options);
            match &self.bias {
                Some(bias) => convolved.outer_sum("...|...->h, w, d; d => ...|...->h, w, d", bias),
                None => convolved,
            }
        })
    }

    /// The kernel and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        std::iter::once(self.kernel.clone())
            .chain(self.bias.clone())
            .collect()
    }
}

/// The largest value of each window of `x` (`batch | -> h, w, c`), padded positions reading
/// −∞: PyTorch's `max_pool2d`. The gradient goes to every position holding its window's
/// maximum, each tied position receiving it whole, unless `options.ties` is [`Ties::First`]
/// (PyTorch's rule: the first of them alone).
#[track_caller]
pub fn max_pool2d_with(x: &Tensor, window: impl Into<Pair>, options: &PoolOptions) -> Tensor {
    x.graph().called("nn::conv::max_pool2d_with", || {
        let window = window.into();
        let spec = pool_spec(window, options, POOLED);
        let maxima = set_window(&x.einmax1(&spec), window);
        match options.ties {
            Ties::Shared => maxima,
            Ties::First => first_maxima(x, &maxima, window, options),
        }
    })
}

/// The maxima of [`max_pool2d_with`] as the sum of each window's taps weighted by a selector, 1
/// at the first tap holding the maximum and 0 elsewhere (held constant): the same values, the
/// gradient to that tap alone.
fn first_maxima(x: &Tensor, maxima: &Tensor, window: Pair, options: &PoolOptions) -> Tensor {
    let graph = x.graph();
    let spread = pool_spec(window, options, SPREAD);
    let taps = set_window(&x.einsum1(&spread), window);
    // Padding reads 0 in a sum: a padded tap is never the maximum, even one that equals 0.
    let inside = set_window(&x.full_like(1.0).einsum1(&spread), window);
    const PER_TAP: &str = "...|...->h, w, kh, kw, c; ...|...->h, w, c => ...|...->h, w, kh, kw, c";
    let tied = taps.eq_spec(PER_TAP, &maxima.stop_gradient()).pmul(&inside);
    // The first tap scores highest: taps counted down from the window's size.
    let size = window.0 * window.1;
    let countdown = (&(-&graph.range(size)) + size as f64)
        .unflatten(Axis::output(0), &[window.0 as isize, window.1 as isize]);
    let score = tied.pmul_spec(
        "...|...->h, w, kh, kw, c; kh, kw => ...|...->h, w, kh, kw, c",
        &countdown,
    );
    let best = score.einmax1("...|...->h, w, kh, kw, c => ...|...->h, w, c");
    let first = score.eq_spec(PER_TAP, &best).pmul(&tied).stop_gradient();
    taps.pmul(&first)
        .einsum1("...|...->h, w, kh, kw, c => ...|...->h, w, c")
}

/// The mean of each window of `x` (`batch | -> h, w, c`): PyTorch's `avg_pool2d`, the divisor
/// counting the padding or not as `options.count_include_pad` says, never the positions past it
/// that a rounded-up last window overruns.
#[track_caller]
pub fn avg_pool2d_with(x: &Tensor, window: impl Into<Pair>, options: &PoolOptions) -> Tensor {
    x.graph().called("nn::conv::avg_pool2d_with", || {
        let window = window.into();
        let spec = pool_spec(window, options, POOLED);
        let summed = set_window(&x.einsum1(&spec), window);
        let padded = options.padding != Pair(0, 0);
        if !options.count_include_pad && (padded || options.ceil_mode) {
            let count = set_window(&x.full_like(1.0).einsum1(&spec), window);
            return &summed / &count;
        }
        if options.ceil_mode {
            return match counts_with_padding(x, &summed, window, options) {
                Ok(count) => summed.div_spec("...|...->h, w, c; h, w => ...|...->h, w, c", &count),
                Err(e) => x.graph().failed_with(e),
            };
        }
        let graph = x.graph();
        &summed / &graph.number_in((window.0 * window.1) as f64, x.precision())
    })
}

/// Each channel's windows reduced: the result of a pooling.
const POOLED: &str = "h, w, c";
/// Each channel's windows laid out, one tap per cell.
const SPREAD: &str = "h, w, kh, kw, c";

/// The spec of a pooling of `x` into `result`'s output axes ([`POOLED`] or [`SPREAD`]).
fn pool_spec(window: Pair, options: &PoolOptions, result: &str) -> String {
    let padding = Padding::Sides {
        height: (options.padding.0, options.padding.0),
        width: (options.padding.1, options.padding.1),
    };
    let stride = options.stride.unwrap_or(window);
    let (h, w) = window_axes(stride, options.dilation, padding, options.ceil_mode);
    format!(
        "...|...->{}, {}, c => ...|...->{result}",
        h.spec(),
        w.spec()
    )
}

/// The positions of each window of a rounded-up pooling inside the padded input, `h, w`: per
/// axis `min(window, input + padding − (stride·o − padding))`, the last window's overrun left
/// out, as PyTorch's divisor.
fn counts_with_padding(
    x: &Tensor,
    pooled: &Tensor,
    window: Pair,
    options: &PoolOptions,
) -> Result<Tensor, rcannl_tensor::TensorError> {
    let graph = x.graph();
    let stride = options.stride.unwrap_or(window);
    let input = x.einsum1("...|...->h, w, c => h, w");
    let per_axis = |label: &str, size: usize, stride: usize, padding: usize| {
        let positions = pooled.einsum1(&format!("...|...->h, w, c => {label}"));
        let index = graph
            .range_of_shape(&format!("{label} of the pooling"))
            .build();
        graph.same_shape(&index, &positions);
        let extent = graph.dim(&input.capture(label)?);
        let start = &(&index * stride as f64) - padding as f64;
        let end = &(&extent + padding as f64) - &start;
        let count = end.min(&graph.number_in(size as f64, x.precision()));
        Ok::<Tensor, rcannl_tensor::TensorError>(count)
    };
    let h = per_axis("h", window.0, stride.0, options.padding.0)?;
    let w = per_axis("w", window.1, stride.1, options.padding.1)?;
    Ok(h.einsum("h; w => h, w", &w))
}

/// The largest value of each `size × size` window, windows `size` apart (PyTorch's
/// `max_pool2d(size)`; see [`max_pool2d_with`]).
#[track_caller]
pub fn max_pool2d(x: &Tensor, size: usize) -> Tensor {
    x.graph().called("nn::conv::max_pool2d", || {
        max_pool2d_with(x, size, &PoolOptions::default())
    })
}

/// The mean of each `size × size` window, windows `size` apart (PyTorch's `avg_pool2d(size)`;
/// see [`avg_pool2d_with`]).
#[track_caller]
pub fn avg_pool2d(x: &Tensor, size: usize) -> Tensor {
    x.graph().called("nn::conv::avg_pool2d", || {
        avg_pool2d_with(x, size, &PoolOptions::default())
    })
}

/// The mean over all positions of each channel: `batch | -> h, w, c` to `batch | -> c`.
#[track_caller]
pub fn global_avg_pool(x: &Tensor) -> Tensor {
    x.graph().called("nn::conv::global_avg_pool", || {
        let summed = x.einsum1("...|...->h, w, c => ...|...->c");
        let graph = x.graph();
        match (summed.capture("h"), summed.capture("w")) {
            (Ok(h), Ok(w)) => &(&summed / &graph.dim(&h)) / &graph.dim(&w),
            (Err(e), _) | (_, Err(e)) => graph.failed_with(e),
        }
    })
}

/// A depthwise 2-D convolution: one `size × size` filter per channel, plus a bias per channel;
/// the channels come from use.
#[derive(Debug, Clone)]
pub struct DepthwiseConv2d {
    /// The filters, `kh, kw -> c`, whose window axes are both input axes: its fans are
    /// PyTorch's, `kh·kw` in and `kh·kw·c` out.
    pub kernel: Tensor,
    /// The bias per channel.
    pub bias: Tensor,
    /// The window's side.
    pub size: usize,
    /// The distance between windows.
    pub stride: usize,
    /// Whether the input is padded to keep its size (over the stride).
    pub padded: bool,
}

impl DepthwiseConv2d {
    /// A depthwise convolution with `size × size` windows `stride` apart.
    pub fn new(graph: &Graph, label: &str, size: usize, stride: usize, padded: bool) -> Self {
        DepthwiseConv2d::with_precision(graph, label, size, stride, padded, None)
    }

    /// The same with a kernel and bias of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        size: usize,
        stride: usize,
        padded: bool,
        precision: impl Into<Option<Precision>>,
    ) -> Self {
        let precision = precision.into();
        DepthwiseConv2d {
            kernel: graph
                .param(&format!("{label}.kernel"))
                .window_axes(2)
                .precision(precision)
                .build(),
            bias: graph
                .param(&format!("{label}.bias"))
                .precision(precision)
                .build(),
            size,
            stride,
            padded,
        }
    }

    /// The convolution of `x`, plus the bias.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::conv::DepthwiseConv2d::apply", || {
            let convolved = depthwise_conv2d(x, &self.kernel, self.size, self.stride, self.padded);
            convolved.outer_sum("...|...->h, w, c; c => ...|...->h, w, c", &self.bias)
        })
    }

    /// The learned parameters: kernel and bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.kernel.clone(), self.bias.clone()]
    }
}
