//! Optimizers as update routines: each step is a routine of updates over parameters, their
//! gradients and the optimizer's state tensors: pointwise, and reductions into one cell where a
//! step needs a norm (clipping by the global gradient norm, LAMB's trust ratios). The learning
//! rate is a tensor, so a schedule changes it between steps without recompiling.
//!
//! Settings are checked where they take effect: an optimizer's when its step is compiled (the
//! learning rate as the context holds it then), a schedule's when it sets the learning rate. A
//! value that is not a finite number, or out of its range, is an error naming the optimizer or
//! schedule, the setting and the value.

use rcannl_ir::{Binop, Unop};
use rcannl_tensor::{Context, Formula, Graph, Routine, Tensor, TensorError, Update, cd};

/// A state tensor of `param`'s shape (known once `ctx` has run inference), starting at zero.
/// It is declared with that shape rather than related to the parameter, so that it can never
/// influence what the parameter's shape is inferred to be.
fn state_like(ctx: &mut Context, param: &Tensor, name: &str) -> Result<Tensor, TensorError> {
    let [batch, input, output] = ctx.rows(param)?;
    let row = |dims: &[usize]| {
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let literal = format!("{}|{}->{}", row(&batch), row(&input), row(&output));
    let cells = batch.iter().chain(&input).chain(&output).product();
    // Moments start at zero, given as values: a tensor never given any is an error to read.
    Ok(param
        .graph()
        .data(&format!("{} {name}", param.label()))
        .shape(&literal)
        .values(vec![0.0; cells])
        .build())
}

/// The range a setting must lie in (besides being finite).
#[derive(Debug, Clone, Copy)]
enum Range {
    /// `[0, ∞)`: a rate or a decay.
    AtLeastZero,
    /// `(0, ∞)`: a term added to a divisor.
    AboveZero,
    /// `[0, 1)`: a factor that must forget (at 1, a bias correction divides by zero).
    Fraction,
}

impl Range {
    fn contains(self, value: f64) -> bool {
        match self {
            Range::AtLeastZero => value >= 0.0,
            Range::AboveZero => value > 0.0,
            Range::Fraction => (0.0..1.0).contains(&value),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Range::AtLeastZero => "a finite number, at least 0",
            Range::AboveZero => "a finite number above 0",
            Range::Fraction => "a finite number in [0, 1)",
        }
    }
}

/// An error naming `owner`, `setting` and `value` unless `value` is finite and in `range`.
fn check(owner: &str, setting: &str, value: f64, range: Range) -> Result<(), TensorError> {
    if value.is_finite() && range.contains(value) {
        return Ok(());
    }
    Err(TensorError {
        message: format!(
            "{owner}: {setting} is {value}: it must be {}",
            range.describe()
        ),
    })
}

/// Checks the learning rate `lr` holds in `ctx`, for `owner`.
fn check_learning_rate(ctx: &mut Context, owner: &str, lr: &Tensor) -> Result<(), TensorError> {
    // The rate's buffer exists, with its initial value, once the context has made it.
    ctx.dims(lr)?;
    for value in ctx.values(lr)? {
        check(owner, "the learning rate", value, Range::AtLeastZero)?;
    }
    Ok(())
}

/// One scalar tensor holding `value`.
fn scalar(graph: &Graph, label: &str, value: f64) -> Tensor {
    graph.data(label).shape("1").values(vec![value]).build()
}

/// Clipping by the global norm of every parameter's gradient: each gradient is scaled by
/// `min(1, max_norm / (norm + 10⁻⁶))`, as PyTorch's `clip_grad_norm_` does.
#[derive(Debug, Clone)]
struct Clip {
    max_norm: f64,
    /// One cell: the global norm of the last step's gradients, before clipping.
    norm: Tensor,
}

impl Clip {
    fn new(graph: &Graph, max_norm: f64) -> Clip {
        Clip {
            max_norm,
            norm: scalar(graph, "gradient norm", 0.0),
        }
    }

    /// The updates computing the norm, to run before any update reading a clipped gradient.
    fn updates(&self, params: &[Tensor]) -> Vec<Update> {
        let norm = &self.norm;
        let mut updates = Vec::new();
        for (i, w) in params.iter().enumerate() {
            updates.extend(match i {
                0 => cd! { norm =:+ w.grad * w.grad },
                _ => cd! { norm =+ w.grad * w.grad },
            });
        }
        updates.extend(cd! { norm =: sqrt(norm) });
        updates
    }

    /// `w`'s gradient, clipped.
    fn grad(&self, w: &Tensor) -> Formula {
        let scale = (self.max_norm / (Formula::value(&self.norm) + 1e-6))
            .binop(Binop::Min, Formula::Const(1.0));
        Formula::grad(w) * scale
    }
}

/// `w`'s gradient, clipped by `clip` if any; and the updates that must run first.
fn gradient(clip: Option<&Clip>, w: &Tensor) -> Formula {
    clip.map_or_else(|| Formula::grad(w), |clip| clip.grad(w))
}

/// The clipping updates of `clip` (none without clipping), its setting checked for `owner`.
fn clip_updates(
    owner: &str,
    clip: Option<&Clip>,
    params: &[Tensor],
) -> Result<Vec<Update>, TensorError> {
    let Some(clip) = clip else {
        return Ok(Vec::new());
    };
    check(
        owner,
        "the gradient clipping norm",
        clip.max_norm,
        Range::AboveZero,
    )?;
    Ok(clip.updates(params))
}

/// What every optimizer has: clipping by the global gradient norm, and the routines it compiles
/// from the updates its `prepare` gives (its settings checked, its state made): the step alone,
/// or the whole training step.
macro_rules! step_routines {
    ($name:ident) => {
        /// With every gradient scaled so that their global norm is at most `max_norm` (above 0).
        pub fn clip_grad_norm(mut self, max_norm: f64) -> $name {
            self.clip = Some(Clip::new(self.lr.graph(), max_norm));
            self
        }

        /// The global gradient norm of the last step, before clipping (one cell), when clipping.
        pub fn grad_norm(&self) -> Option<&Tensor> {
            self.clip.as_ref().map(|clip| &clip.norm)
        }

        #[doc = concat!(
            "The step as a routine of `ctx` (the state tensors are made here, once the ",
            "parameters' shapes are known). An error, before anything is made, when a setting is ",
            "not a finite number or out of its range (see [`", stringify!($name), "`]'s fields): ",
            "the learning rate is checked as `ctx` holds it."
        )]
        pub fn compile(&mut self, ctx: &mut Context) -> Result<Routine, TensorError> {
            let updates = self.prepare(ctx)?;
            ctx.update(&updates)
        }

        #[doc = concat!(
            "The whole training step of `loss` as one routine of `ctx`: backprop, then this ",
            "optimizer's update ([`Context::train_step`]); the settings are checked as by [`",
            stringify!($name), "::compile`]."
        )]
        pub fn compile_step(
            &mut self,
            ctx: &mut Context,
            loss: &Tensor,
        ) -> Result<Routine, TensorError> {
            self.compile_step_with(ctx, loss, &[])
        }

        #[doc = concat!(
            "[`", stringify!($name), "::compile_step`] with `extra` updates run after the ",
            "optimizer's in the same routine: the running statistics of batch normalization, ",
            "say, which read values the forward pass computes."
        )]
        pub fn compile_step_with(
            &mut self,
            ctx: &mut Context,
            loss: &Tensor,
            extra: &[Update],
        ) -> Result<Routine, TensorError> {
            let mut updates = self.prepare(ctx)?;
            updates.extend_from_slice(extra);
            ctx.train_step(loss, &updates)
        }
    };
}

/// The moments of Adam and LAMB: their decays, epsilon and weight decay checked for `owner`.
fn check_moment_settings(
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

/// Adam's moment updates of `m` and `v` from the gradient `g`, and its bias-corrected direction
/// `m̂/(√v̂ + ε)` at step `t` (a one-cell tensor counting steps from 1).
struct Moments<'a> {
    beta1: f64,
    beta2: f64,
    epsilon: f64,
    steps: &'a Tensor,
}

impl Moments<'_> {
    fn updates(&self, grad: Formula, m: &Tensor, second: &Tensor) -> Vec<Update> {
        let (beta1, beta2) = (self.beta1, self.beta2);
        let (rest1, rest2) = (1.0 - beta1, 1.0 - beta2);
        cd! {
            m =: beta1 * m + rest1 * grad;
            second =: beta2 * second + rest2 * (grad * grad);
        }
    }

    fn direction(&self, m: &Tensor, v: &Tensor) -> Formula {
        let correction =
            |beta: f64| 1.0 - Formula::Const(beta).binop(Binop::Pow, Formula::value(self.steps));
        let m_hat = Formula::value(m) / correction(self.beta1);
        let v_hat = Formula::value(v) / correction(self.beta2);
        m_hat / (v_hat.apply(Unop::Sqrt) + self.epsilon)
    }
}

/// Stochastic gradient descent with momentum, Nesterov momentum and weight decay:
/// `v ← μ·v + g + λ·w`, then `w ← w − lr·v` (or `w − lr·(g + λ·w + μ·v)` with Nesterov).
#[derive(Debug, Clone)]
pub struct Sgd {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
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
            lr: scalar(graph, "lr", lr),
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
        check_learning_rate(ctx, "Sgd", &self.lr)?;
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

/// Adam (and AdamW with decoupled weight decay): moments `m ← β₁m + (1−β₁)g`,
/// `v ← β₂v + (1−β₂)g²`, then `w ← w − lr·m̂/(√v̂ + ε) − lr·λ·w` with bias-corrected `m̂`, `v̂`.
#[derive(Debug, Clone)]
pub struct Adam {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-8).
    pub epsilon: f64,
    /// The decoupled weight decay `λ`, at least 0 (default 0).
    pub weight_decay: f64,
    steps: Tensor,
    params: Vec<Tensor>,
    moments: Vec<(Tensor, Tensor)>,
    clip: Option<Clip>,
}

impl Adam {
    /// Adam of `params` at learning rate `lr`, with the usual betas and epsilon; the settings are
    /// checked by [`Adam::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64) -> Adam {
        Adam {
            lr: scalar(graph, "lr", lr),
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.0,
            steps: scalar(graph, "adam steps", 0.0),
            params: params.to_vec(),
            moments: Vec::new(),
            clip: None,
        }
    }

    /// The optimizer's state (the step count, then both moments of each parameter, made by
    /// [`Adam::compile`]), to save with the parameters.
    pub fn state(&self) -> Vec<Tensor> {
        let mut state = vec![self.steps.clone()];
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

    fn updates(&self, moments: &[(Tensor, Tensor)]) -> Vec<Update> {
        let adam = Moments {
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            steps: &self.steps,
        };
        let (steps, lr, decay) = (&self.steps, &self.lr, self.weight_decay);
        let mut updates = cd! { steps =: steps + 1 };
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
        check_learning_rate(ctx, "Adam", &self.lr)?;
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

/// LAMB (layer-wise adaptive moments): Adam's step `r = m̂/(√v̂ + ε) + λ·w` per parameter,
/// scaled by the parameter's trust ratio `‖w‖ / ‖r‖` (1 when either norm is 0), then
/// `w ← w − lr·ratio·r`. Each norm is a reduction over the parameter's cells inside the step.
#[derive(Debug, Clone)]
pub struct Lamb {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-6).
    pub epsilon: f64,
    /// The weight decay `λ` added to the step, at least 0 (default 0).
    pub weight_decay: f64,
    steps: Tensor,
    params: Vec<Tensor>,
    /// Per parameter: both moments, and one cell each for `‖w‖²` and `‖r‖²`.
    state: Vec<[Tensor; 4]>,
    clip: Option<Clip>,
}

impl Lamb {
    /// LAMB of `params` at learning rate `lr`, with the usual betas and epsilon; the settings are
    /// checked by [`Lamb::compile`].
    pub fn new(graph: &Graph, params: &[Tensor], lr: f64) -> Lamb {
        Lamb {
            lr: scalar(graph, "lr", lr),
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-6,
            weight_decay: 0.0,
            steps: scalar(graph, "lamb steps", 0.0),
            params: params.to_vec(),
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
        let mut state = vec![self.steps.clone()];
        state.extend(self.state.iter().flatten().cloned());
        state
    }

    fn updates(&self) -> Vec<Update> {
        let adam = Moments {
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            steps: &self.steps,
        };
        let (steps, lr, decay) = (&self.steps, &self.lr, self.weight_decay);
        let mut updates = cd! { steps =: steps + 1 };
        for (w, [m, second, w_norm, r_norm]) in self.params.iter().zip(&self.state) {
            updates.extend(adam.updates(gradient(self.clip.as_ref(), w), m, second));
            let step = adam.direction(m, second) + decay * Formula::value(w);
            // The trust ratio ‖w‖/‖r‖, 1 where either norm is 0.
            updates.extend(cd! {
                w_norm =:+ w * w;
                r_norm =:+ step * step;
                w =- lr * where_(w_norm * r_norm, sqrt(w_norm / r_norm), 1) * step;
            });
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
        check_learning_rate(ctx, "Lamb", &self.lr)?;
        let mut updates = clip_updates("Lamb", self.clip.as_ref(), &self.params)?;
        self.state = self
            .params
            .iter()
            .map(|p| {
                let graph = p.graph();
                Ok([
                    state_like(ctx, p, "first moment")?,
                    state_like(ctx, p, "second moment")?,
                    scalar(graph, &format!("{} norm²", p.label()), 0.0),
                    scalar(graph, &format!("{} step norm²", p.label()), 0.0),
                ])
            })
            .collect::<Result<Vec<_>, TensorError>>()?;
        updates.extend(self.updates());
        Ok(updates)
    }
}

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
