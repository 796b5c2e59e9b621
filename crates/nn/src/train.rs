//! The training loop: epochs over batches picked by a static index, a progress bar with the loss
//! and throughput, a stop with a clear message when the loss or a parameter stops being a
//! number.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rcannl_tensor::{Context, Routine, StaticIndex, Tensor, TensorError};

/// How a run goes: epochs, and the batches of each (their count and size, for throughput).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub epochs: usize,
    pub batches: usize,
    pub batch_size: usize,
    /// Draw a progress bar on standard error.
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
/// epoch and batch as soon as the loss is not a finite number, and at the end of an epoch when a
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
    run(ctx, backprop, Some(step), loss, batch, plan, before_step)
}

/// [`fit`] with a training step compiled as one routine (`Sgd::compile_step`,
/// `Adam::compile_step`): one run per batch, the loss it computed read after it has updated
/// the parameters.
pub fn fit_step(
    ctx: &mut Context,
    step: &Routine,
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    run(ctx, step, None, loss, batch, plan, before_step)
}

/// The loop of [`fit`] and [`fit_step`]: `first` on each batch, the loss read, then `then`.
fn run(
    ctx: &mut Context,
    first: &Routine,
    then: Option<&Routine>,
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    mut before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
) -> Result<History, TensorError> {
    let bar = if plan.progress {
        ProgressBar::new((plan.epochs * plan.batches) as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} epoch {msg}  [{elapsed_precise}]").map_err(|e| {
            TensorError {
                message: format!("progress bar: {e}"),
            }
        })?,
    );
    // A parameter nothing has set yet is read by no routine that runs (one that did would refuse
    // to): training cannot have made it diverge.
    let params: Vec<Tensor> = loss
        .graph()
        .params()
        .into_iter()
        .filter(|param| ctx.holds_values(param))
        .collect();
    let mut losses = Vec::with_capacity(plan.epochs);
    let start = Instant::now();
    let mut steps = 0;
    for epoch in 0..plan.epochs {
        let mut total = 0.0;
        for b in 0..plan.batches {
            before_step(ctx, steps)?;
            ctx.run_with(first, &[(batch, b as i64)])?;
            let value = ctx.values(loss)?.iter().sum::<f64>();
            if !value.is_finite() {
                bar.abandon();
                return Err(TensorError {
                    message: format!(
                        "training stopped: the loss is {value} at epoch {}, batch {b} (a \
                         learning rate too large, or an input out of range?)",
                        epoch + 1
                    ),
                });
            }
            total += value;
            if let Some(step) = then {
                ctx.run(step)?;
            }
            steps += 1;
            bar.inc(1);
        }
        if let Some((label, cell, value)) = first_non_finite(ctx, &params)? {
            bar.abandon();
            return Err(TensorError {
                message: format!(
                    "training stopped: parameter '{label}' holds {value} (cell {cell}) after \
                     epoch {}, batch {} (the epoch's last: parameters are checked once per \
                     epoch), while the loss was finite (a learning rate too large?)",
                    epoch + 1,
                    plan.batches.saturating_sub(1)
                ),
            });
        }
        let mean = total / plan.batches as f64;
        losses.push(mean);
        let rate = (steps * plan.batch_size) as f64 / start.elapsed().as_secs_f64();
        bar.set_message(format!(
            "{}/{}  loss {mean:.4}  {rate:.0} examples/s",
            epoch + 1,
            plan.epochs
        ));
    }
    bar.finish();
    Ok(History {
        losses,
        examples_per_second: (steps * plan.batch_size) as f64 / start.elapsed().as_secs_f64(),
    })
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
