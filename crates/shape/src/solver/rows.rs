//! Row rules. Both relations align rows at their outer edges: leading flanks from the front,
//! trailing flanks from the back; a row variable absorbs the middle ("broadcasting in the middle").
//!
//! Equality is flat (marker-blind). An open row against a closed one binds the variable to the
//! uncovered middle, keeping the closed side's marker where it falls inside the middle. Two open
//! rows whose surpluses sit on one side bind that side's variable; surpluses on both sides (a word
//! equation) wait, as does a variable equated with a shifted copy of itself.
//!
//! The inequality `res ⊑ opnd` compares aligned flank axes with the dimension order; what the
//! result has between them becomes a cap on the operand's row variable (or broadcasts against a
//! closed operand). A result too short for the operand's flanks grows at its marker if it is open
//! (the deficit rule, guarded by the rank-cycle check) and is an error if it is closed. Growth
//! is also bounded by the axes the constraints were ever given (a least solution has no row
//! longer than those): a row variable grown by more than twice their count, plus 8, is an
//! infinite-row error ("no number of axes fits"), which catches the regress the rank facts cannot
//! see, a clash that each growth re-creates one axis further in.

use super::{Edge, RowState, Solver, push_short};
use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::term::{Dim, Row, RowVarId};
use crate::words;

impl Solver {
    pub(super) fn row_eq(&mut self, a: &Row, b: &Row) -> Result<(), ShapeError> {
        let a = self.resolve_row_cow(a);
        let b = self.resolve_row_cow(b);
        match (a.var, b.var) {
            (None, None) => {
                let (na, nb) = (a.n_explicit(), b.n_explicit());
                if na != nb {
                    return Err(ShapeError::new(format!(
                        "the numbers of axes differ: {} has {} and {} has {}",
                        words::row_alone(&a),
                        axes(na),
                        words::row_alone(&b),
                        axes(nb)
                    )));
                }
                self.equate_all(a.dims().cloned().zip(b.dims().cloned()));
                Ok(())
            }
            (Some(var), None) => self.open_eq_closed(var, &a, &b),
            (None, Some(var)) => self.open_eq_closed(var, &b, &a),
            (Some(va), Some(vb)) => {
                let n_lead = a.leading.len().min(b.leading.len());
                let n_trail = a.trailing.len().min(b.trailing.len());
                self.equate_all(
                    a.leading[..n_lead]
                        .iter()
                        .cloned()
                        .zip(b.leading[..n_lead].iter().cloned()),
                );
                self.equate_all(
                    a.trailing[a.trailing.len() - n_trail..]
                        .iter()
                        .cloned()
                        .zip(b.trailing[b.trailing.len() - n_trail..].iter().cloned()),
                );
                let rest_a = Row {
                    leading: a.leading[n_lead..].to_vec(),
                    var: Some(va),
                    trailing: a.trailing[..a.trailing.len() - n_trail].to_vec(),
                };
                let rest_b = Row {
                    leading: b.leading[n_lead..].to_vec(),
                    var: Some(vb),
                    trailing: b.trailing[..b.trailing.len() - n_trail].to_vec(),
                };
                if va == vb {
                    return self.self_eq(rest_a, rest_b);
                }
                if rest_a.n_explicit() == 0 {
                    self.bind_row(va, rest_b)
                } else if rest_b.n_explicit() == 0 {
                    self.bind_row(vb, rest_a)
                } else {
                    // Surplus on both sides: `s·x = y·t` has more than one family of solutions.
                    self.defer(Constraint::RowEq(rest_a, rest_b));
                    Ok(())
                }
            }
        }
    }

    /// `l·ρ·r ≈ closed`: the flanks match the closed row's edges and ρ takes the middle.
    fn open_eq_closed(
        &mut self,
        var: RowVarId,
        open: &Row,
        closed: &Row,
    ) -> Result<(), ShapeError> {
        let n_all = closed.n_explicit();
        let (n_lead, n_trail) = (open.leading.len(), open.trailing.len());
        if n_lead + n_trail > n_all {
            return Err(ShapeError::new(format!(
                "too few axes: {} needs at least {} but {} has {}",
                words::row_alone(open),
                axes(n_lead + n_trail),
                words::row_alone(closed),
                n_all
            )));
        }
        let end = n_all - n_trail;
        self.equate_all(
            open.leading
                .iter()
                .cloned()
                .zip(axes_between(closed, 0, n_lead).cloned()),
        );
        self.equate_all(
            open.trailing
                .iter()
                .cloned()
                .zip(axes_between(closed, end, n_all).cloned()),
        );
        let marker = closed.leading.len();
        let floating = if marker < n_lead {
            Some(Edge::Left)
        } else if marker > end {
            Some(Edge::Right)
        } else {
            None
        };
        self.bind_row_as(var, closed_slice(closed, n_lead, end), floating)
    }

    /// `ρ` equated with a row around itself.
    fn self_eq(&mut self, a: Row, b: Row) -> Result<(), ShapeError> {
        if a.n_explicit() == 0 && b.n_explicit() == 0 {
            return Ok(());
        }
        if a.n_explicit() != b.n_explicit() {
            return Err(ShapeError::new(format!(
                "no number of axes fits: a row would have to equal itself with a different \
                 number of axes around it ({} and {})",
                words::row_alone(&a),
                words::row_alone(&b)
            )));
        }
        // Same total, shifted split: satisfiable only by periodic rows; closing tries no-axes.
        self.defer(Constraint::RowEq(a, b));
        Ok(())
    }

    pub(super) fn row_le(&mut self, res: &Row, opnd: &Row) -> Result<(), ShapeError> {
        let res = self.resolve_row_cow(res);
        let opnd = self.resolve_row_cow(opnd);
        if res == opnd {
            return Ok(());
        }
        let (n_lead, n_trail) = (opnd.leading.len(), opnd.trailing.len());
        let Some(res_var) = res.var else {
            let n_all = res.n_explicit();
            if n_lead + n_trail > n_all {
                return Err(ShapeError::new(format!(
                    "an operand has more axes than the result it broadcasts to: the result's \
                     {} has {}, the operand's {} needs {}",
                    words::row_alone(&res),
                    axes(n_all),
                    words::row_alone(&opnd),
                    n_lead + n_trail
                ))
                .note(
                    "for a pointwise product use `pmul` (`*` on tensors is composition, the \
                     matrix product)",
                ));
            }
            let end = n_all - n_trail;
            self.refine_all(
                axes_between(&res, 0, n_lead)
                    .cloned()
                    .zip(opnd.leading.iter().cloned()),
            );
            self.refine_all(
                axes_between(&res, end, n_all)
                    .cloned()
                    .zip(opnd.trailing.iter().cloned()),
            );
            if let Some(opnd_var) = opnd.var {
                self.add_row_cap(opnd_var, closed_slice(&res, n_lead, end));
            }
            return Ok(());
        };
        let lead_deficit = n_lead.saturating_sub(res.leading.len());
        let trail_deficit = n_trail.saturating_sub(res.trailing.len());
        let self_referential = opnd.var == Some(res_var);
        if lead_deficit + trail_deficit > 0
            && let Some((r, o)) = flank_clash(&res, &opnd)
        {
            // Axes at the same distance from an edge in both flanks align whatever the variable
            // holds: growing cannot help.
            return self.dim_le(&r, &o);
        }
        if lead_deficit + trail_deficit > 0
            && (could_cover_when_empty(&res, &opnd)
                || (self_referential && res.n_explicit() >= opnd.n_explicit()))
        {
            // The result's other flank may cover the deficit (when its variable is empty) or the
            // variable may grow: this constraint alone does not say which. With the same
            // variable on both sides growing would never catch up (the operand grows too);
            // closing tries no axes, where the check becomes exact.
            self.defer(Constraint::RowLe {
                res: res.into_owned(),
                opnd: opnd.into_owned(),
            });
            return Ok(());
        }
        if lead_deficit + trail_deficit > 0 {
            // The result's variable must hold what its explicit axes cannot: as many axes as the
            // operand's flanks outnumber them, and at least one when they would clash. Only that
            // many are named; where the rest come from (the variable or the other flank) is
            // decided when the constraint comes back.
            let missing = (n_lead + n_trail) as i64 - res.n_explicit() as i64;
            if let Some(opnd_var) = opnd.var {
                self.rank.add_fact(res_var, opnd_var, missing)?;
            }
            let forced = missing.max(1) as usize;
            let n_trailing = trail_deficit.min(forced);
            let n_leading = lead_deficit.min(forced - n_trailing);
            // A least solution has no row longer than all the axes the constraints were given
            // (growing only ever copies their flanks' count); growth past that bound is a
            // regress the rank facts cannot see, such as a clash that each growth re-creates
            // one axis further in.
            let grown =
                self.grown.get(res_var.0 as usize).copied().unwrap_or(0) + n_leading + n_trailing;
            if grown > 2 * self.n_given_axes + 8 {
                return Err(ShapeError::new(format!(
                    "no number of axes fits: for {} to broadcast to {}, the result would keep \
                     growing ({grown} axes added, more than the shapes ever give)",
                    words::row_alone(&opnd),
                    words::row_alone(&res)
                )));
            }
            let fresh = self.fresh_row();
            let index = fresh.0 as usize;
            if self.grown.len() <= index {
                self.grown.resize(index + 1, 0);
            }
            self.grown[index] = grown;
            let grown = Row {
                leading: (0..n_leading).map(|_| self.fresh_dim()).collect(),
                var: Some(fresh),
                trailing: (0..n_trailing).map(|_| self.fresh_dim()).collect(),
            };
            self.bind_row(res_var, grown)?;
            self.queue.push_back(Constraint::RowLe {
                res: res.into_owned(),
                opnd: opnd.into_owned(),
            });
            return Ok(());
        }
        let end = res.trailing.len() - n_trail;
        self.refine_all(
            res.leading[..n_lead]
                .iter()
                .cloned()
                .zip(opnd.leading.iter().cloned()),
        );
        self.refine_all(
            res.trailing[end..]
                .iter()
                .cloned()
                .zip(opnd.trailing.iter().cloned()),
        );
        let Some(opnd_var) = opnd.var else {
            // The operand is closed: its middle is inserted `1*` units, which anything refines.
            if let Some(bounds) = self.row_bounds(res_var) {
                bounds.under_closed = true;
            }
            return Ok(());
        };
        let residue = Row {
            leading: res.leading[n_lead..].to_vec(),
            var: Some(res_var),
            trailing: res.trailing[..end].to_vec(),
        };
        let already_adjacent = self
            .row_bounds(res_var)
            .is_some_and(|b| b.above.contains(&opnd_var));
        if residue.n_explicit() == 0 && !already_adjacent {
            self.rank.add_fact(res_var, opnd_var, 0)?;
            if let Some(bounds) = self.row_bounds(res_var) {
                push_short(&mut bounds.above, opnd_var);
            }
        }
        self.add_row_cap(opnd_var, residue);
        Ok(())
    }

    /// Records `cap ⊑ ρ`.
    ///
    /// Caps are not forwarded to the variables above ρ: a bare variable `σ ⊑ ρ` stays a cap of
    /// ρ, and closing reads σ's own caps through it (`Solver::rows_informed_from_below`) as they are
    /// then. Forwarding them when they arrive would make ρ's caps depend on whether σ was still
    /// bare at that moment, that is on the order of the constraints: a cap forwarded before σ
    /// got its axes stays behind as a second, weaker copy of what σ's value now says.
    fn add_row_cap(&mut self, var: RowVarId, cap: Row) {
        let Some(bounds) = self.row_bounds(var) else {
            unreachable!("caps are added to resolved, hence free, row variables")
        };
        if !bounds.caps.contains(&cap) {
            push_short(&mut bounds.caps, cap);
        }
    }

    /// Binds a free row variable and re-emits its stored bounds against the value.
    pub(super) fn bind_row(&mut self, var: RowVarId, value: Row) -> Result<(), ShapeError> {
        self.bind_row_as(var, value, None)
    }

    /// Binds, with a closed value's marker floating to the given edge of every row containing
    /// it (see [`Edge`]).
    fn bind_row_as(
        &mut self,
        var: RowVarId,
        value: Row,
        floating: Option<Edge>,
    ) -> Result<(), ShapeError> {
        if value.var == Some(var) {
            if value.n_explicit() == 0 {
                return Ok(());
            }
            return Err(ShapeError::new(format!(
                "no number of axes fits: the axes of a row would have to include themselves and \
                 {} more",
                value.n_explicit()
            )));
        }
        let inner_var = value.var;
        if let Some(inner) = inner_var {
            self.rank
                .add_equality(var, inner, value.n_explicit() as i64)?;
        }
        let old = std::mem::replace(self.row_state(var), RowState::Solved(value, floating));
        self.n_bindings += 1;
        let RowState::Free(bounds) = old else {
            unreachable!("bind_row is called on resolved, hence free, row variables")
        };
        if bounds.under_closed
            && let Some(inner) = inner_var
            && let Some(inner_bounds) = self.row_bounds(inner)
        {
            inner_bounds.under_closed = true;
        }
        // The bounds meet the variable, resolved when they are processed: a floating marker
        // lands where resolution puts it.
        for cap in bounds.caps {
            self.queue.push_back(Constraint::RowLe {
                res: cap,
                opnd: Row::var(var),
            });
        }
        for high in bounds.above {
            self.queue.push_back(Constraint::RowLe {
                res: Row::var(var),
                opnd: Row::var(high),
            });
        }
        Ok(())
    }

    /// The product of the rows' axes is `coefficient · total`. Decided once at most one part is
    /// unknown; a lone open row with everything else known waits for closing, which gives it one
    /// axis of the missing size.
    pub(super) fn total_elems(
        &mut self,
        rows: &[Row],
        total: &Dim,
        coefficient: usize,
    ) -> Result<(), ShapeError> {
        let rows: Vec<Row> = rows.iter().map(|r| self.resolve_row(r)).collect();
        let total = self.resolve_dim(total);
        let mut known = 1usize;
        let mut unknown = Vec::new();
        for dim in rows.iter().flat_map(Row::dims) {
            match dim.ground_size() {
                Some(size) => known = known.saturating_mul(size),
                None => unknown.push(dim.clone()),
            }
        }
        let open = rows.iter().any(|r| r.var.is_some());
        let shown = || words::rows(&rows);
        // An axis of size 0 makes the count 0 whatever the other axes are: it holds or fails now,
        // and says nothing of the sizes still unknown.
        if known == 0
            && let Some(total) = total.ground_size()
        {
            let expected = total.saturating_mul(coefficient);
            if expected != 0 {
                return Err(ShapeError::new(format!(
                    "wrong number of elements: the axes {} have 0 elements but {expected} are \
                     needed",
                    shown()
                )));
            }
            return Ok(());
        }
        match (total.ground_size(), unknown.as_slice(), open) {
            (Some(total), [], false) => {
                let expected = total.saturating_mul(coefficient);
                if known != expected {
                    return Err(ShapeError::new(format!(
                        "wrong number of elements: the axes {} have {known} elements but \
                         {expected} are needed",
                        shown()
                    )));
                }
                Ok(())
            }
            (Some(total_size), [Dim::Var(_)], false) => {
                let expected = total_size.saturating_mul(coefficient);
                if known == 0 || expected % known != 0 {
                    return Err(ShapeError::new(format!(
                        "wrong number of elements: {expected} are needed, which the axes {} \
                         cannot hold: their known sizes multiply to {known}, which does not \
                         divide {expected}",
                        shown()
                    )));
                }
                // The size is known, the basis is not: closing binds it (`close_pending_sizes`)
                // unless another constraint does first.
                self.defer(Constraint::TotalElems {
                    rows,
                    total,
                    coefficient,
                });
                Ok(())
            }
            (None, [], false) if coefficient > 0 && known.is_multiple_of(coefficient) => {
                self.defer(Constraint::TotalElems {
                    rows,
                    total,
                    coefficient,
                });
                Ok(())
            }
            (None, [], false) => Err(ShapeError::new(format!(
                "wrong number of elements: the axes {} have {known} elements but the operation \
                 needs a multiple of {coefficient}",
                shown()
            ))),
            _ => {
                self.defer(Constraint::TotalElems {
                    rows,
                    total,
                    coefficient,
                });
                Ok(())
            }
        }
    }

    /// The rows, flattened in order, are exactly `dims`.
    pub(super) fn exact(&mut self, rows: &[Row], dims: &[Dim]) -> Result<(), ShapeError> {
        let rows: Vec<Row> = rows.iter().map(|r| self.resolve_row(r)).collect();
        let open: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].var.is_some()).collect();
        let n_explicit: usize = rows.iter().map(Row::n_explicit).sum();
        if n_explicit > dims.len() || (open.is_empty() && n_explicit != dims.len()) {
            return Err(ShapeError::new(format!(
                "wrong number of axes: the shape has {} where exactly the {} {} are required",
                axes(n_explicit),
                axes(dims.len()),
                words::row_alone(&Row::closed(dims.to_vec()))
            )));
        }
        match open.as_slice() {
            [] => {
                let flat_rows: Vec<Dim> = rows.iter().flat_map(flat).collect();
                self.equate_all(flat_rows.into_iter().zip(dims.iter().cloned()));
                Ok(())
            }
            [only] => {
                // Everything before the open row's variable aligns from the front, everything
                // after it from the back; the variable takes the rest.
                let before: Vec<Dim> = rows[..*only]
                    .iter()
                    .flat_map(flat)
                    .chain(rows[*only].leading.iter().cloned())
                    .collect();
                let after: Vec<Dim> = rows[*only]
                    .trailing
                    .iter()
                    .cloned()
                    .chain(rows[only + 1..].iter().flat_map(flat))
                    .collect();
                let end = dims.len() - after.len();
                self.equate_all(
                    before
                        .iter()
                        .cloned()
                        .zip(dims[..before.len()].iter().cloned()),
                );
                self.equate_all(after.into_iter().zip(dims[end..].iter().cloned()));
                let var = rows[*only].var.expect("the open row has a variable");
                self.bind_row(var, Row::closed(dims[before.len()..end].to_vec()))
            }
            open_rows if n_explicit == dims.len() => {
                // The explicit axes already account for every exact one: the open rows are empty.
                for &index in open_rows {
                    let var = rows[index].var.expect("an open row has a variable");
                    if self.row_bounds(var).is_some() {
                        self.bind_row(var, Row::default())?;
                    }
                }
                self.queue.push_back(Constraint::Exact {
                    rows,
                    dims: dims.to_vec(),
                });
                Ok(())
            }
            _ => {
                self.defer(Constraint::Exact {
                    rows,
                    dims: dims.to_vec(),
                });
                Ok(())
            }
        }
    }

    fn equate_all(&mut self, pairs: impl IntoIterator<Item = (Dim, Dim)>) {
        self.queue
            .extend(pairs.into_iter().map(|(a, b)| Constraint::DimEq(a, b)));
    }

    fn refine_all(&mut self, pairs: impl IntoIterator<Item = (Dim, Dim)>) {
        self.queue.extend(
            pairs
                .into_iter()
                .map(|(res, opnd)| Constraint::DimLe { res, opnd }),
        );
    }
}

/// `1 axis`, `3 axes`.
fn axes(n: usize) -> String {
    if n == 1 {
        "1 axis".to_owned()
    } else {
        format!("{n} axes")
    }
}

/// The axes of a closed row in order.
fn flat(row: &Row) -> Vec<Dim> {
    row.dims().cloned().collect()
}

/// Axes `start..end` of a closed row's flattening, keeping its marker if it falls inside (else the
/// marker goes to the left edge).
fn closed_slice(row: &Row, start: usize, end: usize) -> Row {
    let marker = row.leading.len();
    if (start..=end).contains(&marker) && row.var.is_none() {
        Row {
            leading: axes_between(row, start, marker).cloned().collect(),
            var: None,
            trailing: axes_between(row, marker, end).cloned().collect(),
        }
    } else {
        Row::closed(axes_between(row, start, end).cloned().collect())
    }
}

/// Axes `start..end` of a row's flattening (its leading flank, then its trailing one), read in
/// place.
fn axes_between(row: &Row, start: usize, end: usize) -> impl Iterator<Item = &Dim> {
    row.dims().skip(start).take(end - start)
}

/// A pair of known dimensions that `res ⊑ opnd` aligns whatever the row variables hold (both in
/// leading flanks, or both in trailing flanks, at the same distance from the edge) and that the
/// order forbids.
fn flank_clash(res: &Row, opnd: &Row) -> Option<(Dim, Dim)> {
    let leading = res.leading.iter().zip(&opnd.leading);
    let trailing = res.trailing.iter().rev().zip(opnd.trailing.iter().rev());
    leading
        .chain(trailing)
        .find(|(r, o)| clashes(r, o))
        .map(|(r, o)| (r.clone(), o.clone()))
}

/// Two known dimensions where `r ⊑ o` fails.
fn clashes(r: &Dim, o: &Dim) -> bool {
    r.is_ground() && o.is_ground() && r != o && *o != Dim::Unit
}

/// Whether `res ⊑ opnd` could hold with `res`'s row variable empty, as far as known dimensions
/// tell: enough explicit axes, and no aligned pair of known dimensions that clash.
fn could_cover_when_empty(res: &Row, opnd: &Row) -> bool {
    let n_all = res.n_explicit();
    let (n_lead, n_trail) = (opnd.leading.len(), opnd.trailing.len());
    if n_all < n_lead + n_trail {
        return false;
    }
    let pairs = axes_between(res, 0, n_lead)
        .zip(&opnd.leading)
        .chain(axes_between(res, n_all - n_trail, n_all).zip(&opnd.trailing));
    pairs.into_iter().all(|(r, o)| !clashes(r, o))
}
