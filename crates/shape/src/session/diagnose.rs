//! Saying in the user's terms why an operation's shapes do not fit: which label of the spec, in
//! which operands, on which axis.
//!
//! The solver only sees dimensions, so its errors say what clashed (`an axis must be both of size 4
//! and of size 5`) but not where it came from. When an operation fails, the session reads the
//! operation again here, against its tensors' shapes as they were before it (the solver has been
//! rebuilt without it): every labelled axis of a spec is placed on the axis of the tensor it
//! stands for, and two places of one label with different known sizes are the clash, named by the
//! label, the slots and the tensors' labels. Pointwise operations are read the same way, each
//! operand's axes against the others' as broadcasting aligns them. Where nothing direct is found
//! (a clash through a derived axis, or with what earlier operations decided), the solver's own
//! words stand.

use crate::logic::Logic;
use crate::spec::{AxisSpec, Kind, RowSpec};
use crate::term::{Dim, Row, Shape};
use crate::words;

/// A tensor of the failed operation: its label and its shape as known before it.
pub(super) struct Placed<'a> {
    pub label: &'a str,
    pub shape: Shape,
}

/// One axis of a tensor: where it is and what is known of its size.
struct Site {
    /// `the first operand 'a'`, `the result 'c'`.
    tensor: String,
    kind: Kind,
    /// `axis 1`, `axis 0 from the end`.
    position: String,
    dim: Dim,
}

impl Site {
    fn describe(&self) -> String {
        format!("{} ({} {})", self.tensor, self.kind, self.position)
    }
}

/// What went wrong, in words, when it can be told from the operation and its tensors.
pub(super) fn diagnose(
    logic: &Logic,
    result: &Placed<'_>,
    operands: &[Placed<'_>],
) -> Option<String> {
    match logic {
        Logic::Spec(spec) | Logic::Block(spec) => {
            let tensors = operands
                .iter()
                .enumerate()
                .map(|(i, t)| (operand_name(i, t.label), &t.shape))
                .chain(std::iter::once((
                    format!("the result '{}'", result.label),
                    &result.shape,
                )));
            let slots = spec.rhs.iter().chain(std::iter::once(&spec.lhs));
            let mut labelled: Vec<(&str, Site)> = Vec::new();
            let mut spans: Vec<Span> = Vec::new();
            for ((tensor, shape), slot) in tensors.zip(slots) {
                for (kind, row_spec) in slot.rows() {
                    let row = shape.row(kind);
                    if let Some(problem) = count_clash(&tensor, kind, row_spec, row) {
                        return Some(format!("{logic}: {problem}"));
                    }
                    labelled.extend(place(&tensor, kind, row_spec, row));
                    spans.extend(span(&tensor, kind, row_spec, row));
                }
            }
            label_clash(&labelled)
                .or_else(|| span_clash(&spans))
                .map(|clash| format!("{logic}: {clash}"))
        }
        Logic::Pointwise(_) => broadcast_clash(operands).map(|clash| format!("{logic}: {clash}")),
        _ => None,
    }
}

/// `the second operand 'b'`.
fn operand_name(index: usize, label: &str) -> String {
    format!("the {} operand '{label}'", words::ordinal(index))
}

/// A tensor row that cannot have as many axes as its slot's row names.
fn count_clash(tensor: &str, kind: Kind, spec: &RowSpec, row: &Row) -> Option<String> {
    let named = spec.leading.len() + spec.trailing.len();
    let has = row.n_explicit();
    let clash = match (spec.row_var.is_some(), row.var.is_some()) {
        (false, false) => has != named,
        (true, false) => has < named,
        _ => false,
    };
    let axes = |n: usize| if n == 1 { "axis" } else { "axes" };
    clash.then(|| {
        let at_least = if spec.row_var.is_some() {
            "at least "
        } else {
            ""
        };
        format!(
            "{tensor} has {has} {kind} {} but its slot in the spec names {at_least}{named} ({})",
            axes(has),
            row_spec_text(spec)
        )
    })
}

/// The row of a slot as the spec writes it.
fn row_spec_text(spec: &RowSpec) -> String {
    let slot = crate::spec::SlotSpec {
        output: spec.clone(),
        ..Default::default()
    };
    match slot.to_string() {
        text if text.is_empty() => "no axes".to_owned(),
        text => format!("`{}`", text.trim_end_matches(',')),
    }
}

/// The labelled axes of a slot's row placed on the tensor's row: leading axes from the front,
/// trailing ones from the back (all of them when the tensor's row is known to its end).
fn place<'s>(tensor: &str, kind: Kind, spec: &'s RowSpec, row: &Row) -> Vec<(&'s str, Site)> {
    let flat: Vec<Dim> = row.dims().cloned().collect();
    let closed = row.var.is_none();
    let mut placed = Vec::new();
    let mut add = |axis: &'s AxisSpec, position: String, dim: &Dim| {
        if let AxisSpec::Label { name } = axis {
            placed.push((
                name.as_str(),
                Site {
                    tensor: tensor.to_owned(),
                    kind,
                    position,
                    dim: dim.clone(),
                },
            ));
        }
    };
    let front: &[Dim] = if closed { &flat } else { &row.leading };
    for (i, (axis, dim)) in spec.leading.iter().zip(front).enumerate() {
        add(axis, format!("axis {i}"), dim);
    }
    let back: &[Dim] = if closed { &flat } else { &row.trailing };
    let n_back = spec.trailing.len().min(back.len());
    let pairs = spec.trailing[spec.trailing.len() - n_back..]
        .iter()
        .zip(&back[back.len() - n_back..]);
    for (i, (axis, dim)) in pairs.enumerate() {
        let from_end = n_back - i - 1;
        let position = if closed {
            format!("axis {}", flat.len() - from_end - 1)
        } else if from_end == 0 {
            "last axis".to_owned()
        } else {
            format!("axis {from_end} from the end")
        };
        add(axis, position, dim);
    }
    placed
}

/// The axes a row variable of the spec stands for in one tensor row known to its end.
struct Span {
    /// `...` or `..name..`, as the spec writes it, and the name it has in this row.
    written: String,
    name: String,
    tensor: String,
    kind: Kind,
    /// The position of its first axis in the row.
    start: usize,
    dims: Vec<Dim>,
}

/// The row variable's axes in `row`, when the row is known to its end.
fn span(tensor: &str, kind: Kind, spec: &RowSpec, row: &Row) -> Option<Span> {
    let var = spec.row_var.as_ref()?;
    if row.var.is_some() {
        return None;
    }
    let flat: Vec<Dim> = row.dims().cloned().collect();
    let end = flat.len().checked_sub(spec.trailing.len())?;
    let start = spec.leading.len();
    let written = match var {
        crate::spec::RowVar::Ellipsis => "...".to_owned(),
        crate::spec::RowVar::Named(name) => format!("..{name}.."),
    };
    Some(Span {
        written,
        name: var.name_in(kind).to_owned(),
        tensor: tensor.to_owned(),
        kind,
        start,
        dims: flat.get(start..end)?.to_vec(),
    })
}

/// The first row variable standing for different axes in two tensors: a different number of
/// them, or two of different known sizes at one position.
fn span_clash(spans: &[Span]) -> Option<String> {
    for (i, first) in spans.iter().enumerate() {
        for second in spans[i + 1..].iter().filter(|s| s.name == first.name) {
            let written = &first.written;
            if first.dims.len() != second.dims.len() {
                let axes = |n: usize| {
                    if n == 1 {
                        "1 axis".to_owned()
                    } else {
                        format!("{n} axes")
                    }
                };
                return Some(format!(
                    "`{written}` stands for {} in {} ({} row) but {} in {} ({} row)",
                    axes(first.dims.len()),
                    first.tensor,
                    first.kind,
                    axes(second.dims.len()),
                    second.tensor,
                    second.kind
                ));
            }
            let clash = first
                .dims
                .iter()
                .zip(&second.dims)
                .position(|(a, b)| a.is_ground() && b.is_ground() && a != b);
            if let Some(at) = clash {
                return Some(format!(
                    "`{written}` has an axis of size {} in {} ({} axis {}) but {} in {} ({} axis \
                     {})",
                    words::dim(&first.dims[at]),
                    first.tensor,
                    first.kind,
                    first.start + at,
                    words::dim(&second.dims[at]),
                    second.tensor,
                    second.kind,
                    second.start + at
                ));
            }
        }
    }
    None
}

/// The first label placed on two axes of different known sizes.
fn label_clash(labelled: &[(&str, Site)]) -> Option<String> {
    for (i, (label, first)) in labelled.iter().enumerate() {
        let Some(size) = first.dim.ground_size() else {
            continue;
        };
        let other = labelled[i + 1..].iter().find(|(other_label, site)| {
            other_label == label && site.dim.is_ground() && site.dim != first.dim
        });
        if let Some((_, second)) = other {
            let detail = if second.dim.ground_size() == Some(size) {
                " (the same size with different bases)"
            } else {
                ""
            };
            return Some(format!(
                "label `{label}` is {} in {} but {} in {}{detail}",
                words::dim(&first.dim),
                first.describe(),
                words::dim(&second.dim),
                second.describe()
            ));
        }
    }
    None
}

/// Two operands' axes that broadcasting aligns (rows aligned at their ends) and that have
/// different known sizes, neither the unit `1*`.
fn broadcast_clash(operands: &[Placed<'_>]) -> Option<String> {
    for kind in Kind::ALL {
        let rows: Vec<Vec<Dim>> = operands
            .iter()
            .map(|t| t.shape.row(kind))
            // Known to their ends and without a broadcast point inside, rows align at their ends.
            .filter(|row| row.var.is_none() && row.leading.is_empty())
            .map(|row| row.dims().cloned().collect())
            .collect();
        if rows.len() != operands.len() {
            continue;
        }
        for (i, a) in rows.iter().enumerate() {
            for (j, b) in rows.iter().enumerate().skip(i + 1) {
                let aligned = a.iter().rev().zip(b.iter().rev()).enumerate();
                for (from_end, (x, y)) in aligned {
                    let clash = x.is_ground()
                        && y.is_ground()
                        && x != y
                        && *x != Dim::Unit
                        && *y != Dim::Unit;
                    if clash {
                        return Some(format!(
                            "{} axis {} of {} has size {} and {} axis {} of {} has size {}: they \
                             do not broadcast to one size (only equal sizes, or the unit 1* \
                             beside any size, do)",
                            kind,
                            a.len() - from_end - 1,
                            operand_name(i, operands[i].label),
                            words::dim(x),
                            kind,
                            b.len() - from_end - 1,
                            operand_name(j, operands[j].label),
                            words::dim(y)
                        ));
                    }
                }
            }
        }
    }
    None
}
