//! Training on every backend: the moons example's network (2 → 16 → 16 → 1, SGD with momentum
//! on a hinge loss, a cosine schedule) trained by `fit` classifies at least 95% of a held-out set
//! correctly.

use rcannl_nn::blocks::Mlp;
use rcannl_nn::data::moons;
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::{Schedule, Sgd};
use rcannl_nn::train::{Plan, fit};
use rcannl_tensor::{Context, Graph};

use crate::support;
use crate::target::Target;

const BATCH: usize = 32;
const BATCHES: usize = 16;
const TEST: usize = 512;
const EPOCHS: usize = 20;

/// The fraction of scores whose sign matches the label's.
fn accuracy(scores: &[f64], labels: &[f64]) -> f64 {
    let right = scores
        .iter()
        .zip(labels)
        .filter(|(s, l)| (**s > 0.0) == (**l > 0.0))
        .count();
    right as f64 / labels.len() as f64
}

fn an_mlp_separates_the_moons(target: &Target) {
    let (test_x, test_y) = moons(TEST, 0.1, 2);

    let graph = Graph::new();
    let (xs, ys) = support::moons_batches(&graph, BATCHES, BATCH);
    let batch = graph.static_index();
    let model = Mlp::new(&graph, "mlp", &[16, 16, 1]);
    let loss = hinge(&model.apply(&xs.slice(&batch)), &ys.slice(&batch));
    let test = graph
        .data("test x")
        .shape(&format!("{TEST}|->2"))
        .values(test_x)
        .build();
    let test_scores = model.apply(&test);

    let mut sgd = Sgd::new(&graph, &model.params(), 0.1, 0.9);
    let mut ctx = Context::with_backend(&graph, target.backend());
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = sgd.compile(&mut ctx).unwrap();
    let evaluate = ctx.forward(&[&test_scores]).unwrap();
    let schedule = Schedule::Cosine {
        peak: 0.1,
        floor: 0.005,
        warmup: BATCHES,
    };
    let lr = sgd.lr.clone();
    let plan = Plan {
        epochs: EPOCHS,
        batches: BATCHES,
        batch_size: BATCH,
        progress: false,
    };
    let history = fit(&mut ctx, &backprop, &step, &loss, batch, plan, |ctx, n| {
        schedule.apply(ctx, &lr, n, EPOCHS * BATCHES)
    })
    .unwrap();
    ctx.run(&evaluate).unwrap();
    let test_accuracy = accuracy(&ctx.values(&test_scores).unwrap(), &test_y);
    assert!(
        test_accuracy >= 0.95,
        "test accuracy {test_accuracy} on {}; losses by epoch {:?}",
        target.name(),
        history.losses
    );
    assert!(
        history.losses[EPOCHS - 1] < history.losses[0],
        "{:?}",
        history.losses
    );
}
conformance!(an_mlp_separates_the_moons);
