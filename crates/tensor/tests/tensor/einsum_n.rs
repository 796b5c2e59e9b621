//! Einsums of several operands along their contraction paths, on both CPU backends: the paths
//! chosen, row variables and kinds carried along them, numpy's `...` that does not broadcast,
//! and einsums of hundreds of operands (a chain of matrices, a star sharing one label) along
//! greedy paths, against products computed directly. Random expressions against a naive
//! evaluator run on every backend in the conformance suite (`rcannl-fuzz`'s
//! `tests/conformance/einsum.rs`).

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

#[test]
fn the_path_of_a_matrix_chain_follows_the_sizes() {
    let graph = Graph::new();
    let shapes = ["10,100", "100,5", "5,50"];
    let t: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| graph.data(&format!("m{i}")).shape(s).build())
        .collect();
    let refs: Vec<&Tensor> = t.iter().collect();
    let path = Tensor::einsum_path("ij;jk;kl=>il", &refs).unwrap();
    // Two FLOPs (a multiply and an add) per point of each product.
    assert_eq!(path.flops, 2.0 * (10.0 * 100.0 * 5.0 + 10.0 * 5.0 * 50.0));
    assert_eq!(path.steps[0], (0, 1));
}

#[test]
fn a_label_one_operand_alone_has_is_summed_first() {
    let graph = Graph::new();
    let a = graph.data("a").shape("10,100,10").build();
    let b = graph.data("b").shape("10,10").build();
    let path = Tensor::einsum_path("ijk;kl=>il", &[&a, &b]).unwrap();
    // Σ_j first (an add per point of 10·100·10), then the matrix product (a multiply and an add
    // per point of 10·10·10), instead of 2·10·100·10·10.
    assert_eq!(path.flops, 10_000.0 + 2_000.0);
}

/// The backends every einsum here runs on.
fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `spec` in our notation over data tensors of the given shape literals and values, on `backend`.
fn evaluate(
    backend: Box<dyn Backend>,
    spec: &str,
    inputs: &[(&str, &[f64])],
) -> Result<Vec<f64>, rcannl_tensor::TensorError> {
    evaluate_with(backend, inputs, |operands| Tensor::einsum_n(spec, operands))
}

/// The result `einsum` builds over f64 data tensors of the given shape literals and values, run
/// on `backend`.
fn evaluate_with(
    backend: Box<dyn Backend>,
    inputs: &[(&str, &[f64])],
    einsum: impl Fn(&[&Tensor]) -> Tensor,
) -> Result<Vec<f64>, rcannl_tensor::TensorError> {
    let graph = Graph::new();
    let tensors: Vec<Tensor> = inputs
        .iter()
        .enumerate()
        .map(|(i, (shape, values))| {
            graph
                .data(&format!("x{i}"))
                .shape(shape)
                .precision(Precision::F64)
                .values(values.to_vec())
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let out = einsum(&refs);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&out])?;
    ctx.run(&forward)?;
    ctx.values(&out)
}

fn values(n: usize, seed: usize) -> Vec<f64> {
    (0..n)
        .map(|k| ((k * 7 + seed * 3) % 11) as f64 - 5.0)
        .collect()
}

#[test]
fn row_variables_ride_along_the_path() {
    // A chain of matrix products batched over `...` (two axes, 2×3), with a vector at its end.
    let (b0, b1, i, j, k, l) = (2, 3, 2, 4, 3, 2);
    let (x0, x1, x2, x3) = (
        values(b0 * b1 * i * j, 0),
        values(b0 * b1 * j * k, 1),
        values(b0 * b1 * k * l, 2),
        values(b0 * b1 * l, 3),
    );
    let mut expected = vec![0.0; b0 * b1 * i];
    for b in 0..b0 * b1 {
        for ii in 0..i {
            for jj in 0..j {
                for kk in 0..k {
                    for ll in 0..l {
                        expected[b * i + ii] += x0[(b * i + ii) * j + jj]
                            * x1[(b * j + jj) * k + kk]
                            * x2[(b * k + kk) * l + ll]
                            * x3[b * l + ll];
                    }
                }
            }
        }
    }
    for backend in backends() {
        let name = backend.name();
        let got = evaluate(
            backend,
            "..., i, j; ..., j, k; ..., k, l; ..., l => ..., i",
            &[
                ("2,3,2,4", &x0),
                ("2,3,4,3", &x1),
                ("2,3,3,2", &x2),
                ("2,3,2", &x3),
            ],
        )
        .unwrap();
        assert_eq!(got, expected, "on {name}");
    }
}

#[test]
fn kinds_and_batch_rows_are_kept_through_the_path() {
    // Batched linear maps composed: each operand is `batch | input -> output`; the result's
    // input comes from the last map and its output from the first.
    let (b, i, j, k, l) = (3, 2, 3, 2, 4);
    let (x0, x1, x2) = (
        values(b * j * i, 0),
        values(b * k * j, 1),
        values(b * l * k, 2),
    );
    // Layout: batch, output, input.
    let mut expected = vec![0.0; b * i * l];
    for bb in 0..b {
        for ii in 0..i {
            for ll in 0..l {
                for jj in 0..j {
                    for kk in 0..k {
                        expected[(bb * i + ii) * l + ll] += x0[(bb * i + ii) * j + jj]
                            * x1[(bb * j + jj) * k + kk]
                            * x2[(bb * k + kk) * l + ll];
                    }
                }
            }
        }
    }
    for backend in backends() {
        let name = backend.name();
        let got = evaluate(
            backend,
            "... | j -> i; ... | k -> j; ... | l -> k => ... | l -> i",
            &[("3|3->2", &x0), ("3|2->3", &x1), ("3|4->2", &x2)],
        )
        .unwrap();
        assert_eq!(got, expected, "on {name}");
    }
}

#[test]
fn a_row_variable_the_result_lacks_is_summed() {
    // Σ over the axes of `..r..` (2×2), which two operands share, and over j, which one has.
    let (r, i, j) = (4, 3, 2);
    let (x0, x1, x2) = (values(r * i, 0), values(r * i, 1), values(i * j, 2));
    let mut expected = vec![0.0; i];
    for (ii, cell) in expected.iter_mut().enumerate() {
        for rr in 0..r {
            for jj in 0..j {
                *cell += x0[rr * i + ii] * x1[rr * i + ii] * x2[ii * j + jj];
            }
        }
    }
    for backend in backends() {
        let name = backend.name();
        let got = evaluate(
            backend,
            "..r.., i; ..r.., i; i, j => i",
            &[("2,2,3", &x0), ("2,2,3", &x1), ("3,2", &x2)],
        )
        .unwrap();
        assert_eq!(got, expected, "on {name}");
    }
}

#[test]
fn numpy_ellipses_that_do_not_broadcast_are_an_error() {
    let graph = Graph::new();
    let a = graph.data("a").shape("4,2,5").build();
    let b = graph.data("b").shape("3,5").build();
    let out = Tensor::einsum_np("...i,...i->...", &[&a, &b]);
    let err = Context::new(&graph).forward(&[&out]).unwrap_err();
    assert!(
        err.message
            .contains("operand 2's `...` stands for axes [3]")
            && err.message.contains("against 2"),
        "{}",
        err.message
    );
}

#[test]
fn a_parameter_takes_its_shape_from_the_path() {
    // w's axes come from the labels it shares with x and v, through the binary steps; u's
    // from a row variable it shares with y.
    let graph = Graph::new();
    let x = graph.data("x").shape("2,3").build();
    let v = graph.data("v").shape("4").build();
    let w = graph.param("w").build();
    let out = Tensor::einsum_n("i, j; j, k; k => i", &[&x, &w, &v]);
    let y = graph.data("y").shape("3,2,4").build();
    let u = graph.param("u").build();
    let summed = Tensor::einsum_n("..r.., i; ..r.., i; i => i", &[&y, &u, &v]);
    let mut ctx = Context::new(&graph);
    ctx.forward(&[&out, &summed]).unwrap();
    assert_eq!(ctx.dims(&w).unwrap(), vec![3, 4]);
    assert_eq!(ctx.dims(&u).unwrap(), vec![3, 2, 4]);
}

/// `(spec, inputs)` for the einsum of `n` operands with slots `slot(k)` and result `result`, each
/// operand 2×2 with the values `matrix(k)` gives.
fn many(
    n: usize,
    slot: impl Fn(usize) -> String,
    result: &str,
    matrix: impl Fn(usize) -> [f64; 4],
) -> (String, Vec<Vec<f64>>) {
    let slots: Vec<String> = (0..n).map(slot).collect();
    let spec = format!("{} => {result}", slots.join("; "));
    (spec, (0..n).map(|k| matrix(k).to_vec()).collect())
}

#[test]
fn a_chain_of_hundreds_of_matrices_is_multiplied_along_a_greedy_path() {
    // Shears, swaps and reflections: integer products, exact in f64.
    let n = 300;
    let matrix = |k: usize| match k % 3 {
        0 => [1.0, 1.0, 0.0, 1.0],
        1 => [0.0, 1.0, 1.0, 0.0],
        _ => [1.0, 0.0, 0.0, -1.0],
    };
    let mut expected = [1.0, 0.0, 0.0, 1.0];
    for k in 0..n {
        let [a, b, c, d] = expected;
        let [e, f, g, h] = matrix(k);
        expected = [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h];
    }
    let (spec, values) = many(
        n,
        |k| format!("a{k}, a{}", k + 1),
        &format!("a0, a{n}"),
        matrix,
    );
    let inputs: Vec<(&str, &[f64])> = values.iter().map(|v| ("2,2", &v[..])).collect();
    let got = evaluate(Box::new(Interpreter), &spec, &inputs).unwrap();
    assert_eq!(got, expected);
}

#[test]
fn a_star_of_hundreds_of_operands_sums_each_then_multiplies() {
    // "i, bk" for every k => "i": each operand's rows summed, the sums multiplied per row.
    let n = 300;
    let matrix = |k: usize| {
        if k.is_multiple_of(7) {
            [1.0, 1.0, 0.0, -1.0]
        } else {
            [0.5, 0.5, 2.0, -1.0]
        }
    };
    let doubled = (0..n).filter(|k| k % 7 == 0).count() as i32;
    let expected = vec![2f64.powi(doubled), (-1f64).powi(doubled)];
    let (spec, values) = many(n, |k| format!("i, b{k}"), "i", matrix);
    let inputs: Vec<(&str, &[f64])> = values.iter().map(|v| ("2,2", &v[..])).collect();
    let got = evaluate(Box::new(Interpreter), &spec, &inputs).unwrap();
    assert_eq!(got, expected);
}

#[test]
fn the_optimal_search_refuses_more_operands_than_it_takes() {
    use rcannl_tensor::nary::{OPTIMAL_UP_TO, PathOptions, Search};
    let graph = Graph::new();
    let n = OPTIMAL_UP_TO + 1;
    let t: Vec<Tensor> = (0..n)
        .map(|k| graph.data(&format!("m{k}")).shape("2,2").build())
        .collect();
    let refs: Vec<&Tensor> = t.iter().collect();
    let (spec, _) = many(
        n,
        |k| format!("a{k}, a{}", k + 1),
        &format!("a0, a{n}"),
        |_| [0.0; 4],
    );
    let optimal = PathOptions {
        search: Search::Optimal,
        memory_limit: None,
    };
    let err = Tensor::einsum_path_with(&spec, &refs, &optimal).unwrap_err();
    assert!(
        err.message.contains("takes at most 16 operands, 17 given"),
        "{}",
        err.message
    );
    // Within the limit it searches them all.
    let path = Tensor::einsum_path_with(
        &many(
            n - 1,
            |k| format!("a{k}, a{}", k + 1),
            "a0, a16",
            |_| [0.0; 4],
        )
        .0,
        &refs[..n - 1],
        &optimal,
    )
    .unwrap();
    assert_eq!(path.steps.len(), n - 2);
}
