//! The closing policy: committing what solving left free, in stages, propagating every single
//! commitment before the next.
//!
//! 1. Leaf rows (shapes of tensors no operation computes) close *downward*, to the join of their
//!    caps: the most specific row their uses demand. A lone open row with a pending total-elements
//!    count gets one axis of the missing size; where the known axes already make the count, it
//!    takes no axis of its own but what its uses demand (a vector of `n` values given its one
//!    output axis of `n` has no other axes). A parameter's output row that nothing determines
//!    (no caps, or only bare open rows with nothing below them, and no row above it) is an error.
//!    A parameter row that refines another row (`w` in `w * x`, whose input row refines `x`'s
//!    output row) has the axes that row demands and closes to no further ones; an undetermined
//!    parameter *input* row closes to no axes (a bias added to data has none).
//! 2. Leaf dimensions with a cap close to it (a derived leaf dimension brings the variables of
//!    the terms it is equated with).
//! 3. Other leaf dimensions: a parameter's is an error ("you forgot to specify the hidden
//!    dimension"); others close to their default (below).
//! 4. Every other row closes to the join of its caps, or to no-further-axes.
//! 5. Every other dimension with a cap closes to it.
//! 6. What remains closes to its default: a discardable concat component to 0; a dimension
//!    carrying a fixed index `n` to `n+1` (an index-0 axis with a cap to the claim-free `1*`, so
//!    that a kept reduction axis broadcasts); anything else to `1*`. Except the output and the
//!    window of a valid convolution (`2*o<+k`) over an input of known size when both are still
//!    unknown: any pair that fits would do (the unit output makes the window the whole input), so
//!    closing either is an error naming them (`Solver::refused_window`), never a guess.
//!
//! Before all of these, stage 0 settles the sizes that solving leaves waiting because they come
//! without a unit: a dimension that only an element count determines, a concat component whose
//! total's named unit another component has, a derived part of size 1 (see
//! `close_pending_sizes`).
//!
//! Within stages 4 to 6, variables are visited in the order of the variables the constraints were
//! given in (`visit`), never in the order solving happened to create or merge them. Every single
//! commitment is propagated, deferred constraints included, before the next is made, so that one
//! leaf's choice constrains the next: `{3 ⊑ α, 5 ⊑ β, γ ⊑ α, γ ⊑ β}` with leaves α, β closes
//! α = 3, which pins γ = 3 and leaves β only `1*`. The policy never backtracks: a commitment that
//! makes a later constraint fail is reported, not undone.

use super::var_set::VarSet;
use super::{RowState, Solver, derived};
use crate::constraint::Constraint;
use crate::error::{ShapeError, ShapeErrorKind};
use crate::term::{Border, Dim, DimVar, Kind, Row, RowVarId, Shape};

/// The shape of a tensor that no operation computes: data, constants, parameters.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The tensor's label, used in error messages.
    pub label: String,
    /// The leaf's shape term as declared.
    pub shape: Shape,
    /// Parameters never get a guessed dimension or row.
    pub is_param: bool,
}

/// A [`Leaf`] whose label and shape lie elsewhere (the session's tensors).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafView<'a> {
    pub(crate) label: &'a str,
    pub(crate) shape: &'a Shape,
    pub(crate) is_param: bool,
}

impl Solver {
    /// Solves, then closes every variable following the policy above.
    pub fn close(&mut self, leaves: &[Leaf]) -> Result<(), ShapeError> {
        let views: Vec<LeafView<'_>> = leaves
            .iter()
            .map(|leaf| LeafView {
                label: &leaf.label,
                shape: &leaf.shape,
                is_param: leaf.is_param,
            })
            .collect();
        self.close_views(&views)
    }

    /// [`Solver::close`] for leaves whose labels and shapes lie elsewhere.
    pub(crate) fn close_views(&mut self, leaves: &[LeafView<'_>]) -> Result<(), ShapeError> {
        self.undetermined_window = None;
        self.solve()?;
        // From here on, a derived part of size 1 takes the explicit `1`: what could have said
        // `1*` has been said.
        self.settle_units = true;
        let closed = self
            .close_pending_sizes()
            .and_then(|()| self.close_stages(leaves));
        self.settle_units = false;
        closed
    }

    /// Stages 1 to 6 (see the module documentation).
    fn close_stages(&mut self, leaves: &[LeafView<'_>]) -> Result<(), ShapeError> {
        let informed = self.rows_informed_from_below();
        // Rows that take the rest of an element count not known yet close last.
        let mut waiting: Vec<(RowVarId, Option<(&LeafView<'_>, Kind)>)> = Vec::new();
        let mut is_waiting = VarSet::default();
        for leaf in leaves {
            for kind in Kind::ALL {
                if let Some(var) = self.open_var(leaf.shape.row(kind)) {
                    if self.awaits_total(var) {
                        waiting.push((var, Some((leaf, kind))));
                        is_waiting.insert(var);
                        continue;
                    }
                    self.close_row(var, Some((leaf, kind)), &informed)?;
                    self.solve()?;
                }
            }
        }
        for var in self.leaf_dim_vars(leaves) {
            self.close_dim_to_cap(var)?;
            self.solve()?;
        }
        self.solve()?;
        // Each leaf's axes as they are before any of them closes, gathered without building its
        // resolved shape.
        let mut axes: Vec<(Kind, Dim)> = Vec::new();
        for leaf in leaves {
            axes.clear();
            for kind in Kind::ALL {
                self.for_each_resolved_axis(leaf.shape.row(kind), &mut |dim| {
                    axes.push((kind, self.resolve_dim(dim)));
                });
            }
            for (kind, dim) in &axes {
                let Dim::Var(var) = self.resolve_dim(dim) else {
                    continue;
                };
                if leaf.is_param && self.dim_bounds(var).is_some_and(|b| b.at_least == 0) {
                    return Err(hidden_dimension(
                        leaf,
                        *kind,
                        &self.resolve_shape(leaf.shape),
                    ));
                }
                self.close_dim_to_default(var)?;
                self.solve()?;
            }
        }
        self.solve()?;
        // Closing a row can grow another one (a cap meeting a longer row): each stage visits
        // again until no variable it has not seen is left, so that fresh ones close too.
        let mut visited = VarSet::default();
        loop {
            let order = self.rows_to_visit(&visited);
            if order.is_empty() {
                break;
            }
            for var in order {
                visited.insert(var);
                if self.row_bounds(var).is_none() || is_waiting.contains(var) {
                    continue;
                }
                if self.awaits_total(var) {
                    waiting.push((var, None));
                    is_waiting.insert(var);
                } else {
                    self.close_row(var, None, &informed)?;
                    self.solve()?;
                }
            }
        }
        self.solve()?;
        self.close_dims(Self::close_dim_to_cap)?;
        self.close_dims_to_default()?;
        for (var, leaf) in waiting {
            if let Some(var) = self.open_var(&Row::var(var)) {
                self.close_row(var, leaf, &informed)?;
                self.solve()?;
            }
        }
        self.close_dims_to_default()?;
        let pending = self
            .derived_eqs
            .iter()
            .map(|(a, b)| Constraint::DimEq(self.resolve_dim_plain(a), self.resolve_dim_plain(b)))
            .chain(self.deferred.iter().map(|c| self.resolve_constraint(c)))
            .collect::<Vec<_>>();
        if let Some(constraint) = pending.first() {
            return Err(ShapeError::of_kind(
                ShapeErrorKind::Underdetermined,
                format!(
                    "Not enough shape information: {} relation(s) between shapes could not be \
                 decided",
                    pending.len()
                ),
            )
            .in_constraint(constraint));
        }
        Ok(())
    }

    /// Stage 0: an element count whose only unknown is one dimension gives it its size, and so
    /// does a concatenation whose total's named basis a known component already carries. Solving
    /// never does this itself, since the size comes without a basis: an axis whose basis other
    /// constraints fix must get it from them, whatever order they come in. A cap of the right
    /// size lends its basis.
    fn close_pending_sizes(&mut self) -> Result<(), ShapeError> {
        'settling: loop {
            for settled in self.pending_sizes()? {
                let before = self.n_bindings;
                match settled {
                    PendingSize::Dim(var, size) => {
                        let value = match self.dim_bounds(var).and_then(|b| b.cap.clone()) {
                            Some(cap) if cap.ground_size() == Some(size) => cap,
                            _ => Dim::size(size),
                        };
                        self.bind_dim(var, value)?;
                    }
                    PendingSize::Equations(equations) => self
                        .queue
                        .extend(equations.into_iter().map(|(x, y)| Constraint::DimEq(x, y))),
                }
                self.solve()?;
                if self.n_bindings != before {
                    continue 'settling;
                }
            }
            return Ok(());
        }
    }

    /// The pending constraints that closing stage 0 can settle, and how.
    fn pending_sizes(&self) -> Result<Vec<PendingSize>, ShapeError> {
        let mut settled = Vec::new();
        for (a, b) in &self.derived_eqs {
            let (a, b) = (self.resolve_dim_plain(a), self.resolve_dim_plain(b));
            let missing =
                derived::missing_component(&a, &b)?.or(derived::missing_component(&b, &a)?);
            if let Some((var, size)) = missing
                .or_else(|| derived::smallest_input(&a, &b))
                .or_else(|| derived::smallest_input(&b, &a))
            {
                settled.push(PendingSize::Dim(var, size));
            }
            if let Some(equations) = derived::solve_eq(&a, &b, true)? {
                settled.push(PendingSize::Equations(equations));
            }
        }
        for constraint in &self.deferred {
            if let Constraint::TotalElems {
                rows,
                total,
                coefficient,
            } = self.resolve_constraint(constraint)
                && rows.iter().all(|r| r.var.is_none())
                && let Some((var, size)) = missing_dim(&rows, &total, coefficient)
            {
                settled.push(PendingSize::Dim(var, size));
            }
        }
        Ok(settled)
    }

    fn close_dims_to_default(&mut self) -> Result<(), ShapeError> {
        self.close_dims(Self::close_dim_to_default)
    }

    /// One dimension stage: `close` each variable in visiting order, propagating each.
    fn close_dims(
        &mut self,
        close: fn(&mut Self, DimVar) -> Result<(), ShapeError>,
    ) -> Result<(), ShapeError> {
        let mut visited = VarSet::default();
        loop {
            let order = self.dims_to_visit(&visited);
            if order.is_empty() {
                return self.solve();
            }
            for var in order {
                visited.insert(var);
                close(self, var)?;
                self.solve()?;
            }
        }
    }

    /// Whether `var` is the last open row of a pending element count that has other unknown
    /// parts: closing it now would give it no axes where the count, once known, may need some.
    fn awaits_total(&self, var: RowVarId) -> bool {
        self.deferred.iter().any(|constraint| {
            let Constraint::TotalElems { rows, total, .. } = constraint else {
                return false;
            };
            let rows: Vec<Row> = rows.iter().map(|r| self.resolve_row(r)).collect();
            let mut open = rows.iter().filter_map(|r| r.var);
            let only_open = open.next() == Some(var) && open.next().is_none();
            let unknown = !self.resolve_dim(total).is_ground()
                || rows.iter().flat_map(Row::dims).any(|d| !d.is_ground());
            only_open && unknown
        })
    }

    fn close_row(
        &mut self,
        var: RowVarId,
        leaf: Option<(&LeafView<'_>, Kind)>,
        informed: &VarSet<RowVarId>,
    ) -> Result<(), ShapeError> {
        if self.awaits_empty(var) {
            return self.bind_row(var, Row::default());
        }
        if self.close_word_equation(var)? {
            self.solve()?;
            if self.row_bounds(var).is_none() {
                return Ok(());
            }
        }
        // A count the known axes already make gives the row no axis of its own: it closes as
        // any other row, to what its uses demand (no axes where they demand none), and the
        // count is what determines it.
        let counted = match self.missing_total_for(var) {
            Some(1) => true,
            Some(size) => return self.bind_row(var, Row::closed(vec![Dim::size(size)])),
            None => false,
        };
        if let Some((rows, dims, n_open)) = self.pending_exact_for(var) {
            // Several open rows share the exact axes: the last one takes them.
            return if n_open == 1 {
                self.exact(&rows, &dims)
            } else if rows
                .iter()
                .rev()
                .find(|r| r.var.is_some())
                .and_then(|r| r.var)
                == Some(var)
            {
                Ok(())
            } else {
                self.bind_row(var, Row::default())
            };
        }
        let (caps, above, under_closed) = match self.row_bounds(var) {
            // A computed row has what its operands force and nothing more: what its uses add is
            // theirs (each use's result has its own row), and they broadcast against no axes.
            Some(_) if leaf.is_none() => return self.bind_row(var, Row::default()),
            Some(bounds) => (
                bounds.caps.clone(),
                bounds.above.clone(),
                bounds.under_closed,
            ),
            None => return Ok(()),
        };
        // Bounds between variables that have since joined one class say nothing.
        let bounded_above = under_closed
            || above
                .iter()
                .any(|other| self.bare_var(&Row::var(*other)) != Some(var));
        // `ρ ⊑ ρ` says nothing; it is left over when a cap's variable joined this one's class.
        let caps: Vec<Row> = caps
            .iter()
            .map(|cap| self.resolve_row(cap))
            .filter(|cap| *cap != Row::var(var))
            .collect();
        // A bare open row below says nothing yet, unless something below it does.
        let informative =
            counted || informed.contains(var) || self.informed_from_below(var, informed);
        if !informative
            && !bounded_above
            && let Some((leaf, kind)) = leaf
            && leaf.is_param
            && kind != Kind::Input
        {
            return Err(hidden_dimension(
                leaf,
                kind,
                &self.resolve_shape(leaf.shape),
            ));
        }
        let joined = self.join_rows(&caps);
        self.bind_row(var, joined)
    }

    /// The free row variables that some row below them, directly or through open rows with no
    /// axes of their own, shows to be closed or to have axes: computed once, for the state
    /// solving left, since walking down from every parameter would cost the whole graph below
    /// it each time.
    fn rows_informed_from_below(&self) -> VarSet<RowVarId> {
        // The edges from a bare row below to the row above it, grouped by the row below
        // (counted, then placed): reachability needs no order among them.
        let mut edges: Vec<(RowVarId, RowVarId)> = Vec::new();
        let mut pending = Vec::new();
        for (index, state) in self.rows.iter().enumerate() {
            let RowState::Free(bounds) = state else {
                continue;
            };
            let var = RowVarId(index as u32);
            for cap in &bounds.caps {
                match self.bare_var(cap) {
                    Some(below) => edges.push((below, var)),
                    None => pending.push(var),
                }
            }
        }
        let mut starts = vec![0usize; self.vars.n_rows() + 1];
        for (below, _) in &edges {
            starts[below.0 as usize + 1] += 1;
        }
        for index in 1..starts.len() {
            starts[index] += starts[index - 1];
        }
        let mut next = starts.clone();
        let mut above = vec![RowVarId(0); edges.len()];
        for (below, var) in edges {
            let slot = &mut next[below.0 as usize];
            above[*slot] = var;
            *slot += 1;
        }
        let mut informed = VarSet::default();
        while let Some(var) = pending.pop() {
            if informed.insert(var) {
                let index = var.0 as usize;
                pending.extend_from_slice(&above[starts[index]..starts[index + 1]]);
            }
        }
        informed
    }

    /// Whether one of `var`'s caps, or of the caps of a bare row among them, is closed or has
    /// axes now, beyond what `informed` (see [`Solver::rows_informed_from_below`]) knew.
    fn informed_from_below(&self, var: RowVarId, informed: &VarSet<RowVarId>) -> bool {
        let Some(RowState::Free(bounds)) = self.rows.get(var.0 as usize) else {
            return false;
        };
        bounds.caps.iter().any(|cap| match self.bare_var(cap) {
            Some(below) => informed.contains(below),
            None => true,
        })
    }

    /// The least row above all `caps` (leading flanks aligned from the front, trailing from the
    /// back, each as long as the shortest); positions where caps disagree on a variable become
    /// fresh variables for the dimension stages to close.
    fn join_rows(&mut self, caps: &[Row]) -> Row {
        if caps.is_empty() {
            return Row::default();
        }
        let n_lead = caps.iter().map(|c| c.leading.len()).min().unwrap_or(0);
        let n_trail = caps.iter().map(|c| c.trailing.len()).min().unwrap_or(0);
        let leading = (0..n_lead)
            .map(|i| self.join_dims(caps.iter().map(|c| &c.leading[i])))
            .collect();
        let trailing = (0..n_trail)
            .map(|i| {
                self.join_dims(
                    caps.iter()
                        .map(|c| &c.trailing[c.trailing.len() - n_trail + i]),
                )
            })
            .collect();
        Row {
            leading,
            var: None,
            trailing,
        }
    }

    fn join_dims<'d>(&mut self, dims: impl Iterator<Item = &'d Dim>) -> Dim {
        let dims: Vec<&Dim> = dims.collect();
        if dims.iter().all(|d| *d == dims[0]) {
            return dims[0].clone();
        }
        if dims.iter().all(|d| d.is_ground()) {
            return Dim::Unit;
        }
        self.fresh_dim()
    }

    /// Whether `var` is the result's variable in a pending inequality whose deficit the other
    /// flank may cover: that inequality waited for exactly this, the variable closing to no
    /// axes (growing it is what another order of the same constraints would have done only if
    /// it had to).
    fn awaits_empty(&self, var: RowVarId) -> bool {
        self.deferred.iter().any(|constraint| {
            matches!(constraint, Constraint::RowLe { res, .. }
                if self.open_var(res) == Some(var))
        })
    }

    /// A pending equation `x·t = l·y` (surpluses on opposite sides, see `rows`) that mentions
    /// `var` takes its solution with the fewest axes: `x` empty when `t` is at least as long as
    /// `l`, else `y` empty. Growing a row at its marker, which is what the same constraints give
    /// in another order, reaches that solution when the grown variable closes to no axes.
    fn close_word_equation(&mut self, var: RowVarId) -> Result<bool, ShapeError> {
        let found = self.deferred.iter().find_map(|constraint| {
            let Constraint::RowEq(a, b) = constraint else {
                return None;
            };
            let (a, b) = (self.resolve_row(a), self.resolve_row(b));
            (a.var == Some(var) || b.var == Some(var)).then_some((a, b))
        });
        let Some((a, b)) = found else {
            return Ok(false);
        };
        // Name the side whose surplus trails its variable `x·t`.
        let (x_side, y_side) = if a.trailing.len() >= b.trailing.len() {
            (a, b)
        } else {
            (b, a)
        };
        let (Some(x), Some(y)) = (x_side.var, y_side.var) else {
            return Ok(false);
        };
        let emptied = if x_side.trailing.len() >= y_side.leading.len() {
            x
        } else {
            y
        };
        self.bind_row(emptied, Row::default())?;
        Ok(true)
    }

    /// The size a lone open row needs to satisfy a pending total-elements count, if that is all
    /// that is unknown in it.
    fn missing_total_for(&self, var: RowVarId) -> Option<usize> {
        self.deferred.iter().find_map(|constraint| {
            let Constraint::TotalElems {
                rows,
                total,
                coefficient,
            } = constraint
            else {
                return None;
            };
            let rows: Vec<Row> = rows.iter().map(|r| self.resolve_row(r)).collect();
            let open: Vec<&Row> = rows.iter().filter(|r| r.var.is_some()).collect();
            if open.len() != 1 || open[0].var != Some(var) {
                return None;
            }
            let expected = self
                .resolve_dim(total)
                .ground_size()?
                .checked_mul(*coefficient)?;
            let known = rows
                .iter()
                .flat_map(Row::dims)
                .map(Dim::ground_size)
                .try_fold(1usize, |acc, size| acc.checked_mul(size?))?;
            (known > 0 && expected % known == 0).then(|| expected / known)
        })
    }

    /// A pending exact-axes constraint that mentions `var`, with its number of open rows.
    fn pending_exact_for(&self, var: RowVarId) -> Option<(Vec<Row>, Vec<Dim>, usize)> {
        self.deferred.iter().find_map(|constraint| {
            let Constraint::Exact { rows, dims } = constraint else {
                return None;
            };
            let rows: Vec<Row> = rows.iter().map(|r| self.resolve_row(r)).collect();
            let n_open = rows.iter().filter(|r| r.var.is_some()).count();
            rows.iter()
                .any(|r| r.var == Some(var))
                .then(|| (rows.clone(), dims.clone(), n_open))
        })
    }

    /// The variables in the leaves' dimensions. A derived dimension brings those of the terms a
    /// pending equation equates it with: they are the same axis, and which of the equal terms a
    /// row ended up holding depends on the order the equations came in.
    fn leaf_dim_vars(&self, leaves: &[LeafView<'_>]) -> Vec<DimVar> {
        let mut vars = Vec::new();
        for leaf in leaves {
            for kind in Kind::ALL {
                self.for_each_resolved_axis(leaf.shape.row(kind), &mut |axis| {
                    let dim = self.resolve_dim(axis);
                    dim.for_each_var(&mut |v| vars.push(v));
                    if !matches!(dim, Dim::Affine(_) | Dim::Concat(_)) {
                        return;
                    }
                    for (a, b) in &self.derived_eqs {
                        let (a, b) = (self.resolve_dim_plain(a), self.resolve_dim_plain(b));
                        if a == dim {
                            b.for_each_var(&mut |v| vars.push(v));
                        } else if b == dim {
                            a.for_each_var(&mut |v| vars.push(v));
                        }
                    }
                });
            }
        }
        vars
    }

    fn close_dim_to_cap(&mut self, var: DimVar) -> Result<(), ShapeError> {
        let Some(bounds) = self.dim_bounds(var) else {
            return Ok(());
        };
        // An index-0 axis with a cap waits for the last stage, where it becomes `1*`.
        if bounds.at_least == 1 {
            return Ok(());
        }
        match bounds.cap.clone() {
            Some(cap) => self.bind_dim(var, cap),
            None => Ok(()),
        }
    }

    fn close_dim_to_default(&mut self, var: DimVar) -> Result<(), ShapeError> {
        if let Some((window, error)) = self.undetermined_window(var) {
            self.undetermined_window = Some(window);
            return Err(error);
        }
        let discardable = self.discardable.contains(var);
        let Some(bounds) = self.dim_bounds(var) else {
            return Ok(());
        };
        let value = match (bounds.at_least, &bounds.cap) {
            (0, _) if discardable => Dim::size(0),
            (1, Some(_)) => Dim::Unit,
            (0, Some(cap)) => cap.clone(),
            (0, None) => Dim::Unit,
            (n, _) => Dim::size(n),
        };
        self.bind_dim(var, value)
    }
}

impl Solver {
    /// The error for closing `var` when it is the output or the window of a valid convolution
    /// (`2*o<+k`) whose input size is known and whose other part is unknown too: any pair that
    /// fits the input would do, and guessing one (the unit output, the whole input as the
    /// window) is not ours to do.
    fn undetermined_window(&self, var: DimVar) -> Option<((DimVar, DimVar), ShapeError)> {
        let unknown = |dim: &Dim| match self.resolve_dim(dim) {
            Dim::Var(v) => Some(v),
            _ => None,
        };
        self.derived_eqs.iter().find_map(|(a, b)| {
            let (a, b) = (self.resolve_dim_plain(a), self.resolve_dim_plain(b));
            let ((Dim::Affine(affine), input) | (input, Dim::Affine(affine))) = (&a, &b) else {
                return None;
            };
            let conv = affine
                .conv
                .as_ref()
                .filter(|conv| conv.border != Border::Same)?;
            input.ground_size()?;
            let (over, kernel) = (unknown(&affine.over)?, unknown(&conv.kernel)?);
            (var == over || var == kernel).then(|| {
                let error = ShapeError::of_kind(
                    ShapeErrorKind::Underdetermined,
                    format!(
                        "Not enough shape information: nothing determines the window of a \
                     convolution or pooling over an axis of size {}, nor its output size ({})",
                        crate::words::dim(input),
                        crate::words::dim(&Dim::Affine(affine.clone()))
                    ),
                );
                ((kernel, over), error)
            })
        })
    }

    /// The window and the output of the convolution whose sizes the last closing failed to
    /// determine, if it failed on one.
    pub fn refused_window(&self) -> Option<(DimVar, DimVar)> {
        self.undetermined_window
    }
}

/// How closing stage 0 settles a pending constraint.
enum PendingSize {
    /// The one unknown dimension, and its size.
    Dim(DimVar, usize),
    /// Equations for the unknown parts of a derived term (a part of size 1: see
    /// `derived::solve_eq`).
    Equations(Vec<(Dim, Dim)>),
}

fn hidden_dimension(leaf: &LeafView<'_>, kind: Kind, shape: &Shape) -> ShapeError {
    ShapeError::of_kind(
        ShapeErrorKind::HiddenDimension,
        "You forgot to specify the hidden dimension(s): nothing determines part of a parameter's \
         shape; give its sizes explicitly or use it where they can be inferred",
    )
    .note(format!(
        "parameter '{}' ({kind} axes), shape {}",
        leaf.label,
        crate::words::shape(shape)
    ))
}

/// The one unknown dimension of a count over closed rows, with the size that satisfies it (solving
/// has checked that it divides evenly).
fn missing_dim(rows: &[Row], total: &Dim, coefficient: usize) -> Option<(DimVar, usize)> {
    let mut known = 1usize;
    let mut unknown = Vec::new();
    for dim in rows.iter().flat_map(Row::dims) {
        match dim.ground_size() {
            Some(size) => known = known.saturating_mul(size),
            None => unknown.push(dim),
        }
    }
    match (unknown.as_slice(), total) {
        ([], Dim::Var(var)) => Some((*var, known.checked_div(coefficient)?)),
        ([Dim::Var(var)], _) => {
            let expected = total.ground_size()?.saturating_mul(coefficient);
            Some((*var, expected.checked_div(known)?))
        }
        _ => None,
    }
}
