//! Reversing (or sorting) digit strings with an encoder–decoder transformer. Sources are strings
//! of 3 to 8 digits, padded to 8 (a padding mask keeps attention off the padding); the target is
//! the string reversed (or sorted), then an end token. The model trains under teacher forcing on generated
//! pairs; after each epoch it decodes held-out strings greedily, position by position (each run
//! of the decoder fills in one more token from its own previous predictions), and prints the
//! token-level and whole-sequence accuracy of those decodes.
//!
//! `cargo run --release --example seq2seq` (reversing), `… --example seq2seq -- sort` (sorting)

use std::collections::HashSet;
use std::time::Instant;

use rcannl::nn::attention::AttendOptions;
use rcannl::nn::data::Rng;
use rcannl::nn::optim::{Adam, Schedule};
use rcannl::nn::position::PositionKind;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::nn::transformer::{EncoderDecoder, EncoderDecoderConfig, Placement, SequencePairs};
use rcannl::prelude::*;

/// The shortest and longest source strings.
const SHORTEST: usize = 3;
const LONGEST: usize = 8;
/// Source tokens: the digits, then padding.
const SOURCE_PAD: usize = 10;
const SOURCE_VOCABULARY: usize = 11;
/// Target tokens: the digits, the end token, the start token the decoder reads first.
const END: usize = 10;
const START: usize = 11;
const TARGET_VOCABULARY: usize = 12;
/// Target positions: the reversed digits and the end token.
const TARGET_TIME: usize = LONGEST + 1;

const BATCH: usize = 64;
const BATCHES: usize = 150;
const EPOCHS: usize = 6;
const HELD_OUT: usize = 1000;
const PEAK: f64 = 0.003;

/// What the model learns to do to a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    Reverse,
    Sort,
}

impl Task {
    fn name(self) -> &'static str {
        match self {
            Task::Reverse => "reversing",
            Task::Sort => "sorting",
        }
    }

    /// The target digits for `digits`.
    fn apply(self, digits: &[usize]) -> Vec<usize> {
        let mut target = digits.to_vec();
        match self {
            Task::Reverse => target.reverse(),
            Task::Sort => target.sort_unstable(),
        }
        target
    }
}

/// A digit string of a random length.
fn draw(rng: &mut Rng) -> Vec<usize> {
    let length = SHORTEST + (rng.next_u64() % (LONGEST - SHORTEST + 1) as u64) as usize;
    (0..length)
        .map(|_| (rng.next_u64() % 10) as usize)
        .collect()
}

/// The host side of a batch of pairs: per string, the padded source, its mask, the decoder's
/// inputs, the targets and their mask, each flattened row-major.
#[derive(Default)]
struct Pairs {
    source: Vec<f64>,
    source_mask: Vec<f64>,
    target_inputs: Vec<f64>,
    targets: Vec<f64>,
    target_mask: Vec<f64>,
}

impl Pairs {
    fn push(&mut self, task: Task, digits: &[usize]) {
        for i in 0..LONGEST {
            let present = i < digits.len();
            self.source
                .push(if present { digits[i] } else { SOURCE_PAD } as f64);
            self.source_mask.push(f64::from(u8::from(present)));
        }
        let mut target = task.apply(digits);
        target.push(END);
        for i in 0..TARGET_TIME {
            let scored = i < target.len();
            self.targets
                .push(if scored { target[i] } else { END } as f64);
            self.target_mask.push(f64::from(u8::from(scored)));
            let input = if i == 0 {
                START
            } else {
                target.get(i - 1).copied().unwrap_or(END)
            };
            self.target_inputs.push(input as f64);
        }
    }
}

/// A data tensor of ids or masks.
fn data(graph: &Graph, label: &str, shape: &str, values: Vec<f64>) -> Tensor {
    graph.data(label).shape(shape).values(values).build()
}

/// What greedy decoding of the held-out strings scored.
struct Accuracy {
    tokens: f64,
    sequences: f64,
}

/// The held-out strings and the decoding graph over them.
struct Decoder {
    task: Task,
    strings: Vec<Vec<usize>>,
    inputs: Tensor,
    logits: Tensor,
    routine: Routine,
}

impl Decoder {
    /// Decodes every held-out string greedily: `TARGET_TIME` runs of the model, run `i` reading
    /// the start token and the predictions of runs before it, its prediction at position `i`
    /// kept. A string is right when every token up to and including the end token is.
    fn accuracy(&self, ctx: &mut Context) -> Result<Accuracy, TensorError> {
        let n = self.strings.len();
        let mut inputs = vec![END as f64; n * TARGET_TIME];
        for row in inputs.chunks_mut(TARGET_TIME) {
            row[0] = START as f64;
        }
        let mut predicted = vec![0usize; n * TARGET_TIME];
        for position in 0..TARGET_TIME {
            ctx.set_values(&self.inputs, &inputs)?;
            ctx.run(&self.routine)?;
            let logits = ctx.values(&self.logits)?;
            for string in 0..n {
                let at = (string * TARGET_TIME + position) * TARGET_VOCABULARY;
                let row = &logits[at..at + TARGET_VOCABULARY];
                let best = (0..TARGET_VOCABULARY)
                    .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                    .unwrap_or(END);
                predicted[string * TARGET_TIME + position] = best;
                if position + 1 < TARGET_TIME {
                    inputs[string * TARGET_TIME + position + 1] = best as f64;
                }
            }
        }
        let (mut right_tokens, mut tokens, mut right_sequences) = (0, 0, 0);
        for (string, digits) in self.strings.iter().enumerate() {
            let expected = self.task.apply(digits).into_iter().chain([END]);
            let got = &predicted[string * TARGET_TIME..];
            let right = expected.zip(got).filter(|(e, g)| e == *g).count();
            right_tokens += right;
            tokens += digits.len() + 1;
            right_sequences += usize::from(right == digits.len() + 1);
        }
        Ok(Accuracy {
            tokens: right_tokens as f64 / tokens as f64,
            sequences: right_sequences as f64 / n as f64,
        })
    }
}

fn main() -> Result<(), TensorError> {
    let task = match std::env::args().nth(1).as_deref() {
        None | Some("reverse") => Task::Reverse,
        Some("sort") => Task::Sort,
        Some(other) => {
            return Err(TensorError::new(format!(
                "seq2seq: unknown task {other:?} (reverse or sort)"
            )));
        }
    };
    let started = Instant::now();
    let mut rng = Rng::new(7);
    let mut train = Pairs::default();
    let mut seen = HashSet::new();
    for _ in 0..BATCHES * BATCH {
        let digits = draw(&mut rng);
        train.push(task, &digits);
        seen.insert(digits);
    }
    // Held-out strings appear nowhere in the training pairs.
    let mut held_out = Vec::new();
    while held_out.len() < HELD_OUT {
        let digits = draw(&mut rng);
        if !seen.contains(&digits) {
            held_out.push(digits);
        }
    }
    let mut test = Pairs::default();
    for digits in &held_out {
        test.push(task, digits);
    }

    let config = EncoderDecoderConfig {
        source_vocabulary: SOURCE_VOCABULARY,
        target_vocabulary: TARGET_VOCABULARY,
        source_time: LONGEST,
        target_time: TARGET_TIME,
        model: 64,
        heads: 4,
        hidden: 128,
        encoder_blocks: 2,
        decoder_blocks: 2,
        placement: Placement::Post,
        positions: PositionKind::Sinusoidal,
    };
    let graph = Graph::new();
    let model = EncoderDecoder::new(&graph, "reverser", config);
    let params = model.params();

    let train_shape = |time: usize| format!("{BATCHES},{BATCH}|->{time}");
    let batch = graph.static_index();
    let pairs = SequencePairs {
        source: data(&graph, "sources", &train_shape(LONGEST), train.source),
        source_mask: data(
            &graph,
            "source masks",
            &train_shape(LONGEST),
            train.source_mask,
        ),
        target_inputs: data(
            &graph,
            "target inputs",
            &train_shape(TARGET_TIME),
            train.target_inputs,
        ),
        targets: data(&graph, "targets", &train_shape(TARGET_TIME), train.targets),
        target_mask: data(
            &graph,
            "target masks",
            &train_shape(TARGET_TIME),
            train.target_mask,
        ),
    };
    let sliced = SequencePairs {
        source: pairs.source.slice(&batch),
        source_mask: pairs.source_mask.slice(&batch),
        target_inputs: pairs.target_inputs.slice(&batch),
        targets: pairs.targets.slice(&batch),
        target_mask: pairs.target_mask.slice(&batch),
    };
    let options = AttendOptions::new();
    let loss = model.loss(&sliced, &options);

    let test_shape = |time: usize| format!("{HELD_OUT}|->{time}");
    let test_source = data(
        &graph,
        "held-out sources",
        &test_shape(LONGEST),
        test.source,
    );
    let test_mask = data(
        &graph,
        "held-out source masks",
        &test_shape(LONGEST),
        test.source_mask,
    );
    let decoder_inputs = graph
        .data("decoder inputs")
        .shape(&test_shape(TARGET_TIME))
        .build();
    let test_logits = model.logits(&test_source, &test_mask, &decoder_inputs, &options);

    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let mut adam = Adam::new(&graph, &params, PEAK);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let decoder = Decoder {
        task,
        strings: held_out,
        inputs: decoder_inputs,
        routine: ctx.forward(&[&test_logits])?,
        logits: test_logits,
    };
    let mut parameters = 0;
    for p in &params {
        parameters += ctx.dims(p)?.iter().product::<usize>();
    }
    println!(
        "{} strings of {SHORTEST}-{LONGEST} digits on {}: an encoder-decoder transformer \
         ({} + {} post-norm blocks, width {}, {} heads, sinusoidal positions), {parameters} \
         parameters; {} training pairs in batches of {BATCH}, {EPOCHS} epochs; {HELD_OUT} \
         held-out strings, none seen in training (compiled in {:.1} s)",
        task.name(),
        ctx.backend_name(),
        config.encoder_blocks,
        config.decoder_blocks,
        config.model,
        config.heads,
        BATCHES * BATCH,
        started.elapsed().as_secs_f64()
    );

    let schedule = Schedule::Cosine {
        peak: PEAK,
        floor: PEAK / 20.0,
        warmup: BATCHES / 2,
    };
    let total = EPOCHS * BATCHES;
    let lr = adam.lr.clone();
    let mut accuracy = Accuracy {
        tokens: 0.0,
        sequences: 0.0,
    };
    for epoch in 0..EPOCHS {
        let plan = Plan {
            epochs: 1,
            batches: BATCHES,
            batch_size: BATCH,
            progress: true,
        };
        let history = fit_step(&mut ctx, &step, &loss, batch, plan, |ctx, n| {
            schedule.apply(ctx, &lr, epoch * BATCHES + n, total)
        })?;
        accuracy = decoder.accuracy(&mut ctx)?;
        println!(
            "epoch {}: training loss {:.4}; held-out greedy decoding: {:.1}% of tokens, {:.1}% \
             of whole strings right ({:.1} s)",
            epoch + 1,
            history.losses.last().copied().unwrap_or(f64::NAN),
            100.0 * accuracy.tokens,
            100.0 * accuracy.sequences,
            started.elapsed().as_secs_f64()
        );
    }
    println!(
        "held-out accuracy, decoding greedily position by position: {:.1}% of whole strings, \
         {:.1}% of tokens; {:.1} s in all",
        100.0 * accuracy.sequences,
        100.0 * accuracy.tokens,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
