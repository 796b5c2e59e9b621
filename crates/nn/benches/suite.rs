//! CPU benchmark suite: each workload timed on rcannl's C backend and, in the same run, in
//! PyTorch (eager, and `torch.compile`), JAX (`jax.jit`) and, for the matrix product, numpy,
//! through `suite_reference.py`; one table with the ratios peer time / ours (above 1: we are
//! faster).
//!
//! Every side runs on the same number of threads: `$RAYON_NUM_THREADS` when set, else 2 (set
//! here for ours; `torch.set_num_threads`, XLA's flags, the BLAS variables and the CPU affinity
//! for the references). A figure is the best of [`ROUNDS`] medians, each over a workload's
//! repeats after warm-up steps. A training step is everything a training loop pays per step:
//! backprop and the optimizer's update (one routine, the optimizer's `compile_step`), the loss
//! read back.
//!
//! The time to first step (from an empty graph to the first step's loss) of the transformer, the
//! digits CNN and the moons MLP at batch 32 is timed in fresh processes: with an empty kernel
//! cache (`RCANNL_CACHE_DIR` a fresh folder), then again with the cache it filled; likewise
//! `torch.compile` (a fresh `TORCHINDUCTOR_CACHE_DIR`) and `jax.jit` (a fresh persistent
//! compilation cache), and PyTorch eager.
//!
//! Run with `cargo bench -p rcannl-nn --bench suite`, or with words after `--` to time only the
//! workloads whose case names contain one (`-- conv moons`; `first_step` for the first-step
//! rows). The references need python3 with numpy,
//! torch and jax; whatever is missing is said in one line and its columns stay empty.

#[path = "support/allocator.rs"]
mod allocator;
#[path = "support/peers.rs"]
mod peers;
// Shared with the benchmarks that install a missing reference module; this one only reports it.
#[allow(dead_code)]
#[path = "../../tensor/benches/support/python.rs"]
mod python;
// Shared with `gpu_steps`, which counts models the suite does not time (the resnet, the GPT).
#[path = "support/table.rs"]
mod table;
#[path = "suite/workloads.rs"]
#[allow(dead_code)]
mod workloads;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use peers::Peers;
use rcannl_tensor::{BackendChoice, TensorError};
use table::Table;
use workloads::Step;

/// Rounds of every workload on each side; the best median counts, so that a noisy moment on a
/// shared machine hurts neither side.
const ROUNDS: usize = 3;
/// The threads when `$RAYON_NUM_THREADS` does not say.
const DEFAULT_THREADS: &str = "2";
/// The argument that makes this program time the first step of the workload named next and
/// print it.
const FIRST_STEP: &str = "first-step";
/// The workloads whose first steps are timed.
const FIRST_STEP_WORKLOADS: [&str; 3] = ["transformer", "digits", "moons32"];
/// The first-step rows' case, for choosing them.
const FIRST_STEP_CASE: &str = "first_step";

/// A row of the table: a workload timed step by step.
struct Workload {
    /// What the table calls it.
    label: &'static str,
    /// The reference script's name for it.
    case: &'static str,
    /// Timed steps per round (the reference script times as many).
    repeats: usize,
    build: fn() -> Result<Step, TensorError>,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        label: "matmul f32 1024^3",
        case: "matmul",
        repeats: 20,
        build: || workloads::matmul(1024, BackendChoice::Cc),
    },
    Workload {
        label: "conv2d 3x3 (8,64,58,58)->64 fwd",
        case: "conv_forward",
        repeats: 10,
        build: || workloads::conv_forward(BackendChoice::Cc),
    },
    Workload {
        label: "conv2d 3x3 fwd + dx + dk",
        case: "conv_step",
        repeats: 5,
        build: || workloads::conv_step(BackendChoice::Cc),
    },
    Workload {
        label: "names transformer step, Adam",
        case: "transformer",
        repeats: 100,
        build: || workloads::transformer_step(BackendChoice::Cc),
    },
    Workload {
        label: "moons MLP step b32, SGD",
        case: "moons32",
        repeats: 1000,
        build: || workloads::moons_step(32, BackendChoice::Cc),
    },
    Workload {
        label: "moons MLP step b1024, SGD",
        case: "moons1024",
        repeats: 300,
        build: || workloads::moons_step(1024, BackendChoice::Cc),
    },
    Workload {
        label: "MLP 784-512-512-10 step b128, Adam",
        case: "mlp",
        repeats: 30,
        build: || workloads::mlp_step(BackendChoice::Cc),
    },
    Workload {
        label: "digits CNN step b32, Adam",
        case: "digits",
        repeats: 300,
        build: || workloads::digits_step(BackendChoice::Cc),
    },
    Workload {
        label: "MLP 784-512-512-10 fwd b1",
        case: "latency",
        repeats: 500,
        build: || workloads::mlp_latency(BackendChoice::Cc),
    },
];

/// A private scratch folder for the kernel caches of the first-step rows, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path =
            std::env::temp_dir().join(format!("rcannl-suite-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Scratch(path))
    }

    fn folder(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Our time to the first step of workload `case`, in a fresh process whose kernel cache is
/// `cache`.
/// `tiered`: the environment's `tiered` setting as the user gave it, which the first step runs
/// under (the steady-state rows build optimized code from the start).
fn our_first_step(case: &str, cache: &Path, tiered: Option<&OsStr>) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut command = Command::new(exe);
    match tiered {
        Some(value) => command.env("RCANNL_TIERED", value),
        None => command.env_remove("RCANNL_TIERED"),
    };
    let output = command
        .args([FIRST_STEP, case])
        .env("RCANNL_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run this program again: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.trim().parse().map_err(|_| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        format!(
            "the first-step process failed ({}): {}",
            output.status,
            stderr.lines().last().unwrap_or("no message")
        )
    })
}

/// The table's columns: the peers, with numpy (the matrix product's alone).
const TABLE: Table = Table {
    width: 34,
    columns: &["torch", "torch.compile", "jax", "numpy"],
};

fn main() -> Result<(), TensorError> {
    table::default_threads(DEFAULT_THREADS);
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == FIRST_STEP) {
        let case = args.get(at + 1).map_or("", String::as_str);
        let workload = WORKLOADS
            .iter()
            .find(|w| w.case == case)
            .ok_or_else(|| TensorError::new(format!("no workload named {case}")))?;
        let start = std::time::Instant::now();
        (workload.build)()?()?;
        println!("{}", start.elapsed().as_secs_f64());
        return Ok(());
    }
    let tiered = table::optimized_from_the_start();
    // Words after the program's name (cargo's `--bench` aside) choose workloads by their case.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let chosen = |case: &str| filters.is_empty() || filters.iter().any(|f| case.contains(f));
    let threads = rcannl_backends::cc::kernel_threads();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/suite_reference.py");
    let peers = Peers::find(script, threads);

    let mut rows = Vec::new();
    for workload in WORKLOADS.iter().filter(|w| chosen(w.case)) {
        eprintln!("timing {} ...", workload.label);
        let mut step = (workload.build)()?;
        let ours = table::best_median(&mut step, workload.repeats, ROUNDS)?;
        drop(step);
        let mut libraries = peers.libraries();
        if workload.case == "matmul" && peers.numpy() {
            libraries.push("numpy");
        }
        let theirs = peers.time(&libraries, workload.case, workload.repeats, ROUNDS);
        rows.push((workload.label.to_owned(), Some(ours), theirs));
    }

    if chosen(FIRST_STEP_CASE) {
        match Scratch::new() {
            Ok(scratch) => {
                for case in FIRST_STEP_WORKLOADS {
                    eprintln!("timing the {case} workload's first step ...");
                    // The first round finds the caches empty and fills them; the second finds
                    // them full.
                    for cache_state in ["cold", "warm"] {
                        let ours = our_first_step(
                            case,
                            &scratch.folder(&format!("{case}-rcannl")),
                            tiered.as_deref(),
                        )
                        .inspect_err(|e| eprintln!("{e}"))
                        .ok();
                        let mut theirs = peers::Figures::new();
                        for library in peers.libraries() {
                            let cache = scratch.folder(&format!("{case}-{library}"));
                            let first = ["first", &*cache.to_string_lossy(), case];
                            theirs.extend(peers.run(&[library], &first));
                        }
                        rows.push((format!("first step {case}, {cache_state}"), ours, theirs));
                    }
                }
            }
            Err(e) => eprintln!("no first-step rows: cannot make a scratch folder: {e}"),
        }
    }

    table::preamble(threads, ROUNDS);
    println!(
        "first step: from an empty graph to the workload's first step (the peers' from after \
         their imports); cold: empty kernel caches (ours, inductor's, JAX's persistent cache), \
         warm: the caches the cold run filled"
    );
    TABLE.header("workload");
    for (label, ours, theirs) in &rows {
        TABLE.row(label, *ours, theirs);
    }
    Ok(())
}
