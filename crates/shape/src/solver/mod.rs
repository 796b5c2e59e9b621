//! The shape solver: variable elimination over dimension and row constraints, then closing.
//!
//! Stage 1 ([`Solver::solve`]) runs online as operations are added: it unifies, pins variables that
//! face atoms, records the bounds it cannot yet decide (a dimension's atom *cap* `d ⊑ α`, a row's
//! cap rows, and variable-to-variable adjacencies), and never guesses. Binding a variable re-emits
//! every bound stored on it, instantiated at its value: that single discipline is the propagation.
//! Constraints that cannot be decided yet (split row surpluses, total-element counts, comparisons
//! with derived terms) are *deferred* and retried whenever a variable gets bound. An equation that
//! gives a derived term (`a^b`, `2*o`) a size its parts cannot take yet waits apart, and meanwhile
//! that size is the term's value for every other constraint: which of two equal terms a row ends up
//! holding depends on the order of the equations, and must not change what its uses see.
//!
//! [`Solver::close`] then commits what solving left free, in the documented order (`closing`):
//! leaves close downward to their caps, parameters never get a guessed dimension, and everything
//! else closes to the claim-free unit `1*` (or 0 for a discardable concat component) and to
//! no-further-axes. Termination is guaranteed by the rank-fact cycle check (`rank`) and, as a last
//! resort, by a step budget that turns a runaway into an error rather than a hang.
//!
//! Known gap in order independence (left out of the generator of `tests/solver_order.rs`):
//! slicing a tensor whose batch row is computed gives that row the form `[a]·ρ` (an axis, then the
//! broadcast point); when a use also aligns it at its trailing end with a one-axis row, the two
//! least solutions are the same single axis with the broadcast point on either side, and which
//! one solving keeps depends on the order the constraints arrive in.

mod closing;
mod derived;
mod dims;
mod rank;
mod rows;
mod var_set;
mod visit;

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::chunked::ChunkedVec;
use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::term::{AffineDim, ConvDim, Dim, DimVar, Row, RowVarId, Shape, VarSupply};
use var_set::VarSet;

pub use closing::Leaf;
pub(crate) use closing::LeafView;

/// What is known about an unsolved dimension variable.
#[derive(Debug, Clone, Default)]
struct DimBounds {
    /// The join of the atoms known to refine this variable (`cap ⊑ α`).
    cap: Option<Dim>,
    /// Variables `β` with `α ⊑ β`.
    above: Vec<DimVar>,
    /// Variables `γ` with `γ ⊑ α`.
    below: Vec<DimVar>,
    /// The least size allowed (from fixed indices); 0 when unconstrained.
    at_least: usize,
}

#[derive(Debug, Clone)]
enum DimState {
    Free(DimBounds),
    Solved(Dim),
}

/// What is known about an unsolved row variable.
#[derive(Debug, Clone, Default)]
struct RowBounds {
    /// Rows known to refine this variable's row (`cap ⊑ ρ`).
    caps: Vec<Row>,
    /// Variables `σ` with `ρ ⊑ σ`.
    above: Vec<RowVarId>,
    /// The row refines a closed row, which fixed the axes it needs: what the variable adds is
    /// room for more that broadcasting allows, not a part of the shape left undetermined.
    under_closed: bool,
}

#[derive(Debug, Clone)]
enum RowState {
    Free(RowBounds),
    Solved(Row, Option<Edge>),
}

/// Where the marker of a closed row value goes when it has none of its own.
///
/// Equating `l·ρ·r` with a closed row whose marker lies outside the part ρ takes leaves ρ without
/// a broadcast point; the same constraints in another order can instead solve ρ through other
/// rows first (`ρ = [a]·σ`) and place it wherever those put theirs. Sending the marker to the
/// edge it came from, through every row that contains ρ, makes both orders agree: a row sliced
/// from the end of a closed row broadcasts as that row does, at its outer edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Left,
    Right,
}

/// The solver's state: variable bindings, bounds, and pending work.
#[derive(Debug, Clone, Default)]
pub struct Solver {
    vars: VarSupply,
    dims: ChunkedVec<DimState>,
    rows: ChunkedVec<RowState>,
    queue: VecDeque<Constraint>,
    deferred: Vec<Constraint>,
    rank: rank::RankGraph,
    discardable: VarSet<DimVar>,
    /// Bumped on every binding, so that deferred constraints are retried only after progress.
    n_bindings: usize,
    /// `n_bindings` when the deferred constraints were last retried to no effect.
    settled_at: usize,
    /// Explicit row axes in every constraint given to [`Solver::add`].
    n_given_axes: usize,
    /// For each row variable, the axes that growing rows added on the way to it (see `rows`).
    grown: Vec<usize>,
    /// Equations between a derived term and another term that cannot be solved yet (more than
    /// one unknown part). Kept apart from `deferred`: while one waits, the size it gives the
    /// derived term is what every other constraint sees (see [`Solver::resolve_dim`]).
    derived_eqs: Vec<(Dim, Dim)>,
    /// Whether a derived part of size 1 is bound (closing) or waits (solving): see
    /// `derived::solve_eq`.
    settle_units: bool,
    /// The variables the solver made itself (see `visit`).
    own_rows: VarSet<RowVarId>,
    own_dims: VarSet<DimVar>,
    /// The window and output of a convolution that the last closing refused to guess, if it
    /// failed on one: the session names them by their labels.
    undetermined_window: Option<(DimVar, DimVar)>,
}

/// Constraint processing steps allowed per variable before the solver gives up. The rank-cycle
/// check already guarantees termination on everything we know how to generate; this bound turns a
/// missed case into an error instead of a hang.
const STEPS_PER_VAR: usize = 10_000;

impl Solver {
    /// A solver with no constraints and no variables.
    pub fn new() -> Self {
        Solver::default()
    }

    /// The supply of fresh variables; constraint generation must draw from it.
    pub fn vars(&mut self) -> &mut VarSupply {
        &mut self.vars
    }

    /// Marks variables that close to 0 rather than `1*` (discardable concat components).
    pub fn add_discardable(&mut self, vars: impl IntoIterator<Item = DimVar>) {
        self.discardable.extend(vars);
    }

    /// Queues constraints and solves them (stage 1: no guessing).
    pub fn add(
        &mut self,
        constraints: impl IntoIterator<Item = Constraint>,
    ) -> Result<(), ShapeError> {
        let constraints: Vec<Constraint> = constraints.into_iter().collect();
        self.add_all(&constraints)
    }

    /// [`Solver::add`] for constraints the caller keeps (the session logs them): they are read
    /// where they lie, in the order queuing them would have processed them.
    pub(crate) fn add_all(&mut self, constraints: &[Constraint]) -> Result<(), ShapeError> {
        self.n_given_axes += constraints.iter().map(row_axes).sum::<usize>();
        if !self.queue.is_empty() {
            // Work left by a failed call comes first, as it would in the queue.
            self.queue.extend(constraints.iter().cloned());
            return self.solve();
        }
        self.solve_from(constraints)
    }

    /// Processes queued constraints to a fixpoint, retrying deferred ones after progress.
    pub fn solve(&mut self) -> Result<(), ShapeError> {
        self.solve_from(&[])
    }

    /// [`Solver::solve`], with `given` standing before the (empty) queue.
    fn solve_from(&mut self, given: &[Constraint]) -> Result<(), ShapeError> {
        if given.is_empty() && self.queue.is_empty() && self.n_bindings == self.settled_at {
            return Ok(());
        }
        let mut given = given;
        loop {
            self.propagate(std::mem::take(&mut given))?;
            let bindings_before = self.n_bindings;
            self.retry_derived_eqs()?;
            let deferred = std::mem::take(&mut self.deferred);
            for constraint in deferred {
                self.checked_step(&constraint)?;
            }
            if self.queue.is_empty() && self.n_bindings == bindings_before {
                self.settled_at = self.n_bindings;
                return Ok(());
            }
        }
    }

    /// Retries the pending derived equations whose parts have changed. The unchanged ones stay in
    /// place while the others are retried, so that the sizes they give stay visible.
    fn retry_derived_eqs(&mut self) -> Result<(), ShapeError> {
        let pending = std::mem::take(&mut self.derived_eqs);
        let mut changed = Vec::new();
        for (a, b) in pending {
            let (plain_a, plain_b) = (self.resolve_dim_plain(&a), self.resolve_dim_plain(&b));
            if plain_a == a && plain_b == b {
                self.derived_eqs.push((a, b));
            } else {
                changed.push((a, b));
            }
        }
        for (a, b) in changed {
            self.checked_step(&Constraint::DimEq(a, b))?;
        }
        Ok(())
    }

    /// Processes `given`, then the queued constraints, leaving the deferred ones for
    /// [`Solver::solve`]: the direct consequences of a commitment, cheap enough to draw after
    /// every single one.
    fn propagate(&mut self, given: &[Constraint]) -> Result<(), ShapeError> {
        // Fixed when the call starts: a runaway that keeps creating variables must not keep
        // raising its own limit.
        let budget = STEPS_PER_VAR * (1 + self.vars.n_dims() + self.vars.n_rows());
        let mut n_steps = 0;
        let mut given = given.iter();
        loop {
            let queued;
            let constraint = match given.next() {
                Some(constraint) => constraint,
                None => match self.queue.pop_front() {
                    Some(constraint) => {
                        queued = constraint;
                        &queued
                    }
                    None => break,
                },
            };
            n_steps += 1;
            if n_steps > budget {
                return Err(ShapeError::of_kind(
                    ShapeErrorKind::Limit,
                    format!("shape inference did not converge after {n_steps} steps"),
                ));
            }
            self.checked_step(constraint)?;
        }
        Ok(())
    }

    /// One step; a failure records the constraint, with what is known substituted in.
    fn checked_step(&mut self, constraint: &Constraint) -> Result<(), ShapeError> {
        self.step(constraint)
            .map_err(|error| error.in_constraint(self.resolve_constraint(constraint)))
    }

    fn step(&mut self, constraint: &Constraint) -> Result<(), ShapeError> {
        match constraint {
            Constraint::DimEq(a, b) => self.dim_eq(a, b),
            Constraint::DimLe { res, opnd } => self.dim_le(res, opnd),
            Constraint::AtLeast { dim, size } => self.at_least(dim, *size),
            Constraint::RowEq(a, b) => self.row_eq(a, b),
            Constraint::RowLe { res, opnd } => self.row_le(res, opnd),
            Constraint::TotalElems {
                rows,
                total,
                coefficient,
            } => self.total_elems(rows, total, *coefficient),
            Constraint::Exact { rows, dims } => self.exact(rows, dims),
        }
    }

    fn defer(&mut self, constraint: Constraint) {
        self.deferred.push(constraint);
    }

    fn dim_state(&mut self, var: DimVar) -> &mut DimState {
        let index = var.0 as usize;
        self.dims
            .grow_to(index + 1, || DimState::Free(DimBounds::default()));
        &mut self.dims[index]
    }

    fn row_state(&mut self, var: RowVarId) -> &mut RowState {
        let index = var.0 as usize;
        self.rows
            .grow_to(index + 1, || RowState::Free(RowBounds::default()));
        &mut self.rows[index]
    }

    fn dim_bounds(&mut self, var: DimVar) -> Option<&mut DimBounds> {
        match self.dim_state(var) {
            DimState::Free(bounds) => Some(bounds),
            DimState::Solved(_) => None,
        }
    }

    fn row_bounds(&mut self, var: RowVarId) -> Option<&mut RowBounds> {
        match self.row_state(var) {
            RowState::Free(bounds) => Some(bounds),
            RowState::Solved(..) => None,
        }
    }

    /// The dimension with every solved variable substituted and ground derived terms evaluated;
    /// a derived term whose parts are not known yet but that a pending equation equates with a
    /// size is that size.
    pub fn resolve_dim(&self, dim: &Dim) -> Dim {
        let plain = self.resolve_dim_plain(dim);
        if !matches!(plain, Dim::Affine(_) | Dim::Concat(_)) {
            return plain;
        }
        self.derived_eqs
            .iter()
            .find_map(|(a, b)| {
                let (a, b) = (self.resolve_dim_plain(a), self.resolve_dim_plain(b));
                match () {
                    () if a == plain && b.is_ground() => Some(b),
                    () if b == plain && a.is_ground() => Some(a),
                    () => None,
                }
            })
            .unwrap_or(plain)
    }

    /// [`Solver::resolve_dim`] without the sizes of pending equations: what those equations
    /// themselves are solved with.
    fn resolve_dim_plain(&self, dim: &Dim) -> Dim {
        match dim {
            Dim::Var(var) => match self.dims.get(var.0 as usize) {
                Some(DimState::Solved(value)) => self.resolve_dim_plain(value),
                _ => dim.clone(),
            },
            Dim::Unit | Dim::Atom { .. } => dim.clone(),
            Dim::Affine(affine) => {
                let resolved = AffineDim {
                    stride: affine.stride,
                    over: self.resolve_dim_plain(&affine.over),
                    conv: affine.conv.as_ref().map(|conv| ConvDim {
                        dilation: conv.dilation,
                        kernel: self.resolve_dim_plain(&conv.kernel),
                        border: conv.border,
                    }),
                    offset: affine.offset,
                };
                derived::evaluate_affine(&resolved)
                    .unwrap_or_else(|| Dim::Affine(Box::new(resolved)))
            }
            Dim::Concat(components) => {
                let resolved: Vec<Dim> = components
                    .iter()
                    .map(|c| self.resolve_dim_plain(c))
                    .collect();
                derived::evaluate_concat(&resolved).unwrap_or(Dim::Concat(resolved))
            }
        }
    }

    /// The row with solved row variables spliced in (the host's flanks stay outermost, unless the
    /// value's marker floats to an edge: see `Edge`) and its dimensions resolved.
    pub fn resolve_row(&self, row: &Row) -> Row {
        self.resolve_row_with_edge(row).0
    }

    /// The row `l₀·ρ₀·t₀` with `ρ₀ = l₁·ρ₁·t₁`, … down to an open variable or a closed value, is
    /// `l₀·l₁·…·ρ·…·t₁·t₀`. Of the edges the bindings send their markers to, the outermost one
    /// places the marker of a closed result: every flank then lies on the far side of it.
    fn resolve_row_with_edge(&self, row: &Row) -> (Row, Option<Edge>) {
        let (mut n_leading, mut n_trailing) = (0, 0);
        let mut floating = None;
        let mut end = row;
        loop {
            n_leading += end.leading.len();
            n_trailing += end.trailing.len();
            match end.var.and_then(|var| self.rows.get(var.0 as usize)) {
                Some(RowState::Solved(value, edge)) => {
                    floating = floating.or(*edge);
                    end = value;
                }
                _ => break,
            }
        }
        let var = end.var;
        let floating = floating.filter(|_| var.is_none());
        let mut leading = Vec::with_capacity(match floating {
            None => n_leading,
            Some(_) => n_leading + n_trailing,
        });
        // The trailing flanks come innermost first: gathered outermost first, each reversed,
        // then reversed as a whole.
        let mut trailing = Vec::with_capacity(n_trailing);
        let mut part = row;
        loop {
            leading.extend(part.leading.iter().map(|d| self.resolve_dim(d)));
            trailing.extend(part.trailing.iter().rev().map(|d| self.resolve_dim(d)));
            match part.var.and_then(|var| self.rows.get(var.0 as usize)) {
                Some(RowState::Solved(value, _)) => part = value,
                _ => break,
            }
        }
        trailing.reverse();
        let row = match floating {
            None => Row {
                leading,
                var,
                trailing,
            },
            Some(Edge::Left) => {
                leading.append(&mut trailing);
                Row::closed(leading)
            }
            Some(Edge::Right) => {
                leading.append(&mut trailing);
                Row {
                    leading,
                    var: None,
                    trailing: Vec::new(),
                }
            }
        };
        (row, floating)
    }

    /// [`Solver::resolve_row`], borrowing `row` when resolving would only copy it: an open
    /// variable or none, and only free variables and sizes for axes.
    fn resolve_row_cow<'r>(&self, row: &'r Row) -> Cow<'r, Row> {
        let free_row = row
            .var
            .is_none_or(|var| !matches!(self.rows.get(var.0 as usize), Some(RowState::Solved(..))));
        let resolved_dims = row.dims().all(|dim| match dim {
            Dim::Var(var) => !matches!(self.dims.get(var.0 as usize), Some(DimState::Solved(_))),
            Dim::Unit | Dim::Atom { .. } => true,
            Dim::Affine(_) | Dim::Concat(_) => false,
        });
        if free_row && resolved_dims {
            Cow::Borrowed(row)
        } else {
            Cow::Owned(self.resolve_row(row))
        }
    }

    /// The variable that `row`'s resolution ends in, if it is open: `resolve_row(row).var`,
    /// without building the row.
    fn open_var(&self, row: &Row) -> Option<RowVarId> {
        let mut var = row.var?;
        loop {
            match self.rows.get(var.0 as usize) {
                Some(RowState::Solved(value, _)) => var = value.var?,
                _ => return Some(var),
            }
        }
    }

    /// The variable that `row` resolves to when its resolution is that variable alone, with no
    /// axes around it.
    fn bare_var(&self, row: &Row) -> Option<RowVarId> {
        let mut row = row;
        loop {
            if row.n_explicit() > 0 {
                return None;
            }
            let var = row.var?;
            match self.rows.get(var.0 as usize) {
                Some(RowState::Solved(value, _)) => row = value,
                _ => return Some(var),
            }
        }
    }

    /// Calls `f` on the axes of `row`'s resolution, in order, each as it stands before
    /// [`Solver::resolve_dim`]: what `resolve_row(row).dims()` lists, without building the row
    /// (a floating marker moves only the split between the flanks, never the order).
    fn for_each_resolved_axis(&self, row: &Row, f: &mut impl FnMut(&Dim)) {
        row.leading.iter().for_each(&mut *f);
        if let Some(var) = row.var
            && let Some(RowState::Solved(value, _)) = self.rows.get(var.0 as usize)
        {
            self.for_each_resolved_axis(value, f);
        }
        row.trailing.iter().for_each(f);
    }

    /// The constraint with every term resolved.
    pub fn resolve_constraint(&self, constraint: &Constraint) -> Constraint {
        constraint.map_terms(|d| self.resolve_dim(d), |r| self.resolve_row(r))
    }

    /// The shape with [`Solver::resolve_row`] applied to each row.
    pub fn resolve_shape(&self, shape: &Shape) -> Shape {
        Shape {
            batch: self.resolve_row(&shape.batch),
            input: self.resolve_row(&shape.input),
            output: self.resolve_row(&shape.output),
        }
    }
}

/// Pushes onto a list that most variables keep short (one bound or two): the first push makes
/// room for one item rather than `Vec`'s four, since there is such a list for every variable.
fn push_short<T>(list: &mut Vec<T>, item: T) {
    if list.capacity() == 0 {
        list.reserve_exact(1);
    }
    list.push(item);
}

/// The explicit row axes a constraint names (see `Solver::n_given_axes`).
fn row_axes(constraint: &Constraint) -> usize {
    let rows = |rows: &[Row]| rows.iter().map(Row::n_explicit).sum::<usize>();
    match constraint {
        Constraint::DimEq(..) | Constraint::DimLe { .. } | Constraint::AtLeast { .. } => 0,
        Constraint::RowEq(a, b) => a.n_explicit() + b.n_explicit(),
        Constraint::RowLe { res, opnd } => res.n_explicit() + opnd.n_explicit(),
        Constraint::TotalElems { rows: r, .. } => rows(r),
        Constraint::Exact { rows: r, dims } => rows(r) + dims.len(),
    }
}

#[cfg(test)]
mod tests;
