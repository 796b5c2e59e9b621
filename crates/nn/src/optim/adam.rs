//! Adam and AdamW.

use rcannl_tensor::{Context, Graph, Routine, Tensor, TensorError, Update, cd};

use super::clip::{Clip, clip_updates, gradient};
use super::moments::{Moments, Steps, check_moment_settings};
use super::settings::check_learning_rate;
use super::state::{learning_rate, state_like};

/// Adam (and AdamW with decoupled weight decay): moments `m ← β₁m + (1−β₁)g`,
/// `v ← β₂v + (1−β₂)g²`, then `w ← w − lr·m̂/(√v̂ + ε) − lr·λ·w` with bias-corrected `m̂`, `v̂`.
#[derive(Debug, Clone)]
pub struct Adam {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-8).
    pub epsilon: f64,
    /// The decoupled weight decay `λ`, at least 0 (default 0).
    pub weight_decay: f64,
    steps: Steps,
    params: Vec<Tensor>,
    moments: Vec<(Tensor, Tensor)>,
    clip: Option<Clip>,
}

impl Adam {
    /// Adam of `params` at learning rate `lr`, with the usual betas and epsilon; the settings are
    /// checked by [`Adam::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64) -> Adam {
        Adam {
            lr: learning_rate(graph, lr, params),
            given_lr: lr,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
            steps: Steps::new(graph, "adam", params),
            params: params.to_vec(),
            moments: Vec::new(),
            clip: None,
        }
    }

    /// The optimizer's state (the step count, then both moments of each parameter, made by
    /// [`Adam::compile`]), to save with the parameters.
    pub fn state(&self) -> Vec<Tensor> {
        let mut state = vec![self.steps.state()];
        for (m, v) in &self.moments {
            state.extend([m.clone(), v.clone()]);
        }
        state
    }

    /// AdamW: weight decay decoupled from the gradient.
    pub fn weight_decay(mut self, decay: f64) -> Adam {
        self.weight_decay = decay;
        self
    }

    /// The bias corrections `1 − β₁ᵗ` and `1 − β₂ᵗ` of the last step (one cell each, f64 when
    /// a parameter is, 0 before the first step), which each step computes from the step count.
    pub fn bias_corrections(&self) -> &[Tensor; 2] {
        &self.steps.corrections
    }

    fn updates(&self, moments: &[(Tensor, Tensor)]) -> Vec<Update> {
        let adam = Moments {
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            corrections: &self.steps.corrections,
        };
        let (lr, decay) = (&self.lr, self.weight_decay);
        let mut updates = self.steps.updates([self.beta1, self.beta2]);
        for (w, (m, second)) in self.params.iter().zip(moments) {
            updates.extend(adam.updates(gradient(self.clip.as_ref(), w), m, second));
            let direction = adam.direction(m, second);
            updates.extend(cd! { w =- lr * (direction + decay * w) });
        }
        updates
    }

    step_routines!(Adam);

    /// The settings checked, the moments made, the updates of one step.
    fn prepare(&mut self, ctx: &mut Context) -> Result<Vec<Update>, TensorError> {
        check_moment_settings(
            "Adam",
            self.beta1,
            self.beta2,
            self.epsilon,
            self.weight_decay,
        )?;
        check_learning_rate(ctx, "Adam", (&self.lr, self.given_lr), &self.params)?;
        let mut updates = clip_updates("Adam", self.clip.as_ref(), &self.params)?;
        self.moments = self
            .params
            .iter()
            .map(|p| {
                Ok((
                    state_like(ctx, p, "first moment")?,
                    state_like(ctx, p, "second moment")?,
                ))
            })
            .collect::<Result<Vec<_>, TensorError>>()?;
        updates.extend(self.updates(&self.moments));
        Ok(updates)
    }
}
