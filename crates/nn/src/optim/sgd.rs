//! Stochastic gradient descent.

use rcannl_tensor::{Context, Graph, Routine, Tensor, TensorError, Update, cd};

use super::clip::{Clip, clip_updates, gradient};
use super::settings::{Range, check, check_learning_rate};
use super::state::{learning_rate, state_like};

/// Stochastic gradient descent with momentum, Nesterov momentum and weight decay:
/// `v ← μ·v + g + λ·w`, then `w ← w − lr·v` (or `w − lr·(g + λ·w + μ·v)` with Nesterov).
#[derive(Debug, Clone)]
pub struct Sgd {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The momentum `μ`, in `[0, 1)`.
    pub momentum: f64,
    /// Nesterov momentum: the step looks ahead along the velocity.
    pub nesterov: bool,
    /// The weight decay `λ`, at least 0, added to the gradient as `λ·w`.
    pub weight_decay: f64,
    params: Vec<Tensor>,
    velocities: Vec<Tensor>,
    clip: Option<Clip>,
}

impl Sgd {
    /// SGD of `params` at learning rate `lr` with momentum `momentum` (0 for none); the settings
    /// are checked by [`Sgd::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64, momentum: f64) -> Sgd {
        Sgd {
            lr: learning_rate(graph, lr, params),
            given_lr: lr,
            momentum,
            nesterov: false,
            weight_decay: 0.0,
            params: params.to_vec(),
            velocities: Vec::new(),
            clip: None,
        }
    }

    /// The optimizer's state (a velocity per parameter, made by [`Sgd::compile`]; none without
    /// momentum), to save with the parameters.
    pub fn state(&self) -> &[Tensor] {
        &self.velocities
    }

    /// With Nesterov momentum.
    pub fn nesterov(mut self) -> Sgd {
        self.nesterov = true;
        self
    }

    /// With weight decay `decay`.
    pub fn weight_decay(mut self, decay: f64) -> Sgd {
        self.weight_decay = decay;
        self
    }

    /// The updates of one step, with a velocity per parameter (none without momentum, where
    /// the velocity would be the gradient itself).
    fn updates(&self, velocities: &[Tensor]) -> Vec<Update> {
        let (lr, momentum, decay) = (&self.lr, self.momentum, self.weight_decay);
        let clip = self.clip.as_ref();
        let mut updates = Vec::new();
        if velocities.is_empty() {
            for w in &self.params {
                let grad = gradient(clip, w);
                updates.extend(cd! { w =- lr * (grad + decay * w) });
            }
            return updates;
        }
        for (w, velocity) in self.params.iter().zip(velocities) {
            let grad = gradient(clip, w);
            updates.extend(if self.nesterov {
                cd! {
                    velocity =: momentum * velocity + (grad + decay * w);
                    w =- lr * ((grad + decay * w) + momentum * velocity);
                }
            } else {
                cd! {
                    velocity =: momentum * velocity + (grad + decay * w);
                    w =- lr * velocity;
                }
            });
        }
        updates
    }

    step_routines!(Sgd);

    /// The settings checked, the state made, the updates of one step.
    fn prepare(&mut self, ctx: &mut Context) -> Result<Vec<Update>, TensorError> {
        check("Sgd", "the momentum", self.momentum, Range::Fraction)?;
        check(
            "Sgd",
            "the weight decay",
            self.weight_decay,
            Range::AtLeastZero,
        )?;
        check_learning_rate(ctx, "Sgd", (&self.lr, self.given_lr), &self.params)?;
        let mut updates = clip_updates("Sgd", self.clip.as_ref(), &self.params)?;
        self.velocities = if self.momentum == 0.0 {
            Vec::new()
        } else {
            self.params
                .iter()
                .map(|p| state_like(ctx, p, "velocity"))
                .collect::<Result<Vec<_>, _>>()?
        };
        updates.extend(self.updates(&self.velocities));
        Ok(updates)
    }
}
