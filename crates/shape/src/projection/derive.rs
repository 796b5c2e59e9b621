//! Projection equations of one operation, read off its regenerated constraints, and the
//! projections record they solve to.
//!
//! Global sizes, local identities: every axis of the operation's (closed) shapes gets a fresh
//! variable, its projection id, with its size recorded aside, and the operation's constraints are
//! generated again over those shapes by the one generator. Solving them locally only aligns rows
//! (binding the spec's row variables to stretches of axes) and pairs axes, so the classes hold the
//! identifications this operation makes and no size coincidence from elsewhere.
//!
//! The pairs become equations by the rules of the core: an equality, or a broadcast between two
//! axes of the same size, shares a loop; a broadcast from an axis of size 1 reads it at 0; every
//! axis of every tensor asks to be iterated; a fixed index pins its axis; the sliced axis of a
//! batch slice takes the outside symbol; a fan-out of random words computes where each word's
//! values start.

use std::collections::HashMap;

use rcannl_ir::{AxisIndex, Factor, Projections, Symbol};

use super::classes::{self, ProjEq, ProjId, ProjTerm};
use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::logic::{Logic, generate};
use crate::term::{AffineDim, Border, Dim, DimVar, Kind, Row, RowVarId, Shape, VarSupply};

/// The projections of the operation `logic` with the closed shapes `result` and `operands`.
/// Fresh iterators are numbered from `first_symbol`; a batch slice reads its sliced axis at
/// `slice` (a symbol outside the product space, bound per run).
///
/// The axes of each tensor are listed in memory order: batch, then output, then input.
pub fn derive_projections(
    logic: &Logic,
    result: &Shape,
    operands: &[Shape],
    first_symbol: u32,
    slice: Option<Symbol>,
) -> Result<Projections, ShapeError> {
    derive_projections_with_labels(
        logic,
        result,
        operands,
        &HashMap::new(),
        first_symbol,
        slice,
    )
}

/// [`derive_projections`], given the sizes the global solve found for the spec's labels: the
/// closed shapes alone cannot split a concatenated axis among more than one unknown component
/// (`b => a^b^c`).
pub fn derive_projections_with_labels(
    logic: &Logic,
    result: &Shape,
    operands: &[Shape],
    label_sizes: &HashMap<String, usize>,
    first_symbol: u32,
    slice: Option<Symbol>,
) -> Result<Projections, ShapeError> {
    let mut vars = VarSupply::default();
    let mut sizes: HashMap<ProjId, usize> = HashMap::new();
    let mut fresh_shape = |shape: &Shape| -> Result<(Shape, Vec<DimVar>), ShapeError> {
        let mut axes = Vec::new();
        let mut fresh_row = |row: &Row| -> Result<Row, ShapeError> {
            if row.var.is_some() {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!(
                        "projection inference needs closed shapes; the axes {} are still open",
                        crate::words::row(row)
                    ),
                ));
            }
            let mut fresh =
                |dim: &Dim| -> Result<Dim, ShapeError> {
                    let size = dim.ground_size().ok_or_else(|| {
                    ShapeError::of_kind(ShapeErrorKind::Projection, format!(
                        "projection inference needs closed shapes; an axis of size {} is still \
                         unknown",
                        crate::words::dim(dim)
                    ))
                })?;
                    let var = vars.dim();
                    sizes.insert(ProjId(var.0), size);
                    Ok(Dim::Var(var))
                };
            Ok(Row {
                leading: row
                    .leading
                    .iter()
                    .map(&mut fresh)
                    .collect::<Result<_, _>>()?,
                var: None,
                trailing: row
                    .trailing
                    .iter()
                    .map(&mut fresh)
                    .collect::<Result<_, _>>()?,
            })
        };
        // Ids in memory order, so that iterators are named in the order of the result's axes.
        let batch = fresh_row(&shape.batch)?;
        let output = fresh_row(&shape.output)?;
        let input = fresh_row(&shape.input)?;
        let fresh = Shape {
            batch,
            input,
            output,
        };
        for kind in [Kind::Batch, Kind::Output, Kind::Input] {
            for dim in fresh.row(kind).dims() {
                if let Dim::Var(var) = dim {
                    axes.push(*var);
                }
            }
        }
        Ok((fresh, axes))
    };
    let (fresh_result, result_axes) = fresh_shape(result)?;
    let mut fresh_operands = Vec::new();
    let mut operand_axes = Vec::new();
    for operand in operands {
        let (shape, axes) = fresh_shape(operand)?;
        fresh_operands.push(shape);
        operand_axes.push(axes);
    }
    // The sliced axis's range plays no part here: take it as a variable either way.
    let logic = match logic {
        Logic::BatchSlice { .. } => &Logic::BatchSlice { static_range: None },
        other => other,
    };
    let generated = generate(logic, &fresh_result, &fresh_operands, &mut vars)?;
    let elaboration = Elaboration::new(vars.n_dims() as u32).run(&generated.constraints, &sizes)?;
    let mut equations = elaboration.equations;
    let mut derived = elaboration.derived;
    if let Logic::Uint4x32ToPrec { .. } = logic {
        derived.extend(fan_out(
            &generated.constraints,
            &result_axes,
            &mut equations,
        )?);
    }
    let concats = elaboration.concats;
    sizes.extend(elaboration.anonymous);
    for (name, var) in &generated.labels {
        if let Some(&size) = label_sizes.get(name) {
            sizes.insert(ProjId(var.0), size);
        }
    }
    for (_, components) in &concats {
        equations.extend(
            components
                .iter()
                .map(|id| ProjEq::Component(ProjTerm::Proj(*id))),
        );
    }
    for (var, index) in &generated.fixed_indices {
        equations.push(ProjEq::Eq(
            ProjTerm::Proj(ProjId(var.0)),
            ProjTerm::Sol(AxisIndex::Fixed(*index as i64)),
        ));
    }
    if let Some(Dim::Var(var)) = &generated.slice_dim {
        let symbol = slice.ok_or_else(|| {
            ShapeError::of_kind(
                ShapeErrorKind::Projection,
                "projection inference for a batch slice needs its slice symbol",
            )
        })?;
        equations.push(ProjEq::Eq(
            ProjTerm::Proj(ProjId(var.0)),
            ProjTerm::Sol(AxisIndex::Iterator(symbol)),
        ));
    }
    // Every axis that exists is visited: size-1 and pinned axes need no loop, an axis an affine
    // term computes gets none of its own, the rest get one.
    for var in result_axes.iter().chain(operand_axes.iter().flatten()) {
        let id = ProjId(var.0);
        let computed = derived.iter().any(|(axis, _)| *axis == id)
            || concats.iter().any(|(axis, _)| *axis == id);
        if !computed {
            equations.push(ProjEq::Iterate(ProjTerm::Proj(id)));
        }
    }
    // A kernel label that only an affine term mentions (a unary max-pool's window) is iterated
    // all the same: it is the window the result reduces over.
    for (_, affine) in &derived {
        let mut terms = vec![&affine.over];
        terms.extend(affine.conv.as_ref().map(|conv| &conv.kernel));
        for term in terms {
            if let Dim::Var(var) = term {
                equations.push(ProjEq::Iterate(ProjTerm::Proj(ProjId(var.0))));
            }
        }
    }
    let sizes = sizes_of_labels(&equations, &concats, sizes);
    let mut labeling = classes::solve(&equations, &sizes, first_symbol)?;
    for (axis, components) in &concats {
        let symbols = components
            .iter()
            .map(|id| match labeling.index.get(id) {
                Some(AxisIndex::Iterator(symbol)) => Ok(*symbol),
                other => Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!(
                        "projection inference: a concatenated component is read at {} instead of \
                     being iterated",
                        other.map_or("nothing".to_owned(), ToString::to_string)
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        labeling.index.insert(*axis, AxisIndex::Concat(symbols));
    }
    // Second stratum: the affine indices, from the loops the first one made.
    let mut margins: HashMap<ProjId, (usize, usize)> = HashMap::new();
    for (axis, affine) in &derived {
        let margin = margin_of(*axis, affine, &sizes);
        let index = evaluate_affine(affine, &labeling.index, margin.0)?;
        if margin != (0, 0) {
            margins.insert(*axis, margin);
        }
        if let Some(AxisIndex::Iterator(symbol)) = labeling.index.get(axis) {
            return Err(ShapeError::of_kind(
                ShapeErrorKind::Projection,
                format!(
                    "projection inference: axis p{} is both iterated ({symbol}) and computed ({index})",
                    axis.0
                ),
            ));
        }
        labeling.index.insert(*axis, index);
    }
    let read = |axes: &[DimVar]| -> (Vec<usize>, Vec<AxisIndex>) {
        axes.iter()
            .map(|var| {
                let id = ProjId(var.0);
                (sizes[&id], labeling.index[&id].clone())
            })
            .unzip()
    };
    let padding = |axes: &[DimVar]| -> Vec<(usize, usize)> {
        axes.iter()
            .map(|var| margins.get(&ProjId(var.0)).copied().unwrap_or((0, 0)))
            .collect()
    };
    let (lhs_dims, lhs_index): (Vec<usize>, Vec<AxisIndex>) = read(&result_axes);
    let (rhs_dims, rhs_index): (Vec<Vec<usize>>, Vec<Vec<AxisIndex>>) =
        operand_axes.iter().map(|axes| read(axes)).unzip();
    let lhs_padding = padding(&result_axes);
    let rhs_padding = operand_axes.iter().map(|axes| padding(axes)).collect();
    let concatenated: Vec<Vec<Symbol>> = lhs_index
        .iter()
        .chain(rhs_index.iter().flatten())
        .filter_map(|index| match index {
            AxisIndex::Concat(symbols) => Some(symbols.clone()),
            _ => None,
        })
        .collect();
    Ok(Projections {
        product_space: couple(&labeling.iterators, &concatenated),
        lhs_dims,
        rhs_dims,
        lhs_index,
        rhs_index,
        lhs_padding,
        rhs_padding,
        label: logic.to_string(),
    })
}

/// The equations of a fan-out (`Logic::Uint4x32ToPrec`), read from its two constraints: the
/// words are exactly one axis `v`, and the result has `coefficient·v` cells. The words' axis is
/// iterated, and word `w` writes its values from cell `coefficient·w` of the result on,
/// row-major: the result's innermost axis (`result_axes` are in memory order) is computed as
/// `coefficient·w` and its other axes are read at 0, since the index runs past the innermost
/// axis into the rows after it, where row-major order puts those cells. Returns the computed
/// axis.
fn fan_out(
    constraints: &[Constraint],
    result_axes: &[DimVar],
    equations: &mut Vec<ProjEq>,
) -> Result<Option<(ProjId, AffineDim)>, ShapeError> {
    let unexpected = |what: String| {
        ShapeError::of_kind(
            ShapeErrorKind::Projection,
            format!("projection inference of a fan-out: {what}"),
        )
    };
    let (words, count) = constraints
        .iter()
        .find_map(|c| match c {
            Constraint::Exact { rows, dims } => Some((rows.iter().flat_map(Row::dims), dims)),
            _ => None,
        })
        .ok_or_else(|| unexpected("no axis of words".to_owned()))?;
    let words: Vec<&Dim> = words.collect();
    let (&[Dim::Var(words)], [count]) = (words.as_slice(), count.as_slice()) else {
        return Err(unexpected(format!(
            "the words must be one axis, not {}",
            words.len()
        )));
    };
    let coefficient = constraints
        .iter()
        .find_map(|c| match c {
            Constraint::TotalElems {
                total, coefficient, ..
            } if total == count => Some(*coefficient),
            _ => None,
        })
        .ok_or_else(|| unexpected("no count of the result's cells".to_owned()))?;
    equations.push(ProjEq::Iterate(ProjTerm::Proj(ProjId(words.0))));
    let Some((innermost, outer)) = result_axes.split_last() else {
        return Ok(None);
    };
    for axis in outer {
        equations.push(ProjEq::Eq(
            ProjTerm::Proj(ProjId(axis.0)),
            ProjTerm::Sol(AxisIndex::Fixed(0)),
        ));
    }
    let affine = AffineDim {
        stride: coefficient,
        over: Dim::Var(*words),
        conv: None,
        offset: 0,
    };
    Ok(Some((ProjId(innermost.0), affine)))
}

/// The margins an affine axis is addressed beyond its size: those of [`padding_of`] for a padded
/// convolution, the padding given (and, rounded up, the last window's overrun) for an explicitly
/// padded one, none otherwise.
fn margin_of(axis: ProjId, affine: &AffineDim, sizes: &HashMap<ProjId, usize>) -> (usize, usize) {
    let size = |dim: &Dim| match dim {
        Dim::Var(var) => sizes.get(&ProjId(var.0)).copied().unwrap_or(1),
        other => other.ground_size().unwrap_or(1),
    };
    let Some(conv) = &affine.conv else {
        return (0, 0);
    };
    match conv.border {
        Border::Same => padding_of(size(&conv.kernel), conv.dilation),
        Border::Valid => (0, 0),
        Border::Explicit(explicit) => {
            let span = size(&conv.kernel).saturating_sub(1) * conv.dilation + 1;
            let input = sizes.get(&axis).copied().unwrap_or(0);
            let after = explicit.after_read(input, size(&affine.over), span, affine.stride);
            (explicit.before, after)
        }
    }
}

/// `stride·over + dilation·kernel + offset − left`, with `over` and `kernel` replaced by their
/// indices and `left` the axis's left margin.
fn evaluate_affine(
    affine: &AffineDim,
    index: &HashMap<ProjId, AxisIndex>,
    left: usize,
) -> Result<AxisIndex, ShapeError> {
    let mut terms = Vec::new();
    let mut offset = affine.offset as i64 - left as i64;
    let mut add = |dim: &Dim, coefficient: usize| -> Result<(), ShapeError> {
        let Dim::Var(var) = dim else {
            return Err(ShapeError::of_kind(
                ShapeErrorKind::Projection,
                format!("projection inference: nested derived axis {dim} is not built yet"),
            ));
        };
        match index.get(&ProjId(var.0)).unwrap_or(&AxisIndex::Fixed(0)) {
            AxisIndex::Iterator(symbol) => terms.push((coefficient as i64, *symbol)),
            AxisIndex::Fixed(position) => offset += coefficient as i64 * position,
            other => {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!("projection inference: an affine axis over {other} is not built yet"),
                ));
            }
        }
        Ok(())
    };
    add(&affine.over, affine.stride)?;
    if let Some(conv) = &affine.conv {
        add(&conv.kernel, conv.dilation)?;
    }
    Ok(AxisIndex::affine(terms, offset))
}

/// The margins `(left, right)` a padded convolution reads beyond its input: `(kernel − 1)·dilation`
/// positions in all, half of them (rounded down) before the first, as in a "same" convolution.
/// The dilation counts: a dilated kernel overruns by its dilated span.
pub fn padding_of(kernel: usize, dilation: usize) -> (usize, usize) {
    let overrun = kernel.saturating_sub(1) * dilation;
    (overrun / 2, overrun - overrun / 2)
}

/// The product space: one factor per iterator, except that the symbols of concatenated indices
/// that share a symbol (connected components of the hypergraph they form) are coupled into one
/// factor, in order of first appearance.
fn couple(iterators: &[(Symbol, usize)], concatenated: &[Vec<Symbol>]) -> Vec<Factor> {
    let mut group: HashMap<Symbol, usize> = HashMap::new();
    let mut groups: Vec<Vec<Symbol>> = Vec::new();
    for symbols in concatenated {
        let mut joined: Vec<usize> = symbols
            .iter()
            .filter_map(|s| group.get(s).copied())
            .collect();
        joined.sort_unstable();
        joined.dedup();
        let target = match joined.first() {
            Some(&first) => first,
            None => {
                groups.push(Vec::new());
                groups.len() - 1
            }
        };
        for &other in joined.iter().skip(1).rev() {
            let moved = std::mem::take(&mut groups[other]);
            for symbol in &moved {
                group.insert(*symbol, target);
            }
            groups[target].extend(moved);
        }
        for symbol in symbols {
            if !group.contains_key(symbol) {
                group.insert(*symbol, target);
                groups[target].push(*symbol);
            }
        }
    }
    let range: HashMap<Symbol, usize> = iterators.iter().copied().collect();
    let mut placed: Vec<bool> = vec![false; groups.len()];
    let mut factors = Vec::new();
    for &(symbol, size) in iterators {
        match group.get(&symbol) {
            None => factors.push(Factor::single(symbol, size)),
            Some(&g) if !placed[g] => {
                placed[g] = true;
                factors.push(Factor::coupled(groups[g].iter().map(|s| (*s, range[s]))));
            }
            Some(_) => {}
        }
    }
    factors
}

/// Spec labels and other generated variables are not axes: they take the size of the axes
/// they are equated with, and a concatenation's one component of unknown size takes what the
/// others leave of the concatenated axis.
fn sizes_of_labels(
    equations: &[ProjEq],
    concats: &[(ProjId, Vec<ProjId>)],
    mut sizes: HashMap<ProjId, usize>,
) -> HashMap<ProjId, usize> {
    loop {
        let before = sizes.len();
        for (axis, components) in concats {
            let unknown: Vec<&ProjId> = components
                .iter()
                .filter(|id| !sizes.contains_key(id))
                .collect();
            if let ([missing], Some(&total)) = (unknown.as_slice(), sizes.get(axis)) {
                let known: usize = components.iter().filter_map(|id| sizes.get(id)).sum();
                sizes.insert(**missing, total.saturating_sub(known));
            }
        }
        for equation in equations {
            if let ProjEq::Eq(ProjTerm::Proj(a), ProjTerm::Proj(b)) = equation {
                match (sizes.get(a).copied(), sizes.get(b).copied()) {
                    (Some(size), None) => {
                        sizes.insert(*b, size);
                    }
                    (None, Some(size)) => {
                        sizes.insert(*a, size);
                    }
                    _ => {}
                }
            }
        }
        if sizes.len() == before {
            return sizes;
        }
    }
}

/// The local re-solve: row variables bound to stretches of axes, axes paired into equations.
struct Elaboration {
    rows: HashMap<RowVarId, Vec<Dim>>,
    equations: Vec<ProjEq>,
    /// Axes whose index an affine term computes (second stratum).
    derived: Vec<(ProjId, AffineDim)>,
    /// Axes that concatenate components, with the components' ids.
    concats: Vec<(ProjId, Vec<ProjId>)>,
    /// Components given by a size instead of a label (`3^a`), with their sizes.
    anonymous: Vec<(ProjId, usize)>,
    /// The next id for an anonymous component.
    next_id: u32,
}

impl Elaboration {
    fn new(next_id: u32) -> Self {
        Elaboration {
            rows: HashMap::new(),
            equations: Vec::new(),
            derived: Vec::new(),
            concats: Vec::new(),
            anonymous: Vec::new(),
            next_id,
        }
    }

    fn run(
        mut self,
        constraints: &[Constraint],
        sizes: &HashMap<ProjId, usize>,
    ) -> Result<Self, ShapeError> {
        let mut pending: Vec<&Constraint> = constraints.iter().collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut waiting = Vec::new();
            for constraint in pending {
                if !self.step(constraint, sizes)? {
                    waiting.push(constraint);
                }
            }
            if waiting.len() == before {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    "projection inference: the rows of the operation's tensors cannot be aligned",
                )
                .in_constraint(waiting[0]));
            }
            pending = waiting;
        }
        Ok(self)
    }

    /// Takes one constraint into account, or returns `false` if it must wait for a row variable.
    fn step(
        &mut self,
        constraint: &Constraint,
        sizes: &HashMap<ProjId, usize>,
    ) -> Result<bool, ShapeError> {
        match constraint {
            Constraint::RowEq(a, b) => {
                let (a, b) = (self.substitute(a), self.substitute(b));
                match (a.var, b.var) {
                    (None, None) => {
                        let (a, b) = (flat(&a), flat(&b));
                        if a.len() != b.len() {
                            return Err(misaligned(constraint));
                        }
                        for (x, y) in a.iter().zip(&b) {
                            self.equal(x, y)?;
                        }
                        Ok(true)
                    }
                    (Some(_), None) => self.bind(&a, &flat(&b), constraint),
                    (None, Some(_)) => self.bind(&b, &flat(&a), constraint),
                    (Some(_), Some(_)) => Ok(false),
                }
            }
            Constraint::RowLe { res, opnd } => {
                let (res, opnd) = (self.substitute(res), self.substitute(opnd));
                if res.var.is_some() || opnd.var.is_some() {
                    return Ok(false);
                }
                let all = flat(&res);
                let n_lead = opnd.leading.len();
                let n_trail = opnd.trailing.len();
                if n_lead + n_trail > all.len() {
                    return Err(misaligned(constraint));
                }
                let pairs = all[..n_lead]
                    .iter()
                    .zip(&opnd.leading)
                    .chain(all[all.len() - n_trail..].iter().zip(&opnd.trailing));
                for (r, o) in pairs {
                    self.broadcast(r, o, sizes)?;
                }
                Ok(true)
            }
            Constraint::DimEq(a, b) => {
                self.equal(a, b)?;
                Ok(true)
            }
            Constraint::DimLe { res, opnd } => {
                self.broadcast(res, opnd, sizes)?;
                Ok(true)
            }
            // Fixed indices are pinned from the generator's list; the counts and exact layouts
            // of leaves say nothing about loops.
            Constraint::AtLeast { .. }
            | Constraint::TotalElems { .. }
            | Constraint::Exact { .. } => Ok(true),
        }
    }

    /// The row with bound row variables spliced in.
    fn substitute(&self, row: &Row) -> Row {
        match row.var.and_then(|var| self.rows.get(&var)) {
            Some(value) => {
                let mut trailing = row.leading.clone();
                trailing.extend(value.iter().cloned());
                trailing.extend(row.trailing.iter().cloned());
                Row::closed(trailing)
            }
            None => row.clone(),
        }
    }

    /// `open` (with a row variable) equals the closed axes `closed`: its flanks pair with the
    /// ends, its variable takes the middle.
    fn bind(
        &mut self,
        open: &Row,
        closed: &[Dim],
        constraint: &Constraint,
    ) -> Result<bool, ShapeError> {
        let (n_lead, n_trail) = (open.leading.len(), open.trailing.len());
        if n_lead + n_trail > closed.len() {
            return Err(misaligned(constraint));
        }
        let end = closed.len() - n_trail;
        for (x, y) in open.leading.iter().zip(&closed[..n_lead]) {
            self.equal(x, y)?;
        }
        for (x, y) in open.trailing.iter().zip(&closed[end..]) {
            self.equal(x, y)?;
        }
        let var = open.var.expect("an open row");
        self.rows.insert(var, closed[n_lead..end].to_vec());
        Ok(true)
    }

    fn equal(&mut self, a: &Dim, b: &Dim) -> Result<(), ShapeError> {
        if self.derive(a, b)? {
            return Ok(());
        }
        let (a, b) = (term(a)?, term(b)?);
        self.equations.push(ProjEq::Eq(a, b));
        Ok(())
    }

    /// An axis paired with an affine term takes its index from the term: recorded for the second
    /// stratum. Returns whether the pair was one.
    fn derive(&mut self, a: &Dim, b: &Dim) -> Result<bool, ShapeError> {
        let (axis, affine) = match (a, b) {
            (Dim::Var(var), Dim::Affine(affine)) | (Dim::Affine(affine), Dim::Var(var)) => {
                (ProjId(var.0), affine)
            }
            (Dim::Var(var), Dim::Concat(components)) | (Dim::Concat(components), Dim::Var(var)) => {
                let ids = components
                    .iter()
                    .map(|component| self.component(component))
                    .collect::<Result<Vec<_>, _>>()?;
                self.concats.push((ProjId(var.0), ids));
                return Ok(true);
            }
            (Dim::Affine(_) | Dim::Concat(_), Dim::Affine(_) | Dim::Concat(_)) => {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Projection,
                    format!(
                        "projection inference: two derived axes paired ({a} with {b}) is not built yet"
                    ),
                ));
            }
            _ => return Ok(false),
        };
        self.derived.push((axis, (**affine).clone()));
        Ok(true)
    }

    /// The id of one component of a concatenation: its label's, or a fresh one for a size.
    fn component(&mut self, component: &Dim) -> Result<ProjId, ShapeError> {
        match component {
            Dim::Var(var) => Ok(ProjId(var.0)),
            Dim::Atom { size, .. } => Ok(self.anonymous_component(*size)),
            Dim::Unit => Ok(self.anonymous_component(1)),
            other => Err(ShapeError::of_kind(
                ShapeErrorKind::Projection,
                format!(
                    "projection inference: the concatenated component {other} is not built yet"
                ),
            )),
        }
    }

    fn anonymous_component(&mut self, size: usize) -> ProjId {
        let id = ProjId(self.next_id);
        self.next_id += 1;
        self.anonymous.push((id, size));
        id
    }

    /// `res ⊑ opnd` between two axes: the operand broadcasts (is read at 0) when it has size 1
    /// and the result does not; otherwise they share a loop.
    fn broadcast(
        &mut self,
        res: &Dim,
        opnd: &Dim,
        sizes: &HashMap<ProjId, usize>,
    ) -> Result<(), ShapeError> {
        if self.derive(res, opnd)? {
            return Ok(());
        }
        let (res, opnd) = (term(res)?, term(opnd)?);
        let size = |t: &ProjTerm| match t {
            ProjTerm::Proj(id) => sizes.get(id).copied(),
            ProjTerm::Sol(_) => None,
        };
        if size(&opnd) == Some(1) && size(&res) != Some(1) {
            self.equations
                .push(ProjEq::Eq(opnd, ProjTerm::Sol(AxisIndex::Fixed(0))));
        } else {
            self.equations.push(ProjEq::Eq(res, opnd));
        }
        Ok(())
    }
}

fn term(dim: &Dim) -> Result<ProjTerm, ShapeError> {
    match dim {
        Dim::Var(var) => Ok(ProjTerm::Proj(ProjId(var.0))),
        Dim::Affine(_) | Dim::Concat(_) => Err(ShapeError::of_kind(
            ShapeErrorKind::Projection,
            format!("projection inference: the derived axis {dim} is not paired with an axis"),
        )),
        Dim::Unit | Dim::Atom { .. } => Err(ShapeError::of_kind(
            ShapeErrorKind::Projection,
            format!("projection inference: a spec axis of given size ({dim}) has no axis identity"),
        )),
    }
}

fn flat(row: &Row) -> Vec<Dim> {
    row.dims().cloned().collect()
}

fn misaligned(constraint: &Constraint) -> ShapeError {
    ShapeError::of_kind(
        ShapeErrorKind::Projection,
        "projection inference: the rows of the operation's tensors do not align (were the shapes \
         solved with this operation?)",
    )
    .in_constraint(constraint)
}
