//! The INPUT arguments of `einsum` and `explain`: a shape and its values.
//!
//! - `range:SHAPE`: every cell holds its own flat offset (`0, 1, 2, …` in memory order);
//! - `fill:V:SHAPE`: every cell holds `V`;
//! - `values:v1,v2,…:SHAPE`: the cells in memory order (batch, then output, then input axes;
//!   row-major), exactly as many as the shape has;
//! - anything else is the path of a `.npy` file (floats, integers or bools), whose dims become
//!   output axes.
//!
//! The three literal forms are float64, as a numpy array of Python floats is; a `.npy` file's
//! cells keep its dtype.
//!
//! SHAPE is a shape literal, `B|I->O` with comma-separated sizes, each optionally `size@basis`,
//! or `1*` (a unit that broadcasts); kinds not written are empty (`2|3->4`, `3,4`, `|5->`). An
//! input has at most 64 axes (numpy's limit) and [`MAX_CELLS`](crate::bound::MAX_CELLS) cells.

use std::path::Path;

use rcannl_ir::MAX_AXES;
use rcannl_shape::spec::{ShapeLiteral, parse_shape_literal};

use crate::bound::cell_count;
use crate::cells::Cells;
use crate::npy;
use crate::report::{CliError, ErrorKind};

/// One input: its shape as a canonical literal, and its cells in memory order.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub shape: ShapeLiteral,
    pub cells: Cells,
}

/// Reads the `position`-th (1-based) INPUT argument.
pub fn read(text: &str, position: usize) -> Result<Input, CliError> {
    let bad =
        |message: String| CliError::new(ErrorKind::Input, format!("input {position}: {message}"));
    if let Some(shape) = text.strip_prefix("range:") {
        let shape = literal(shape, position)?;
        let cells = cells(&shape, position)?;
        return Ok(Input {
            cells: Cells::float64((0..cells).map(|cell| cell as f64).collect()),
            shape,
        });
    }
    if let Some(rest) = text.strip_prefix("fill:") {
        let Some((value, shape)) = rest.split_once(':') else {
            return Err(bad(format!("{text:?}: expected fill:V:SHAPE")));
        };
        let value = number(value).map_err(bad)?;
        let shape = literal(shape, position)?;
        let cells = cells(&shape, position)?;
        return Ok(Input {
            cells: Cells::float64(vec![value; cells]),
            shape,
        });
    }
    if let Some(rest) = text.strip_prefix("values:") {
        let Some((values, shape)) = rest.split_once(':') else {
            return Err(bad(format!("{text:?}: expected values:v1,v2,…:SHAPE")));
        };
        let values: Vec<f64> = if values.trim().is_empty() {
            Vec::new()
        } else {
            values
                .split(',')
                .map(number)
                .collect::<Result<_, _>>()
                .map_err(bad)?
        };
        let shape = literal(shape, position)?;
        let cells = cells(&shape, position)?;
        if values.len() != cells {
            return Err(bad(format!(
                "{} values for shape {shape}, which has {cells} cells",
                values.len()
            )));
        }
        return Ok(Input {
            shape,
            cells: Cells::float64(values),
        });
    }
    let path = Path::new(text);
    if !text.ends_with(".npy") && !path.exists() {
        return Err(bad(format!(
            "{text:?} is neither range:SHAPE, fill:V:SHAPE, values:v1,v2,…:SHAPE nor a .npy file"
        )));
    }
    // The reader bounds the file's shape as `cells` does.
    let (dims, cells) = npy::read(path)?;
    let shape = ShapeLiteral {
        output: dims
            .into_iter()
            .map(rcannl_shape::spec::DimLiteral::new)
            .collect(),
        ..ShapeLiteral::default()
    };
    Ok(Input { shape, cells })
}

/// Parses a shape literal, reporting errors with the caret under `text`.
fn literal(text: &str, position: usize) -> Result<ShapeLiteral, CliError> {
    parse_shape_literal(text)
        .map_err(|err| CliError::new(ErrorKind::Parse, format!("input {position} shape: {err}")))
}

/// The number of cells of `shape`, if it is not too large: at most [`MAX_AXES`] axes (a `.npy`
/// file has no more either) and [`MAX_CELLS`](crate::bound::MAX_CELLS) cells.
fn cells(shape: &ShapeLiteral, position: usize) -> Result<usize, CliError> {
    let axes = shape.batch.len() + shape.input.len() + shape.output.len();
    if axes > MAX_AXES {
        // The shape itself is left out: it may be thousands of axes long.
        return Err(CliError::new(
            ErrorKind::Input,
            format!(
                "input {position}: its shape has {axes} axes, more than the {MAX_AXES} supported"
            ),
        ));
    }
    let dims = [&shape.batch, &shape.input, &shape.output]
        .into_iter()
        .flatten()
        .map(|dim| dim.size);
    cell_count(dims).map_err(|oversize| {
        CliError::new(
            ErrorKind::Input,
            format!("input {position}: shape {shape} {oversize}"),
        )
    })
}

fn number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let range = read("range:2|3->4", 1).unwrap();
        assert_eq!(range.shape.to_string(), "2|3->4");
        let floats = |values: Vec<f64>| Cells::float64(values);
        assert_eq!(range.cells, floats((0..24).map(f64::from).collect()));
        let fill = read("fill:-1.5:|2->", 1).unwrap();
        assert_eq!(fill.cells, floats(vec![-1.5, -1.5]));
        assert_eq!(fill.shape.input.len(), 1);
        let values = read("values:1, 2,3:3", 1).unwrap();
        assert_eq!(values.cells, floats(vec![1.0, 2.0, 3.0]));
        assert_eq!(read("range:", 1).unwrap().cells, floats(vec![0.0]));
    }

    #[test]
    fn errors() {
        let kind = |text: &str| read(text, 2).unwrap_err().kind;
        assert_eq!(kind("values:1,2:3"), ErrorKind::Input);
        assert_eq!(kind("values:1,x:2"), ErrorKind::Input);
        assert_eq!(kind("fill:2"), ErrorKind::Input);
        assert_eq!(kind("range:2|3-4"), ErrorKind::Parse);
        assert_eq!(kind("nothing"), ErrorKind::Input);
        assert_eq!(kind("no-such-file.npy"), ErrorKind::Io);
        assert_eq!(kind("range:100000,100000"), ErrorKind::Input);
        assert_eq!(kind("range:0,100000,100000"), ErrorKind::Input);
        let message = read("range:2|3-4", 2).unwrap_err().message;
        assert!(
            message.starts_with("input 2 shape: column 4: "),
            "{message}"
        );
        assert!(message.ends_with("\n  2|3-4\n     ^"), "{message}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any text after a form's prefix is read or refused without panicking, and what is read
        /// has as many values as its shape has cells.
        #[test]
        fn any_form_text_is_read_or_refused(
            prefix in proptest::sample::select(&["range:", "fill:", "values:"][..]),
            // Single digits between other characters: sizes stay small enough to make.
            rest in "([0-9][,:|>@ .e-]{1,2}){0,8}[0-9]?",
        ) {
            if let Ok(input) = read(&format!("{prefix}{rest}"), 1) {
                proptest::prop_assert_eq!(Some(input.cells.len()), input.shape.n_elements());
            }
        }
    }
}
