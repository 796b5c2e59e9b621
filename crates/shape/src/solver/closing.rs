//! The closing policy: committing what solving left free, with a re-solve after every stage so
//! that each commitment propagates before the next one is made.
//!
//! 1. Leaf rows (shapes of tensors no operation computes) close *downward*, to the join of their
//!    caps: the most specific row their uses demand. A lone open row with a pending total-elements
//!    count gets one axis of the missing size. A parameter's output row that nothing determines
//!    (no caps, or only bare open rows, and no row above it) is an error. A parameter row that
//!    refines another row (`w` in `w * x`, whose input row refines `x`'s output row) has the axes
//!    that row demands and closes to no further ones; an undetermined parameter *input* row closes
//!    to no axes (a bias added to data has none).
//! 2. Leaf dimensions with a cap close to it.
//! 3. Other leaf dimensions: a parameter's is an error ("you forgot to specify the hidden
//!    dimension"); others close to their default (below).
//! 4. Every other row closes to the join of its caps, or to no-further-axes.
//! 5. Every other dimension with a cap closes to it.
//! 6. What remains closes to its default: a discardable concat component to 0; a dimension
//!    carrying a fixed index `n` to `n+1` (an index-0 axis with a cap to the claim-free `1*`, so
//!    that a kept reduction axis broadcasts); anything else to `1*`.
//!
//! The policy never backtracks: `{3 ⊑ α, 5 ⊑ β, γ ⊑ α, γ ⊑ β}` with leaves α, β commits α = 3,
//! β = 5 and then fails on γ, although α = β = `1*` would do.

use super::Solver;
use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::term::{Dim, DimVar, Kind, Row, RowVarId, Shape};

/// The shape of a tensor that no operation computes: data, constants, parameters.
#[derive(Debug, Clone)]
pub struct Leaf {
    pub label: String,
    pub shape: Shape,
    /// Parameters never get a guessed dimension or row.
    pub is_param: bool,
}

impl Solver {
    /// Solves, then closes every variable following the policy above.
    pub fn close(&mut self, leaves: &[Leaf]) -> Result<(), ShapeError> {
        self.solve()?;
        for leaf in leaves {
            for kind in Kind::ALL {
                if let Some(var) = self.resolve_row(leaf.shape.row(kind)).var {
                    self.close_row(var, Some((leaf, kind)))?;
                }
            }
        }
        self.solve()?;
        for var in self.leaf_dim_vars(leaves) {
            self.close_dim_to_cap(var)?;
        }
        self.solve()?;
        for leaf in leaves {
            let shape = self.resolve_shape(&leaf.shape);
            for kind in Kind::ALL {
                for dim in shape.row(kind).dims() {
                    let Dim::Var(var) = self.resolve_dim(dim) else {
                        continue;
                    };
                    if leaf.is_param && self.dim_bounds(var).is_some_and(|b| b.at_least == 0) {
                        return Err(hidden_dimension(leaf, kind, &shape));
                    }
                    self.close_dim_to_default(var)?;
                }
            }
        }
        self.solve()?;
        for index in 0..self.vars.n_rows() {
            let var = RowVarId(index as u32);
            if self.row_bounds(var).is_some() {
                self.close_row(var, None)?;
            }
        }
        self.solve()?;
        for index in 0..self.vars.n_dims() {
            self.close_dim_to_cap(DimVar(index as u32))?;
        }
        self.solve()?;
        for index in 0..self.vars.n_dims() {
            self.close_dim_to_default(DimVar(index as u32))?;
        }
        self.solve()?;
        if let Some(constraint) = self.deferred.first() {
            return Err(ShapeError::new(format!(
                "Not enough shape information: {} constraint(s) could not be decided, e.g. {}",
                self.deferred.len(),
                self.resolve_constraint(constraint)
            )));
        }
        Ok(())
    }

    fn close_row(&mut self, var: RowVarId, leaf: Option<(&Leaf, Kind)>) -> Result<(), ShapeError> {
        if let Some(size) = self.missing_total_for(var) {
            return self.bind_row(var, Row::closed(vec![Dim::size(size)]));
        }
        if let Some((rows, dims, n_open)) = self.pending_exact_for(var) {
            // Several open rows share the exact axes: the last one takes them.
            return if n_open == 1 {
                self.exact(rows, dims)
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
        let (caps, bounded_above) = match self.row_bounds(var) {
            Some(bounds) => (
                bounds.caps.clone(),
                bounds.under_closed || !bounds.above.is_empty(),
            ),
            None => return Ok(()),
        };
        let caps: Vec<Row> = caps.iter().map(|cap| self.resolve_row(cap)).collect();
        // A bare open row below says nothing yet: it is as unknown as this one.
        let informative = caps
            .iter()
            .any(|cap| cap.var.is_none() || cap.n_explicit() > 0);
        if !informative
            && !bounded_above
            && let Some((leaf, kind)) = leaf
            && leaf.is_param
            && kind != Kind::Input
        {
            return Err(hidden_dimension(
                leaf,
                kind,
                &self.resolve_shape(&leaf.shape),
            ));
        }
        let joined = self.join_rows(&caps);
        self.bind_row(var, joined)
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
        self.vars.dim_term()
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

    fn leaf_dim_vars(&self, leaves: &[Leaf]) -> Vec<DimVar> {
        let mut vars = Vec::new();
        for leaf in leaves {
            let shape = self.resolve_shape(&leaf.shape);
            for kind in Kind::ALL {
                for dim in shape.row(kind).dims() {
                    dim.for_each_var(&mut |v| vars.push(v));
                }
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
        let discardable = self.discardable.contains(&var);
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

fn hidden_dimension(leaf: &Leaf, kind: Kind, shape: &Shape) -> ShapeError {
    ShapeError::new(
        "You forgot to specify the hidden dimension(s): nothing determines part of a parameter's \
         shape; give its sizes explicitly or use it where they can be inferred",
    )
    .note(format!(
        "parameter '{}' ({kind} axes), shape {shape}",
        leaf.label
    ))
}
