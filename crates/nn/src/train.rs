//! The training loop: epochs over batches picked by a static index, a progress bar with the loss
//! and throughput (one line per epoch when standard error is not a terminal), a stop with a
//! clear message when the loss or a parameter stops being a number.
//!
//! Two settings (`rcannl_backends::settings`) shorten and record a run without changing the
//! program, to try a training program on another backend, or to compare its first steps on two:
//! `max_steps` (`RCANNL_MAX_STEPS=N`) stops every training loop after its first `N` steps (the
//! epoch cut short counts as the last), and `loss_log` (`RCANNL_LOSS_LOG=FILE`) appends each
//! step's loss to `FILE`, a line each.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rcannl_backends::settings;
use rcannl_tensor::{Context, Routine, StaticIndex, Tensor, TensorError};

use crate::data::Rng;

/// How a run goes: epochs, and the batches of each (their count and size, for throughput).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The number of passes over the batches.
    pub epochs: usize,
    /// The number of batches per epoch: the batch index takes the values `0..batches`.
    pub batches: usize,
    /// The number of examples per batch (for the throughput only).
    pub batch_size: usize,
    /// Show progress on standard error: a bar on a terminal, else one line per epoch.
    pub progress: bool,
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// The mean batch loss of each epoch.
    pub losses: Vec<f64>,
    /// Training examples per second over the whole run (compilation excluded).
    pub examples_per_second: f64,
}

/// Runs `backprop` then `step` on every batch of every epoch (batch `b` chosen by `batch`), after
/// `before_step(ctx, step_number)` (a learning-rate schedule, say). Stops with an error naming the
/// epoch and batch as soon as the loss is not a finite number (before `step`, so that the
/// parameters are those the last good step left; a plan of no batches is an error too), and at the end of an epoch when a
/// parameter of the loss's graph holds a value that is not (the loss can stay finite through
/// choices and comparisons that drop what diverged); the parameters are read once per epoch
/// since reading them costs about as much as a step.
pub fn fit(
    ctx: &mut Context,
    backprop: &Routine,
    step: &Routine,
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    let mut workers = [Worker {
        ctx,
        first: backprop,
        then: Some(step),
    }];
    run(&mut workers, loss, batch, plan, before_step, &mut Alone)
}

/// [`fit`] with a training step compiled as one routine (`Sgd::compile_step`,
/// `Adam::compile_step`): one run per batch, the loss it computed read after it has updated
/// the parameters. A step whose loss is not finite updates nothing
/// ([`Context::train_step`](rcannl_tensor::Context::train_step)), so training stopped on it
/// leaves the parameters and the optimizer's state as the last good step left them.
pub fn fit_step(
    ctx: &mut Context,
    step: &Routine,
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    let mut workers = [Worker {
        ctx,
        first: step,
        then: None,
    }];
    run(&mut workers, loss, batch, plan, before_step, &mut Alone)
}

/// A context the loop of [`fit`] trains (one of several in a data-parallel run, each on its
/// shard of every batch), with the routines it runs there on each batch: `first` (a backprop, or
/// a whole training step), then `then` (the update), if any.
pub(crate) struct Worker<'a> {
    pub(crate) ctx: &'a mut Context,
    pub(crate) first: &'a Routine,
    pub(crate) then: Option<&'a Routine>,
}

/// How the loop of [`fit`] joins the other workers training the same model, in this process
/// and in others: not at all ([`Alone`]), or by merging every step's gradients (data-parallel
/// training).
pub(crate) trait Peers {
    /// After the backprop of a batch on every worker of this process, given each one's loss:
    /// merges whatever the step needs from the others, and returns the loss of the whole batch.
    fn merge(&mut self, workers: &mut [Worker<'_>], losses: &[f64]) -> Result<f64, TensorError>;
    /// The order of epoch `epoch`'s batches.
    fn order(&self, epoch: usize, batches: usize) -> Vec<usize>;
    /// Whether this process draws the progress bar.
    fn shows_progress(&self) -> bool;
    /// A failure of this process alone (not of the run as a whole, which every process sees
    /// alike): what to return, where the others would otherwise wait for this one forever.
    fn alone_failed(&self, error: TensorError) -> TensorError;
}

/// One process, training by itself.
struct Alone;

impl Peers for Alone {
    fn merge(&mut self, _: &mut [Worker<'_>], losses: &[f64]) -> Result<f64, TensorError> {
        Ok(losses.iter().sum())
    }

    fn order(&self, _: usize, batches: usize) -> Vec<usize> {
        (0..batches).collect()
    }

    fn shows_progress(&self) -> bool {
        true
    }

    fn alone_failed(&self, error: TensorError) -> TensorError {
        error
    }
}

/// The loop of [`fit`] and [`fit_step`] over `workers`: on each batch, each worker's `first`,
/// the losses read and merged with the peers', then each worker's `then`. Workers run at once,
/// a thread each.
pub(crate) fn run(
    workers: &mut [Worker<'_>],
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
    peers: &mut impl Peers,
) -> Result<History, TensorError> {
    let settings = Settings::from_env()?;
    run_with(workers, loss, batch, plan, before_step, peers, &settings)
}

/// [`run`] under `settings`.
fn run_with(
    workers: &mut [Worker<'_>],
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    mut before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
    peers: &mut impl Peers,
    settings: &Settings,
) -> Result<History, TensorError> {
    if plan.batches == 0 {
        return Err(TensorError::new(
            "training: the plan has no batches (batches is 0): there is nothing to \
                      train on"
                .to_owned(),
        ));
    }
    let progress = Progress::new(
        plan,
        plan.progress && peers.shows_progress(),
        std::io::stderr().is_terminal(),
    )?;
    // A parameter nothing has set yet is read by no routine that runs (one that did would refuse
    // to): training cannot have made it diverge.
    let params: Vec<Vec<Tensor>> = workers
        .iter()
        .map(|worker| {
            loss.graph()
                .params()
                .into_iter()
                .filter(|param| worker.ctx.holds_values(param))
                .collect()
        })
        .collect();
    let mut log = settings.loss_log.as_ref().map(open_log).transpose()?;
    let mut losses = Vec::with_capacity(plan.epochs);
    let start = Instant::now();
    let mut steps = 0;
    for epoch in 0..plan.epochs {
        if settings.max_steps.is_some_and(|most| steps >= most) {
            break;
        }
        let mut total = 0.0;
        let mut batches = 0;
        for b in peers.order(epoch, plan.batches) {
            if settings.max_steps.is_some_and(|most| steps >= most) {
                break;
            }
            let local = workers
                .iter_mut()
                .try_for_each(|worker| before_step(worker.ctx, steps))
                .and_then(|()| {
                    on_each(workers, |worker| {
                        worker.ctx.run_with(worker.first, &[(batch, b as i64)])?;
                        Ok(worker.ctx.values(loss)?.iter().sum::<f64>())
                    })
                });
            let local = local.map_err(|e| peers.alone_failed(e))?;
            let value = peers.merge(workers, &local)?;
            if !value.is_finite() {
                progress.abandon();
                return Err(TensorError::new(format!(
                    "training stopped: the loss is {value} at epoch {}, batch {b} (a \
                         learning rate too large, or an input out of range?); that step updated \
                         nothing: the model is as the last good step left it",
                    epoch + 1
                )));
            }
            total += value;
            batches += 1;
            if let Some((path, file)) = &mut log {
                writeln!(file, "{value:e}").map_err(|e| log_error(path, &e))?;
            }
            on_each(workers, |worker| match worker.then {
                Some(step) => worker.ctx.run(step),
                None => Ok(()),
            })
            .map_err(|e| peers.alone_failed(e))?;
            steps += 1;
            progress.step();
        }
        for (worker, params) in workers.iter().zip(&params) {
            let diverged =
                first_non_finite(&*worker.ctx, params).map_err(|e| peers.alone_failed(e))?;
            if let Some((label, cell, value)) = diverged {
                progress.abandon();
                return Err(TensorError::new(format!(
                    "training stopped: parameter '{label}' holds {value} (cell {cell}) after \
                     epoch {}, batch {} (the epoch's last: parameters are checked once per \
                     epoch), while the loss was finite (a learning rate too large?)",
                    epoch + 1,
                    plan.batches.saturating_sub(1)
                )));
            }
        }
        let mean = total / batches as f64;
        losses.push(mean);
        let rate = (steps * plan.batch_size) as f64 / start.elapsed().as_secs_f64();
        progress.epoch(&epoch_summary(epoch, plan.epochs, mean, rate));
    }
    progress.finish();
    Ok(History {
        losses,
        examples_per_second: (steps * plan.batch_size) as f64 / start.elapsed().as_secs_f64(),
    })
}

/// `task` on every worker at once: the first on this thread, each other on a thread of its own
/// (one alone runs here, starting no thread). The results in the workers' order, or the first
/// worker's error.
fn on_each<T: Send>(
    workers: &mut [Worker<'_>],
    task: impl Fn(&mut Worker<'_>) -> Result<T, TensorError> + Sync,
) -> Result<Vec<T>, TensorError> {
    let Some((first, others)) = workers.split_first_mut() else {
        return Ok(Vec::new());
    };
    if others.is_empty() {
        return Ok(vec![task(first)?]);
    }
    let task = &task;
    std::thread::scope(|scope| {
        let running: Vec<_> = others
            .iter_mut()
            .map(|worker| scope.spawn(move || task(worker)))
            .collect();
        let mut results = vec![task(first)];
        for thread in running {
            // A panic in a worker's thread goes on in this one, as it would have without threads.
            results.push(
                thread
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        results.into_iter().collect()
    })
}

/// The gradients of parameters summed over the workers of this process, in one flat buffer.
#[derive(Debug, Default)]
pub(crate) struct Gradients {
    /// The parameters' gradients, one after another.
    pub(crate) flat: Vec<f64>,
    /// Each parameter's number of cells.
    lens: Vec<usize>,
}

impl Gradients {
    /// The gradients of `params`, summed over `workers` (in their order, so that every run sums
    /// alike).
    pub(crate) fn sum(
        &mut self,
        workers: &[Worker<'_>],
        params: &[Tensor],
    ) -> Result<(), TensorError> {
        self.flat.clear();
        self.lens.clear();
        for param in params {
            let at = self.flat.len();
            for (i, worker) in workers.iter().enumerate() {
                let grad = worker.ctx.grad(param)?;
                if i == 0 {
                    self.lens.push(grad.len());
                    self.flat.extend(grad);
                } else {
                    for (sum, g) in self.flat[at..].iter_mut().zip(grad) {
                        *sum += g;
                    }
                }
            }
        }
        Ok(())
    }

    /// Divides the gradients held here by `parts` (the mean over the whole batch's shards,
    /// from their sum) and sets those of `params` on every worker to them.
    pub(crate) fn set_mean(
        &mut self,
        workers: &mut [Worker<'_>],
        params: &[Tensor],
        parts: usize,
    ) -> Result<(), TensorError> {
        for g in &mut self.flat {
            *g /= parts as f64;
        }
        for worker in workers {
            let mut at = 0;
            for (param, len) in params.iter().zip(&self.lens) {
                worker.ctx.set_grad(param, &self.flat[at..at + len])?;
                at += len;
            }
        }
        Ok(())
    }
}

/// How a data-parallel run goes beyond a [`Plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shuffle {
    /// The seed of each epoch's order of batches (the same on every worker); `None`: in order.
    pub seed: Option<u64>,
}

impl Shuffle {
    /// The order of epoch `epoch`'s batches.
    pub(crate) fn order(self, epoch: usize, batches: usize) -> Vec<usize> {
        match self.seed {
            Some(seed) => epoch_order(seed, epoch, batches),
            None => (0..batches).collect(),
        }
    }
}

/// Shard `part` of `parts` of a data set of `batches` batches of `batch_size` rows, each row
/// `row_len` values, row-major: the same slice of every batch (rows `part·s .. (part+1)·s` with
/// `s = batch_size / parts`), laid out as `batches` batches of `s` rows. An error when the
/// batches do not divide evenly into `parts` (the averaged gradient would then weigh some rows
/// more) or `rows` is not that many values; `among` names the parts in it (`ranks`, say).
pub(crate) fn shard(
    rows: &[f64],
    [batches, batch_size, row_len]: [usize; 3],
    (part, parts): (usize, usize),
    among: &str,
) -> Result<Vec<f64>, TensorError> {
    if parts == 0 || !batch_size.is_multiple_of(parts) {
        return Err(TensorError::new(format!(
            "shard: batches of {batch_size} rows do not split evenly among {parts} {among}"
        )));
    }
    if rows.len() != batches * batch_size * row_len {
        return Err(TensorError::new(format!(
            "shard: {} values are not {batches} batches of {batch_size} rows of {row_len}",
            rows.len()
        )));
    }
    let share = batch_size / parts;
    let from = part * share * row_len;
    Ok(rows
        .chunks(batch_size * row_len)
        .flat_map(|batch| &batch[from..from + share * row_len])
        .copied()
        .collect())
}

/// The environment variable stopping every training loop after its first N steps.
pub const MAX_STEPS_VARIABLE: &str = "RCANNL_MAX_STEPS";

/// The environment variable naming a file every step's loss is appended to.
pub const LOSS_LOG_VARIABLE: &str = "RCANNL_LOSS_LOG";

/// What the environment asks of every training loop (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Settings {
    max_steps: Option<usize>,
    loss_log: Option<std::path::PathBuf>,
}

impl Settings {
    fn from_env() -> Result<Settings, TensorError> {
        let value = |key| {
            let setting =
                settings::get(key).map_err(|e| TensorError::new(format!("training: {e}")));
            setting.map(|setting| setting.map(|setting| setting.value))
        };
        let max_steps = value(&settings::MAX_STEPS)?;
        Settings::read(max_steps.as_deref(), value(&settings::LOSS_LOG)?.as_deref())
    }

    /// The settings the variables' values say.
    fn read(
        max_steps: Option<&std::ffi::OsStr>,
        loss_log: Option<&std::ffi::OsStr>,
    ) -> Result<Settings, TensorError> {
        let max_steps = max_steps
            .map(|text| {
                text.to_str()
                    .and_then(|t| t.trim().parse::<usize>().ok())
                    .ok_or_else(|| {
                        TensorError::new(format!(
                            "training: {MAX_STEPS_VARIABLE}={} is not a number of steps",
                            text.to_string_lossy()
                        ))
                    })
            })
            .transpose()?;
        Ok(Settings {
            max_steps,
            loss_log: loss_log.map(std::path::PathBuf::from),
        })
    }
}

fn log_error(path: &std::path::Path, e: &std::io::Error) -> TensorError {
    TensorError::new(format!(
        "training: writing the loss to {} (${LOSS_LOG_VARIABLE}): {e}",
        path.display()
    ))
}

/// The loss log at `path`, opened to append.
fn open_log(path: &std::path::PathBuf) -> Result<(std::path::PathBuf, std::fs::File), TensorError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|file| (path.clone(), file))
        .map_err(|e| log_error(path, &e))
}

/// How progress shows: a bar redrawn on a terminal, one line per epoch elsewhere (a pipe or a
/// log file, where a bar would show nothing), or nothing.
enum Progress {
    Bar(ProgressBar),
    Lines,
    Hidden,
}

impl Progress {
    fn new(plan: Plan, shown: bool, terminal: bool) -> Result<Progress, TensorError> {
        Ok(match (shown, terminal) {
            (false, _) => Progress::Hidden,
            (true, false) => Progress::Lines,
            (true, true) => {
                let bar = ProgressBar::new((plan.epochs * plan.batches) as u64);
                let style =
                    ProgressStyle::with_template("{bar:30} epoch {msg}  [{elapsed_precise}]")
                        .map_err(|e| TensorError::new(format!("progress bar: {e}")))?;
                bar.set_style(style);
                Progress::Bar(bar)
            }
        })
    }

    fn step(&self) {
        if let Progress::Bar(bar) = self {
            bar.inc(1);
        }
    }

    fn epoch(&self, summary: &str) {
        match self {
            Progress::Bar(bar) => bar.set_message(summary.to_owned()),
            Progress::Lines => eprintln!("epoch {summary}"),
            Progress::Hidden => {}
        }
    }

    fn abandon(&self) {
        if let Progress::Bar(bar) = self {
            bar.abandon();
        }
    }

    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish();
        }
    }
}

/// `3/50  loss 0.1234  51200 examples/s`: an epoch's number, its mean loss and the throughput so
/// far.
fn epoch_summary(epoch: usize, epochs: usize, mean: f64, rate: f64) -> String {
    format!(
        "{}/{epochs}  loss {mean:.4}  {rate:.0} examples/s",
        epoch + 1
    )
}

/// The order of epoch `epoch`'s batches, drawn from `seed` (a Fisher–Yates shuffle): the same
/// for every process given the same seed.
pub fn epoch_order(seed: u64, epoch: usize, batches: usize) -> Vec<usize> {
    let mut rng = Rng::new(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut order: Vec<usize> = (0..batches).collect();
    for i in (1..batches).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The first of `params` holding a value that is not a finite number: its label, the cell and
/// the value.
fn first_non_finite(
    ctx: &Context,
    params: &[Tensor],
) -> Result<Option<(String, usize, f64)>, TensorError> {
    for param in params {
        let values = ctx.values(param)?;
        if let Some((cell, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Ok(Some((param.label(), cell, *value)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use rcannl_backends::Interpreter;
    use rcannl_tensor::Graph;

    use super::*;
    use crate::optim::Sgd;

    #[test]
    fn the_settings_read_a_number_of_steps_and_a_file() {
        let read = |steps: Option<&str>, log: Option<&str>| {
            Settings::read(
                steps.map(std::ffi::OsStr::new),
                log.map(std::ffi::OsStr::new),
            )
        };
        assert_eq!(read(None, None).unwrap(), Settings::default());
        let set = read(Some(" 12 "), Some("losses.txt")).unwrap();
        assert_eq!(set.max_steps, Some(12));
        assert_eq!(set.loss_log, Some("losses.txt".into()));
        let error = read(Some("twelve"), None).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("RCANNL_MAX_STEPS=twelve is not a number of steps"),
            "{error}"
        );
    }

    #[test]
    fn a_run_stops_after_its_steps_and_logs_each_loss() {
        let graph = Graph::new();
        let xs = graph
            .data("xs")
            .shape("4,2|->1")
            .values((1..=8).map(f64::from).collect())
            .build();
        let batch = graph.static_index();
        let w = graph.param("w").shape("1->1").values(vec![0.5]).build();
        let loss = w.compose(&xs.slice(&batch)).einsum1("...|...->... => ");
        let mut sgd = Sgd::new(&graph, std::slice::from_ref(&w), 0.01, 0.0);
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        let step = sgd.compile(&mut ctx).unwrap();
        let log = std::env::temp_dir().join(format!("rcannl-loss-log-{}", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let settings = Settings {
            max_steps: Some(6),
            loss_log: Some(log.clone()),
        };
        let plan = Plan {
            epochs: 3,
            batches: 4,
            batch_size: 2,
            progress: false,
        };
        let mut steps_seen = Vec::new();
        let mut workers = [Worker {
            ctx: &mut ctx,
            first: &backprop,
            then: Some(&step),
        }];
        let history = run_with(
            &mut workers,
            &loss,
            batch,
            plan,
            |_, n| {
                steps_seen.push(n);
                Ok(())
            },
            &mut Alone,
            &settings,
        )
        .unwrap();
        assert_eq!(steps_seen, (0..6).collect::<Vec<_>>());
        // The first epoch whole, the second cut after two batches: its mean is theirs.
        assert_eq!(history.losses.len(), 2);
        let logged: Vec<f64> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(logged.len(), 6);
        assert_eq!(history.losses[0], logged[..4].iter().sum::<f64>() / 4.0);
        assert_eq!(history.losses[1], (logged[4] + logged[5]) / 2.0);
        std::fs::remove_file(&log).unwrap();
    }

    #[test]
    fn epoch_orders_are_permutations_that_change_with_the_epoch_and_repeat_with_the_seed() {
        let first = epoch_order(5, 0, 32);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..32).collect::<Vec<_>>());
        assert_eq!(first, epoch_order(5, 0, 32));
        assert_ne!(first, epoch_order(5, 1, 32));
        assert_ne!(first, epoch_order(6, 0, 32));
        assert_eq!(epoch_order(5, 3, 0), Vec::<usize>::new());
    }

    #[test]
    fn progress_is_a_bar_on_a_terminal_and_lines_elsewhere() {
        let plan = Plan {
            epochs: 2,
            batches: 3,
            batch_size: 4,
            progress: true,
        };
        let kind = |shown, terminal| match Progress::new(plan, shown, terminal).unwrap() {
            Progress::Bar(_) => "bar",
            Progress::Lines => "lines",
            Progress::Hidden => "hidden",
        };
        assert_eq!(kind(true, true), "bar");
        assert_eq!(kind(true, false), "lines");
        assert_eq!(kind(false, true), "hidden");
        assert_eq!(kind(false, false), "hidden");
        assert_eq!(
            epoch_summary(2, 50, 0.123456, 51234.4),
            "3/50  loss 0.1235  51234 examples/s"
        );
    }
}
