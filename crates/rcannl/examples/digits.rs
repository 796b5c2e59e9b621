//! Handwritten digits (the 8×8 images of the UCI data set, 1797 of them, as the `smartcore` crate
//! embeds them): an MLP and a small CNN, both trained with Adam on a softmax cross-entropy.
//! Prints each model's test accuracy.
//!
//! `cargo run --release --example digits`

use rcannl::nn::blocks::Mlp;
use rcannl::nn::conv::{Conv2d, ConvOptions, max_pool2d};
use rcannl::nn::loss::{cross_entropy_ids, mean};
use rcannl::nn::optim::Adam;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

#[path = "support/digits.rs"]
mod digits;
use digits::{CLASSES, Split, split};

const BATCH: usize = 32;

/// Trains the classifier `logits` builds (from `batch | -> 8, 8, 1` images) and returns its test
/// accuracy.
fn train(
    name: &str,
    data: &Split,
    epochs: usize,
    build: impl Fn(&Graph) -> Box<dyn Fn(&Tensor) -> Tensor>,
) -> Result<f64, TensorError> {
    let graph = Graph::new();
    let model = build(&graph);
    let [xs, ys, test] = data.tensors(&graph, BATCH);
    let batch = graph.static_index();
    let loss = mean(&cross_entropy_ids(
        &model(&xs.slice(&batch)),
        &ys.slice(&batch),
    ));
    let test_logits = model(&test);
    let mut adam = Adam::new(&graph, &graph.params(), 0.002);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let step = adam.compile_step(&mut ctx, &loss)?;
    let evaluate = ctx.forward(&[&test_logits])?;
    println!("{name}:");
    let history = fit_step(
        &mut ctx,
        &step,
        &loss,
        batch,
        Plan {
            epochs,
            batches: data.batches,
            batch_size: BATCH,
            progress: true,
        },
        |_, _| Ok(()),
    )?;
    ctx.run(&evaluate)?;
    let logits = ctx.values(&test_logits)?;
    let right = data.test_right(&logits);
    let accuracy = right as f64 / data.test_labels.len() as f64;
    println!(
        "  final loss {:.4}; test accuracy {:.1}% ({right} of {}); {:.0} examples/s",
        history.losses.last().copied().unwrap_or(f64::NAN),
        100.0 * accuracy,
        data.test_labels.len(),
        history.examples_per_second
    );
    Ok(accuracy)
}

fn main() -> Result<(), TensorError> {
    let data = split(BATCH)?;
    println!(
        "{} training images in {} batches of {BATCH}, {} test images",
        data.batches * BATCH,
        data.batches,
        data.test_labels.len()
    );
    let mlp = train("MLP 64 → 64 → 10", &data, 30, |graph| {
        let mlp = Mlp::new(graph, "mlp", &[64, CLASSES]);
        Box::new(move |x| mlp.apply(x))
    })?;
    let cnn = train("CNN conv 16 → pool → 64 → 10", &data, 20, |graph| {
        let conv = Conv2d::new(graph, "conv", 16, 3, ConvOptions::default().padding(1));
        let dense = Mlp::new(graph, "dense", &[64, CLASSES]);
        Box::new(move |x| dense.apply(&max_pool2d(&conv.apply(x).relu(), 2)))
    })?;
    println!(
        "test accuracy: MLP {:.1}%, CNN {:.1}%",
        100.0 * mlp,
        100.0 * cnn
    );
    Ok(())
}
