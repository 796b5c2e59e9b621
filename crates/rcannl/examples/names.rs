//! Character-level models of first names (the `makemore` names list, `data/names.txt`), in three
//! stages: a bigram table, an MLP over the previous three characters, and a small causal
//! transformer over windows of eight. Each is trained with Adam on a softmax cross-entropy; the
//! example prints its validation loss (nats per character) and a few names sampled from it.
//!
//! `cargo run --release --example names`

use std::time::Instant;

use rcannl::nn::attention::{Rotary, TransformerBlock};
use rcannl::nn::blocks::{Linear, Mlp};
use rcannl::nn::data::Rng;
use rcannl::nn::embedding::Embedding;
use rcannl::nn::loss::{IdsOptions, cross_entropy_ids, cross_entropy_ids_with, mean};
use rcannl::nn::norm::LayerNorm;
use rcannl::nn::optim::{Adam, Schedule};
use rcannl::nn::sample::{Sampling, sample};
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;

/// `.` (the boundary before and after a name) and `a`–`z`.
const VOCABULARY: usize = 27;
/// The MLP's context: the previous three characters.
const CONTEXT: usize = 3;
/// The MLP's embedding width and hidden layer.
const EMBEDDING: usize = 12;
const HIDDEN: usize = 160;
/// The transformer's window.
const WINDOW: usize = 8;
/// Names drawn from each model.
const SAMPLES: usize = 10;

fn token(c: char) -> usize {
    if c.is_ascii_lowercase() {
        (c as u8 - b'a') as usize + 1
    } else {
        0
    }
}

fn character(t: usize) -> char {
    if t == 0 {
        '.'
    } else {
        (b'a' + t as u8 - 1) as char
    }
}

/// Fisher–Yates with the example's generator.
fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// Examples of the context models: the `CONTEXT` tokens before each character of each name (and
/// before the closing `.`), starting from `.`s, and that character.
fn contexts(names: &[Vec<usize>]) -> Vec<([usize; CONTEXT], usize)> {
    let mut examples = Vec::new();
    for name in names {
        let mut context = [0; CONTEXT];
        for &next in name.iter().chain([&0]) {
            examples.push((context, next));
            context.rotate_left(1);
            context[CONTEXT - 1] = next;
        }
    }
    examples
}

/// A window of the transformer: `WINDOW` input tokens and the token after each, `None` where
/// the position is not scored (past the end of the name, or scored by an earlier window).
type Window = ([usize; WINDOW], [Option<usize>; WINDOW]);

/// Each name as `.name.` cut into windows: the first from the start, and for a name too long
/// for one, a second ending at its closing `.` that scores only the positions the first missed.
fn windows(names: &[Vec<usize>]) -> Vec<Window> {
    let mut out = Vec::new();
    for name in names {
        let sequence: Vec<usize> = [0].iter().chain(name).chain([&0]).copied().collect();
        let targets = sequence.len() - 1;
        let mut scored = 0;
        let mut start = 0;
        while scored < targets {
            let mut inputs = [0; WINDOW];
            let mut next = [None; WINDOW];
            for t in 0..WINDOW {
                let at = start + t;
                if at < targets {
                    inputs[t] = sequence[at];
                    if at >= scored {
                        next[t] = Some(sequence[at + 1]);
                    }
                }
            }
            out.push((inputs, next));
            scored = (start + WINDOW).min(targets);
            start = scored.min(targets.saturating_sub(WINDOW));
        }
    }
    out
}

/// Token ids as values, `-1` (no token: not scored) where absent.
fn ids(tokens: impl IntoIterator<Item = Option<usize>>) -> Vec<f64> {
    tokens
        .into_iter()
        .map(|t| t.map_or(-1.0, |t| t as f64))
        .collect()
}

/// The number of values of the parameters.
fn count(ctx: &mut Context, params: &[Tensor]) -> Result<usize, TensorError> {
    let mut total = 0;
    for p in params {
        total += ctx.dims(p)?.iter().product::<usize>();
    }
    Ok(total)
}

/// What a stage reports.
struct Report {
    name: &'static str,
    params: usize,
    train_loss: f64,
    validation_loss: f64,
    seconds: f64,
}

/// Trains with Adam under a cosine schedule (`fit`), printing the plan and the epochs' losses.
fn train(
    ctx: &mut Context,
    params: &[Tensor],
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    peak: f64,
) -> Result<f64, TensorError> {
    let graph = loss.graph().clone();
    let mut adam = Adam::new(&graph, params, peak);
    let step = adam.compile_step(ctx, loss)?;
    let schedule = Schedule::Cosine {
        peak,
        floor: peak / 20.0,
        warmup: plan.batches / 4,
    };
    let total = plan.epochs * plan.batches;
    let lr = adam.lr.clone();
    let history = fit_step(ctx, &step, loss, batch, plan, |ctx, n| {
        schedule.apply(ctx, &lr, n, total)
    })?;
    println!(
        "  epoch losses: {}; {:.0} examples/s",
        history
            .losses
            .iter()
            .map(|l| format!("{l:.4}"))
            .collect::<Vec<_>>()
            .join(", "),
        history.examples_per_second
    );
    Ok(history.losses.last().copied().unwrap_or(f64::NAN))
}

/// The models of stages 1 and 2.
enum ContextNet {
    /// A row of logits per previous character.
    Bigram(Embedding),
    /// Each character of the context embedded, the vectors taken together by composition with
    /// the first layer (its input axes take the context and embedding axes), a hidden layer
    /// (relu), the logits.
    Mlp(Embedding, Mlp),
}

impl ContextNet {
    /// Logits `… | -> VOCABULARY` for contexts of token ids: `… | ->` (the previous character)
    /// for the bigram, `… | -> CONTEXT` for the MLP.
    fn logits(&self, x: &Tensor) -> Tensor {
        match self {
            ContextNet::Bigram(table) => table.apply(x),
            ContextNet::Mlp(embedding, mlp) => mlp.apply(&embedding.apply(x)),
        }
    }

    fn params(&self) -> Vec<Tensor> {
        match self {
            ContextNet::Bigram(table) => vec![table.table.clone()],
            ContextNet::Mlp(embedding, mlp) => {
                let mut params = vec![embedding.table.clone()];
                params.extend(mlp.params());
                params
            }
        }
    }
}

/// Stages 1 and 2: a model of the next character given the `CONTEXT` before it, `bigram`
/// reading only the last of them.
fn context_model(
    bigram: bool,
    train_names: &[Vec<usize>],
    validation_names: &[Vec<usize>],
    rng: &mut Rng,
) -> Result<Report, TensorError> {
    let started = Instant::now();
    let (name, batch_size, epochs, peak) = if bigram {
        ("bigram", 512, 2, 0.1)
    } else {
        ("MLP", 256, 6, 0.005)
    };
    let mut examples = contexts(train_names);
    shuffle(&mut examples, rng);
    let batches = examples.len() / batch_size;
    examples.truncate(batches * batch_size);
    let validation = contexts(validation_names);
    let width = if bigram { 1 } else { CONTEXT };
    // The bigram reads one id per example, the MLP a row of them.
    let axes = if bigram {
        String::new()
    } else {
        CONTEXT.to_string()
    };
    let inputs = |examples: &[([usize; CONTEXT], usize)]| -> Vec<f64> {
        examples
            .iter()
            .flat_map(|(c, _)| ids(c[CONTEXT - width..].iter().map(|&t| Some(t))))
            .collect()
    };
    let targets =
        |examples: &[([usize; CONTEXT], usize)]| ids(examples.iter().map(|(_, t)| Some(*t)));

    let graph = Graph::new();
    let xs = graph
        .data("contexts")
        .shape(&format!("{batches},{batch_size}|->{axes}"))
        .values(inputs(&examples))
        .build();
    let ys = graph
        .data("next")
        .shape(&format!("{batches},{batch_size}|->"))
        .values(targets(&examples))
        .build();
    let validation_x = graph
        .data("validation contexts")
        .shape(&format!("{}|->{axes}", validation.len()))
        .values(inputs(&validation))
        .build();
    let validation_y = graph
        .data("validation next")
        .shape(&format!("{}|->", validation.len()))
        .values(targets(&validation))
        .build();

    let net = if bigram {
        ContextNet::Bigram(Embedding::new(&graph, "bigram", VOCABULARY, VOCABULARY))
    } else {
        ContextNet::Mlp(
            Embedding::new(&graph, "embedding", VOCABULARY, EMBEDDING),
            Mlp::new(&graph, "mlp", &[HIDDEN, VOCABULARY]),
        )
    };
    let params = net.params();
    let batch = graph.static_index();
    let per_example = cross_entropy_ids(&net.logits(&xs.slice(&batch)), &ys.slice(&batch));
    let loss = mean(&per_example);
    let validation_loss = cross_entropy_ids(&net.logits(&validation_x), &validation_y);

    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let evaluate = ctx.forward(&[&validation_loss])?;
    let parameters = count(&mut ctx, &params)?;
    println!(
        "\n{name}{}: {parameters} parameters; {} training examples in {batches} batches of \
         {batch_size}, {epochs} epochs; {} validation examples",
        if bigram {
            String::new()
        } else {
            format!(" ({CONTEXT} characters embedded in {EMBEDDING}, hidden {HIDDEN})")
        },
        batches * batch_size,
        validation.len()
    );
    let train_loss = train(
        &mut ctx,
        &params,
        &loss,
        batch,
        Plan {
            epochs,
            batches,
            batch_size,
            progress: true,
        },
        peak,
    )?;
    ctx.run(&evaluate)?;
    let per_character = ctx.values(&validation_loss)?;
    let validation_loss = per_character.iter().sum::<f64>() / per_character.len() as f64;

    // One context at a time: the model trained on batches, at batch size 1.
    let mut generate = Traced::new(&graph, "sample context", |x: &Tensor| net.logits(x));
    let context_dims = if bigram { vec![] } else { vec![CONTEXT] };
    let mut names = Vec::new();
    for _ in 0..SAMPLES {
        let mut context = [0; CONTEXT];
        let mut drawn = String::new();
        loop {
            let tokens = ids(context[CONTEXT - width..].iter().map(|&t| Some(t)));
            let input = Array::new(vec![1], context_dims.clone(), vec![], tokens)?;
            let logits = generate.apply(&mut ctx, &input)?;
            let next = sample(logits.values(), &Sampling::default(), rng)?;
            if next == 0 || drawn.len() >= 20 {
                break;
            }
            drawn.push(character(next));
            context.rotate_left(1);
            context[CONTEXT - 1] = next;
        }
        names.push(drawn);
    }
    println!(
        "  validation loss {validation_loss:.4} nats/character; samples: {}",
        names.join(" ")
    );
    Ok(Report {
        name,
        params: parameters,
        train_loss,
        validation_loss,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Stage 3: a causal transformer over windows of `WINDOW` characters.
fn transformer(
    train_names: &[Vec<usize>],
    validation_names: &[Vec<usize>],
    rng: &mut Rng,
) -> Result<Report, TensorError> {
    const MODEL: usize = 32;
    const HEADS: usize = 4;
    const BLOCKS: usize = 2;
    const BATCH: usize = 64;
    const EPOCHS: usize = 4;
    const PEAK: f64 = 0.005;
    let started = Instant::now();
    let mut train_windows = windows(train_names);
    shuffle(&mut train_windows, rng);
    let batches = train_windows.len() / BATCH;
    train_windows.truncate(batches * BATCH);
    let validation = windows(validation_names);
    let inputs =
        |ws: &[Window]| -> Vec<f64> { ws.iter().flat_map(|(x, _)| ids(x.map(Some))).collect() };
    let targets = |ws: &[Window]| -> Vec<f64> { ws.iter().flat_map(|(_, y)| ids(*y)).collect() };

    let graph = Graph::new();
    let xs = graph
        .data("windows")
        .shape(&format!("{batches},{BATCH}|->{WINDOW}"))
        .values(inputs(&train_windows))
        .build();
    let ys = graph
        .data("next")
        .shape(&format!("{batches},{BATCH}|->{WINDOW}"))
        .values(targets(&train_windows))
        .build();
    let validation_x = graph
        .data("validation windows")
        .shape(&format!("{}|->{WINDOW}", validation.len()))
        .values(inputs(&validation))
        .build();
    let validation_y = graph
        .data("validation next")
        .shape(&format!("{}|->{WINDOW}", validation.len()))
        .values(targets(&validation))
        .build();

    let embedding = Embedding::new(&graph, "embedding", VOCABULARY, MODEL);
    let rotary = Rotary::new(&graph, WINDOW, MODEL / HEADS);
    let blocks: Vec<TransformerBlock> = (0..BLOCKS)
        .map(|i| TransformerBlock::new(&graph, &format!("block{i}"), MODEL, HEADS, 4 * MODEL, true))
        .collect();
    let norm = LayerNorm::new(&graph, "final norm");
    let head = Linear::new(&graph, "head", VOCABULARY);
    let mut params = vec![embedding.table.clone()];
    for block in &blocks {
        params.extend(block.params());
    }
    params.extend(norm.params());
    params.extend(head.params());
    let logits = |x: &Tensor| {
        let mut h = embedding.apply(x);
        for block in &blocks {
            h = block.apply(&h, WINDOW, Some(&rotary));
        }
        head.apply(&norm.apply(&h))
    };

    let batch = graph.static_index();
    // The mean over the positions scored (the ids of the others are −1).
    let scored_only = IdsOptions::new().ignore_index(-1);
    let loss = cross_entropy_ids_with(&logits(&xs.slice(&batch)), &ys.slice(&batch), &scored_only);
    let validation_loss =
        cross_entropy_ids_with(&logits(&validation_x), &validation_y, &scored_only);

    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let evaluate = ctx.forward(&[&validation_loss])?;
    let parameters = count(&mut ctx, &params)?;
    let scored = |ws: &[Window]| ws.iter().flat_map(|(_, y)| y).flatten().count();
    println!(
        "\ntransformer ({BLOCKS} blocks, width {MODEL}, {HEADS} heads, rotary positions): \
         {parameters} parameters; {} training windows of {WINDOW} ({} characters) in {batches} \
         batches of {BATCH}, {EPOCHS} epochs; {} validation windows ({} characters)",
        train_windows.len(),
        scored(&train_windows),
        validation.len(),
        scored(&validation)
    );
    let train_loss = train(
        &mut ctx,
        &params,
        &loss,
        batch,
        Plan {
            epochs: EPOCHS,
            batches,
            batch_size: BATCH,
            progress: true,
        },
        PEAK,
    )?;
    ctx.run(&evaluate)?;
    let validation_loss = ctx.values(&validation_loss)?[0];

    // One window at a time: the model trained on batches, at batch size 1.
    let mut generate = Traced::new(&graph, "sample window", logits);
    let mut names = Vec::new();
    for _ in 0..SAMPLES {
        let mut sequence = vec![0];
        loop {
            let start = sequence.len().saturating_sub(WINDOW);
            let window = &sequence[start..];
            let mut x = [0; WINDOW];
            x[..window.len()].copy_from_slice(window);
            let input = Array::new(vec![1], vec![WINDOW], vec![], ids(x.map(Some)))?;
            let logits = generate.apply(&mut ctx, &input)?;
            let row = logits
                .rows()
                .nth(window.len() - 1)
                .expect("a row per position");
            let next = sample(row, &Sampling::default(), rng)?;
            if next == 0 || sequence.len() > 20 {
                break;
            }
            sequence.push(next);
        }
        names.push(
            sequence[1..]
                .iter()
                .map(|&t| character(t))
                .collect::<String>(),
        );
    }
    println!(
        "  validation loss {validation_loss:.4} nats/character; samples: {}",
        names.join(" ")
    );
    Ok(Report {
        name: "transformer",
        params: parameters,
        train_loss,
        validation_loss,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn main() -> Result<(), TensorError> {
    let started = Instant::now();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/names.txt");
    let text = std::fs::read_to_string(path)
        .map_err(|e| TensorError::new(format!("reading {path}: {e}")))?;
    let mut names: Vec<Vec<usize>> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.chars().map(token).collect())
        .collect();
    let mut rng = Rng::new(2024);
    shuffle(&mut names, &mut rng);
    let split = names.len() * 9 / 10;
    let (train_names, validation_names) = names.split_at(split);
    println!(
        "{} names: {} for training, {} for validation; vocabulary {VOCABULARY} ('.' and a-z)",
        names.len(),
        train_names.len(),
        validation_names.len()
    );

    let reports = [
        context_model(true, train_names, validation_names, &mut rng)?,
        context_model(false, train_names, validation_names, &mut rng)?,
        transformer(train_names, validation_names, &mut rng)?,
    ];
    println!("\nmodel        parameters  train loss (last epoch)  validation loss  seconds");
    for r in &reports {
        println!(
            "{:<12} {:>10}  {:>23.4}  {:>15.4}  {:>7.1}",
            r.name, r.params, r.train_loss, r.validation_loss, r.seconds
        );
    }
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
