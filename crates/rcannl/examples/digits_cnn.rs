//! A convolutional network with batch normalization on the handwritten digits, written as a
//! PyTorch user writes one: trained, saved to a checkpoint with its running statistics, then
//! loaded into a model built afresh — as another program would — and evaluated there, giving
//! the same test predictions as the trained model.
//!
//! `cargo run --release --example digits_cnn -- [CHECKPOINT]` (default: `digits_cnn.safetensors`
//! in the system's temporary folder).

use std::path::PathBuf;

use rcannl::nn::blocks::{Linear, LinearOptions};
use rcannl::nn::checkpoint;
use rcannl::nn::conv::{Conv2d, ConvOptions, max_pool2d};
use rcannl::nn::loss::{cross_entropy_ids, mean};
use rcannl::nn::norm::{BatchNorm, Mode};
use rcannl::nn::optim::Adam;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

#[path = "support/digits.rs"]
mod digits;
use digits::{CLASSES, Split, split};

const BATCH: usize = 32;
const EPOCHS: usize = 12;

/// Convolution (no bias: the norm's takes its place), batch norm, ReLU, 2×2 max-pooling.
struct ConvUnit {
    conv: Conv2d,
    norm: BatchNorm,
}

impl ConvUnit {
    fn new(graph: &Graph, label: &str, channels: usize) -> ConvUnit {
        let options = ConvOptions::default().padding(1).bias(false);
        ConvUnit {
            conv: Conv2d::new(graph, &format!("{label}.conv"), channels, 3, options),
            norm: BatchNorm::new(graph, &format!("{label}.norm"), channels),
        }
    }

    fn forward(&self, x: &Tensor, mode: Mode) -> Tensor {
        max_pool2d(&self.norm.apply(&self.conv.apply(x), mode).relu(), 2)
    }
}

/// 8×8 images → 16 channels at 4×4 → 32 channels at 2×2 → the classes' logits.
struct Net {
    first: ConvUnit,
    second: ConvUnit,
    classifier: Linear,
}

impl Net {
    fn new(graph: &Graph) -> Net {
        Net {
            first: ConvUnit::new(graph, "first", 16),
            second: ConvUnit::new(graph, "second", 32),
            // Over the flattened 2×2×32 features, as `nn.Linear(128, 10)` after a flatten.
            classifier: Linear::with_options(
                graph,
                "classifier",
                &[CLASSES],
                LinearOptions::new().contracted_axes(3),
            ),
        }
    }

    fn forward(&self, images: &Tensor, mode: Mode) -> Tensor {
        let features = self.second.forward(&self.first.forward(images, mode), mode);
        self.classifier.apply(&features)
    }
}

/// The test set's logits by a model in evaluation mode in `ctx`, and its accuracy in percent.
fn evaluate(ctx: &mut Context, data: &Split, logits: &Tensor) -> Result<(Array, f64), TensorError> {
    let evaluate = ctx.forward(&[logits])?;
    ctx.run(&evaluate)?;
    let logits = ctx.array(logits)?;
    let right = data.test_right(logits.values());
    Ok((logits, 100.0 * right as f64 / data.test_labels.len() as f64))
}

fn main() -> Result<(), TensorError> {
    let checkpoint_path = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join("digits_cnn.safetensors"),
        PathBuf::from,
    );
    let data = split(BATCH)?;

    // Training.
    let graph = Graph::new();
    let net = Net::new(&graph);
    let [train_images, labels, test_images] = data.tensors(&graph, BATCH);
    let batch = graph.static_index();
    let loss = mean(&cross_entropy_ids(
        &net.forward(&train_images.slice(&batch), Mode::Train),
        &labels.slice(&batch),
    ));
    let test_logits = net.forward(&test_images, Mode::Eval);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let mut adam = Adam::new(&graph, &graph.params(), 0.003);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let plan = Plan {
        epochs: EPOCHS,
        batches: data.batches,
        batch_size: BATCH,
        progress: true,
    };
    let history = fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(()))?;
    let (trained, trained_accuracy) = evaluate(&mut ctx, &data, &test_logits)?;
    println!(
        "trained: loss {:.4}; test accuracy {trained_accuracy:.1}% of {} images",
        history.losses.last().copied().unwrap_or(f64::NAN),
        data.test_labels.len()
    );
    checkpoint::save_params(&checkpoint_path, &mut ctx, &graph)?;
    println!(
        "saved the parameters and running statistics to {}",
        checkpoint_path.display()
    );

    // Evaluation, from the checkpoint alone.
    let graph = Graph::new();
    let net = Net::new(&graph);
    let [_, _, test_images] = data.tensors(&graph, BATCH);
    let test_logits = net.forward(&test_images, Mode::Eval);
    let mut ctx = Context::new(&graph);
    checkpoint::load_params(&checkpoint_path, &mut ctx, &graph)?;
    let (reloaded, reloaded_accuracy) = evaluate(&mut ctx, &data, &test_logits)?;
    println!("reloaded: test accuracy {reloaded_accuracy:.1}%");
    if reloaded != trained {
        return Err(TensorError::new(
            "the reloaded model's test logits differ from the trained model's",
        ));
    }
    println!("the reloaded model's test logits are the trained model's, bit for bit");
    Ok(())
}
