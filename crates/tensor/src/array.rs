//! Shaped results: [`Array`], a tensor's values with its dims, in memory order (batch axes,
//! then output axes, then input axes), as [`Context::array`](crate::Context::array) reads
//! them: indexing by a multi-index, rows, arg maxima along an axis, and printing (nested brackets,
//! or a layout print by axis kind).

use std::fmt;
use std::ops::Index;

use crate::graph::{TensorError, error};
use crate::print::{self, Layout};

/// Values with their dims, row-major in memory order: batch axes, then output axes, then input
/// axes (so a `4|3->2` tensor, 4 examples mapping 3-vectors to 2-vectors, has dims `[4, 2, 3]`).
///
/// ```
/// use rcannl_tensor::Array;
///
/// let a = Array::new(vec![2], vec![3], vec![], vec![0.5, 2.0, 1.0, 3.0, -1.0, 4.0])?;
/// assert_eq!(a.shape(), &[2, 3]);
/// assert_eq!(a[[1, 2]], 4.0);
/// assert_eq!(a.argmax(-1)?, vec![1, 2]);
/// assert_eq!(a.rows().nth(1), Some(&[3.0, -1.0, 4.0][..]));
/// assert_eq!(a.to_string(), "[[0.5,   2,   1],\n [  3,  -1,   4]]");
/// # Ok::<(), rcannl_tensor::TensorError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    dims: Vec<usize>,
    batch_axes: usize,
    output_axes: usize,
    values: Vec<f64>,
}

impl Array {
    /// An array of the given batch, output and input dims holding `values` (row-major in memory
    /// order); an error unless the dims' product is the number of values.
    pub fn new(
        batch: Vec<usize>,
        output: Vec<usize>,
        input: Vec<usize>,
        values: Vec<f64>,
    ) -> Result<Array, TensorError> {
        let (batch_axes, output_axes) = (batch.len(), output.len());
        let dims: Vec<usize> = batch.into_iter().chain(output).chain(input).collect();
        let cells = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if cells != Some(values.len()) {
            return Err(error(format!(
                "array: dims {dims:?} do not hold {} values",
                values.len()
            )));
        }
        Ok(Array {
            dims,
            batch_axes,
            output_axes,
            values,
        })
    }

    /// The dims in memory order: batch, output, input.
    pub fn shape(&self) -> &[usize] {
        &self.dims
    }

    /// The batch axes' dims.
    pub fn batch_dims(&self) -> &[usize] {
        &self.dims[..self.batch_axes]
    }

    /// The output axes' dims.
    pub fn output_dims(&self) -> &[usize] {
        &self.dims[self.batch_axes..self.batch_axes + self.output_axes]
    }

    /// The input axes' dims.
    pub fn input_dims(&self) -> &[usize] {
        &self.dims[self.batch_axes + self.output_axes..]
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the array has no cells (some axis has size 0).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The values, row-major in memory order.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The values, row-major in memory order, without copying them.
    pub fn into_vec(self) -> Vec<f64> {
        self.values
    }

    /// The offset of the cell at `index` (one position per axis, in memory order), if there is
    /// such a cell.
    fn offset(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.dims.len() {
            return None;
        }
        index
            .iter()
            .zip(&self.dims)
            .try_fold(0, |offset, (&i, &dim)| (i < dim).then(|| offset * dim + i))
    }

    /// The value at `index` (one position per axis, in memory order), or `None` when the index
    /// has another number of positions or one beyond its axis.
    pub fn get(&self, index: &[usize]) -> Option<f64> {
        self.offset(index).map(|offset| self.values[offset])
    }

    /// The rows: the runs of the last axis, in memory order (a matrix's rows; for a `batch|->o`
    /// tensor, each example's outputs). An array without axes is one row of its one value, and
    /// an array without cells has no rows.
    pub fn rows(&self) -> std::slice::ChunksExact<'_, f64> {
        let length = self.dims.last().copied().unwrap_or(1).max(1);
        self.values.chunks_exact(length)
    }

    /// The position of the largest value along `axis` (in memory order, counted as Python
    /// counts: `-1` is the last), for every position of the other axes, in memory order: a
    /// `batch|->classes` tensor's predicted classes are `argmax(-1)`. The first of equal
    /// maxima wins, and a NaN beats every number (as numpy's `argmax`). An error for an axis the
    /// array lacks or an axis of size 0.
    pub fn argmax(&self, axis: isize) -> Result<Vec<usize>, TensorError> {
        let rank = self.rank() as isize;
        let resolved = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&resolved) {
            return Err(error(format!(
                "argmax along axis {axis}: the array has {rank} axes (dims {:?})",
                self.dims
            )));
        }
        let resolved = resolved as usize;
        let size = self.dims[resolved];
        if size == 0 {
            return Err(error(format!(
                "argmax along axis {axis}: the axis is empty (dims {:?})",
                self.dims
            )));
        }
        let inner: usize = self.dims[resolved + 1..].iter().product();
        let outer: usize = self.dims[..resolved].iter().product();
        let mut positions = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| self.values[(o * size + k) * inner + i];
                let mut best = 0;
                for k in 1..size {
                    let (candidate, leader) = (at(k), at(best));
                    if !leader.is_nan() && (candidate.is_nan() || candidate > leader) {
                        best = k;
                    }
                }
                positions.push(best);
            }
        }
        Ok(positions)
    }
}

impl Array {
    /// The values as a layout print (see [`crate::print`]) under `title`: a table whose columns
    /// and rows are two axes chosen by kind, one table per position of any further axis, axes
    /// named by kind and place (`b0`, `i0`, `o0`) and long ones elided.
    ///
    /// ```
    /// use rcannl_tensor::Array;
    /// use rcannl_tensor::print::Layout;
    ///
    /// // A `|3->2` matrix: 2 outputs (rows) by 3 inputs (columns).
    /// let w = Array::new(vec![], vec![2], vec![3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5])?;
    /// assert_eq!(
    ///     w.to_grid("w", &Layout::default()),
    ///     "w: |i0=3->o0=2\n\
    ///      ┌─────────┬─────────────┐\n\
    ///      │ o0 \\ i0 │   0   1   2 │\n\
    ///      ├─────────┼─────────────┤\n\
    ///      │       0 │   1   2   3 │\n\
    ///      │       1 │   4   5 6.5 │\n\
    ///      └─────────┴─────────────┘\n"
    /// );
    /// # Ok::<(), rcannl_tensor::TensorError>(())
    /// ```
    pub fn to_grid(&self, title: &str, layout: &Layout) -> String {
        print::render(title, self, &print::axis_names(self, &[]), layout)
    }
}

impl Index<&[usize]> for Array {
    type Output = f64;

    /// The value at `index` (one position per axis, in memory order); panics for an index
    /// [`Array::get`] has no value at, as a slice does for a position beyond it.
    fn index(&self, index: &[usize]) -> &f64 {
        match self.offset(index) {
            Some(offset) => &self.values[offset],
            None => panic!(
                "index {index:?} is outside an array of dims {:?}",
                self.dims
            ),
        }
    }
}

impl<const N: usize> Index<[usize; N]> for Array {
    type Output = f64;

    /// The value at `index` (see the `&[usize]` form).
    fn index(&self, index: [usize; N]) -> &f64 {
        &self[&index[..]]
    }
}

impl fmt::Display for Array {
    /// Nested brackets, one level per axis, numbers right-aligned to a common width (numpy's
    /// layout): `[[1, 2], [3, 4]]` prints as two lines. A precision (`{:.3}`) applies to every
    /// number; an array without axes prints as its value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .values
            .iter()
            .map(|v| match f.precision() {
                Some(precision) => format!("{v:.precision$}"),
                None => v.to_string(),
            })
            .collect();
        let width = shown.iter().map(String::len).max().unwrap_or(0);
        if self.dims.is_empty() {
            return f.write_str(&shown[0]);
        }
        let mut out = String::new();
        nest(&self.dims, &shown, width, 0, &mut out);
        f.write_str(&out)
    }
}

/// Writes the cells `shown` of an array of `dims` (at nesting `depth`) as nested brackets: the
/// last axis on one line, each outer axis's parts on their own lines (a blank line between
/// blocks of three or more axes, as numpy separates them).
fn nest(dims: &[usize], shown: &[String], width: usize, depth: usize, out: &mut String) {
    out.push('[');
    if dims.len() == 1 {
        let cells: Vec<String> = shown.iter().map(|s| format!("{s:>width$}")).collect();
        out.push_str(&cells.join(", "));
    } else {
        let part = shown.len() / dims[0].max(1);
        for k in 0..dims[0] {
            if k > 0 {
                out.push(',');
                out.push_str(&"\n".repeat(dims.len() - 1));
                out.push_str(&" ".repeat(depth + 1));
            }
            nest(
                &dims[1..],
                &shown[k * part..(k + 1) * part],
                width,
                depth + 1,
                out,
            );
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(batch: Vec<usize>, output: Vec<usize>, input: Vec<usize>) -> Array {
        let cells: usize = batch.iter().chain(&output).chain(&input).product();
        Array::new(batch, output, input, (0..cells).map(|i| i as f64).collect()).unwrap()
    }

    #[test]
    fn dims_by_kind_and_indexing() {
        let a = counting(vec![2], vec![3], vec![4]);
        assert_eq!(a.shape(), &[2, 3, 4]);
        assert_eq!(
            (a.batch_dims(), a.output_dims(), a.input_dims()),
            (&[2][..], &[3][..], &[4][..])
        );
        assert_eq!(a[[1, 2, 3]], 23.0);
        assert_eq!(a.get(&[0, 1, 2]), Some(6.0));
        assert_eq!(a.get(&[0, 3, 0]), None);
        assert_eq!(a.get(&[0, 1]), None);
        assert_eq!(a.rows().count(), 6);
        assert!(Array::new(vec![2], vec![2], vec![], vec![1.0; 3]).is_err());
    }

    #[test]
    fn arg_maxima_along_any_axis() {
        let a = Array::new(
            vec![2],
            vec![3],
            vec![],
            vec![1.0, 5.0, 5.0, f64::NAN, 0.0, 9.0],
        )
        .unwrap();
        assert_eq!(a.argmax(1).unwrap(), vec![1, 0]);
        assert_eq!(a.argmax(-2).unwrap(), vec![1, 0, 1]);
        assert!(a.argmax(2).is_err());
        assert!(a.argmax(-3).is_err());
        let empty = Array::new(vec![2], vec![0], vec![], vec![]).unwrap();
        assert!(empty.argmax(-1).is_err());
        assert_eq!(empty.argmax(0).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn printing_nests_brackets() {
        let scalar = Array::new(vec![], vec![], vec![], vec![2.5]).unwrap();
        assert_eq!(scalar.to_string(), "2.5");
        assert_eq!(counting(vec![], vec![3], vec![]).to_string(), "[0, 1, 2]");
        assert_eq!(
            counting(vec![2], vec![], vec![2]).to_string(),
            "[[0, 1],\n [2, 3]]"
        );
        assert_eq!(
            format!("{:.1}", counting(vec![2], vec![1], vec![2])),
            "[[[0.0, 1.0]],\n\n [[2.0, 3.0]]]"
        );
        assert_eq!(counting(vec![0], vec![], vec![]).to_string(), "[]");
    }
}
