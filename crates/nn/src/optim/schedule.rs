//! Learning-rate schedules, set between steps without recompiling.

use rcannl_tensor::{Context, Tensor, TensorError};

use super::settings::{Range, check};

/// Learning-rate schedules, as the value for step `step` of `total`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// The same rate at every step.
    Constant(f64),
    /// Linear warm-up from 0 over `warmup` steps, then constant.
    Warmup {
        /// The rate after the warm-up.
        peak: f64,
        /// The number of warm-up steps; the rate reaches `peak` at the last of them.
        warmup: usize,
    },
    /// Cosine decay from `peak` to `floor` over the run, after a linear warm-up.
    Cosine {
        /// The rate at the end of the warm-up, where the decay starts.
        peak: f64,
        /// The rate the decay reaches at the end of the run.
        floor: f64,
        /// The number of warm-up steps (0 for none).
        warmup: usize,
    },
}

impl Schedule {
    /// The rate at `step` of a run of `total` steps.
    pub fn at(&self, step: usize, total: usize) -> f64 {
        let warm = |peak: f64, warmup: usize| {
            if step < warmup {
                peak * (step + 1) as f64 / warmup as f64
            } else {
                peak
            }
        };
        match *self {
            Schedule::Constant(lr) => lr,
            Schedule::Warmup { peak, warmup } => warm(peak, warmup),
            Schedule::Cosine {
                peak,
                floor,
                warmup,
            } => {
                if step < warmup {
                    return warm(peak, warmup);
                }
                let span = total.saturating_sub(warmup).max(1) as f64;
                let progress = ((step - warmup) as f64 / span).min(1.0);
                floor + 0.5 * (peak - floor) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
        }
    }

    /// An error unless the schedule's rates are finite numbers, at least 0 (then so is every
    /// rate it gives).
    fn check(&self) -> Result<(), TensorError> {
        let rate = |owner: &str, setting: &str, value: f64| {
            check(owner, setting, value, Range::AtLeastZero)
        };
        match *self {
            Schedule::Constant(lr) => rate("Schedule::Constant", "the learning rate", lr),
            Schedule::Warmup { peak, .. } => rate("Schedule::Warmup", "the peak", peak),
            Schedule::Cosine { peak, floor, .. } => {
                rate("Schedule::Cosine", "the peak", peak)?;
                rate("Schedule::Cosine", "the floor", floor)
            }
        }
    }

    /// Sets the learning-rate tensor for `step` (no recompilation); an error, changing nothing,
    /// when a rate of the schedule is not a finite number or is negative.
    pub fn apply(
        &self,
        ctx: &mut Context,
        lr: &Tensor,
        step: usize,
        total: usize,
    ) -> Result<(), TensorError> {
        self.check()?;
        ctx.set_values(lr, &[self.at(step, total)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_warm_up_and_decay() {
        let cosine = Schedule::Cosine {
            peak: 1.0,
            floor: 0.1,
            warmup: 10,
        };
        assert_eq!(cosine.at(0, 110), 0.1);
        assert_eq!(cosine.at(9, 110), 1.0);
        assert_eq!(cosine.at(10, 110), 1.0);
        assert!((cosine.at(60, 110) - 0.55).abs() < 1e-12);
        assert!((cosine.at(110, 110) - 0.1).abs() < 1e-12);
        assert_eq!(Schedule::Constant(0.3).at(5, 10), 0.3);
        assert_eq!(
            Schedule::Warmup {
                peak: 2.0,
                warmup: 4
            }
            .at(1, 10),
            1.0
        );
    }
}
