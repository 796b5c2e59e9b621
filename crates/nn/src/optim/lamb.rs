//! LAMB, Adam's step scaled per parameter by its trust ratio.

use rcannl_tensor::{Context, Formula, Graph, Routine, Tensor, TensorError, Update, cd};

use super::clip::{Clip, clip_updates, gradient};
use super::group::{Group, check_groups, params_of};
use super::moments::{Moments, Steps, check_moment_settings};
use super::settings::check_learning_rate;
use super::state::{learning_rate, rows_of, scalar, state_like, state_precision};

/// LAMB (layer-wise adaptive moments): Adam's step `r = m̂/(√v̂ + ε) + λ·w` per parameter,
/// scaled by the parameter's trust ratio `‖w‖ / ‖r‖` (1 when either norm is 0), then
/// `w ← w − lr·ratio·r`. Each norm is a reduction over the parameter's cells inside the step.
#[derive(Debug, Clone)]
pub struct Lamb {
    /// The learning rate: a scalar tensor, which a [`Schedule`](super::Schedule) sets between
    /// steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-6).
    pub epsilon: f64,
    /// The weight decay `λ` added to the step, at least 0 (default 0): the default of the
    /// groups that give none.
    pub weight_decay: f64,
    steps: Steps,
    groups: Vec<Group>,
    /// Per parameter: both moments, and one cell each for `‖w‖²` and `‖r‖²`.
    state: Vec<[Tensor; 4]>,
    clip: Option<Clip>,
}

impl Lamb {
    /// LAMB of `params` at learning rate `lr`, with the usual betas and epsilon; the settings are
    /// checked by [`Lamb::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64) -> Lamb {
        Lamb::with_groups(graph, &[Group::new(params)], lr)
    }

    /// LAMB of the parameters of `groups`, each with its own settings (see [`Group`]), at
    /// learning rate `lr`, with the usual betas and epsilon.
    pub fn with_groups(graph: &Graph, groups: &[Group], lr: f64) -> Lamb {
        let params = params_of(groups);
        Lamb {
            lr: learning_rate(graph, lr, &params),
            given_lr: lr,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-6,
            weight_decay: 0.0,
            steps: Steps::new(graph, "lamb", &params),
            groups: groups.to_vec(),
            state: Vec::new(),
            clip: None,
        }
    }

    /// With weight decay `decay` in the step (and so in its norm).
    pub fn weight_decay(mut self, decay: f64) -> Lamb {
        self.weight_decay = decay;
        self
    }

    /// The optimizer's state (the step count, then per parameter both moments and the squared
    /// norms of the parameter and of its last step), made by [`Lamb::compile`].
    pub fn state(&self) -> Vec<Tensor> {
        let mut state = vec![self.steps.state()];
        state.extend(self.state.iter().flatten().cloned());
        state
    }

    /// The bias corrections `1 − β₁ᵗ` and `1 − β₂ᵗ` of the last step (one cell each, f64 when
    /// a parameter is, 0 before the first step), which each step computes from the step count.
    pub fn bias_corrections(&self) -> &[Tensor; 2] {
        &self.steps.corrections
    }

    fn updates(&self) -> Vec<Update> {
        let adam = Moments {
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            corrections: &self.steps.corrections,
        };
        let mut updates = self.steps.updates([self.beta1, self.beta2]);
        let mut state = self.state.iter();
        for group in &self.groups {
            let (lr, decay) = (group.rate(&self.lr), group.decay(self.weight_decay));
            for (w, [m, second, w_norm, r_norm]) in group.params().iter().zip(&mut state) {
                updates.extend(adam.updates(gradient(self.clip.as_ref(), w), m, second));
                let step = adam.direction(m, second) + decay * Formula::value(w);
                // The trust ratio ‖w‖/‖r‖, 1 where either norm is 0.
                updates.extend(cd! {
                    w_norm =:+ w * w;
                    r_norm =:+ step * step;
                    w =- lr * where_(w_norm * r_norm, sqrt(w_norm / r_norm), 1) * step;
                });
            }
        }
        updates
    }

    step_routines!(Lamb);

    /// The settings checked, the state made, the updates of one step.
    fn prepare(&mut self, ctx: &mut Context) -> Result<Vec<Update>, TensorError> {
        check_moment_settings(
            "Lamb",
            self.beta1,
            self.beta2,
            self.epsilon,
            self.weight_decay,
        )?;
        check_groups("Lamb", &self.groups)?;
        let params = params_of(&self.groups);
        check_learning_rate(ctx, "Lamb", (&self.lr, self.given_lr), &params)?;
        let mut updates = clip_updates("Lamb", self.clip.as_ref(), &params)?;
        let rows = rows_of(ctx, &params)?;
        self.state = params
            .iter()
            .zip(&rows)
            .map(|(p, rows)| {
                let norm = |name: &str| {
                    let label = format!("{} {name}", p.label());
                    scalar(p.graph(), &label, state_precision(p), 0.0)
                };
                [
                    state_like(p, rows, "first moment"),
                    state_like(p, rows, "second moment"),
                    norm("norm²"),
                    norm("step norm²"),
                ]
            })
            .collect();
        updates.extend(self.updates());
        Ok(updates)
    }
}
