//! The six models, written as the examples and the `nn` crate's pages teach (`gpt`, `resnet`,
//! `seq2seq`, `digits_cnn`; the README's "Layers for PyTorch users"), each on its own graph and
//! context on the C backend, handed back as one training step: the optimizer's `compile_step`
//! routine run, the loss read back. Sizes and hyper-parameters are those of
//! `practitioners_reference.py`; the data are random, drawn once, the same batch every step.
//!
//! Where the pages offered no way to write what a practitioner needs, the closest reasonable
//! thing is written and said in a comment starting "No documented".

use rcannl_backends::cc::Compiler;
use rcannl_ir::Precision;
use rcannl_nn::attention::{AttendOptions, Attention, TransformerBlock};
use rcannl_nn::blocks::{Dense, Linear};
use rcannl_nn::cnn::{ConvBnRelu, ResidualBlock};
use rcannl_nn::conv::{Conv2d, ConvOptions, global_avg_pool};
use rcannl_nn::data::Rng;
use rcannl_nn::embedding::Embedding;
use rcannl_nn::loss::{cross_entropy_ids, mean, sum};
use rcannl_nn::norm::{LayerNorm, Mode};
use rcannl_nn::optim::{Adam, Group, Sgd, split_decay};
use rcannl_nn::position::{LearnedPositions, PositionKind};
use rcannl_nn::transformer::{EncoderDecoder, EncoderDecoderConfig, Placement, SequencePairs};
use rcannl_tensor::{AxisKind, Context, Graph, Routine, Tensor, TensorError};

/// One training step, owning its context: the loss it computed.
pub type Step = Box<dyn FnMut() -> Result<f64, TensorError>>;

// The GPT: vocabulary, positions, width, heads, blocks, MLP width, batch; AdamW's rate and decay.
const GPT_VOCABULARY: usize = 65;
const GPT_TIME: usize = 16;
const GPT_WIDTH: usize = 64;
const GPT_HEADS: usize = 4;
const GPT_BLOCKS: usize = 2;
const GPT_HIDDEN: usize = 256;
const GPT_BATCH: usize = 32;
const GPT_LR: f64 = 3e-3;
const GPT_DECAY: f64 = 0.1;
// The ResNet: image side and channels, classes, batch; SGD's rate, momentum and decay.
const IMAGE: usize = 32;
const CHANNELS: usize = 3;
const CLASSES: usize = 10;
const RESNET_BATCH: usize = 32;
const RESNET_LR: f64 = 0.05;
const RESNET_MOMENTUM: f64 = 0.9;
const RESNET_DECAY: f64 = 5e-4;
// The encoder–decoder: tokens 0..30, the source's padding, the target's end and start tokens;
// source lengths, positions, sizes, batch and Adam's rate.
const SOURCE_PAD: usize = 30;
const SOURCE_VOCABULARY: usize = 31;
const END: usize = 30;
const START: usize = 31;
const TARGET_VOCABULARY: usize = 32;
const SHORTEST: usize = 8;
const LONGEST: usize = 15;
const SEQ_TIME: usize = 16;
const SEQ_WIDTH: usize = 64;
const SEQ_HEADS: usize = 4;
const SEQ_HIDDEN: usize = 128;
const SEQ_LAYERS: usize = 2;
const SEQ_BATCH: usize = 32;
const SEQ_LR: f64 = 1e-3;
// The VAE: pixels, hidden width, latent size, batch, Adam's rate.
const PIXELS: usize = 784;
const VAE_HIDDEN: usize = 256;
const LATENT: usize = 16;
const VAE_BATCH: usize = 64;
const VAE_LR: f64 = 1e-3;
// The GRU: steps, input features, hidden width, batch, Adam's rate (classes: `CLASSES`).
const GRU_TIME: usize = 16;
const GRU_INPUT: usize = 32;
const GRU_HIDDEN: usize = 128;
const GRU_BATCH: usize = 32;
const GRU_LR: f64 = 1e-3;
// The ViT: patch side, width, heads, blocks, MLP width, batch, Adam's rate.
const PATCH: usize = 4;
const VIT_WIDTH: usize = 64;
const VIT_HEADS: usize = 4;
const VIT_BLOCKS: usize = 2;
const VIT_HIDDEN: usize = 256;
const VIT_BATCH: usize = 32;
const VIT_LR: f64 = 1e-3;

/// A context for `graph` on the C backend (the one this benchmark measures; `Context::new`
/// would fall back to the interpreter without a C compiler), parameters initialized.
pub fn context(graph: &Graph) -> Result<Context, TensorError> {
    let compiler = Compiler::from_environment().map_err(|e| {
        TensorError::new(format!(
            "the benchmark runs on the C backend: {}",
            e.message
        ))
    })?;
    let mut ctx = Context::with_backend(graph, Box::new(compiler));
    ctx.set_seed(1);
    ctx.init_params()?;
    Ok(ctx)
}

/// What one iteration of a training loop does: the step routine, the loss read back.
fn training(mut ctx: Context, step: Routine, loss: Tensor) -> Step {
    Box::new(move || {
        ctx.run(&step)?;
        Ok(ctx.values(&loss)?[0])
    })
}

fn data(graph: &Graph, label: &str, shape: &str, values: Vec<f64>) -> Tensor {
    graph.data(label).shape(shape).values(values).build()
}

/// `n` ids below `classes`.
fn ids(n: usize, classes: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.next_u64() % classes as u64) as f64)
        .collect()
}

/// `n` standard normal values.
fn normal(n: usize, rng: &mut Rng) -> Vec<f64> {
    (0..n).map(|_| rng.normal()).collect()
}

/// A GPT-2 style block: causal self-attention and a GELU MLP, each after a layer norm, each
/// added to its input. The library's `TransformerBlock` has a ReLU MLP with no way to choose
/// another activation, so the block is written from its parts, as a PyTorch user writes one.
struct GptBlock {
    norm1: LayerNorm,
    attention: Attention,
    norm2: LayerNorm,
    up: Linear,
    down: Linear,
}

impl GptBlock {
    fn new(graph: &Graph, label: &str) -> GptBlock {
        let sub = |name: &str| format!("{label}.{name}");
        GptBlock {
            norm1: LayerNorm::new(graph, &sub("norm1")),
            attention: Attention::new(
                graph,
                &sub("attention"),
                GPT_WIDTH,
                GPT_HEADS,
                GPT_WIDTH / GPT_HEADS,
                true,
            ),
            norm2: LayerNorm::new(graph, &sub("norm2")),
            up: Linear::new(graph, &sub("up"), GPT_HIDDEN),
            down: Linear::new(graph, &sub("down"), GPT_WIDTH),
        }
    }

    fn apply(&self, x: &Tensor) -> Tensor {
        let x = x + &self.attention.apply(&self.norm1.apply(x), GPT_TIME, None);
        let hidden = self.up.apply(&self.norm2.apply(&x)).gelu();
        &x + &self.down.apply(&hidden)
    }

    fn params(&self) -> Vec<Tensor> {
        let mut params = self.norm1.params();
        params.extend(self.attention.params());
        params.extend(self.norm2.params());
        params.extend(self.up.params());
        params.extend(self.down.params());
        params
    }
}

struct Gpt {
    tokens: Embedding,
    positions: LearnedPositions,
    blocks: Vec<GptBlock>,
    norm: LayerNorm,
    head: Linear,
}

impl Gpt {
    fn new(graph: &Graph) -> Gpt {
        Gpt {
            tokens: Embedding::new(graph, "tokens", GPT_VOCABULARY, GPT_WIDTH),
            positions: LearnedPositions::new(graph, "positions", GPT_TIME, GPT_WIDTH),
            blocks: (0..GPT_BLOCKS)
                .map(|i| GptBlock::new(graph, &format!("block{i}")))
                .collect(),
            norm: LayerNorm::new(graph, "norm"),
            head: Linear::new(graph, "head", GPT_VOCABULARY),
        }
    }

    /// The logits `batch | -> time, vocabulary` of the next token after each of `ids`.
    fn forward(&self, ids: &Tensor) -> Tensor {
        let mut x = self.positions.apply(&self.tokens.apply(ids));
        for block in &self.blocks {
            x = block.apply(&x);
        }
        self.head.apply(&self.norm.apply(&x))
    }

    fn params(&self) -> Vec<Tensor> {
        let mut params = self.tokens.params();
        params.extend(self.positions.params());
        for block in &self.blocks {
            params.extend(block.params());
        }
        params.extend(self.norm.params());
        params.extend(self.head.params());
        params
    }
}

/// The GPT on random sequences: the mean cross-entropy against the next tokens, AdamW without
/// decay on biases and norms (as the `gpt` example trains it).
pub fn gpt() -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(1);
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..GPT_BATCH {
        let sequence = ids(GPT_TIME + 1, GPT_VOCABULARY, &mut rng);
        inputs.extend_from_slice(&sequence[..GPT_TIME]);
        targets.extend_from_slice(&sequence[1..]);
    }
    let shape = format!("{GPT_BATCH}|->{GPT_TIME}");
    let x = data(&graph, "tokens", &shape, inputs);
    let y = data(&graph, "next tokens", &shape, targets);
    let model = Gpt::new(&graph);
    let loss = mean(&cross_entropy_ids(&model.forward(&x), &y));
    let mut ctx = context(&graph)?;
    let (decay, no_decay) = split_decay(&mut ctx, &model.params())?;
    let groups = [Group::new(&decay), Group::new(&no_decay).weight_decay(0.0)];
    let mut adamw = Adam::with_groups(&graph, &groups, GPT_LR).weight_decay(GPT_DECAY);
    let step = adamw.compile_step(&mut ctx, &loss)?;
    Ok(training(ctx, step, loss))
}

/// A CIFAR-style ResNet: a 3×3 stem of 16 channels, a residual block of 16, a strided one of
/// 32 with a projection shortcut, global average pooling, a dense layer to the classes (the
/// `resnet` example's network on colour images).
struct ResNet {
    stem: ConvBnRelu,
    stages: [ResidualBlock; 2],
    head: Dense,
}

impl ResNet {
    fn new(graph: &Graph) -> ResNet {
        ResNet {
            stem: ConvBnRelu::new(graph, "stem", CHANNELS, 16, 3, 1),
            stages: [
                ResidualBlock::new(graph, "stage1", 16, 16, 1),
                ResidualBlock::new(graph, "stage2", 16, 32, 2),
            ],
            head: Dense::new(graph, "head", CLASSES),
        }
    }

    fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        let features = self
            .stages
            .iter()
            .fold(self.stem.apply(x, mode), |h, stage| stage.apply(&h, mode));
        self.head.apply(&global_avg_pool(&features))
    }
}

/// `BATCH | -> IMAGE, IMAGE, CHANNELS` random images and their random labels.
fn images(graph: &Graph, batch: usize, rng: &mut Rng) -> (Tensor, Tensor) {
    let x = data(
        graph,
        "images",
        &format!("{batch}|->{IMAGE},{IMAGE},{CHANNELS}"),
        normal(batch * IMAGE * IMAGE * CHANNELS, rng),
    );
    let y = data(
        graph,
        "labels",
        &format!("{batch}|->"),
        ids(batch, CLASSES, rng),
    );
    (x, y)
}

/// The ResNet in train mode (batch statistics, running statistics updated by the step): mean
/// cross-entropy, SGD with momentum and weight decay.
pub fn resnet() -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, y) = images(&graph, RESNET_BATCH, &mut Rng::new(2));
    let model = ResNet::new(&graph);
    let loss = mean(&cross_entropy_ids(&model.apply(&x, Mode::Train), &y));
    let mut ctx = context(&graph)?;
    let mut sgd =
        Sgd::new(&graph, &graph.params(), RESNET_LR, RESNET_MOMENTUM).weight_decay(RESNET_DECAY);
    let step = sgd.compile_step(&mut ctx, &loss)?;
    Ok(training(ctx, step, loss))
}

/// The encoder–decoder of the `seq2seq` example (post-norm, sinusoidal positions) reversing
/// random token strings of 8 to 15 tokens padded to 16, under teacher forcing: the masked mean
/// cross-entropy, Adam.
pub fn seq2seq() -> Result<Step, TensorError> {
    let mut rng = Rng::new(3);
    let (mut source, mut source_mask) = (Vec::new(), Vec::new());
    let (mut target_inputs, mut targets, mut target_mask) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SEQ_BATCH {
        let length = SHORTEST + (rng.next_u64() % (LONGEST - SHORTEST + 1) as u64) as usize;
        let tokens: Vec<usize> = (0..length)
            .map(|_| (rng.next_u64() % SOURCE_PAD as u64) as usize)
            .collect();
        let padding = std::iter::repeat_n(SOURCE_PAD, SEQ_TIME - length);
        source.extend(tokens.iter().copied().chain(padding).map(|t| t as f64));
        source_mask.extend((0..SEQ_TIME).map(|i| f64::from(u8::from(i < length))));
        let target: Vec<usize> = tokens.iter().rev().copied().chain([END]).collect();
        for i in 0..SEQ_TIME {
            let scored = i < target.len();
            targets.push(if scored { target[i] } else { END } as f64);
            target_mask.push(f64::from(u8::from(scored)));
            let input = if i == 0 {
                START
            } else {
                target.get(i - 1).copied().unwrap_or(END)
            };
            target_inputs.push(input as f64);
        }
    }
    let graph = Graph::new();
    let shape = format!("{SEQ_BATCH}|->{SEQ_TIME}");
    let pairs = SequencePairs {
        source: data(&graph, "sources", &shape, source),
        source_mask: data(&graph, "source masks", &shape, source_mask),
        target_inputs: data(&graph, "target inputs", &shape, target_inputs),
        targets: data(&graph, "targets", &shape, targets),
        target_mask: data(&graph, "target masks", &shape, target_mask),
    };
    let config = EncoderDecoderConfig {
        source_vocabulary: SOURCE_VOCABULARY,
        target_vocabulary: TARGET_VOCABULARY,
        source_time: SEQ_TIME,
        target_time: SEQ_TIME,
        model: SEQ_WIDTH,
        heads: SEQ_HEADS,
        hidden: SEQ_HIDDEN,
        encoder_blocks: SEQ_LAYERS,
        decoder_blocks: SEQ_LAYERS,
        placement: Placement::Post,
        positions: PositionKind::Sinusoidal,
    };
    let model = EncoderDecoder::new(&graph, "reverser", config);
    let loss = model.loss(&pairs, &AttendOptions::new());
    let mut ctx = context(&graph)?;
    let mut adam = Adam::new(&graph, &model.params(), SEQ_LR);
    let step = adam.compile_step(&mut ctx, &loss)?;
    Ok(training(ctx, step, loss))
}

/// The VAE: an MLP encoder to the mean and log-variance of the latent code, a decoder back to
/// the pixels' probabilities.
struct Vae {
    encoder: Dense,
    mu: Dense,
    log_var: Dense,
    decoder: Dense,
    pixels: Dense,
}

impl Vae {
    fn new(graph: &Graph) -> Vae {
        Vae {
            encoder: Dense::new(graph, "encoder", VAE_HIDDEN),
            mu: Dense::new(graph, "mu", LATENT),
            log_var: Dense::new(graph, "log_var", LATENT),
            decoder: Dense::new(graph, "decoder", VAE_HIDDEN),
            pixels: Dense::new(graph, "pixels", PIXELS),
        }
    }

    /// The loss of the images `x` (`batch | -> pixels`, in [0, 1]) per image: the binary
    /// cross-entropy of the reconstruction plus the KL divergence of the code from the standard
    /// normal, summed over pixels and latents, averaged over the batch. The reparameterization's
    /// noise is drawn afresh for each value of `step`.
    fn loss(&self, x: &Tensor, step: &Tensor) -> Tensor {
        let h = self.encoder.apply(x).relu();
        let (mu, log_var) = (self.mu.apply(&h), self.log_var.apply(&h));
        let z = &mu + &(&log_var * 0.5).exp().pmul(&normal_at(&mu, step));
        let p = self.pixels.apply(&self.decoder.apply(&z).relu()).sigmoid();
        // No documented binary cross-entropy: written from its formula, as the `custom_loss`
        // example writes its own loss.
        let log_likelihood = &x.pmul(&p.log()) + &(1.0 - x).pmul(&(1.0 - &p).log());
        let kl = -0.5 * &sum(&(&(1.0 + &log_var) - &(&mu.pmul(&mu) + &log_var.exp())));
        &(&kl - &sum(&log_likelihood)) * (1.0 / VAE_BATCH as f64)
    }
}

/// Standard normal values of `like`'s shape, drawn afresh for each value of `step`. No
/// documented normal draw changes between steps (`Tensor::normal_like` draws the same values
/// at every step: its key is the seed and the tensor), so this draws uniforms keyed by the step,
/// as `dropout` draws its masks, and turns them into normal values by Box–Muller, as
/// `Graph::normal` does.
fn normal_at(like: &Tensor, step: &Tensor) -> Tensor {
    let graph = like.graph();
    let u1 = graph.uniform_at("noise u1", step);
    let u2 = graph.uniform_at("noise u2", step);
    graph.same_shape(&u1, like);
    graph.same_shape(&u2, like);
    (-2.0 * &(1.0 - &u1).log())
        .sqrt()
        .pmul(&(std::f64::consts::TAU * &u2).cos())
}

/// The VAE on random images (pixels uniform in [0, 1]), fresh noise every step: Adam.
pub fn vae() -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(4);
    let shape = format!("{VAE_BATCH}|->{PIXELS}");
    let pixels = (0..VAE_BATCH * PIXELS).map(|_| rng.uniform()).collect();
    let x = data(&graph, "images", &shape, pixels);
    // The step counter the noise is keyed by, which the loop advances.
    let step_count = graph
        .data("step")
        .shape("")
        .precision(Precision::U32)
        .values(vec![0.0])
        .build();
    let model = Vae::new(&graph);
    let loss = model.loss(&x, &step_count);
    let mut ctx = context(&graph)?;
    let mut adam = Adam::new(&graph, &graph.params(), VAE_LR);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let mut count = 0u32;
    Ok(Box::new(move || {
        count += 1;
        ctx.set_values(&step_count, &[f64::from(count)])?;
        ctx.run(&step)?;
        Ok(ctx.values(&loss)?[0])
    }))
}

/// A GRU cell (PyTorch's `nn.GRUCell` equations) from dense layers: reset and update gates, the
/// candidate state, each from the input and from the state.
struct Gru {
    reset: [Dense; 2],
    update: [Dense; 2],
    candidate: [Dense; 2],
}

impl Gru {
    fn new(graph: &Graph) -> Gru {
        let pair = |name: &str| {
            [
                Dense::new(graph, &format!("{name}.input"), GRU_HIDDEN),
                Dense::new(graph, &format!("{name}.state"), GRU_HIDDEN),
            ]
        };
        Gru {
            reset: pair("reset"),
            update: pair("update"),
            candidate: pair("candidate"),
        }
    }

    /// The next state after input `x` (`batch | -> input`) from state `h` (`batch | -> hidden`).
    fn step(&self, x: &Tensor, h: &Tensor) -> Tensor {
        let gate = |[from_x, from_h]: &[Dense; 2]| (&from_x.apply(x) + &from_h.apply(h)).sigmoid();
        let (r, z) = (gate(&self.reset), gate(&self.update));
        let [from_x, from_h] = &self.candidate;
        let n = (&from_x.apply(x) + &r.pmul(&from_h.apply(h))).tanh();
        &(1.0 - &z).pmul(&n) + &z.pmul(h)
    }
}

/// The GRU unrolled over random sequences (`batch | -> time, input`), its last state classified
/// by a dense layer: mean cross-entropy, Adam.
pub fn gru() -> Result<Step, TensorError> {
    let graph = Graph::new();
    let mut rng = Rng::new(5);
    let x = data(
        &graph,
        "sequences",
        &format!("{GRU_BATCH}|->{GRU_TIME},{GRU_INPUT}"),
        normal(GRU_BATCH * GRU_TIME * GRU_INPUT, &mut rng),
    );
    let y = data(
        &graph,
        "labels",
        &format!("{GRU_BATCH}|->"),
        ids(GRU_BATCH, CLASSES, &mut rng),
    );
    let cell = Gru::new(&graph);
    let head = Dense::new(&graph, "head", CLASSES);
    let mut h = data(
        &graph,
        "first state",
        &format!("{GRU_BATCH}|->{GRU_HIDDEN}"),
        vec![0.0; GRU_BATCH * GRU_HIDDEN],
    );
    for t in 0..GRU_TIME {
        // Position `t` of the time axis: a fixed index in the einsum notation.
        let x_t = x.einsum1(&format!("...|...->{t}, d => ...|...->d"));
        h = cell.step(&x_t, &h);
    }
    let loss = mean(&cross_entropy_ids(&head.apply(&h), &y));
    let mut ctx = context(&graph)?;
    let mut adam = Adam::new(&graph, &graph.params(), GRU_LR);
    let step = adam.compile_step(&mut ctx, &loss)?;
    Ok(training(ctx, step, loss))
}

/// A small ViT: 4×4 patches embedded by a strided convolution, learned positions, pre-norm
/// transformer blocks (the library's, ReLU MLP), a final norm, the mean over patches, a dense
/// layer to the classes.
struct Vit {
    patches: Conv2d,
    positions: LearnedPositions,
    blocks: Vec<TransformerBlock>,
    norm: LayerNorm,
    head: Dense,
}

impl Vit {
    fn new(graph: &Graph) -> Vit {
        let patches = (IMAGE / PATCH) * (IMAGE / PATCH);
        Vit {
            patches: Conv2d::new(
                graph,
                "patches",
                VIT_WIDTH,
                PATCH,
                ConvOptions::default().stride(PATCH),
            ),
            positions: LearnedPositions::new(graph, "positions", patches, VIT_WIDTH),
            blocks: (0..VIT_BLOCKS)
                .map(|i| {
                    TransformerBlock::new(
                        graph,
                        &format!("block{i}"),
                        VIT_WIDTH,
                        VIT_HEADS,
                        VIT_HIDDEN,
                        false,
                    )
                })
                .collect(),
            norm: LayerNorm::new(graph, "norm"),
            head: Dense::new(graph, "head", CLASSES),
        }
    }

    fn apply(&self, images: &Tensor) -> Tensor {
        let patches = (IMAGE / PATCH) * (IMAGE / PATCH);
        // `batch | -> 8, 8, width` to a sequence `batch | -> 64, width`.
        let grid = self.patches.apply(images);
        let mut x = self
            .positions
            .apply(&grid.flatten_axes(AxisKind::Output, 0, 1));
        for block in &self.blocks {
            x = block.apply(&x, patches, None);
        }
        let pooled =
            self.norm.apply(&x).einsum1("...|...->t, d => ...|...->d") * (1.0 / patches as f64);
        self.head.apply(&pooled)
    }
}

/// The ViT on random images: mean cross-entropy, Adam.
pub fn vit() -> Result<Step, TensorError> {
    let graph = Graph::new();
    let (x, y) = images(&graph, VIT_BATCH, &mut Rng::new(6));
    let model = Vit::new(&graph);
    let loss = mean(&cross_entropy_ids(&model.apply(&x), &y));
    let mut ctx = context(&graph)?;
    let mut adam = Adam::new(&graph, &graph.params(), VIT_LR);
    let step = adam.compile_step(&mut ctx, &loss)?;
    Ok(training(ctx, step, loss))
}
