//! Operations that follow a spec, on both backends: their values against a naive evaluator written
//! here (every assignment of values to the spec's labels, the operands read where their labels
//! point, the results accumulated with `+`), and their gradients by finite differences.

use std::collections::BTreeMap;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `spec` (single-character labels, output axes only) evaluated naively: for every assignment of
/// values to its labels, `f` of the operands' cells there, added into the result's cell there
/// (which starts at 0).
fn naive(
    spec: &str,
    sizes: &[(char, usize)],
    operands: &[&[f64]],
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (slots, result) = spec.split_once("=>").expect("a spec with a result");
    let slots: Vec<Vec<char>> = slots.split(';').map(|s| s.chars().collect()).collect();
    let result: Vec<char> = result.chars().collect();
    assert_eq!(slots.len(), operands.len(), "{spec}: one slice per operand");
    let sizes: BTreeMap<char, usize> = sizes.iter().copied().collect();
    let labels: Vec<char> = sizes.keys().copied().collect();
    let flat = |slot: &[char], at: &BTreeMap<char, usize>| {
        slot.iter().fold(0, |flat, l| flat * sizes[l] + at[l])
    };
    let mut out = vec![0.0; result.iter().map(|l| sizes[l]).product()];
    let total: usize = labels.iter().map(|l| sizes[l]).product();
    for mut point in 0..total {
        let mut at = BTreeMap::new();
        for l in labels.iter().rev() {
            at.insert(*l, point % sizes[l]);
            point /= sizes[l];
        }
        let cells: Vec<f64> = slots
            .iter()
            .zip(operands)
            .map(|(slot, values)| values[flat(slot, &at)])
            .collect();
        out[flat(&result, &at)] += f(&cells);
    }
    out
}

/// A data tensor of these output dims holding `values`.
fn data(graph: &Graph, label: &str, dims: &[usize], values: &[f64]) -> Tensor {
    graph
        .data(label)
        .output(dims.iter().copied())
        .values(values.to_vec())
        .build()
}

/// `0, 1, …, n − 1`, shifted and scaled so that the values are distinct and not all positive.
fn values(n: usize, scale: f64, shift: f64) -> Vec<f64> {
    (0..n).map(|i| i as f64 * scale + shift).collect()
}

/// Runs `out`'s forward routine on `backend` and returns its cells.
fn forward(graph: &Graph, backend: Box<dyn Backend>, out: &Tensor) -> Vec<f64> {
    let mut ctx = Context::with_backend(graph, backend);
    let routine = ctx.forward(&[out]).unwrap();
    ctx.run(&routine).unwrap();
    ctx.values(out).unwrap()
}

fn assert_close(got: &[f64], expected: &[f64], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: {got:?} vs {expected:?}");
    for (g, e) in got.iter().zip(expected) {
        assert!(
            (g - e).abs() <= 1e-9 * e.abs().max(1.0),
            "{what}: got {got:?}, expected {expected:?}"
        );
    }
}

/// Checks the gradients of `build` (its result squared, so that the result's gradient differs
/// from cell to cell) on both backends.
fn check(name: &str, shapes: &[&str], positive: bool, build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs { shapes, positive };
        let squared = |graph: &Graph, p: &[Tensor]| {
            let out = build(graph, p);
            out.pmul(&out)
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, squared) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

#[test]
fn a_reducing_outer_sum_adds_over_what_the_result_leaves_out() {
    let (x, y) = (values(4, 1.0, 0.0), values(6, 1.0, 0.0));
    // result[a, c] = Σ_b x[a, b] + y[b, c].
    let expected = naive(
        "ab;bc=>ac",
        &[('a', 2), ('b', 2), ('c', 3)],
        &[&x, &y],
        |v| v[0] + v[1],
    );
    assert_eq!(expected, vec![4.0, 6.0, 8.0, 8.0, 10.0, 12.0]);
    for backend in backends() {
        let graph = Graph::new();
        let a = data(&graph, "a", &[2, 2], &x);
        let b = data(&graph, "b", &[2, 3], &y);
        let out = a.outer_sum("a,b; b,c => a,c", &b);
        assert_close(&forward(&graph, backend, &out), &expected, "outer sum");
    }
    check("reducing outer sum", &["2,2", "2,3"], false, |_, p| {
        p[0].outer_sum("a,b; b,c => a,c", &p[1])
    });
}

#[test]
fn a_concatenation_adds_over_what_the_result_leaves_out() {
    let (x, y) = (values(6, 1.0, 0.0), values(2, 1.0, 0.0));
    // result[a] = Σ_c x[a, c] for the first stretch, then y[b].
    let mut expected: Vec<f64> = (0..2).map(|a| (0..3).map(|c| x[a * 3 + c]).sum()).collect();
    expected.extend(&y);
    assert_eq!(expected, vec![3.0, 12.0, 0.0, 1.0]);
    for backend in backends() {
        let graph = Graph::new();
        let a = data(&graph, "a", &[2, 3], &x);
        let b = data(&graph, "b", &[2], &y);
        let out = Tensor::concat("a, c; b => a^b", &[&a, &b]);
        assert_close(&forward(&graph, backend, &out), &expected, "concat");
    }
    check("reducing concatenation", &["2,3", "2"], false, |_, p| {
        Tensor::concat("a, c; b => a^b", &[&p[0], &p[1]])
    });
}
