//! Size rules for derived dimensions: affine (strided and convolution) axes and concatenations.
//!
//! | form | size |
//! |---|---|
//! | `s*o`, `s*o=+d*k` (padded) | `s·o` |
//! | `s*o<+d*k` (valid) | `s·(o−1) + 1 + (k−1)·d` |
//! | `a^b^…` | `a + b + …` |
//!
//! Equating a derived term with a known size solves its one unknown part when the arithmetic allows
//! (and fails when it cannot: a size not divisible by the stride, components larger than the total);
//! with more than one unknown the equation waits.

use crate::error::ShapeError;
use crate::term::{AffineDim, Basis, Dim};

/// The size of an affine axis whose parts are known.
pub(super) fn evaluate_affine(affine: &AffineDim) -> Option<Dim> {
    let over = affine.over.ground_size()?;
    let size = match &affine.conv {
        None
        | Some(crate::term::ConvDim {
            padded: true,
            kernel: _,
            dilation: _,
        }) => affine.stride.checked_mul(over)?,
        Some(conv) => {
            let kernel = conv.kernel.ground_size()?;
            valid_size(affine.stride, over, kernel, conv.dilation)?
        }
    };
    Some(like(&affine.over, size))
}

/// The total size of a concatenation whose components are known.
pub(super) fn evaluate_concat(components: &[Dim]) -> Option<Dim> {
    let mut total = 0usize;
    let mut basis = Basis::Default;
    for component in components {
        total = total.checked_add(component.ground_size()?)?;
        if let Dim::Atom {
            basis: b @ Basis::Named(_),
            ..
        } = component
        {
            basis = b.clone();
        }
    }
    Some(Dim::Atom { size: total, basis })
}

/// Equations that settle `a = b` when one side is derived, or `None` when that must wait.
pub(super) fn solve_eq(a: &Dim, b: &Dim) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let (derived, other) = match (a, b) {
        (Dim::Affine(_) | Dim::Concat(_), _) => (a, b),
        _ => (b, a),
    };
    if let Some(total) = other.ground_size() {
        return match derived {
            Dim::Affine(affine) => solve_affine(affine, total, other),
            Dim::Concat(components) => solve_concat(components, total, other),
            _ => unreachable!("one side of a derived equation is derived"),
        };
    }
    match (derived, other) {
        (Dim::Affine(x), Dim::Affine(y)) if x.conv.is_none() && y.conv.is_none() => {
            // s1·a = s2·b: divide the larger stride by the smaller.
            let (small, large) = if x.stride <= y.stride { (x, y) } else { (y, x) };
            if large.stride % small.stride != 0 {
                return Err(ShapeError::new(format!(
                    "solved dimensions for axis: unresolvable strides ({a} vs {b})"
                )));
            }
            let ratio = large.stride / small.stride;
            let scaled = if ratio == 1 {
                large.over.clone()
            } else {
                Dim::Affine(Box::new(AffineDim {
                    stride: ratio,
                    over: large.over.clone(),
                    conv: None,
                    offset: 0,
                }))
            };
            Ok(Some(vec![(small.over.clone(), scaled)]))
        }
        (Dim::Concat(xs), Dim::Concat(ys)) if xs.len() == ys.len() => {
            Ok(Some(xs.iter().cloned().zip(ys.iter().cloned()).collect()))
        }
        _ => Ok(None),
    }
}

fn solve_affine(
    affine: &AffineDim,
    total: usize,
    like_this: &Dim,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let stride = affine.stride;
    let valid = affine.conv.as_ref().filter(|conv| !conv.padded);
    let Some(conv) = valid else {
        if total % stride != 0 {
            return Err(ShapeError::new(format!(
                "solved dimensions for axis: incompatible stride ({total} is not divisible by \
                 stride {stride} in {})",
                Dim::Affine(Box::new(affine.clone()))
            )));
        }
        return Ok(Some(vec![(
            affine.over.clone(),
            like(like_this, total / stride),
        )]));
    };
    let shown = Dim::Affine(Box::new(affine.clone()));
    match (affine.over.ground_size(), conv.kernel.ground_size()) {
        (None, Some(kernel)) => {
            let span = 1 + (kernel - 1) * conv.dilation;
            if total < span || (total - span) % stride != 0 {
                return Err(ShapeError::new(format!(
                    "solved dimensions for axis: incompatible stride (input {total} does not fit \
                     kernel span {span} with stride {stride} in {shown})"
                )));
            }
            Ok(Some(vec![(
                affine.over.clone(),
                like(like_this, (total - span) / stride + 1),
            )]))
        }
        (Some(over), None) => {
            let covered = stride * over.saturating_sub(1) + 1;
            if total < covered || (total - covered) % conv.dilation != 0 {
                return Err(ShapeError::new(format!(
                    "solved dimensions for axis: cannot infer kernel dimension (input {total}, \
                     output {over}, stride {stride}, dilation {} in {shown})",
                    conv.dilation
                )));
            }
            Ok(Some(vec![(
                conv.kernel.clone(),
                Dim::size((total - covered) / conv.dilation + 1),
            )]))
        }
        _ => Ok(None),
    }
}

fn solve_concat(
    components: &[Dim],
    total: usize,
    like_this: &Dim,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let known: usize = components.iter().filter_map(Dim::ground_size).sum();
    let unknown: Vec<&Dim> = components
        .iter()
        .filter(|c| c.ground_size().is_none())
        .collect();
    if known > total {
        return Err(ShapeError::new(format!(
            "concat: components exceed the concatenated size ({} > {total})",
            Dim::Concat(components.to_vec())
        )));
    }
    match unknown.as_slice() {
        [only] => Ok(Some(vec![(
            (*only).clone(),
            like(like_this, total - known),
        )])),
        _ => Ok(None),
    }
}

fn valid_size(stride: usize, over: usize, kernel: usize, dilation: usize) -> Option<usize> {
    let span = 1 + kernel.checked_sub(1)?.checked_mul(dilation)?;
    stride.checked_mul(over.checked_sub(1)?)?.checked_add(span)
}

/// A dimension of `size` with the basis of `model` (the claim-free unit stays claim-free at 1).
fn like(model: &Dim, size: usize) -> Dim {
    match model {
        Dim::Unit if size == 1 => Dim::Unit,
        Dim::Atom { basis, .. } => Dim::Atom {
            size,
            basis: basis.clone(),
        },
        _ => Dim::size(size),
    }
}
