//! Adam and AdamW.

use rcannl_ir::Binop;
use rcannl_tensor::{Context, Formula, Graph, Routine, Tensor, TensorError, Update, cd};

use super::clip::{Clip, clip_updates, gradient};
use super::group::{Group, check_groups, params_of};
use super::moments::{Moments, Steps, check_moment_settings};
use super::settings::check_learning_rate;
use super::state::{learning_rate, rows_of, state_like};

/// Adam and AdamW, as PyTorch's `Adam` and `AdamW`: with `g` the gradient, moments
/// `m ← β₁m + (1−β₁)g` and `v ← β₂v + (1−β₂)g²`, then `w ← w − lr·m̂/(√v̂ + ε) − lr·λ·w` with
/// bias-corrected `m̂`, `v̂`: the weight decay `λ` decoupled from the gradient (AdamW). With
/// [`Adam::coupled_weight_decay`], `λ·w` is added to `g` instead (PyTorch's
/// `Adam(weight_decay=λ)`, an L2 penalty the moments see); with [`Adam::amsgrad`], `v̂` is
/// corrected from the largest `v` so far (`amsgrad=True`).
#[derive(Debug, Clone)]
pub struct Adam {
    /// The learning rate: a scalar tensor, which a [`Schedule`](super::Schedule) sets between
    /// steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-8).
    pub epsilon: f64,
    /// The weight decay `λ`, at least 0 (default 0): the default of the groups that give none.
    pub weight_decay: f64,
    /// Whether the weight decay is added to the gradient (PyTorch's `Adam`) rather than
    /// decoupled from it (AdamW, the default).
    pub coupled: bool,
    /// Whether the step divides by the largest second moment so far (AMSGrad; default false).
    pub amsgrad: bool,
    steps: Steps,
    groups: Vec<Group>,
    moments: Vec<ParamMoments>,
    clip: Option<Clip>,
}

/// One parameter's moments, and with AMSGrad its largest second moment so far.
#[derive(Debug, Clone)]
struct ParamMoments {
    first: Tensor,
    second: Tensor,
    largest: Option<Tensor>,
}

impl Adam {
    /// Adam of `params` at learning rate `lr`, with the usual betas and epsilon; the settings are
    /// checked by [`Adam::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64) -> Adam {
        Adam::with_groups(graph, &[Group::new(params)], lr)
    }

    /// Adam of the parameters of `groups`, each with its own settings (see [`Group`]), at
    /// learning rate `lr`, with the usual betas and epsilon.
    pub fn with_groups(graph: &Graph, groups: &[Group], lr: f64) -> Adam {
        let params = params_of(groups);
        Adam {
            lr: learning_rate(graph, lr, &params),
            given_lr: lr,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
            coupled: false,
            amsgrad: false,
            steps: Steps::new(graph, "adam", &params),
            groups: groups.to_vec(),
            moments: Vec::new(),
            clip: None,
        }
    }

    /// The optimizer's state (the step count, then both moments of each parameter and with
    /// AMSGrad its largest second moment, made by [`Adam::compile`]), to save with the
    /// parameters.
    pub fn state(&self) -> Vec<Tensor> {
        let mut state = vec![self.steps.state()];
        for moments in &self.moments {
            state.extend([&moments.first, &moments.second].into_iter().cloned());
            state.extend(moments.largest.clone());
        }
        state
    }

    /// AdamW: weight decay `decay` decoupled from the gradient.
    pub fn weight_decay(mut self, decay: f64) -> Adam {
        self.weight_decay = decay;
        self.coupled = false;
        self
    }

    /// PyTorch's `Adam(weight_decay=decay)`: `decay·w` added to the gradient, before the
    /// moments.
    pub fn coupled_weight_decay(mut self, decay: f64) -> Adam {
        self.weight_decay = decay;
        self.coupled = true;
        self
    }

    /// AMSGrad: the step divides by the root of the largest second moment so far.
    pub fn amsgrad(mut self) -> Adam {
        self.amsgrad = true;
        self
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
        let mut moments = self.moments.iter();
        for group in &self.groups {
            let (lr, decay) = (group.rate(&self.lr), group.decay(self.weight_decay));
            for (w, moments) in group.params().iter().zip(&mut moments) {
                let (m, second) = (&moments.first, &moments.second);
                let mut grad = gradient(self.clip.as_ref(), w);
                if self.coupled {
                    grad = grad + decay * Formula::value(w);
                }
                updates.extend(adam.updates(grad, m, second));
                // The second moment the step divides by: the largest so far with AMSGrad.
                let divisor = match &moments.largest {
                    Some(largest) => {
                        let grown =
                            Formula::value(largest).binop(Binop::Max, Formula::value(second));
                        updates.push(Update::set(largest, grown));
                        largest
                    }
                    None => second,
                };
                let direction = adam.direction(m, divisor);
                updates.extend(if self.coupled {
                    cd! { w =- lr * direction }
                } else {
                    cd! { w =- lr * (direction + decay * w) }
                });
            }
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
        check_groups("Adam", &self.groups)?;
        let params = params_of(&self.groups);
        check_learning_rate(ctx, "Adam", (&self.lr, self.given_lr), &params)?;
        let mut updates = clip_updates("Adam", self.clip.as_ref(), &params)?;
        let rows = rows_of(ctx, &params)?;
        self.moments = params
            .iter()
            .zip(&rows)
            .map(|(p, rows)| ParamMoments {
                first: state_like(p, rows, "first moment"),
                second: state_like(p, rows, "second moment"),
                largest: self
                    .amsgrad
                    .then(|| state_like(p, rows, "largest second moment")),
            })
            .collect();
        updates.extend(self.updates());
        Ok(updates)
    }
}
