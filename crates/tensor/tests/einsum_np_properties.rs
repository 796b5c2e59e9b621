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
#[path = "support/numpy_draws.rs"]
mod numpy_draws;

use proptest::prelude::*;

use einsum_np_check::{compare, run_einsum};
use naive_einsum::Plan;
use numpy_draws::{Expression, draw};
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};

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
