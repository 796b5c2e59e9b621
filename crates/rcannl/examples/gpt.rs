//! A small GPT trained on first names (`data/names.txt`), then asked for new ones, written as a
//! PyTorch user writes one: token and position embeddings, causal transformer blocks, a final
//! norm and a linear head; the cross-entropy of the logits against the next characters' ids
//! (padding ignored); AdamW without decay on biases and norms, under a cosine schedule. The
//! model trained on batches of 64 names generates one name at a time: `Traced` applies it at
//! batch size 1, compiled once for that shape.
//!
//! `cargo run --release --example gpt`

use rcannl::nn::attention::TransformerBlock;
use rcannl::nn::blocks::Linear;
use rcannl::nn::data::Rng;
use rcannl::nn::embedding::Embedding;
use rcannl::nn::loss::{IdsOptions, cross_entropy_ids_with};
use rcannl::nn::norm::LayerNorm;
use rcannl::nn::optim::{Adam, Group, Schedule, split_decay};
use rcannl::nn::position::LearnedPositions;
use rcannl::nn::sample::{Sampling, sample};
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

/// `.` (before and after a name) and `a`–`z`.
const VOCABULARY: usize = 27;
/// Positions the model sees: the longest name, 15 letters, and the `.` before it.
const WINDOW: usize = 16;
const WIDTH: usize = 48;
const HEADS: usize = 4;
const LAYERS: usize = 2;
const BATCH: usize = 64;
const EPOCHS: usize = 3;
const PEAK_LR: f64 = 3e-3;
/// The target of a position past the end of a name: not scored.
const PADDING: i64 = -1;

struct Gpt {
    tokens: Embedding,
    positions: LearnedPositions,
    blocks: Vec<TransformerBlock>,
    norm: LayerNorm,
    head: Linear,
}

impl Gpt {
    fn new(graph: &Graph) -> Gpt {
        Gpt {
            tokens: Embedding::new(graph, "tokens", VOCABULARY, WIDTH),
            positions: LearnedPositions::new(graph, "positions", WINDOW, WIDTH),
            blocks: (0..LAYERS)
                .map(|i| {
                    TransformerBlock::new(
                        graph,
                        &format!("block{i}"),
                        WIDTH,
                        HEADS,
                        4 * WIDTH,
                        true,
                    )
                })
                .collect(),
            norm: LayerNorm::new(graph, "norm"),
            head: Linear::new(graph, "head", VOCABULARY),
        }
    }

    /// Logits `batch | -> WINDOW, VOCABULARY` of the next character at each position of `ids`
    /// (`batch | -> WINDOW`).
    fn forward(&self, ids: &Tensor) -> Tensor {
        let mut x = self.positions.apply(&self.tokens.apply(ids));
        for block in &self.blocks {
            x = block.apply(&x, WINDOW, None);
        }
        self.head.apply(&self.norm.apply(&x))
    }

    fn params(&self) -> Vec<Tensor> {
        let mut params = vec![self.tokens.table.clone()];
        params.extend(self.positions.params());
        for block in &self.blocks {
            params.extend(block.params());
        }
        params.extend(self.norm.params());
        params.extend(self.head.params());
        params
    }
}

fn token(c: char) -> f64 {
    if c.is_ascii_lowercase() {
        (c as u8 - b'a' + 1) as f64
    } else {
        0.0
    }
}

/// `.name` as the model's input and `name.` as its targets, padded to the window.
fn encode(name: &str) -> (Vec<f64>, Vec<f64>) {
    let sequence: Vec<f64> = std::iter::once(0.0)
        .chain(name.chars().map(token))
        .chain(std::iter::once(0.0))
        .collect();
    let mut inputs = sequence[..sequence.len() - 1].to_vec();
    let mut targets = sequence[1..].to_vec();
    inputs.resize(WINDOW, 0.0);
    targets.resize(WINDOW, PADDING as f64);
    (inputs, targets)
}

/// The names of `names` encoded as data tensors `batches, BATCH | -> WINDOW` (or `n | -> WINDOW`
/// without batches).
fn dataset(graph: &Graph, label: &str, names: &[&str], batches: Option<usize>) -> (Tensor, Tensor) {
    let (inputs, targets): (Vec<_>, Vec<_>) = names.iter().map(|name| encode(name)).unzip();
    let shape = match batches {
        Some(batches) => format!("{batches},{BATCH}|->{WINDOW}"),
        None => format!("{}|->{WINDOW}", names.len()),
    };
    let tensor = |what: &str, values: Vec<Vec<f64>>| {
        graph
            .data(&format!("{label} {what}"))
            .shape(&shape)
            .values(values.concat())
            .build()
    };
    (tensor("inputs", inputs), tensor("targets", targets))
}

fn main() -> Result<(), TensorError> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/names.txt");
    let text = std::fs::read_to_string(path)
        .map_err(|e| TensorError::new(format!("reading {path}: {e}")))?;
    let mut names: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut rng = Rng::new(7);
    for i in (1..names.len()).rev() {
        names.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let (train, validation) = names.split_at(names.len() * 9 / 10);
    let batches = train.len() / BATCH;

    let graph = Graph::new();
    let (xs, ys) = dataset(&graph, "train", &train[..batches * BATCH], Some(batches));
    let (validation_x, validation_y) = dataset(&graph, "validation", validation, None);
    let model = Gpt::new(&graph);
    let ignore_padding = IdsOptions::new().ignore_index(PADDING);
    let batch = graph.static_index();
    let loss = cross_entropy_ids_with(
        &model.forward(&xs.slice(&batch)),
        &ys.slice(&batch),
        &ignore_padding,
    );
    let validation_loss = cross_entropy_ids_with(
        &model.forward(&validation_x),
        &validation_y,
        &ignore_padding,
    );

    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let params = model.params();
    let (decay, no_decay) = split_decay(&mut ctx, &params)?;
    let groups = [Group::new(&decay), Group::new(&no_decay).weight_decay(0.0)];
    let mut adam = Adam::with_groups(&graph, &groups, PEAK_LR).weight_decay(0.1);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let evaluate = ctx.forward(&[&validation_loss])?;
    let count: usize = params
        .iter()
        .map(|p| ctx.dims(p).map(|dims| dims.iter().product::<usize>()))
        .sum::<Result<_, _>>()?;
    println!(
        "{} names ({} for training, in {batches} batches of {BATCH}); a GPT of {LAYERS} blocks, \
         width {WIDTH}, {HEADS} heads: {count} parameters",
        names.len(),
        train.len()
    );

    let total = EPOCHS * batches;
    let schedule = Schedule::Cosine {
        peak: PEAK_LR,
        floor: PEAK_LR / 10.0,
        warmup: batches / 5,
    };
    let lr = adam.lr.clone();
    let plan = Plan {
        epochs: EPOCHS,
        batches,
        batch_size: BATCH,
        progress: true,
    };
    let history = fit_step(&mut ctx, &step, &loss, batch, plan, |ctx, n| {
        schedule.apply(ctx, &lr, n, total)
    })?;
    ctx.run(&evaluate)?;
    println!(
        "training loss by epoch: {:.4?}; validation loss {:.4} nats/character; {:.0} names/s",
        history.losses,
        ctx.values(&validation_loss)?[0],
        history.examples_per_second
    );

    // One name at a time: the same model at batch size 1.
    let mut generate = Traced::new(&graph, "prompt", |ids: &Tensor| model.forward(ids));
    let sampling = Sampling::default().temperature(0.8);
    let mut samples = Vec::new();
    for _ in 0..12 {
        let mut ids = vec![0.0; WINDOW];
        let mut name = String::new();
        for position in 0..WINDOW - 1 {
            let logits = generate.apply(
                &mut ctx,
                &Array::new(vec![1], vec![WINDOW], vec![], ids.clone())?,
            )?;
            let row = logits.rows().nth(position).expect("a row per position");
            let next = sample(row, &sampling, &mut rng)?;
            if next == 0 {
                break;
            }
            name.push((b'a' + next as u8 - 1) as char);
            ids[position + 1] = next as f64;
        }
        samples.push(name);
    }
    println!("sampled names: {}", samples.join(", "));
    Ok(())
}
