//! The activation functions that are not primitives of the IR (`sigmoid`, `abs`, `gelu`,
//! `gelu_tanh`, `silu`, `softplus`): each one a single fused operation, its value and its
//! derivative composed from primitives as formulas computed in place at every cell, in the
//! pointwise form (`t.sigmoid()`) and following an einsum spec (`t.activation_spec(op, "ij=>i")`).
//!
//! The gradient formulas read the operand only, never the result: in a spec's form the result's
//! cell may be a sum of several, so both forms share one definition.
//!
//! The exact GELU needs the error function, which the IR does not have: it is composed from
//! Numerical Recipes' Chebyshev fit of `erfc` (Press et al., *Numerical Recipes*, 2nd ed., §6.2,
//! `erfcc`), whose *relative* error is below 1.2·10⁻⁷ for every argument. Relative, not
//! absolute: far in the negative tail, where GELU is a tiny number, it keeps its digits (an
//! absolute-error fit such as Abramowitz–Stegun 7.1.26 would not). So `gelu` is exact to about
//! 1.2·10⁻⁷ relative in f64, and to f32's own rounding in f32; its derivative is the exact one,
//! `Φ(x) + x·φ(x)`, with the same `Φ`.

use rcannl_ir::{Binop, Ternop, Unop};

use crate::define::{Definition, Formula, OpLogic, Term};
use crate::tensor::Tensor;

/// A pointwise activation function with its derivative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// The logistic function `1 / (1 + e⁻ˣ)`: 0 for `x = −1000`, 1 for `x = 1000`.
    Sigmoid,
    /// `|x|`; its gradient is the sign of `x` (0 at 0, as PyTorch's).
    Abs,
    /// The exact GELU `x·Φ(x)`, `Φ` the standard normal distribution function (PyTorch's
    /// default `gelu`); see the module's page for its accuracy.
    Gelu,
    /// GELU's tanh approximation `½x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` (PyTorch's
    /// `gelu(approximate="tanh")`), computed as `x·sigmoid(2√(2/π)·(x + 0.044715·x³))`, the same
    /// function without the cancellation of `1 + tanh` in the negative tail.
    GeluTanh,
    /// `x·sigmoid(x)` (also called swish).
    Silu,
    /// `log(1 + eˣ)`, computed as `max(x, 0) + log1p(e^−|x|)`: `x` for large `x` (1000 gives
    /// 1000, not infinity), `eˣ` to full precision for very negative `x`.
    Softplus,
}

impl Activation {
    /// Every activation.
    pub const ALL: [Activation; 6] = [
        Activation::Sigmoid,
        Activation::Abs,
        Activation::Gelu,
        Activation::GeluTanh,
        Activation::Silu,
        Activation::Softplus,
    ];

    /// The activation's name, as results are labelled (`sigmoid`, `gelu_tanh`).
    pub fn name(self) -> &'static str {
        match self {
            Activation::Sigmoid => "sigmoid",
            Activation::Abs => "abs",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
            Activation::Softplus => "softplus",
        }
    }

    /// The activation of a number, computed by the same formula a tensor's cells are (in f64).
    pub fn apply(self, x: f64) -> f64 {
        evaluate(&self.value(Formula::input(0)), x)
    }

    /// The derivative at a number, by the same formula the gradient uses (in f64).
    pub fn derivative_at(self, x: f64) -> f64 {
        evaluate(&self.derivative(Formula::input(0)), x)
    }

    /// The activation of `x`.
    fn value(self, x: Formula) -> Formula {
        match self {
            Activation::Sigmoid => sigmoid(x),
            Activation::Abs => x.clone().binop(Binop::Max, -x),
            Activation::Gelu => x.clone() * normal_cdf(x),
            // ½(1 + tanh u) = sigmoid(2u), which keeps its digits where tanh u is near −1.
            Activation::GeluTanh => x.clone() * sigmoid(2.0 * gelu_tanh_inner(x)),
            Activation::Silu => x.clone() * sigmoid(x),
            Activation::Softplus => {
                // e^−|x| lies in (0, 1]: log(1 + e^−|x|) neither overflows nor loses `x`.
                let tail = x.clone().binop(Binop::Min, -x.clone()).apply(Unop::Exp);
                x.binop(Binop::Max, Formula::Const(0.0)) + log1p(tail)
            }
        }
    }

    /// The derivative at `x`.
    fn derivative(self, x: Formula) -> Formula {
        match self {
            Activation::Sigmoid => {
                let s = sigmoid(x);
                s.clone() * (1.0 - s)
            }
            Activation::Abs => less_than_zero(x.clone()).select(
                Formula::Const(-1.0),
                Formula::Const(0.0)
                    .binop(Binop::Lt, x)
                    .select(Formula::Const(1.0), Formula::Const(0.0)),
            ),
            Activation::Gelu => {
                // Φ(x) + x·φ(x), φ(x) = e^(−x²/2) / √(2π).
                let density = (-0.5 * (x.clone() * x.clone())).apply(Unop::Exp)
                    * (1.0 / (2.0 * std::f64::consts::PI).sqrt());
                normal_cdf(x.clone()) + x * density
            }
            Activation::GeluTanh => {
                // d(x·s(2u)) = s + x·s·(1 − s)·2u', s = sigmoid(2u).
                let s = sigmoid(2.0 * gelu_tanh_inner(x.clone()));
                let inner_slope =
                    (2.0 / std::f64::consts::PI).sqrt() * (1.0 + 3.0 * GELU_CUBIC * square(&x));
                s.clone() + x * s.clone() * (1.0 - s) * (2.0 * inner_slope)
            }
            Activation::Silu => {
                let s = sigmoid(x.clone());
                s.clone() * (1.0 + x * (1.0 - s))
            }
            Activation::Softplus => sigmoid(x),
        }
    }

    /// The operation's definition under `logic`: the activation accumulated into the result,
    /// its derivative times `g` into the operand's gradient.
    fn definition(self, logic: OpLogic) -> Definition {
        let x = Formula::input(0);
        Definition {
            logic,
            accum: Binop::Add,
            forward: self.value(x.clone()),
            gradients: vec![(0, Formula::result_grad() * self.derivative(x))],
        }
    }
}

impl Tensor {
    /// `op` of every cell (pointwise; see [`Activation`]).
    pub fn activation(&self, op: Activation) -> Tensor {
        self.graph
            .define(op.name(), &[self], op.definition(OpLogic::Pointwise))
    }

    /// `op` following `spec`, a spec of one operand (`"ij=>ji"`, `"ij=>i"`): at every
    /// assignment of the spec's labels, `op` of the operand's cell there, added into the
    /// result's cell there (so summed over the labels the result leaves out).
    pub fn activation_spec(&self, op: Activation, spec: &str) -> Tensor {
        self.graph.define(
            op.name(),
            &[self],
            op.definition(OpLogic::Spec(spec.to_owned())),
        )
    }

    /// [`Activation::Sigmoid`] of every cell.
    pub fn sigmoid(&self) -> Tensor {
        self.activation(Activation::Sigmoid)
    }

    /// [`Activation::Abs`] of every cell.
    pub fn abs(&self) -> Tensor {
        self.activation(Activation::Abs)
    }

    /// [`Activation::Gelu`] (exact, erf-based) of every cell.
    pub fn gelu(&self) -> Tensor {
        self.activation(Activation::Gelu)
    }

    /// [`Activation::GeluTanh`] (the tanh approximation of GELU) of every cell.
    pub fn gelu_tanh(&self) -> Tensor {
        self.activation(Activation::GeluTanh)
    }

    /// [`Activation::Silu`] of every cell.
    pub fn silu(&self) -> Tensor {
        self.activation(Activation::Silu)
    }

    /// [`Activation::Softplus`] of every cell.
    pub fn softplus(&self) -> Tensor {
        self.activation(Activation::Softplus)
    }
}

/// The cubic coefficient of GELU's tanh approximation.
const GELU_CUBIC: f64 = 0.044715;

fn square(x: &Formula) -> Formula {
    x.clone() * x.clone()
}

fn less_than_zero(x: Formula) -> Formula {
    x.binop(Binop::Lt, Formula::Const(0.0))
}

/// `1 / (1 + e⁻ˣ)`: for very negative `x`, `e⁻ˣ` overflows to infinity and the quotient is 0,
/// as it should be.
fn sigmoid(x: Formula) -> Formula {
    (1.0 + (-x).apply(Unop::Exp)).apply(Unop::Recip)
}

/// `√(2/π)·(x + 0.044715·x³)`.
fn gelu_tanh_inner(x: Formula) -> Formula {
    let cube = Formula::Ternop(
        Ternop::Mul3,
        Box::new(x.clone()),
        Box::new(x.clone()),
        Box::new(x.clone()),
    );
    (2.0 / std::f64::consts::PI).sqrt() * (x + GELU_CUBIC * cube)
}

/// `log(1 + e)` for `e` in `[0, 1]`, accurate where `1 + e` rounds `e` away (Goldberg's
/// correction: `e·log(w) / (w − 1)` with `w = 1 + e` cancels the rounding of `w`, and `e`
/// itself where `w` rounds to 1). It relies on `(1 + e) − 1` being computed as written, which
/// holds: routines are compiled without reassociating floating-point arithmetic.
fn log1p(e: Formula) -> Formula {
    let w = 1.0 + e.clone();
    w.clone()
        .binop(Binop::Eq, Formula::Const(1.0))
        .select(e.clone(), e * w.clone().apply(Unop::Log) / (w - 1.0))
}

/// `Φ(x)`, the standard normal distribution function: `½·erfc(−x/√2)`, with `erfc` of a
/// negative argument as `2 − erfc` of the positive one, so that both tails keep their relative
/// precision.
fn normal_cdf(x: Formula) -> Formula {
    let magnitude = x.clone().binop(Binop::Max, -x.clone()) * std::f64::consts::FRAC_1_SQRT_2;
    let half_tail = 0.5 * erfc_of_nonnegative(magnitude);
    less_than_zero(x).select(half_tail.clone(), 1.0 - half_tail)
}

/// The coefficients of Numerical Recipes' `erfcc`, lowest power of `t` first.
const ERFC_COEFFICIENTS: [f64; 10] = [
    -1.265_512_23,
    1.000_023_68,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_203_98,
    1.488_515_87,
    -0.822_152_23,
    0.170_872_77,
];

/// `erfc(z)` for `z ≥ 0` (relative error below 1.2·10⁻⁷): `t·exp(−z² + P(t))`, `t = 1/(1 +
/// z/2)`, `P` the polynomial of [`ERFC_COEFFICIENTS`] evaluated by Horner's rule.
fn erfc_of_nonnegative(z: Formula) -> Formula {
    let t = (1.0 + 0.5 * z.clone()).apply(Unop::Recip);
    let (highest, rest) = ERFC_COEFFICIENTS
        .split_last()
        .expect("the fit has coefficients");
    let polynomial = rest
        .iter()
        .rev()
        .fold(Formula::Const(*highest), |acc, &c| c + t.clone() * acc);
    t * (polynomial - square(&z)).apply(Unop::Exp)
}

/// The value of a formula of one operand at `x`, in f64.
fn evaluate(formula: &Formula, x: f64) -> f64 {
    match formula {
        Formula::Term(Term::Input(0)) => x,
        Formula::Term(_) => f64::NAN,
        Formula::Const(c) => *c,
        Formula::Unop(op, a) => op.apply(evaluate(a, x)),
        Formula::Binop(op, a, b) => op.apply(evaluate(a, x), evaluate(b, x)),
        Formula::Ternop(op, a, b, c) => op.apply(evaluate(a, x), evaluate(b, x), evaluate(c, x)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(x, f(x))` computed offline with Python's `math` module in double precision:
    /// `1/(1+exp(-x))` (as `exp(x)/(1+exp(x))` for negative `x`), `0.5*x*erfc(-x/sqrt(2))`,
    /// `x/(1+exp(-2*sqrt(2/pi)*(x+0.044715*x**3)))` (GELU's tanh approximation without the
    /// cancellation of `1+tanh`), `x*sigmoid(x)` and
    /// `max(x,0)+log1p(exp(-abs(x)))`.
    /// An activation, its `(x, f(x))` references, and the relative tolerance.
    type References = (Activation, &'static [(f64, f64)], f64);

    const REFERENCES: [References; 5] = [
        (
            Activation::Sigmoid,
            &[
                (-1000.0, 0.0),
                (-30.0, 9.3576229688393e-14),
                (-3.0, 0.04742587317756679),
                (0.0, 0.5),
                (1.0, 0.7310585786300049),
                (8.0, 0.9996646498695336),
                (1000.0, 1.0),
            ],
            1e-14,
        ),
        (
            Activation::Gelu,
            &[
                (-1000.0, -0.0),
                (-30.0, -1.4720141781446293e-196),
                (-6.0, -5.919525870226207e-09),
                (-3.0, -0.004049694094890287),
                (-1.5, -0.10021080190328713),
                (-0.5, -0.15426876936299344),
                (0.0, 0.0),
                (0.3, 0.18537342665668577),
                (1.0, 0.8413447460685429),
                (2.5, 2.4844758366855597),
                (8.0, 7.999999999999995),
                (1000.0, 1000.0),
            ],
            // The erfc fit's relative error.
            1.2e-7,
        ),
        (
            Activation::GeluTanh,
            &[
                (-6.0, -8.43964670076231e-11),
                (-1.5, -0.10042842301976705),
                (0.3, 0.18537092354275925),
                (1.0, 0.8411919906082768),
                (2.5, 2.484915733910001),
                (1000.0, 1000.0),
            ],
            1e-13,
        ),
        (
            Activation::Silu,
            &[
                (-1000.0, -0.0),
                (-30.0, -2.80728689065179e-12),
                (-1.5, -0.27363828570953447),
                (0.3, 0.1723327550434977),
                (2.5, 2.3103545499468914),
                (1000.0, 1000.0),
            ],
            1e-14,
        ),
        (
            Activation::Softplus,
            &[
                (-1000.0, 0.0),
                (-30.0, 9.357622968839737e-14),
                (-6.0, 0.0024756851377304495),
                (-0.5, 0.4740769841801067),
                (0.0, std::f64::consts::LN_2),
                (1.0, 1.3132616875182228),
                (8.0, 8.000335406372896),
                (1000.0, 1000.0),
            ],
            1e-14,
        ),
    ];

    #[test]
    fn values_match_python_references() {
        for (op, cases, tolerance) in REFERENCES {
            for &(x, expected) in cases {
                let got = op.apply(x);
                assert!(
                    (got - expected).abs() <= tolerance * expected.abs(),
                    "{}({x}) = {got:e}, expected {expected:e}",
                    op.name()
                );
            }
        }
    }

    /// `d/dx 0.5*x*erfc(-x/sqrt(2))`, computed offline with Python's `math` module. Where the
    /// two terms of `Φ(x) + x·φ(x)` nearly cancel (around −0.75), `Φ`'s relative error becomes
    /// an absolute one, hence the absolute part of the tolerance.
    #[test]
    fn the_gelu_derivative_matches_python_references() {
        let cases = [
            (-30.0, -4.416031690708494e-195),
            (-6.0, -3.5468709453902015e-08),
            (-0.5, 0.13250487534383712),
            (0.0, 0.5),
            (1.0, 1.0833154705876864),
            (2.5, 1.037611085908145),
        ];
        for (x, expected) in cases {
            let got = Activation::Gelu.derivative_at(x);
            assert!(
                (got - expected).abs() <= 1.2e-7 * expected.abs() + 5e-8,
                "gelu'({x}) = {got:e}, expected {expected:e}"
            );
        }
    }

    #[test]
    fn abs_and_its_sign() {
        let abs = Activation::Abs;
        assert_eq!(
            [abs.apply(-2.5), abs.apply(0.0), abs.apply(3.0)],
            [2.5, 0.0, 3.0]
        );
        let slopes = [-2.5, 0.0, 3.0].map(|x| abs.derivative_at(x));
        assert_eq!(slopes, [-1.0, 0.0, 1.0]);
    }
}
