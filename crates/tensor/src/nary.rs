//! Einsums of any number of operands, split into binary contractions along a cheap path, and the
//! numpy notation (`"ij,jk->ik"`) translated to ours.
//!
//! Operands' slots hold labels and row variables, in any rows (`"...|j->i; ...|k->j => ...|k->i"`).
//! A row variable counts as one label whose size is the product of the axes it stands for; an
//! intermediate result holds its labels as output axes and each row variable it still needs in
//! a row of its own (the row the result has it in, when free). numpy's notation is read, checked
//! and broadcast as numpy's einsum does (`numpy.rs`): an axis of 1 facing a longer one under the
//! same label, or under `...`, takes a label of its own, which the path sums away first.
//!
//! The path search works on label sets: each step contracts two operands into one
//! holding the labels still needed (by another operand or the result). Labels only one operand
//! has, and the result does not, are summed out of that operand first. Up to [`EXHAUSTIVE_UP_TO`]
//! operands the search is dynamic programming over subsets (the cheapest split of every subset, as
//! optimal as the cost model; up to [`OPTIMAL_UP_TO`] when asked for); beyond, the cheapest path
//! of several searches, each within a fixed work budget: two greedy ones (one step for step
//! opt_einsum's, so never costlier than it), dynamic programming over connected subgraphs (exact
//! for chains and rings), and local improvement of the best. The cost of a step is its count
//! of floating-point operations: one multiply per point of its product space (the product of the
//! sizes of every label either operand has), plus one add per point when the step sums a label
//! away; a single-operand sum costs one add per point. Each step is an ordinary binary einsum, so
//! it is shape-inferred, differentiated, and run as a matrix product by the backends when it has
//! that shape. Planning and building the steps count labels' holders as they go, so an einsum of
//! n operands of a few labels each is built in n log n time.

mod numpy;
mod path;
mod pending;
mod result_type;

use std::collections::{BTreeSet, HashMap};

use numpy::Equation;
pub use numpy::{numpy_to_ours, numpy_to_ours_for};
pub use path::{EXHAUSTIVE_UP_TO, OPTIMAL_UP_TO, Path, PathError, PathOptions, Search, find_path};
use pending::Pending;

use rcannl_shape::spec::{AxisSpec, EinsumSpec, Kind, RowSpec, RowVar, SlotSpec, parse_einsum};

use crate::capture::record_path_steps;
use crate::graph::{TensorError, error};
use crate::tensor::Tensor;

/// The key a row variable goes by among labels: `..name..`, which no label can be. `...` takes its
/// kind's name (`..batch..`), so that a step's spec may place it in any row.
fn row_key(var: &RowVar, kind: Kind) -> String {
    format!("..{}..", var.name_in(kind))
}

fn is_row_key(item: &str) -> bool {
    item.starts_with("..")
}

/// The rows in the order a tensor lays out its axes.
const LAYOUT: [Kind; 3] = [Kind::Batch, Kind::Output, Kind::Input];

/// The items of a slot of labels and row variables, in layout order: labels by name, row
/// variables by [`row_key`]. The result may also hold fixed positions (`0` for a scalar result),
/// which carry no item.
fn slot_items(slot: &SlotSpec, is_result: bool) -> Option<Vec<String>> {
    let mut items = Vec::new();
    for kind in LAYOUT {
        let row: &RowSpec = slot.row(kind);
        let label = |axis: &AxisSpec| match axis {
            AxisSpec::Label { name } => Some(Some(name.clone())),
            AxisSpec::Fixed { .. } if is_result => Some(None),
            _ => None,
        };
        for axis in &row.leading {
            items.extend(label(axis)?);
        }
        if let Some(var) = &row.row_var {
            items.push(row_key(var, kind));
        }
        for axis in &row.trailing {
            items.extend(label(axis)?);
        }
    }
    Some(items)
}

/// `slot` with every `...` written by its name, as [`row_key`] names it.
fn with_named_rows(slot: &SlotSpec) -> SlotSpec {
    let mut slot = slot.clone();
    for kind in Kind::ALL {
        let row = slot.row_mut(kind);
        if row.row_var == Some(RowVar::Ellipsis) {
            row.row_var = Some(RowVar::Named(kind.ellipsis_name().to_owned()));
        }
    }
    slot
}

/// The slot of an intermediate holding `items`: the labels as output axes, in order, and each row
/// variable in a row of its own, the row it has in the result (else in the first operand having
/// it) when that one is free. `None` when more than three row variables meet.
fn intermediate_slot(items: &[String], homes: &HashMap<String, Kind>) -> Option<SlotSpec> {
    let vars: Vec<&String> = items.iter().filter(|i| is_row_key(i)).collect();
    let mut rows: Vec<(Kind, &String)> = Vec::new();
    for var in &vars {
        if let Some(&home) = homes.get(*var)
            && rows.iter().all(|(k, _)| *k != home)
        {
            rows.push((home, var));
        }
    }
    for var in &vars {
        if rows.iter().all(|(_, v)| v != var) {
            let free = LAYOUT
                .into_iter()
                .find(|kind| rows.iter().all(|(k, _)| k != kind))?;
            rows.push((free, var));
        }
    }
    let labels: Vec<AxisSpec> = items
        .iter()
        .filter(|i| !is_row_key(i))
        .map(AxisSpec::label)
        .collect();
    let mut slot = SlotSpec::default();
    for (kind, var) in rows {
        let name = var[2..var.len() - 2].to_owned();
        *slot.row_mut(kind) = RowSpec::open(Vec::new(), RowVar::Named(name), Vec::new());
    }
    slot.output.trailing = labels;
    Some(slot)
}

impl Tensor {
    /// An einsum of any number of operands in our notation (`"ij;jk;kl=>il"`; slots of labels
    /// and row variables, with kinds), split into binary contractions along the cheapest path
    /// (see the module documentation). Its path is [`Tensor::einsum_path`].
    pub fn einsum_n(spec: &str, operands: &[&Tensor]) -> Tensor {
        Tensor::einsum_n_with(spec, operands, &PathOptions::default())
    }

    /// [`Tensor::einsum_n`] along the path found under `options`.
    pub fn einsum_n_with(spec: &str, operands: &[&Tensor], options: &PathOptions) -> Tensor {
        match plan(spec, operands, options) {
            Ok((parsed, labels, path)) => contract(&parsed, &labels, &path, operands)
                .unwrap_or_else(|e| operands[0].graph.failed(e)),
            Err(e) => match operands.first() {
                Some(t) => t.graph.failed(e),
                None => crate::graph::Graph::new().failed(e),
            },
        }
    }

    /// The path [`Tensor::einsum_n`] takes for `spec` over `operands`, with its cost.
    pub fn einsum_path(spec: &str, operands: &[&Tensor]) -> Result<Path, TensorError> {
        Tensor::einsum_path_with(spec, operands, &PathOptions::default())
    }

    /// The path [`Tensor::einsum_n_with`] takes under `options`.
    pub fn einsum_path_with(
        spec: &str,
        operands: &[&Tensor],
        options: &PathOptions,
    ) -> Result<Path, TensorError> {
        plan(spec, operands, options).map(|(_, _, path)| path)
    }

    /// An einsum in numpy's notation: `"ij,jk->ik"`, `"...ij,...jk->...ik"` (`...` anywhere in an
    /// operand, broadcasting as numpy's does: aligned at the right), an implicit result
    /// (`"ij,jk"`: the labels seen once, in code-point order), repeated labels (`"ii->i"`), a
    /// scalar result without axes (`"i->"`), labels that are letters of any script (`"αβ,βγ"`).
    /// Operands' axes are their output axes; where they are known, a label's axis of 1 broadcasts
    /// against the others' as in numpy, and an equation numpy refuses (a wrong number of labels
    /// or operands, sizes that do not broadcast, a result's label no operand has; see
    /// [`numpy_to_ours_for`]) gives a failed tensor whose error names the label and operand.
    pub fn einsum_np(spec: &str, operands: &[&Tensor]) -> Tensor {
        Tensor::einsum_np_with(spec, operands, &PathOptions::default())
    }

    /// [`Tensor::einsum_np`] along the path found under `options`.
    pub fn einsum_np_with(spec: &str, operands: &[&Tensor], options: &PathOptions) -> Tensor {
        let axes: Vec<Option<Vec<usize>>> = operands.iter().map(|t| t.numpy_axes()).collect();
        let translated = Equation::parse(spec).and_then(|equation| equation.for_operands(&axes));
        match translated {
            // Even two operands take the path, whose single-operand sums can save most of the
            // work (`"ijk,kl->il"`).
            Ok(ours) => {
                let precisions: Vec<_> = operands.iter().map(|t| t.precision()).collect();
                let target = match result_type::numpy_result_type(&precisions) {
                    Ok(target) => target,
                    Err(k) => {
                        return operands[k].graph.failed(error(format!(
                            "numpy einsum {spec:?}: operand {} ('{}') holds 128-bit random \
                             words, which have no numpy type",
                            k + 1,
                            operands[k].label()
                        )));
                    }
                };
                // Operands computed in numpy's result type (int32 with float32 in float64):
                // each step then promotes to it.
                let cast: Vec<Tensor> = operands
                    .iter()
                    .map(|&t| match target {
                        Some(p) if p != t.precision() => t.cast(p),
                        _ => t.clone(),
                    })
                    .collect();
                let operands: Vec<&Tensor> = cast.iter().collect();
                match operands.len() {
                    1 => operands[0].einsum1(&ours),
                    _ => Tensor::einsum_n_with(&ours, &operands, options),
                }
            }
            Err(e) => match operands.first() {
                Some(t) => t.graph.failed(e),
                None => crate::graph::Graph::new().failed(e),
            },
        }
    }
}

impl Tensor {
    /// The sizes of this tensor's axes when all are known and all are output axes, as numpy
    /// sees an array.
    fn numpy_axes(&self) -> Option<Vec<usize>> {
        let state = self.graph.state.lock();
        let shape = state.inference.shape(state.tensors[self.index].shape);
        let mut axes = Vec::new();
        for kind in Kind::ALL {
            let row = shape.row(kind);
            if row.var.is_some() || (kind != Kind::Output && row.dims().next().is_some()) {
                return None;
            }
            if kind == Kind::Output {
                for dim in row.dims() {
                    axes.push(dim.ground_size()?);
                }
            }
        }
        Some(axes)
    }
}

/// For each operand, the items it alone has and the result lacks (`items` holds every operand's,
/// then the result's), which are summed out of it before the path; none for a lone operand.
fn alone_items(items: &[Vec<String>]) -> Vec<BTreeSet<String>> {
    let n = items.len() - 1;
    if n < 2 {
        return vec![BTreeSet::new(); n];
    }
    let result: BTreeSet<&String> = items[n].iter().collect();
    let mut holders: HashMap<&String, usize> = HashMap::new();
    for operand in &items[..n] {
        for item in operand.iter().collect::<BTreeSet<_>>() {
            *holders.entry(item).or_default() += 1;
        }
    }
    items[..n]
        .iter()
        .map(|operand| {
            operand
                .iter()
                .filter(|l| holders[l] == 1 && !result.contains(l))
                .cloned()
                .collect()
        })
        .collect()
}

/// The parsed spec, each operand's items (and the result's, last), and the path.
fn plan(
    spec: &str,
    operands: &[&Tensor],
    options: &PathOptions,
) -> Result<(EinsumSpec, Vec<Vec<String>>, Path), TensorError> {
    let parsed = parse_einsum(spec).map_err(|e| error(format!("einsum {spec:?}: {e}")))?;
    if parsed.arity() != operands.len() {
        return Err(error(format!(
            "einsum {spec:?} takes {} operands, {} given",
            parsed.arity(),
            operands.len()
        )));
    }
    if let Some(first) = operands.first() {
        first
            .graph
            .check_owns(&format!("einsum {spec:?}"), operands)?;
    }
    let mut labels = Vec::new();
    for (i, slot) in parsed.rhs.iter().chain([&parsed.lhs]).enumerate() {
        labels.push(slot_items(slot, i == operands.len()).ok_or_else(|| {
            error(format!(
                "einsum {spec:?}: an einsum along a path takes slots of labels and row variables \
                 (no fixed indices, strides or concatenations in its operands)"
            ))
        })?);
    }
    let n = operands.len();
    if n == 0 {
        return Err(error(format!("einsum {spec:?}: no operands")));
    }
    let result: BTreeSet<String> = labels[n].iter().cloned().collect();
    let sizes = item_sizes(&parsed, operands);
    // Labels only one operand has (and the result lacks) are summed out of it first: the path is
    // searched over what is left, and the sums are part of the cost.
    let mut presum = 0.0;
    let sets: Vec<BTreeSet<String>> = labels[..n]
        .iter()
        .zip(alone_items(&labels))
        .map(|(items, alone)| {
            let all: BTreeSet<String> = items.iter().cloned().collect();
            if !alone.is_empty() {
                presum += all
                    .iter()
                    .map(|l| sizes.get(l).copied().unwrap_or(1.0))
                    .product::<f64>();
            }
            all.difference(&alone).cloned().collect()
        })
        .collect();
    let mut path = find_path(&sets, &result, &sizes, options)
        .map_err(|e| error(format!("einsum {spec:?}: {e}")))?;
    path.flops += presum;
    Ok((parsed, labels, path))
}

/// The sizes of the spec's items as far as inference knows them: a label's is its axis's, a row
/// variable's the product of the axes it stands for (the largest over operands, which broadcast).
/// Unknown sizes are left out (counted as 1).
fn item_sizes(parsed: &EinsumSpec, operands: &[&Tensor]) -> HashMap<String, f64> {
    let mut sizes: HashMap<String, f64> = HashMap::new();
    let mut note = |item: String, size: Option<usize>| {
        if let Some(size) = size {
            let entry = sizes.entry(item).or_insert(1.0);
            *entry = entry.max(size as f64);
        }
    };
    for (t, slot) in operands.iter().zip(&parsed.rhs) {
        let state = t.graph.state.lock();
        let shape = state.inference.shape(state.tensors[t.index].shape);
        for kind in Kind::ALL {
            let (spec_row, row) = (slot.row(kind), shape.row(kind));
            let name = |axis: &AxisSpec| match axis {
                AxisSpec::Label { name } => Some(name.clone()),
                _ => None,
            };
            let leading: Vec<Option<usize>> = row.leading.iter().map(|d| d.ground_size()).collect();
            let trailing: Vec<Option<usize>> =
                row.trailing.iter().map(|d| d.ground_size()).collect();
            // A closed row's axes are all known: those between the flanks are the row
            // variable's. An open row's known flanks match the spec's flanks.
            let (front, back) = if row.var.is_none() {
                (&trailing[..], &trailing[..])
            } else {
                (&leading[..], &trailing[..])
            };
            for (axis, size) in spec_row.leading.iter().zip(front) {
                if let Some(label) = name(axis) {
                    note(label, *size);
                }
            }
            for (axis, size) in spec_row.trailing.iter().rev().zip(back.iter().rev()) {
                if let Some(label) = name(axis) {
                    note(label, *size);
                }
            }
            if let (Some(var), None) = (&spec_row.row_var, row.var) {
                let (l, r) = (spec_row.leading.len(), spec_row.trailing.len());
                if trailing.len() >= l + r {
                    let middle = &trailing[l..trailing.len() - r];
                    note(
                        row_key(var, kind),
                        middle.iter().copied().product::<Option<usize>>(),
                    );
                }
            }
        }
    }
    sizes
}

/// The einsum spec text of one step: `operands` into `result`.
fn step_spec(operands: Vec<SlotSpec>, result: SlotSpec) -> String {
    EinsumSpec {
        rhs: operands,
        lhs: result,
    }
    .to_string()
}

/// Contracts along `path`: first summing labels only one operand has (and the result lacks),
/// then the pairwise steps, the last one writing the result's slot as the spec gives it.
fn contract(
    parsed: &EinsumSpec,
    labels: &[Vec<String>],
    path: &Path,
    operands: &[&Tensor],
) -> Result<Tensor, TensorError> {
    let n = operands.len();
    if n == 1 {
        return Ok(operands[0].einsum1(&parsed.to_string()));
    }
    let result_labels: BTreeSet<String> = labels[n].iter().cloned().collect();
    // Where row variables go in intermediates: the row the result has them in, else the row of
    // the first operand having them.
    let mut homes: HashMap<String, Kind> = HashMap::new();
    for slot in [&parsed.lhs].into_iter().chain(&parsed.rhs) {
        for kind in Kind::ALL {
            if let Some(var) = &slot.row(kind).row_var {
                homes.entry(row_key(var, kind)).or_insert(kind);
            }
        }
    }
    let slot_of = |items: &[String]| {
        intermediate_slot(items, &homes).ok_or_else(|| {
            error(format!(
                "einsum {:?}: more than three row variables meet in one step of its path",
                parsed.to_string()
            ))
        })
    };
    // Pending operands by creation id (operands, then each step's result): a tensor, its slot
    // and its items; and how many pending operands have each item.
    let mut made: Vec<Option<(Tensor, SlotSpec, Vec<String>)>> = Vec::with_capacity(2 * n - 1);
    let mut holders: HashMap<String, usize> = HashMap::new();
    // Every step before the last, for captures of what they sum away.
    let mut earlier: Vec<Tensor> = Vec::new();
    for (i, alone) in alone_items(labels).into_iter().enumerate() {
        let slot = with_named_rows(&parsed.rhs[i]);
        let operand = if alone.is_empty() {
            (operands[i].clone(), slot, labels[i].clone())
        } else {
            let mut keep: Vec<String> = Vec::new();
            for l in &labels[i] {
                if !alone.contains(l) && !keep.contains(l) {
                    keep.push(l.clone());
                }
            }
            let kept = slot_of(&keep)?;
            let summed = operands[i].einsum1(&step_spec(vec![slot], kept.clone()));
            earlier.push(summed.clone());
            (summed, kept, keep)
        };
        for item in operand.2.iter().collect::<BTreeSet<_>>() {
            *holders.entry(item.clone()).or_default() += 1;
        }
        made.push(Some(operand));
    }
    let mut pending = Pending::new(n);
    for (step, &(i, j)) in path.steps.iter().enumerate() {
        let last = step + 1 == path.steps.len();
        let ids = [i, j].map(|p| {
            pending
                .id_at(p)
                .expect("a path step names pending operands")
        });
        let [a, b] = ids.map(|id| made[id].take().expect("pending"));
        let mut items: Vec<&String> = Vec::new();
        for item in a.2.iter().chain(&b.2) {
            if !items.contains(&item) {
                items.push(item);
            }
        }
        // How many of the two have `item`; a step keeps the items another operand still has.
        let here =
            |item: &String| usize::from(a.2.contains(item)) + usize::from(b.2.contains(item));
        let (slot, keep) = if last {
            (with_named_rows(&parsed.lhs), labels[n].clone())
        } else {
            // The result's labels first, in its order, then those a later step sums: the
            // groups of later products then tend to be runs of one stride each, used in place.
            let mut needed: Vec<String> = items
                .iter()
                .filter(|l| result_labels.contains(**l) || holders[**l] > here(l))
                .map(|l| (*l).clone())
                .collect();
            let result_position = |l: &String| labels[n].iter().position(|r| r == l);
            needed.sort_by_key(|l| result_position(l).unwrap_or(usize::MAX));
            (slot_of(&needed)?, needed)
        };
        for item in &items {
            let count = holders.get_mut(*item).expect("counted");
            *count = *count - here(item) + usize::from(keep.contains(item));
        }
        let merged = a.0.einsum(&step_spec(vec![a.1, b.1], slot.clone()), &b.0);
        if !last {
            earlier.push(merged.clone());
        }
        for id in ids {
            pending.remove(id);
        }
        pending.push();
        made.push(Some((merged, slot, keep)));
    }
    let (result, _, _) = made
        .pop()
        .flatten()
        .expect("the last step makes the result");
    record_path_steps(&result, parsed, &earlier);
    Ok(result)
}
