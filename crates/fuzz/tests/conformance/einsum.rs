//! Random einsums against naive evaluators written independently of the library: expressions of
//! 2 to 6 operands with diagonals, labels summed within one operand and labels only the result
//! keeps; numpy's `...` broadcasting; and numpy-notation einsums of one to four operands (axes
//! of 1 facing longer ones, zero-size axes, implicit results), whose result's shape must be
//! numpy's too.
//!
//! Operands hold small multiples of ½, so that every product and every partial sum these sizes
//! make is exact in f32 as in f64, whatever the order of the contraction path's steps: each
//! backend, in the widest float it computes in, must give the naive evaluation exactly.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestRunner};

use crate::numpy_draws::{Expression, draw};
use crate::random_einsum::{Broadcasting, Rng, broadcasting_operands, expression};
use crate::target::Target;

#[path = "../../../tensor/tests/support/einsum_np_check.rs"]
mod einsum_np_check;
#[path = "../../../tensor/tests/support/naive_einsum.rs"]
mod naive_einsum;

use einsum_np_check::{compare, run_einsum};
use naive_einsum::Plan;

/// The einsum computed by summing over every assignment of the labels.
fn naive(
    operands: &[String],
    result: &str,
    sizes: &HashMap<char, usize>,
    values: &[Vec<f64>],
) -> Vec<f64> {
    let mut labels: Vec<char> = sizes.keys().copied().collect();
    labels.sort_unstable();
    let offset = |slot: &str, at: &HashMap<char, usize>| {
        slot.chars().fold(0, |acc, c| acc * sizes[&c] + at[&c])
    };
    let cells: usize = result.chars().map(|c| sizes[&c]).product();
    let mut out = vec![0.0; cells.max(1)];
    let total: usize = labels.iter().map(|c| sizes[c]).product();
    for mut index in 0..total {
        let mut at = HashMap::new();
        for c in labels.iter().rev() {
            at.insert(*c, index % sizes[c]);
            index /= sizes[c];
        }
        let product: f64 = operands
            .iter()
            .zip(values)
            .map(|(slot, v)| v[offset(slot, &at)])
            .product();
        out[offset(result, &at)] += product;
    }
    out
}

/// Runs `spec` on `target` in its widest float and compares the result with `expected`
/// exactly; `what` names the case.
fn check_numpy_einsum(
    target: &Target,
    spec: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
    expected: &[f64],
    what: &str,
) {
    let name = target.name();
    let (_, got) = run_einsum(target.backend(), target.float(), spec, axes, values)
        .unwrap_or_else(|e| panic!("{what} {spec} over {axes:?} on {name}: {e}"));
    assert_eq!(got, expected, "{what} {spec} over {axes:?} on {name}");
}

/// A value drawn for an operand: a multiple of ½ in [−2, 2].
fn half_step(rng: &mut Rng) -> f64 {
    (rng.below(9) as f64 - 4.0) / 2.0
}

fn random_expressions_match_a_naive_evaluator(target: &Target) {
    let mut rng = Rng(2024);
    for case in 0..200 {
        let (operands, result, sizes) = expression(&mut rng);
        let spec = format!("{}->{result}", operands.join(","));
        let values: Vec<Vec<f64>> = operands
            .iter()
            .map(|slot| {
                let n: usize = slot.chars().map(|c| sizes[&c]).product();
                (0..n).map(|_| half_step(&mut rng)).collect()
            })
            .collect();
        let expected = naive(&operands, &result, &sizes, &values);
        let axes: Vec<Vec<usize>> = operands
            .iter()
            .map(|slot| slot.chars().map(|c| sizes[&c]).collect())
            .collect();
        let what = format!("case {case} (sizes {sizes:?})");
        check_numpy_einsum(target, &spec, &axes, &values, &expected, &what);
    }
}
conformance!(random_expressions_match_a_naive_evaluator);

fn numpy_ellipses_broadcast_as_numpy_does(target: &Target) {
    let mut rng = Rng(7);
    for case in 0..60 {
        let operands = broadcasting_operands(&mut rng);
        // The broadcast axes: the longest `...`, each axis the largest size facing it.
        let longest = operands.iter().map(|o| o.dots.len()).max().unwrap_or(0);
        let mut shape = vec![1; longest];
        for o in &operands {
            for (j, &d) in o.dots.iter().enumerate() {
                let p = longest - o.dots.len() + j;
                shape[p] = shape[p].max(d);
            }
        }
        let mut used: Vec<char> = operands.iter().flat_map(|o| o.labels.clone()).collect();
        used.sort_unstable();
        used.dedup();
        let kept: Vec<char> = used.iter().copied().filter(|_| rng.below(2) == 0).collect();
        let result = Broadcasting {
            ellipsis: (rng.below(4) > 0).then(|| rng.below(kept.len() + 1)),
            labels: kept,
            dots: shape.clone(),
        };
        let result = if result.ellipsis.is_none() {
            Broadcasting {
                dots: Vec::new(),
                ..result
            }
        } else {
            result
        };
        let sizes: HashMap<char, usize> = used.iter().map(|&c| (c, 2 + rng.below(2))).collect();
        let spec = format!(
            "{}->{}",
            operands
                .iter()
                .map(Broadcasting::numpy)
                .collect::<Vec<_>>()
                .join(","),
            result.numpy()
        );
        let values: Vec<Vec<f64>> = operands
            .iter()
            .map(|o| {
                let cells: usize = o.axes(&sizes).iter().product();
                (0..cells).map(|_| half_step(&mut rng)).collect()
            })
            .collect();
        // Every label assignment at every broadcast position.
        let cells: usize = result.axes(&sizes).iter().product();
        let mut expected = vec![0.0; cells];
        let points: usize =
            used.iter().map(|c| sizes[c]).product::<usize>() * shape.iter().product::<usize>();
        for mut point in 0..points {
            let mut b = vec![0; longest];
            for p in (0..longest).rev() {
                b[p] = point % shape[p];
                point /= shape[p];
            }
            let mut at = HashMap::new();
            for c in used.iter().rev() {
                at.insert(*c, point % sizes[c]);
                point /= sizes[c];
            }
            let product: f64 = operands
                .iter()
                .zip(&values)
                .map(|(o, v)| v[o.offset(&sizes, &at, &b)])
                .product();
            expected[result.offset(&sizes, &at, &b)] += product;
        }
        let axes: Vec<Vec<usize>> = operands.iter().map(|o| o.axes(&sizes)).collect();
        let what = format!("case {case} (sizes {sizes:?})");
        if result.ellipsis.is_none() && longest > 0 {
            // numpy's einsum refuses a result that leaves the axes of `...` out.
            let e =
                run_einsum(target.backend(), target.float(), &spec, &axes, &values).unwrap_err();
            assert!(
                e.contains("the result has no `...`"),
                "{what} {spec} over {axes:?}: {e}"
            );
            continue;
        }
        check_numpy_einsum(target, &spec, &axes, &values, &expected, &what);
    }
}
conformance!(numpy_ellipses_broadcast_as_numpy_does);

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

fn numpy_einsums_agree_with_a_naive_evaluation(target: &Target) {
    let config = ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(2718),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::default()
    };
    let name = target.name();
    let outcome = TestRunner::new(config).run(&draw(), |draw| {
        let Expression { equation, shapes } = draw.expression();
        let plan = Plan::new(&equation, &shapes);
        prop_assert!(
            plan.is_ok(),
            "the generator drew an einsum numpy refuses: {equation:?} {shapes:?}: {plan:?}"
        );
        let plan = plan.unwrap();
        let values = operand_values(&shapes);
        let expected = plan.evaluate(&values);
        let got = run_einsum(
            target.backend(),
            target.float(),
            &equation,
            &shapes,
            &values,
        );
        prop_assert!(
            got.is_ok(),
            "{equation:?} over {shapes:?} on {name}: {}",
            got.unwrap_err()
        );
        let compared = compare(&plan, &expected, &got.unwrap());
        prop_assert!(
            compared.is_ok(),
            "{equation:?} over {shapes:?} on {name}: {compared:?}"
        );
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
conformance!(numpy_einsums_agree_with_a_naive_evaluation);
