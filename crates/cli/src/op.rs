//! The operations `einsum` and `explain` run (`--op`): the tensor library's pointwise operations
//! of one and two operands, every one of them, each taking a spec or `-` for its pointwise form,
//! with its name and help made from the library's (and so the IR's) own; and the operations with
//! a call of their own, of which some must take a spec, some may and some take none. How many
//! operands each takes, and the tensor-library call that builds each.

use std::sync::LazyLock;

use clap::ValueEnum;
use clap::builder::PossibleValue;
use rcannl_ir::Binop;
use rcannl_shape::spec::{EinsumSpec, parse_einsum};
use rcannl_tensor::nary::PathOptions;
use rcannl_tensor::{BinaryOp, Tensor, UnaryOp};

use crate::report::{CliError, ErrorKind};

/// An operation over the inputs. Those computing cell by cell take a spec, at whose every point
/// they compute and add up into the result's cell (summing over the labels the result leaves
/// out), or `-` for their pointwise form, with broadcasting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// One with a call of its own.
    Special(Special),
    /// A pointwise operation of one operand.
    Unary(UnaryOp),
    /// A pointwise operation of two operands.
    Binary(BinaryOp),
}

/// The operations with a call of their own (the help shows these docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Special {
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

/// `--op`'s values: the special operations, then every unary and every binary operation of the
/// tensor library, in its order.
impl ValueEnum for Op {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: LazyLock<Vec<Op>> = LazyLock::new(|| {
            let special = Special::value_variants().iter().copied().map(Op::Special);
            special
                .chain(UnaryOp::ALL.map(Op::Unary))
                .chain(BinaryOp::ALL.map(Op::Binary))
                .collect()
        });
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (meaning, operands) = match self {
            Op::Special(special) => return special.to_possible_value(),
            Op::Unary(op) => (op.unop().meaning(), 1),
            Op::Binary(op) => (op.binop().meaning(), 2),
        };
        let gradient = if self.is_differentiable() {
            ""
        } else {
            "; no gradient"
        };
        let help = format!(
            "{}{gradient} ({operands} {}; SPEC or -)",
            plain(meaning),
            noun(operands)
        );
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl Op {
    /// The name `--op` takes: a special operation's own, and the tensor library's name of a
    /// pointwise one (the IR's word for a binary one, `add` for `+`), with `-` for `_`.
    pub fn name(self) -> String {
        match self {
            Op::Special(special) => special
                .to_possible_value()
                .map(|value| value.get_name().to_owned())
                .unwrap_or_default(),
            Op::Unary(op) => op.name().replace('_', "-"),
            Op::Binary(op) => op.binop().word().replace('_', "-"),
        }
    }

    /// Whether a gradient flows through a pointwise operation (the special ones all have one).
    fn is_differentiable(self) -> bool {
        match self {
            Op::Special(_) => true,
            Op::Unary(op) => op.is_differentiable(),
            Op::Binary(op) => op.is_differentiable(),
        }
    }

    fn spec_use(self) -> SpecUse {
        match self {
            Op::Special(
                Special::Einsum
                | Special::OuterSum
                | Special::Tropical
                | Special::Einmax
                | Special::Concat,
            ) => SpecUse::Required,
            Op::Special(Special::PointwiseAdd | Special::PointwiseMul | Special::Compose) => {
                SpecUse::None
            }
            Op::Special(Special::Where | Special::Fma) | Op::Unary(_) | Op::Binary(_) => {
                SpecUse::Optional
            }
        }
    }

    /// Whether the operation takes a spec (some take one or `-`).
    pub fn takes_spec(self) -> bool {
        self.spec_use() != SpecUse::None
    }

    /// Whether `spec` asks for the operation's pointwise form (`-`, for an operation that may
    /// take a spec or not).
    pub fn is_pointwise(self, spec: &str) -> bool {
        self.spec_use() == SpecUse::Optional && spec == "-"
    }

    /// The number of operands the operation itself requires (`None`: as many as the spec has).
    fn arity(self) -> Option<usize> {
        match self {
            Op::Special(Special::Einsum | Special::Concat) => None,
            Op::Special(Special::Einmax) | Op::Unary(_) => Some(1),
            Op::Special(
                Special::OuterSum
                | Special::Tropical
                | Special::PointwiseAdd
                | Special::PointwiseMul
                | Special::Compose,
            )
            | Op::Binary(_) => Some(2),
            Op::Special(Special::Where | Special::Fma) => Some(3),
        }
    }

    /// How the result accumulates what each point of the product space computes, as the tensor
    /// library builds the operation (a pointwise form writes each cell once, so this is a plain
    /// store there).
    pub fn accumulate(self) -> Binop {
        match self {
            Op::Special(Special::Tropical | Special::Einmax) => Binop::Max,
            _ => Binop::Add,
        }
    }

    /// What each point of the product space computes, in words.
    pub fn computes(self, operands: usize) -> String {
        let what = match self {
            Op::Special(special) => match special {
                Special::Einsum if operands == 1 => "the operand",
                Special::Einsum | Special::PointwiseMul | Special::Compose => {
                    "the product of the operands"
                }
                Special::OuterSum | Special::PointwiseAdd | Special::Tropical => {
                    "the sum of the operands"
                }
                Special::Einmax => "the operand",
                Special::Concat => "the operand whose stretch the point is in",
                Special::Where => "the second operand where the first is nonzero, else the third",
                Special::Fma => "the product of the first two operands plus the third",
            }
            .to_owned(),
            Op::Unary(op) => format!("{}, for x the operand", plain(op.unop().meaning())),
            Op::Binary(op) => format!("{}, for a and b the operands", plain(op.binop().meaning())),
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
        let special = match (self, operands) {
            (Op::Unary(op), [a]) if pointwise => return Ok(a.unary(op)),
            (Op::Unary(op), [a]) => return Ok(a.unary_spec(op, spec)),
            (Op::Binary(op), [a, b]) if pointwise => return Ok(a.binary(op, b)),
            (Op::Binary(op), [a, b]) => return Ok(a.binary_spec(op, spec, b)),
            (Op::Special(special), _) => special,
            _ => return Err(self.wrong_count(operands.len())),
        };
        Ok(match (special, operands) {
            (Special::Einsum, [a]) => a.einsum1(spec),
            // Slots of labels and row variables take the contraction path (with its
            // single-operand sums); fixed indices, strides and concatenations need the binary
            // or ternary einsum.
            (Special::Einsum, [a, b]) if !Self::along_path(spec, operands) => a.einsum(spec, b),
            (Special::Einsum, [a, b, c]) if !Self::along_path(spec, operands) => {
                a.einsum3(spec, b, c)
            }
            (Special::Einsum, _) => {
                Tensor::einsum_n_with(spec, &operands.iter().collect::<Vec<_>>(), path)
            }
            (Special::OuterSum, [a, b]) => a.outer_sum(spec, b),
            (Special::Tropical, [a, b]) => a.tropical(spec, b),
            (Special::Einmax, [a]) => a.einmax1(spec),
            (Special::Concat, _) => Tensor::concat(spec, &operands.iter().collect::<Vec<_>>()),
            (Special::Where, [c, a, b]) if pointwise => Tensor::where_(c, a, b),
            (Special::Where, [c, a, b]) => Tensor::where_spec(spec, c, a, b),
            (Special::Fma, [a, b, c]) if pointwise => Tensor::fma(a, b, c),
            (Special::Fma, [a, b, c]) => Tensor::fma_spec(spec, a, b, c),
            (Special::PointwiseAdd, [a, b]) => a + b,
            (Special::PointwiseMul, [a, b]) => a.pmul(b),
            (Special::Compose, [a, b]) => a.compose(b),
            _ => return Err(self.wrong_count(operands.len())),
        })
    }

    /// The error for a number of operands the operation does not take (which [`Op::check`]
    /// rules out first).
    fn wrong_count(self, operands: usize) -> CliError {
        CliError::new(
            ErrorKind::Arity,
            format!("{} does not take {operands} operands", self.name()),
        )
    }
}

/// A meaning in one line, in Markdown, as plain text: without its code marks and its final
/// period (`` `max(0, x)`. `` is `max(0, x)`).
fn plain(meaning: &str) -> String {
    meaning.replace('`', "").trim_end_matches('.').to_owned()
}

fn noun(n: usize) -> &'static str {
    if n == 1 { "operand" } else { "operands" }
}

fn were(n: usize) -> &'static str {
    if n == 1 { "was" } else { "were" }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_operation_has_a_name_of_its_own_that_parses_back() {
        let names: Vec<String> = Op::value_variants().iter().map(|op| op.name()).collect();
        let distinct: HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        for &op in Op::value_variants() {
            assert_eq!(Op::from_str(&op.name(), false), Ok(op));
        }
        let pointwise = UnaryOp::ALL.len() + BinaryOp::ALL.len();
        assert_eq!(
            Op::value_variants().len(),
            Special::value_variants().len() + pointwise
        );
    }

    #[test]
    fn pointwise_names_and_help_come_from_the_library() {
        let help = |op: Op| {
            op.to_possible_value()
                .and_then(|v| v.get_help().map(|h| h.to_string()))
        };
        assert_eq!(Op::Unary(UnaryOp::RecipSqrt).name(), "recip-sqrt");
        assert_eq!(Op::Binary(BinaryOp::Add).name(), "add");
        assert_eq!(
            help(Op::Unary(UnaryOp::Relu)).as_deref(),
            Some("max(0, x) (1 operand; SPEC or -)")
        );
        assert_eq!(
            help(Op::Binary(BinaryOp::Lt)).as_deref(),
            Some("1 where a < b, else 0; no gradient (2 operands; SPEC or -)")
        );
        assert_eq!(
            Op::Unary(UnaryOp::Relu).computes(1),
            "max(0, x), for x the operand, accumulated with +"
        );
    }
}
