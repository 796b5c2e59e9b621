//! Convolutions (full and depthwise) and pooling over images laid out
//! `batch | -> height, width, channels`, as einsum specs: the window axes are captured labels
//! whose sizes are set from the block's arguments.

use rcannl_tensor::{Graph, Tensor};

/// `stride·o` with a window `k`: padded (`=+`, as many outputs as inputs over the stride) or
/// valid (`<+`, only windows inside the input).
fn window_axis(output: &str, kernel: &str, stride: usize, padded: bool) -> String {
    let pad = if padded { "=" } else { "<" };
    if stride == 1 {
        format!("{output}{pad}+{kernel}")
    } else {
        format!("{stride}*{output}{pad}+{kernel}")
    }
}

/// Sets the captured window labels `kh`, `kw` of `t`'s spec to `size`.
fn set_window(t: &Tensor, size: usize) -> Tensor {
    let graph = t.graph();
    for label in ["kh", "kw"] {
        let set = t
            .capture(label)
            .and_then(|capture| graph.set_dim(&capture, size));
        if let Err(e) = set {
            return graph.failed_with(e);
        }
    }
    t.clone()
}

/// A 2-D convolution: `out_channels` filters of `kernel × kernel` over every input channel,
/// plus a bias per output channel; the input channels come from use.
#[derive(Debug, Clone)]
pub struct Conv2d {
    /// The filters, labelled `<label>.kernel`: `kh, kw, c -> out_channels`, with `kh = kw = size`
    /// and the input channels `c` from use. `kh, kw` are its window axes: its fans are
    /// PyTorch's, `kh·kw·c` in and `kh·kw·out_channels` out.
    pub kernel: Tensor,
    /// The bias, labelled `<label>.bias`: one value per output channel (its rows from use).
    pub bias: Tensor,
    /// The window's height and width, in positions.
    pub size: usize,
    /// The step between windows, in positions.
    pub stride: usize,
    /// Whether the input is padded (`=+`: `input = stride·output`) or only windows inside it are
    /// taken (`<+`: `input = stride·(output−1) + size`).
    pub padded: bool,
}

impl Conv2d {
    /// The kernel `<label>.kernel` (output axis `out_channels`, input axes from use) and the bias
    /// `<label>.bias` (rows from use), both starting from the graph's default
    /// [`Init`](rcannl_tensor::Init), under which the bias, which has no input axes, starts at 0.
    pub fn new(
        graph: &Graph,
        label: &str,
        out_channels: usize,
        size: usize,
        stride: usize,
        padded: bool,
    ) -> Conv2d {
        Conv2d {
            kernel: graph
                .param(&format!("{label}.kernel"))
                .output([out_channels])
                .window_axes(2)
                .build(),
            bias: graph.param(&format!("{label}.bias")).build(),
            size,
            stride,
            padded,
        }
    }

    /// The convolution of `x` (`batch | -> height, width, channels`) plus the bias:
    /// `batch | -> h, w, out_channels`.
    pub fn apply(&self, x: &Tensor) -> Tensor {
        let convolved = conv2d(x, &self.kernel, self.size, self.stride, self.padded);
        convolved.outer_sum("...|...->h, w, d; d => ...|...->h, w, d", &self.bias)
    }

    /// The kernel and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.kernel.clone(), self.bias.clone()]
    }
}

/// The largest value of each `size × size` window, windows `size` apart.
pub fn max_pool2d(x: &Tensor, size: usize) -> Tensor {
    let (h, w) = (
        window_axis("h", "kh", size, false),
        window_axis("w", "kw", size, false),
    );
    set_window(
        &x.einmax1(&format!("...|...->{h}, {w}, c => ...|...->h, w, c")),
        size,
    )
}

/// The mean of each `size × size` window, windows `size` apart.
pub fn avg_pool2d(x: &Tensor, size: usize) -> Tensor {
    let (h, w) = (
        window_axis("h", "kh", size, false),
        window_axis("w", "kw", size, false),
    );
    let summed = set_window(
        &x.einsum1(&format!("...|...->{h}, {w}, c => ...|...->h, w, c")),
        size,
    );
    summed * (1.0 / (size * size) as f64)
}

/// The mean over all positions of each channel: `batch | -> h, w, c` to `batch | -> c`.
pub fn global_avg_pool(x: &Tensor) -> Tensor {
    let summed = x.einsum1("...|...->h, w, c => ...|...->c");
    let graph = x.graph();
    match (summed.capture("h"), summed.capture("w")) {
        (Ok(h), Ok(w)) => &(&summed / &graph.dim(&h)) / &graph.dim(&w),
        (Err(e), _) | (_, Err(e)) => graph.failed_with(e),
    }
}

/// The convolution of `x` with `kernel` (`kh, kw, c -> d`: `size × size` windows over every
/// input channel `c`, one filter per output channel `d`), without a bias.
pub fn conv2d(x: &Tensor, kernel: &Tensor, size: usize, stride: usize, padded: bool) -> Tensor {
    let h = window_axis("h", "kh", stride, padded);
    let w = window_axis("w", "kw", stride, padded);
    let spec = format!("...|...->{h}, {w}, c; kh, kw, c -> d => ...|...->h, w, d");
    set_window(&x.einsum(&spec, kernel), size)
}

/// The depthwise convolution of `x` with `kernel` (`kh, kw -> c`: one `size × size` filter per
/// channel, each channel convolved with its own filter alone), without a bias. The window is
/// the kernel's input, so that its default init is scaled by the window's size.
pub fn depthwise_conv2d(
    x: &Tensor,
    kernel: &Tensor,
    size: usize,
    stride: usize,
    padded: bool,
) -> Tensor {
    let h = window_axis("h", "kh", stride, padded);
    let w = window_axis("w", "kw", stride, padded);
    let spec = format!("...|...->{h}, {w}, c; kh, kw -> c => ...|...->h, w, c");
    set_window(&x.einsum(&spec, kernel), size)
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
        DepthwiseConv2d {
            kernel: graph
                .param(&format!("{label}.kernel"))
                .window_axes(2)
                .build(),
            bias: graph.param(&format!("{label}.bias")).build(),
            size,
            stride,
            padded,
        }
    }

    /// The convolution of `x`, plus the bias.
    pub fn apply(&self, x: &Tensor) -> Tensor {
        let convolved = depthwise_conv2d(x, &self.kernel, self.size, self.stride, self.padded);
        convolved.outer_sum("...|...->h, w, c; c => ...|...->h, w, c", &self.bias)
    }

    /// The learned parameters: kernel and bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.kernel.clone(), self.bias.clone()]
    }
}
