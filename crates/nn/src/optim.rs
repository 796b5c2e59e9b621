//! Optimizers as update routines: each step is a routine of updates over parameters, their
//! gradients and the optimizer's state tensors: pointwise, and reductions into one cell where a
//! step needs a norm (clipping by the global gradient norm, LAMB's trust ratios). The learning
//! rate is a tensor, so a schedule changes it between steps without recompiling.
//!
//! Settings are checked where they take effect: an optimizer's when its step is compiled (the
//! learning rate as the context holds it then), a schedule's when it sets the learning rate. A
//! value that is not a finite number, or out of its range, is an error naming the optimizer or
//! schedule, the setting and the value.
//!
//! Precisions follow the parameters: each parameter's state (velocity, moments, squared norms)
//! is held in f64 for an f64 parameter and in f32 otherwise; what an optimizer shares among its
//! parameters (the learning rate, the step count, the global gradient norm, Adam's and LAMB's
//! bias corrections) in f64 when any parameter is f64, and in f32 otherwise (which every
//! backend holds, the GPU's included). The bias corrections are computed from the step count
//! without cancellation, to within a few units of their precision's last place.

use rcannl_ir::{Binop, Precision, Unop};
use rcannl_tensor::{Context, Formula, Graph, Routine, Tensor, TensorError, Update, cd};

/// The precision of `param`'s state: f64 for an f64 parameter, so that its gradient is never
/// rounded to f32 on its way into the update; f32 for the others (an f16 or bf16 parameter's
/// squared gradients would underflow in its own precision).
fn state_precision(param: &Tensor) -> Precision {
    match param.precision() {
        Precision::F64 => Precision::F64,
        _ => Precision::F32,
    }
}

/// The precision of what an optimizer shares among its parameters (the learning rate, the step
/// count, the global gradient norm, the bias corrections): f64 when any parameter is f64, else
/// f32, which every backend holds (the GPU has no f64).
fn shared_precision(params: &[Tensor]) -> Precision {
    (params.iter().map(state_precision))
        .find(|&p| p == Precision::F64)
        .unwrap_or(Precision::F32)
}

/// A state tensor of `param`'s shape (known once `ctx` has run inference) and of its state
/// precision, starting at zero. It is declared with that shape rather than related to the
/// parameter, so that it can never influence what the parameter's shape is inferred to be.
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
        .precision(state_precision(param))
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

/// `value` as a message shows it: as Rust prints it, but in scientific notation where that
/// would take more than a few digits (`1e200`, not 201 of them).
fn shown(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-5..1e16).contains(&magnitude) && value.is_finite() {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// An error naming `owner`, `setting` and `value` unless `value` is finite and in `range`.
fn check(owner: &str, setting: &str, value: f64, range: Range) -> Result<(), TensorError> {
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
fn check_learning_rate(
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

/// One scalar tensor of `precision` holding `value`.
fn scalar(graph: &Graph, label: &str, precision: Precision, value: f64) -> Tensor {
    (graph.data(label).shape("1").precision(precision))
        .values(vec![value])
        .build()
}

/// The learning-rate tensor of `params` holding `lr`, in their shared precision; each update
/// reads it in its parameter's precision.
fn learning_rate(graph: &Graph, lr: f64, params: &[Tensor]) -> Tensor {
    scalar(graph, "lr", shared_precision(params), lr)
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
    /// Clipping of `params`' gradients to `max_norm`, their norm summed in their shared
    /// precision.
    fn new(graph: &Graph, max_norm: f64, params: &[Tensor]) -> Clip {
        Clip {
            max_norm,
            norm: scalar(graph, "gradient norm", shared_precision(params), 0.0),
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
            self.clip = Some(Clip::new(self.lr.graph(), max_norm, &self.params));
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

/// The step count and the bias corrections of Adam and LAMB: the count (one cell, from 0) and
/// `1 − β₁ᵗ`, `1 − β₂ᵗ` of the last step (one cell each), in the parameters' shared precision.
#[derive(Debug, Clone)]
struct Steps {
    count: Tensor,
    corrections: [Tensor; 2],
}

impl Steps {
    /// The step count and bias corrections of `owner` (`adam`, `lamb`) over `params`.
    fn new(graph: &Graph, owner: &str, params: &[Tensor]) -> Steps {
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
    fn updates(&self, [beta1, beta2]: [f64; 2]) -> Vec<Update> {
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
    fn state(&self) -> Tensor {
        self.count.clone()
    }
}

/// Adam's moment updates of `m` and `v` from the gradient `g`, and its bias-corrected direction
/// `m̂/(√v̂ + ε)`, with the bias corrections of the step.
struct Moments<'a> {
    beta1: f64,
    beta2: f64,
    epsilon: f64,
    corrections: &'a [Tensor; 2],
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
        let [first, second] = self.corrections.each_ref().map(Formula::value);
        let m_hat = Formula::value(m) / first;
        let v_hat = Formula::value(v) / second;
        m_hat / (v_hat.apply(Unop::Sqrt) + self.epsilon)
    }
}

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

/// LAMB (layer-wise adaptive moments): Adam's step `r = m̂/(√v̂ + ε) + λ·w` per parameter,
/// scaled by the parameter's trust ratio `‖w‖ / ‖r‖` (1 when either norm is 0), then
/// `w ← w − lr·ratio·r`. Each norm is a reduction over the parameter's cells inside the step.
#[derive(Debug, Clone)]
pub struct Lamb {
    /// The learning rate: a scalar tensor, which a [`Schedule`] sets between steps.
    pub lr: Tensor,
    /// The rate given to `new`, which `lr` holds as its precision rounds it: checked as given.
    given_lr: f64,
    /// The first moment's decay `β₁`, in `[0, 1)` (default 0.9).
    pub beta1: f64,
    /// The second moment's decay `β₂`, in `[0, 1)` (default 0.999).
    pub beta2: f64,
    /// The `ε` added to the second moment's root, above 0 (default 1e-6).
    pub epsilon: f64,
    /// The weight decay `λ` added to the step, at least 0 (default 0).
    pub weight_decay: f64,
    steps: Steps,
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
            lr: learning_rate(graph, lr, params),
            given_lr: lr,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-6,
            weight_decay: 0.0,
            steps: Steps::new(graph, "lamb", params),
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
        let (lr, decay) = (&self.lr, self.weight_decay);
        let mut updates = self.steps.updates([self.beta1, self.beta2]);
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
        check_learning_rate(ctx, "Lamb", (&self.lr, self.given_lr), &self.params)?;
        let mut updates = clip_updates("Lamb", self.clip.as_ref(), &self.params)?;
        self.state = self
            .params
            .iter()
            .map(|p| {
                let norm = |name: &str| {
                    let label = format!("{} {name}", p.label());
                    scalar(p.graph(), &label, state_precision(p), 0.0)
                };
                Ok([
                    state_like(ctx, p, "first moment")?,
                    state_like(ctx, p, "second moment")?,
                    norm("norm²"),
                    norm("step norm²"),
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
