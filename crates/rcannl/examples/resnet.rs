//! A small ResNet on the handwritten digits (the 8×8 images of the UCI data set, as the
//! `smartcore` crate embeds them, split as the `digits` example splits them): a 3×3 stem of 16
//! channels, a residual block of 16 channels, a strided one of 32 with a projection shortcut,
//! global average pooling and a dense layer of the 10 classes' logits. Trained with batch
//! normalization in train mode (batch statistics, running statistics updated in each training
//! step) and Adam on a cosine schedule, evaluated in eval mode (running statistics). Prints the
//! test accuracy.
//!
//! `cargo run --release --example resnet`

use std::time::Instant;

use rcannl::nn::blocks::Dense;
use rcannl::nn::cnn::{ConvBnRelu, ResidualBlock};
use rcannl::nn::conv::global_avg_pool;
use rcannl::nn::loss::{cross_entropy_ids, mean};
use rcannl::nn::norm::Mode;
use rcannl::nn::optim::{Adam, Schedule};
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

#[path = "support/digits.rs"]
mod digits;
use digits::{CLASSES, split};

const BATCH: usize = 32;
const EPOCHS: usize = 12;

/// The network: stem, two residual stages, pooling, the classes' logits.
struct ResNet {
    stem: ConvBnRelu,
    stages: [ResidualBlock; 2],
    head: Dense,
}

impl ResNet {
    fn new(graph: &Graph) -> ResNet {
        ResNet {
            stem: ConvBnRelu::new(graph, "stem", 1, 16, 3, 1),
            stages: [
                ResidualBlock::new(graph, "stage1", 16, 16, 1),
                ResidualBlock::new(graph, "stage2", 16, 32, 2),
            ],
            head: Dense::new(graph, "head", CLASSES),
        }
    }

    /// The logits of `batch | -> 8, 8, 1` images.
    fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        let features = self
            .stages
            .iter()
            .fold(self.stem.apply(x, mode), |h, stage| stage.apply(&h, mode));
        self.head.apply(&global_avg_pool(&features))
    }
}

fn main() -> Result<(), TensorError> {
    let started = Instant::now();
    let data = split(BATCH)?;
    println!(
        "{} training images in {} batches of {BATCH}, {} test images",
        data.batches * BATCH,
        data.batches,
        data.test_labels.len()
    );
    let graph = Graph::new();
    let model = ResNet::new(&graph);
    let [xs, ys, test] = data.tensors(&graph, BATCH);
    let batch = graph.static_index();
    let logits = model.apply(&xs.slice(&batch), Mode::Train);
    let loss = mean(&cross_entropy_ids(&logits, &ys.slice(&batch)));
    let test_logits = model.apply(&test, Mode::Eval);

    let mut adam = Adam::new(&graph, &graph.params(), 0.0);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let step = adam.compile_step(&mut ctx, &loss)?;
    let evaluate = ctx.forward(&[&test_logits])?;
    println!("compiled in {:.1} s", started.elapsed().as_secs_f64());

    let schedule = Schedule::Cosine {
        peak: 0.005,
        floor: 0.0001,
        warmup: data.batches,
    };
    let total = EPOCHS * data.batches;
    let lr = adam.lr.clone();
    let history = fit_step(
        &mut ctx,
        &step,
        &loss,
        batch,
        Plan {
            epochs: EPOCHS,
            batches: data.batches,
            batch_size: BATCH,
            progress: true,
        },
        |ctx, step| schedule.apply(ctx, &lr, step, total),
    )?;
    for (epoch, loss) in history.losses.iter().enumerate() {
        println!("epoch {:2}: mean loss {loss:.4}", epoch + 1);
    }

    ctx.run(&evaluate)?;
    let logits = ctx.values(&test_logits)?;
    let right = data.test_right(&logits);
    println!(
        "test accuracy {:.1}% ({right} of {}), batch norm in eval mode; {:.0} examples/s; {:.1} s in all",
        100.0 * right as f64 / data.test_labels.len() as f64,
        data.test_labels.len(),
        history.examples_per_second,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
