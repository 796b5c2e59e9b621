//! The half-moons MLP of the `moons` example, trained data-parallel over MPI: each rank takes an
//! equal share of every batch, gradients are averaged across ranks after each backprop, and
//! rank 0 prints the progress, the result and the share of the time spent merging gradients,
//! and writes `moons_mpi_loss.png` and the checkpoint `moons_mpi.safetensors`. Any number of
//! ranks that divides the batch of 32 trains to the same parameters (up to the order of f32
//! sums) as one process.
//!
//! ```text
//! cargo build --release --features mpi --example moons_mpi
//! mpirun -np 2 target/release/examples/moons_mpi [WIDTH]
//! ```
//!
//! `WIDTH` (16 unless given) is that of the two hidden layers: wider, a step computes more per
//! gradient merged, which shows what scaling out costs for larger models.

#[path = "support/report.rs"]
mod report;

use std::path::Path;
use std::time::Instant;

use rcannl::nn::blocks::Mlp;
use rcannl::nn::data::moons;
use rcannl::nn::distributed::{Ranks, Shuffle, fit_data_parallel};
use rcannl::nn::loss::hinge;
use rcannl::nn::optim::{Schedule, Sgd};
use rcannl::nn::plot::loss_curve;
use rcannl::nn::train::Plan;
use rcannl::prelude::*;
use report::{counted, merging_percent};

const BATCH: usize = 32;
const BATCHES: usize = 32;
const TEST: usize = 512;
const EPOCHS: usize = 60;

/// The fraction of scores whose sign matches the label.
fn accuracy(scores: &[f64], labels: &[f64]) -> f64 {
    let right = scores
        .iter()
        .zip(labels)
        .filter(|(s, l)| (**s > 0.0) == (**l > 0.0))
        .count();
    right as f64 / labels.len() as f64
}

fn train(ranks: &Ranks, width: usize) -> Result<(), TensorError> {
    let (train_x, train_y) = moons(BATCH * BATCHES, 0.1, 1);
    let (test_x, test_y) = moons(TEST, 0.1, 2);
    let share = BATCH / ranks.size();

    let graph = Graph::new();
    // This rank's rows of every batch; a static index picks the batch of each step.
    let xs = graph
        .data("xs")
        .shape(&format!("{BATCHES},{share}|->2"))
        .values(ranks.shard(&train_x, BATCHES, BATCH, 2)?)
        .build();
    let ys = graph
        .data("ys")
        .shape(&format!("{BATCHES},{share}|->1"))
        .values(ranks.shard(&train_y, BATCHES, BATCH, 1)?)
        .build();
    let batch = graph.static_index();
    let model = Mlp::new(&graph, "mlp", &[width, width, 1]);
    // The mean over this rank's rows: averaged across ranks, the mean over the whole batch.
    let loss = hinge(&model.apply(&xs.slice(&batch)), &ys.slice(&batch));
    let test = graph
        .data("test x")
        .shape(&format!("{TEST}|->2"))
        .values(test_x)
        .build();
    let test_scores = model.apply(&test);

    let params = model.params();
    let mut sgd = Sgd::new(&graph, &params, 0.1, 0.9);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    // Every rank starts from rank 0's parameters.
    ranks.broadcast(&mut ctx, &params.iter().collect::<Vec<_>>())?;
    let backprop = ctx.backprop(&loss)?;
    let update = sgd.compile(&mut ctx)?;
    let evaluate = ctx.forward(&[&test_scores])?;
    if ranks.is_root() {
        println!(
            "{}, {share} rows of each batch of {BATCH} on each; backend: {}",
            counted(ranks.size(), "rank"),
            ctx.backend_name()
        );
    }
    let schedule = Schedule::Cosine {
        peak: 0.1,
        floor: 0.005,
        warmup: BATCHES,
    };
    let total = EPOCHS * BATCHES;
    let lr = sgd.lr.clone();
    let started = Instant::now();
    let history = fit_data_parallel(
        ranks,
        &mut ctx,
        &backprop,
        &update,
        &loss,
        &params,
        batch,
        Plan {
            epochs: EPOCHS,
            batches: BATCHES,
            batch_size: BATCH,
            progress: true,
        },
        Shuffle { seed: Some(5) },
        |ctx, n| schedule.apply(ctx, &lr, n, total),
    )?;
    // Each rank's training loop, timed on the clock its merges are timed on: they happen inside
    // it. (Every rank takes part in both means.)
    let training = ranks.mean(started.elapsed().as_secs_f64());
    let merging = ranks.mean(ranks.merging_time().as_secs_f64());

    ctx.run(&evaluate)?;
    let test_accuracy = accuracy(&ctx.values(&test_scores)?, &test_y);
    let saved = Path::new("moons_mpi.safetensors");
    ranks.save(saved, &mut ctx, &params.iter().collect::<Vec<_>>())?;
    if ranks.is_root() {
        println!(
            "final loss {:.4}; test accuracy {:.1}%; {:.0} examples/s, {:.0}% of it merging \
             gradients",
            history.losses.last().copied().unwrap_or(f64::NAN),
            100.0 * test_accuracy,
            history.examples_per_second,
            merging_percent(merging, training)
        );
        loss_curve(Path::new("moons_mpi_loss.png"), &history.losses)?;
        println!("wrote moons_mpi_loss.png and {}", saved.display());
    }
    Ok(())
}

fn main() -> Result<(), TensorError> {
    let ranks = Ranks::init()?;
    let width = match std::env::args().nth(1) {
        None => 16,
        Some(arg) => arg.parse().map_err(|_| {
            TensorError::new(format!(
                "the width of the hidden layers is a number, not {arg:?}"
            ))
        })?,
    };
    // A failure on one rank would leave the others waiting for it: every rank stops.
    train(&ranks, width).inspect_err(|e| {
        if ranks.size() > 1 {
            ranks.abort(e)
        }
    })
}
