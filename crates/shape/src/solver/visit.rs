//! The order in which closing visits variables: read off the variables the constraints were
//! given in, never off the solver's history.
//!
//! Closing is greedy, so its order is part of its result. Two orders of the same constraints leave
//! the same solved state up to which variable of a class stands for it and how the variables the
//! solver made itself (for grown rows, for joins) are numbered. Visiting the *given* variables by
//! index, each through what it resolves to, and the solver's own variables only where a given one
//! leads to them, sees both states the same way.

use super::var_set::VarSet;
use super::{DimState, RowState, Solver};
use crate::term::{Dim, DimVar, Row, RowVarId};

impl Solver {
    /// A row variable for the solver's own use.
    pub(super) fn fresh_row(&mut self) -> RowVarId {
        let var = self.vars.row();
        self.own_rows.insert(var);
        var
    }

    /// A dimension variable for the solver's own use.
    pub(super) fn fresh_dim(&mut self) -> Dim {
        let var = self.vars.dim();
        self.own_dims.insert(var);
        Dim::Var(var)
    }

    /// The given row variables, by index.
    fn given_rows(&self) -> impl Iterator<Item = RowVarId> + '_ {
        (0..self.vars.n_rows() as u32)
            .map(RowVarId)
            .filter(|&var| !self.own_rows.contains(var))
    }

    /// The unsolved row variables not in `visited`, in visiting order: what each given variable
    /// resolves to, then (for variables no given one leads to) the rest by index.
    pub(super) fn rows_to_visit(&self, visited: &VarSet<RowVarId>) -> Vec<RowVarId> {
        // Every unsolved variable comes in the order at least as itself: with none left
        // unvisited, there is no order to read.
        let unvisited = (0..self.vars.n_rows() as u32).map(RowVarId).any(|var| {
            !visited.contains(var)
                && !matches!(self.rows.get(var.0 as usize), Some(RowState::Solved(..)))
        });
        if !unvisited {
            return Vec::new();
        }
        let mut order = Vec::new();
        let mut seen = visited.clone();
        let all = (0..self.vars.n_rows() as u32).map(RowVarId);
        for var in self.given_rows().chain(all) {
            if let Some(open) = self.open_var(&Row::var(var))
                && seen.insert(open)
            {
                order.push(open);
            }
        }
        order
    }

    /// The unsolved dimension variables not in `visited`, in visiting order: those in what each
    /// given dimension variable resolves to, then those in each given row's resolution, then the
    /// rest by index.
    pub(super) fn dims_to_visit(&self, visited: &VarSet<DimVar>) -> Vec<DimVar> {
        // As for rows: every unsolved variable comes in the order at least as itself.
        let unvisited = (0..self.vars.n_dims() as u32).map(DimVar).any(|var| {
            !visited.contains(var)
                && !matches!(self.dims.get(var.0 as usize), Some(DimState::Solved(_)))
        });
        if !unvisited {
            return Vec::new();
        }
        let mut order = Vec::new();
        let mut seen = visited.clone();
        // A derived term leads only to the solver's own variables: the given ones in it come at
        // their own index, since which of two equal derived terms a variable holds depends on
        // the order of the equations.
        let mut visit = |dim: &Dim| {
            let resolved = self.resolve_dim(dim);
            let derived = !matches!(resolved, Dim::Var(_));
            resolved.for_each_var(&mut |var| {
                if (!derived || self.own_dims.contains(var)) && seen.insert(var) {
                    order.push(var);
                }
            });
        };
        let n_dims = self.vars.n_dims() as u32;
        for var in (0..n_dims).map(DimVar) {
            if !self.own_dims.contains(var) {
                visit(&Dim::Var(var));
            }
        }
        for var in self.given_rows() {
            self.for_each_resolved_axis(&Row::var(var), &mut visit);
        }
        for var in (0..n_dims).map(DimVar) {
            visit(&Dim::Var(var));
        }
        order
    }
}
