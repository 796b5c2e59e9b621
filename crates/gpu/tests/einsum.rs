//! The random n-ary einsum tests on the GPU in f32, against the interpreter in f32: the same
//! expressions, drawn by the same generators from the same seeds, as `rcannl-tensor`'s
//! `einsum_n.rs` (random expressions of 2 to 6 operands with diagonals, labels summed within
//! one operand and labels only the result keeps; numpy's `...` broadcasting) and
//! `einsum_np_properties.rs` (numpy-notation einsums of one to four operands, axes of 1 facing
//! longer ones, zero-size axes, implicit results). Those compare with naive evaluators in f64;
//! here the GPU must give the interpreter's results exactly: operands are small multiples of
//! ½, so that every product and every partial sum these sizes make is exact in f32, whatever the
//! order of the contraction path's steps.
//!
//! `einsum_path.rs`'s property tests search paths without running them: they have nothing to
//! run on a device.

mod common;
#[path = "../../tensor/tests/support/numpy_draws.rs"]
mod numpy_draws;
#[path = "../../tensor/tests/support/random_einsum.rs"]
mod random_einsum;

use std::collections::HashMap;

use common::OnDevice;
use numpy_draws::{Expression, draw};
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestRunner};
use random_einsum::{Broadcasting, Rng, broadcasting_operands, expression};
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

/// The einsum `equation` (numpy's notation) of f32 data tensors of these output axes and values,
/// run on `backend`: the result's values, or the error building or running it gave.
fn run(
    backend: Box<dyn Backend>,
    equation: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<Vec<f64>, String> {
    let graph = Graph::new();
    let operands: Vec<Tensor> = axes
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (axes, values))| {
            graph
                .data(&format!("x{i}"))
                .batch([])
                .input([])
                .output(axes.iter().copied())
                .precision(Precision::F32)
                .values(values.clone())
                .build()
        })
        .collect();
    let out = Tensor::einsum_np(equation, &operands.iter().collect::<Vec<_>>());
    let message = |e: rcannl_tensor::TensorError| e.to_string();
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&out]).map_err(message)?;
    ctx.run(&forward).map_err(message)?;
    ctx.values(&out).map_err(message)
}

/// Runs `equation` on the interpreter and on the GPU; `Err` says how they differ.
fn compare(
    gpu: &OnDevice,
    equation: &str,
    axes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<(), String> {
    let want = run(Box::new(Interpreter), equation, axes, values)
        .map_err(|e| format!("{equation} over {axes:?} on the interpreter: {e}"))?;
    let got = run(Box::new(gpu.clone()), equation, axes, values)
        .map_err(|e| format!("{equation} over {axes:?} on the GPU: {e}"))?;
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{equation} over {axes:?}: the GPU gives {got:?}, the interpreter {want:?}"
        ))
    }
}

#[test]
fn random_expressions_agree_with_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let mut rng = Rng(2024);
    for case in 0..200 {
        let (operands, result, sizes) = expression(&mut rng);
        let spec = format!("{}->{result}", operands.join(","));
        let values: Vec<Vec<f64>> = operands
            .iter()
            .map(|slot| {
                let n: usize = slot.chars().map(|c| sizes[&c]).product();
                (0..n).map(|_| (rng.below(9) as f64 - 4.0) / 2.0).collect()
            })
            .collect();
        let axes: Vec<Vec<usize>> = operands
            .iter()
            .map(|slot| slot.chars().map(|c| sizes[&c]).collect())
            .collect();
        if let Err(e) = compare(&gpu, &spec, &axes, &values) {
            panic!("case {case}: {e}");
        }
    }
}

#[test]
fn numpy_ellipses_broadcast_as_on_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    let mut rng = Rng(7);
    for case in 0..60 {
        let operands = broadcasting_operands(&mut rng);
        let longest = operands.iter().map(|o| o.dots.len()).max().unwrap_or(0);
        let mut used: Vec<char> = operands.iter().flat_map(|o| o.labels.clone()).collect();
        used.sort_unstable();
        used.dedup();
        let kept: Vec<char> = used.iter().copied().filter(|_| rng.below(2) == 0).collect();
        let result = Broadcasting {
            ellipsis: (rng.below(4) > 0).then(|| rng.below(kept.len() + 1)),
            labels: kept,
            dots: Vec::new(),
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
                (0..cells)
                    .map(|_| (rng.below(9) as f64 - 4.0) / 2.0)
                    .collect()
            })
            .collect();
        if result.ellipsis.is_none() && longest > 0 {
            // numpy refuses it (`einsum_n.rs` checks the error): nothing runs.
            continue;
        }
        let axes: Vec<Vec<usize>> = operands.iter().map(|o| o.axes(&sizes)).collect();
        if let Err(e) = compare(&gpu, &spec, &axes, &values) {
            panic!("case {case}: {e}");
        }
    }
}

/// Operand values as `einsum_np_properties.rs` makes them: small integers and halves.
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

#[test]
fn numpy_einsums_agree_with_the_interpreter() {
    let Some(gpu) = common::gpu().map(OnDevice) else {
        return;
    };
    // `einsum_np_properties.rs`'s configuration, so that the same seed draws the same cases.
    let config = ProptestConfig {
        cases: 128,
        rng_seed: RngSeed::Fixed(2718),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::default()
    };
    let outcome = TestRunner::new(config).run(&draw(), |draw| {
        let Expression { equation, shapes } = draw.expression();
        let values = operand_values(&shapes);
        let compared = compare(&gpu, &equation, &shapes, &values);
        prop_assert!(compared.is_ok(), "{}", compared.unwrap_err());
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
