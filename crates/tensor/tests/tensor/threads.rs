//! Graphs, tensors and contexts cross threads: built on one, trained on another, and a graph
//! shared by threads building on it at once.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{
    Capture, Context, Formula, Graph, Init, LeafBuilder, Routine, StaticIndex, Tensor, TensorError,
    Update,
};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

fn send_and_sync<T: Send + Sync>() {}

#[test]
fn the_library_types_are_send_and_sync() {
    send_and_sync::<Graph>();
    send_and_sync::<Tensor>();
    send_and_sync::<Context>();
    send_and_sync::<Routine>();
    send_and_sync::<Capture>();
    send_and_sync::<StaticIndex>();
    send_and_sync::<LeafBuilder>();
    send_and_sync::<Update>();
    send_and_sync::<Formula>();
    send_and_sync::<TensorError>();
    send_and_sync::<Box<dyn Backend>>();
}

/// `y = w·x + b` against three points of `y = 2x + 1`, from `w = 0.5`, `b = 0`; the loss is the
/// sum of squared residuals.
fn regression(graph: &Graph) -> [Tensor; 3] {
    let param = |label: &str, shape: &str, value: f64| {
        graph
            .param(label)
            .shape(shape)
            .precision(Precision::F64)
            .init(Init::Values(vec![value]))
            .build()
    };
    let data = |label: &str, values: Vec<f64>| {
        graph
            .data(label)
            .shape("3|->1")
            .precision(Precision::F64)
            .values(values)
            .build()
    };
    let (w, b) = (param("w", "1->1", 0.5), param("b", "1", 0.0));
    let x = data("x", vec![1.0, 2.0, 3.0]);
    let y = data("y", vec![3.0, 5.0, 7.0]);
    let residual = &(&(&w * &x) + &b) - &y;
    [w, b, residual.pmul(&residual)]
}

#[test]
fn a_context_built_on_one_thread_trains_on_another() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let [w, b, loss] = regression(&graph);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx
            .train_step(
                &loss,
                &[
                    Update::subtract(&w, 0.01 * Formula::grad(&w)),
                    Update::subtract(&b, 0.01 * Formula::grad(&b)),
                ],
            )
            .unwrap();
        let trained = std::thread::spawn(move || {
            ctx.run(&step).unwrap();
            // Residuals −2.5, −4, −5.5: dL/dw = 2·(−2.5·1 − 4·2 − 5.5·3) = −54, dL/db = −24.
            let first = (ctx.values(&w).unwrap()[0], ctx.values(&b).unwrap()[0]);
            for _ in 0..3000 {
                ctx.run(&step).unwrap();
            }
            (first, ctx, w, b)
        })
        .join()
        .unwrap();
        let ((w1, b1), ctx, w, b) = trained;
        assert!((w1 - 1.04).abs() < 1e-12, "{name}: w after one step {w1}");
        assert!((b1 - 0.24).abs() < 1e-12, "{name}: b after one step {b1}");
        // Back on this thread, the context still runs and reads.
        let (w, b) = (ctx.values(&w).unwrap()[0], ctx.values(&b).unwrap()[0]);
        assert!(
            (w - 2.0).abs() < 1e-6 && (b - 1.0).abs() < 1e-6,
            "{name}: w {w}, b {b}"
        );
    }
}

#[test]
fn threads_build_on_one_graph_at_once() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .output([2])
        .precision(Precision::F64)
        .values(vec![1.0, 2.0])
        .build();
    let sums: Vec<Tensor> = std::thread::scope(|scope| {
        let workers: Vec<_> = (1..=4)
            .map(|k| {
                let x = &x;
                scope.spawn(move || {
                    let mut t = x.clone();
                    for _ in 0..50 {
                        t = &t + f64::from(k);
                    }
                    t
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    graph.check().unwrap();
    for backend in backends() {
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        let outputs: Vec<&Tensor> = sums.iter().collect();
        let forward = ctx.forward(&outputs).unwrap();
        ctx.run(&forward).unwrap();
        for (k, t) in (1..=4).zip(&sums) {
            let expected = [1.0 + 50.0 * f64::from(k), 2.0 + 50.0 * f64::from(k)];
            assert_eq!(ctx.values(t).unwrap(), expected, "{name}: x + 50·{k}");
        }
    }
}
