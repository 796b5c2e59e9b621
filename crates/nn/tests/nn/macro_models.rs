//! The moons MLP written with `op!` in three lines against the same model written with the
//! builder API: the compiled training step is the same code on both CPU backends, and training
//! reaches the same accuracy.

use crate::support;

use rcannl_nn::data::moons;
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::Sgd;
use rcannl_nn::train::{Plan, fit_step};
use rcannl_tensor::{Context, Graph, Tensor, op};

const BATCH: usize = 32;
const BATCHES: usize = 16;

op! {
    /// 2 → 16 → 16 → 1 with ReLU between layers; one set of parameters per graph.
    fn mlp(x) {
        let h = relu({ w1; o = [16] } * x + { b1 });
        let h = relu({ w2; o = [16] } * h + { b2 });
        { w3; o = [1] } * h + { b3 }
    }
}

/// The same network with the builder API, its parameters made first as `op!` hoists them.
fn builder_mlp(graph: &Graph) -> impl Fn(&Tensor) -> Tensor + use<> {
    let w1 = graph.param("w1").output([16]).build();
    let b1 = graph.param("b1").build();
    let w2 = graph.param("w2").output([16]).build();
    let b2 = graph.param("b2").build();
    let w3 = graph.param("w3").output([1]).build();
    let b3 = graph.param("b3").build();
    move |x| {
        let h = (&(&w1 * x) + &b1).relu();
        let h = (&(&w2 * &h) + &b2).relu();
        &(&w3 * &h) + &b3
    }
}

/// A model made on a graph: its parameters made when it is made.
type Model = Box<dyn Fn(&Tensor) -> Tensor>;

/// What one training run gives: the training step's loop IR and generated code, and the test
/// accuracy after training.
struct Run {
    loops: String,
    code: Option<String>,
    accuracy: f64,
}

fn train(backend: Box<dyn rcannl_backends::Backend>, make: fn(&Graph) -> Model) -> Run {
    let (test_x, test_y) = moons(256, 0.1, 2);
    let graph = Graph::new();
    let (xs, ys) = support::moons_batches(&graph, BATCHES, BATCH);
    let batch = graph.static_index();
    // The input first, then the parameters: op! makes them at the first application.
    let input = xs.slice(&batch);
    let model = make(&graph);
    let scores = model(&input);
    let loss = hinge(&scores, &ys.slice(&batch));
    let test = graph.data("test").shape("256|->2").values(test_x).build();
    let test_scores = model(&test);
    let mut sgd = Sgd::new(&graph, &graph.params(), 0.1, 0.9);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let step = sgd.compile_step(&mut ctx, &loss).unwrap();
    let plan = Plan {
        epochs: 25,
        batches: BATCHES,
        batch_size: BATCH,
        progress: false,
    };
    fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(())).unwrap();
    let evaluate = ctx.forward(&[&test_scores]).unwrap();
    ctx.run(&evaluate).unwrap();
    let scores = ctx.values(&test_scores).unwrap();
    let right = scores
        .iter()
        .zip(&test_y)
        .filter(|(s, y)| (**s > 0.0) == (**y > 0.0))
        .count();
    Run {
        loops: step.describe(),
        code: step.source(),
        accuracy: right as f64 / test_y.len() as f64,
    }
}

#[test]
fn the_op_mlp_compiles_to_the_builders_code_and_trains_alike() {
    for (with_macro, with_builder) in support::backends().into_iter().zip(support::backends()) {
        let name = with_macro.name();
        let macro_run = train(with_macro, |_| Box::new(mlp));
        let builder_run = train(with_builder, |graph| Box::new(builder_mlp(graph)));
        assert_eq!(macro_run.loops, builder_run.loops, "{name}: loop IR");
        assert_eq!(macro_run.code, builder_run.code, "{name}: generated code");
        assert_eq!(macro_run.accuracy, builder_run.accuracy, "{name}");
        assert!(
            macro_run.accuracy > 0.95,
            "{name}: test accuracy {}",
            macro_run.accuracy
        );
    }
}
