//! The training loop: epochs over batches picked by a static index, a progress bar with the loss
//! and throughput, a stop with a clear message when the loss or a parameter stops being a
//! number.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use rcannl_tensor::{Context, Routine, StaticIndex, Tensor, TensorError};

use crate::data::Rng;

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
    run(
        ctx,
        backprop,
        Some(step),
        loss,
        batch,
        plan,
        before_step,
        &mut Alone,
    )
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
    run(ctx, step, None, loss, batch, plan, before_step, &mut Alone)
}

/// How the loop of [`fit`] joins other processes training the same model: not at all
/// ([`Alone`]), or by merging every step's gradients (data-parallel training).
pub(crate) trait Peers {
    /// After the backprop of a batch, given this process's loss: merges whatever the step
    /// needs from the others, and returns the loss of the whole batch.
    fn merge(&mut self, ctx: &mut Context, loss: f64) -> Result<f64, TensorError>;
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
    fn merge(&mut self, _: &mut Context, loss: f64) -> Result<f64, TensorError> {
        Ok(loss)
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

/// The loop of [`fit`] and [`fit_step`]: `first` on each batch, the loss read and merged with
/// the peers', then `then`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    ctx: &mut Context,
    first: &Routine,
    then: Option<&Routine>,
    loss: &Tensor,
    batch: StaticIndex,
    plan: Plan,
    mut before_step: impl FnMut(&mut Context, usize) -> Result<(), TensorError>,
    peers: &mut impl Peers,
) -> Result<History, TensorError> {
    let bar = if plan.progress && peers.shows_progress() {
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
        for b in peers.order(epoch, plan.batches) {
            let local = before_step(ctx, steps)
                .and_then(|()| ctx.run_with(first, &[(batch, b as i64)]))
                .and_then(|()| ctx.values(loss));
            let local = local.map_err(|e| peers.alone_failed(e))?;
            let value = peers.merge(ctx, local.iter().sum::<f64>())?;
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
                ctx.run(step).map_err(|e| peers.alone_failed(e))?;
            }
            steps += 1;
            bar.inc(1);
        }
        let diverged = first_non_finite(ctx, &params).map_err(|e| peers.alone_failed(e))?;
        if let Some((label, cell, value)) = diverged {
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
    use super::*;

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
}
