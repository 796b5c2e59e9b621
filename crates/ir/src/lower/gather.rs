//! Gathers and their gradients: the projections of the one-hot product they stand for, with
//! the loop over the vocabulary taken out and the id read in its place.

use std::collections::HashSet;

use super::{Context, Lowering, error};
use crate::index::{AxisIndex, Symbol};
use crate::loops::{Lookup, Scalar, Stmt};
use crate::node::NodeId;
use crate::ops::Binop;
use crate::projections::{Projections, Slot};

/// The table's axis an id selects along, its size, and the projections without its loop: the
/// product space lacks its symbol and the table's map reads position 0 there (where the
/// lookup adds the id).
fn without_vocabulary(projections: &Projections) -> Result<(usize, usize, Projections), String> {
    let label = &projections.label;
    let (Some(table_map), Some(ids_map)) =
        (projections.rhs_index.first(), projections.rhs_index.get(1))
    else {
        return Err(format!(
            "gather ({label}): its projections need a table's map and an ids' map"
        ));
    };
    let elsewhere: HashSet<Symbol> = projections
        .lhs_index
        .iter()
        .chain(ids_map)
        .flat_map(AxisIndex::symbols)
        .collect();
    let ranges = projections.ranges();
    let candidates: Vec<(usize, Symbol)> = table_map
        .iter()
        .enumerate()
        .filter_map(|(axis, index)| match index {
            AxisIndex::Iterator(symbol)
                if ranges.contains_key(symbol) && !elsewhere.contains(symbol) =>
            {
                Some((axis, *symbol))
            }
            _ => None,
        })
        .collect();
    let table_dims = &projections.rhs_dims[0];
    if candidates.is_empty()
        && table_map.last() == Some(&AxisIndex::Fixed(0))
        && table_dims.last() == Some(&1)
    {
        // A vocabulary of one row: inference fixes its axis (the table's input axis, last in
        // memory order) at 0, and there is no loop over it to drop.
        return Ok((table_map.len() - 1, 1, projections.clone()));
    }
    let [(axis, vocabulary)] = candidates[..] else {
        return Err(format!(
            "gather ({label}): the table has {} axes that neither the result nor the ids index; \
             a gather needs exactly one, the axis the ids select along",
            candidates.len()
        ));
    };
    let mentions = |index: &AxisIndex| index.symbols().any(|s| s == vocabulary);
    if table_map.iter().filter(|index| mentions(index)).count() != 1 {
        return Err(format!(
            "gather ({label}): the table's axis the ids select along is also read elsewhere"
        ));
    }
    let mut reduced = projections.clone();
    let mut coupled = false;
    reduced.product_space.retain(|factor| {
        let has = factor.components.iter().any(|(s, _)| *s == vocabulary);
        coupled |= has && factor.components.len() > 1;
        !has
    });
    if coupled {
        return Err(format!(
            "gather ({label}): the axis the ids select along is part of a concatenation"
        ));
    }
    reduced.rhs_index[0][axis] = AxisIndex::Fixed(0);
    let size = projections.rhs_dims[0][axis];
    Ok((axis, size, reduced))
}

impl Context<'_> {
    /// `lhs[…] = table[…, id, …]` at every point of the gather's product space but the
    /// vocabulary, 0 where the id selects no row.
    pub(super) fn gather(
        &self,
        initialize_neutral: bool,
        lhs: NodeId,
        table: NodeId,
        ids: NodeId,
        projections: &Projections,
    ) -> Result<Vec<Stmt>, super::LowerError> {
        let (axis, size, reduced) = without_vocabulary(projections).map_err(error)?;
        let lowering = Lowering {
            context: self,
            projections: &reduced,
            initialize_neutral,
            accum: Binop::Add,
            lhs,
            skip_idle_loops: false,
            store: super::Store::Cell,
        };
        let mut stmts = self.margin_resets(Binop::Add, &[table, ids])?;
        stmts.extend(lowering.run(|point| {
            let (Some(index), Some(id)) = (
                point.index(Slot::Rhs(0), table)?,
                point.read(Slot::Rhs(1), ids)?,
            ) else {
                return Ok(None);
            };
            Ok(Some(Scalar::Lookup(Box::new(Lookup {
                node: table,
                index,
                axis,
                size,
                id,
            }))))
        })?);
        Ok(stmts)
    }

    /// `target[…, id, …] += source[…]` at every point of the gather's product space but the
    /// vocabulary, nothing where the id selects no row.
    pub(super) fn scatter_add(
        &self,
        target: NodeId,
        source: NodeId,
        ids: NodeId,
        projections: &Projections,
    ) -> Result<Vec<Stmt>, super::LowerError> {
        let (axis, size, reduced) = without_vocabulary(projections).map_err(error)?;
        // The target's record: its map written, the source's and the ids' read.
        let mut view = reduced.view(Slot::Rhs(0), &[Slot::Lhs, Slot::Rhs(1)]);
        // Loops that choose the written cell run outermost: their iterations write disjoint
        // cells, so they are the ones a backend may split; the positions, which may repeat an
        // id, run inside, one after another.
        let written: HashSet<Symbol> = view.lhs_index.iter().flat_map(AxisIndex::symbols).collect();
        view.product_space
            .sort_by_key(|factor| !factor.components.iter().any(|(s, _)| written.contains(s)));
        let lowering = Lowering {
            context: self,
            projections: &view,
            initialize_neutral: false,
            accum: Binop::Add,
            lhs: target,
            skip_idle_loops: false,
            store: super::Store::Scatter(ids, axis, size),
        };
        let mut stmts = self.margin_resets(Binop::Add, &[source, ids])?;
        stmts.extend(lowering.run(|point| point.read(Slot::Rhs(0), source))?);
        Ok(stmts)
    }
}
