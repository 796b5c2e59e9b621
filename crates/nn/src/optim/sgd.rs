//! Stochastic gradient descent.

use rcannl_tensor::{Context, Formula, Graph, Routine, Tensor, TensorError, Update, cd};

use super::clip::{Clip, clip_updates, gradient};
use super::group::{Group, check_groups, params_of};
use super::settings::{Range, check, check_learning_rate};
use super::state::{learning_rate, rows_of, scalar, shared_precision, state_like};

/// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay, as
/// PyTorch's `SGD(params, lr, momentum, dampening, weight_decay, nesterov)`: with `g` the
/// gradient plus `λ·w`, the velocity is `v ← g` at the first step and `v ← μ·v + (1 − d)·g`
/// after, then `w ← w − lr·v` (or `w − lr·(g + μ·v)` with Nesterov). Without momentum,
/// `w ← w − lr·g`.
#[derive(Debug, Clone)]
pub struct Sgd {
    /// The learning rate: a scalar tensor, which a [`Schedule`](super::Schedule) sets between
    /// steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The momentum `μ`, in `[0, 1)`.
    pub momentum: f64,
    /// The dampening `d`, in `[0, 1]`: the share of the gradient kept out of the velocity after
    /// the first step (default 0).
    pub dampening: f64,
    /// Nesterov momentum: the step looks ahead along the velocity (not with dampening).
    pub nesterov: bool,
    /// The weight decay `λ`, at least 0, added to the gradient as `λ·w`: the default of the
    /// groups that give none.
    pub weight_decay: f64,
    groups: Vec<Group>,
    /// A velocity per parameter (none without momentum), then with dampening the share of the
    /// gradient that enters the velocity (1 at the first step, `1 − d` after).
    state: Vec<Tensor>,
    clip: Option<Clip>,
}

impl Sgd {
    /// SGD of `params` at learning rate `lr` with momentum `momentum` (0 for none); the settings
    /// are checked by [`Sgd::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64, momentum: f64) -> Sgd {
        Sgd::with_groups(graph, &[Group::new(params)], lr, momentum)
    }

    /// SGD of the parameters of `groups`, each with its own settings (see [`Group`]), at
    /// learning rate `lr` with momentum `momentum`.
    pub fn with_groups(graph: &Graph, groups: &[Group], lr: f64, momentum: f64) -> Sgd {
        Sgd {
            lr: learning_rate(graph, lr, &params_of(groups)),
            given_lr: lr,
            momentum,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            groups: groups.to_vec(),
            state: Vec::new(),
            clip: None,
        }
    }

    /// The optimizer's state (a velocity per parameter, none without momentum; then, with
    /// dampening, the share of the gradient entering the velocity), made by [`Sgd::compile`],
    /// to save with the parameters.
    pub fn state(&self) -> &[Tensor] {
        &self.state
    }

    /// With Nesterov momentum.
    pub fn nesterov(mut self) -> Sgd {
        self.nesterov = true;
        self
    }

    /// With dampening `dampening`: after the first step, the velocity takes `1 − dampening` of
    /// the gradient.
    pub fn dampening(mut self, dampening: f64) -> Sgd {
        self.dampening = dampening;
        self
    }

    /// With weight decay `decay`.
    pub fn weight_decay(mut self, decay: f64) -> Sgd {
        self.weight_decay = decay;
        self
    }

    /// The updates of one step, with a velocity per parameter (none without momentum, where
    /// the velocity would be the gradient itself) and the share of the gradient entering it
    /// (none without dampening, where it is all of it).
    fn updates(&self, velocities: &[Tensor], share: Option<&Tensor>) -> Vec<Update> {
        let momentum = self.momentum;
        let clip = self.clip.as_ref();
        let mut updates = Vec::new();
        let mut velocities = velocities.iter();
        for group in &self.groups {
            let (lr, decay) = (group.rate(&self.lr), group.decay(self.weight_decay));
            for w in group.params() {
                let grad = gradient(clip, w);
                let Some(velocity) = velocities.next() else {
                    updates.extend(cd! { w =- lr * (grad + decay * w) });
                    continue;
                };
                let decayed = grad.clone() + decay * Formula::value(w);
                let entering = match share {
                    Some(share) => Formula::value(share) * decayed,
                    None => decayed,
                };
                updates.extend(cd! { velocity =: momentum * velocity + entering });
                updates.extend(if self.nesterov {
                    cd! { w =- lr * ((grad + decay * w) + momentum * velocity) }
                } else {
                    cd! { w =- lr * velocity }
                });
            }
        }
        if let Some(share) = share {
            updates.push(Update::set(share, Formula::Const(1.0 - self.dampening)));
        }
        updates
    }

    step_routines!(Sgd);

    /// The settings checked, the state made, the updates of one step.
    fn prepare(&mut self, ctx: &mut Context) -> Result<Vec<Update>, TensorError> {
        check("Sgd", "the momentum", self.momentum, Range::Fraction)?;
        check("Sgd", "the dampening", self.dampening, Range::Share)?;
        check(
            "Sgd",
            "the weight decay",
            self.weight_decay,
            Range::AtLeastZero,
        )?;
        if self.nesterov && self.dampening != 0.0 {
            return Err(TensorError::new(format!(
                "Sgd: Nesterov momentum with a dampening of {}: Nesterov momentum takes none",
                self.dampening
            )));
        }
        check_groups("Sgd", &self.groups)?;
        let params = params_of(&self.groups);
        check_learning_rate(ctx, "Sgd", (&self.lr, self.given_lr), &params)?;
        let mut updates = clip_updates("Sgd", self.clip.as_ref(), &params)?;
        self.state = if self.momentum == 0.0 {
            Vec::new()
        } else {
            let rows = rows_of(ctx, &params)?;
            params
                .iter()
                .zip(&rows)
                .map(|(p, rows)| state_like(p, rows, "velocity"))
                .collect()
        };
        let velocities = self.state.len();
        if velocities > 0 && self.dampening != 0.0 {
            let precision = shared_precision(&params);
            let share = scalar(self.lr.graph(), "sgd gradient share", precision, 1.0);
            self.state.push(share);
        }
        let (velocities, share) = self.state.split_at(velocities);
        updates.extend(self.updates(velocities, share.first()));
        Ok(updates)
    }
}
