//! Text tables drawn with box-drawing characters, the tables of a layout print: a header column
//! (an axis's positions), a header row (another axis's positions) under a corner naming both,
//! and the cells, every text right-aligned, the cells all of one width (as numpy aligns
//! numbers) so that columns line up across rows, and across the tables of one print.

/// A table: the corner, the column headers, and each row's header with its cells (as many as
/// there are column headers).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub corner: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
}

/// The number of characters `text` shows (box-drawing characters and `…` are one each).
fn width(text: &str) -> usize {
    text.chars().count()
}

/// `text` right-aligned in `width` characters.
fn right(text: &str, width: usize) -> String {
    format!("{text:>width$}")
}

impl Table {
    /// The width of the widest cell or column header.
    pub fn cell_width(&self) -> usize {
        self.rows
            .iter()
            .flat_map(|(_, cells)| cells.iter())
            .chain(&self.columns)
            .map(|text| width(text))
            .max()
            .unwrap_or(0)
    }

    /// The table drawn with cells `cell_width` wide (at least [`Table::cell_width`]), one line
    /// per row, each line ending in a newline.
    pub fn draw(&self, cell_width: usize) -> String {
        let header_width = self
            .rows
            .iter()
            .map(|(header, _)| width(header))
            .chain([width(&self.corner)])
            .max()
            .unwrap_or(0);
        let line = |header: &str, cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| right(c, cell_width)).collect();
            format!(
                "│ {} │ {} │\n",
                right(header, header_width),
                cells.join(" ")
            )
        };
        let body_width = self.columns.len() * (cell_width + 1) + 1;
        let rule = |left: char, middle: char, end: char| {
            format!(
                "{left}{}{middle}{}{end}\n",
                "─".repeat(header_width + 2),
                "─".repeat(body_width)
            )
        };
        let mut out = rule('┌', '┬', '┐');
        out += &line(&self.corner, &self.columns);
        out += &rule('├', '┼', '┤');
        for (header, cells) in &self.rows {
            out += &line(header, cells);
        }
        out += &rule('└', '┴', '┘');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cells_share_one_width_and_headers_their_own() {
        let table = Table {
            corner: "o0 \\ i0".to_owned(),
            columns: texts(&["0", "1"]),
            rows: vec![
                ("0".to_owned(), texts(&["1", "-2.5"])),
                ("1".to_owned(), texts(&["…", "3"])),
            ],
        };
        assert_eq!(table.cell_width(), 4);
        assert_eq!(
            table.draw(4),
            "┌─────────┬───────────┐\n\
             │ o0 \\ i0 │    0    1 │\n\
             ├─────────┼───────────┤\n\
             │       0 │    1 -2.5 │\n\
             │       1 │    …    3 │\n\
             └─────────┴───────────┘\n"
        );
    }
}
