//! The operations `einsum` and `explain` run (`--op`): which take a spec (some must, some may,
//! taking `-` for their pointwise form, and some take none), how many operands each takes, and
//! the tensor-library call that builds each.

use rcannl_ir::Binop;
use rcannl_shape::spec::{EinsumSpec, parse_einsum};
use rcannl_tensor::nary::PathOptions;
use rcannl_tensor::{BinaryOp, Tensor, UnaryOp};

use crate::report::{CliError, ErrorKind};

/// An operation over the inputs. Those computing cell by cell take a spec, at whose every point
/// they compute and add up into the result's cell (summing over the labels the result leaves
/// out), or `-` for their pointwise form, with broadcasting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    /// Products summed over the labels the result leaves out (any number of operands).
    Einsum,
    /// Sums of pairs at every combination of the spec's labels, summed over the labels the
    /// result leaves out (2 operands; the spec form of add).
    OuterSum,
    /// Max-plus product: the largest sum over the labels the result leaves out (2 operands).
    Tropical,
    /// The largest value over the labels the result leaves out; max-pooling with a window axis
    /// (1 operand).
    Einmax,
    /// Concatenation along `^` axes, each operand summed over the labels the result leaves out
    /// (any number of operands).
    Concat,
    /// Select: the second input where the first is nonzero, else the third (3 operands; SPEC
    /// or -).
    Where,
    /// a·b + c (3 operands; SPEC or -).
    Fma,
    /// Pointwise sum with broadcasting (SPEC `-`).
    PointwiseAdd,
    /// Pointwise product with broadcasting (SPEC `-`).
    PointwiseMul,
    /// The first input's input axes contracted with the second's output axes (SPEC `-`).
    Compose,
    /// −x (1 operand; SPEC or -).
    Neg,
    /// max(0, x) (1 operand; SPEC or -).
    Relu,
    /// x clamped to [0, 1] (1 operand; SPEC or -).
    Sat01,
    /// e^x (1 operand; SPEC or -).
    Exp,
    /// The natural logarithm (1 operand; SPEC or -).
    Log,
    /// 2^x (1 operand; SPEC or -).
    Exp2,
    /// The base-2 logarithm (1 operand; SPEC or -).
    Log2,
    /// sin x (1 operand; SPEC or -).
    Sin,
    /// cos x (1 operand; SPEC or -).
    Cos,
    /// √x (1 operand; SPEC or -).
    Sqrt,
    /// 1/x (1 operand; SPEC or -).
    Recip,
    /// 1/√x (1 operand; SPEC or -).
    RecipSqrt,
    /// tanh x (1 operand; SPEC or -).
    Tanh,
    /// 1 where x is 0, else 0; no gradient (1 operand; SPEC or -).
    Not,
    /// x rounded toward zero; no gradient (1 operand; SPEC or -).
    Trunc,
    /// x, through which no gradient flows (1 operand; SPEC or -).
    StopGradient,
    /// x + y (2 operands; SPEC or -).
    Add,
    /// x − y (2 operands; SPEC or -).
    Sub,
    /// x·y (2 operands; SPEC or -).
    Mul,
    /// x / y (2 operands; SPEC or -).
    Div,
    /// x^y (2 operands; SPEC or -).
    Pow,
    /// The larger, NaN winning (2 operands; SPEC or -).
    Max,
    /// The smaller, NaN winning (2 operands; SPEC or -).
    Min,
    /// 1 where x < y, else 0; no gradient (2 operands; SPEC or -).
    Lt,
    /// 1 where x = y, else 0; no gradient (2 operands; SPEC or -).
    Eq,
    /// 1 where x ≠ y, else 0; no gradient (2 operands; SPEC or -).
    Ne,
}

/// Whether an operation takes a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpecUse {
    /// It follows a spec.
    Required,
    /// A spec, or `-` for its pointwise form.
    Optional,
    /// Only `-`.
    None,
}

impl Op {
    /// The name `--op` takes.
    pub fn name(self) -> &'static str {
        match self {
            Op::Einsum => "einsum",
            Op::OuterSum => "outer-sum",
            Op::Tropical => "tropical",
            Op::Einmax => "einmax",
            Op::Concat => "concat",
            Op::Where => "where",
            Op::Fma => "fma",
            Op::PointwiseAdd => "pointwise-add",
            Op::PointwiseMul => "pointwise-mul",
            Op::Compose => "compose",
            Op::Neg => "neg",
            Op::Relu => "relu",
            Op::Sat01 => "sat01",
            Op::Exp => "exp",
            Op::Log => "log",
            Op::Exp2 => "exp2",
            Op::Log2 => "log2",
            Op::Sin => "sin",
            Op::Cos => "cos",
            Op::Sqrt => "sqrt",
            Op::Recip => "recip",
            Op::RecipSqrt => "recip-sqrt",
            Op::Tanh => "tanh",
            Op::Not => "not",
            Op::Trunc => "trunc",
            Op::StopGradient => "stop-gradient",
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::Div => "div",
            Op::Pow => "pow",
            Op::Max => "max",
            Op::Min => "min",
            Op::Lt => "lt",
            Op::Eq => "eq",
            Op::Ne => "ne",
        }
    }

    /// The tensor library's unary operation this is, if it is one.
    fn unary(self) -> Option<UnaryOp> {
        Some(match self {
            Op::Neg => UnaryOp::Neg,
            Op::Relu => UnaryOp::Relu,
            Op::Sat01 => UnaryOp::Sat01,
            Op::Exp => UnaryOp::Exp,
            Op::Log => UnaryOp::Log,
            Op::Exp2 => UnaryOp::Exp2,
            Op::Log2 => UnaryOp::Log2,
            Op::Sin => UnaryOp::Sin,
            Op::Cos => UnaryOp::Cos,
            Op::Sqrt => UnaryOp::Sqrt,
            Op::Recip => UnaryOp::Recip,
            Op::RecipSqrt => UnaryOp::RecipSqrt,
            Op::Tanh => UnaryOp::Tanh,
            Op::Not => UnaryOp::Not,
            Op::Trunc => UnaryOp::Trunc,
            Op::StopGradient => UnaryOp::StopGradient,
            _ => return None,
        })
    }

    /// The tensor library's binary operation this is, if it is one.
    fn binary(self) -> Option<BinaryOp> {
        Some(match self {
            Op::Add => BinaryOp::Add,
            Op::Sub => BinaryOp::Sub,
            Op::Mul => BinaryOp::Mul,
            Op::Div => BinaryOp::Div,
            Op::Pow => BinaryOp::Pow,
            Op::Max => BinaryOp::Max,
            Op::Min => BinaryOp::Min,
            Op::Lt => BinaryOp::Lt,
            Op::Eq => BinaryOp::Eq,
            Op::Ne => BinaryOp::Ne,
            _ => return None,
        })
    }

    fn spec_use(self) -> SpecUse {
        match self {
            Op::Einsum | Op::OuterSum | Op::Tropical | Op::Einmax | Op::Concat => SpecUse::Required,
            Op::PointwiseAdd | Op::PointwiseMul | Op::Compose => SpecUse::None,
            _ => SpecUse::Optional,
        }
    }

    /// Whether `spec` asks for the operation's pointwise form (`-`, for an operation that may
    /// take a spec or not).
    pub fn is_pointwise(self, spec: &str) -> bool {
        self.spec_use() == SpecUse::Optional && spec == "-"
    }

    /// The number of operands the operation itself requires (`None`: as many as the spec has).
    fn arity(self) -> Option<usize> {
        if self.unary().is_some() {
            return Some(1);
        }
        if self.binary().is_some() {
            return Some(2);
        }
        match self {
            Op::Einsum | Op::Concat => None,
            Op::Einmax => Some(1),
            Op::OuterSum | Op::Tropical | Op::PointwiseAdd | Op::PointwiseMul | Op::Compose => {
                Some(2)
            }
            _ => Some(3),
        }
    }

    /// How the result accumulates what each point of the product space computes, as the tensor
    /// library builds the operation (a pointwise form writes each cell once, so this is a plain
    /// store there).
    pub fn accumulate(self) -> Binop {
        match self {
            Op::Tropical | Op::Einmax => Binop::Max,
            _ => Binop::Add,
        }
    }

    /// What each point of the product space computes, in words.
    pub fn computes(self, operands: usize) -> String {
        let what = match self {
            Op::Einsum if operands == 1 => "the operand".to_owned(),
            Op::Einsum | Op::PointwiseMul | Op::Compose | Op::Mul => {
                "the product of the operands".to_owned()
            }
            Op::OuterSum | Op::PointwiseAdd | Op::Add => "the sum of the operands".to_owned(),
            Op::Tropical => "the sum of the operands".to_owned(),
            Op::Einmax => "the operand".to_owned(),
            Op::Concat => "the operand whose stretch the point is in".to_owned(),
            Op::Where => "the second operand where the first is nonzero, else the third".to_owned(),
            Op::Fma => "the product of the first two operands plus the third".to_owned(),
            Op::Sub => "the first operand minus the second".to_owned(),
            Op::Div => "the first operand divided by the second".to_owned(),
            Op::Pow => "the first operand to the power of the second".to_owned(),
            Op::Max => "the larger operand".to_owned(),
            Op::Min => "the smaller operand".to_owned(),
            Op::Lt => "1 where the first operand is less than the second, else 0".to_owned(),
            Op::Eq => "1 where the operands are equal, else 0".to_owned(),
            Op::Ne => "1 where the operands differ, else 0".to_owned(),
            _ => format!("{} of the operand", self.name()),
        };
        let accumulated = match self.accumulate() {
            Binop::Max => "max",
            _ => "+",
        };
        format!("{what}, accumulated with {accumulated}")
    }

    /// Parses the spec (for an operation that takes one) and checks that `inputs` operands fit
    /// both the spec and the operation.
    pub fn check(self, spec: &str, inputs: usize) -> Result<Option<EinsumSpec>, CliError> {
        let arity_error = |message: String| CliError::new(ErrorKind::Arity, message);
        let name = self.name();
        if self.spec_use() == SpecUse::None || self.is_pointwise(spec) {
            if spec != "-" {
                return Err(CliError::new(
                    ErrorKind::Parse,
                    format!("--op {name} takes no spec: write - in its place (got {spec:?})"),
                ));
            }
            let wanted = self.arity().unwrap_or(inputs);
            if inputs != wanted {
                return Err(arity_error(format!(
                    "{name} takes {wanted} {}, but {inputs} {} given",
                    if wanted == 1 { "input" } else { "inputs" },
                    were(inputs)
                )));
            }
            return Ok(None);
        }
        let parsed =
            parse_einsum(spec).map_err(|err| CliError::new(ErrorKind::Parse, err.to_string()))?;
        let operands = parsed.arity();
        if let Some(wanted) = self.arity()
            && wanted != operands
        {
            return Err(arity_error(format!(
                "{name} takes {wanted} {}, but the spec {spec:?} has {operands}",
                noun(wanted)
            )));
        }
        if inputs != operands {
            return Err(arity_error(format!(
                "the spec {spec:?} takes {operands} {}, but {inputs} {} given",
                noun(operands),
                were(inputs)
            )));
        }
        Ok(Some(parsed))
    }

    /// Whether an einsum of `spec` over `operands` runs along a contraction path
    /// ([`Tensor::einsum_n`]), which it does when it has one.
    pub fn along_path(spec: &str, operands: &[Tensor]) -> bool {
        operands.len() > 1
            && Tensor::einsum_path(spec, &operands.iter().collect::<Vec<_>>()).is_ok()
    }

    /// The operation over `operands` (whose number [`Op::check`] has checked).
    pub fn apply(
        self,
        spec: &str,
        operands: &[Tensor],
        path: &PathOptions,
    ) -> Result<Tensor, CliError> {
        let pointwise = self.is_pointwise(spec);
        if let ([a], Some(unary)) = (operands, self.unary()) {
            return Ok(if pointwise {
                a.unary(unary)
            } else {
                a.unary_spec(unary, spec)
            });
        }
        if let ([a, b], Some(binary)) = (operands, self.binary()) {
            return Ok(if pointwise {
                a.binary(binary, b)
            } else {
                a.binary_spec(binary, spec, b)
            });
        }
        Ok(match (self, operands) {
            (Op::Einsum, [a]) => a.einsum1(spec),
            // Slots of labels and row variables take the contraction path (with its
            // single-operand sums); fixed indices, strides and concatenations need the binary
            // or ternary einsum.
            (Op::Einsum, [a, b]) if !Self::along_path(spec, operands) => a.einsum(spec, b),
            (Op::Einsum, [a, b, c]) if !Self::along_path(spec, operands) => a.einsum3(spec, b, c),
            (Op::Einsum, _) => {
                Tensor::einsum_n_with(spec, &operands.iter().collect::<Vec<_>>(), path)
            }
            (Op::OuterSum, [a, b]) => a.outer_sum(spec, b),
            (Op::Tropical, [a, b]) => a.tropical(spec, b),
            (Op::Einmax, [a]) => a.einmax1(spec),
            (Op::Concat, _) => Tensor::concat(spec, &operands.iter().collect::<Vec<_>>()),
            (Op::Where, [c, a, b]) if pointwise => Tensor::where_(c, a, b),
            (Op::Where, [c, a, b]) => Tensor::where_spec(spec, c, a, b),
            (Op::Fma, [a, b, c]) if pointwise => Tensor::fma(a, b, c),
            (Op::Fma, [a, b, c]) => Tensor::fma_spec(spec, a, b, c),
            (Op::PointwiseAdd, [a, b]) => a + b,
            (Op::PointwiseMul, [a, b]) => a.pmul(b),
            (Op::Compose, [a, b]) => a.compose(b),
            _ => {
                return Err(CliError::new(
                    ErrorKind::Arity,
                    format!("{} does not take {} operands", self.name(), operands.len()),
                ));
            }
        })
    }
}

fn noun(n: usize) -> &'static str {
    if n == 1 { "operand" } else { "operands" }
}

fn were(n: usize) -> &'static str {
    if n == 1 { "was" } else { "were" }
}
