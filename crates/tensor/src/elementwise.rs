//! The operations of one and two operands that compute cell by cell (`relu`, `exp`, `+`, `max`,
//! `<`, …), in both their forms: pointwise, with broadcasting (`t.relu()`, `&a - &b`), and
//! following an einsum spec (`t.relu_spec("ij=>ji")`, `a.sub_spec("i;j=>ij", &b)`). They are the
//! primitives the IR's tables offer (`rcannl_ir::op_table`), declared from them with their
//! meanings, and `stop_gradient`; what this module adds to each is its gradient and its methods.
//!
//! Both forms compute `v =:+ op(v1, …)`: at every point of the product space, the operation of
//! the operands' cells there, added into the result's cell. Pointwise, every cell is written
//! once, so this is a plain store; a spec that leaves labels of the operands out of its result
//! sums over them (`"ij=>i"` gives `Σ_j op(x[i,j])`), one that permutes (`"ij=>ji"`) or takes a
//! diagonal (`"ii=>i"`) moves cells as it says, as OCANNL's `~spec` forms do.
//!
//! Each operation's gradient is a formula computed at every point of the forward product space
//! and added into the operand's gradient through the same record with the slots exchanged: the
//! derivative of the operation at that point's cells, times the result's gradient. It reads the
//! result's value `v` only in the pointwise form, where `v` is the operation at the same cells;
//! a spec's result may be a sum of several, so there the formula recomputes the operation.

use rcannl_ir::{Binop, Ternop, Unop};
use rcannl_shape::logic::Logic;

use crate::define::{Formula, accumulate_formula};
use crate::graph::{Forward, OpSpec};
use crate::ops::spec_logic;
use crate::tensor::Tensor;

/// Declares [`UnaryOp`] from the IR's [`unop_table`](rcannl_ir::unop_table): every primitive it
/// offers, then [`UnaryOp::StopGradient`].
macro_rules! declare_unary_op {
    (
        offered: {
            $(#[doc = $meaning:literal] $(#[doc = $more:literal])* $op:ident $name:literal,)*
        }
        internal: { $($internal:tt)* }
    ) => {
        /// A pointwise operation of one operand: a primitive of the IR, or
        /// [`UnaryOp::StopGradient`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $(
                #[doc = $meaning]
                $(#[doc = $more])*
                #[doc = ""]
                #[doc = concat!(" The primitive [`Unop::", stringify!($op), "`].")]
                $op,
            )*
            /// `x`, through which no gradient flows.
            StopGradient,
        }

        impl UnaryOp {
            /// Every unary operation.
            pub const ALL: [UnaryOp; [$(UnaryOp::$op,)* UnaryOp::StopGradient].len()] =
                [$(UnaryOp::$op,)* UnaryOp::StopGradient];

            /// The scalar operation.
            pub fn unop(self) -> Unop {
                match self {
                    $(UnaryOp::$op => Unop::$op,)*
                    UnaryOp::StopGradient => Unop::Identity,
                }
            }
        }
    };
}

rcannl_ir::unop_table!(declare_unary_op);

/// Declares [`BinaryOp`] from the IR's [`binop_table`](rcannl_ir::binop_table): every primitive
/// it offers.
macro_rules! declare_binary_op {
    (
        offered: {
            $(
                #[doc = $meaning:literal] $(#[doc = $more:literal])*
                $op:ident $symbol:literal $word:literal,
            )*
        }
        internal: { $($internal:tt)* }
    ) => {
        /// A pointwise operation of two operands, a primitive of the IR.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $(
                #[doc = $meaning]
                $(#[doc = $more])*
                #[doc = ""]
                #[doc = concat!(" The primitive [`Binop::", stringify!($op), "`].")]
                $op,
            )*
        }

        impl BinaryOp {
            /// Every binary operation.
            pub const ALL: [BinaryOp; [$(BinaryOp::$op,)*].len()] = [$(BinaryOp::$op,)*];

            /// The scalar operation.
            pub fn binop(self) -> Binop {
                match self {
                    $(BinaryOp::$op => Binop::$op,)*
                }
            }
        }
    };
}

rcannl_ir::binop_table!(declare_binary_op);

impl UnaryOp {
    /// The operation's name, as results are labelled and errors name it (`relu`, `recip_sqrt`).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::StopGradient => "stop_gradient",
            other => other.unop().name(),
        }
    }

    /// Whether a gradient flows through the operation: whether it has a gradient formula.
    pub fn is_differentiable(self) -> bool {
        self.gradient(Formula::result()).is_some()
    }

    /// What the gradient adds into the operand's gradient at a point: `g` times the derivative
    /// at `x`, where `v` is the operation at `x`. `None` for an operation without gradient.
    fn gradient(self, v: Formula) -> Option<Formula> {
        let (g, x) = (Formula::result_grad(), Formula::input(0));
        let ln2 = std::f64::consts::LN_2;
        Some(match self {
            UnaryOp::Neg => -g,
            // The gradient passes where x > 0, and where 0 < x < 1.
            UnaryOp::Relu => x.binop(Binop::ReluGate, g),
            UnaryOp::Sat01 => x.binop(Binop::Sat01Gate, g),
            UnaryOp::Exp => g * v,
            UnaryOp::Log => g / x,
            UnaryOp::Exp2 => g * (v * ln2),
            UnaryOp::Log2 => g / (x * ln2),
            UnaryOp::Sin => g * x.apply(Unop::Cos),
            UnaryOp::Cos => -(g * x.apply(Unop::Sin)),
            UnaryOp::Sqrt => g / (v * 2.0),
            // d(1/x) = −(1/x)².
            UnaryOp::Recip => -(g * (v.clone() * v)),
            // d(x^−½) = −½·(x^−½)³.
            UnaryOp::RecipSqrt => {
                let cube = Formula::Ternop(
                    Ternop::Mul3,
                    Box::new(v.clone()),
                    Box::new(v.clone()),
                    Box::new(v),
                );
                -(g * (cube * 0.5))
            }
            // d tanh = 1 − tanh².
            UnaryOp::Tanh => g * (1.0 - v.clone() * v),
            UnaryOp::Not | UnaryOp::Trunc | UnaryOp::StopGradient => return None,
        })
    }
}

impl BinaryOp {
    /// The operation's name, as results are labelled and errors name it (`+`, `max`, `<`). The
    /// pointwise product is `pmul`, as its method is called: `*` on tensors composes.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Mul => "pmul",
            other => other.binop().name(),
        }
    }

    /// Whether a gradient flows through the operation: whether it has gradient formulas.
    pub fn is_differentiable(self) -> bool {
        !self.gradients(Formula::result()).is_empty()
    }

    /// What the gradient adds into each operand's gradient at a point (`g` times the partial
    /// derivative there), where `v` is the operation at `x` and `y`; empty for an operation
    /// without gradient.
    fn gradients(self, v: Formula) -> Vec<(usize, Formula)> {
        let (g, x, y) = (Formula::result_grad(), Formula::input(0), Formula::input(1));
        let zero = || Formula::Const(0.0);
        match self {
            BinaryOp::Add => vec![(0, g.clone()), (1, g)],
            BinaryOp::Sub => vec![(0, g.clone()), (1, -g)],
            BinaryOp::Mul => vec![(0, g.clone() * y), (1, x * g)],
            // d(x/y)/dx = 1/y, d(x/y)/dy = −v/y.
            BinaryOp::Div => vec![(0, g.clone() / y.clone()), (1, -((g * v) / y))],
            // d(x^y)/dx = y·x^(y−1), exact for integer exponents and 0 where y is 0 (x^0 is
            // constant, even at x = 0 where x^−1 is infinite); d(x^y)/dy = v·ln x, 0 where v is
            // (x = 0 with y > 0, where ln x is −∞).
            BinaryOp::Pow => {
                let base = y
                    .clone()
                    .binop(Binop::Eq, zero())
                    .select(zero(), y.clone() * x.clone().binop(Binop::Pow, y - 1.0));
                let exponent = v
                    .clone()
                    .binop(Binop::Eq, zero())
                    .select(zero(), v * x.apply(Unop::Log));
                vec![(0, g.clone() * base), (1, g * exponent)]
            }
            // The second wins where it is strictly better; ties and NaN go to the first.
            BinaryOp::Max | BinaryOp::Min => {
                let second = match self {
                    BinaryOp::Max => x.binop(Binop::Lt, y),
                    _ => y.binop(Binop::Lt, x),
                };
                vec![
                    (0, g.clone() * second.clone().apply(Unop::Not)),
                    (1, g * second),
                ]
            }
            BinaryOp::Lt | BinaryOp::Eq | BinaryOp::Ne => Vec::new(),
        }
    }
}

impl Tensor {
    /// `op` of every cell (pointwise; see [`UnaryOp`]).
    pub fn unary(&self, op: UnaryOp) -> Tensor {
        unary_op(self, op, Logic::Pointwise(1), Formula::result())
    }

    /// `op` following `spec`, a spec of one operand (`"ij=>ji"`, `"ij=>i"`, `"ii=>i"`): at
    /// every assignment of the spec's labels, `op` of the operand's cell there, added into the
    /// result's cell there (so summed over the labels the result leaves out).
    pub fn unary_spec(&self, op: UnaryOp, spec: &str) -> Tensor {
        match spec_logic(op.name(), spec) {
            Ok(logic) => {
                let recomputed = Formula::input(0).apply(op.unop());
                unary_op(self, op, logic, recomputed)
            }
            Err(e) => self.graph.failed(e),
        }
    }

    /// `op` of the two tensors' cells, pointwise with broadcasting (see [`BinaryOp`]).
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Tensor {
        binary_op(self, other, op, Logic::Pointwise(2), Formula::result())
    }

    /// `op` following `spec`, a spec of two operands (`"i;j=>ij"`, `"ij;jk=>ik"`): at every
    /// assignment of the spec's labels, `op` of the operands' cells there, added into the
    /// result's cell there (so summed over the labels the result leaves out).
    pub fn binary_spec(&self, op: BinaryOp, spec: &str, other: &Tensor) -> Tensor {
        match spec_logic(op.name(), spec) {
            Ok(logic) => {
                let recomputed = Formula::input(0).binop(op.binop(), Formula::input(1));
                binary_op(self, other, op, logic, recomputed)
            }
            Err(e) => self.graph.failed(e),
        }
    }
}

/// `v =:+ op(v1)` under `logic`, with `v` (what the gradient reads for the operation's value).
fn unary_op(t: &Tensor, op: UnaryOp, logic: Logic, v: Formula) -> Tensor {
    let forward = OpSpec::new(Binop::Add, Forward::Unop(op.unop()));
    let spec = match op.gradient(v) {
        Some(gradient) => forward.gradient(move |grad| accumulate_formula(grad, 0, 1, &gradient)),
        None => forward.not_differentiable(),
    };
    t.graph.apply(op.name(), logic, &[t], spec)
}

/// `v =:+ v1 op v2` under `logic`, with `v` (what the gradients read for the operation's value).
fn binary_op(a: &Tensor, b: &Tensor, op: BinaryOp, logic: Logic, v: Formula) -> Tensor {
    let forward = OpSpec::new(Binop::Add, Forward::Binop(op.binop()));
    let gradients = op.gradients(v);
    let spec = if gradients.is_empty() {
        forward.not_differentiable()
    } else {
        forward.gradient(move |grad| {
            for (i, gradient) in &gradients {
                accumulate_formula(grad, *i, 2, gradient)?;
            }
            Ok(())
        })
    };
    a.graph.apply(op.name(), logic, &[a, b], spec)
}

/// The named forms of every operation: the pointwise method and its spec form.
macro_rules! unary_forms {
    ($($op:ident: $pointwise:ident, $with_spec:ident;)*) => {
        impl Tensor {
            $(
                #[doc = concat!("[`UnaryOp::", stringify!($op), "`] of every cell.")]
                pub fn $pointwise(&self) -> Tensor {
                    self.unary(UnaryOp::$op)
                }

                #[doc = concat!(
                    "[`UnaryOp::", stringify!($op), "`] following `spec` (see ",
                    "[`Tensor::unary_spec`])."
                )]
                pub fn $with_spec(&self, spec: &str) -> Tensor {
                    self.unary_spec(UnaryOp::$op, spec)
                }
            )*
        }
    };
}

unary_forms! {
    Neg: neg, neg_spec;
    Relu: relu, relu_spec;
    Sat01: sat01, sat01_spec;
    Exp: exp, exp_spec;
    Log: log, log_spec;
    Exp2: exp2, exp2_spec;
    Log2: log2, log2_spec;
    Sin: sin, sin_spec;
    Cos: cos, cos_spec;
    Sqrt: sqrt, sqrt_spec;
    Recip: recip, recip_spec;
    RecipSqrt: recip_sqrt, recip_sqrt_spec;
    Tanh: tanh, tanh_spec;
    Not: not, not_spec;
    Trunc: trunc, trunc_spec;
    StopGradient: stop_gradient, stop_gradient_spec;
}

/// The spec forms of the binary operations (their pointwise forms are the operators `+`, `-`,
/// `/` and the methods below, or [`Tensor::binary`]).
macro_rules! binary_spec_forms {
    ($($op:ident: $with_spec:ident;)*) => {
        impl Tensor {
            $(
                #[doc = concat!(
                    "[`BinaryOp::", stringify!($op), "`] following `spec` (see ",
                    "[`Tensor::binary_spec`])."
                )]
                pub fn $with_spec(&self, spec: &str, other: &Tensor) -> Tensor {
                    self.binary_spec(BinaryOp::$op, spec, other)
                }
            )*
        }
    };
}

binary_spec_forms! {
    Add: add_spec;
    Sub: sub_spec;
    Mul: pmul_spec;
    Div: div_spec;
    Pow: pow_spec;
    Max: max_spec;
    Min: min_spec;
    Lt: lt_spec;
    Eq: eq_spec;
    Ne: ne_spec;
}

/// The pointwise binary operations that are methods (`+`, `-` and `/` are operators).
macro_rules! binary_methods {
    ($($op:ident: $pointwise:ident;)*) => {
        impl Tensor {
            $(
                #[doc = concat!(
                    "[`BinaryOp::", stringify!($op), "`], pointwise with broadcasting."
                )]
                pub fn $pointwise(&self, other: &Tensor) -> Tensor {
                    self.binary(BinaryOp::$op, other)
                }
            )*
        }
    };
}

binary_methods! {
    Mul: pmul;
    Pow: pow;
    Max: max;
    Min: min;
    Lt: lt;
    Eq: eq;
    Ne: ne;
}
