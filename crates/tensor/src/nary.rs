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
//! The path search works on label sets: each step contracts two operands into one holding the
//! labels still needed (by another operand or the result). Labels only one operand has, and the
//! result does not, are summed out of that operand first. Up to [`EXHAUSTIVE_UP_TO`] operands the
//! search is dynamic programming over subsets (the cheapest split of every subset, as optimal as
//! the cost model); beyond, greedy (the cheapest pair at each step). The cost of a step is its
//! count of floating-point operations: one multiply per point of its product space (the product of
//! the sizes of every label either operand has), plus one add per point when the step sums a label
//! away; a single-operand sum costs one add per point. Each step
//! is an ordinary binary einsum, so it is shape-inferred, differentiated, and run as a matrix
//! product by the backends when it has that shape.

use std::collections::{BTreeSet, HashMap};

use rcannl_shape::spec::{AxisSpec, EinsumSpec, Kind, RowSpec, RowVar, SlotSpec, parse_einsum};

use crate::graph::{TensorError, error};
use crate::tensor::Tensor;

/// Up to this many operands the automatic path search is exhaustive.
pub const EXHAUSTIVE_UP_TO: usize = 10;

/// The most operands the exhaustive search takes when asked for.
pub const OPTIMAL_UP_TO: usize = 16;

/// A contraction path: the pairs contracted in order, as positions in the list of operands still
/// pending (each step removes its two and appends its result), and the total cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub steps: Vec<(usize, usize)>,
    pub flops: f64,
}

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

/// The product of the sizes of `labels` (unknown sizes count as 1).
fn points<'a>(labels: impl Iterator<Item = &'a String>, sizes: &HashMap<String, f64>) -> f64 {
    labels
        .map(|label| sizes.get(label).copied().unwrap_or(1.0))
        .product()
}

/// The FLOPs of contracting operands with label sets `a` and `b`, given whether the step sums a
/// label away: a multiply per point, and an add per point when it sums.
fn step_cost(
    a: &BTreeSet<String>,
    b: &BTreeSet<String>,
    sums: bool,
    sizes: &HashMap<String, f64>,
) -> f64 {
    points(a.union(b), sizes) * if sums { 2.0 } else { 1.0 }
}

/// How the path is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Optimal up to [`EXHAUSTIVE_UP_TO`] operands, greedy beyond.
    #[default]
    Auto,
    /// Dynamic programming over subsets, whatever the operand count (its time and memory grow
    /// as 3ⁿ and 2ⁿ).
    Optimal,
    /// The cheapest pair at each step.
    Greedy,
}

/// What the path search is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathOptions {
    pub search: Search,
    /// The most cells an intermediate result may have (the operands and the final result are
    /// what they are); `None` for no limit.
    pub memory_limit: Option<f64>,
}

/// The cheapest path contracting `operands` (label sets) into one with `result`'s labels, under
/// `options`; `None` when every path has an intermediate over the memory limit.
pub fn find_path(
    operands: &[BTreeSet<String>],
    result: &BTreeSet<String>,
    sizes: &HashMap<String, f64>,
    options: &PathOptions,
) -> Option<Path> {
    let limit = options.memory_limit.unwrap_or(f64::INFINITY);
    match options.search {
        Search::Auto if operands.len() <= EXHAUSTIVE_UP_TO => {
            exhaustive(operands, result, sizes, limit)
        }
        Search::Optimal => exhaustive(operands, result, sizes, limit),
        Search::Auto | Search::Greedy => greedy(operands, result, sizes, limit),
    }
}

/// Dynamic programming over subsets: for each subset, the cheapest way to contract it into one
/// operand, from the cheapest ways for its two parts.
fn exhaustive(
    operands: &[BTreeSet<String>],
    result: &BTreeSet<String>,
    sizes: &HashMap<String, f64>,
    limit: f64,
) -> Option<Path> {
    let n = operands.len();
    let full = (1usize << n) - 1;
    // Labels each subset's contraction keeps: those needed outside the subset or in the result.
    let labels_of = |set: usize| -> BTreeSet<String> {
        let inside: BTreeSet<String> = (0..n)
            .filter(|i| set & (1 << i) != 0)
            .flat_map(|i| operands[i].iter().cloned())
            .collect();
        inside
            .into_iter()
            .filter(|l| {
                result.contains(l) || (0..n).any(|i| set & (1 << i) == 0 && operands[i].contains(l))
            })
            .collect()
    };
    let mut best: Vec<Option<(f64, usize)>> = vec![None; full + 1];
    let mut labels: Vec<BTreeSet<String>> = vec![BTreeSet::new(); full + 1];
    for set in 1..=full {
        labels[set] = labels_of(set);
        if set.count_ones() == 1 {
            best[set] = Some((0.0, 0));
            continue;
        }
        if set != full && points(labels[set].iter(), sizes) > limit {
            continue;
        }
        // Splits with the lowest member in the first part, so each split is seen once.
        let low = set & set.wrapping_neg();
        let rest = set & !low;
        let mut part = rest;
        loop {
            let first = part | low;
            let second = set & !first;
            if second != 0 {
                if let (Some((c1, _)), Some((c2, _))) = (best[first], best[second]) {
                    let sums = labels[first]
                        .union(&labels[second])
                        .any(|l| !labels[set].contains(l));
                    let cost = c1 + c2 + step_cost(&labels[first], &labels[second], sums, sizes);
                    if best[set].is_none_or(|(c, _)| cost < c) {
                        best[set] = Some((cost, first));
                    }
                }
            }
            if part == 0 {
                break;
            }
            part = (part - 1) & rest;
        }
    }
    let (flops, _) = best[full]?;
    // Unfold the chosen splits into steps over the pending list.
    let mut pending: Vec<usize> = (0..n).map(|i| 1 << i).collect();
    let mut steps = Vec::new();
    fn order(set: usize, best: &[Option<(f64, usize)>], out: &mut Vec<(usize, usize)>) {
        if set.count_ones() == 1 {
            return;
        }
        let first = best[set].expect("every subset has a split").1;
        let second = set & !first;
        order(first, best, out);
        order(second, best, out);
        out.push((first, second));
    }
    let mut merges = Vec::new();
    order(full, &best, &mut merges);
    for (first, second) in merges {
        let i = pending
            .iter()
            .position(|s| *s == first)
            .expect("made before");
        let j = pending
            .iter()
            .position(|s| *s == second)
            .expect("made before");
        steps.push((i, j));
        pending.retain(|s| *s != first && *s != second);
        pending.push(first | second);
    }
    Some(Path { steps, flops })
}

/// The cheapest pair at each step.
fn greedy(
    operands: &[BTreeSet<String>],
    result: &BTreeSet<String>,
    sizes: &HashMap<String, f64>,
    limit: f64,
) -> Option<Path> {
    let mut pending: Vec<BTreeSet<String>> = operands.to_vec();
    // How many pending operands hold each label: a pair holding every holder of a label the
    // result lacks sums it away.
    let mut holders: HashMap<String, usize> = HashMap::new();
    for label in operands.iter().flatten() {
        *holders.entry(label.clone()).or_default() += 1;
    }
    let summed = |holders: &HashMap<String, usize>, a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.union(b)
            .filter(|l| {
                !result.contains(*l)
                    && holders[*l] == usize::from(a.contains(*l)) + usize::from(b.contains(*l))
            })
            .cloned()
            .collect::<BTreeSet<String>>()
    };
    let mut steps = Vec::new();
    let mut flops = 0.0;
    while pending.len() > 1 {
        let mut choice = (0, 1, f64::INFINITY);
        for i in 0..pending.len() {
            for j in i + 1..pending.len() {
                let (a, b) = (&pending[i], &pending[j]);
                let gone = summed(&holders, a, b);
                let last = pending.len() == 2;
                if !last && points(a.union(b).filter(|l| !gone.contains(*l)), sizes) > limit {
                    continue;
                }
                let cost = step_cost(a, b, !gone.is_empty(), sizes);
                if cost < choice.2 {
                    choice = (i, j, cost);
                }
            }
        }
        let (i, j, cost) = choice;
        if cost.is_infinite() {
            return None;
        }
        let gone = summed(&holders, &pending[i], &pending[j]);
        let merged: BTreeSet<String> = pending[i]
            .union(&pending[j])
            .filter(|l| !gone.contains(*l))
            .cloned()
            .collect();
        for label in pending[i].iter().chain(&pending[j]) {
            *holders.get_mut(label).expect("counted") -= 1;
        }
        for label in &merged {
            *holders.get_mut(label).expect("counted") += 1;
        }
        flops += cost;
        steps.push((i, j));
        pending = pending
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i && *k != j)
            .map(|(_, s)| s.clone())
            .collect();
        pending.push(merged);
    }
    Some(Path { steps, flops })
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

/// The items only operand `i` has and the result lacks (`items` holds every operand's, then the
/// result's), which are summed out of it before the path; none for a lone operand.
fn alone_in(items: &[Vec<String>], i: usize) -> BTreeSet<String> {
    let n = items.len() - 1;
    if n < 2 {
        return BTreeSet::new();
    }
    items[i]
        .iter()
        .filter(|l| !items[n].contains(l) && (0..n).all(|j| j == i || !items[j].contains(l)))
        .cloned()
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
    let mut labels = Vec::new();
    for (i, slot) in parsed.rhs.iter().chain([&parsed.lhs]).enumerate() {
        labels.push(slot_items(slot, i == operands.len()).ok_or_else(|| {
            error(format!(
                "einsum {spec:?}: an einsum along a path takes slots of labels and row variables \
                 (no fixed indices, strides or concatenations in its operands)"
            ))
        })?);
    }
    let result: BTreeSet<String> = labels[operands.len()].iter().cloned().collect();
    let sizes = item_sizes(&parsed, operands);
    // Labels only one operand has (and the result lacks) are summed out of it first: the path is
    // searched over what is left, and the sums are part of the cost.
    let n = operands.len();
    let mut presum = 0.0;
    let sets: Vec<BTreeSet<String>> = (0..n)
        .map(|i| {
            let all: BTreeSet<String> = labels[i].iter().cloned().collect();
            let alone = alone_in(&labels, i);
            if !alone.is_empty() {
                presum += points(all.iter(), &sizes);
            }
            all.difference(&alone).cloned().collect()
        })
        .collect();
    if options.search == Search::Optimal && n > OPTIMAL_UP_TO {
        return Err(error(format!(
            "einsum {spec:?}: the optimal path search takes at most {OPTIMAL_UP_TO} operands, \
             {n} given (the greedy search takes any number)"
        )));
    }
    let mut path = find_path(&sets, &result, &sizes, options).ok_or_else(|| {
        error(format!(
            "einsum {spec:?}: every contraction path has an intermediate result of more than \
             {} cells (the memory limit)",
            options.memory_limit.unwrap_or(f64::INFINITY)
        ))
    })?;
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
    // Pending operands: a tensor, its slot and its items.
    let mut pending: Vec<(Tensor, SlotSpec, Vec<String>)> = Vec::new();
    for i in 0..n {
        let slot = with_named_rows(&parsed.rhs[i]);
        let alone = alone_in(labels, i);
        if alone.is_empty() {
            pending.push((operands[i].clone(), slot, labels[i].clone()));
        } else {
            let mut keep: Vec<String> = Vec::new();
            for l in &labels[i] {
                if !alone.contains(l) && !keep.contains(l) {
                    keep.push(l.clone());
                }
            }
            let kept = slot_of(&keep)?;
            let summed = operands[i].einsum1(&step_spec(vec![slot], kept.clone()));
            pending.push((summed, kept, keep));
        }
    }
    for (step, &(i, j)) in path.steps.iter().enumerate() {
        let last = step + 1 == path.steps.len();
        let (a, b) = (pending[i].clone(), pending[j].clone());
        let others: Vec<BTreeSet<String>> = pending
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i && *k != j)
            .map(|(_, (_, _, l))| l.iter().cloned().collect())
            .collect();
        let (slot, keep) = if last {
            (with_named_rows(&parsed.lhs), labels[n].clone())
        } else {
            // The result's labels first, in its order, then those a later step sums: the
            // groups of later products then tend to be runs of one stride each, used in place.
            let mut needed: Vec<String> =
                a.2.iter()
                    .chain(&b.2)
                    .filter(|l| result_labels.contains(*l) || others.iter().any(|o| o.contains(*l)))
                    .fold(Vec::new(), |mut acc, l| {
                        if !acc.contains(l) {
                            acc.push(l.clone());
                        }
                        acc
                    });
            let result_position = |l: &String| labels[n].iter().position(|r| r == l);
            needed.sort_by_key(|l| result_position(l).unwrap_or(usize::MAX));
            (slot_of(&needed)?, needed)
        };
        let merged = a.0.einsum(&step_spec(vec![a.1, b.1], slot.clone()), &b.0);
        pending = pending
            .into_iter()
            .enumerate()
            .filter(|(k, _)| *k != i && *k != j)
            .map(|(_, p)| p)
            .collect();
        pending.push((merged, slot, keep));
    }
    Ok(pending.remove(0).0)
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

    fn set(labels: &str) -> BTreeSet<String> {
        labels.chars().map(|c| c.to_string()).collect()
    }

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

    #[test]
    fn a_matrix_chain_is_multiplied_in_its_cheapest_order() {
        // (10×100)(100×5)(5×50): ((AB)C) takes 5000 + 2500 multiply-adds; (A(BC)) 25000 + 50000.
        let sizes: HashMap<String, f64> = [("i", 10.0), ("j", 100.0), ("k", 5.0), ("l", 50.0)]
            .map(|(l, s)| (l.to_owned(), s))
            .into();
        let operands = [set("ij"), set("jk"), set("kl")];
        let path = find_path(&operands, &set("il"), &sizes, &PathOptions::default()).unwrap();
        // A·B first; then the product with C.
        assert_eq!(path.steps.len(), 2);
        assert_eq!(path.steps[0], (0, 1));
        assert_eq!(path.flops, 2.0 * (5000.0 + 2500.0));
        assert_eq!(
            greedy(&operands, &set("il"), &sizes, f64::INFINITY)
                .unwrap()
                .flops,
            15000.0
        );
    }

    #[test]
    fn an_outer_product_costs_a_multiply_per_point_and_a_contraction_two() {
        // ijk,jr,kr->ir: (jr·kr) is an outer product of 128·128·16 points, then one contraction
        // over the whole space; contracting ijk with jr first sums j over the same space, then
        // k over 128·128·16 points. As many multiply-adds, but the first has fewer adds.
        let sizes: HashMap<String, f64> = [("i", 128.0), ("j", 128.0), ("k", 128.0), ("r", 16.0)]
            .map(|(l, s)| (l.to_owned(), s))
            .into();
        let operands = [set("ijk"), set("jr"), set("kr")];
        let outer = 128.0 * 128.0 * 16.0;
        let whole = 128.0 * outer;
        for path in [
            find_path(&operands, &set("ir"), &sizes, &PathOptions::default()).unwrap(),
            greedy(&operands, &set("ir"), &sizes, f64::INFINITY).unwrap(),
        ] {
            assert_eq!(path.steps[0], (1, 2));
            assert_eq!(path.flops, outer + 2.0 * whole);
        }
    }

    #[test]
    fn greedy_counts_a_label_summed_only_once_its_last_holders_meet() {
        // j is held by three operands: the first step keeps it, the second sums it.
        let sizes: HashMap<String, f64> = [("i", 2.0), ("j", 3.0), ("k", 5.0)]
            .map(|(l, s)| (l.to_owned(), s))
            .into();
        let operands = [set("ij"), set("j"), set("jk")];
        let path = greedy(&operands, &set("ik"), &sizes, f64::INFINITY).unwrap();
        // (ij, j) keeps j: 6 multiplies; (ij, jk) sums j: 30 points, 60 FLOPs.
        assert_eq!(path.steps, vec![(0, 1), (0, 1)]);
        assert_eq!(path.flops, 6.0 + 60.0);
        assert_eq!(
            find_path(&operands, &set("ik"), &sizes, &PathOptions::default())
                .unwrap()
                .flops,
            path.flops
        );
    }

    #[test]
    fn a_memory_limit_keeps_intermediates_small() {
        // i,j,ijk->k with i = 150, j = 10, k = 100. Cheapest: the outer product i·j (1,500
        // cells, 1,500 FLOPs), then ij·ijk (2 × 150,000). Within 1,000 cells: i·ijk makes jk
        // (1,000 cells, 2 × 150,000), then j·jk (2 × 1,000). Within 999 cells: no path.
        let sizes: HashMap<String, f64> = [("i", 150.0), ("j", 10.0), ("k", 100.0)]
            .map(|(l, s)| (l.to_owned(), s))
            .into();
        let operands = [set("i"), set("j"), set("ijk")];
        for search in [Search::Optimal, Search::Greedy] {
            let within = |limit| PathOptions {
                search,
                memory_limit: limit,
            };
            let free = find_path(&operands, &set("k"), &sizes, &within(None)).unwrap();
            assert_eq!(
                (free.steps[0], free.flops),
                ((0, 1), 301_500.0),
                "{search:?}"
            );
            let small = find_path(&operands, &set("k"), &sizes, &within(Some(1000.0))).unwrap();
            assert_eq!(
                (small.steps[0], small.flops),
                ((0, 2), 302_000.0),
                "{search:?}"
            );
            let none = find_path(&operands, &set("k"), &sizes, &within(Some(999.0)));
            assert_eq!(none, None, "{search:?}");
        }
    }
}
