//! Parameter groups, PyTorch's `param_groups`: parameters that share a learning-rate scale and a
//! weight decay, and the split of a model's parameters into those weight decay applies to and
//! those it leaves alone (biases, normalization gains and biases).

use std::collections::HashMap;

use rcannl_tensor::{Context, Formula, Tensor, TensorError};

use super::settings::{Range, check};

/// Parameters stepped with settings of their own: a learning rate scaled from the optimizer's
/// and a weight decay in place of the optimizer's. A setting a group does not give is the
/// optimizer's, as in a PyTorch parameter group.
///
/// PyTorch's `AdamW([{'params': decay}, {'params': no_decay, 'weight_decay': 0.0},
/// {'params': head, 'lr': 10 * lr}], lr=lr, weight_decay=0.1)` is
/// `Adam::with_groups(&graph, &[Group::new(&decay), Group::new(&no_decay).weight_decay(0.0),
/// Group::new(&head).lr_scale(10.0)], lr).weight_decay(0.1)`.
#[derive(Debug, Clone)]
pub struct Group {
    params: Vec<Tensor>,
    lr_scale: f64,
    weight_decay: Option<f64>,
}

impl Group {
    /// A group of `params` with the optimizer's settings.
    pub fn new(params: &[Tensor]) -> Group {
        Group {
            params: params.to_vec(),
            lr_scale: 1.0,
            weight_decay: None,
        }
    }

    /// With a learning rate `scale` times the optimizer's (at least 0). A rate given relative
    /// to the optimizer's follows it: a [`Schedule`](super::Schedule) setting the optimizer's
    /// rate moves every group's alike, as PyTorch's schedulers scale each group's initial rate.
    pub fn lr_scale(mut self, scale: f64) -> Group {
        self.lr_scale = scale;
        self
    }

    /// With weight decay `decay` (at least 0) in place of the optimizer's.
    pub fn weight_decay(mut self, decay: f64) -> Group {
        self.weight_decay = Some(decay);
        self
    }

    /// The group's parameters.
    pub fn params(&self) -> &[Tensor] {
        &self.params
    }

    /// The group's learning rate: the optimizer's `lr`, scaled (read as is at a scale of 1).
    pub(super) fn rate(&self, lr: &Tensor) -> Formula {
        if self.lr_scale == 1.0 {
            Formula::value(lr)
        } else {
            Formula::value(lr) * self.lr_scale
        }
    }

    /// The group's weight decay: its own, or the optimizer's `default`.
    pub(super) fn decay(&self, default: f64) -> f64 {
        self.weight_decay.unwrap_or(default)
    }
}

/// Every parameter of `groups`, group by group.
pub(super) fn params_of(groups: &[Group]) -> Vec<Tensor> {
    groups
        .iter()
        .flat_map(|g| g.params.iter().cloned())
        .collect()
}

/// Checks, for `owner`, each group's own settings and that no parameter is in two groups (or
/// twice in one): it would be stepped twice.
pub(super) fn check_groups(owner: &str, groups: &[Group]) -> Result<(), TensorError> {
    // Which group each parameter was first seen in: a map, as a model may have many thousands.
    let mut seen: HashMap<&Tensor, usize> = HashMap::new();
    for (i, group) in groups.iter().enumerate() {
        let setting = |name: &str| format!("group {i}'s {name}");
        check(
            owner,
            &setting("learning-rate scale"),
            group.lr_scale,
            Range::AtLeastZero,
        )?;
        if let Some(decay) = group.weight_decay {
            check(owner, &setting("weight decay"), decay, Range::AtLeastZero)?;
        }
        for w in &group.params {
            if let Some(first) = seen.get(w) {
                return Err(TensorError::new(format!(
                    "{owner}: parameter '{}' is in group {first} and again in group {i}: each \
                     parameter belongs to one group",
                    w.label()
                )));
            }
            seen.insert(w, i);
        }
    }
    Ok(())
}

/// `params` split for weight decay as PyTorch users split them (`p.ndim >= 2`): first those of
/// two axes or more (dense weights, convolution kernels, attention projections, embedding
/// tables), which weight decay applies to; then those of fewer (biases, normalization gains and
/// biases), which it should leave alone. Their axes are the ones `ctx` infers, so the model's
/// tensors must be built first (see the [module](super)'s example).
pub fn split_decay(
    ctx: &mut Context,
    params: &[Tensor],
) -> Result<(Vec<Tensor>, Vec<Tensor>), TensorError> {
    let mut decay = Vec::new();
    let mut no_decay = Vec::new();
    for p in params {
        let [batch, input, output] = ctx.rows(p)?;
        if batch.len() + input.len() + output.len() >= 2 {
            decay.push(p.clone());
        } else {
            no_decay.push(p.clone());
        }
    }
    Ok((decay, no_decay))
}
