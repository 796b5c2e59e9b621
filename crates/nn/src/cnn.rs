//! Convolutional blocks over images laid out `batch | -> height, width, channels`: convolution
//! with batch normalization (and ReLU), the residual block, the VGG block, LeNet and the
//! depthwise-separable convolution.
//!
//! A block holding batch normalization is applied in a [`Mode`]: in [`Mode::Train`] the
//! training steps computing it update its running statistics (see [`BatchNorm`]); its `state()`
//! are those statistics, which checkpoints save with its `params()`.

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Tensor};

use crate::blocks::Mlp;
use crate::conv::{Conv2d, ConvOptions, Padding, conv2d, depthwise_conv2d, max_pool2d};
use crate::norm::{BatchNorm, Mode};

/// A kernel of `size × size` windows over `in_channels` (its inputs) for `out_channels` filters,
/// declared whole, so that its default init knows its fan-in before any use; its window axes
/// count in its fan-out too, as PyTorch's do.
fn kernel(
    graph: &Graph,
    label: &str,
    size: usize,
    in_channels: usize,
    out_channels: usize,
    precision: Option<Precision>,
) -> Tensor {
    graph
        .param(&format!("{label}.kernel"))
        .shape(&format!("|{size},{size},{in_channels}->{out_channels}"))
        .window_axes(2)
        .precision(precision)
        .build()
}

/// A padded `size × size` convolution without bias (the normalization's bias takes its place),
/// then batch normalization.
#[derive(Debug, Clone)]
pub struct ConvBn {
    /// The filters, `|size, size, in_channels -> out_channels`.
    pub kernel: Tensor,
    /// The normalization of the convolution's `out_channels` channels.
    pub norm: BatchNorm,
    /// The window's side.
    pub size: usize,
    /// The distance between windows: the output has `h/stride × w/stride` positions (the sides
    /// must be multiples of the stride).
    pub stride: usize,
}

impl ConvBn {
    /// A convolution from `in_channels` to `out_channels` channels with `size × size` windows
    /// `stride` apart, then batch normalization, of the precision inferred from use.
    pub fn new(
        graph: &Graph,
        label: &str,
        in_channels: usize,
        out_channels: usize,
        size: usize,
        stride: usize,
    ) -> ConvBn {
        let channels = [in_channels, out_channels];
        ConvBn::with_precision(graph, label, channels, size, stride, None)
    }

    /// The same with parameters and running statistics of `precision`; `channels` are the input
    /// and output channels.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        [in_channels, out_channels]: [usize; 2],
        size: usize,
        stride: usize,
        precision: impl Into<Option<Precision>>,
    ) -> ConvBn {
        let precision = precision.into();
        let norm = format!("{label}.norm");
        ConvBn {
            kernel: kernel(graph, label, size, in_channels, out_channels, precision),
            norm: BatchNorm::with_precision(graph, &norm, out_channels, precision),
            size,
            stride,
        }
    }

    /// The normalized convolution of `x`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        x.graph().called("nn::cnn::ConvBn::apply", || {
            let convolved = conv2d(x, &self.kernel, self.size, self.stride, true);
            self.norm.apply(&convolved, mode)
        })
    }

    /// The learned parameters: the kernel, the normalization's gain and bias.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = vec![self.kernel.clone()];
        params.extend(self.norm.params());
        params
    }

    /// The running statistics.
    pub fn state(&self) -> Vec<Tensor> {
        self.norm.state()
    }
}

/// [`ConvBn`] followed by ReLU: the usual unit of a convolutional network.
#[derive(Debug, Clone)]
pub struct ConvBnRelu {
    /// The convolution and its normalization.
    pub conv_bn: ConvBn,
}

impl ConvBnRelu {
    /// A convolution from `in_channels` to `out_channels` channels with `size × size` windows
    /// `stride` apart, batch normalization and ReLU.
    pub fn new(
        graph: &Graph,
        label: &str,
        in_channels: usize,
        out_channels: usize,
        size: usize,
        stride: usize,
    ) -> ConvBnRelu {
        let channels = [in_channels, out_channels];
        ConvBnRelu::with_precision(graph, label, channels, size, stride, None)
    }

    /// The same with parameters and running statistics of `precision`; `channels` are the input
    /// and output channels.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        channels: [usize; 2],
        size: usize,
        stride: usize,
        precision: impl Into<Option<Precision>>,
    ) -> ConvBnRelu {
        let precision = precision.into();
        ConvBnRelu {
            conv_bn: ConvBn::with_precision(graph, label, channels, size, stride, precision),
        }
    }

    /// `relu(norm(conv(x)))`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        x.graph().called("nn::cnn::ConvBnRelu::apply", || {
            self.conv_bn.apply(x, mode).relu()
        })
    }

    /// The learned parameters: the kernel, the normalization's gain and bias.
    pub fn params(&self) -> Vec<Tensor> {
        self.conv_bn.params()
    }

    /// The running statistics.
    pub fn state(&self) -> Vec<Tensor> {
        self.conv_bn.state()
    }
}

/// The residual block of ResNet-18/34 (He et al.): two 3×3 convolutions with batch
/// normalization, ReLU between them, the shortcut added, then ReLU. The shortcut is the input
/// itself, or, where the channels or the stride change, a strided 1×1 convolution with batch
/// normalization (a projection).
#[derive(Debug, Clone)]
pub struct ResidualBlock {
    /// The first convolution (strided when the block is).
    pub first: ConvBnRelu,
    /// The second convolution, before the shortcut is added.
    pub second: ConvBn,
    /// The projection shortcut, where the identity would not fit.
    pub projection: Option<ConvBn>,
}

impl ResidualBlock {
    /// A block from `in_channels` to `out_channels` channels, its first convolution `stride`
    /// apart; with a projection shortcut unless the channels are equal and the stride is 1.
    pub fn new(
        graph: &Graph,
        label: &str,
        in_channels: usize,
        out_channels: usize,
        stride: usize,
    ) -> ResidualBlock {
        let channels = [in_channels, out_channels];
        ResidualBlock::with_precision(graph, label, channels, stride, None)
    }

    /// The same with parameters and running statistics of `precision`; `channels` are the input
    /// and output channels.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        [in_channels, out_channels]: [usize; 2],
        stride: usize,
        precision: impl Into<Option<Precision>>,
    ) -> ResidualBlock {
        let precision = precision.into();
        let name = |part: &str| format!("{label}.{part}");
        let projection = (in_channels != out_channels || stride != 1).then(|| {
            let channels = [in_channels, out_channels];
            ConvBn::with_precision(graph, &name("projection"), channels, 1, stride, precision)
        });
        let (widening, keeping) = ([in_channels, out_channels], [out_channels, out_channels]);
        ResidualBlock {
            first: ConvBnRelu::with_precision(
                graph,
                &name("first"),
                widening,
                3,
                stride,
                precision,
            ),
            second: ConvBn::with_precision(graph, &name("second"), keeping, 3, 1, precision),
            projection,
        }
    }

    /// `relu(second(first(x)) + shortcut(x))`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        x.graph().called("nn::cnn::ResidualBlock::apply", || {
            let residual = self.second.apply(&self.first.apply(x, mode), mode);
            let shortcut = match &self.projection {
                Some(projection) => projection.apply(x, mode),
                None => x.clone(),
            };
            (&residual + &shortcut).relu()
        })
    }

    fn convolutions(&self) -> Vec<&ConvBn> {
        let mut convolutions = vec![&self.first.conv_bn, &self.second];
        convolutions.extend(&self.projection);
        convolutions
    }

    /// The learned parameters of both convolutions and the projection.
    pub fn params(&self) -> Vec<Tensor> {
        self.convolutions()
            .into_iter()
            .flat_map(ConvBn::params)
            .collect()
    }

    /// The running statistics.
    pub fn state(&self) -> Vec<Tensor> {
        self.convolutions()
            .into_iter()
            .flat_map(ConvBn::state)
            .collect()
    }
}

/// The VGG block (Simonyan and Zisserman): padded 3×3 convolutions of `channels` filters, each
/// with a bias and followed by ReLU, then 2×2 max-pooling.
#[derive(Debug, Clone)]
pub struct VggBlock {
    /// The convolutions, in order.
    pub convs: Vec<Conv2d>,
}

impl VggBlock {
    /// `convs` convolutions of `channels` filters; the input channels come from use.
    pub fn new(graph: &Graph, label: &str, convs: usize, channels: usize) -> VggBlock {
        VggBlock::with_precision(graph, label, convs, channels, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        convs: usize,
        channels: usize,
        precision: impl Into<Option<Precision>>,
    ) -> VggBlock {
        let precision = precision.into();
        let same = ConvOptions::default()
            .padding(Padding::Same)
            .precision(precision);
        VggBlock {
            convs: (0..convs)
                .map(|i| Conv2d::new(graph, &format!("{label}.{i}"), channels, 3, same))
                .collect(),
        }
    }

    /// The convolutions of `x`, each followed by ReLU, then pooled.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::cnn::VggBlock::apply", || {
            let convolved = self
                .convs
                .iter()
                .fold(x.clone(), |h, conv| conv.apply(&h).relu());
            max_pool2d(&convolved, 2)
        })
    }

    /// The learned parameters of every convolution.
    pub fn params(&self) -> Vec<Tensor> {
        self.convs.iter().flat_map(Conv2d::params).collect()
    }
}

/// LeNet-5 (LeCun et al.) with today's choices: a padded 5×5 convolution of 6 filters, 2×2
/// max-pooling, one of 16 filters, pooling again, then dense layers of 120 and 84 and the
/// classes' logits, with ReLU throughout (where the original had sigmoids and averages). The
/// padding keeps small images (8×8) usable; the image's side must be a multiple of 4.
#[derive(Debug, Clone)]
pub struct LeNet {
    /// The first convolution (6 filters).
    pub conv1: Conv2d,
    /// The second convolution (16 filters).
    pub conv2: Conv2d,
    /// The dense layers (120, 84, the classes).
    pub dense: Mlp,
}

impl LeNet {
    /// LeNet for `classes` classes; the image's size and channels come from use.
    pub fn new(graph: &Graph, label: &str, classes: usize) -> LeNet {
        LeNet::with_precision(graph, label, classes, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        classes: usize,
        precision: impl Into<Option<Precision>>,
    ) -> LeNet {
        let precision = precision.into();
        let same = ConvOptions::default()
            .padding(Padding::Same)
            .precision(precision);
        let dense = format!("{label}.dense");
        LeNet {
            conv1: Conv2d::new(graph, &format!("{label}.conv1"), 6, 5, same),
            conv2: Conv2d::new(graph, &format!("{label}.conv2"), 16, 5, same),
            dense: Mlp::with_precision(graph, &dense, &[120, 84, classes], precision),
        }
    }

    /// The logits of the images `x`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::cnn::LeNet::apply", || {
            let first = max_pool2d(&self.conv1.apply(x).relu(), 2);
            let second = max_pool2d(&self.conv2.apply(&first).relu(), 2);
            self.dense.apply(&second)
        })
    }

    /// The learned parameters of the convolutions and the dense layers.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = self.conv1.params();
        params.extend(self.conv2.params());
        params.extend(self.dense.params());
        params
    }
}

/// The depthwise-separable convolution of MobileNet (Howard et al.): a padded `size × size`
/// depthwise convolution (one filter per channel, `stride` apart) with batch normalization and
/// ReLU, then a 1×1 pointwise convolution mixing the channels, with batch normalization and
/// ReLU.
#[derive(Debug, Clone)]
pub struct DepthwiseSeparable {
    /// The depthwise filters, `|size, size -> in_channels`.
    pub depthwise_kernel: Tensor,
    /// The normalization of the depthwise convolution's channels.
    pub depthwise_norm: BatchNorm,
    /// The pointwise convolution, its normalization and ReLU.
    pub pointwise: ConvBnRelu,
    /// The depthwise window's side.
    pub size: usize,
    /// The distance between depthwise windows.
    pub stride: usize,
}

impl DepthwiseSeparable {
    /// From `in_channels` to `out_channels` channels, depthwise windows `size × size`,
    /// `stride` apart.
    pub fn new(
        graph: &Graph,
        label: &str,
        in_channels: usize,
        out_channels: usize,
        size: usize,
        stride: usize,
    ) -> DepthwiseSeparable {
        let channels = [in_channels, out_channels];
        DepthwiseSeparable::with_precision(graph, label, channels, size, stride, None)
    }

    /// The same with parameters and running statistics of `precision`; `channels` are the input
    /// and output channels.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        [in_channels, out_channels]: [usize; 2],
        size: usize,
        stride: usize,
        precision: impl Into<Option<Precision>>,
    ) -> DepthwiseSeparable {
        let precision = precision.into();
        let name = |part: &str| format!("{label}.{part}");
        let channels = [in_channels, out_channels];
        DepthwiseSeparable {
            depthwise_kernel: graph
                .param(&name("depthwise.kernel"))
                .shape(&format!("|{size},{size}->{in_channels}"))
                .window_axes(2)
                .precision(precision)
                .build(),
            depthwise_norm: BatchNorm::with_precision(
                graph,
                &name("depthwise.norm"),
                in_channels,
                precision,
            ),
            pointwise: ConvBnRelu::with_precision(
                graph,
                &name("pointwise"),
                channels,
                1,
                1,
                precision,
            ),
            size,
            stride,
        }
    }

    /// The depthwise then pointwise convolution of `x`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        x.graph().called("nn::cnn::DepthwiseSeparable::apply", || {
            let depthwise =
                depthwise_conv2d(x, &self.depthwise_kernel, self.size, self.stride, true);
            let normalized = self.depthwise_norm.apply(&depthwise, mode).relu();
            self.pointwise.apply(&normalized, mode)
        })
    }

    /// The learned parameters: the depthwise kernel and normalization, the pointwise block's.
    pub fn params(&self) -> Vec<Tensor> {
        let mut params = vec![self.depthwise_kernel.clone()];
        params.extend(self.depthwise_norm.params());
        params.extend(self.pointwise.params());
        params
    }

    /// The running statistics.
    pub fn state(&self) -> Vec<Tensor> {
        let mut state = self.depthwise_norm.state();
        state.extend(self.pointwise.state());
        state
    }
}
