//! What Adam and LAMB share: the moments' settings, the step count with its bias corrections,
//! and the moment updates with their bias-corrected direction.

use rcannl_ir::Unop;
use rcannl_tensor::{Formula, Graph, Tensor, TensorError, Update, cd};

use super::settings::{Range, check};
use super::state::{scalar, shared_precision};

/// The moments of Adam and LAMB: their decays, epsilon and weight decay checked for `owner`.
pub(super) fn check_moment_settings(
    owner: &str,
    beta1: f64,
    beta2: f64,
    epsilon: f64,
    weight_decay: f64,
) -> Result<(), TensorError> {
    check(owner, "beta1", beta1, Range::Fraction)?;
    check(owner, "beta2", beta2, Range::Fraction)?;
    check(owner, "epsilon", epsilon, Range::AboveZero)?;
    check(owner, "the weight decay", weight_decay, Range::AtLeastZero)
}

/// The step count and the bias corrections of Adam and LAMB: the count (one cell, from 0) and
/// `1 − β₁ᵗ`, `1 − β₂ᵗ` of the last step (one cell each), in the parameters' shared precision.
#[derive(Debug, Clone)]
pub(super) struct Steps {
    pub(super) count: Tensor,
    pub(super) corrections: [Tensor; 2],
}

impl Steps {
    /// The step count and bias corrections of `owner` (`adam`, `lamb`) over `params`.
    pub(super) fn new(graph: &Graph, owner: &str, params: &[Tensor]) -> Steps {
        let precision = shared_precision(params);
        let correction = |i: usize| {
            scalar(
                graph,
                &format!("{owner} bias correction {i}"),
                precision,
                0.0,
            )
        };
        Steps {
            count: scalar(graph, &format!("{owner} steps"), precision, 0.0),
            corrections: [correction(1), correction(2)],
        }
    }

    /// The updates starting a step: the count goes up by one, and each bias correction becomes
    /// `1 − βᵗ` of the new count `t`.
    ///
    /// The correction is computed as `−expm1(t·ln β)`, written `2u/(u − 1)` with
    /// `u = tanh(t·ln β / 2)` (no `expm1` among the operations): `1 − βᵗ` directly cancels most
    /// of its digits where `βᵗ` is near 1 (at β = 0.999, t = 10: a relative error of 3·10⁻¹⁵
    /// in f64, 10⁻⁵ in f32), this loses none (a few units in the last place of either).
    /// `ln β` comes from `1 − β`, exact in f64 for every β in [0.5, 1), through `ln_1p` (and
    /// β = 0 gives `ln β = −∞`, `u = −1`, a correction of 1, as it should).
    pub(super) fn updates(&self, [beta1, beta2]: [f64; 2]) -> Vec<Update> {
        let count = &self.count;
        let mut updates = cd! { count =: count + 1 };
        for (beta, correction) in [beta1, beta2].into_iter().zip(&self.corrections) {
            let half_log = (-(1.0 - beta)).ln_1p() / 2.0;
            let u = (Formula::value(count) * half_log).apply(Unop::Tanh);
            updates.extend(cd! { correction =: 2.0 * u / (u - 1.0) });
        }
        updates
    }

    /// The tensor to save with the parameters: the count (the corrections follow from it).
    pub(super) fn state(&self) -> Tensor {
        self.count.clone()
    }
}

/// Adam's moment updates of `m` and `v` from the gradient `g`, and its bias-corrected direction
/// `m̂/(√v̂ + ε)`, with the bias corrections of the step.
pub(super) struct Moments<'a> {
    pub(super) beta1: f64,
    pub(super) beta2: f64,
    pub(super) epsilon: f64,
    pub(super) corrections: &'a [Tensor; 2],
}

impl Moments<'_> {
    pub(super) fn updates(&self, grad: Formula, m: &Tensor, second: &Tensor) -> Vec<Update> {
        let (beta1, beta2) = (self.beta1, self.beta2);
        let (rest1, rest2) = (1.0 - beta1, 1.0 - beta2);
        cd! {
            m =: beta1 * m + rest1 * grad;
            second =: beta2 * second + rest2 * (grad * grad);
        }
    }

    pub(super) fn direction(&self, m: &Tensor, v: &Tensor) -> Formula {
        let [first, second] = self.corrections.each_ref().map(Formula::value);
        let m_hat = Formula::value(m) / first;
        let v_hat = Formula::value(v) / second;
        m_hat / (v_hat.apply(Unop::Sqrt) + self.epsilon)
    }
}
