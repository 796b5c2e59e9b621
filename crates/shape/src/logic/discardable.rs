//! Discardable labels: the concatenation components that may close to zero, because every axis
//! they stand on is covered by a sibling component.

use std::collections::BTreeSet;

use crate::spec::{AxisSpec, ConcatComponent, EinsumSpec, SlotSpec};

/// The labels of `spec`'s concatenation components that may be the empty summand, in order of
/// first appearance.
///
/// The LHS is one side of the spec, the RHS slots together the other. A label `v` that is a
/// component of a concatenated axis on one side is discardable iff *every* slot of the other side
/// has an axis *all* of whose components are among the other components of `v`'s concatenation
/// (a plain label axis has one component; an affine axis is one component, covered when its over
/// or kernel label is among them; `_`, a fixed index and an integer component are never covered).
/// So in `a^b => a` the label `b` is discardable (the result is covered by `a` alone), in
/// `a^b => a^b` nothing is, and in `a; b => a^b^c` `c` is (each operand is covered by `a` or `b`).
/// Integer components have no label and so are never in the result.
pub fn discardable_labels(spec: &EinsumSpec) -> Vec<&str> {
    let lhs = [&spec.lhs];
    let rhs: Vec<&SlotSpec> = spec.rhs.iter().collect();
    let mut found = BTreeSet::new();
    for (side, other) in [(&lhs[..], &rhs[..]), (&rhs[..], &lhs[..])] {
        for axis in side.iter().flat_map(|slot| slot_axes(slot)) {
            let AxisSpec::Concat { components } = axis else {
                continue;
            };
            for (i, component) in components.iter().enumerate() {
                let ConcatComponent::Label { name } = component else {
                    continue;
                };
                let siblings: BTreeSet<&str> = components
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .filter_map(|(_, c)| component_label(c))
                    .collect();
                let covers_slot =
                    |slot: &&SlotSpec| slot_axes(slot).any(|axis| axis_covered_by(axis, &siblings));
                // A component the other side names is carried through, not discarded.
                let named_on_other_side = other
                    .iter()
                    .flat_map(|slot| slot_axes(slot))
                    .any(|axis| axis.dim_labels().contains(&name.as_str()));
                if !named_on_other_side && other.iter().all(covers_slot) {
                    found.insert(name.as_str());
                }
            }
        }
    }
    spec.dim_labels()
        .into_iter()
        .filter(|name| found.contains(name))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The quantifier test for discardable components
// ---------------------------------------------------------------------------------------------

fn slot_axes(slot: &SlotSpec) -> impl Iterator<Item = &AxisSpec> {
    slot.rows().flat_map(|(_, row)| row.axes())
}

fn component_label(component: &ConcatComponent) -> Option<&str> {
    match component {
        ConcatComponent::Label { name } => Some(name),
        ConcatComponent::Size { .. } => None,
    }
}

/// True when the axis has components and each one names a label of `siblings`.
fn axis_covered_by(axis: &AxisSpec, siblings: &BTreeSet<&str>) -> bool {
    let covered = |name: &str| siblings.contains(name);
    match axis {
        AxisSpec::Label { name } => covered(name),
        AxisSpec::Anonymous | AxisSpec::Fixed { .. } => false,
        AxisSpec::Affine(affine) => {
            covered(&affine.over)
                || affine
                    .conv
                    .as_ref()
                    .is_some_and(|conv| covered(&conv.kernel))
        }
        AxisSpec::Concat { components } => {
            !components.is_empty()
                && components
                    .iter()
                    .all(|c| component_label(c).is_some_and(covered))
        }
    }
}
