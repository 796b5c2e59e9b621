//! Size rules for derived dimensions: affine (strided and convolution) axes and concatenations.
//!
//! | form | size |
//! |---|---|
//! | `s*o`, `s*o=+d*k` (padded) | `s·o` |
//! | `s*o<+d*k` (valid) | `s·(o−1) + 1 + (k−1)·d` |
//! | `s*o[b,a]+d*k` (explicit) | any size `i` with `o = ⌊(i + b + a − span)/s⌋ + 1` (or `⌈…⌉`) |
//! | `a^b^…` | `a + b + …` |
//!
//! Equating a derived term with a known size solves its one unknown part when the arithmetic allows
//! (and fails when it cannot: a size not divisible by the stride, components larger than the total);
//! with more than one unknown the equation waits. A concatenation's unknown components that are all
//! one term are one unknown counted as often as it occurs: `a^a` of size 6 gives `a = 3`, and of
//! size 7 is an error. An explicitly padded axis with a stride above 1 rounds: its output size
//! follows from its input's, not the other way, so its input waits for another constraint and,
//! when nothing gives one, closing takes the smallest that fits.

use crate::error::ShapeError;
use crate::term::{AffineDim, Basis, Border, ConvDim, Dim, ExplicitPadding};
use crate::words;

/// The size of an affine axis whose parts are known, with the named basis of either part
/// (`None` also when the parts' bases conflict: [`check_bases`] reports that). A convolution's
/// axis is known only with its kernel, even padded, whose size does not depend on it: the
/// kernel's basis is part of the axis's.
pub(super) fn evaluate_affine(affine: &AffineDim) -> Option<Dim> {
    let over = affine.over.ground_size()?;
    let kernel = affine.conv.as_ref().map(|conv| &conv.kernel);
    if awaits_kernel(affine) {
        return None;
    }
    let model = named_basis(std::iter::once(&affine.over).chain(kernel)).ok()?;
    let size = match affine.conv.as_ref().map(|conv| (conv, conv.border)) {
        None | Some((_, Border::Same)) => affine.stride.checked_mul(over)?,
        Some((conv, Border::Valid)) => {
            let kernel = conv.kernel.ground_size()?;
            valid_size(affine.stride, over, kernel, conv.dilation)?
        }
        Some((conv, Border::Explicit(explicit))) if affine.stride == 1 => {
            let span = kernel_span(conv.kernel.ground_size()?, conv.dilation)?;
            let input = (over + span - 1).checked_sub(explicit.before + explicit.after)?;
            (explicit.output(input, span, 1) == Some(over)).then_some(input)?
        }
        Some((_, Border::Explicit(_))) => return None,
    };
    Some(like(model.unwrap_or(&affine.over), size))
}

/// The total size of a concatenation whose components are known, with their named basis (`None`
/// also when the components' bases conflict: [`check_bases`] reports that).
pub(super) fn evaluate_concat(components: &[Dim]) -> Option<Dim> {
    let mut total = 0usize;
    for component in components {
        total = total.checked_add(component.ground_size()?)?;
    }
    let basis = match named_basis(components.iter()).ok()? {
        Some(Dim::Atom { basis, .. }) => basis.clone(),
        _ => Basis::Default,
    };
    Some(Dim::Atom { size: total, basis })
}

/// The first atom with a named basis among `dims`, or an error naming two different ones.
fn named_basis<'d>(dims: impl Iterator<Item = &'d Dim>) -> Result<Option<&'d Dim>, [&'d Dim; 2]> {
    let mut found: Option<&Dim> = None;
    for dim in dims {
        let Dim::Atom {
            basis: basis @ Basis::Named(_),
            ..
        } = dim
        else {
            continue;
        };
        match found {
            Some(first @ Dim::Atom { basis: b, .. }) if b != basis => return Err([first, dim]),
            Some(_) => {}
            None => found = Some(dim),
        }
    }
    Ok(found)
}

/// Derived terms whose known parts carry different named bases: a strided axis over one unit
/// with a kernel in another (or in another than the axis it is `equated` with), or a
/// concatenation of components of different units.
pub(super) fn check_bases(dim: &Dim, equated: Option<&Dim>) -> Result<(), ShapeError> {
    match dim {
        Dim::Affine(affine) => check_kernel_basis(affine, equated),
        Dim::Concat(components) => match named_basis(components.iter()) {
            Err([a, b]) => Err(ShapeError::new(format!(
                "concat: conflicting dimension bases ({a} vs {b} in {})",
                words::dim(dim)
            ))),
            Ok(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Whether `dim` is an explicitly padded convolution axis with a stride above 1, whose output
/// size rounds: its input's size does not follow from its parts.
pub(super) fn rounds(dim: &Dim) -> bool {
    matches!(dim, Dim::Affine(affine) if affine.stride > 1
        && affine.conv.as_ref().is_some_and(|conv| matches!(conv.border, Border::Explicit(_))))
}

/// The smallest input size of a rounding axis (see [`rounds`]) whose parts are known, for the
/// variable `input` it is equated with when closing finds nothing else to size that input by.
pub(super) fn smallest_input(input: &Dim, axis: &Dim) -> Option<(crate::term::DimVar, usize)> {
    let (Dim::Var(var), Dim::Affine(affine)) = (input, axis) else {
        return None;
    };
    let conv = affine.conv.as_ref()?;
    let Border::Explicit(explicit) = conv.border else {
        return None;
    };
    let over = affine.over.ground_size()?;
    let span = kernel_span(conv.kernel.ground_size()?, conv.dilation)?;
    let stride = affine.stride;
    let exact = (stride.checked_mul(over.checked_sub(1)?)? + span)
        .saturating_sub(explicit.before + explicit.after);
    let lowest = exact.saturating_sub(stride - 1).max(1);
    (lowest..=exact.max(1))
        .find(|input| explicit.output(*input, span, stride) == Some(over))
        .map(|input| (*var, input))
}

/// Whether `affine` is a convolution whose kernel is not known yet.
pub(super) fn awaits_kernel(affine: &AffineDim) -> bool {
    affine
        .conv
        .as_ref()
        .is_some_and(|conv| !conv.kernel.is_ground())
}

/// A convolution's kernel slides over its input axis in the input's unit: a kernel whose named
/// basis differs from that of the output axis (its positions are the input's, strided) or of the
/// `input` axis the term is equated with is an error. A default basis beside a named one is not,
/// as in a concatenation.
fn check_kernel_basis(affine: &AffineDim, input: Option<&Dim>) -> Result<(), ShapeError> {
    let Some(
        kernel @ Dim::Atom {
            basis: kernel_basis @ Basis::Named(_),
            ..
        },
    ) = affine.conv.as_ref().map(|conv| &conv.kernel)
    else {
        return Ok(());
    };
    let others = [(input, "input axis"), (Some(&affine.over), "output axis")];
    let conflict = others.into_iter().find_map(|(dim, role)| match dim {
        Some(
            dim @ Dim::Atom {
                basis: basis @ Basis::Named(_),
                ..
            },
        ) if basis != kernel_basis => Some((dim, role)),
        _ => None,
    });
    let Some((other, role)) = conflict else {
        return Ok(());
    };
    let term = Dim::Affine(Box::new(affine.clone()));
    let equated = input.map_or(String::new(), |input| format!(" = {}", words::dim(input)));
    let term = words::dim(&term);
    Err(ShapeError::new(format!(
        "convolution: conflicting dimension bases between stride and kernel: the kernel {kernel} \
         against the {role} {other} (in {term}{equated})"
    )))
}

/// Equations that settle `a = b` when one side is derived, or `None` when that must wait.
///
/// A part that the arithmetic gives size 1 waits too, unless `settle_units`: size alone does not
/// tell the explicit `1` from the claim-free `1*`, and another constraint may say which it is.
/// Closing settles what is still waiting (see `closing::Solver::close_pending_sizes`).
pub(super) fn solve_eq(
    a: &Dim,
    b: &Dim,
    settle_units: bool,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let (derived, other) = match (a, b) {
        (Dim::Affine(_) | Dim::Concat(_), _) => (a, b),
        _ => (b, a),
    };
    if let Some(total) = other.ground_size() {
        let equations = match derived {
            Dim::Affine(affine) => solve_affine(affine, total, other)?,
            Dim::Concat(components) => solve_concat(components, total, other)?,
            _ => unreachable!("one side of a derived equation is derived"),
        };
        let ambiguous_unit =
            |(part, value): &(Dim, Dim)| !part.is_ground() && *value == Dim::size(1);
        return Ok(equations.filter(|eqs| settle_units || !eqs.iter().any(ambiguous_unit)));
    }
    match (derived, other) {
        (Dim::Affine(x), Dim::Affine(y)) if x.conv.is_none() && y.conv.is_none() => {
            // s1·a = s2·b: divide the larger stride by the smaller.
            let (small, large) = if x.stride <= y.stride { (x, y) } else { (y, x) };
            if large.stride % small.stride != 0 {
                return Err(ShapeError::new(format!(
                    "strides that cannot meet: {} and {} (the larger stride is not a multiple of the \
                     smaller)",
                    words::dim(a),
                    words::dim(b)
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
        _ => Ok(None),
    }
}

fn solve_affine(
    affine: &AffineDim,
    total: usize,
    like_this: &Dim,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    check_kernel_basis(affine, Some(like_this))?;
    let stride = affine.stride;
    let valid = affine
        .conv
        .as_ref()
        .filter(|conv| conv.border != Border::Same);
    let Some(conv) = valid else {
        if !total.is_multiple_of(stride) {
            return Err(ShapeError::new(format!(
                "incompatible stride ({total} is not divisible by \
                 stride {stride} in {})",
                words::dim(&Dim::Affine(Box::new(affine.clone())))
            )));
        }
        return Ok(Some(vec![(
            affine.over.clone(),
            like(like_this, total / stride),
        )]));
    };
    let shown = words::dim(&Dim::Affine(Box::new(affine.clone())));
    if let Border::Explicit(explicit) = conv.border {
        return solve_explicit(affine, conv, explicit, total, like_this, &shown);
    }
    match (affine.over.ground_size(), conv.kernel.ground_size()) {
        (None, Some(kernel)) => {
            let Some(span) = kernel_span(kernel, conv.dilation) else {
                return Err(empty_kernel(&shown));
            };
            if total < span || !(total - span).is_multiple_of(stride) {
                return Err(ShapeError::new(format!(
                    "incompatible stride (input {total} does not fit \
                     kernel span {span} with stride {stride} in {shown})"
                )));
            }
            Ok(Some(vec![(
                affine.over.clone(),
                like(like_this, (total - span) / stride + 1),
            )]))
        }
        (Some(over), None) => {
            let covered = stride
                .saturating_mul(over.saturating_sub(1))
                .saturating_add(1);
            if total < covered || !(total - covered).is_multiple_of(conv.dilation) {
                return Err(ShapeError::new(format!(
                    "cannot infer kernel dimension (input {total}, \
                     output {over}, stride {stride}, dilation {} in {shown})",
                    conv.dilation
                )));
            }
            Ok(Some(vec![(
                conv.kernel.clone(),
                Dim::size((total - covered) / conv.dilation + 1),
            )]))
        }
        (Some(_), Some(0)) => Err(empty_kernel(&shown)),
        (Some(0), Some(_)) => Err(ShapeError::new(format!(
            "a valid convolution needs at least one output position \
             ({shown})"
        ))),
        _ => Ok(None),
    }
}

/// [`solve_affine`] for an explicitly padded axis over `total` input positions: the output from
/// the kernel, or, at stride 1 where nothing rounds, the kernel from the output.
fn solve_explicit(
    affine: &AffineDim,
    conv: &ConvDim,
    explicit: ExplicitPadding,
    total: usize,
    like_this: &Dim,
    shown: &str,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let padded = total + explicit.before + explicit.after;
    match (affine.over.ground_size(), conv.kernel.ground_size()) {
        (_, Some(kernel)) => {
            let Some(span) = kernel_span(kernel, conv.dilation) else {
                return Err(empty_kernel(shown));
            };
            let Some(output) = explicit.output(total, span, affine.stride) else {
                return Err(ShapeError::new(format!(
                    "the kernel span {span} is wider than the input {total} with its padding \
                     ({padded} positions in {shown})"
                )));
            };
            if output == 0 {
                return Err(ShapeError::new(format!(
                    "no window starts inside the input {total} or its left padding ({shown})"
                )));
            }
            Ok(Some(vec![(affine.over.clone(), like(like_this, output))]))
        }
        (Some(over), None) if affine.stride == 1 && !explicit.ceil => {
            let span = (padded + 1).checked_sub(over).filter(|span| *span > 0);
            let kernel = span
                .filter(|span| (span - 1).is_multiple_of(conv.dilation))
                .map(|span| (span - 1) / conv.dilation + 1);
            match kernel {
                Some(kernel) => Ok(Some(vec![(conv.kernel.clone(), Dim::size(kernel))])),
                None => Err(ShapeError::new(format!(
                    "cannot infer kernel dimension (input {total} padded to {padded}, output \
                     {over}, dilation {} in {shown})",
                    conv.dilation
                ))),
            }
        }
        _ => Ok(None),
    }
}

fn empty_kernel(shown: &str) -> ShapeError {
    ShapeError::new(format!(
        "a convolution kernel needs at least one position ({shown})"
    ))
}

/// The input positions one output position of a valid convolution reads, `1 + (k−1)·d`.
fn kernel_span(kernel: usize, dilation: usize) -> Option<usize> {
    kernel.checked_sub(1)?.checked_mul(dilation)?.checked_add(1)
}

fn solve_concat(
    components: &[Dim],
    total: usize,
    like_this: &Dim,
) -> Result<Option<Vec<(Dim, Dim)>>, ShapeError> {
    let share = unknown_share(components, total)?;
    if let Err([a, b]) = named_basis(components.iter().chain([like_this])) {
        return Err(ShapeError::new(format!(
            "concat: conflicting dimension bases ({a} vs {b} in {} = {})",
            words::dim(&Dim::Concat(components.to_vec())),
            words::dim(like_this)
        )));
    }
    match share {
        // A named total with a known component already of that basis says nothing about the
        // unknown one's basis (the named one wins either way): closing gives it its size.
        Some(_) if basis_shared(like_this, components) => Ok(None),
        Some((term, size)) => Ok(Some(vec![(term.clone(), like(like_this, size))])),
        None => Ok(None),
    }
}

/// What a concatenation of `total` positions says of its unknown components. When they are all
/// one term (`a` twice in `a^a^2`), the positions the known components leave are that term's
/// copies end to end: its size is their number divided by its count. `None` when there is no
/// unknown component or there are different ones: the equation waits. An error when no size
/// fits: the known components exceed the total, or what they leave does not split evenly.
fn unknown_share(components: &[Dim], total: usize) -> Result<Option<(&Dim, usize)>, ShapeError> {
    let known: usize = components.iter().filter_map(Dim::ground_size).sum();
    let shown = || words::dim(&Dim::Concat(components.to_vec()));
    let Some(rest) = total.checked_sub(known) else {
        return Err(ShapeError::new(format!(
            "concat: components exceed the concatenated size ({} > {total})",
            shown()
        )));
    };
    let Some((term, copies)) = repeated_unknown(components) else {
        return Ok(None);
    };
    if !rest.is_multiple_of(copies) {
        return Err(ShapeError::new(format!(
            "concat: the size {total} does not split evenly among {} ({copies} equal unknown \
             components sharing {rest} positions)",
            shown()
        )));
    }
    Ok(Some((term, rest / copies)))
}

/// The one term that every unknown component of a concatenation is, and how many components
/// it is; `None` without unknown components or with two different ones.
fn repeated_unknown(components: &[Dim]) -> Option<(&Dim, usize)> {
    let mut unknown = components.iter().filter(|c| !c.is_ground());
    let term = unknown.next()?;
    let copies = unknown.try_fold(1, |copies, other| (other == term).then_some(copies + 1))?;
    Some((term, copies))
}

fn basis_shared(total: &Dim, components: &[Dim]) -> bool {
    match total {
        Dim::Atom {
            basis: basis @ Basis::Named(_),
            ..
        } => components
            .iter()
            .any(|c| matches!(c, Dim::Atom { basis: b, .. } if b == basis)),
        _ => false,
    }
}

/// The variable that every unknown component of `concat` is, and its size, when `total` gives
/// the concatenation a size (see [`unknown_share`]): what closing binds it to when its basis is
/// still open.
pub(super) fn missing_component(
    concat: &Dim,
    total: &Dim,
) -> Result<Option<(crate::term::DimVar, usize)>, ShapeError> {
    let (Dim::Concat(components), Some(total)) = (concat, total.ground_size()) else {
        return Ok(None);
    };
    Ok(match unknown_share(components, total)? {
        Some((Dim::Var(var), size)) => Some((*var, size)),
        _ => None,
    })
}

fn valid_size(stride: usize, over: usize, kernel: usize, dilation: usize) -> Option<usize> {
    let span = kernel_span(kernel, dilation)?;
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
