//! NaN propagates through every operation, as in numpy and PyTorch: a choice (relu, maxima,
//! max-plus products, gates) never turns a NaN into a number, on either backend.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

const NAN: f64 = f64::NAN;

/// `values` as the cells of `t` after running `outputs`, on `backend`.
fn run(graph: &Graph, backend: Box<dyn Backend>, outputs: &[&Tensor]) -> Context {
    let mut ctx = Context::with_backend(graph, backend);
    let forward = ctx.forward(outputs).unwrap();
    ctx.run(&forward).unwrap();
    ctx
}

fn assert_cells(ctx: &Context, t: &Tensor, expected: &[f64]) {
    let got = ctx.values(t).unwrap();
    assert_eq!(got.len(), expected.len(), "{}", t.label());
    for (g, e) in got.iter().zip(expected) {
        let same = (g.is_nan() && e.is_nan()) || g == e;
        assert!(
            same,
            "{} on {}: {got:?}, expected {expected:?}",
            t.label(),
            ctx.backend_name()
        );
    }
}

#[test]
fn pointwise_choices_keep_nan() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("4")
            .values(vec![1.0, NAN, 3.0, -2.0])
            .build();
        let y = graph
            .data("y")
            .shape("4")
            .values(vec![2.0, 0.0, NAN, -5.0])
            .build();
        let relu = x.relu();
        let sat = x.sat01();
        let max = x.max(&y);
        let min = x.min(&y);
        let ctx = run(&graph, backend, &[&relu, &sat, &max, &min]);
        assert_cells(&ctx, &relu, &[1.0, NAN, 3.0, 0.0]);
        assert_cells(&ctx, &sat, &[1.0, NAN, 1.0, 0.0]);
        assert_cells(&ctx, &max, &[2.0, NAN, NAN, -2.0]);
        assert_cells(&ctx, &min, &[1.0, NAN, NAN, -5.0]);
    }
}

#[test]
fn maxima_over_a_nan_are_nan() {
    for backend in backends() {
        let graph = Graph::new();
        // NaN first, in the middle and last: the maximum is NaN wherever it sits.
        let rows = graph
            .data("rows")
            .shape("3,3")
            .values(vec![NAN, 1.0, 3.0, 1.0, NAN, 3.0, 1.0, 3.0, NAN])
            .build();
        let clean = graph
            .data("clean")
            .shape("3")
            .values(vec![1.0, 5.0, 3.0])
            .build();
        let row_max = rows.einmax1("i,j=>i");
        let clean_max = clean.einmax1("j=>");
        let a = graph
            .data("a")
            .shape("2,2")
            .values(vec![1.0, NAN, 0.0, 2.0])
            .build();
        let b = graph
            .data("b")
            .shape("2,2")
            .values(vec![1.0, 2.0, 3.0, 4.0])
            .build();
        // max over j of a[i,j] + b[j,k]: row 0 reads the NaN for every k.
        let tropical = a.tropical("i,j;j,k=>i,k", &b);
        let ctx = run(&graph, backend, &[&row_max, &clean_max, &tropical]);
        assert_cells(&ctx, &row_max, &[NAN, NAN, NAN]);
        assert_cells(&ctx, &clean_max, &[5.0]);
        assert_cells(&ctx, &tropical, &[NAN, NAN, 5.0, 6.0]);
    }
}

#[test]
fn gradients_through_a_nan_are_nan() {
    for backend in backends() {
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("3")
            .values(vec![NAN, 2.0, -1.0])
            .build();
        let loss = w.relu().einsum1("i=>");
        let mut ctx = Context::with_backend(&graph, backend);
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.init_params().unwrap();
        ctx.run(&backprop).unwrap();
        assert!(ctx.values(&loss).unwrap()[0].is_nan());
        let grad = ctx.grad(&w).unwrap();
        assert!(grad[0].is_nan(), "{grad:?}");
        assert_eq!(&grad[1..], &[1.0, 0.0]);
    }
}
