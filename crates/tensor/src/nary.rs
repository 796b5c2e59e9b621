//! Einsums of any number of operands, split into binary contractions along a cheap path, and the
//! numpy notation (`"ij,jk->ik"`) translated to ours.
//!
//! Operands' slots hold labels and row variables, in any rows (`"...|j->i; ...|k->j => ...|k->i"`).
//! A row variable counts as one label whose size is the product of the axes it stands for; an
//! intermediate result holds its labels as output axes and each row variable it still needs in
//! a row of its own (the row the result has it in, when free). numpy's `...` broadcasts the way
//! numpy's does: when the operands' axes are known it is spelled out as labels, one per
//! broadcast axis, an axis of 1 facing a longer one taking a label of its own.
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

mod path;
mod pending;

use std::collections::{BTreeSet, HashMap};

pub use path::{EXHAUSTIVE_UP_TO, OPTIMAL_UP_TO, Path, PathError, PathOptions, Search, find_path};
use pending::Pending;

use rcannl_shape::spec::{AxisSpec, EinsumSpec, Kind, RowSpec, RowVar, SlotSpec, parse_einsum};

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
        if let Some(&home) = homes.get(*var) {
            if rows.iter().all(|(k, _)| *k != home) {
                rows.push((home, var));
            }
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
    /// (`"ij,jk"`: the labels seen once, in alphabetical order), repeated labels (`"ii->i"`).
    /// Operands' axes are their output axes.
    pub fn einsum_np(spec: &str, operands: &[&Tensor]) -> Tensor {
        Tensor::einsum_np_with(spec, operands, &PathOptions::default())
    }

    /// [`Tensor::einsum_np`] along the path found under `options`.
    pub fn einsum_np_with(spec: &str, operands: &[&Tensor], options: &PathOptions) -> Tensor {
        let axes: Vec<Option<Vec<usize>>> = operands.iter().map(|t| t.numpy_axes()).collect();
        match numpy_to_ours_for(spec, &axes) {
            // Even two operands take the path, whose single-operand sums can save most of the
            // work (`"ijk,kl->il"`).
            Ok(ours) => match operands.len() {
                1 => operands[0].einsum1(&ours),
                _ => Tensor::einsum_n_with(&ours, operands, options),
            },
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
        let state = self.graph.state.borrow();
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
        let state = t.graph.state.borrow();
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
    Ok(result)
}

/// A slot in numpy's notation: its labels, and where among them `...` stands, if anywhere.
struct NumpySlot {
    ellipsis: Option<usize>,
    labels: Vec<char>,
}

impl NumpySlot {
    /// The slot in our notation (axes of the output row), with `dots` standing where `...`
    /// does: labels, or `None` for a row variable.
    fn ours(&self, dots: Option<&[String]>, is_result: bool) -> SlotSpec {
        let label = |c: &char| AxisSpec::label(c.to_string());
        let row = match (self.ellipsis, dots) {
            (Some(at), None) => RowSpec::open(
                self.labels[..at].iter().map(label).collect(),
                RowVar::Ellipsis,
                self.labels[at..].iter().map(label).collect(),
            ),
            (at, dots) => {
                let mut axes: Vec<AxisSpec> = self.labels.iter().map(label).collect();
                if let (Some(at), Some(dots)) = (at, dots) {
                    axes.splice(at..at, dots.iter().map(AxisSpec::label));
                }
                if axes.is_empty() && is_result {
                    // A scalar result: one output axis of one position.
                    axes.push(AxisSpec::Fixed { index: 0 });
                }
                RowSpec::closed(axes)
            }
        };
        SlotSpec {
            output: row,
            ..SlotSpec::default()
        }
    }
}

/// The operands' slots and the result's (an implicit result spelled out).
fn parse_numpy(spec: &str) -> Result<(Vec<NumpySlot>, NumpySlot), TensorError> {
    let bad = |why: &str| error(format!("numpy einsum {spec:?}: {why}"));
    let (inputs, output) = match spec.split_once("->") {
        Some((i, o)) => (i, Some(o.trim())),
        None => (spec, None),
    };
    let parse = |slot: &str| -> Result<NumpySlot, TensorError> {
        let slot = slot.trim();
        let (ellipsis, text) = match slot.find("...") {
            Some(at) => {
                let rest = &slot[at + 3..];
                if rest.contains('.') {
                    return Err(bad("`...` at most once per operand"));
                }
                let before = slot[..at].chars().filter(|c| !c.is_whitespace()).count();
                (Some(before), format!("{}{rest}", &slot[..at]))
            }
            None => (None, slot.to_owned()),
        };
        let labels: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(c) = labels.iter().find(|c| !c.is_ascii_alphabetic()) {
            return Err(bad(&format!("`{c}` is not a label")));
        }
        Ok(NumpySlot { ellipsis, labels })
    };
    let operands: Vec<NumpySlot> = inputs.split(',').map(parse).collect::<Result<_, _>>()?;
    let result = match output {
        Some(out) => parse(out)?,
        None => {
            let mut counts: HashMap<char, usize> = HashMap::new();
            for slot in &operands {
                for c in &slot.labels {
                    *counts.entry(*c).or_default() += 1;
                }
            }
            let mut once: Vec<char> = counts
                .into_iter()
                .filter(|(_, n)| *n == 1)
                .map(|(c, _)| c)
                .collect();
            once.sort_unstable();
            NumpySlot {
                ellipsis: operands.iter().any(|o| o.ellipsis.is_some()).then_some(0),
                labels: once,
            }
        }
    };
    Ok((operands, result))
}

/// The translation, with `dots[k]` standing for the `...` of slot `k` (the result's last):
/// labels, or `None` for a row variable. Printed canonically, so that multi-letter labels are
/// read as such.
fn numpy_text(operands: &[NumpySlot], result: &NumpySlot, dots: &[Option<Vec<String>>]) -> String {
    EinsumSpec {
        rhs: operands
            .iter()
            .zip(dots)
            .map(|(slot, dots)| slot.ours(dots.as_deref(), false))
            .collect(),
        lhs: result.ours(dots[operands.len()].as_deref(), true),
    }
    .to_string()
}

/// numpy's notation in ours: `"ij,jk->ik"` to `"i, j; j, k => i, k"`; `...` becomes a row variable
/// of the output rows (the same axes in every operand: see [`numpy_to_ours_for`] for numpy's
/// broadcasting); an implicit result holds the labels seen once, in alphabetical order (after
/// `...` if any operand has it).
pub fn numpy_to_ours(spec: &str) -> Result<String, TensorError> {
    let (operands, result) = parse_numpy(spec)?;
    let dots = vec![None; operands.len() + 1];
    Ok(numpy_text(&operands, &result, &dots))
}

/// numpy's notation in ours for operands with these axes (`None` where not known): as
/// [`numpy_to_ours`], but with `...` spelled out as labels (`dots0`, `dots1`, …) when every operand
/// with `...` has known axes, so that it broadcasts as numpy's does: aligned at the right, an
/// operand with fewer axes there lacking the leading ones, and an axis of 1 facing a longer one
/// taking a label of its own (summed away first, as a label only one operand has).
pub fn numpy_to_ours_for(spec: &str, axes: &[Option<Vec<usize>>]) -> Result<String, TensorError> {
    let (operands, result) = parse_numpy(spec)?;
    let spelled = operands.len() == axes.len()
        && operands
            .iter()
            .zip(axes)
            .all(|(slot, axes)| slot.ellipsis.is_none() || axes.is_some());
    if !spelled || operands.iter().all(|o| o.ellipsis.is_none()) {
        return numpy_to_ours(spec);
    }
    // The axes each operand's `...` stands for.
    let mut covered: Vec<&[usize]> = Vec::new();
    for (k, (slot, axes)) in operands.iter().zip(axes).enumerate() {
        match (slot.ellipsis, axes) {
            (Some(_), Some(axes)) => {
                let Some(count) = axes.len().checked_sub(slot.labels.len()) else {
                    return Err(error(format!(
                        "numpy einsum {spec:?}: operand {} has {} axes {axes:?}, fewer than its {} \
                         labels",
                        k + 1,
                        axes.len(),
                        slot.labels.len()
                    )));
                };
                let at = slot.ellipsis.unwrap_or(0);
                covered.push(&axes[at..at + count]);
            }
            _ => covered.push(&[]),
        }
    }
    let rank = covered.iter().map(|c| c.len()).max().unwrap_or(0);
    let mut broadcast = vec![1; rank];
    for (k, axes) in covered.iter().enumerate() {
        for (j, &size) in axes.iter().enumerate() {
            let p = rank - axes.len() + j;
            if size != 1 && broadcast[p] != 1 && broadcast[p] != size {
                return Err(error(format!(
                    "numpy einsum {spec:?}: operand {}'s `...` stands for axes {axes:?}, which do \
                     not broadcast against {} (at position {p} of {rank}, aligned at the right)",
                    k + 1,
                    broadcast[p]
                )));
            }
            if size != 1 {
                broadcast[p] = size;
            }
        }
    }
    let mut dots: Vec<Option<Vec<String>>> = covered
        .iter()
        .enumerate()
        .map(|(k, axes)| {
            Some(
                (0..axes.len())
                    .map(|j| {
                        let p = rank - axes.len() + j;
                        if axes[j] == 1 && broadcast[p] != 1 {
                            format!("dots{p}x{k}")
                        } else {
                            format!("dots{p}")
                        }
                    })
                    .collect(),
            )
        })
        .collect();
    dots.push(Some((0..rank).map(|p| format!("dots{p}")).collect()));
    Ok(numpy_text(&operands, &result, &dots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_specs_translate() {
        assert_eq!(numpy_to_ours("ij,jk->ik").unwrap(), "i, j; j, k => i, k");
        assert_eq!(numpy_to_ours("ij,jk").unwrap(), "i, j; j, k => i, k");
        assert_eq!(numpy_to_ours("ii->i").unwrap(), "i, i => i");
        assert_eq!(numpy_to_ours("ii").unwrap(), "i, i => 0");
        assert_eq!(
            numpy_to_ours("...ij,...jk->...ik").unwrap(),
            "..., i, j; ..., j, k => ..., i, k"
        );
        assert!(numpy_to_ours("i1,jk").is_err());
        assert_eq!(
            numpy_to_ours("i...j,j...").unwrap(),
            "i, ..., j; j, ... => ..., i"
        );
        assert!(numpy_to_ours("i...j...,jk").is_err());
        assert!(numpy_to_ours("i..j,jk").is_err());
        // An operand without labels is a scalar.
        assert_eq!(numpy_to_ours(",ij->ij").unwrap(), "; i, j => i, j");
        // Spelled-out `...` labels are multi-letter names even where every slot has one axis.
        let one_axis = numpy_to_ours_for("...,...->...", &[Some(vec![3]), Some(vec![3])]).unwrap();
        let parsed = parse_einsum(&one_axis).unwrap();
        assert!(
            parsed
                .slots()
                .all(|(_, slot)| slot.row(Kind::Output).axes().count() == 1),
            "{one_axis}"
        );
    }
}
