//! Updates that reduce: a one-cell target accumulating every cell of a formula (a sum of squares,
//! a maximum), read by the updates after it in the same routine, on both CPU backends; updates
//! whose tensors do not share dims, and a reduction that would only overwrite, are refused.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Binop, Precision, Unop};
use rcannl_tensor::{Context, Formula, Graph, Update};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

fn scalar(graph: &Graph, label: &str) -> rcannl_tensor::Tensor {
    graph
        .data(label)
        .shape("1")
        .precision(Precision::F64)
        .values(vec![0.0])
        .build()
}

#[test]
fn a_global_norm_scales_every_tensor_in_the_same_routine() {
    let a_values = [3.0, -1.0, 2.0, 0.5, -4.0, 1.5];
    let b_values = [2.0, -7.0];
    let squares: f64 = a_values.iter().chain(&b_values).map(|v| v * v).sum();
    let norm = squares.sqrt();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let a = graph
            .data("a")
            .shape("2|3->")
            .precision(Precision::F64)
            .values(a_values.to_vec())
            .build();
        let b = graph
            .data("b")
            .shape("2")
            .precision(Precision::F64)
            .values(b_values.to_vec())
            .build();
        let total = scalar(&graph, "norm");
        let largest = scalar(&graph, "largest");
        let square = |t| Formula::value(t) * Formula::value(t);
        let scale = || 1.0 / Formula::value(&total);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::reduce(&total, Binop::Add, square(&a)),
                Update::add(&total, square(&b)),
                Update::set(&total, Formula::value(&total).apply(Unop::Sqrt)),
                Update::reduce(&largest, Binop::Max, Formula::value(&a)),
                Update::set(&a, Formula::value(&a) * scale()),
                Update::set(&b, Formula::value(&b) * scale()),
            ])
            .unwrap();
        // Twice: the reduction starts from scratch each run (`=:+`), so the second run
        // normalizes vectors already of norm 1.
        for run in 0..2 {
            ctx.run(&routine).unwrap();
            let expected_norm = if run == 0 { norm } else { 1.0 };
            let got = ctx.values(&total).unwrap()[0];
            assert!(
                (got - expected_norm).abs() < 1e-12,
                "{name} run {run}: {got}"
            );
        }
        let a_now = ctx.values(&a).unwrap();
        for (got, v) in a_now.iter().zip(a_values) {
            assert!(
                (got - v / norm).abs() < 1e-12,
                "{name}: {got} vs {}",
                v / norm
            );
        }
        let b_now = ctx.values(&b).unwrap();
        assert!((b_now[1] - b_values[1] / norm).abs() < 1e-12, "{name}");
        // The maximum of the second run: over a already scaled once.
        assert!(
            (ctx.values(&largest).unwrap()[0] - 3.0 / norm).abs() < 1e-12,
            "{name}"
        );
    }
}

#[test]
fn a_reduction_from_f32_gradients_matches_a_direct_sum() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .input([4])
            .output([3])
            .values((0..12).map(|i| f64::from(i) * 0.25 - 1.0).collect())
            .build();
        let x = graph
            .data("x")
            .input([0usize; 0])
            .output([4])
            .values(vec![1.0, -2.0, 0.5, 3.0])
            .build();
        let loss = (&w * &x).einsum1("...|...->... => 0");
        let squares = graph.data("squares").shape("1").values(vec![0.0]).build();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx
            .train_step(
                &loss,
                &[Update::reduce(
                    &squares,
                    Binop::Add,
                    Formula::grad(&w) * Formula::grad(&w),
                )],
            )
            .unwrap();
        ctx.run(&step).unwrap();
        // d loss / d w[o, i] = x[i] for every o: three rows of x.
        let expected = 3.0 * (1.0 + 4.0 + 0.25 + 9.0);
        assert_eq!(ctx.values(&squares).unwrap(), vec![expected], "{name}");
    }
}

#[test]
fn updates_over_unequal_dims_or_overwriting_reductions_are_refused() {
    let graph = Graph::new();
    let a = graph.data("a").shape("3").values(vec![1.0; 3]).build();
    let b = graph.data("b").shape("4").values(vec![1.0; 4]).build();
    let one = scalar(&graph, "one");
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let mixed = ctx
        .update(&[Update::set(&a, Formula::value(&a) + Formula::value(&b))])
        .unwrap_err()
        .to_string();
    assert!(
        mixed.contains("update of 'a'") && mixed.contains("'b' of dims [4]"),
        "{mixed}"
    );
    let overwriting = ctx
        .update(&[Update::set(&one, Formula::value(&a))])
        .unwrap_err()
        .to_string();
    assert!(
        overwriting.contains("update of 'one'") && overwriting.contains("reducing accumulator"),
        "{overwriting}"
    );
}

#[test]
fn a_cell_written_once_from_scratch_holds_its_accumulators_first_step() {
    // Reset to the neutral element, then one accumulation per cell: −x under subtraction, 1/x
    // under division, a truth value under `||` and `&&` (a plain store of x would be wrong).
    let x_values = vec![3.0, -4.0, 0.5, 0.0];
    type Expected = fn(f64) -> f64;
    let cases: [(Binop, Expected); 4] = [
        (Binop::Sub, |x| -x),
        (Binop::Div, |x| 1.0 / x),
        (Binop::Or, |x| f64::from(u8::from(x != 0.0))),
        (Binop::And, |x| f64::from(u8::from(x != 0.0))),
    ];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("4")
            .precision(Precision::F64)
            .values(x_values.clone())
            .build();
        let targets: Vec<_> = cases
            .iter()
            .map(|(op, _)| {
                graph
                    .data(&format!("{op:?}"))
                    .shape("4")
                    .precision(Precision::F64)
                    .values(vec![7.0; 4])
                    .build()
            })
            .collect();
        let updates: Vec<Update> = cases
            .iter()
            .zip(&targets)
            .map(|((op, _), t)| Update::reduce(t, *op, Formula::value(&x)))
            .collect();
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&updates).unwrap();
        ctx.run(&routine).unwrap();
        for ((op, expected), t) in cases.iter().zip(&targets) {
            let want: Vec<f64> = x_values.iter().map(|&v| expected(v)).collect();
            assert_eq!(ctx.values(t).unwrap(), want, "{op:?} on {name}");
        }
    }
}
