//! How the time of turning a graph into running code grows with the graph: for graphs of 10², 10³
//! and 10⁴ operations (by default), the time of each phase on the C backend — shape inference,
//! lowering to loops, optimization, code generation, the C compiler's runs, loading the library
//! (as [`rcannl_backends::phases`] times them) — and each phase's growth exponent
//! `log(t₂/t₁) / log(n₂/n₁)` between consecutive sizes (1: linear, 2: quadratic).
//!
//! Three families of graphs:
//! - `chain`: `tanh` and `sin` alternating on a parameter of 64 cells, summed; its forward
//!   routine, then its backprop routine;
//! - `mlp`: dense layers of width 32 with `relu`, on a batch of 4, summed; SGD's training step;
//! - `transformer`: 1, 2, 4, … 64 transformer blocks (width 32, 2 heads, 8 tokens, batch 2),
//!   summed; Adam's training step; with the ratio of the time of 64 blocks to that of 8;
//! - `params`: that many one-cell parameters, each with one input cell so that the default
//!   init draws it (LeCun uniform, fan-in 1); `init_params` (not in the default run:
//!   `-- params 5000`).
//!
//! The operations counted are the graph's ([`Graph::operation_count`]) once the routines are
//! compiled: the model's and the optimizer's. "routines" is the time of the calls compiling the
//! family's routines once the graph is built and its parameters initialized (the chain's
//! `forward` and `backprop`, the optimizers' `compile_step`, `init_params` for `params`): what a
//! user waits for a step to compile. The chain and the MLP are built to the operation
//! counts asked (as close as their layers allow); the transformer by blocks. Every measurement
//! runs in a fresh process with a fresh, empty kernel cache (`RCANNL_CACHE_DIR` a new folder,
//! removed afterwards), so that compiling is measured cold, and compiles as a user's program does:
//! in tiers, the C compiler's runs then the quick builds (`RCANNL_TIERED=false` times the
//! optimized builds instead); "wall" is that process's time from an
//! empty graph to the compiled routines, "other" what of it no phase counts (building the graph,
//! the context's buffers and initialization, backprop's assignments, the cache's checks).
//!
//! Run with `cargo bench -p rcannl-nn --bench compile`; words after `--` choose families
//! (`-- chain mlp`), numbers the operation counts of the chain and the MLP (`-- 100 1000 100000`),
//! `blocks=1,2,4` the transformer's block counts, `limit=600` the seconds one measurement may
//! take (300 unless said; one stopped is listed below its table as not measured), and `runs=3`
//! how many times each size is measured (each in its own process and cache; 1 unless said): each
//! phase's figure, and the wall time, is then the least of the runs, as a busy machine only ever
//! adds time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcannl_backends::phases::{Phase, PhaseTimes};
use rcannl_nn::attention::TransformerBlock;
use rcannl_nn::blocks::Dense;
use rcannl_nn::data::Rng;
use rcannl_nn::loss::sum;
use rcannl_nn::optim::{Adam, Sgd};
use rcannl_tensor::{Graph, Tensor, TensorError};

#[path = "support/allocator.rs"]
mod allocator;
// The practitioners' models, for the context they are trained in.
#[path = "practitioners/models.rs"]
#[allow(dead_code)]
mod models;
use models::context;

/// The argument that makes this program build and compile one graph and print its times.
const MEASURE: &str = "measure-one";
/// The operation counts of the chain and the MLP when no number is given.
const DEFAULT_SIZES: [usize; 3] = [100, 1_000, 10_000];
/// The transformer's block counts when `blocks=` does not say.
const DEFAULT_BLOCKS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// How long one measurement may take when `limit=` does not say.
const DEFAULT_LIMIT: Duration = Duration::from_secs(300);
/// The cells of the chain's parameter.
const CHAIN_CELLS: usize = 64;
/// The MLP's layer width and batch.
const MLP_WIDTH: usize = 32;
const MLP_BATCH: usize = 4;
/// Operations of one MLP layer: the product, the bias's sum, the `relu`.
const MLP_LAYER_OPS: usize = 3;
/// The transformer's width, heads, tokens and batch.
const MODEL: usize = 32;
const HEADS: usize = 2;
const TIME: usize = 8;
const BATCH: usize = 2;

/// A family of graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Chain,
    Mlp,
    Transformer,
    Params,
}

impl Family {
    /// The families of the default run.
    const DEFAULT: [Family; 3] = [Family::Chain, Family::Mlp, Family::Transformer];
    const ALL: [Family; 4] = [
        Family::Chain,
        Family::Mlp,
        Family::Transformer,
        Family::Params,
    ];

    fn name(self) -> &'static str {
        match self {
            Family::Chain => "chain",
            Family::Mlp => "mlp",
            Family::Transformer => "transformer",
            Family::Params => "params",
        }
    }

    fn named(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What the family's sizes count.
    fn size_unit(self) -> &'static str {
        match self {
            Family::Transformer => "blocks",
            Family::Chain | Family::Mlp | Family::Params => "asked",
        }
    }

    /// Builds the family's graph of `size` (operations asked, or blocks) on the C backend and
    /// compiles its routines: the graph's operation count, and the time of the calls compiling
    /// the routines.
    fn build_and_compile(self, size: usize) -> Result<(usize, Duration), TensorError> {
        let graph = Graph::new();
        let routines = match self {
            Family::Chain => {
                let mut h = graph.param("p").output([CHAIN_CELLS]).build();
                // One operation is the sum.
                for i in 0..size.saturating_sub(1) {
                    h = if i % 2 == 0 { h.tanh() } else { h.sin() };
                }
                let loss = sum(&h);
                let mut ctx = context(&graph)?;
                let start = Instant::now();
                ctx.forward(&[&loss])?;
                ctx.backprop(&loss)?;
                start.elapsed()
            }
            Family::Mlp => {
                let x = data(&graph, &format!("{MLP_BATCH}|->{MLP_WIDTH}"), 1);
                let layers = (size.saturating_sub(1) / MLP_LAYER_OPS).max(1);
                let h = (0..layers).fold(x, |h, i| {
                    Dense::new(&graph, &format!("layer{i}"), MLP_WIDTH)
                        .apply(&h)
                        .relu()
                });
                let loss = sum(&h);
                let mut ctx = context(&graph)?;
                let start = Instant::now();
                Sgd::new(&graph, &graph.params(), 0.01, 0.9).compile_step(&mut ctx, &loss)?;
                start.elapsed()
            }
            Family::Transformer => {
                let x = data(&graph, &format!("{BATCH}|->{TIME},{MODEL}"), 2);
                let h = (0..size).fold(x, |h, i| {
                    TransformerBlock::new(
                        &graph,
                        &format!("block{i}"),
                        MODEL,
                        HEADS,
                        4 * MODEL,
                        true,
                    )
                    .apply(&h, TIME, None)
                });
                let loss = sum(&h);
                let mut ctx = context(&graph)?;
                let start = Instant::now();
                Adam::new(&graph, &graph.params(), 0.001).compile_step(&mut ctx, &loss)?;
                start.elapsed()
            }
            Family::Params => {
                for i in 0..size {
                    graph.param(&format!("p{i}")).input([1]).output([1]).build();
                }
                // The context initializes the parameters.
                let start = Instant::now();
                context(&graph)?;
                start.elapsed()
            }
        };
        Ok((graph.operation_count(), routines))
    }
}

/// Data of `shape`, standard normal values drawn from `seed`.
fn data(graph: &Graph, shape: &str, seed: u64) -> Tensor {
    let cells: usize = shape
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|d| d.parse::<usize>().ok())
        .product();
    let mut rng = Rng::new(seed);
    graph
        .data("x")
        .shape(shape)
        .values((0..cells).map(|_| rng.normal()).collect())
        .build()
}

/// One measurement: the graph's operations, the wall time, the routines' compiling calls' and
/// each phase's.
struct Measured {
    size: usize,
    ops: usize,
    wall: Duration,
    routines: Duration,
    phases: [Duration; 6],
}

impl Measured {
    /// Each phase's least time, and the least wall time, of `self` and `other` (of one size).
    fn least(self, other: &Measured) -> Measured {
        Measured {
            wall: self.wall.min(other.wall),
            routines: self.routines.min(other.routines),
            phases: std::array::from_fn(|i| self.phases[i].min(other.phases[i])),
            ..self
        }
    }

    fn total(&self) -> Duration {
        self.phases.iter().sum()
    }

    /// The line a measuring process prints: operations, then nanoseconds (wall, routines, the
    /// phases).
    fn line(ops: usize, wall: Duration, routines: Duration, phases: &PhaseTimes) -> String {
        let mut words = vec![
            ops.to_string(),
            wall.as_nanos().to_string(),
            routines.as_nanos().to_string(),
        ];
        words.extend(Phase::ALL.map(|p| phases.of(p).as_nanos().to_string()));
        words.join(" ")
    }

    fn parse(size: usize, line: &str) -> Option<Measured> {
        let numbers: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let [ops, wall, routines, phases @ ..] = numbers.as_slice() else {
            return None;
        };
        Some(Measured {
            size,
            ops: usize::try_from(*ops).ok()?,
            wall: Duration::from_nanos(*wall),
            routines: Duration::from_nanos(*routines),
            phases: <[u64; 6]>::try_from(phases).ok()?.map(Duration::from_nanos),
        })
    }
}

/// A private folder for one measurement's kernel cache, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(family: Family, size: usize) -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "rcannl-compile-{}-{}-{size}-{nanos}",
            std::process::id(),
            family.name()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Measures `family` at `size` in a fresh process whose kernel cache is `cache`, stopped after
/// `limit` (its errors go to this program's standard error).
fn measure(family: Family, size: usize, cache: &Path, limit: Duration) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut child = Command::new(exe)
        .args([MEASURE, family.name(), &size.to_string()])
        .env("RCANNL_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run this program again: {e}"))?;
    let start = Instant::now();
    let waited = |e: std::io::Error| format!("cannot wait for the measurement: {e}");
    while child.try_wait().map_err(waited)?.is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("did not finish within {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().map_err(waited)?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    Measured::parse(size, stdout.trim()).ok_or_else(|| format!("failed ({})", output.status))
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// The growth exponent of `t` from `(n1, t1)` to `(n2, t2)`, if both times are long enough
/// to say (a phase of a few microseconds is noise).
fn exponent(n1: usize, t1: Duration, n2: usize, t2: Duration) -> String {
    let floor = Duration::from_micros(50);
    if t1 < floor || t2 < floor || n1 == n2 {
        return "-".to_owned();
    }
    let e = (t2.as_secs_f64() / t1.as_secs_f64()).ln() / (n2 as f64 / n1 as f64).ln();
    format!("{e:.2}")
}

/// The width of a phase's column: its name's, enough for a time.
fn width(phase: Phase) -> usize {
    phase.name().len().max(8)
}

/// The family's table: a row per size, each phase's milliseconds and its exponent from the
/// row before.
fn print_table(family: Family, rows: &[Measured]) {
    let mut header = format!("{:>7} {:>7}", family.size_unit(), "ops");
    for phase in Phase::ALL {
        header.push_str(&format!(
            " {:>w$} {:>5}",
            phase.name(),
            "exp",
            w = width(phase)
        ));
    }
    header.push_str(&format!(
        " {:>10} {:>5} {:>10} {:>5} {:>10} {:>8}",
        "phases", "exp", "routines", "exp", "wall", "other"
    ));
    println!(
        "\n{} (ms; exp: growth exponent from the row above)",
        family.name()
    );
    println!("{header}");
    for (i, row) in rows.iter().enumerate() {
        let previous = i.checked_sub(1).map(|j| &rows[j]);
        let grow = |then: fn(&Measured) -> Duration, now: Duration| {
            previous.map_or(String::new(), |p| exponent(p.ops, then(p), row.ops, now))
        };
        let mut line = format!("{:>7} {:>7}", row.size, row.ops);
        for (k, (&now, phase)) in row.phases.iter().zip(Phase::ALL).enumerate() {
            let exp = previous.map_or(String::new(), |p| {
                exponent(p.ops, p.phases[k], row.ops, now)
            });
            line.push_str(&format!(" {:>w$} {:>5}", ms(now), exp, w = width(phase)));
        }
        line.push_str(&format!(
            " {:>10} {:>5} {:>10} {:>5} {:>10} {:>8}",
            ms(row.total()),
            grow(Measured::total, row.total()),
            ms(row.routines),
            grow(|m| m.routines, row.routines),
            ms(row.wall),
            ms(row.wall.saturating_sub(row.total()))
        ));
        println!("{line}");
    }
    if family == Family::Transformer {
        let at = |blocks: usize| rows.iter().find(|r| r.size == blocks);
        if let (Some(eight), Some(sixty_four)) = (at(8), at(64)) {
            let ratio = |time: fn(&Measured) -> Duration| {
                time(sixty_four).as_secs_f64() / time(eight).as_secs_f64()
            };
            println!(
                "time(64 blocks) / time(8 blocks): phases {:.2}, routines {:.2}, wall {:.2}",
                ratio(Measured::total),
                ratio(|m| m.routines),
                ratio(|m| m.wall)
            );
        }
    }
}

/// In a measuring process: builds and compiles one graph, prints its line.
fn measure_here(family: &str, size: &str) -> Result<(), TensorError> {
    let family = Family::named(family)
        .ok_or_else(|| TensorError::new(format!("no family named {family}")))?;
    let size = size
        .parse()
        .map_err(|_| TensorError::new(format!("not a size: {size}")))?;
    let (start, before) = (Instant::now(), PhaseTimes::now());
    let (ops, routines) = family.build_and_compile(size)?;
    let (wall, phases) = (start.elapsed(), PhaseTimes::now().since(before));
    println!("{}", Measured::line(ops, wall, routines, &phases));
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Cargo's `--bench` and the like aside.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let [first, family, size] = args.as_slice()
        && first == MEASURE
    {
        return Ok(measure_here(family, size)?);
    }
    let mut families = Vec::new();
    let mut sizes = Vec::new();
    let mut blocks = Vec::new();
    let mut limit = DEFAULT_LIMIT;
    let mut runs = 1;
    for arg in &args {
        if let Some(seconds) = arg.strip_prefix("limit=") {
            let seconds = seconds
                .parse()
                .map_err(|_| format!("not a number of seconds: {seconds}"))?;
            limit = Duration::from_secs(seconds);
        } else if let Some(count) = arg.strip_prefix("runs=") {
            runs = count
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("not a number of runs: {count}"))?;
        } else if let Some(list) = arg.strip_prefix("blocks=") {
            for b in list.split(',') {
                blocks.push(
                    b.parse::<usize>()
                        .map_err(|_| format!("not a block count: {b}"))?,
                );
            }
        } else if let Ok(n) = arg.parse::<usize>() {
            sizes.push(n);
        } else {
            families.push(Family::named(arg).ok_or_else(|| {
                format!("no family named {arg} (chain, mlp, transformer, params; or a size)")
            })?);
        }
    }
    if families.is_empty() {
        families = Family::DEFAULT.to_vec();
    }
    if sizes.is_empty() {
        sizes = DEFAULT_SIZES.to_vec();
    }
    if blocks.is_empty() {
        blocks = DEFAULT_BLOCKS.to_vec();
    }
    println!("cold compilation on the C backend, each measurement in a fresh process and cache");
    for family in families {
        let family_sizes = if family == Family::Transformer {
            &blocks
        } else {
            &sizes
        };
        // Each run measures every size in turn, so that a machine busier for a while slows
        // every size alike rather than one (the ratios compare sizes).
        let mut best: Vec<Option<Measured>> = family_sizes.iter().map(|_| None).collect();
        let mut missing: Vec<String> = Vec::new();
        let mut stopped = vec![false; family_sizes.len()];
        for _ in 0..runs {
            for (i, &size) in family_sizes.iter().enumerate() {
                if stopped[i] {
                    continue;
                }
                eprintln!("{} {size} ...", family.name());
                let scratch = Scratch::new(family, size)?;
                match measure(family, size, &scratch.0, limit) {
                    Ok(row) => {
                        best[i] = Some(match best[i].take() {
                            Some(b) => b.least(&row),
                            None => row,
                        })
                    }
                    Err(e) => {
                        missing.push(format!("{size}: {e}"));
                        best[i] = None;
                        stopped[i] = true;
                    }
                }
            }
        }
        let rows: Vec<Measured> = best.into_iter().flatten().collect();
        print_table(family, &rows);
        for line in missing {
            println!("not measured: {line}");
        }
    }
    Ok(())
}
