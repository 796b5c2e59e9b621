//! How shapes are written in messages for users: sizes as the shape notation writes them, with no
//! solver variables. An axis whose size is not known yet is `?`, a part of a row whose axes are
//! not known yet is `...`, and a row with no axes is `(no axes)` where it stands alone.
//!
//! The `Display` impls of terms and constraints (`$3`, `..$0..`, `⊑`) are the solver's own
//! notation, for debugging; nothing a user reads is printed with them.

use crate::term::{Dim, Row, Shape};

/// The size as a user reads it: `3`, `3@rgb`, `1*`, `?` while unknown, or a derived size such as
/// `2*?+3` whose parts are partly known.
pub fn dim(dim: &Dim) -> String {
    match dim {
        Dim::Var(_) => "?".to_owned(),
        Dim::Unit | Dim::Atom { .. } => dim.to_string(),
        Dim::Affine(affine) => {
            let mut text = format!("{}*{}", affine.stride, self::dim(&affine.over));
            if let Some(conv) = &affine.conv {
                let pad = conv.border.marker();
                text += &format!("{pad}+{}*{}", conv.dilation, self::dim(&conv.kernel));
            }
            if affine.offset > 0 {
                text += &format!("+{}", affine.offset);
            }
            text
        }
        Dim::Concat(components) => components
            .iter()
            .map(self::dim)
            .collect::<Vec<_>>()
            .join("^"),
    }
}

/// The row's axes, comma-separated, with `...` where axes are not known yet; empty for no axes.
pub fn row(row: &Row) -> String {
    let mut items: Vec<String> = row.leading.iter().map(dim).collect();
    if row.var.is_some() {
        items.push("...".to_owned());
    }
    items.extend(row.trailing.iter().map(dim));
    items.join(",")
}

/// [`row`], or `(no axes)` for a row with none: for a row quoted on its own.
pub fn row_alone(row: &Row) -> String {
    match self::row(row) {
        text if text.is_empty() => "(no axes)".to_owned(),
        text => text,
    }
}

/// Rows quoted together (the rows of one element count): a whole shape's three rows as
/// [`shape`] writes them, else the rows that have axes, each as [`row`].
pub fn rows(rows: &[Row]) -> String {
    if let [batch, input, output] = rows {
        return shape(&Shape {
            batch: batch.clone(),
            input: input.clone(),
            output: output.clone(),
        });
    }
    let written: Vec<String> = rows.iter().map(row).filter(|r| !r.is_empty()).collect();
    match written.as_slice() {
        [] => "(no axes)".to_owned(),
        _ => written.join(" and "),
    }
}

/// `batch|input->output`, as the shape notation writes it.
pub fn shape(shape: &Shape) -> String {
    format!(
        "{}|{}->{}",
        row(&shape.batch),
        row(&shape.input),
        row(&shape.output)
    )
}

/// An ordinal for a 0-based position: `first`, `second`, …, then `5th`.
pub fn ordinal(index: usize) -> String {
    const NAMES: [&str; 4] = ["first", "second", "third", "fourth"];
    match NAMES.get(index) {
        Some(name) => (*name).to_owned(),
        None => format!("{}th", index + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::{AffineDim, Border, ConvDim, DimVar, RowVarId};

    #[test]
    fn unknown_parts_are_question_marks_and_ellipses() {
        let open = Row {
            leading: vec![Dim::size(2)],
            var: Some(RowVarId(4)),
            trailing: vec![Dim::Var(DimVar(7))],
        };
        assert_eq!(row(&open), "2,...,?");
        assert_eq!(row_alone(&Row::default()), "(no axes)");
        let shape = Shape {
            batch: Row::var(RowVarId(0)),
            input: Row::default(),
            output: Row::closed(vec![Dim::size(3), Dim::Unit]),
        };
        assert_eq!(self::shape(&shape), "...|->3,1*");
        let window = Dim::Affine(Box::new(AffineDim {
            stride: 2,
            over: Dim::Var(DimVar(1)),
            conv: Some(ConvDim {
                dilation: 1,
                kernel: Dim::size(3),
                border: Border::Valid,
            }),
            offset: 0,
        }));
        assert_eq!(dim(&window), "2*?<+1*3");
        assert_eq!(ordinal(1), "second");
        assert_eq!(ordinal(5), "6th");
    }
}
