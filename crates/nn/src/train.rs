//! The training loop: epochs over batches picked by a static index, a progress bar with the loss
//! and throughput, a stop with a clear message when the loss stops being a number.

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
/// epoch and batch as soon as the loss is not a finite number.
pub fn fit(
    ctx: &mut Context,
    backprop: &Routine,
    step: &Routine,
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
    let mut losses = Vec::with_capacity(plan.epochs);
    let start = Instant::now();
    let mut steps = 0;
    for epoch in 0..plan.epochs {
        let mut total = 0.0;
        for b in 0..plan.batches {
            before_step(ctx, steps)?;
            ctx.run_with(backprop, &[(batch, b as i64)])?;
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
            ctx.run(step)?;
            steps += 1;
            bar.inc(1);
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
