//! The bound on how many cells an input or a result may have (inputs like `range:` are made on
//! the host, and every result is), and the count that checks a shape against it without
//! overflowing.

/// The most cells an input (or a result) may have: `range:` and friends make them on the host.
pub const MAX_CELLS: usize = 1 << 26;

/// Why a shape is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// It has more than [`MAX_CELLS`] cells.
    Cells,
    /// It is empty, but its other axes span more than [`MAX_CELLS`] cells: no cell is made, but
    /// strides and offsets over such axes would not fit the index arithmetic downstream.
    Span,
}

impl std::fmt::Display for Oversize {
    /// The end of a sentence about the shape: `shape 0,9 {self}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Oversize::Cells => write!(f, "has more than {MAX_CELLS} cells"),
            Oversize::Span => write!(
                f,
                "is empty, but its other axes span more than {MAX_CELLS} cells"
            ),
        }
    }
}

/// The number of cells of a shape of `dims`, unless the product of its nonzero dims exceeds
/// [`MAX_CELLS`] (found without overflowing, whatever the dims): then why it is refused.
pub fn cell_count(dims: impl IntoIterator<Item = usize>) -> Result<usize, Oversize> {
    let (mut span, mut empty, mut over) = (1usize, false, false);
    for dim in dims {
        if dim == 0 {
            empty = true;
            continue;
        }
        match span.checked_mul(dim) {
            Some(product) if product <= MAX_CELLS => span = product,
            _ => over = true,
        }
    }
    match (over, empty) {
        (false, false) => Ok(span),
        (false, true) => Ok(0),
        (true, false) => Err(Oversize::Cells),
        (true, true) => Err(Oversize::Span),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded_without_overflow() {
        assert_eq!(cell_count([8192, 8192]), Ok(MAX_CELLS));
        assert_eq!(cell_count([8192, 8193]), Err(Oversize::Cells));
        assert_eq!(cell_count([usize::MAX, usize::MAX, 0]), Err(Oversize::Span));
        assert_eq!(cell_count([0, MAX_CELLS, 1]), Ok(0));
        assert_eq!(cell_count([]), Ok(1));
    }
}
