//! Training-step benchmark: the moons MLP (2 → 16 → 16 → 1, relu, mean hinge loss) at batch sizes
//! 32 and 1024. Each case is timed in rcannl and, in the same run, in hand-written numpy and in JAX
//! (jit, CPU) through `mlp_step_reference.py`, with the ratios reference time / ours (above 1: we
//! are faster).
//!
//! - step: the median time of one SGD step (lr 0.1, no momentum) on a fixed batch, the backprop
//!   routine then the update routine, compilation excluded;
//! - epochs: training throughput in examples/s over an epoch loop like the moons example's (32
//!   batches picked by a static index, the loss read after every step, momentum 0.9, a cosine
//!   learning-rate schedule), after one warm-up epoch.
//!
//! The interpreter runs batch 32 too, to show what compiling buys. Run with
//! `cargo bench -p rcannl-nn --bench mlp_step`. numpy and JAX are installed with
//! `python3 -m pip install` when missing (one try each); without python3 or numpy our figures are
//! printed alone, and without JAX its columns stay empty.

#[path = "../../tensor/benches/support/python.rs"]
mod python;

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcannl_backends::{Backend, Interpreter, default_backend};
use rcannl_nn::blocks::Mlp;
use rcannl_nn::data::moons;
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::{Schedule, Sgd};
use rcannl_nn::train::{Plan, fit};
use rcannl_tensor::{Context, Graph, TensorError};

/// The widths of the layers after the 2 inputs.
const WIDTHS: [usize; 3] = [16, 16, 1];
/// The moons' noise and the seeds of data and parameters (the script uses the same values).
const NOISE: f64 = 0.1;
const DATA_SEED: u64 = 1;
const PARAM_SEED: u64 = 1;
const LR: f64 = 0.1;
/// The epoch loop's momentum, batches per epoch and schedule floor (the moons example's).
const MOMENTUM: f64 = 0.9;
const BATCHES: usize = 32;
const LR_FLOOR: f64 = 0.005;
/// Untimed steps before a step's timing starts.
const WARMUP: usize = 5;
/// Rounds of every case, ours and the references' taking turns; each side's best figure counts,
/// so that a noisy moment on a shared machine hurts neither side.
const ROUNDS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// The default backend: C when a compiler runs here.
    Default,
    Interpreter,
}

impl Engine {
    fn backend(self) -> Box<dyn Backend> {
        match self {
            Engine::Default => default_backend(),
            Engine::Interpreter => Box::new(Interpreter),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measure {
    /// The median of this many timed steps.
    Step { repeats: usize },
    /// Examples/s over this many epochs.
    Epochs { epochs: usize },
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Seconds of one training step (backprop, then the SGD update) at `batch`: the median over
/// `repeats` steps.
fn step_seconds(engine: Engine, batch: usize, repeats: usize) -> Result<f64, TensorError> {
    let (xs, ys) = moons(batch, NOISE, DATA_SEED);
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape(&format!("{batch}|->2"))
        .values(xs)
        .build();
    let y = graph
        .data("y")
        .shape(&format!("{batch}|->1"))
        .values(ys)
        .build();
    let model = Mlp::new(&graph, "mlp", &WIDTHS);
    let loss = hinge(&model.apply(&x), &y);
    let mut sgd = Sgd::new(&graph, &model.params(), LR, 0.0);
    let mut ctx = Context::with_backend(&graph, engine.backend());
    ctx.set_seed(PARAM_SEED);
    ctx.init_params()?;
    let backprop = ctx.backprop(&loss)?;
    let update = sgd.compile(&mut ctx)?;
    // Steady-state steps: the optimized builds, waited for.
    backprop.finish_compiling()?;
    update.finish_compiling()?;
    let step = |ctx: &mut Context| -> Result<Duration, TensorError> {
        let start = Instant::now();
        ctx.run(&backprop)?;
        ctx.run(&update)?;
        Ok(start.elapsed())
    };
    for _ in 0..WARMUP {
        step(&mut ctx)?;
    }
    let times = (0..repeats)
        .map(|_| step(&mut ctx))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(median(times).as_secs_f64())
}

/// Examples/s of the moons example's training loop at `batch` over `epochs` epochs, after one
/// untimed epoch.
fn examples_per_second(engine: Engine, batch: usize, epochs: usize) -> Result<f64, TensorError> {
    let (train_x, train_y) = moons(BATCHES * batch, NOISE, DATA_SEED);
    let graph = Graph::new();
    let xs = graph
        .data("xs")
        .shape(&format!("{BATCHES},{batch}|->2"))
        .values(train_x)
        .build();
    let ys = graph
        .data("ys")
        .shape(&format!("{BATCHES},{batch}|->1"))
        .values(train_y)
        .build();
    let index = graph.static_index();
    let model = Mlp::new(&graph, "mlp", &WIDTHS);
    let loss = hinge(&model.apply(&xs.slice(&index)), &ys.slice(&index));
    let mut sgd = Sgd::new(&graph, &model.params(), LR, MOMENTUM);
    let mut ctx = Context::with_backend(&graph, engine.backend());
    ctx.set_seed(PARAM_SEED);
    ctx.init_params()?;
    let backprop = ctx.backprop(&loss)?;
    let step = sgd.compile(&mut ctx)?;
    let schedule = Schedule::Cosine {
        peak: LR,
        floor: LR_FLOOR,
        warmup: BATCHES,
    };
    let lr = sgd.lr.clone();
    let train = |ctx: &mut Context, epochs: usize| {
        let plan = Plan {
            epochs,
            batches: BATCHES,
            batch_size: batch,
            progress: false,
        };
        let total = epochs * BATCHES;
        fit(ctx, &backprop, &step, &loss, index, plan, |ctx, n| {
            schedule.apply(ctx, &lr, n, total)
        })
    };
    train(&mut ctx, 1)?;
    Ok(train(&mut ctx, epochs)?.examples_per_second)
}

/// One measurement: what the reference prints as `LIBRARY CASE VALUE`, keyed by library and case.
type Figures = HashMap<(String, String), f64>;

/// The references' figures for `cases` (seconds per step, or examples/s), numpy's and, when
/// `jax`, JAX's. Whatever the script printed counts, even when it stopped early.
fn reference_figures(cases: &[String], jax: bool) -> Figures {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/mlp_step_reference.py");
    let mut command = Command::new("python3");
    command.arg(script);
    if jax {
        command.arg("--jax");
    }
    let output = command
        .args(cases)
        .env("JAX_PLATFORMS", "cpu")
        .stdin(Stdio::null())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            eprintln!("cannot run the reference script: {e}");
            return Figures::new();
        }
    };
    python::report_failure(&output);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (library, case, value) = (fields.next()?, fields.next()?, fields.next()?);
            Some(((library.to_owned(), case.to_owned()), value.parse().ok()?))
        })
        .collect()
}

/// A row of the table.
#[derive(Debug)]
struct Case {
    engine: Engine,
    batch: usize,
    measure: Measure,
    /// The reference case it is compared with (the script's name for it).
    reference: String,
}

impl Case {
    fn new(engine: Engine, batch: usize, measure: Measure) -> Case {
        Case {
            engine,
            batch,
            measure,
            reference: reference_name(batch, measure),
        }
    }

    /// Seconds per step, or per example.
    fn seconds(&self) -> Result<f64, TensorError> {
        match self.measure {
            Measure::Step { repeats } => step_seconds(self.engine, self.batch, repeats),
            Measure::Epochs { epochs } => {
                Ok(1.0 / examples_per_second(self.engine, self.batch, epochs)?)
            }
        }
    }
}

fn reference_name(batch: usize, measure: Measure) -> String {
    match measure {
        Measure::Step { repeats } => format!("step:{batch}:{repeats}"),
        Measure::Epochs { epochs } => format!("epochs:{batch}:{epochs}"),
    }
}

/// A figure for the table: microseconds per step, or examples/s.
fn shown(measure: Measure, seconds: Option<f64>) -> String {
    match (measure, seconds) {
        (_, None) => "-".to_owned(),
        (Measure::Step { .. }, Some(s)) => format!("{:.1} us", s * 1e6),
        (Measure::Epochs { .. }, Some(s)) => format!("{:.0} ex/s", 1.0 / s),
    }
}

/// A ratio with three significant digits when it is small (the interpreter's).
fn show_ratio(r: f64) -> String {
    if r >= 0.1 {
        format!("{r:.2}")
    } else {
        format!("{r:.2e}")
    }
}

fn main() -> Result<(), TensorError> {
    let numpy = python::importable("numpy", "numpy");
    let jax = numpy && python::importable("jax", "jax[cpu]");
    if !numpy {
        eprintln!("no numpy reference: printing our figures alone");
    } else if !jax {
        eprintln!("JAX cannot be imported or installed: skipping JAX");
    }

    let default_backend = Engine::Default.backend();
    let default_name = default_backend.name();
    let cases = [
        Case::new(Engine::Default, 32, Measure::Step { repeats: 1000 }),
        Case {
            reference: reference_name(32, Measure::Step { repeats: 1000 }),
            ..Case::new(Engine::Interpreter, 32, Measure::Step { repeats: 50 })
        },
        Case::new(Engine::Default, 1024, Measure::Step { repeats: 500 }),
        Case::new(Engine::Default, 32, Measure::Epochs { epochs: 60 }),
        Case {
            reference: reference_name(32, Measure::Epochs { epochs: 60 }),
            ..Case::new(Engine::Interpreter, 32, Measure::Epochs { epochs: 2 })
        },
        Case::new(Engine::Default, 1024, Measure::Epochs { epochs: 20 }),
    ];
    let references: Vec<String> = cases
        .iter()
        .map(|c| c.reference.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    // Everything is kept as seconds (per step, or per example), so the best figure is the least.
    let mut ours: Vec<f64> = vec![f64::INFINITY; cases.len()];
    let mut theirs = Figures::new();
    for _ in 0..ROUNDS {
        if numpy {
            for (key, value) in reference_figures(&references, jax) {
                let seconds = if key.1.starts_with("epochs") {
                    1.0 / value
                } else {
                    value
                };
                let best = theirs.entry(key).or_insert(f64::INFINITY);
                *best = best.min(seconds);
            }
        }
        for (case, best) in cases.iter().zip(&mut ours) {
            *best = best.min(case.seconds()?);
        }
    }

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "moons MLP 2 -> 16 -> 16 -> 1, hinge loss; {threads} hardware threads; best of {ROUNDS} \
         rounds; ratios are reference time / ours"
    );
    if let Some(target) = default_backend.target() {
        println!("target: {target}");
    }
    println!(
        "step: backprop + SGD update, median; epochs: examples/s over {BATCHES} batches an epoch, \
         loss read every step, momentum {MOMENTUM}, cosine schedule"
    );
    println!(
        "{:<34} {:>14} {:>14} {:>10} {:>14} {:>10}",
        "case", "ours", "numpy", "numpy/ours", "jax", "jax/ours"
    );
    for (case, &mine) in cases.iter().zip(&ours) {
        let backend = match case.engine {
            Engine::Default => default_name,
            Engine::Interpreter => "interpreter",
        };
        let (what, count) = match case.measure {
            Measure::Step { repeats } => ("step", format!("{repeats} steps")),
            Measure::Epochs { epochs } => ("epochs", format!("{epochs} epochs")),
        };
        let label = format!("{what} {} ({backend}, {count})", case.batch);
        let reference = |library: &str| {
            theirs
                .get(&(library.to_owned(), case.reference.clone()))
                .copied()
        };
        let ratio = |seconds: Option<f64>| seconds.map_or("-".to_owned(), |s| show_ratio(s / mine));
        let (numpy_seconds, jax_seconds) = (reference("numpy"), reference("jax"));
        println!(
            "{label:<34} {:>14} {:>14} {:>10} {:>14} {:>10}",
            shown(case.measure, Some(mine)),
            shown(case.measure, numpy_seconds),
            ratio(numpy_seconds),
            shown(case.measure, jax_seconds),
            ratio(jax_seconds),
        );
    }
    Ok(())
}
