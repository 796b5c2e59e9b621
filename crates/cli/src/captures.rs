//! The labels `--capture` and `--set` name: captured on the operation that makes the result, or,
//! for an einsum run along a contraction path, read off the inputs.
//!
//! Along a path the result is made by the path's last step, whose spec no longer has the labels
//! earlier steps summed away; those labels' sizes are the inputs' axes where the user's spec
//! places them (every label of such a spec is on some operand, and the path runs only for specs
//! of labels and row variables, whose positions in a row are fixed from either end).

use rcannl_shape::spec::{AxisSpec, EinsumSpec, Kind, ShapeLiteral};
use rcannl_tensor::{Capture, Graph, Tensor};

use crate::report::{CliError, ErrorKind};

/// A label's size as the command learns it.
#[derive(Debug)]
pub enum Captured {
    /// Captured on the result's operation: inference gives the size.
    Graph(Capture),
    /// Summed away before a path's last step: the size the inputs give.
    Inputs(usize),
}

impl Captured {
    /// The size, if inference (or the inputs) determined it.
    pub fn size(&self, graph: &Graph) -> Option<usize> {
        match self {
            Captured::Graph(capture) => graph.capture_value(capture),
            Captured::Inputs(size) => Some(*size),
        }
    }
}

/// What the command knows to find a label: the result, and for an einsum along a contraction
/// path, the user's spec and the inputs' shapes.
pub struct Finder<'a> {
    pub result: &'a Tensor,
    pub along_path: Option<(&'a EinsumSpec, &'a [ShapeLiteral])>,
}

impl Finder<'_> {
    /// The label or row variable `name`.
    pub fn find(&self, name: &str) -> Result<Captured, CliError> {
        let err = match self.result.capture(name) {
            Ok(capture) => return Ok(Captured::Graph(capture)),
            Err(err) => CliError::new(ErrorKind::Capture, err.message),
        };
        let Some((spec, shapes)) = self.along_path else {
            return Err(err);
        };
        // Names the spec lacks are refused as the spec would refuse them.
        spec.capture(name)
            .map_err(|spec_err| CliError::new(ErrorKind::Capture, spec_err.to_string()))?;
        size_in_inputs(spec, shapes, name)
            .map(Captured::Inputs)
            .ok_or(err)
    }

    /// Applies `--set NAME=SIZE`: a constraint on a captured label, or a check of a label the
    /// inputs size.
    pub fn set(&self, graph: &Graph, name: &str, size: usize) -> Result<(), CliError> {
        match self.find(name)? {
            Captured::Graph(capture) => graph
                .set_dim(&capture, size)
                .map_err(|err| CliError::new(ErrorKind::Shape, err.message)),
            Captured::Inputs(known) if known == size => Ok(()),
            Captured::Inputs(known) => Err(CliError::new(
                ErrorKind::Shape,
                format!("--set {name}={size}: the inputs make '{name}' {known}"),
            )),
        }
    }
}

/// The size of label or row variable `name` in the operands of `spec` (of these shapes): the
/// largest over the operands that have it (a size 1 broadcasts).
fn size_in_inputs(spec: &EinsumSpec, shapes: &[ShapeLiteral], name: &str) -> Option<usize> {
    let mut found = None;
    for (slot, shape) in spec.rhs.iter().zip(shapes) {
        for kind in Kind::ALL {
            let row = slot.row(kind);
            let dims: Vec<usize> = shape.row(kind).iter().map(|dim| dim.size).collect();
            let before = row.leading.len();
            let after = row.trailing.len();
            if before + after > dims.len() {
                continue;
            }
            let positions = (0..before).chain(dims.len() - after..dims.len());
            for (position, axis) in positions.zip(row.leading.iter().chain(&row.trailing)) {
                if matches!(axis, AxisSpec::Label { name: label } if label == name) {
                    found = found.max(Some(dims[position]));
                }
            }
            if row
                .row_var
                .as_ref()
                .is_some_and(|var| var.name_in(kind) == name)
            {
                found = found.max(Some(dims[before..dims.len() - after].iter().product()));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use rcannl_shape::spec::{parse_einsum, parse_shape_literal};

    use super::*;

    #[test]
    fn labels_and_row_variables_are_sized_by_the_inputs() {
        let spec = parse_einsum("..v.., i, j; j | k -> l => i").unwrap();
        let shapes = [
            parse_shape_literal("2, 3, 4, 5").unwrap(),
            parse_shape_literal("5 | 6 -> 7").unwrap(),
        ];
        let size = |name| size_in_inputs(&spec, &shapes, name);
        assert_eq!(size("i"), Some(4));
        assert_eq!(size("j"), Some(5));
        assert_eq!(size("k"), Some(6));
        assert_eq!(size("l"), Some(7));
        assert_eq!(size("v"), Some(6));
        assert_eq!(size("q"), None);
    }
}
