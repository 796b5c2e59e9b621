//! Precision inference: which precision each tensor's cells, and its gradient's, are held in.
//!
//! A tensor's precision is, in order of priority:
//!
//! 1. **Chosen**: what the user gave it, when it was built (`LeafBuilder::precision`) or
//!    afterwards ([`Tensor::set_precision`]), or what the operation itself is about (a cast's
//!    target, random words).
//! 2. **Inferred**, in one of two directions:
//!    - *bottom-up* for computed tensors: their operands' precisions promoted
//!      ([`Precision::promote`]), counting only the operands that do not follow their users
//!      (below) or that have a chosen precision, and at least the default where that promotion
//!      is an integer beside a parameter given no precision (`ids + w` adds in f32 rather than
//!      truncating `w`);
//!    - *top-down* for parameters and data tensors given no precision: they hold what their
//!      users compute in (the widest, if several), so that a parameter beside an f16 tensor is
//!      an f16 parameter, not an f32 one promoting the whole expression to f32. A tensor
//!      taking gradients holds a float, and no user's tensor holds the 128-bit random words,
//!      whatever its users compute in. An operation converting into a precision of its own (a
//!      cast, random draws) asks nothing of its operands, nor does a gather of its ids. A data
//!      tensor nothing is computed from holds, instead, what the updates related into it read
//!      (`Update::with_logic`, `Update::with_default_logic`: an optimizer's state follows its
//!      parameter); a `cd!` intermediate is computed bottom-up from what its formula reads.
//! 3. **Default**: the graph's default precision ([`Graph::set_default_precision`], else the
//!    `default_precision` setting when the graph was made, else f32) for a tensor whose
//!    direction gives nothing: a parameter nothing uses, an operation over parameters only, a
//!    number ([`Graph::number`]).
//!
//! A gradient's precision is the user's choice for it ([`Tensor::set_grad_precision`]), else
//! the graph's default gradient precision ([`Graph::set_default_grad_precision`], else the
//! `default_grad_precision` setting) when one is set, else its tensor's precision.
//!
//! While the graph is being built, [`Tensor::precision`] answers from what is known so far:
//! bottom-up tensors their operands' promotion as it stands, top-down tensors their users'
//! precisions as they stand (a parameter used beside f64 data answers f64 before any context). Precisions are fixed when a
//! context first makes a tensor's buffer, as it finishes shape inference, before anything is
//! lowered. From then on that tensor's precision is settled in that context: a later use does
//! not change it, and a later choice that differs is an error naming the tensor. Precisions
//! read while building (a library function holding a constant in its operand's precision) see
//! the state of the moment: choose precisions and defaults before building on the tensors they
//! concern.
//!
//! These are OCANNL's rules (`top_down_prec`), with two differences: a number is held in the
//! default precision rather than its users' (`x * 0.5` over f16 `x` computes in f32, unless the
//! default is f16), and a gradient follows its tensor rather than being inferred apart from it.

use rcannl_backends::settings;
use rcannl_ir::Precision;

use crate::tensor::Tensor;

use super::error::{TensorError, error};
use super::{Graph, State, TensorData};

/// Where a tensor's precision comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrecisionRule {
    /// Chosen: by the user, or by the operation (a cast's target, random words).
    Given(Precision),
    /// Top-down, from the tensors computed from it: parameters and data given no precision.
    FromUsers,
    /// Bottom-up, from the operands it is computed from (its `precision_from`).
    FromOperands,
    /// The graph's default precision (numbers, ranges).
    Default,
}

impl From<Precision> for PrecisionRule {
    fn from(precision: Precision) -> PrecisionRule {
        PrecisionRule::Given(precision)
    }
}

/// The precisions a tensor's two buffers are made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub value: Precision,
    pub grad: Precision,
}

/// The graph's defaults (see [`Graph::set_default_precision`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    pub value: Precision,
    /// `None`: a gradient is held in its tensor's precision.
    pub grad: Option<Precision>,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            value: Precision::F32,
            grad: None,
        }
    }
}

impl Defaults {
    /// The defaults the process's settings give a new graph (`default_precision`,
    /// `default_grad_precision`); a value that is no float precision is an error naming where it
    /// was given, and leaves that default as it is.
    pub(crate) fn from_settings() -> (Defaults, Vec<TensorError>) {
        let mut defaults = Defaults::default();
        let mut errors = Vec::new();
        match float_setting(&settings::DEFAULT_PRECISION) {
            Ok(Some(precision)) => defaults.value = precision,
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
        match float_setting(&settings::DEFAULT_GRAD_PRECISION) {
            Ok(precision) => defaults.grad = precision,
            Err(e) => errors.push(e),
        }
        (defaults, errors)
    }
}

/// The float precision the setting `key` names, where it is set.
fn float_setting(key: &'static settings::Key) -> Result<Option<Precision>, TensorError> {
    let Some(setting) = settings::get_or_warn(key) else {
        return Ok(None);
    };
    let name = setting.checked_text().map_err(|e| error(e.message))?;
    let precision = Precision::ALL
        .into_iter()
        .find(|precision| precision.is_float() && precision.to_string() == name);
    precision.map(Some).ok_or_else(|| {
        error(format!(
            "{}={name}: names no float precision",
            setting.named()
        ))
    })
}

impl Graph {
    /// Makes `t`, built with no precision, a tensor computed from `from` as far as precision
    /// goes: bottom-up, its precision is theirs promoted (and they take it as a user's need).
    pub(crate) fn compute_from(&self, t: &Tensor, from: &[&Tensor]) {
        let mut state = self.state.lock();
        let mut indices: Vec<usize> = from.iter().map(|read| read.index).collect();
        indices.sort_unstable();
        indices.dedup();
        if indices.is_empty() || state.tensors[t.index].precision_rule != PrecisionRule::FromUsers {
            return;
        }
        let precision = state.provisional_precision(PrecisionRule::FromOperands, &indices);
        let data = &mut state.tensors[t.index];
        data.precision_rule = PrecisionRule::FromOperands;
        data.precision_from = indices;
        data.precision = precision;
        state.link_precision_users(t.index);
    }
}

impl State {
    /// Records tensor `index` as a user of each tensor its precision is computed from.
    pub(crate) fn link_precision_users(&mut self, index: usize) {
        for operand in self.tensors[index].precision_from.clone() {
            self.tensors[operand].precision_users.push(index);
        }
    }

    /// The precision of tensor `index`, which follows its users, as far as the graph knows now:
    /// [`resolve`]'s top-down step over its users' precisions as they stand.
    fn precision_following_users(&self, index: usize) -> Precision {
        let data = &self.tensors[index];
        let now = |tensors: &[usize]| promoted(tensors.iter().map(|&t| self.tensors[t].precision));
        following_users(
            data,
            now(&data.precision_users),
            now(&data.written_from),
            self.precision_defaults.value,
        )
    }

    /// The precision of a tensor about to be built under `rule` from the operands `from`, as far
    /// as the graph knows now: [`resolve`]'s bottom-up step, with the precisions tensors hold
    /// now.
    pub(crate) fn provisional_precision(&self, rule: PrecisionRule, from: &[usize]) -> Precision {
        match rule {
            PrecisionRule::Given(precision) => precision,
            PrecisionRule::FromUsers | PrecisionRule::Default => self.precision_defaults.value,
            PrecisionRule::FromOperands => {
                let operands = from.iter().map(|&i| &self.tensors[i]).filter_map(|data| {
                    (data.precision_rule != PrecisionRule::FromUsers).then_some(data.precision)
                });
                let holds_float = from.iter().any(|&i| holds_float(&self.tensors[i]));
                from_operands(operands, holds_float, self.precision_defaults.value)
            }
        }
    }
}

/// What `data`, which follows its users, holds: `need`, what they compute in (the widest), if
/// any uses it; else `written`, what the updates into it read, for a data tensor; else
/// `default`. A tensor taking gradients, or one an operation draws (random values), holds a
/// float, and no user's tensor holds the 128-bit random words.
fn following_users(
    data: &TensorData,
    need: Option<Precision>,
    written: Option<Precision>,
    default: Precision,
) -> Precision {
    match need {
        None => (!data.differentiable)
            .then_some(written)
            .flatten()
            .unwrap_or(default),
        Some(Precision::Uint4x32) => default,
        Some(need) if (data.differentiable || data.op.is_some()) && !need.is_float() => default,
        Some(need) => need,
    }
}

/// Whether `data` follows its users but holds a float whatever they compute in: a parameter
/// (or any tensor taking gradients) given no precision.
fn holds_float(data: &TensorData) -> bool {
    data.precision_rule == PrecisionRule::FromUsers && data.differentiable
}

/// What a tensor computed from operands of `precisions` (those that count) computes in: their
/// promotion, or `default` where none counts. Where an operand that does not count holds a
/// float anyway (a parameter given no precision), an integer promotion is promoted to the
/// default, so that the parameter's values are not truncated to integers (`ids + w` adds in
/// f32); parameters chosen integer count, and compute in their integers.
fn from_operands(
    precisions: impl Iterator<Item = Precision>,
    holds_float: bool,
    default: Precision,
) -> Precision {
    match promoted(precisions) {
        Some(precision) if holds_float && !precision.is_float() => precision.promote(default),
        Some(precision) => precision,
        None => default,
    }
}

fn promoted(precisions: impl Iterator<Item = Precision>) -> Option<Precision> {
    precisions.reduce(Precision::promote)
}

/// Every tensor's precisions, value and gradient, by tensor index. `settled` gives those of a
/// tensor whose buffers exist already: they stay as they are, and a choice made since that
/// differs is an error naming the tensor.
pub(crate) fn resolve(
    state: &State,
    settled: impl Fn(usize) -> Option<Resolved>,
) -> Result<Vec<Resolved>, TensorError> {
    let defaults = state.precision_defaults;
    let tensors = &state.tensors;
    // Bottom-up, in creation order: a tensor's operands were built before it.
    let mut values: Vec<Precision> = Vec::with_capacity(tensors.len());
    for (index, data) in tensors.iter().enumerate() {
        let value = match (settled(index), data.precision_rule) {
            (Some(resolved), _) => resolved.value,
            (None, PrecisionRule::Given(precision)) => precision,
            (None, PrecisionRule::FromUsers | PrecisionRule::Default) => defaults.value,
            (None, PrecisionRule::FromOperands) => from_operands(
                data.precision_from
                    .iter()
                    .filter(|&&i| tensors[i].precision_rule != PrecisionRule::FromUsers)
                    .map(|&i| values[i]),
                data.precision_from
                    .iter()
                    .any(|&i| holds_float(&tensors[i])),
                defaults.value,
            ),
        };
        values.push(value);
    }
    // Top-down: what each tensor's users compute in, the widest.
    let mut users: Vec<Option<Precision>> = vec![None; tensors.len()];
    for (index, data) in tensors.iter().enumerate() {
        for &operand in &data.precision_from {
            let need = values[index];
            users[operand] = Some(users[operand].map_or(need, |have| have.promote(need)));
        }
    }
    for (index, data) in tensors.iter().enumerate() {
        if data.precision_rule == PrecisionRule::FromUsers && settled(index).is_none() {
            let written = promoted(data.written_from.iter().map(|&w| values[w]));
            values[index] = following_users(data, users[index], written, defaults.value);
        }
    }
    let mut resolved = Vec::with_capacity(tensors.len());
    for (index, (data, value)) in tensors.iter().zip(values).enumerate() {
        let here = Resolved {
            value,
            grad: data.grad_precision.or(defaults.grad).unwrap_or(value),
        };
        if let Some(made) = settled(index) {
            check_settled(data, made)?;
        }
        resolved.push(here);
    }
    Ok(resolved)
}

/// An error when `data`'s chosen precisions differ from those its buffers were made in.
fn check_settled(data: &TensorData, made: Resolved) -> Result<(), TensorError> {
    let value = match data.precision_rule {
        PrecisionRule::Given(precision) => Some(precision),
        _ => None,
    };
    for (what, chosen, made) in [
        ("", value, made.value),
        ("gradient ", data.grad_precision, made.grad),
    ] {
        if let Some(chosen) = chosen
            && chosen != made
        {
            return Err(error(format!(
                "tensor '{}': its {what}precision was chosen as {chosen} after its {what}buffer \
                 was made in {made}; choose it before a context first uses the tensor",
                data.label
            )));
        }
    }
    Ok(())
}

impl Graph {
    /// Makes `precision` what tensors that neither a choice nor their neighbours give a
    /// precision are held in (the `default_precision` setting, else f32): parameters nothing of
    /// a chosen precision uses, operations over them, numbers. It applies to the tensors whose
    /// buffers no context has made yet; set it before building, since some library functions
    /// read precisions while they build. A precision that is not a float is an error.
    pub fn set_default_precision(&self, precision: Precision) {
        if !precision.is_float() {
            self.record(error(format!(
                "set_default_precision: {precision} is not a float precision"
            )));
            return;
        }
        let mut state = self.state.lock();
        state.precision_defaults.value = precision;
        state.precision_changes += 1;
    }

    /// Makes `precision` what gradients are held in, unless one's own is chosen
    /// ([`Tensor::set_grad_precision`]); without it a gradient is held in its tensor's
    /// precision. A precision that is not a float is an error.
    pub fn set_default_grad_precision(&self, precision: Precision) {
        if !precision.is_float() {
            self.record(error(format!(
                "set_default_grad_precision: {precision} is not a float precision"
            )));
            return;
        }
        let mut state = self.state.lock();
        state.precision_defaults.grad = Some(precision);
        state.precision_changes += 1;
    }

    /// The precision tensors given none by a choice or by their neighbours are held in.
    pub fn default_precision(&self) -> Precision {
        self.state.lock().precision_defaults.value
    }
}

impl Tensor {
    /// The precision of the tensor's cells: once a context has made its buffer, the one it was
    /// made in; before that, as far as the graph knows now (see [`crate::graph::precision`]).
    pub fn precision(&self) -> Precision {
        let state = self.graph.state.lock();
        let data = &state.tensors[self.index];
        if data.precision_rule == PrecisionRule::FromUsers && data.grad_resolved.is_none() {
            return state.precision_following_users(self.index);
        }
        data.precision
    }

    /// The precision of the tensor's gradient: its own if chosen; else, once a context has made
    /// its buffer, the one it was made in; else the graph's default gradient precision if set,
    /// else the tensor's precision.
    pub fn grad_precision(&self) -> Precision {
        let state = self.graph.state.lock();
        let data = &state.tensors[self.index];
        data.grad_precision
            .or(data.grad_resolved)
            .or(state.precision_defaults.grad)
            .unwrap_or(data.precision)
    }

    /// Chooses the precision of the tensor's cells, over what would be inferred: a parameter
    /// or data tensor then no longer follows its users, and the operations computed from it
    /// promote with this precision. A choice made after a context made the tensor's buffer in
    /// another precision is an error when that context next compiles.
    pub fn set_precision(&self, precision: Precision) {
        let mut state = self.graph.state.lock();
        let data = &mut state.tensors[self.index];
        data.precision_rule = PrecisionRule::Given(precision);
        data.precision = precision;
        state.precision_changes += 1;
    }

    /// Chooses the precision of the tensor's gradient, over the graph's default. A gradient
    /// holds a float: another precision is an error naming the tensor.
    pub fn set_grad_precision(&self, precision: Precision) {
        if !precision.is_float() {
            self.graph.record(error(format!(
                "tensor '{}': a gradient is held in a float precision, not {precision}",
                self.label()
            )));
            return;
        }
        let mut state = self.graph.state.lock();
        state.tensors[self.index].grad_precision = Some(precision);
        state.precision_changes += 1;
    }
}
