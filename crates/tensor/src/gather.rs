//! Gathers: a table's rows looked up by ids held in a tensor, at a cost that does not depend on
//! the table's number of rows, and one-hot rows that a composition with a table turns into one.
//!
//! A gather is the one-hot product `table * one_hot(ids)` computed without its loop over the
//! vocabulary: it has that product's shape logic and projections (an einsum
//! `v->w; …|->… => …|->…, w`) and lowers to a read of the table at the id (`rcannl_ir`'s
//! `Assignment::Gather`). Its gradient scatters: each position's gradient row is added into the
//! table gradient's row its id selects (`Assignment::ScatterAdd`), so repeated ids accumulate.
//! An id that is not an integer in `0..vocabulary` (−1 for padding) selects no row: its row of
//! the result is 0 and it adds nothing to the table's gradient, as the one-hot product has it.
//! The ids take no gradient.

use std::collections::HashMap;

use rcannl_ir::Binop;

use crate::graph::{Forward, Graph, OpSpec, TensorError, error, spec_logic};
use crate::tensor::Tensor;

/// The shape logic of a gather: the table's one input axis `v` is what the ids select along.
const GATHER_SPEC: &str = "v->w; ...|->... => ...|->..., w";

/// What [`Tensor::one_hot`] remembers of the one-hot rows it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OneHot {
    ids: usize,
    vocabulary: usize,
}

/// The one-hot rows of a graph (by tensor index), kept with its state, so that a composition
/// with them becomes a gather.
#[derive(Debug, Default)]
struct OneHots(HashMap<usize, OneHot>);

impl Tensor {
    /// The rows of `table` (`| vocabulary -> width`: one input axis, the row an id selects, and
    /// one output axis) that `ids` (`batch | -> positions…`, any numeric precision) select:
    /// `batch | -> positions…, width`, in the table's precision. An id that is not an integer in
    /// `0..vocabulary` (−1 for padding, NaN) gives a row of zeros. The cost is that of the
    /// result's cells, whatever the vocabulary. The table's gradient adds each position's
    /// gradient row into the row its id selects (repeated ids accumulate, ids that select none
    /// add nothing); the ids take no gradient.
    ///
    /// Shapes that do not fit (a table with other than one input axis, ids with input axes) are
    /// an error naming the gather and both tensors.
    pub fn gather(table: &Tensor, ids: &Tensor) -> Tensor {
        gather_op(table, ids, &[table], None)
    }

    /// One-hot rows: for ids of any shape (`batch | -> positions…`), the result has one more
    /// output axis of `vocabulary` positions, 1 at each id (and all 0 for an id outside it, such
    /// as −1 for a position to ignore).
    ///
    /// The result remembers its ids: composing a table with it (`&table * &one_hot`, or
    /// [`Tensor::compose`]) is computed as [`Tensor::gather`] of the table by those ids, with
    /// the vocabulary as the table's input size and the composition's precision, so the one-hot
    /// rows themselves are never computed there. This holds where the table is known, when
    /// composed, to have no batch axes, one input axis and one output axis (as
    /// `param(…).input([v]).output([w])` declares it); ids with positions (`batch | -> t`) then
    /// give `batch | -> t, width`, where the plain composition would refuse the one-hot rows'
    /// extra output axes. Any other table is composed as usual.
    pub fn one_hot(ids: &Tensor, vocabulary: usize) -> Tensor {
        let graph = ids.graph();
        // id − v for every v: zero exactly at the id.
        let difference = ids.outer_sum(
            "...|...->...; v => ...|...->..., v",
            &(-&graph.range(vocabulary)),
        );
        let rows = difference.eq(&graph.number(0.0));
        if rows.error().is_none() {
            graph.state.lock().extensions.get_mut::<OneHots>().0.insert(
                rows.index,
                OneHot {
                    ids: ids.index,
                    vocabulary,
                },
            );
        }
        rows
    }
}

/// `table * rows` as a gather, when `rows` are one-hot rows [`Tensor::one_hot`] made and the
/// table is known to have no batch axes, one input axis and one output axis; `None` otherwise
/// (the composition is then computed as such).
pub(crate) fn composed_with_one_hot(table: &Tensor, rows: &Tensor) -> Option<Tensor> {
    let graph = table.graph();
    if !graph.owns(rows) || !graph.owns(table) {
        return None;
    }
    let one_hot = graph
        .state
        .lock()
        .extensions
        .get::<OneHots>()?
        .0
        .get(&rows.index)
        .copied()?;
    if !is_closed_table(table) {
        return None;
    }
    let ids = Tensor {
        graph: graph.clone(),
        index: one_hot.ids,
    };
    Some(gather_op(
        table,
        &ids,
        &[table, rows],
        Some(one_hot.vocabulary),
    ))
}

/// Whether inference already knows `table`'s rows as `| v -> w`: closed, of 0, 1 and 1 axes.
fn is_closed_table(table: &Tensor) -> bool {
    let state = table.graph.state.lock();
    let shape = state.inference.shape(state.tensors[table.index].shape);
    let closed = |row: &rcannl_shape::term::Row, axes: usize| {
        row.var.is_none() && row.dims().count() == axes
    };
    closed(&shape.batch, 0) && closed(&shape.input, 1) && closed(&shape.output, 1)
}

fn gather_op(
    table: &Tensor,
    ids: &Tensor,
    precision_from: &[&Tensor],
    vocabulary: Option<usize>,
) -> Tensor {
    let graph = table.graph();
    let logic = match spec_logic("gather", GATHER_SPEC) {
        Ok(logic) => logic,
        Err(e) => return graph.failed(e),
    };
    let spec = OpSpec::new(Binop::Add, Forward::Gather)
        .precision_from(precision_from)
        .gradient(|grad| {
            grad.scatter_rows();
            Ok(())
        });
    let result = graph.apply("gather", logic, &[table, ids], spec);
    if let (Some(size), None) = (vocabulary, result.error())
        && let Err(e) = set_vocabulary(graph, &result, size)
    {
        graph.record(error(format!(
            "gather of '{}' by '{}': the vocabulary of {size}: {}",
            table.label(),
            ids.label(),
            e.message
        )));
    }
    result
}

/// Constrains the gather's vocabulary axis (the table's input axis) to `size` positions.
fn set_vocabulary(graph: &Graph, result: &Tensor, size: usize) -> Result<(), TensorError> {
    let vocabulary = result.capture("v")?;
    graph.set_dim(&vocabulary, size)
}
