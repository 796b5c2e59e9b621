//! Blocks whose sizes come from use: a dense layer over all of the input's output axes
//! ([`Dense`], `w * x + b`), PyTorch's `nn.Linear` over the last axis (or the last few) at every
//! position ([`Linear`]), and a multi-layer perceptron.

use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Tensor, TensorError, op};

/// `w * x + b`: a layer of `width` outputs; its input size comes from `x`, whose output axes
/// it contracts all together (for a per-position layer over a sequence, see [`Linear`]).
#[derive(Debug, Clone)]
pub struct Dense {
    /// The weights, labelled `<label>.w`: `input -> width`, the input axes from use.
    pub w: Tensor,
    /// The bias, labelled `<label>.b`: its rows from use (`-> width` when added to `w * x`).
    pub b: Tensor,
}

impl Dense {
    /// A layer of `width` outputs, of the precision inferred from use: the parameters `<label>.w` (output axis `width`, input
    /// axes from use, no batch axes) and `<label>.b` (rows from use), both starting from the
    /// graph's default [`Init`](rcannl_tensor::Init) (LeCun uniform unless changed), under which
    /// the bias, which has no input axes, starts at 0.
    pub fn new(graph: &Graph, label: &str, width: usize) -> Dense {
        Dense::with_precision(graph, label, width, None)
    }

    /// The same with parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        width: usize,
        precision: impl Into<Option<Precision>>,
    ) -> Dense {
        let precision = precision.into();
        let param = |name: &str| graph.param(&format!("{label}.{name}")).precision(precision);
        Dense {
            w: param("w").output([width]).build(),
            b: param("b").build(),
        }
    }

    /// `w * x + b`: `x`'s output axes contracted with `w`'s input axes, `x`'s batch axes kept.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::blocks::Dense::apply", || {
            let (w, b) = (&self.w, &self.b);
            op! { w * x + b }
        })
    }

    /// The weights and the bias.
    pub fn params(&self) -> Vec<Tensor> {
        vec![self.w.clone(), self.b.clone()]
    }
}

/// PyTorch's `nn.Linear`: a dense layer applied at every position of `x`, contracting only
/// `x`'s last output axis (or its last few, see [`LinearOptions::contracted_axes`]) and putting
/// the layer's output axes in their place, every other axis of `x` kept: `batch | -> t, d` to
/// `batch | -> t, width`. This is what `w * x` is not: `*` contracts *all* of `x`'s output axes
/// with `w`'s input axes (`t` and `d` together for a sequence; see
/// [`Tensor::compose`](rcannl_tensor::Tensor::compose)), which is [`Dense`]'s layer.
///
/// ```
/// # use rcannl_tensor::Graph;
/// # use rcannl_nn::blocks::Linear;
/// let graph = Graph::new();
/// let x = graph.data("x").shape("2|->5,8").values(vec![0.5; 80]).build();
/// let y = Linear::new(&graph, "proj", 3).apply(&x); // 2 | -> 5, 3
/// # assert!(graph.check().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Linear {
    /// The weights, labelled `<label>.w`: input axes from use (the contracted axes' sizes), the
    /// output axes the layer's widths; no batch axes.
    pub w: Tensor,
    /// The bias, labelled `<label>.b` (`-> widths`, starting at 0), unless the options leave it
    /// out.
    pub b: Option<Tensor>,
    /// `x`'s trailing output axes contracted with `w`'s input axes.
    contracted_axes: usize,
    /// How many output axes `w` has (the widths given).
    output_axes: usize,
}

/// How a [`Linear`] layer is built: which axes it contracts, whether it has a bias, and the
/// precision of its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearOptions {
    /// How many trailing output axes of the input the layer contracts (1 by default, PyTorch's
    /// `nn.Linear`; 2 flattens `-> …, h, e` into the layer's widths, as an attention's output
    /// projection does).
    pub contracted_axes: usize,
    /// Whether the layer adds a bias (true by default, as PyTorch's `bias=True`).
    pub bias: bool,
    /// The parameters' precision; `None` (the default) leaves it to precision inference: what
    /// the layer's users compute in, else the graph's default precision.
    pub precision: Option<Precision>,
}

impl Default for LinearOptions {
    fn default() -> LinearOptions {
        LinearOptions {
            contracted_axes: 1,
            bias: true,
            precision: None,
        }
    }
}

impl LinearOptions {
    /// One contracted axis, a bias, parameters of the precision inferred from use.
    pub fn new() -> LinearOptions {
        LinearOptions::default()
    }

    /// The same contracting the last `axes` output axes of the input.
    pub fn contracted_axes(mut self, axes: usize) -> LinearOptions {
        self.contracted_axes = axes;
        self
    }

    /// The same with or without a bias.
    pub fn bias(mut self, bias: bool) -> LinearOptions {
        self.bias = bias;
        self
    }

    /// The same with parameters of `precision` (`None`: inferred from use).
    pub fn precision(mut self, precision: impl Into<Option<Precision>>) -> LinearOptions {
        self.precision = precision.into();
        self
    }
}

/// The spec's axis names `<prefix>0, <prefix>1, …` (`count` of them), comma-separated.
fn axis_names(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|i| format!("{prefix}{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `x`'s last `contracted_axes` output axes contracted with `w`'s input axes, `w`'s
/// `output_axes` output axes in their place, every other axis of `x` kept; then `b`, if given,
/// added at every position. The layer of [`Linear`] and of
/// [`PositionDense`](crate::attention::PositionDense).
pub(crate) fn dense_over_trailing_axes(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    contracted_axes: usize,
    output_axes: usize,
) -> Tensor {
    if contracted_axes == 0 || output_axes == 0 {
        return x.graph().failed_with(TensorError::new(format!(
            "Linear '{}': it must contract at least one axis into at least one, not {contracted_axes} into {output_axes}",
            w.label()
        )));
    }
    let (ins, outs) = (
        axis_names("i", contracted_axes),
        axis_names("o", output_axes),
    );
    let product = x.einsum(
        &format!("...|...->..., {ins}; {ins} -> {outs} => ...|...->..., {outs}"),
        w,
    );
    match b {
        Some(b) => product.outer_sum(
            &format!("...|...->..., {outs}; {outs} => ...|...->..., {outs}"),
            b,
        ),
        None => product,
    }
}

impl Linear {
    /// A layer of `width` outputs over the last axis, with a bias, of the precision inferred
    /// from use: the parameters
    /// `<label>.w` (LeCun uniform unless the graph's default [`Init`](rcannl_tensor::Init) was
    /// changed) and `<label>.b` (starting at 0).
    pub fn new(graph: &Graph, label: &str, width: usize) -> Linear {
        Linear::with_options(graph, label, &[width], LinearOptions::new())
    }

    /// A layer whose output axes have the sizes `widths` (`[heads, head]` gives `-> …, heads,
    /// head`), built as `options` say. With no widths, or no contracted axis, applying it is an
    /// error naming it.
    pub fn with_options(
        graph: &Graph,
        label: &str,
        widths: &[usize],
        options: LinearOptions,
    ) -> Linear {
        let param = |name: &str| {
            graph
                .param(&format!("{label}.{name}"))
                .precision(options.precision)
                .output(widths.iter().copied())
        };
        Linear {
            w: param("w").build(),
            b: options.bias.then(|| param("b").build()),
            contracted_axes: options.contracted_axes,
            output_axes: widths.len(),
        }
    }

    /// The layer at every position of `x` (`… | … -> …, d`): `… -> …, width`.
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::blocks::Linear::apply", || {
            dense_over_trailing_axes(
                x,
                &self.w,
                self.b.as_ref(),
                self.contracted_axes,
                self.output_axes,
            )
        })
    }

    /// The weights, then the bias if there is one.
    pub fn params(&self) -> Vec<Tensor> {
        std::iter::once(self.w.clone())
            .chain(self.b.clone())
            .collect()
    }
}

/// Dense layers of the given widths with `relu` between them (none after the last).
#[derive(Debug, Clone)]
pub struct Mlp {
    /// The layers, first applied first; layer `i` is labelled `<label>.<i>`.
    pub layers: Vec<Dense>,
}

impl Mlp {
    /// One [`Dense`] layer per entry of `widths`, in order, labelled `<label>.0`,
    /// `<label>.1`, …; each layer's input width comes from the one before it (the first's from
    /// use).
    pub fn new(graph: &Graph, label: &str, widths: &[usize]) -> Mlp {
        Mlp::with_precision(graph, label, widths, None)
    }

    /// The same with every layer's parameters of `precision`.
    pub fn with_precision(
        graph: &Graph,
        label: &str,
        widths: &[usize],
        precision: impl Into<Option<Precision>>,
    ) -> Mlp {
        let precision = precision.into();
        Mlp {
            layers: widths
                .iter()
                .enumerate()
                .map(|(i, &width)| {
                    Dense::with_precision(graph, &format!("{label}.{i}"), width, precision)
                })
                .collect(),
        }
    }

    /// The network applied to `x` (the parameters are shared by every application).
    #[track_caller]
    pub fn apply(&self, x: &Tensor) -> Tensor {
        x.graph().called("nn::blocks::Mlp::apply", || {
            let mut h = x.clone();
            for (i, layer) in self.layers.iter().enumerate() {
                h = layer.apply(&h);
                if i + 1 < self.layers.len() {
                    h = h.relu();
                }
            }
            h
        })
    }

    /// Every layer's weights and bias, first layer first.
    pub fn params(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(Dense::params).collect()
    }
}
