//! A first program, as the README's "Using rcannl in a project" section writes it: three classes
//! of points in the plane, an MLP whose sizes are inferred, trained with Adam on the
//! cross-entropy; then the predictions read as a shaped array and saved as `.npy` files.
//!
//! `cargo run --release --example first_model -- [FOLDER]` (the `.npy` files land in `FOLDER`,
//! else the current folder).

use std::path::PathBuf;

use rcannl::nn::blocks::Mlp;
use rcannl::nn::data::Rng;
use rcannl::nn::loss::cross_entropy;
use rcannl::nn::metrics::accuracy;
use rcannl::nn::optim::Adam;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

const CLASSES: usize = 3;
const BATCH: usize = 32;
const BATCHES: usize = 16;

/// `n` points around three centres on a circle, with their classes one-hot: the points as
/// `n × 2` values, the labels as `n × 3`, both row-major.
fn three_blobs(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let (mut points, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let class = i % CLASSES;
        let angle = class as f64 * std::f64::consts::TAU / CLASSES as f64;
        points.push(angle.cos() + 0.4 * rng.normal());
        points.push(angle.sin() + 0.4 * rng.normal());
        labels.extend((0..CLASSES).map(|c| if c == class { 1.0 } else { 0.0 }));
    }
    (points, labels)
}

fn main() -> Result<(), TensorError> {
    let folder = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let (train_points, train_labels) = three_blobs(BATCH * BATCHES, 1);
    let (test_points, test_labels) = three_blobs(300, 2);

    // The graph: data tensors (batch axes before `|`, features after `->`), a model, a loss.
    let graph = Graph::new();
    let points = graph
        .data("points")
        .shape(&format!("{BATCHES},{BATCH}|->2"))
        .values(train_points)
        .build();
    let labels = graph
        .data("labels")
        .shape(&format!("{BATCHES},{BATCH}|->{CLASSES}"))
        .values(train_labels)
        .build();
    let batch = graph.static_index(); // which batch a training step reads
    let mlp = Mlp::new(&graph, "mlp", &[16, 16, CLASSES]); // input size inferred: 2
    let logits = mlp.apply(&points.slice(&batch));
    let loss = cross_entropy(&logits, &labels.slice(&batch)).mean_over(Axes::all());

    // The same model on the test set, and its accuracy, computed in the graph.
    let test = graph
        .data("test points")
        .shape("300|->2")
        .values(test_points)
        .build();
    let test_onehot = graph
        .data("test labels")
        .shape(&format!("300|->{CLASSES}"))
        .values(test_labels)
        .build();
    let test_logits = mlp.apply(&test);
    let test_accuracy = accuracy(&test_logits, &test_onehot);

    // A context compiles and runs routines on a backend: the C compiler's when there is one.
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let mut adam = Adam::new(&graph, &mlp.params(), 0.01);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let plan = Plan {
        epochs: 20,
        batches: BATCHES,
        batch_size: BATCH,
        progress: true,
    };
    let history = fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(()))?;
    println!(
        "backend {}: loss {:.4} after {} epochs",
        ctx.backend_name(),
        history.losses.last().copied().unwrap_or(f64::NAN),
        plan.epochs
    );

    // Results come back shaped: dims in memory order (batch, output, input).
    let evaluate = ctx.forward(&[&test_logits, &test_accuracy])?;
    ctx.run(&evaluate)?;
    let scores = ctx.array(&test_logits)?;
    let predicted = scores.argmax(-1)?;
    println!(
        "test logits {:?}; the first five predictions {:?}; test accuracy {:.1}%",
        scores.shape(),
        &predicted[..5],
        100.0 * ctx.array(&test_accuracy)?.values()[0]
    );

    // .npy files for numpy (`numpy.load`) or a later run (`Context::load_npy`).
    std::fs::create_dir_all(&folder)
        .map_err(|e| TensorError::new(format!("creating {}: {e}", folder.display())))?;
    ctx.save_npy(&test_logits, folder.join("test_logits.npy"))?;
    for param in mlp.params() {
        ctx.save_npy(&param, folder.join(format!("{}.npy", param.label())))?;
    }
    println!(
        "saved the test logits and the parameters in {}",
        folder.display()
    );
    Ok(())
}
