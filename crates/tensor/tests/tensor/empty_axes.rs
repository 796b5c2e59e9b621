//! Axes of size 0 through the tensor API, on both backends: results with an empty axis are
//! empty, sums over an empty axis are 0 and maxima −∞ (numpy's `initial`, where numpy without
//! one refuses), matrix products of every empty dimension at sizes the tuned product takes,
//! and gradients: an operand with an empty axis has an empty gradient, and gradients through a
//! sum over an empty axis are the sums of nothing.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `cells` positive values, so that no sum below is 0 by cancellation.
fn ramp(cells: usize) -> Vec<f64> {
    (0..cells).map(|i| 1.0 + (i % 7) as f64).collect()
}

/// The naive matrix product of an `m×k` and a `k×n` row-major matrix.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    c
}

/// The transpose of a row-major `rows×columns` matrix.
fn transpose(x: &[f64], rows: usize, columns: usize) -> Vec<f64> {
    (0..columns)
        .flat_map(|j| (0..rows).map(move |i| x[i * columns + j]))
        .collect()
}

/// Sums a row-major `rows×columns` matrix over its rows (numpy: `x.sum(axis=0)`).
fn column_sums(x: &[f64], rows: usize, columns: usize) -> Vec<f64> {
    (0..columns)
        .map(|j| (0..rows).map(|i| x[i * columns + j]).sum())
        .collect()
}

/// Runs the forward routine of `observed` (whose values are read afterwards: backprop keeps only
/// what it needs), then backprop from `loss`.
fn forward_and_backprop(ctx: &mut Context, observed: &[&Tensor], loss: &Tensor) {
    ctx.init_params().unwrap();
    let forward = ctx.forward(observed).unwrap();
    ctx.run(&forward).unwrap();
    let step = ctx.backprop(loss).unwrap();
    ctx.run(&step).unwrap();
}

fn param(graph: &Graph, label: &str, shape: &str, cells: usize) -> Tensor {
    graph.param(label).shape(shape).values(ramp(cells)).build()
}

#[test]
fn a_sum_over_an_empty_axis_is_zero_and_its_operand_has_an_empty_gradient() {
    for backend in backends() {
        let graph = Graph::new();
        let x = param(&graph, "x", "0,3", 0);
        let sums = x.einsum1("i,j=>j");
        let loss = sums.einsum1("j=>");
        let mut ctx = Context::with_backend(&graph, backend);
        forward_and_backprop(&mut ctx, &[&sums, &loss], &loss);
        assert_eq!(ctx.values(&sums).unwrap(), column_sums(&[], 0, 3));
        assert_eq!(ctx.values(&loss).unwrap(), vec![0.0]);
        assert_eq!(ctx.dims(&x).unwrap(), vec![0, 3]);
        assert!(ctx.grad(&x).unwrap().is_empty());
    }
}

#[test]
fn results_with_an_empty_axis_have_no_values() {
    for backend in backends() {
        let graph = Graph::new();
        let x = param(&graph, "x", "0,3", 0);
        let moved = x.einsum1("i,j=>j,i");
        let doubled = &moved + &moved;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let forward = ctx.forward(&[&doubled]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&doubled).unwrap(), vec![3, 0]);
        assert!(ctx.values(&doubled).unwrap().is_empty());
    }
}

#[test]
fn gradients_flow_through_a_sum_over_an_empty_axis() {
    // loss = Σ_j (Σ_i x[i,j]·w[j] + w[j]): with i empty, loss = Σ_j w[j], d loss/d w = 1 + Σ_i
    // x[i,j] = 1, and x (0×3) has an empty gradient.
    for backend in backends() {
        let graph = Graph::new();
        let x = param(&graph, "x", "0,3", 0);
        let w = param(&graph, "w", "3", 3);
        let weighted = x.einsum("i,j;j=>j", &w);
        let loss = (&weighted + &w).einsum1("j=>");
        let mut ctx = Context::with_backend(&graph, backend);
        forward_and_backprop(&mut ctx, &[&loss], &loss);
        let w_values = ramp(3);
        assert_eq!(
            ctx.values(&loss).unwrap(),
            vec![w_values.iter().sum::<f64>()]
        );
        let ones_plus_sums: Vec<f64> = column_sums(&[], 0, 3).iter().map(|s| 1.0 + s).collect();
        assert_eq!(ctx.grad(&w).unwrap(), ones_plus_sums);
        assert!(ctx.grad(&x).unwrap().is_empty());
    }
}

#[test]
fn matrix_products_with_an_empty_dimension() {
    // Large enough for the tuned product where nothing is empty; numpy:
    // (np.ones((64, 0)) @ np.ones((0, 48))) == np.zeros((64, 48)), and an empty row or column
    // count gives an empty result.
    // The last, not empty, checks the check.
    for (m, k, n) in [
        (64, 0, 48),
        (0, 64, 48),
        (64, 48, 0),
        (0, 0, 0),
        (64, 48, 32),
    ] {
        for backend in backends() {
            let graph = Graph::new();
            let a = param(&graph, "a", &format!("{m},{k}"), m * k);
            let b = param(&graph, "b", &format!("{k},{n}"), k * n);
            let c = a.einsum("i,j;j,k=>i,k", &b);
            let loss = c.einsum1("i,k=>");
            let mut ctx = Context::with_backend(&graph, backend);
            forward_and_backprop(&mut ctx, &[&c], &loss);
            let (a_values, b_values) = (ramp(m * k), ramp(k * n));
            assert_eq!(ctx.dims(&c).unwrap(), vec![m, n]);
            assert_eq!(
                ctx.values(&c).unwrap(),
                matmul(&a_values, &b_values, m, k, n),
                "{m}×{k}·{k}×{n}"
            );
            // d loss / d a[i,j] = Σ_k b[j,k]; d loss / d b[j,k] = Σ_i a[i,j].
            let b_row_sums = column_sums(&transpose(&b_values, k, n), n, k);
            let a_column_sums = column_sums(&a_values, m, k);
            let grad_a: Vec<f64> = (0..m).flat_map(|_| b_row_sums.clone()).collect();
            let grad_b: Vec<f64> = a_column_sums.iter().flat_map(|&sum| vec![sum; n]).collect();
            assert_eq!(ctx.grad(&a).unwrap(), grad_a, "{m}×{k}·{k}×{n}");
            assert_eq!(ctx.grad(&b).unwrap(), grad_b, "{m}×{k}·{k}×{n}");
        }
    }
}

#[test]
fn maxima_over_an_empty_axis_are_minus_infinity() {
    // numpy: np.max(np.zeros((0, 3)), axis=0, initial=-np.inf) == [-inf] * 3.
    for backend in backends() {
        let graph = Graph::new();
        let x = param(&graph, "x", "0,3", 0);
        let a = param(&graph, "a", "2,0", 0);
        let b = param(&graph, "b", "0,3", 0);
        let maxima = x.einmax1("i,j=>j");
        let tropical = a.tropical("i,j;j,k=>i,k", &b);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let forward = ctx.forward(&[&maxima, &tropical]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&maxima).unwrap(), vec![f64::NEG_INFINITY; 3]);
        assert_eq!(ctx.values(&tropical).unwrap(), vec![f64::NEG_INFINITY; 6]);
    }
}

#[test]
fn concatenation_with_empty_components_keeps_working() {
    for backend in backends() {
        let graph = Graph::new();
        let empty = param(&graph, "empty", "0", 0);
        let three = param(&graph, "three", "3", 3);
        let joined = Tensor::concat("a;b=>a^b", &[&empty, &three]);
        let loss = joined.einsum1("i=>");
        let mut ctx = Context::with_backend(&graph, backend);
        forward_and_backprop(&mut ctx, &[&joined], &loss);
        assert_eq!(ctx.values(&joined).unwrap(), ramp(3));
        assert!(ctx.grad(&empty).unwrap().is_empty());
        assert_eq!(ctx.grad(&three).unwrap(), vec![1.0; 3]);
    }
}
