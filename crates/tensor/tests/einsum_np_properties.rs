//! Property test of `Tensor::einsum_np`: random numpy-notation einsums (one to four operands,
//! repeated labels, capitals among the labels, `...` anywhere in a term standing for up to two
//! broadcast axes, axes of size 1 facing longer ones under a shared label or in `...`, now and then
//! a zero-size axis, implicit and explicit results, spaces) over operands of fitting shapes,
//! compared with a naive evaluation of numpy's rules (`support/naive_einsum.rs`) on the
//! interpreter and then on the C backend.

#[path = "support/einsum_np_check.rs"]
mod einsum_np_check;
#[path = "support/naive_einsum.rs"]
mod naive_einsum;

use proptest::prelude::*;

use einsum_np_check::{compare, run_einsum};
use naive_einsum::Plan;
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};

/// The labels expressions draw from: capitals sort before lower case in an implicit result.
const LABELS: [char; 6] = ['a', 'b', 'c', 'd', 'A', 'B'];

/// One operand as drawn: labels (indices into [`LABELS`]) with, per label, whether this operand
/// has size 1 there; where `...` goes (clamped to the labels) and how many of the broadcast axes
/// it stands for (clamped to them, taken from the right), with which of those are 1 here.
#[derive(Debug, Clone)]
struct OperandDraw {
    labels: Vec<(usize, bool)>,
    ellipsis: Option<(usize, usize, [bool; 2])>,
}

/// A whole expression as drawn.
#[derive(Debug, Clone)]
struct Draw {
    /// Size per label.
    sizes: Vec<usize>,
    /// The broadcast axes `...` may stand for.
    broadcast: Vec<usize>,
    operands: Vec<OperandDraw>,
    /// An explicit result: labels (kept if some operand has them, once) and where `...` goes.
    result: Option<(Vec<usize>, usize)>,
    /// Whether terms are separated by spaces as well.
    spaced: bool,
}

/// An expression ready to run: the equation and the operands' shapes.
#[derive(Debug, Clone)]
struct Expression {
    equation: String,
    shapes: Vec<Vec<usize>>,
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 2..=3usize, 3 => Just(1), 1 => Just(0)]
}

fn operand() -> impl Strategy<Value = OperandDraw> {
    (
        proptest::collection::vec((0..LABELS.len(), proptest::bool::weighted(0.25)), 0..=3),
        proptest::option::weighted(
            0.5,
            (
                0..=3usize,
                0..=2usize,
                proptest::array::uniform2(proptest::bool::weighted(0.25)),
            ),
        ),
    )
        .prop_map(|(labels, ellipsis)| OperandDraw { labels, ellipsis })
}

fn draw() -> impl Strategy<Value = Draw> {
    (
        proptest::collection::vec(size(), LABELS.len()),
        proptest::collection::vec(2..=3usize, 0..=2),
        proptest::collection::vec(operand(), 1..=4),
        proptest::option::of((
            proptest::collection::vec(0..LABELS.len(), 0..=4),
            0..=4usize,
        )),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(sizes, broadcast, operands, result, spaced)| Draw {
            sizes,
            broadcast,
            operands,
            result,
            spaced,
        })
}

impl Draw {
    /// The equation and shapes the draw stands for; numpy accepts every one of them.
    fn expression(&self) -> Expression {
        let rank = self.broadcast.len();
        let mut terms = Vec::new();
        let mut shapes = Vec::new();
        for operand in &self.operands {
            let mut term: Vec<String> = Vec::new();
            let mut shape = Vec::new();
            for (j, &(label, one)) in operand.labels.iter().enumerate() {
                // A repeated label is a diagonal: its sizes within the operand must be equal.
                let first = operand.labels[..j].iter().find(|(l, _)| *l == label);
                let one = first.map_or(one, |&(_, one)| one);
                term.push(LABELS[label].to_string());
                shape.push(if one { 1 } else { self.sizes[label] });
            }
            if let Some((at, covered, ones)) = operand.ellipsis {
                let at = at.min(term.len());
                let covered = covered.min(rank);
                let dims = self.broadcast[rank - covered..]
                    .iter()
                    .zip(ones)
                    .map(|(&size, one)| if one { 1 } else { size });
                term.insert(at, "...".to_owned());
                shape.splice(at..at, dims);
            }
            terms.push(term.concat());
            shapes.push(shape);
        }
        let separator = if self.spaced { ", " } else { "," };
        let mut equation = terms.join(separator);
        if let Some((labels, at)) = &self.result {
            let mut result: Vec<String> = Vec::new();
            for &label in labels {
                let name = LABELS[label].to_string();
                let held = self
                    .operands
                    .iter()
                    .any(|o| o.labels.iter().any(|(l, _)| *l == label));
                if held && !result.contains(&name) {
                    result.push(name);
                }
            }
            // `...` must be in the result when it stands for axes; it may be when it does not.
            if self.operands.iter().any(|o| o.ellipsis.is_some()) || *at == 0 {
                result.insert((*at).min(result.len()), "...".to_owned());
            }
            equation.push_str(if self.spaced { " -> " } else { "->" });
            equation.push_str(&result.concat());
        }
        Expression { equation, shapes }
    }
}

/// Operand values: small integers and halves, so that products and sums are exact.
fn operand_values(shapes: &[Vec<usize>]) -> Vec<Vec<f64>> {
    shapes
        .iter()
        .enumerate()
        .map(|(k, shape)| {
            let cells: usize = shape.iter().product();
            (0..cells)
                .map(|i| ((i * 7 + k * 5 + 3) % 11) as f64 / 2.0 - 2.5)
                .collect()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        rng_seed: proptest::test_runner::RngSeed::Fixed(2718),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::default()
    })]

    #[test]
    fn einsum_np_agrees_with_a_naive_evaluation(draw in draw()) {
        let Expression { equation, shapes } = draw.expression();
        let plan = Plan::new(&equation, &shapes);
        prop_assert!(plan.is_ok(), "the generator drew an einsum numpy refuses: {equation:?} {shapes:?}: {plan:?}");
        let plan = plan.unwrap();
        let values = operand_values(&shapes);
        let expected = plan.evaluate(&values);
        // The interpreter first: a failure there shrinks without compiling anything.
        let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
        let backends: [Box<dyn Backend>; 2] = [Box::new(Interpreter), Box::new(compiler)];
        for backend in backends {
            let name = backend.name();
            let got = run_einsum(backend, &equation, &shapes, &values);
            prop_assert!(got.is_ok(), "{equation:?} over {shapes:?} on {name}: {}", got.unwrap_err());
            let compared = compare(&plan, &expected, &got.unwrap());
            prop_assert!(compared.is_ok(), "{equation:?} over {shapes:?} on {name}: {compared:?}");
        }
    }
}
