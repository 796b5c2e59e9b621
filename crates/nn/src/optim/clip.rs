//! Clipping by the global gradient norm, shared by every optimizer.

use rcannl_ir::Binop;
use rcannl_tensor::{Formula, Graph, Tensor, TensorError, Update, cd};

use super::settings::{Range, check};
use super::state::{scalar, shared_precision};

/// Clipping by the global norm of every parameter's gradient: each gradient is scaled by
/// `min(1, max_norm / (norm + 10⁻⁶))`, as PyTorch's `clip_grad_norm_` does.
#[derive(Debug, Clone)]
pub(super) struct Clip {
    max_norm: f64,
    /// One cell: the global norm of the last step's gradients, before clipping.
    pub(super) norm: Tensor,
}

impl Clip {
    /// Clipping of `params`' gradients to `max_norm`, their norm summed in their shared
    /// precision.
    pub(super) fn new(graph: &Graph, max_norm: f64, params: &[Tensor]) -> Clip {
        Clip {
            max_norm,
            norm: scalar(graph, "gradient norm", shared_precision(params), 0.0),
        }
    }

    /// The updates computing the norm, to run before any update reading a clipped gradient.
    pub(super) fn updates(&self, params: &[Tensor]) -> Vec<Update> {
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
    pub(super) fn grad(&self, w: &Tensor) -> Formula {
        let scale = (self.max_norm / (Formula::value(&self.norm) + 1e-6))
            .binop(Binop::Min, Formula::Const(1.0));
        Formula::grad(w) * scale
    }
}

/// `w`'s gradient, clipped by `clip` if any; and the updates that must run first.
pub(super) fn gradient(clip: Option<&Clip>, w: &Tensor) -> Formula {
    clip.map_or_else(|| Formula::grad(w), |clip| clip.grad(w))
}

/// The clipping updates of `clip` (none without clipping), its setting checked for `owner`.
pub(super) fn clip_updates(
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
