//! Layout prints: a tensor's cells laid out by the kinds of its axes. A heading names every axis
//! by kind and position (`b0`, `i0`, `o1`, with its basis where it has one: `o0@rgb`) and size,
//! written as shapes are (`b0=2|i0=3->o0=4`); then tables of the cells.
//!
//! Which axis goes where follows a priority: the input axes innermost first, each followed by
//! the output axis of the same place from the end (`i[-1]`, `o[-1]`, `i[-2]`, `o[-2]`, …), then
//! the batch axes innermost first. The first axis in priority runs along a table's columns, the
//! second down its rows, and each further axis splits the print into one table per position,
//! headed by the positions (`b0 = 1, o1 = 0`), the axis last in priority outermost. A matrix
//! `|3->4` is a table of 4 rows (outputs) by 3 columns (inputs); a batch of vectors `4|->2` has
//! a row per example. An axis longer than `2·edge + 1` shows its first and last `edge`
//! positions, `…` standing for those between.

use std::fmt;

use rcannl_shape::spec::Kind;

use super::grid::Table;
use crate::array::Array;

/// How a layout print shows long axes and numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The positions shown at each end of an axis longer than `2·edge + 1` (default 3).
    pub edge: usize,
    /// The digits after the decimal point of every number; `None` (the default) writes each
    /// number in the fewest digits that read back as it.
    pub precision: Option<usize>,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            edge: 3,
            precision: None,
        }
    }
}

/// An axis of a layout print: its kind, its place in its row (from 0, left to right), its
/// size, and its basis where it has a named one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AxisName {
    pub kind: Kind,
    pub place: usize,
    pub size: usize,
    pub basis: Option<String>,
}

impl fmt::Display for AxisName {
    /// `b0`, `i1`, `o0@rgb`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = match self.kind {
            Kind::Batch => 'b',
            Kind::Input => 'i',
            Kind::Output => 'o',
        };
        write!(f, "{letter}{}", self.place)?;
        match &self.basis {
            Some(basis) => write!(f, "@{basis}"),
            None => Ok(()),
        }
    }
}

/// The axes of `array` in memory order (batch, output, input), with the bases `bases` gives
/// (in memory order; missing or `None`: unnamed).
pub(crate) fn axis_names(array: &Array, bases: &[Option<String>]) -> Vec<AxisName> {
    let kinds = [
        (Kind::Batch, array.batch_dims()),
        (Kind::Output, array.output_dims()),
        (Kind::Input, array.input_dims()),
    ];
    let mut axes = Vec::new();
    for (kind, dims) in kinds {
        for (place, &size) in dims.iter().enumerate() {
            let basis = bases.get(axes.len()).cloned().flatten();
            axes.push(AxisName {
                kind,
                place,
                size,
                basis,
            });
        }
    }
    axes
}

/// The axes as a shape: `b0=2|i0=3->o0=4` (axes of one row joined by commas).
pub(crate) fn heading(axes: &[AxisName]) -> String {
    let row = |kind: Kind| {
        let named: Vec<String> = axes
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| format!("{a}={}", a.size))
            .collect();
        named.join(",")
    };
    format!(
        "{}|{}->{}",
        row(Kind::Batch),
        row(Kind::Input),
        row(Kind::Output)
    )
}

/// The axes (indices into `axes`, memory order) in the order of their priority (see the module
/// documentation).
fn priority(axes: &[AxisName]) -> Vec<usize> {
    let innermost_first = |kind: Kind| -> Vec<usize> {
        (0..axes.len())
            .rev()
            .filter(|&a| axes[a].kind == kind)
            .collect()
    };
    let (inputs, outputs) = (innermost_first(Kind::Input), innermost_first(Kind::Output));
    let mut order = Vec::with_capacity(axes.len());
    for k in 0..inputs.len().max(outputs.len()) {
        order.extend(inputs.get(k));
        order.extend(outputs.get(k));
    }
    order.extend(innermost_first(Kind::Batch));
    order
}

/// The positions of an axis of `size` a print shows: all of them, or the first and last
/// `edge`, `None` standing for those between.
fn shown(size: usize, edge: usize) -> Vec<Option<usize>> {
    if size <= 2 * edge + 1 {
        (0..size).map(Some).collect()
    } else {
        (0..edge)
            .map(Some)
            .chain([None])
            .chain((size - edge..size).map(Some))
            .collect()
    }
}

/// A position as a header shows it.
fn position(at: Option<usize>) -> String {
    at.map_or_else(|| "…".to_owned(), |p| p.to_string())
}

/// `value` as a cell shows it.
fn number(value: f64, layout: &Layout) -> String {
    match layout.precision {
        Some(precision) => format!("{value:.precision$}"),
        None => value.to_string(),
    }
}

/// What every table of one print shares: the array, its axes, the axes along the columns and
/// down the rows (none for an array of one axis), and the layout.
struct Print<'a> {
    array: &'a Array,
    axes: &'a [AxisName],
    columns: usize,
    rows: Option<usize>,
    layout: &'a Layout,
}

/// The cells of `array` laid out (see the module documentation) under the heading
/// `title: b0=…|…->…`, each line ending in a newline. `axes` names the array's axes in memory
/// order.
pub(crate) fn render(title: &str, array: &Array, axes: &[AxisName], layout: &Layout) -> String {
    let mut out = format!("{title}: {}\n", heading(axes));
    let order = priority(axes);
    let Some(&columns) = order.first() else {
        out += &number(array.values()[0], layout);
        out.push('\n');
        return out;
    };
    if array.is_empty() {
        out += "(no cells: an axis has size 0)\n";
        return out;
    }
    let print = Print {
        array,
        axes,
        columns,
        rows: order.get(1).copied(),
        layout,
    };
    let outermost_first: Vec<usize> = order.iter().skip(2).rev().copied().collect();
    let mut pieces = Vec::new();
    let mut index = vec![0; axes.len()];
    blocks(
        &print,
        &outermost_first,
        &mut Vec::new(),
        &mut index,
        &mut pieces,
    );
    let cell_width = pieces
        .iter()
        .filter_map(|piece| match piece {
            Piece::Table(table) => Some(table.cell_width()),
            Piece::Heading(_) => None,
        })
        .max()
        .unwrap_or(0);
    for piece in pieces {
        match piece {
            Piece::Heading(heading) => {
                out += &heading;
                out.push('\n');
            }
            Piece::Table(table) => out += &table.draw(cell_width),
        }
    }
    out
}

/// A part of a print: a block's heading, or a table.
enum Piece {
    Heading(String),
    Table(Table),
}

/// The pieces of a table per shown position of the block axes `remaining` (outermost first),
/// each under the positions chosen so far (`heading`), which `index` holds; an elided position
/// is its heading alone.
fn blocks(
    print: &Print,
    remaining: &[usize],
    heading: &mut Vec<String>,
    index: &mut [usize],
    pieces: &mut Vec<Piece>,
) {
    let Some((&axis, inner)) = remaining.split_first() else {
        if !heading.is_empty() {
            pieces.push(Piece::Heading(heading.join(", ")));
        }
        pieces.push(Piece::Table(table(print, index)));
        return;
    };
    for at in shown(print.axes[axis].size, print.layout.edge) {
        heading.push(format!("{} = {}", print.axes[axis], position(at)));
        match at {
            Some(at) => {
                index[axis] = at;
                blocks(print, inner, heading, index, pieces);
            }
            None => pieces.push(Piece::Heading(heading.join(", "))),
        }
        heading.pop();
    }
}

/// The table of the cells at the block positions `index` holds.
fn table(print: &Print, index: &mut [usize]) -> Table {
    let columns = shown(print.axes[print.columns].size, print.layout.edge);
    let (corner, row_positions) = match print.rows {
        Some(rows) => (
            format!("{} \\ {}", print.axes[rows], print.axes[print.columns]),
            shown(print.axes[rows].size, print.layout.edge),
        ),
        None => (print.axes[print.columns].to_string(), vec![Some(0)]),
    };
    let mut rows = Vec::with_capacity(row_positions.len());
    for row in row_positions {
        let mut cells = Vec::with_capacity(columns.len());
        for &column in &columns {
            let (Some(row), Some(column)) = (row, column) else {
                cells.push("…".to_owned());
                continue;
            };
            index[print.columns] = column;
            if let Some(rows) = print.rows {
                index[rows] = row;
            }
            cells.push(number(print.array[&*index], print.layout));
        }
        let header = match print.rows {
            Some(_) => position(row),
            None => String::new(),
        };
        rows.push((header, cells));
    }
    Table {
        corner,
        columns: columns.into_iter().map(position).collect(),
        rows,
    }
}
