//! Speed on the models users write: one training step of six models — a GPT, a ResNet with
//! batch normalization, an encoder–decoder transformer, a VAE, a GRU unrolled over 16 steps and
//! a small ViT — on rcannl's C backend and, in the same run, in PyTorch (eager, and
//! `torch.compile`) and JAX (`jax.jit`) through `practitioners_reference.py`; one table with the
//! ratios peer time / ours (above 1: rcannl is faster).
//!
//! The models are written as the README, the `nn` crate's pages and the examples teach a user to
//! write them, in plain style, and on the other side as PyTorch and JAX users write the same
//! models (same sizes, layers, optimizers, hyper-parameters and losses). They are not tuned for
//! rcannl and are not to be changed to flatter it: a slow model here is a finding to fix in the
//! library, not in this file. Where the documentation offered no way to write something, the
//! model says so in a comment ("No documented").
//!
//! A training step is what a training loop pays per step: forward, backward, the optimizer's
//! update (one routine, the optimizer's `compile_step`) and the loss read back. Every side runs
//! on the same number of threads: `$RAYON_NUM_THREADS` when set, else 2 (set here for ours;
//! `torch.set_num_threads`, XLA's flags, the BLAS variables and the CPU affinity for the
//! references). A figure is the best of [`ROUNDS`] medians, each over a model's repeats after
//! warm-up steps, as `--bench suite` times its workloads.
//!
//! Run with `cargo bench -p rcannl-nn --bench practitioners`; words after `--` time only the
//! models whose case names contain one (`-- gpt vae`), and `-- --check` runs 20 steps of each
//! model on every side instead and prints the first and last losses, which should be in the same
//! range across sides at the first step and fall on each (not equal: each side starts from its
//! own default initialization, rcannl's LeCun uniform and PyTorch's module defaults, and
//! memorizes its fixed batch at its own pace). The references need a python3 with numpy,
//! torch and jax first on the `PATH` (`PATH=/path/to/venv/bin:$PATH cargo bench …`); whatever it
//! cannot import is said in one line and its columns stay empty.

#[path = "support/allocator.rs"]
mod allocator;
#[path = "practitioners/models.rs"]
mod models;
// Shared with the suite, which also times numpy.
#[allow(dead_code)]
#[path = "support/peers.rs"]
mod peers;
// Shared with the benchmarks that install a missing reference module; this one only reports it.
#[allow(dead_code)]
#[path = "../../tensor/benches/support/python.rs"]
mod python;
#[path = "support/table.rs"]
mod table;

use std::time::Instant;

use models::Step;
use peers::Peers;
use rcannl_tensor::TensorError;
use table::Table;

/// Rounds of every model on each side; the best median counts, so that a noisy moment on a
/// shared machine hurts neither side.
const ROUNDS: usize = 3;
/// The threads when `$RAYON_NUM_THREADS` does not say.
const DEFAULT_THREADS: &str = "2";
/// The argument that runs the loss check instead of timing.
const CHECK: &str = "--check";
/// Training steps of the loss check.
const CHECK_STEPS: usize = 20;

/// A row of the table: a model timed step by step.
struct Model {
    /// What the table calls it.
    label: &'static str,
    /// The reference script's name for it.
    case: &'static str,
    /// Timed steps per round (the reference script times as many).
    repeats: usize,
    build: fn() -> Result<Step, TensorError>,
}

const MODELS: &[Model] = &[
    Model {
        label: "GPT 2x64 b32x16, AdamW",
        case: "gpt",
        repeats: 50,
        build: models::gpt,
    },
    Model {
        label: "ResNet+BN 32x32 b32, SGD",
        case: "resnet",
        repeats: 25,
        build: models::resnet,
    },
    Model {
        label: "enc-dec 2+2x64 b32x16, Adam",
        case: "seq2seq",
        repeats: 100,
        build: models::seq2seq,
    },
    Model {
        label: "VAE 784-256-16 b64, Adam",
        case: "vae",
        repeats: 400,
        build: models::vae,
    },
    Model {
        label: "GRU 32->128 T16 b32, Adam",
        case: "gru",
        repeats: 250,
        build: models::gru,
    },
    Model {
        label: "ViT 4x4 patches 2x64 b32, Adam",
        case: "vit",
        repeats: 50,
        build: models::vit,
    },
];

/// The table's columns, the peers' (the scripts' names for them).
const TABLE: Table = Table {
    width: 32,
    columns: &["torch", "torch.compile", "jax"],
};

/// Our figure for `model`: its seconds per step, or `None` after saying why it failed.
fn ours(model: &Model) -> Option<f64> {
    let started = Instant::now();
    let timed = (model.build)().and_then(|mut step| {
        eprintln!(
            "  built and compiled in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut checked = || match step()? {
            loss if loss.is_finite() => Ok(()),
            loss => Err(TensorError::new(format!("the loss is {loss}"))),
        };
        table::best_median(&mut checked, model.repeats, ROUNDS)
    });
    timed
        .inspect_err(|e| eprintln!("{}: rcannl failed: {e}", model.case))
        .ok()
}

/// The losses of our first and last of [`CHECK_STEPS`] steps of `model`.
fn our_losses(model: &Model) -> Result<Vec<f64>, TensorError> {
    let mut step = (model.build)()?;
    let first = step()?;
    let mut last = first;
    for _ in 1..CHECK_STEPS {
        last = step()?;
    }
    Ok(vec![first, last])
}

/// The first and last loss of a check, or `-`.
fn losses(pair: Option<&Vec<f64>>) -> String {
    match pair.map(Vec::as_slice) {
        Some([first, last]) => format!("{first:.3} -> {last:.3}"),
        _ => "-".to_owned(),
    }
}

/// Runs [`CHECK_STEPS`] steps of every chosen model on every side and prints the losses.
fn check(chosen: &[&Model], peers: &Peers) {
    let mut line = format!("{:<32} {:>18}", "model", "ours");
    for library in TABLE.columns {
        line.push_str(&format!(" {library:>18}"));
    }
    let mut rows = vec![line];
    for model in chosen {
        eprintln!("checking {} ...", model.label);
        let ours = our_losses(model)
            .inspect_err(|e| eprintln!("{}: rcannl failed: {e}", model.case))
            .ok();
        let steps = CHECK_STEPS.to_string();
        let theirs = peers.run(&peers.libraries(), &["check", model.case, &steps]);
        let mut line = format!("{:<32} {:>18}", model.label, losses(ours.as_ref()));
        for library in TABLE.columns {
            line.push_str(&format!(" {:>18}", losses(theirs.get(*library))));
        }
        rows.push(line);
    }
    println!("loss at the first and the {CHECK_STEPS}th training step (the same batch each step)");
    for row in rows {
        println!("{row}");
    }
}

fn main() {
    let started = Instant::now();
    table::default_threads(DEFAULT_THREADS);
    table::optimized_from_the_start();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Words after the program's name (cargo's `--bench` aside) choose models by their case.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let chosen: Vec<&Model> = MODELS
        .iter()
        .filter(|m| filters.is_empty() || filters.iter().any(|f| m.case.contains(f.as_str())))
        .collect();
    let threads = rcannl_backends::cc::kernel_threads();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/practitioners_reference.py"
    );
    let peers = Peers::find(script, threads);
    if args.iter().any(|a| a == CHECK) {
        check(&chosen, &peers);
        return;
    }

    let mut rows = Vec::new();
    for model in chosen {
        eprintln!("timing {} ...", model.label);
        let ours = ours(model);
        let theirs = peers.time(&peers.libraries(), model.case, model.repeats, ROUNDS);
        rows.push((model.label, ours, theirs));
    }

    table::preamble(threads, ROUNDS);
    TABLE.header("model (one training step)");
    for (label, ours, theirs) in &rows {
        TABLE.row(label, *ours, theirs);
    }
    println!(
        "the whole run took {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
