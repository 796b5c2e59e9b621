//! How large the result will be, known before any buffer is made: making buffers (which the
//! tensor library does for every tensor at once) is where a result too large would fail.
//!
//! Before closing, inference may leave some of the result's axes open: a fixed index of the
//! result's slot is an axis of at least index + 1 positions, a label no input sizes at least 1.
//! The shape inference reports is read with those axes at their least, which is enough to refuse
//! what can only be too large.

use rcannl_shape::spec::{AxisSpec, DimLiteral, EinsumSpec, Kind, ShapeLiteral, SlotSpec};
use rcannl_tensor::Tensor;

use crate::bound::{self, Oversize};
use crate::report::{CliError, ErrorKind};

/// Refuses a result whose shape, as far as inference knows it, is too large to make
/// ([`bound::cell_count`]).
pub fn check(result: &Tensor, spec: Option<&EinsumSpec>) -> Result<(), CliError> {
    let Some((shape, exact)) = least_shape(&result.shape(), spec.map(|spec| &spec.lhs)) else {
        return Ok(());
    };
    let dims = [&shape.batch, &shape.input, &shape.output]
        .into_iter()
        .flatten()
        .map(|dim| dim.size);
    let error = |message: String| Err(CliError::new(ErrorKind::Shape, message));
    let limit = bound::MAX_CELLS;
    match (bound::cell_count(dims), exact) {
        (Ok(_), _) => Ok(()),
        (Err(Oversize::Cells), true) => error(format!(
            "the result {shape} would have more than {limit} cells"
        )),
        (Err(Oversize::Cells), false) => error(format!(
            "the result would be at least {shape}: more than {limit} cells"
        )),
        (Err(Oversize::Span), _) => error(format!("the result {shape} {}", Oversize::Span)),
    }
}

/// The shape inference reports (`B|I->O`, each row's dims sizes, open variables `$n` or rows
/// `..$n..`) with every open axis at its least: 1, or index + 1 where `slot` has a fixed index.
/// Whether every axis was known; `None` for text of another form.
fn least_shape(text: &str, slot: Option<&SlotSpec>) -> Option<(ShapeLiteral, bool)> {
    let (batch, rest) = text.split_once('|')?;
    let (input, output) = rest.split_once("->")?;
    let mut exact = true;
    let mut row = |kind: Kind, text: &str| {
        let items: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .collect();
        // An open row variable stands for axes not known yet: positions are not either.
        let open = items.iter().any(|item| item.starts_with(".."));
        exact &= !open;
        let mut sizes: Vec<usize> = (items.iter())
            .filter(|item| !item.starts_with(".."))
            .map(|item| {
                let size = item.split('@').next().and_then(|n| n.parse().ok());
                exact &= size.is_some();
                size.unwrap_or(1)
            })
            .collect();
        if let (Some(slot), false) = (slot, open) {
            raise_fixed(&mut sizes, slot, kind);
        }
        sizes.into_iter().map(DimLiteral::new).collect()
    };
    let shape = ShapeLiteral {
        batch: row(Kind::Batch, batch),
        input: row(Kind::Input, input),
        output: row(Kind::Output, output),
    };
    Some((shape, exact))
}

/// Raises each axis of `sizes` (a closed row of kind `kind`) that `slot` fixes an index of to
/// that index + 1; the slot's flanks align with the row's ends.
fn raise_fixed(sizes: &mut [usize], slot: &SlotSpec, kind: Kind) {
    let row = slot.row(kind);
    let n = sizes.len();
    if row.leading.len() + row.trailing.len() > n {
        return;
    }
    let positions = (0..row.leading.len()).chain(n - row.trailing.len()..n);
    for (position, axis) in positions.zip(row.leading.iter().chain(&row.trailing)) {
        if let AxisSpec::Fixed { index } = axis {
            sizes[position] = sizes[position].max(index.saturating_add(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use rcannl_shape::spec::parse_einsum;

    use super::*;

    #[test]
    fn open_axes_count_at_their_least() {
        let spec = parse_einsum("i; j => i, j, 7").unwrap();
        let (shape, exact) = least_shape("|->100,100,$2", Some(&spec.lhs)).unwrap();
        assert_eq!((shape.to_string(), exact), ("100,100,8".to_owned(), false));
        let (shape, exact) = least_shape("2|->3@rgb,4", None).unwrap();
        assert_eq!((shape.to_string(), exact), ("2|3,4".to_owned(), true));
        let (shape, exact) = least_shape("..$0..|..$1..->5,..$2..", Some(&spec.lhs)).unwrap();
        assert_eq!((shape.to_string(), exact), ("5".to_owned(), false));
        assert!(least_shape("nonsense", None).is_none());
    }
}
