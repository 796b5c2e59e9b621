//! Operations users define with formulas (forward and gradient), checked against finite
//! differences and trained with an update routine, on both backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Binop, Precision, Unop};
use rcannl_tensor::{Context, Definition, Formula, Graph, Init, OpLogic, Tensor, Update};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `(a − b)²`, pointwise, with its gradients `±2(a − b)·g`.
fn squared_error(graph: &Graph, a: &Tensor, b: &Tensor) -> Tensor {
    let difference = || Formula::input(0) - Formula::input(1);
    graph.define(
        "squared error",
        &[a, b],
        Definition {
            logic: OpLogic::Pointwise,
            accum: Binop::Arg2,
            forward: difference() * difference(),
            gradients: vec![
                (0, 2.0 * difference() * Formula::result_grad()),
                (1, -2.0 * difference() * Formula::result_grad()),
            ],
        },
    )
}

/// `log(1 + eˣ)`, whose derivative is the logistic function.
fn softplus(graph: &Graph, x: &Tensor) -> Tensor {
    graph.define(
        "softplus",
        &[x],
        Definition {
            logic: OpLogic::Pointwise,
            accum: Binop::Arg2,
            forward: (1.0 + Formula::input(0).apply(Unop::Exp)).apply(Unop::Log),
            gradients: vec![(
                0,
                Formula::result_grad() / (1.0 + (-Formula::input(0)).apply(Unop::Exp)),
            )],
        },
    )
}

/// The sum of every cell, as a spec defines it: a one-axis result of one cell.
fn total(graph: &Graph, x: &Tensor) -> Tensor {
    graph.define(
        "total",
        &[x],
        Definition {
            logic: OpLogic::Spec("...|... => 0".to_owned()),
            accum: Binop::Add,
            forward: Formula::input(0),
            gradients: vec![(0, Formula::result_grad())],
        },
    )
}

#[test]
fn a_defined_operation_has_the_gradient_it_declares() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .param("x")
            .shape("4")
            .precision(Precision::F64)
            .init(Init::Values(vec![-1.5, -0.2, 0.3, 2.0]))
            .build();
        let y = total(&graph, &softplus(&graph, &x));
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&y).unwrap();
        ctx.run(&backprop).unwrap();
        let expected: Vec<f64> = [-1.5f64, -0.2, 0.3, 2.0]
            .iter()
            .map(|x| 1.0 / (1.0 + (-x).exp()))
            .collect();
        let grad = ctx.grad(&x).unwrap();
        for (g, e) in grad.iter().zip(&expected) {
            assert!((g - e).abs() < 1e-12, "{name}: {g} vs {e}");
        }
        let value = ctx.values(&y).unwrap();
        let softplus_sum: f64 = [-1.5f64, -0.2, 0.3, 2.0]
            .iter()
            .map(|x| (1.0 + x.exp()).ln())
            .sum();
        assert_eq!(value.len(), 1, "{name}");
        assert!((value[0] - softplus_sum).abs() < 1e-12, "{name}");
    }
}

#[test]
fn a_model_with_a_defined_loss_trains() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        // y = 3x − 1 on 8 points.
        let xs: Vec<f64> = (0..8).map(|i| f64::from(i) / 4.0 - 1.0).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 3.0 * x - 1.0).collect();
        let x = graph.data("x").shape("8|->1").values(xs).build();
        let target = graph.data("y").shape("8|->1").values(ys).build();
        let w = graph.param("w").shape("1->1").build();
        let b = graph.param("b").shape("1").build();
        let prediction = &(&w * &x) + &b;
        let loss = total(&graph, &squared_error(&graph, &prediction, &target));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        let step = ctx
            .update(&[
                Update::subtract(&w, 0.02 * Formula::grad(&w)),
                Update::subtract(&b, 0.02 * Formula::grad(&b)),
            ])
            .unwrap();
        ctx.run(&backprop).unwrap();
        let first = ctx.values(&loss).unwrap()[0];
        for _ in 0..300 {
            ctx.run(&backprop).unwrap();
            ctx.run(&step).unwrap();
        }
        ctx.run(&backprop).unwrap();
        let last = ctx.values(&loss).unwrap()[0];
        assert!(
            last < 1e-4 && last < first / 100.0,
            "{name}: {first} → {last}"
        );
        let (w, b) = (ctx.values(&w).unwrap()[0], ctx.values(&b).unwrap()[0]);
        assert!(
            (w - 3.0).abs() < 1e-2 && (b + 1.0).abs() < 1e-2,
            "{name}: w {w}, b {b}"
        );
    }
}

#[test]
fn formulas_that_read_what_they_cannot_are_errors() {
    let graph = Graph::new();
    let x = graph.param("x").shape("3").build();
    let bad = graph.define(
        "reads its own result",
        &[&x],
        Definition {
            logic: OpLogic::Pointwise,
            accum: Binop::Arg2,
            forward: Formula::result(),
            gradients: vec![],
        },
    );
    assert!(
        bad.error()
            .unwrap()
            .message
            .contains("forward formula can only read")
    );
    let graph = Graph::new();
    let x = graph.param("x").shape("3").build();
    let y = graph.define(
        "bad gradient",
        &[&x],
        Definition {
            logic: OpLogic::Pointwise,
            accum: Binop::Arg2,
            forward: Formula::input(0),
            gradients: vec![(2, Formula::result_grad())],
        },
    );
    assert!(y.error().is_none());
    assert!(
        graph
            .check()
            .unwrap_err()
            .message
            .contains("operand 2 of 1")
    );
}
