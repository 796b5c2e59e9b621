//! Data-parallel training over MPI, run for real: `cargo test -p rcannl-nn --features mpi`
//! starts this program under `mpirun` with 2 and with 3 ranks, and each rank checks what it
//! can see; the run passes when every `mpirun` exits successfully (and the failure case when it
//! exits with the expected error, in bounded time). Without `mpirun` on the PATH it says so in
//! one line and passes, unless `RCANNL_REQUIRE_MPI` is set (as in CI).
//!
//! The ranks' cases, each named by the first argument:
//! - `train DIR`: a moons MLP trained data-parallel for three epochs, in f64 and in f32; every
//!   rank ends with the same parameters, bit for bit, and they equal those of the same training
//!   in one process on whole batches within f32 summation-order tolerance; rank 0 saves the f32
//!   model's to `DIR`.
//! - `resume DIR`: the parameters saved by `train` (with another number of ranks) loaded on
//!   every rank equal the file's, and training on from them stays equal to one process doing
//!   the same.
//! - `fail`: rank 1 fails in its fourth step; every rank must stop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcannl_ir::Precision;
use rcannl_nn::checkpoint;
use rcannl_nn::data::moons;
use rcannl_nn::distributed::{Ranks, Shuffle, fit_data_parallel};
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::Sgd;
use rcannl_nn::train::{Plan, epoch_order};
use rcannl_tensor::{Context, Graph, Routine, StaticIndex, Tensor, TensorError};

const BATCHES: usize = 8;
/// Divides evenly among 2 and 3 ranks.
const BATCH: usize = 24;
const EPOCHS: usize = 3;
const SEED: u64 = 7;
/// How long one `mpirun` may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(180);

/// A moons MLP (2 → 16 → 1) in `precision` on `batch` rows of every batch of `xs`/`ys`, its
/// step as separate backprop and update routines.
struct Model {
    ctx: Context,
    params: Vec<Tensor>,
    loss: Tensor,
    batch: StaticIndex,
    backprop: Routine,
    update: Routine,
}

fn model(
    xs: Vec<f64>,
    ys: Vec<f64>,
    batch: usize,
    precision: Precision,
) -> Result<Model, TensorError> {
    let graph = Graph::new();
    let x = graph
        .data("xs")
        .shape(&format!("{BATCHES},{batch}|->2"))
        .precision(precision)
        .values(xs)
        .build();
    let y = graph
        .data("ys")
        .shape(&format!("{BATCHES},{batch}|->1"))
        .precision(precision)
        .values(ys)
        .build();
    let index = graph.static_index();
    let param = |label: &str, width: Option<usize>| {
        let leaf = graph.param(label).precision(precision);
        match width {
            Some(width) => leaf.output([width]).build(),
            None => leaf.build(),
        }
    };
    let (w1, b1, w2, b2) = (
        param("w1", Some(16)),
        param("b1", None),
        param("w2", Some(1)),
        param("b2", None),
    );
    let hidden = (&(&w1 * &x.slice(&index)) + &b1).relu();
    let scores = &(&w2 * &hidden) + &b2;
    let loss = hinge(&scores, &y.slice(&index));
    let params = vec![w1, b1, w2, b2];
    let mut sgd = Sgd::new(&graph, &params, 0.1, 0.9);
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let backprop = ctx.backprop(&loss)?;
    let update = sgd.compile(&mut ctx)?;
    Ok(Model {
        ctx,
        params,
        loss,
        batch: index,
        backprop,
        update,
    })
}

/// Trains `m` for `epochs` with `ranks`, rank 1 failing at step `fail_at` where given.
fn train(
    ranks: &Ranks,
    m: &mut Model,
    epochs: usize,
    fail_at: Option<usize>,
) -> Result<(), TensorError> {
    let plan = Plan {
        epochs,
        batches: BATCHES,
        batch_size: BATCH,
        progress: false,
    };
    let shuffle = Shuffle { seed: Some(SEED) };
    let rank = ranks.rank();
    fit_data_parallel(
        ranks,
        &mut m.ctx,
        &m.backprop,
        &m.update,
        &m.loss,
        &m.params,
        m.batch,
        plan,
        shuffle,
        |_, step| match fail_at {
            Some(at) if rank == 1 && step == at => {
                Err(TensorError::new("a fault injected by the test".to_owned()))
            }
            _ => Ok(()),
        },
    )?;
    Ok(())
}

/// The same training in this process alone, on whole batches, in a loop of its own: backprop
/// and update on each batch in the shuffled order.
fn train_alone(m: &mut Model, epochs: usize) -> Result<(), TensorError> {
    for epoch in 0..epochs {
        for b in epoch_order(SEED, epoch, BATCHES) {
            m.ctx.run_with(&m.backprop, &[(m.batch, b as i64)])?;
            m.ctx.run(&m.update)?;
        }
    }
    Ok(())
}

fn params_of(m: &Model) -> Result<Vec<Vec<f64>>, TensorError> {
    m.params.iter().map(|p| m.ctx.values(p)).collect()
}

/// The data-parallel model (this rank's shards) and the one-process reference (whole batches),
/// both from rank 0's initial parameters.
fn both(ranks: &Ranks, precision: Precision) -> Result<(Model, Model), TensorError> {
    let (xs, ys) = moons(BATCHES * BATCH, 0.1, 3);
    let mut shards = model(
        ranks.shard(&xs, BATCHES, BATCH, 2)?,
        ranks.shard(&ys, BATCHES, BATCH, 1)?,
        BATCH / ranks.size(),
        precision,
    )?;
    let params: Vec<&Tensor> = shards.params.iter().collect();
    ranks.broadcast(&mut shards.ctx, &params)?;
    let mut reference = model(xs, ys, BATCH, precision)?;
    for (mine, theirs) in reference.params.clone().iter().zip(params) {
        let values = shards.ctx.values(theirs)?;
        reference.ctx.set_values(mine, &values)?;
    }
    Ok((shards, reference))
}

/// Fails unless every rank holds the same values, bit for bit (rank 0's, broadcast, compared on
/// each rank).
fn same_on_every_rank(ranks: &Ranks, values: &[Vec<f64>]) -> Result<(), String> {
    let flat: Vec<f64> = values.iter().flatten().copied().collect();
    let mut root = flat.clone();
    ranks.broadcast_values(&mut root);
    let same = flat
        .iter()
        .zip(&root)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    let mut differs = [f64::from(u8::from(!same))];
    ranks.sum(&mut differs);
    if differs[0] != 0.0 {
        return Err(format!("{} ranks hold different parameters", differs[0]));
    }
    Ok(())
}

/// Fails unless the parameters agree within f32 summation-order tolerance.
fn close(what: &str, got: &[Vec<f64>], want: &[Vec<f64>]) -> Result<f64, String> {
    let mut worst = 0.0f64;
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        let err = (g - w).abs() / w.abs().max(1.0);
        worst = worst.max(err);
    }
    if worst > 1e-4 {
        return Err(format!("{what}: off by {worst:e} (relative)"));
    }
    Ok(worst)
}

fn rank_case(case: &str, dir: Option<&Path>) -> Result<(), String> {
    let ranks = Ranks::init().map_err(|e| e.message)?;
    let checkpoint_path = dir.map(|d| d.join("moons.safetensors"));
    let outcome = (|| -> Result<String, String> {
        let both = |precision| both(&ranks, precision).map_err(|e| e.message);
        match case {
            "train" => {
                // f64 gradients are merged in f64, f32 ones in f32.
                let mut within = Vec::new();
                for precision in [Precision::F64, Precision::F32] {
                    let (mut shards, mut reference) = both(precision)?;
                    train(&ranks, &mut shards, EPOCHS, None).map_err(|e| e.message)?;
                    train_alone(&mut reference, EPOCHS).map_err(|e| e.message)?;
                    let got = params_of(&shards).map_err(|e| e.message)?;
                    same_on_every_rank(&ranks, &got)?;
                    let worst = close(
                        &format!("{precision:?} data-parallel vs one process"),
                        &got,
                        &params_of(&reference).map_err(|e| e.message)?,
                    )?;
                    within.push(format!("{precision:?} within {worst:.1e}"));
                    if precision == Precision::F32 {
                        let path = checkpoint_path.as_ref().ok_or("train: no directory")?;
                        let params: Vec<&Tensor> = shards.params.iter().collect();
                        ranks
                            .save(path, &mut shards.ctx, &params)
                            .map_err(|e| e.message)?;
                    }
                }
                Ok(format!(
                    "parameters equal on all {} ranks; against one process: {}",
                    ranks.size(),
                    within.join(", ")
                ))
            }
            "resume" => {
                let (mut shards, mut reference) = both(Precision::F32)?;
                let path = checkpoint_path.ok_or("resume: no directory")?;
                let params: Vec<&Tensor> = shards.params.iter().collect();
                ranks
                    .load(&path, &mut shards.ctx, &params)
                    .map_err(|e| e.message)?;
                let loaded = params_of(&shards).map_err(|e| e.message)?;
                same_on_every_rank(&ranks, &loaded)?;
                let own: Vec<&Tensor> = reference.params.iter().collect();
                checkpoint::load(&path, &mut reference.ctx, &own).map_err(|e| e.message)?;
                let file = params_of(&reference).map_err(|e| e.message)?;
                if loaded != file {
                    return Err("the loaded parameters differ from the file's".to_owned());
                }
                train(&ranks, &mut shards, 1, None).map_err(|e| e.message)?;
                train_alone(&mut reference, 1).map_err(|e| e.message)?;
                let got = params_of(&shards).map_err(|e| e.message)?;
                same_on_every_rank(&ranks, &got)?;
                let worst = close(
                    "resumed data-parallel vs one process",
                    &got,
                    &params_of(&reference).map_err(|e| e.message)?,
                )?;
                Ok(format!(
                    "resumed on {} ranks with the saved parameters; an epoch on, against one \
                     process within {worst:.1e}",
                    ranks.size()
                ))
            }
            "fail" => {
                let (mut shards, _) = both(Precision::F32)?;
                train(&ranks, &mut shards, EPOCHS, Some(3)).map_err(|e| e.message)?;
                Err("training went on past the injected fault".to_owned())
            }
            other => Err(format!("no case '{other}'")),
        }
    })();
    match outcome {
        Ok(summary) => {
            if ranks.is_root() {
                println!("{case}: {summary}");
            }
            Ok(())
        }
        Err(e) => Err(format!("rank {}: {case}: {e}", ranks.rank())),
    }
}

/// Runs this program's `args` under `mpirun -np ranks`, killed past [`LIMIT`]: its exit
/// success and its output.
fn mpirun(ranks: usize, args: &[&str]) -> Result<(bool, String), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::env::temp_dir().join(format!("rcannl-mpi-{}-{ranks}.log", std::process::id()));
    let log = std::fs::File::create(&out).map_err(|e| e.to_string())?;
    let mut child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(ranks.to_string())
        .arg(&me)
        .args(args)
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("mpirun: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "mpirun -np {ranks} {} hung: killed after {} s",
                args.join(" "),
                LIMIT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    Ok((status.success(), text))
}

fn orchestrate() -> Result<(), String> {
    let found = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if rcannl_backends::settings::flag(&rcannl_backends::settings::REQUIRE_MPI)
            .map_err(|e| e.message)?
        {
            return Err("RCANNL_REQUIRE_MPI is set, but there is no mpirun".to_owned());
        }
        println!("the MPI suite did not run: no mpirun on the PATH");
        return Ok(());
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("rcannl-mpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let dir_arg = dir.to_string_lossy().into_owned();
    let mut failures = Vec::new();
    for (ranks, case) in [(2, "train"), (3, "resume"), (3, "train"), (2, "resume")] {
        match mpirun(ranks, &[case, &dir_arg]) {
            Ok((true, text)) => print!("{ranks} ranks, {text}"),
            Ok((false, text)) => failures.push(format!("{ranks} ranks, {case} failed:\n{text}")),
            Err(e) => failures.push(e),
        }
    }
    match mpirun(2, &["fail"]) {
        Ok((false, text)) if text.contains("rank 1 of 2: a fault injected by the test") => {
            println!("2 ranks, fail: every rank stopped, with the failing rank's error");
        }
        Ok((success, text)) => failures.push(format!(
            "2 ranks, fail: exited {} without the expected error:\n{text}",
            if success { "successfully" } else { "failing" }
        )),
        Err(e) => failures.push(e),
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some(case @ ("train" | "resume" | "fail")) => rank_case(case, args.get(1).map(Path::new)),
        _ => orchestrate(),
    };
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
