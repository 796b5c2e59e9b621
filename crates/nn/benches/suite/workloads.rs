//! The benchmarks' workloads, on a backend of the caller's choice (the suite's on the C backend):
//! each built on its own graph and context, and handed back as a closure doing what one iteration
//! of a real loop does (running the routines, the optimizer's update, reading the loss or the
//! output).

use rcannl_backends::Backend;
use rcannl_backends::cc::Compiler;
use rcannl_nn::attention::{PositionDense, Rotary, TransformerBlock};
use rcannl_nn::blocks::{Dense, Mlp};
use rcannl_nn::cnn::{ConvBnRelu, ResidualBlock};
use rcannl_nn::conv::{Conv2d, ConvOptions, Padding, global_avg_pool, max_pool2d};
use rcannl_nn::data::{Rng, moons};
use rcannl_nn::embedding::Embedding;
use rcannl_nn::loss::{cross_entropy, cross_entropy_ids, hinge, mean, sum};
use rcannl_nn::norm::{LayerNorm, Mode};
use rcannl_nn::optim::{Adam, Sgd};
use rcannl_nn::position::LearnedPositions;
use rcannl_tensor::{BackendChoice, Context, Graph, Tensor, TensorError};

/// One iteration of a workload, owning its context.
pub type Step = Box<dyn FnMut() -> Result<(), TensorError>>;

/// The 3×3 valid convolution over images laid out `batch | -> height, width, channels`.
const CONV_VALID: &str = "...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d";
/// The convolution's sizes: (8, 64, 58, 58) in, 64 channels out.
const CONV: (usize, usize, usize, usize) = (8, 64, 58, 64);
// The transformer of the `names` example: vocabulary, window, width, heads, blocks, batch, and
// Adam's learning rate.
const VOCABULARY: usize = 27;
const WINDOW: usize = 8;
const MODEL: usize = 32;
const HEADS: usize = 4;
const BLOCKS: usize = 2;
const TRANSFORMER_BATCH: usize = 64;
const TRANSFORMER_LR: f64 = 0.005;
// The MLP 784 → 512 → 512 → 10: its layers after the inputs, training batch and Adam's rate.
const MLP_WIDTHS: [usize; 3] = [512, 512, 10];
const MLP_INPUTS: usize = 784;
const MLP_BATCH: usize = 128;
const MLP_LR: f64 = 0.001;
// The `digits` example's CNN: batch, classes, Adam's rate.
const DIGITS_BATCH: usize = 32;
const DIGITS_CLASSES: usize = 10;
const DIGITS_LR: f64 = 0.002;
// The moons MLP: layers, learning rate and momentum.
const MOONS_WIDTHS: [usize; 3] = [16, 16, 1];
const MOONS_LR: f64 = 0.1;
const MOONS_MOMENTUM: f64 = 0.9;

/// A context on the backend `on` (the C backend with the flags of its environment for `cc`).
fn context(graph: &Graph, on: BackendChoice) -> Result<Context, TensorError> {
    let backend: Box<dyn Backend> = match on {
        BackendChoice::Cc => Box::new(Compiler::from_environment().map_err(|e| {
            TensorError::new(format!("the suite runs on the C backend: {}", e.message))
        })?),
        other => other.backend()?,
    };
    let mut ctx = Context::with_backend(graph, backend);
    ctx.set_seed(1);
    Ok(ctx)
}

/// `n` standard normal values.
fn normal(n: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n).map(|_| rng.normal()).collect()
}

/// `n` token ids below `vocabulary`.
fn tokens(n: usize, vocabulary: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.next_u64() % vocabulary as u64) as f64)
        .collect()
}

/// `n` one-hot rows of `classes`, the classes drawn at random.
fn one_hot_rows(n: usize, classes: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n)
        .flat_map(|_| {
            let class = (rng.next_u64() % classes as u64) as usize;
            (0..classes).map(move |c| f64::from(u8::from(c == class)))
        })
        .collect()
}

fn data(graph: &Graph, label: &str, shape: &str, values: Vec<f64>) -> Tensor {
    graph.data(label).shape(shape).values(values).build()
}

/// A training step: the routine `compile` makes of `loss` (the optimizer's whole step, or
/// backprop alone), then the loss read back.
fn training_step(
    mut ctx: Context,
    loss: Tensor,
    compile: impl FnOnce(&mut Context, &Tensor) -> Result<rcannl_tensor::Routine, TensorError>,
) -> Result<Step, TensorError> {
    let step = compile(&mut ctx, &loss)?;
    Ok(Box::new(move || {
        ctx.run(&step)?;
        let value = ctx.values(&loss)?[0];
        if value.is_finite() {
            Ok(())
        } else {
            Err(TensorError::new(format!("the loss is {value}")))
        }
    }))
}

/// The product of two `n × n` f32 matrices.
pub fn matmul(n: usize, on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(1);
    let shape = format!("{n},{n}");
    let a = data(&graph, "a", &shape, normal(n * n, &mut rng));
    let b = data(&graph, "b", &shape, normal(n * n, &mut rng));
    let c = a.einsum("i, j; j, k => i, k", &b);
    let mut ctx = context(&graph, on)?;
    let forward = ctx.forward(&[&c])?;
    Ok(Box::new(move || ctx.run(&forward)))
}

/// The convolution's input (a parameter when its gradient is wanted) and kernel.
fn conv_operands(graph: &Graph, input_gradient: bool) -> (Tensor, Tensor) {
    let (batch, channels, size, out) = CONV;
    let mut rng = Rng::new(2);
    let values = normal(batch * size * size * channels, &mut rng);
    let shape = format!("{batch}|->{size},{size},{channels}");
    let x = if input_gradient {
        graph
            .param("x")
            .shape(&shape)
            .init(rcannl_tensor::Init::Values(values))
            .build()
    } else {
        data(graph, "x", &shape, values)
    };
    let kernel = graph
        .param("kernel")
        .shape(&format!("3,3,{channels}->{out}"))
        .build();
    (x, kernel)
}

/// The 3×3 valid convolution, forward.
pub fn conv_forward(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, kernel) = conv_operands(&graph, false);
    let y = x.einsum(CONV_VALID, &kernel);
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    let forward = ctx.forward(&[&y])?;
    Ok(Box::new(move || ctx.run(&forward)))
}

/// The 3×3 valid convolution's training step: the sum of its output weighted by fixed random
/// values (with plain sum, the output's gradient would be a constant, which a compiler could fold
/// away), the gradients of input and kernel (no update: the step of the layer, not of an
/// optimizer).
pub fn conv_step(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, kernel) = conv_operands(&graph, true);
    let (batch, _, size, out) = CONV;
    let valid = size - 2;
    let weights = data(
        &graph,
        "output weights",
        &format!("{batch}|->{valid},{valid},{out}"),
        normal(batch * valid * valid * out, &mut Rng::new(7)),
    );
    let loss = sum(&x.einsum(CONV_VALID, &kernel).pmul(&weights));
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| ctx.backprop(loss))
}

/// One-hot rows for ids `… | -> c` (one axis of positions): `… | -> c, VOCABULARY`, as the
/// `names` example makes them.
fn one_hot_each(ids: &Tensor) -> Tensor {
    let graph = ids.graph();
    ids.outer_sum(
        "...|...->c; v => ...|...->c, v",
        &(-&graph.range(VOCABULARY)),
    )
    .eq(&graph.number(0.0))
}

/// The `names` example's transformer and its mean cross-entropy over a batch of windows of
/// random tokens, every position scored; and its parameters.
fn transformer_loss(graph: &Graph) -> (Tensor, Vec<Tensor>) {
    let mut rng = Rng::new(3);
    let shape = format!("{TRANSFORMER_BATCH}|->{WINDOW}");
    let n = TRANSFORMER_BATCH * WINDOW;
    let x = data(graph, "windows", &shape, tokens(n, VOCABULARY, &mut rng));
    let y = data(graph, "next", &shape, tokens(n, VOCABULARY, &mut rng));
    let embedding = Embedding::new(graph, "embedding", VOCABULARY, MODEL);
    let rotary = Rotary::new(graph, WINDOW, MODEL / HEADS);
    let blocks: Vec<TransformerBlock> = (0..BLOCKS)
        .map(|i| TransformerBlock::new(graph, &format!("block{i}"), MODEL, HEADS, 4 * MODEL, true))
        .collect();
    let norm = LayerNorm::new(graph, "final norm");
    let head = PositionDense::new(graph, "head", VOCABULARY);
    let mut params = vec![embedding.table.clone()];
    for block in &blocks {
        params.extend(block.params());
    }
    params.extend(norm.params());
    params.extend(head.params());
    let mut h = one_hot_each(&x).einsum("...|...->t, v; v -> d => ...|...->t, d", &embedding.table);
    for block in &blocks {
        h = block.apply(&h, WINDOW, Some(&rotary));
    }
    let logits = head.apply(&norm.apply(&h));
    let loss = mean(&cross_entropy(&logits, &one_hot_each(&y)));
    (loss, params)
}

/// The transformer's training step: backprop, Adam, the loss read.
pub fn transformer_step(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (loss, params) = transformer_loss(&graph);
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Adam::new(&graph, &params, TRANSFORMER_LR).compile_step(ctx, loss)
    })
}

/// The moons MLP (2 → 16 → 16 → 1, relu, mean hinge loss): backprop, SGD with momentum, the
/// loss read.
pub fn moons_step(batch: usize, on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (xs, ys) = moons(batch, 0.1, 1);
    let x = data(&graph, "x", &format!("{batch}|->2"), xs);
    let y = data(&graph, "y", &format!("{batch}|->1"), ys);
    let model = Mlp::new(&graph, "mlp", &MOONS_WIDTHS);
    let loss = hinge(&model.apply(&x), &y);
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Sgd::new(&graph, &model.params(), MOONS_LR, MOONS_MOMENTUM).compile_step(ctx, loss)
    })
}

/// The MLP 784 → 512 → 512 → 10 (relu) on a batch of random images and labels: mean softmax
/// cross-entropy, backprop, Adam, the loss read.
pub fn mlp_step(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(4);
    let classes = MLP_WIDTHS[MLP_WIDTHS.len() - 1];
    let x = data(
        &graph,
        "images",
        &format!("{MLP_BATCH}|->{MLP_INPUTS}"),
        normal(MLP_BATCH * MLP_INPUTS, &mut rng),
    );
    let y = data(
        &graph,
        "labels",
        &format!("{MLP_BATCH}|->{classes}"),
        one_hot_rows(MLP_BATCH, classes, &mut rng),
    );
    let model = Mlp::new(&graph, "mlp", &MLP_WIDTHS);
    let loss = mean(&cross_entropy(&model.apply(&x), &y));
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Adam::new(&graph, &model.params(), MLP_LR).compile_step(ctx, loss)
    })
}

/// The MLP 784 → 512 → 512 → 10 on one image: its input written, the forward routine run, the
/// logits read back.
pub fn mlp_latency(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(5);
    let image = normal(MLP_INPUTS, &mut rng);
    let x = graph
        .data("image")
        .shape(&format!("1|->{MLP_INPUTS}"))
        .build();
    let model = Mlp::new(&graph, "mlp", &MLP_WIDTHS);
    let logits = model.apply(&x);
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    let forward = ctx.forward(&[&logits])?;
    Ok(Box::new(move || {
        ctx.set_values(&x, &image)?;
        ctx.run(&forward)?;
        ctx.values(&logits).map(drop)
    }))
}

/// A batch of random 8×8 images and one-hot labels of the digits' classes, drawn from `seed`.
fn digit_images(graph: &Graph, seed: u64) -> (Tensor, Tensor) {
    let mut rng = Rng::new(seed);
    let x = data(
        graph,
        "images",
        &format!("{DIGITS_BATCH}|->8,8,1"),
        (0..DIGITS_BATCH * 64).map(|_| rng.uniform()).collect(),
    );
    let y = data(
        graph,
        "labels",
        &format!("{DIGITS_BATCH}|->{DIGITS_CLASSES}"),
        one_hot_rows(DIGITS_BATCH, DIGITS_CLASSES, &mut rng),
    );
    (x, y)
}

/// The `digits` example's CNN (conv 3×3, 16 channels, padded, relu; max-pool 2; dense 64, relu;
/// dense 10) on a batch of random 8×8 images: mean softmax cross-entropy, backprop, Adam, the
/// loss read.
pub fn digits_step(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, y) = digit_images(&graph, 6);
    let conv = Conv2d::new(
        &graph,
        "conv",
        16,
        3,
        ConvOptions::default().padding(Padding::Same),
    );
    let dense = Mlp::new(&graph, "dense", &[64, DIGITS_CLASSES]);
    let logits = dense.apply(&max_pool2d(&conv.apply(&x).relu(), 2));
    let loss = mean(&cross_entropy(&logits, &y));
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Adam::new(&graph, &graph.params(), DIGITS_LR).compile_step(ctx, loss)
    })
}

/// The `resnet` example's network (a 3×3 stem of 16 channels with batch norm, a residual block
/// of 16 channels, a strided one of 32 with a projection shortcut, global average pooling, dense
/// 10) in train mode on a batch of random 8×8 images: mean softmax cross-entropy, backprop,
/// Adam, the loss read.
pub fn resnet_step(on: BackendChoice) -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, y) = digit_images(&graph, 7);
    let stem = ConvBnRelu::new(&graph, "stem", 1, 16, 3, 1);
    let stages = [
        ResidualBlock::new(&graph, "stage1", 16, 16, 1),
        ResidualBlock::new(&graph, "stage2", 16, 32, 2),
    ];
    let head = Dense::new(&graph, "head", DIGITS_CLASSES);
    let features = stages.iter().fold(stem.apply(&x, Mode::Train), |h, stage| {
        stage.apply(&h, Mode::Train)
    });
    let loss = mean(&cross_entropy(&head.apply(&global_avg_pool(&features)), &y));
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Adam::new(&graph, &graph.params(), DIGITS_LR).compile_step(ctx, loss)
    })
}

/// The practitioner GPT (tokens of 11, 5 positions, width 8, 2 heads, 2 causal blocks with
/// hidden width 16, learned positions, a final norm) on a batch of 2 random sequences: mean
/// cross-entropy against the next tokens, backprop, AdamW, the loss read.
pub fn gpt_step(on: BackendChoice) -> Result<Step, TensorError> {
    const VOCABULARY: usize = 11;
    const BATCH: usize = 2;
    const TIME: usize = 5;
    const MODEL: usize = 8;
    const HEADS: usize = 2;
    const HIDDEN: usize = 16;
    let graph = Graph::new();
    let mut rng = Rng::new(8);
    let x = data(
        &graph,
        "tokens",
        &format!("{BATCH}|->{TIME}"),
        tokens(BATCH * TIME, VOCABULARY, &mut rng),
    );
    let y = data(
        &graph,
        "next tokens",
        &format!("{BATCH}|->{TIME}"),
        tokens(BATCH * TIME, VOCABULARY, &mut rng),
    );
    let embedding = Embedding::new(&graph, "embedding", VOCABULARY, MODEL);
    let positions = LearnedPositions::new(&graph, "positions", TIME, MODEL);
    let blocks: Vec<TransformerBlock> = (0..2)
        .map(|i| TransformerBlock::new(&graph, &format!("block{i}"), MODEL, HEADS, HIDDEN, true))
        .collect();
    let norm = LayerNorm::new(&graph, "final_norm");
    let head = PositionDense::new(&graph, "head", VOCABULARY);
    let mut h = positions.apply(&embedding.apply(&x));
    for block in &blocks {
        h = block.apply(&h, TIME, None);
    }
    let loss = mean(&cross_entropy_ids(&head.apply(&norm.apply(&h)), &y));
    let mut ctx = context(&graph, on)?;
    ctx.init_params()?;
    training_step(ctx, loss, |ctx, loss| {
        Adam::new(&graph, &graph.params(), 0.01)
            .weight_decay(0.1)
            .compile_step(ctx, loss)
    })
}
