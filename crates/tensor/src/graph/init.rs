//! How parameters are initialized: an [`Init`] as the user gives it, resolved to a [`Draw`] once
//! the graph's default and the parameter's fan-in and fan-out are known.

use crate::tensor::Tensor;

/// How a parameter starts. The fan-based schemes read the parameter's inferred shape: its
/// fan-in is the number of its input cells (the product of its input axes), its fan-out the
/// number of its output cells times the size of its convolution window, if it declares one
/// ([`LeafBuilder::window_axes`](crate::LeafBuilder::window_axes)): PyTorch's fans, which
/// [`Context::fans`](crate::Context::fans) gives. A parameter without input axes (a bias) starts
/// at 0 under them.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Init {
    /// The graph's default ([`Graph::set_default_init`](crate::Graph::set_default_init)), [`Init::LecunUniform`] unless changed.
    #[default]
    Default,
    /// Uniform in `[-√(3/fan_in), √(3/fan_in))`: variance `1/fan_in`.
    LecunUniform,
    /// Kaiming (He) uniform for layers followed by ReLU: `[-√(6/fan_in), √(6/fan_in))`,
    /// variance `2/fan_in`.
    KaimingUniform,
    /// Kaiming (He) normal for layers followed by ReLU: deviation `√(2/fan_in)`.
    KaimingNormal,
    /// Kaiming uniform scaled by the fan-out, PyTorch's `kaiming_uniform_(mode='fan_out')`:
    /// `[-√(6/fan_out), √(6/fan_out))`, keeping the gradients' variance through the layer
    /// rather than the activations'.
    KaimingUniformFanOut,
    /// Kaiming normal scaled by the fan-out, PyTorch's `kaiming_normal_(mode='fan_out',
    /// nonlinearity='relu')` (torchvision's ResNets initialize their convolutions so):
    /// deviation `√(2/fan_out)`. A convolution kernel's fan-out counts its window, as PyTorch's.
    KaimingNormalFanOut,
    /// Xavier (Glorot) uniform: `[-√(6/(fan_in + fan_out)), √(6/(fan_in + fan_out)))`.
    XavierUniform,
    /// Xavier (Glorot) normal: deviation `√(2/(fan_in + fan_out))`.
    XavierNormal,
    /// Uniform in `[low, high)`.
    Uniform(f64, f64),
    /// Normal with this mean and standard deviation (Box–Muller).
    Normal(f64, f64),
    /// Every cell holds this value.
    Constant(f64),
    /// These values, row-major in memory order.
    Values(Vec<f64>),
    /// The values of a tensor expression of the graph, computed when the parameter is
    /// initialized (after every parameter initialized otherwise, so that it may read them); it
    /// has the parameter's shape.
    Expr(Tensor),
}

/// How a parameter's values are drawn, once the graph's default is resolved and its fan-in and
/// fan-out are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Draw {
    Fill(f64),
    Random(Random),
    Values(Vec<f64>),
    Expr(Tensor),
}

/// A random draw of every cell of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Random {
    /// Uniform in `[low, high)`.
    Uniform(f64, f64),
    /// Normal with this mean and standard deviation.
    Normal(f64, f64),
}

impl Init {
    /// What makes the init meaningless, if anything.
    pub(super) fn problem(&self) -> Option<&'static str> {
        match *self {
            Init::Uniform(low, high) if !(low.is_finite() && high.is_finite()) => {
                Some("needs finite bounds")
            }
            Init::Uniform(low, high) if low >= high => Some("needs low < high"),
            Init::Normal(mean, std) if !(mean.is_finite() && std.is_finite()) => {
                Some("needs a finite mean and deviation")
            }
            Init::Normal(_, std) if std < 0.0 => Some("needs a deviation of at least 0"),
            Init::Constant(c) if !c.is_finite() => Some("needs a finite value"),
            _ => None,
        }
    }

    /// The draw of a parameter with this init (`Default` resolved to `default`), `fan_in` input
    /// cells and `fan_out` output cells.
    pub(crate) fn draw(&self, default: &Init, fan_in: usize, fan_out: usize) -> Draw {
        let scheme = |scale: f64, fans: usize, normal: bool| {
            if fan_in == 0 {
                return Draw::Fill(0.0);
            }
            let variance = scale / fans as f64;
            if normal {
                Draw::Random(Random::Normal(0.0, variance.sqrt()))
            } else {
                let bound = (3.0 * variance).sqrt();
                Draw::Random(Random::Uniform(-bound, bound))
            }
        };
        match self {
            Init::Default if *default == Init::Default => {
                Init::LecunUniform.draw(default, fan_in, fan_out)
            }
            Init::Default => default.draw(&Init::LecunUniform, fan_in, fan_out),
            Init::LecunUniform => scheme(1.0, fan_in, false),
            Init::KaimingUniform => scheme(2.0, fan_in, false),
            Init::KaimingNormal => scheme(2.0, fan_in, true),
            Init::KaimingUniformFanOut => scheme(2.0, fan_out, false),
            Init::KaimingNormalFanOut => scheme(2.0, fan_out, true),
            Init::XavierUniform => scheme(2.0, fan_in + fan_out, false),
            Init::XavierNormal => scheme(2.0, fan_in + fan_out, true),
            Init::Uniform(low, high) => Draw::Random(Random::Uniform(*low, *high)),
            Init::Normal(mean, std) => Draw::Random(Random::Normal(*mean, *std)),
            Init::Constant(c) => Draw::Fill(*c),
            Init::Values(values) => Draw::Values(values.clone()),
            Init::Expr(t) => Draw::Expr(t.clone()),
        }
    }
}
