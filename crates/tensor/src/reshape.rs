//! The reshape family: `squeeze` and `unsqueeze` (remove or insert an axis of size 1),
//! `flatten` (adjacent axes of one kind into one), `unflatten` (one axis into several) and
//! `reshape` (the axes of one kind into given dims), all keeping row-major cell order (numpy's
//! `reshape`), all with gradients.
//!
//! **Naming axes.** A shape has three rows of axes, `batch | input -> output`; these operations
//! work within one row, named by its [`AxisKind`], and an [`Axis`] is a kind and a position in
//! that row counted as Python counts: 0 the first, 1 the second, −1 the last, −2 the one before
//! it. The row of a tensor is laid out in memory outermost first (batch, then output, then
//! input axes), so "row-major order" is the order of positions within a row.
//!
//! **How they are computed.** Each is an einsum of one operand, so its loops, fusion and
//! gradient are those of any einsum: merging two adjacent axes `a, b` (`b` of size `s`) writes
//! the result's axis at the affine index `s·a + b` (the spec `s*a<+b`, a "valid convolution"
//! whose kernel is `b`), and splitting reads the operand at that index. Axes of size 1 are
//! labels whose size is set to 1, not fixed indices, so that a size other than 1 is an error
//! rather than a silent slice. A stride must be a number when the operation is built, so
//! `flatten` needs the sizes of every merged axis but the first to be known then (they are,
//! for data, parameters of given shapes and most of what is computed from them), and
//! `unflatten`'s inferred size (−1) must be the first, unless the split axis's size is known
//! then too. Otherwise the operation fails with an error saying which size it lacks.

use rcannl_ir::{Binop, Unop};
use rcannl_shape::logic::Logic;
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::term::{Dim, Row};

pub use rcannl_shape::spec::Kind as AxisKind;

use crate::graph::{Forward, GradRhs, OpSpec, error};
use crate::tensor::Tensor;

/// One axis of a tensor: its kind and its position among the axes of that kind, counted from
/// the first (0, 1, …) or, when negative, from the last (−1 the last), as Python counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Axis {
    /// The row the axis is in.
    pub kind: AxisKind,
    /// The position in the row.
    pub position: isize,
}

impl Axis {
    /// The batch axis at `position`.
    pub fn batch(position: isize) -> Axis {
        Axis {
            kind: AxisKind::Batch,
            position,
        }
    }

    /// The input axis at `position`.
    pub fn input(position: isize) -> Axis {
        Axis {
            kind: AxisKind::Input,
            position,
        }
    }

    /// The output axis at `position`.
    pub fn output(position: isize) -> Axis {
        Axis {
            kind: AxisKind::Output,
            position,
        }
    }
}

impl std::fmt::Display for Axis {
    /// `output axis -1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} axis {}", self.kind, self.position)
    }
}

impl Tensor {
    /// The tensor with a new axis of size 1 at `axis` (its position in the result's row:
    /// `Axis::output(0)` a new first output axis, `Axis::output(-1)` a new last one). The
    /// gradient is the result's, without the axis.
    pub fn unsqueeze(&self, axis: Axis) -> Tensor {
        if let Err(why) = self.check_position(axis, 1) {
            return self.fail(format!("unsqueeze of '{}' at {axis}: {why}", self.label()));
        }
        let place = around(axis.position, 1);
        let (operand, result) = (row_spec(&place, &[]), row_spec(&place, &["n"]));
        let t = self.copy("unsqueeze", &slot_pair(axis.kind, &operand, &result));
        set_sizes(&t, &[("n", 1)])
    }

    /// The tensor without the axis `axis`, which must have size 1.
    pub fn squeeze(&self, axis: Axis) -> Tensor {
        let context = format!("squeeze of '{}' at {axis}", self.label());
        if let Err(why) = self.check_position(axis, 0) {
            return self.fail(format!("{context}: {why}"));
        }
        if let Some(size) = self.known_size(axis)
            && size != 1
        {
            return self.fail(format!(
                "{context}: the axis has size {size}, not 1 (shape {})",
                self.shape()
            ));
        }
        let place = around(axis.position, 1);
        let (operand, result) = (row_spec(&place, &["n"]), row_spec(&place, &[]));
        let t = self.copy("squeeze", &slot_pair(axis.kind, &operand, &result));
        set_sizes(&t, &[("n", 1)])
    }

    /// Every axis of kind `kind` merged into one, in row-major order (a row of none gets one
    /// axis of size 1). The sizes of all but the first must be known when it is built.
    pub fn flatten(&self, kind: AxisKind) -> Tensor {
        match self.row_now(kind) {
            Some(dims) if dims.is_empty() => self.unsqueeze(Axis { kind, position: 0 }),
            Some(dims) => self.flatten_axes(kind, 0, dims.len() as isize - 1),
            None => self.fail(format!(
                "flatten of '{}': the number of its {kind} axes is not known yet (shape {})",
                self.label(),
                self.shape()
            )),
        }
    }

    /// The adjacent axes of kind `kind` from position `first` to position `last`, both
    /// included (Python positions: `1, 2`, `-2, -1`, or `1, -1` for all from the second),
    /// merged into one, in row-major order: cell `(…, i, j, …)` goes to `(…, i·n + j, …)`, `n`
    /// the size of the second axis. The sizes of all but the first merged axis must be known
    /// when it is built.
    pub fn flatten_axes(&self, kind: AxisKind, first: isize, last: isize) -> Tensor {
        let context = format!(
            "flatten of '{}' ({kind} axes {first} to {last})",
            self.label()
        );
        let (first, last) = match self.resolve_range(kind, first, last) {
            Ok(range) => range,
            Err(why) => return self.fail(format!("{context}: {why} (shape {})", self.shape())),
        };
        let mut inner_sizes = Vec::new();
        for position in first + 1..=last {
            let axis = Axis { kind, position };
            match self.known_size(axis) {
                Some(size) => inner_sizes.push(size),
                None => {
                    return self.fail(format!(
                        "{context}: the size of {axis} is not known when the operation is \
                         built, and a merged axis's stride must be (shape {})",
                        self.shape()
                    ));
                }
            }
        }
        // Left to right: the merged axis so far is the outer one of the next pair, whose stride
        // is the size of the next axis alone.
        let mut t = self.clone();
        for (step, &size) in inner_sizes.iter().enumerate() {
            let position = if first >= 0 {
                first
            } else {
                first + step as isize
            };
            let place = around(position, 2);
            let merged = format!("{size}*a<+b");
            let (operand, result) = (row_spec(&place, &["a", "b"]), row_spec(&place, &[&merged]));
            t = t.copy("flatten", &slot_pair(kind, &operand, &result));
        }
        t
    }

    /// The axis `axis` split into axes of sizes `dims`, in row-major order: position `i·n + j`
    /// goes to `(i, j)`, `n` the second size. One size may be −1, inferred from the axis's size
    /// (it must be the first unless the axis's size is known when the operation is built); the
    /// sizes must multiply to the axis's.
    pub fn unflatten(&self, axis: Axis, dims: &[isize]) -> Tensor {
        let context = format!("unflatten of '{}' at {axis} into {dims:?}", self.label());
        if let Err(why) = self.check_position(axis, 0) {
            return self.fail(format!("{context}: {why}"));
        }
        let known = self.known_size(axis).map(|size| vec![size]);
        let sizes = match resolve_sizes(dims, known.as_deref()) {
            Ok(sizes) => sizes,
            Err(why) => return self.fail(format!("{context}: {why} (shape {})", self.shape())),
        };
        self.split(axis, &sizes)
    }

    /// The axes of kind `kind` reshaped into axes of sizes `dims`, keeping row-major order (as
    /// numpy's `reshape` of those axes): `flatten(kind)` then `unflatten` into `dims`. One size
    /// may be −1, inferred; the sizes must multiply to as many cells as the axes hold. The
    /// sizes of all the axes but the first must be known when it is built; with all of them
    /// known, a different number of cells is an error here, naming both shapes.
    pub fn reshape(&self, kind: AxisKind, dims: &[isize]) -> Tensor {
        let context = format!("reshape of '{}' ({kind} axes) into {dims:?}", self.label());
        let row = self.row_now(kind);
        let known: Option<Vec<usize>> = row
            .as_ref()
            .and_then(|dims| dims.iter().map(Dim::ground_size).collect());
        let sizes = match resolve_sizes(dims, known.as_deref()) {
            Ok(sizes) => sizes,
            Err(why) => return self.fail(format!("{context}: {why} (shape {})", self.shape())),
        };
        let flat = self.flatten(kind);
        flat.split(Axis { kind, position: 0 }, &sizes)
    }

    /// The axis split into `sizes` (`None` for the one the solver infers), from the right:
    /// `(rest, last)` with stride `last`, then `rest` again.
    fn split(&self, axis: Axis, sizes: &[Option<usize>]) -> Tensor {
        let Some((first, inner)) = sizes.split_first() else {
            return self.fail(format!(
                "unflatten of '{}' at {axis}: no sizes to split into",
                self.label()
            ));
        };
        let mut t = self.clone();
        let mut position = axis.position;
        for size in inner.iter().rev() {
            let size = size.expect("resolve_sizes infers only the first size");
            let place = around(position, 1);
            let strided = format!("{size}*r<+c");
            let (operand, result) = (row_spec(&place, &[&strided]), row_spec(&place, &["r", "c"]));
            t = set_sizes(
                &t.copy("unflatten", &slot_pair(axis.kind, &operand, &result)),
                &[("c", size)],
            );
            if position < 0 {
                position -= 1;
            }
        }
        match first {
            // A single size: a copy whose axis is constrained to it.
            Some(size) if inner.is_empty() => {
                let row = row_spec(&around(position, 1), &["r"]);
                set_sizes(
                    &t.copy("unflatten", &slot_pair(axis.kind, &row, &row)),
                    &[("r", *size)],
                )
            }
            Some(size) => set_sizes(&t, &[("r", *size)]),
            None => t,
        }
    }

    /// A copy of the tensor following the one-operand `spec`, named `name`; the gradient flows
    /// back through the same spec.
    fn copy(&self, name: &str, spec: &str) -> Tensor {
        let parsed = match parse_einsum(spec) {
            Ok(parsed) => parsed,
            Err(e) => return self.fail(format!("{name} of '{}': {e}", self.label())),
        };
        self.graph.apply(
            name,
            Logic::Spec(parsed),
            &[self],
            OpSpec::new(Binop::Add, Forward::Unop(Unop::Identity)).gradient(|grad| {
                let g = grad.g();
                grad.accumulate(0, Binop::Add, GradRhs::Unop(Unop::Identity, g));
                Ok(())
            }),
        )
    }

    fn fail(&self, message: String) -> Tensor {
        self.graph.failed(error(message))
    }

    /// The row of kind `kind` as inference knows it now, when its number of axes is known.
    fn row_now(&self, kind: AxisKind) -> Option<Vec<Dim>> {
        let row = self.row_term(kind);
        match row.var {
            None => Some(row.dims().cloned().collect()),
            Some(_) => None,
        }
    }

    fn row_term(&self, kind: AxisKind) -> Row {
        let state = self.graph.state.lock();
        state
            .inference
            .shape(state.tensors[self.index].shape)
            .row(kind)
            .clone()
    }

    /// The size of `axis` if inference knows it now.
    fn known_size(&self, axis: Axis) -> Option<usize> {
        let row = self.row_term(axis.kind);
        let dim = match (row.var, axis.position) {
            (None, p) => {
                let dims: Vec<&Dim> = row.dims().collect();
                dims.get(python_index(p, dims.len())?).copied()
            }
            (Some(_), p) if p >= 0 => row.leading.get(p as usize),
            (Some(_), p) => {
                let from_end = p.unsigned_abs();
                row.trailing
                    .len()
                    .checked_sub(from_end)
                    .map(|i| &row.trailing[i])
            }
        };
        dim.and_then(Dim::ground_size)
    }

    /// An error unless `axis` is a position of its row, where the row has `added` more axes
    /// (when inference knows its number of axes).
    fn check_position(&self, axis: Axis, added: usize) -> Result<(), String> {
        match self.row_now(axis.kind) {
            Some(dims) if python_index(axis.position, dims.len() + added).is_none() => {
                Err(format!(
                    "the {} row has {} axes (shape {})",
                    axis.kind,
                    dims.len(),
                    self.shape()
                ))
            }
            _ => Ok(()),
        }
    }

    /// The positions `start` and `end`, both counted from the same end: from the first when
    /// both are nonnegative, or when the row's number of axes is known; else from the last.
    fn resolve_range(
        &self,
        kind: AxisKind,
        start: isize,
        end: isize,
    ) -> Result<(isize, isize), String> {
        let rank = self.row_now(kind).map(|dims| dims.len());
        let (start, end) = match (start >= 0, end >= 0, rank) {
            (true, true, _) | (false, false, _) => (start, end),
            (_, _, Some(rank)) => {
                let index = |p: isize| python_index(p, rank).map(|i| i as isize);
                match (index(start), index(end)) {
                    (Some(start), Some(end)) => (start, end),
                    _ => return Err(format!("the {kind} row has {rank} axes")),
                }
            }
            (_, _, None) => {
                return Err(format!(
                    "positions of both signs need the number of {kind} axes, not known yet"
                ));
            }
        };
        if end < start {
            return Err("the range is empty".to_owned());
        }
        if let Some(rank) = rank {
            let fits = |p: isize| python_index(p, rank).is_some();
            if !fits(start) || !fits(end) {
                return Err(format!("the {kind} row has {rank} axes"));
            }
        }
        Ok((start, end))
    }
}

/// `position` (Python's) as an index into `len` axes.
fn python_index(position: isize, len: usize) -> Option<usize> {
    let index = if position < 0 {
        len.checked_sub(position.unsigned_abs())?
    } else {
        position as usize
    };
    (index < len).then_some(index)
}

/// Where some axes sit in a row of a spec: after `before` (named labels, a position counted from
/// the first) or before `after` (a position counted from the last).
struct Place {
    from_first: bool,
    before: Vec<String>,
    after: Vec<String>,
}

/// The place of `width` axes at `position` (Python's) of the row that has them: `x0, …` before
/// a nonnegative position, `…, y0, …` after a negative one.
fn around(position: isize, width: usize) -> Place {
    if position >= 0 {
        Place {
            from_first: true,
            before: (0..position).map(|i| format!("x{i}")).collect(),
            after: Vec::new(),
        }
    } else {
        // The axes end at `position + width − 1` from the end: that many follow them.
        let following = (-position - width as isize).max(0);
        Place {
            from_first: false,
            before: Vec::new(),
            after: (0..following).map(|i| format!("y{i}")).collect(),
        }
    }
}

/// A row of a spec with `axes` at `place`: `x0, …, axes, ...` or `..., axes, y0, …`.
fn row_spec(place: &Place, axes: &[&str]) -> String {
    let mut items: Vec<&str> = place.before.iter().map(String::as_str).collect();
    if !place.from_first {
        items.push("...");
    }
    items.extend(axes);
    if place.from_first {
        items.push("...");
    }
    items.extend(place.after.iter().map(String::as_str));
    items.join(", ")
}

/// The spec mapping a slot whose row of kind `kind` is `operand` to one where it is `result`,
/// the other rows carried through.
fn slot_pair(kind: AxisKind, operand: &str, result: &str) -> String {
    let slot = |row: &str| match kind {
        AxisKind::Batch => format!("{row}|...->..."),
        AxisKind::Input => format!("...|{row}->..."),
        AxisKind::Output => format!("...|...->{row}"),
    };
    format!("{} => {}", slot(operand), slot(result))
}

/// `t` with the labels of the spec that computed it constrained to sizes; a failure fails the
/// result.
fn set_sizes(t: &Tensor, sizes: &[(&str, usize)]) -> Tensor {
    if t.error().is_some() {
        return t.clone();
    }
    for &(label, size) in sizes {
        let set = t
            .capture(label)
            .and_then(|capture| t.graph.set_dim(&capture, size));
        if let Err(e) = set {
            return t.graph.failed(error(format!(
                "{}: {label} must have size {size}: {e}",
                t.label()
            )));
        }
    }
    t.clone()
}

/// The sizes to split into, `None` for the inferred one, which is then the first: `−1` resolved
/// from `total` (the sizes of the axes that hold the cells, when all are known) or left to
/// inference. Errors: more than one −1, another negative size, and sizes that do not multiply
/// to the cells held.
fn resolve_sizes(dims: &[isize], held: Option<&[usize]>) -> Result<Vec<Option<usize>>, String> {
    if dims.is_empty() {
        return Err("no sizes given".to_owned());
    }
    if let Some(&bad) = dims.iter().find(|&&d| d < -1) {
        return Err(format!(
            "{bad} is not a size (−1 asks for it to be inferred)"
        ));
    }
    let inferred = dims.iter().filter(|&&d| d == -1).count();
    if inferred > 1 {
        return Err("only one size can be inferred (−1)".to_owned());
    }
    let given: usize = dims
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .product();
    let mut sizes: Vec<Option<usize>> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
    match held {
        Some(held) => {
            let cells: usize = held.iter().product();
            if inferred == 1 {
                if given == 0 || !cells.is_multiple_of(given) {
                    return Err(format!(
                        "{cells} cells (axes {held:?}) do not split into {dims:?}"
                    ));
                }
                let at = dims.iter().position(|&d| d == -1).expect("one is inferred");
                sizes[at] = Some(cells / given);
            } else if given != cells {
                return Err(format!(
                    "axes {held:?} hold {cells} cells, {dims:?} would hold {given}"
                ));
            }
        }
        None if inferred == 1 && dims[0] != -1 => {
            return Err(
                "the size to infer (−1) must be the first when the cells held are not known \
                 yet"
                .to_owned(),
            );
        }
        None => {}
    }
    Ok(sizes)
}
