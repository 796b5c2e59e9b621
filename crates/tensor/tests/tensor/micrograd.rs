//! The scalar expression of micrograd's README, forward and backward, on both backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

fn scalar(graph: &Graph, label: &str, value: f64) -> Tensor {
    graph
        .param(label)
        .output([1])
        .precision(Precision::F64)
        .init(Init::Values(vec![value]))
        .build()
}

#[test]
fn micrograd_expression_and_its_gradients() {
    for backend in backends() {
        let graph = Graph::new();
        let a = scalar(&graph, "a", -4.0);
        let b = scalar(&graph, "b", 2.0);
        let three = graph.number(3.0);
        let mut c = &a + &b;
        let mut d = a.pmul(&b) + b.pow(&three);
        c = &c + &(&c + 1.0);
        c = &c + &(1.0 + &c + (-&a));
        d = &d + &(d.pmul(&graph.number(2.0)) + (&b + &a).relu());
        d = &d + &(3.0 * &d + (&b - &a).relu());
        let e = &c - &d;
        let f = e.pmul(&e);
        let mut g = &f / 2.0;
        g = &g + &(10.0 / &f);
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let routine = ctx.backprop(&g).unwrap();
        ctx.run(&routine).unwrap();
        let value = ctx.values(&g).unwrap()[0];
        assert!((value - 24.7041).abs() < 1e-4, "{name}: g = {value}");
        let da = ctx.grad(&a).unwrap()[0];
        let db = ctx.grad(&b).unwrap()[0];
        assert!((da - 138.8338).abs() < 1e-4, "{name}: dg/da = {da}");
        assert!((db - 645.5773).abs() < 1e-4, "{name}: dg/db = {db}");
        let zero = ctx.zero_grads(&[&a, &b]).unwrap();
        ctx.run(&zero).unwrap();
        assert_eq!(ctx.grad(&a).unwrap(), vec![0.0]);
        assert_eq!(ctx.grad(&b).unwrap(), vec![0.0]);
    }
}

#[test]
fn gradients_of_computed_tensors_are_kept_when_asked_for() {
    for backend in backends() {
        // e = a·b, f = e + a: df/de = 1, df/da = b + 1, df/db = a.
        let graph = Graph::new();
        let a = scalar(&graph, "a", 3.0);
        let b = scalar(&graph, "b", -2.0);
        let e = a.pmul(&b);
        let f = &e + &a;
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let plain = ctx.backprop(&f).unwrap();
        ctx.run(&plain).unwrap();
        assert_eq!(ctx.grad(&a).unwrap(), vec![-1.0], "{name}");
        let error = ctx.grad(&e).unwrap_err();
        assert!(
            error.message.contains("no gradient of") && error.message.contains("backprop_keeping"),
            "{name}: {error}"
        );
        // Not kept, e's gradient is fused into its readers; kept, it is stored and readable.
        let stored = |routine: &rcannl_tensor::Routine| {
            let header = format!("'grad {}':", e.label());
            routine
                .describe()
                .lines()
                .any(|line| line.contains(&header) && line.ends_with("materialized"))
        };
        assert!(!stored(&plain), "{name}: {}", plain.describe());
        let keeping = ctx.backprop_keeping(&f, &[&e]).unwrap();
        assert!(stored(&keeping), "{name}: {}", keeping.describe());
        ctx.run(&keeping).unwrap();
        assert_eq!(ctx.grad(&e).unwrap(), vec![1.0], "{name}");
        assert_eq!(ctx.grad(&b).unwrap(), vec![3.0], "{name}");
    }
}
