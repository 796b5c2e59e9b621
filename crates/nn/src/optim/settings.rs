//! Settings checked where they take effect: a value that is not a finite number, or out of its
//! range, is an error naming the optimizer or schedule, the setting and the value.

use rcannl_tensor::{Context, Tensor, TensorError};

/// The range a setting must lie in (besides being finite).
#[derive(Debug, Clone, Copy)]
pub(super) enum Range {
    /// `[0, ∞)`: a rate or a decay.
    AtLeastZero,
    /// `(0, ∞)`: a term added to a divisor.
    AboveZero,
    /// `[0, 1)`: a factor that must forget (at 1, a bias correction divides by zero).
    Fraction,
    /// `[0, 1]`: a share, from none to all.
    Share,
}

impl Range {
    fn contains(self, value: f64) -> bool {
        match self {
            Range::AtLeastZero => value >= 0.0,
            Range::AboveZero => value > 0.0,
            Range::Fraction => (0.0..1.0).contains(&value),
            Range::Share => (0.0..=1.0).contains(&value),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Range::AtLeastZero => "a finite number, at least 0",
            Range::AboveZero => "a finite number above 0",
            Range::Fraction => "a finite number in [0, 1)",
            Range::Share => "a finite number in [0, 1]",
        }
    }
}

/// `value` as a message shows it: as Rust prints it, but in scientific notation where that
/// would take more than a few digits (`1e200`, not 201 of them).
pub(super) fn shown(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-5..1e16).contains(&magnitude) && value.is_finite() {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// An error naming `owner`, `setting` and `value` unless `value` is finite and in `range`.
pub(super) fn check(
    owner: &str,
    setting: &str,
    value: f64,
    range: Range,
) -> Result<(), TensorError> {
    if value.is_finite() && range.contains(value) {
        return Ok(());
    }
    Err(TensorError::new(format!(
        "{owner}: {setting} is {}: it must be {}",
        shown(value),
        range.describe()
    )))
}

/// Checks the learning rate `lr` holds in `ctx`, for `owner` of `params`: a finite number, at
/// least 0, that stays finite in the precision each parameter is updated in. A value that is
/// the rate `given` to the optimizer's `new`, as `lr`'s precision holds it, is checked as given:
/// an f32 tensor holds 1e200 as infinity, and the error must say 1e200.
pub(super) fn check_learning_rate(
    ctx: &mut Context,
    owner: &str,
    (lr, given): (&Tensor, f64),
    params: &[Tensor],
) -> Result<(), TensorError> {
    // The rate's buffer exists, with its initial value, once the context has made it.
    ctx.dims(lr)?;
    let held_as_given = lr.precision().round(given);
    for held in ctx.values(lr)? {
        let value = if held.to_bits() == held_as_given.to_bits() {
            given
        } else {
            held
        };
        check(owner, "the learning rate", value, Range::AtLeastZero)?;
        for param in params {
            let compute = param.precision().compute();
            if compute.round(value).is_infinite() {
                return Err(TensorError::new(format!(
                    "{owner}: the learning rate is {}: it is beyond the range of {compute}, \
                         the precision parameter '{}' is updated in",
                    shown(value),
                    param.label()
                )));
            }
        }
    }
    Ok(())
}
