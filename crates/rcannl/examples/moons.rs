//! Half-moons classification: an MLP (2 → 16 → 16 → 1) whose sizes are inferred, trained with SGD
//! and momentum on a hinge loss; prints train and test accuracy and writes `moons_loss.png` and
//! `moons_boundary.png`.
//!
//! `cargo run --release --example moons`

use std::path::Path;
use std::time::Instant;

use rcannl::nn::data::moons;
use rcannl::nn::loss::hinge;
use rcannl::nn::optim::{Schedule, Sgd};
use rcannl::nn::plot::{decision_boundary, loss_curve};
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

const BATCH: usize = 32;
const BATCHES: usize = 32;
const TEST: usize = 512;
const EPOCHS: usize = 60;
const GRID: usize = 64;

/// The fraction of scores whose sign matches the label.
fn accuracy(scores: &[f64], labels: &[f64]) -> f64 {
    let right = scores
        .iter()
        .zip(labels)
        .filter(|(s, l)| (**s > 0.0) == (**l > 0.0))
        .count();
    right as f64 / labels.len() as f64
}

op! {
    /// The network: 2 → 16 → 16 → 1, ReLU between layers, sizes inferred from the data and the
    /// widths given; every application on the graph shares its parameters.
    fn mlp(x) {
        let h = relu({ w1; o = [16] } * x + { b1 });
        let h = relu({ w2; o = [16] } * h + { b2 });
        { w3; o = [1] } * h + { b3 }
    }
}

fn main() -> Result<(), TensorError> {
    let started = Instant::now();
    let (train_x, train_y) = moons(BATCH * BATCHES, 0.1, 1);
    let (test_x, test_y) = moons(TEST, 0.1, 2);

    let graph = Graph::new();
    // The training set as 32 batches of 32; a static index picks the batch of each step.
    let xs = graph
        .data("xs")
        .shape(&format!("{BATCHES},{BATCH}|->2"))
        .values(train_x.clone())
        .build();
    let ys = graph
        .data("ys")
        .shape(&format!("{BATCHES},{BATCH}|->1"))
        .values(train_y.clone())
        .build();
    let batch = graph.static_index();
    let scores = mlp(&xs.slice(&batch));
    let loss = hinge(&scores, &ys.slice(&batch));

    // The same network on every training point, the test set and a grid over the plane.
    let all_x = graph
        .data("train x")
        .shape(&format!("{}|->2", BATCH * BATCHES))
        .values(train_x.clone())
        .build();
    let test = graph
        .data("test x")
        .shape(&format!("{TEST}|->2"))
        .values(test_x.clone())
        .build();
    let grid = graph
        .data("grid")
        .shape(&format!("{}|->2", GRID * GRID))
        .build();
    let (train_scores, test_scores, grid_scores) = (mlp(&all_x), mlp(&test), mlp(&grid));

    let params = graph.params();
    let mut sgd = Sgd::new(&graph, &params, 0.1, 0.9);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    println!(
        "backend: {}; parameters: {}",
        ctx.backend_name(),
        params
            .iter()
            .map(|p| format!("{} {}", p.label(), p.shape()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let step = sgd.compile_step(&mut ctx, &loss)?;
    let evaluate = ctx.forward(&[&train_scores, &test_scores])?;
    let schedule = Schedule::Cosine {
        peak: 0.1,
        floor: 0.005,
        warmup: BATCHES,
    };
    let total = EPOCHS * BATCHES;
    let lr = sgd.lr.clone();
    let history = fit_step(
        &mut ctx,
        &step,
        &loss,
        batch,
        Plan {
            epochs: EPOCHS,
            batches: BATCHES,
            batch_size: BATCH,
            progress: true,
        },
        |ctx, n| schedule.apply(ctx, &lr, n, total),
    )?;

    ctx.run(&evaluate)?;
    let train_accuracy = accuracy(&ctx.values(&train_scores)?, &train_y);
    let test_accuracy = accuracy(&ctx.values(&test_scores)?, &test_y);
    println!(
        "final loss {:.4}; train accuracy {:.1}%, test accuracy {:.1}%; {:.0} examples/s",
        history.losses.last().copied().unwrap_or(f64::NAN),
        100.0 * train_accuracy,
        100.0 * test_accuracy,
        history.examples_per_second
    );

    loss_curve(Path::new("moons_loss.png"), &history.losses)?;
    let points: Vec<[f64; 2]> = test_x.chunks(2).map(|p| [p[0], p[1]]).collect();
    let on_grid = ctx.forward(&[&grid_scores])?;
    decision_boundary(
        Path::new("moons_boundary.png"),
        &points,
        &test_y,
        GRID,
        |cells| {
            let flat: Vec<f64> = cells.iter().flatten().copied().collect();
            ctx.set_values(&grid, &flat)?;
            ctx.run(&on_grid)?;
            ctx.values(&grid_scores)
        },
    )?;
    println!(
        "wrote moons_loss.png and moons_boundary.png in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
