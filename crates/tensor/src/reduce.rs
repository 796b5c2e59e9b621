//! Reductions over chosen axes: [`Tensor::sum_over`], [`Tensor::mean_over`] and
//! [`Tensor::max_over`], over the [`Axes`] a reduction spec or axis names choose.
//!
//! Every reduction is a unary einsum (a sum, [`Tensor::einsum1`]) or a unary max-einsum
//! ([`Tensor::einmax1`]) whose spec says which axes go: axes chosen by kind and position are
//! written into such a spec here. A mean divides the sum by the number of cells each result
//! cell sums, read from shape inference as captured sizes ([`Tensor::capture`],
//! [`Graph::dim`]), so the count is never the caller's to give (and never wrong).

use rcannl_ir::Precision;
use rcannl_shape::LeafDecl;
use rcannl_shape::spec::{EinsumSpec, Kind, parse_einsum};

use crate::graph::{Graph, LeafKind, TensorError, error};
use crate::tensor::Tensor;

/// The axes a reduction reduces: whole kinds, single axes of a kind counted as Python counts
/// (`0` the first, `-1` the last), everything, or an einsum spec of one operand.
///
/// ```
/// use rcannl_tensor::{Axes, Context, Graph, Tensor, TensorError};
///
/// let graph = Graph::new();
/// let x = graph.data("x").shape("4|->2,3").build();
/// let reduced: Vec<Tensor> = vec![
///     x.sum_over(Axes::batch()),
///     x.mean_over(Axes::output_axis(-1)),
///     x.max_over(Axes::output_axis(0).keep_dims()),
///     x.sum_over(Axes::batch().and(Axes::output_axis(-1))),
///     x.sum_over(Axes::spec("b|->i,j => b|->j")),
/// ];
/// // Shapes are closed once a context has made the graph concrete.
/// Context::new(&graph).forward(&reduced.iter().collect::<Vec<_>>())?;
/// let shapes: Vec<String> = reduced.iter().map(Tensor::shape).collect();
/// assert_eq!(shapes, ["|->2,3", "4|->2", "4|->1,3", "|->2", "4|->3"]);
/// # Ok::<(), TensorError>(())
/// ```
///
/// Reduced axes are dropped, as numpy drops them; [`Axes::keep_dims`] keeps single axes as axes
/// of size 1 instead, so that the result broadcasts back against the tensor (`x -
/// x.mean_over(Axes::output_axis(-1).keep_dims())`). A whole kind reduced leaves no axes of that
/// kind either way: an empty row broadcasts against any row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axes {
    choice: Choice,
    keep_dims: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Choice {
    /// A spec of one operand, as written.
    Spec(String),
    /// What goes of each kind: batch, input, output.
    Rows([Row; 3]),
    /// A combination that reduces nothing well-defined, and why.
    Refused(String),
}

/// What a reduction takes from one kind of axes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Row {
    /// Nothing.
    #[default]
    Kept,
    /// Every axis.
    All,
    /// The axes at these positions (Python's counting), sorted, without repeats.
    At(Vec<isize>),
}

/// The index of `kind` in [`Choice::Rows`].
fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Batch => 0,
        Kind::Input => 1,
        Kind::Output => 2,
    }
}

impl Axes {
    fn of_kind(kind: Kind, row: Row) -> Axes {
        let mut rows: [Row; 3] = Default::default();
        rows[slot(kind)] = row;
        Axes {
            choice: Choice::Rows(rows),
            keep_dims: false,
        }
    }

    /// Every axis: the result has no axes (one cell).
    pub fn all() -> Axes {
        Axes {
            choice: Choice::Rows([Row::All, Row::All, Row::All]),
            keep_dims: false,
        }
    }

    /// Every batch axis.
    pub fn batch() -> Axes {
        Axes::of_kind(Kind::Batch, Row::All)
    }

    /// Every input axis.
    pub fn input() -> Axes {
        Axes::of_kind(Kind::Input, Row::All)
    }

    /// Every output axis.
    pub fn output() -> Axes {
        Axes::of_kind(Kind::Output, Row::All)
    }

    /// The batch axis at `position`, counted as Python counts: `0` is the first, `-1` the last.
    pub fn batch_axis(position: isize) -> Axes {
        Axes::of_kind(Kind::Batch, Row::At(vec![position]))
    }

    /// The input axis at `position` (`0` the first, `-1` the last).
    pub fn input_axis(position: isize) -> Axes {
        Axes::of_kind(Kind::Input, Row::At(vec![position]))
    }

    /// The output axis at `position` (`0` the first, `-1` the last).
    pub fn output_axis(position: isize) -> Axes {
        Axes::of_kind(Kind::Output, Row::At(vec![position]))
    }

    /// The axes a unary einsum spec leaves out of its result (`"b|i->o => b|->o"` sums over
    /// `i`; `"ij => i"` over `j`; `"o<+k => o"` over windows). The spec's result is the
    /// reduction's shape, so [`Axes::keep_dims`] and [`Axes::and`] do not apply to it.
    pub fn spec(spec: &str) -> Axes {
        Axes {
            choice: Choice::Spec(spec.to_owned()),
            keep_dims: false,
        }
    }

    /// These axes and `other`'s: `Axes::batch().and(Axes::output_axis(-1))`. Positions from
    /// both ends of one kind must name different axes (`0` and `-1` need two axes at least).
    /// A spec combines with nothing: reducing with the union is an error.
    pub fn and(self, other: Axes) -> Axes {
        let keep_dims = self.keep_dims || other.keep_dims;
        let choice = match (self.choice, other.choice) {
            (Choice::Rows(mine), Choice::Rows(theirs)) => {
                let mut rows = mine;
                for (row, theirs) in rows.iter_mut().zip(theirs) {
                    *row = match (std::mem::take(row), theirs) {
                        (Row::All, _) | (_, Row::All) => Row::All,
                        (Row::Kept, other) | (other, Row::Kept) => other,
                        (Row::At(mut a), Row::At(b)) => {
                            a.extend(b);
                            a.sort_unstable();
                            a.dedup();
                            Row::At(a)
                        }
                    };
                }
                Choice::Rows(rows)
            }
            (Choice::Refused(why), _) | (_, Choice::Refused(why)) => Choice::Refused(why),
            (Choice::Spec(spec), _) | (_, Choice::Spec(spec)) => Choice::Refused(format!(
                "the spec {spec:?} combines with no other axes (write one spec)"
            )),
        };
        Axes { choice, keep_dims }
    }

    /// Single axes reduced stay, of size 1 (numpy's `keepdims`), so that the result broadcasts
    /// back against the tensor reduced.
    pub fn keep_dims(mut self) -> Axes {
        self.keep_dims = true;
        self
    }

    /// The einsum spec of the reduction, and the names whose sizes multiply into the number of
    /// cells each result cell reduces.
    fn resolve(&self) -> Result<(String, Vec<String>), String> {
        match &self.choice {
            Choice::Refused(why) => Err(why.clone()),
            Choice::Spec(spec) => {
                let parsed = parse_einsum(spec).map_err(|e| format!("{spec:?}: {e}"))?;
                if parsed.arity() != 1 {
                    return Err(format!(
                        "{spec:?}: a reduction spec has one operand, this one has {}",
                        parsed.arity()
                    ));
                }
                Ok((spec.clone(), reduced_names(&parsed)))
            }
            Choice::Rows(rows) => {
                let mut operand = Vec::new();
                let mut result = Vec::new();
                let mut counted = Vec::new();
                for kind in Kind::ALL {
                    let (from, to) =
                        row_spec(kind, &rows[slot(kind)], self.keep_dims, &mut counted);
                    operand.push(from);
                    result.push(to);
                }
                let spec = format!(
                    "{}|{}->{} => {}|{}->{}",
                    operand[0], operand[1], operand[2], result[0], result[1], result[2]
                );
                Ok((spec, counted))
            }
        }
    }
}

/// The operand's and the result's row of `kind` in a reduction spec, adding the names reduced
/// to `counted`. Axes are named `kind` letter, end and position (`ob1` the last output axis,
/// `of0` the first), so names never clash with the row variables and the spec always has a comma
/// next to a name (which puts it in multi-character mode).
fn row_spec(kind: Kind, row: &Row, keep_dims: bool, counted: &mut Vec<String>) -> (String, String) {
    match row {
        Row::Kept => ("...".to_owned(), "...".to_owned()),
        Row::All => {
            counted.push(kind.ellipsis_name().to_owned());
            ("...".to_owned(), String::new())
        }
        Row::At(positions) => {
            let letter = &kind.ellipsis_name()[..1];
            let from_front = positions
                .iter()
                .filter(|&&p| p >= 0)
                .max()
                .map_or(0, |&p| p + 1);
            let from_back = positions
                .iter()
                .filter(|&&p| p < 0)
                .min()
                .map_or(0, |&p| -p);
            // (name, position) of every axis the spec names, first to last.
            let named: Vec<(String, isize)> = (0..from_front)
                .map(|p| (format!("{letter}f{p}"), p))
                .chain((1..=from_back).rev().map(|p| (format!("{letter}b{p}"), -p)))
                .collect();
            let mut operand: Vec<String> = Vec::new();
            let mut result: Vec<String> = Vec::new();
            for (i, (name, position)) in named.iter().enumerate() {
                if i == from_front as usize {
                    operand.push("...".to_owned());
                    result.push("...".to_owned());
                }
                operand.push(name.clone());
                if positions.contains(position) {
                    counted.push(name.clone());
                    if keep_dims {
                        result.push("0".to_owned());
                    }
                } else {
                    result.push(name.clone());
                }
            }
            if from_back == 0 {
                operand.push("...".to_owned());
                result.push("...".to_owned());
            }
            (operand.join(", "), result.join(", "))
        }
    }
}

/// The dimension labels and row variables of a unary spec's operand that its result lacks.
fn reduced_names(spec: &EinsumSpec) -> Vec<String> {
    let names_of = |slot: &rcannl_shape::spec::SlotSpec| -> Vec<String> {
        let mut names = Vec::new();
        for (kind, row) in slot.rows() {
            names.extend(
                row.axes()
                    .flat_map(|axis| axis.dim_labels())
                    .map(str::to_owned),
            );
            if let Some(var) = &row.row_var {
                names.push(var.name_in(kind).to_owned());
            }
        }
        names
    };
    let kept = names_of(&spec.lhs);
    let mut reduced: Vec<String> = Vec::new();
    for name in names_of(&spec.rhs[0]) {
        if !kept.contains(&name) && !reduced.contains(&name) {
            reduced.push(name);
        }
    }
    reduced
}

impl Tensor {
    /// The sum over `axes` (see [`Axes`]); the gradient flows back to every cell summed.
    pub fn sum_over(&self, axes: Axes) -> Tensor {
        match axes.resolve() {
            Ok((spec, _)) => self.einsum1_named("sum_over", &spec),
            Err(why) => self
                .graph
                .failed(error(format!("sum_over of '{}': {why}", self.label()))),
        }
    }

    /// The largest value over `axes` (see [`Axes`]); the gradient flows back to the cells that
    /// attain it (every one of them, when several tie).
    pub fn max_over(&self, axes: Axes) -> Tensor {
        match axes.resolve() {
            Ok((spec, _)) => self.einmax1_named("max_over", &spec),
            Err(why) => self
                .graph
                .failed(error(format!("max_over of '{}': {why}", self.label()))),
        }
    }

    /// The mean over `axes` (see [`Axes`]): the sum divided by the number of cells each result
    /// cell sums, which shape inference gives (for a spec, the product of the sizes of the
    /// labels and row variables its operand has and its result lacks, padding included; 1 when
    /// there are none). A mean over no cells is NaN (0 / 0).
    pub fn mean_over(&self, axes: Axes) -> Tensor {
        let (spec, counted) = match axes.resolve() {
            Ok(resolved) => resolved,
            Err(why) => {
                return self
                    .graph
                    .failed(error(format!("mean_over of '{}': {why}", self.label())));
            }
        };
        let sum = self.einsum1_named("mean_over", &spec);
        match count_of(&sum, &counted) {
            Ok(Some(count)) => &sum / &count,
            Ok(None) => sum,
            Err(e) => self.graph.failed(error(format!(
                "mean_over of '{}': {}",
                self.label(),
                e.message
            ))),
        }
    }
}

/// The product of the captured sizes of `names` on the operation computing `reduced`, as a
/// tensor without axes (so that dividing by it keeps the dividend's shape) in `reduced`'s
/// precision when that is a float; `None` for no names.
fn count_of(reduced: &Tensor, names: &[String]) -> Result<Option<Tensor>, TensorError> {
    let graph = &reduced.graph;
    let mut count: Option<Tensor> = None;
    for name in names {
        let size = graph.dim_without_axes(&reduced.capture(name)?);
        count = Some(match count {
            None => size,
            Some(count) => count.pmul(&size),
        });
    }
    let precision = reduced.precision();
    Ok(count.map(|count| {
        if precision.is_float() && precision != Precision::F32 {
            count.cast(precision)
        } else {
            count
        }
    }))
}

impl Graph {
    /// [`Graph::dim`] as a tensor of no axes (one cell).
    fn dim_without_axes(&self, capture: &crate::capture::Capture) -> Tensor {
        self.leaf(
            &format!("dim {}", capture.capture.name),
            LeafDecl::data()
                .batch([0usize; 0])
                .input([0usize; 0])
                .output([0usize; 0]),
            LeafKind::Dim(capture.capture.clone()),
            Precision::F32,
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(axes: Axes) -> (String, Vec<String>) {
        axes.resolve().unwrap()
    }

    #[test]
    fn axes_become_reduction_specs() {
        assert_eq!(
            spec_of(Axes::all()),
            (
                "...|...->... => |->".to_owned(),
                vec!["batch".to_owned(), "input".to_owned(), "output".to_owned()]
            )
        );
        assert_eq!(
            spec_of(Axes::output_axis(-1)).0,
            "...|...->..., ob1 => ...|...->..."
        );
        assert_eq!(
            spec_of(Axes::output_axis(1).keep_dims()),
            (
                "...|...->of0, of1, ... => ...|...->of0, 0, ...".to_owned(),
                vec!["of1".to_owned()]
            )
        );
        assert_eq!(
            spec_of(Axes::input_axis(0).and(Axes::input_axis(-2))).0,
            "...|if0, ..., ib2, ib1->... => ...|..., ib1->..."
        );
        assert_eq!(
            spec_of(Axes::batch().and(Axes::batch_axis(0))).0,
            "...|...->... => |...->..."
        );
        assert_eq!(
            spec_of(Axes::spec("b|i,j->o => b|->o")).1,
            vec!["i".to_owned(), "j".to_owned()]
        );
        assert_eq!(spec_of(Axes::spec("...|... => 0")).1, ["batch", "output"]);
        assert_eq!(spec_of(Axes::spec("o<+k => o")).1, ["k"]);
    }

    #[test]
    fn specs_that_cannot_reduce_are_refused() {
        assert!(Axes::spec("ij;jk=>ik").resolve().is_err());
        assert!(Axes::spec("ij=>>i").resolve().is_err());
        assert!(Axes::spec("ij=>i").and(Axes::batch()).resolve().is_err());
    }
}
