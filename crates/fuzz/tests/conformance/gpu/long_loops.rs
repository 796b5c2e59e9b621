//! Loops longer than one GPU invocation may run (lavapipe ends a shader after 65535 iterations
//! of its loops, silently) give the interpreter's results: a long serial statement runs as a
//! sequence of dispatches, and a nest's disjoint loops move outward to become invocations.

use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

use super::device;

use crate::target::Target;

/// The sum of all cells of a tensor of `dims` holding `1 + (cell mod 3)`, in `precision`: exact
/// in f32 and f64.
fn total(backend: Box<dyn Backend>, dims: &[usize], precision: Precision) -> (f64, String) {
    let graph = Graph::new();
    let cells: usize = dims.iter().product();
    let shape: Vec<String> = dims.iter().map(ToString::to_string).collect();
    let x = graph
        .data("x")
        .shape(&shape.join(","))
        .precision(precision)
        .values((0..cells).map(|i| 1.0 + (i % 3) as f64).collect())
        .build();
    let spec = if dims.len() == 1 { "i=>" } else { "ij=>" };
    let sum = x.einsum1(spec);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.run(&forward).unwrap();
    (
        ctx.values(&sum).unwrap()[0],
        forward.source().unwrap_or_default(),
    )
}

/// In f32, and in f64 where the device holds it: the partial sums kept across dispatches are
/// f64 there, and in a routine computing both, an f32 sum is kept in f64 cells, exactly.
fn long_serial_sums_run_in_ordered_dispatches(target: &Target) {
    let gpu = device(target);
    let features = gpu.device().features();
    for precision in [Precision::F32, Precision::F64] {
        if !rcannl_gpu::wgsl::holds(precision, features) {
            eprintln!("this GPU holds no {precision}: its long sums did not run");
            continue;
        }
        for dims in [vec![70_000], vec![300, 300], vec![3, 100_000]] {
            let cells: usize = dims.iter().product();
            let want = (0..cells).map(|i| 1.0 + (i % 3) as f64).sum::<f64>();
            let (got, code) = total(Box::new(gpu.clone()), &dims, precision);
            assert_eq!(got, want, "{precision} {dims:?}");
            assert!(code.contains("dispatched"), "{dims:?}:\n{code}");
            assert_eq!(total(Box::new(Interpreter), &dims, precision).0, want);
        }
    }
    if rcannl_gpu::wgsl::holds(Precision::F64, features) {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("70000")
            .values((0..70_000).map(|i| 1.0 + (i % 3) as f64).collect())
            .build();
        let w = graph
            .data("w")
            .shape("2")
            .precision(Precision::F64)
            .values(vec![0.1, 3.0])
            .build();
        let (sum, square) = (x.einsum1("i=>"), w.einsum("i;i=>i", &w));
        let mut ctx = Context::with_backend(&graph, Box::new(gpu));
        let forward = ctx.forward(&[&sum, &square]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&sum).unwrap(), [139_999.0]);
        assert_eq!(ctx.values(&square).unwrap(), [0.1 * 0.1, 9.0]);
        let code = forward.source().unwrap_or_default();
        assert!(code.contains("rc_spill_f: array<f64>"), "{code}");
        assert!(code.contains("f32(rc_spill_f["), "{code}");
    }
}
conformance!(long_serial_sums_run_in_ordered_dispatches: gpu);

/// Cells in [-1, 1), multiples of 2^-10.
fn values(cells: usize, seed: usize) -> Vec<f64> {
    (0..cells)
        .map(|i| ((i * 7919 + seed * 104_729) % 2048) as f64 / 1024.0 - 1.0)
        .collect()
}

/// A padded 3×3 convolution of 32 one-channel 16×16 images into 8 channels, weighted per output
/// cell and summed: the loss, and the gradients of the input and the kernel.
fn convolution(backend: Box<dyn Backend>) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let x = graph
        .param("x")
        .shape("32|->16,16,1")
        .values(values(32 * 16 * 16, 1))
        .build();
    let kernel = graph
        .param("kernel")
        .shape("3,3,1->8")
        .values(values(9 * 8, 2))
        .build();
    let convolved = x.einsum(
        "...|...->h=+kh, w=+kw, c; kh, kw, c -> d => ...|...->h, w, d",
        &kernel,
    );
    for label in ["kh", "kw"] {
        let capture = convolved.capture(label).unwrap();
        graph.set_dim(&capture, 3).unwrap();
    }
    let weights = graph
        .data("weights")
        .shape("32|->16,16,8")
        .values(values(32 * 16 * 16 * 8, 3))
        .build();
    let loss: Tensor = convolved.pmul(&weights).einsum1("...|...->... => ");
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    vec![
        ctx.values(&loss).unwrap(),
        ctx.grad(&x).unwrap(),
        ctx.grad(&kernel).unwrap(),
    ]
}

fn a_convolution_over_a_large_batch_has_the_oracles_gradients(target: &Target) {
    let gpu = device(target);
    let reference = convolution(Box::new(Interpreter));
    let ours = convolution(Box::new(gpu));
    for (what, (a, b)) in ["loss", "input gradient", "kernel gradient"]
        .iter()
        .zip(ours.iter().zip(&reference))
    {
        let largest = b.iter().fold(0f64, |m, x| m.max(x.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-4 * largest,
                "{what} cell {i}: GPU {x}, interpreter {y}"
            );
        }
    }
}
conformance!(a_convolution_over_a_large_batch_has_the_oracles_gradients: gpu);

/// `a` (dims `a_dims`) contracted with `b` by `spec` on `backend`, each cell of both operands
/// `value(i)` for its flat position `i`, computed in `precision`.
fn contraction(
    backend: Box<dyn Backend>,
    precision: Precision,
    spec: &str,
    a_dims: &str,
    b_dims: &str,
    value: fn(usize) -> f64,
) -> Vec<f64> {
    let graph = Graph::new();
    let operand = |label: &str, dims: &str| {
        let cells = dims
            .split(',')
            .map(|d| d.parse::<usize>().unwrap())
            .product();
        graph
            .data(label)
            .shape(dims)
            .precision(precision)
            .values((0..cells).map(value).collect())
            .build()
    };
    let result = operand("a", a_dims).einsum(spec, &operand("b", b_dims));
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&result]).unwrap();
    ctx.run(&forward).unwrap();
    ctx.values(&result).unwrap()
}

/// Matrix products, matrix-vector products and dot products of 10^5 and 10^6 terms a cell (the
/// reduction of the tiled product kernel and of plain nests alike) give every term: sums of
/// ones are exact, and other sums are as close to the f64 sum as the interpreter's f32 sum is
/// (which adds the terms one by one, where the GPU may add slices' partial sums).
fn contractions_of_a_hundred_thousand_and_a_million_terms(target: &Target) {
    let gpu = device(target);
    let ones = |_| 1.0;
    let varied = |i: usize| 1.0 + (i % 7) as f64 / 8.0;
    for k in [100_000, 1_000_000] {
        for (spec, a, b) in [
            ("ij;jk=>ik", format!("3,{k}"), format!("{k},2")),
            ("ij;j=>i", format!("2,{k}"), format!("{k}")),
            ("i;i=>", format!("{k}"), format!("{k}")),
            ("ij;ij=>i", format!("2,{k}"), format!("2,{k}")),
        ] {
            let f32 = Precision::F32;
            let counted = contraction(Box::new(gpu.clone()), f32, spec, &a, &b, ones);
            assert!(
                counted.iter().all(|&x| x == k as f64),
                "{spec} over {k} terms of 1: {counted:?}"
            );
            let got = contraction(Box::new(gpu.clone()), f32, spec, &a, &b, varied);
            let oracle = contraction(Box::new(Interpreter), f32, spec, &a, &b, varied);
            let exact = contraction(Box::new(Interpreter), Precision::F64, spec, &a, &b, varied);
            for ((g, o), e) in got.iter().zip(&oracle).zip(&exact) {
                assert!(
                    (g - e).abs() <= 2.0 * (o - e).abs() + 1e-6 * e.abs(),
                    "{spec} over {k} terms: GPU {g}, interpreter {o}, in f64 {e}"
                );
            }
        }
    }
}
conformance!(contractions_of_a_hundred_thousand_and_a_million_terms: gpu);

/// A layer's weight gradient summed over a batch of 60,000 rows holds every row's term.
fn a_weight_gradient_sums_every_row_of_a_large_batch(target: &Target) {
    let gpu = device(target);
    let graph = Graph::new();
    let rows = 60_000;
    let x = graph
        .data("x")
        .shape(&format!("{rows}|->3"))
        .values(vec![1.0; rows * 3])
        .build();
    let w = graph.param("w").shape("3->2").values(vec![0.5; 6]).build();
    let loss = w.compose(&x).einsum1("...|...->... => ");
    let mut ctx = Context::with_backend(&graph, Box::new(gpu));
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    assert_eq!(ctx.values(&loss).unwrap(), [rows as f64 * 3.0]);
    assert_eq!(ctx.grad(&w).unwrap(), vec![rows as f64; 6]);
}
conformance!(a_weight_gradient_sums_every_row_of_a_large_batch: gpu);
