//! The operations `einsum` and `explain` run (`--op`): which take a spec, how many operands each
//! takes, and the tensor-library call that builds each.

use rcannl_ir::Binop;
use rcannl_shape::spec::{EinsumSpec, parse_einsum};
use rcannl_tensor::Tensor;
use rcannl_tensor::nary::PathOptions;

use crate::report::{CliError, ErrorKind};

/// An operation over the inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    /// Products summed over the labels the result leaves out (1, 2 or 3 operands).
    Einsum,
    /// Sums of pairs at every combination of the spec's labels (2 operands).
    OuterSum,
    /// Max-plus product: the largest sum over the labels the result leaves out (2 operands).
    Tropical,
    /// The largest value over the labels the result leaves out; max-pooling with a window axis
    /// (1 operand).
    Einmax,
    /// Concatenation along `^` axes (any number of operands).
    Concat,
    /// Pointwise select: the second input where the first is nonzero, else the third (SPEC `-`).
    Where,
    /// Pointwise sum with broadcasting (SPEC `-`).
    PointwiseAdd,
    /// Pointwise product with broadcasting (SPEC `-`).
    PointwiseMul,
    /// The first input's input axes contracted with the second's output axes (SPEC `-`).
    Compose,
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
            Op::PointwiseAdd => "pointwise-add",
            Op::PointwiseMul => "pointwise-mul",
            Op::Compose => "compose",
        }
    }

    /// Whether the operation follows an einsum spec (the others take `-` in its place).
    pub fn takes_spec(self) -> bool {
        !matches!(
            self,
            Op::Where | Op::PointwiseAdd | Op::PointwiseMul | Op::Compose
        )
    }

    /// The number of operands the operation itself requires (`None`: as many as the spec has).
    fn arity(self) -> Option<usize> {
        match self {
            Op::Einsum | Op::Concat => None,
            Op::Einmax => Some(1),
            Op::OuterSum | Op::Tropical | Op::PointwiseAdd | Op::PointwiseMul | Op::Compose => {
                Some(2)
            }
            Op::Where => Some(3),
        }
    }

    /// How the result accumulates what each point of the product space computes, as the tensor
    /// library builds the operation (`Arg2`: plain stores).
    pub fn accumulate(self) -> Binop {
        match self {
            Op::Einsum | Op::Compose | Op::OuterSum | Op::Concat => Binop::Add,
            Op::Tropical | Op::Einmax => Binop::Max,
            Op::Where | Op::PointwiseAdd | Op::PointwiseMul => Binop::Arg2,
        }
    }

    /// What each point of the product space computes, in words.
    pub fn computes(self, operands: usize) -> &'static str {
        match self {
            Op::Einsum if operands == 1 => "the operand, accumulated with +",
            Op::Einsum => "the product of the operands, accumulated with +",
            Op::OuterSum => "the sum of the operands, accumulated with +",
            Op::Tropical => "the sum of the operands, accumulated with max",
            Op::Einmax => "the operand, accumulated with max",
            Op::Concat => "the operand whose stretch the point is in, accumulated with +",
            Op::Where => "the second operand where the first is nonzero, else the third, stored",
            Op::PointwiseAdd => "the sum of the operands, stored",
            Op::PointwiseMul => "the product of the operands, stored",
            Op::Compose => "the product of the operands, accumulated with +",
        }
    }

    /// Parses the spec (for an operation that takes one) and checks that `inputs` operands fit
    /// both the spec and the operation.
    pub fn check(self, spec: &str, inputs: usize) -> Result<Option<EinsumSpec>, CliError> {
        let arity_error = |message: String| CliError::new(ErrorKind::Arity, message);
        let name = self.name();
        if !self.takes_spec() {
            if spec != "-" {
                return Err(CliError::new(
                    ErrorKind::Parse,
                    format!("--op {name} takes no spec: write - in its place (got {spec:?})"),
                ));
            }
            let wanted = self.arity().unwrap_or(inputs);
            if inputs != wanted {
                return Err(arity_error(format!(
                    "{name} takes {wanted} inputs, but {inputs} {} given",
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
            (Op::Where, [c, a, b]) => Tensor::where_(c, a, b),
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
