//! Counting circles: 16×16 images with one, two or three circles drawn at random; a small CNN
//! (two 3×3 convolutions with max-pooling, then an MLP) learns to count them, trained with Adam
//! on a softmax cross-entropy. Prints the test accuracy.
//!
//! `cargo run --release --example circles`

use rcannl::nn::conv::{Conv2d, ConvOptions, max_pool2d};
use rcannl::nn::data::Rng;
use rcannl::nn::loss::{cross_entropy, mean};
use rcannl::nn::optim::Adam;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

const SIZE: usize = 16;
const CLASSES: usize = 3;
const BATCH: usize = 32;
const BATCHES: usize = 48;
const TEST: usize = 256;
const EPOCHS: usize = 15;

/// `n` images (row-major, one channel) with 1 to 3 rings each, and their one-hot counts.
fn images(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    let mut rng = Rng::new(seed);
    let mut pixels = vec![0.0; n * SIZE * SIZE];
    let mut one_hot = vec![0.0; n * CLASSES];
    let mut counts = Vec::with_capacity(n);
    for i in 0..n {
        let count = 1 + (rng.next_u64() % CLASSES as u64) as usize;
        for _ in 0..count {
            let radius = 1.5 + 1.5 * rng.uniform();
            let cx = radius + rng.uniform() * (SIZE as f64 - 2.0 * radius);
            let cy = radius + rng.uniform() * (SIZE as f64 - 2.0 * radius);
            for y in 0..SIZE {
                for x in 0..SIZE {
                    let d = ((x as f64 - cx).powi(2) + (y as f64 - cy).powi(2)).sqrt();
                    if (d - radius).abs() < 0.7 {
                        pixels[(i * SIZE + y) * SIZE + x] = 1.0;
                    }
                }
            }
        }
        one_hot[i * CLASSES + count - 1] = 1.0;
        counts.push(count);
    }
    (pixels, one_hot, counts)
}

/// The network: features from two convolution stages, then two dense layers to the classes.
struct Net {
    conv1: Conv2d,
    conv2: Conv2d,
    dense1: Tensor,
    dense2: Tensor,
}

impl Net {
    fn new(graph: &Graph) -> Net {
        Net {
            conv1: Conv2d::new(graph, "conv1", 8, 3, ConvOptions::default().padding(1)),
            conv2: Conv2d::new(graph, "conv2", 16, 3, ConvOptions::default().padding(1)),
            dense1: graph.param("dense1").output([32]).build(),
            dense2: graph.param("dense2").output([CLASSES]).build(),
        }
    }

    fn logits(&self, images: &Tensor) -> Tensor {
        let h = max_pool2d(&self.conv1.apply(images).relu(), 2);
        let h = max_pool2d(&self.conv2.apply(&h).relu(), 2);
        // Flatten by composition: the dense layer's input axes take all of h's output axes.
        let h = (&self.dense1 * &h).relu();
        &self.dense2 * &h
    }

    fn params(&self) -> Vec<Tensor> {
        let mut params = self.conv1.params();
        params.extend(self.conv2.params());
        params.extend([self.dense1.clone(), self.dense2.clone()]);
        params
    }
}

fn main() -> Result<(), TensorError> {
    let (train_pixels, train_labels, _) = images(BATCH * BATCHES, 1);
    let (test_pixels, _, test_counts) = images(TEST, 2);
    let graph = Graph::new();
    let xs = graph
        .data("images")
        .shape(&format!("{BATCHES},{BATCH}|->{SIZE},{SIZE},1"))
        .values(train_pixels)
        .build();
    let ys = graph
        .data("labels")
        .shape(&format!("{BATCHES},{BATCH}|->{CLASSES}"))
        .values(train_labels)
        .build();
    let batch = graph.static_index();
    let net = Net::new(&graph);
    let per_example = cross_entropy(&net.logits(&xs.slice(&batch)), &ys.slice(&batch));
    let loss = mean(&per_example);

    let test_x = graph
        .data("test images")
        .shape(&format!("{TEST}|->{SIZE},{SIZE},1"))
        .values(test_pixels)
        .build();
    let test_logits = net.logits(&test_x);

    let mut adam = Adam::new(&graph, &net.params(), 0.003);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let step = adam.compile_step(&mut ctx, &loss)?;
    let evaluate = ctx.forward(&[&test_logits])?;
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
        |_, _| Ok(()),
    )?;
    ctx.run(&evaluate)?;
    let logits = ctx.values(&test_logits)?;
    let right = logits
        .chunks(CLASSES)
        .zip(&test_counts)
        .filter(|(row, count)| {
            let best = (0..CLASSES)
                .max_by(|a, b| row[*a].total_cmp(&row[*b]))
                .unwrap_or(0);
            best + 1 == **count
        })
        .count();
    println!(
        "final loss {:.4}; test accuracy {:.1}% ({} of {TEST}); {:.0} examples/s",
        history.losses.last().copied().unwrap_or(f64::NAN),
        100.0 * right as f64 / TEST as f64,
        right,
        history.examples_per_second
    );
    Ok(())
}
