//! Errors in spec and shape-literal text, rendered with a caret under the offending column.

use std::fmt;

use serde::Serialize;

/// What went wrong, coarsely; the message says exactly what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpecErrorKind {
    /// A character the current lexical mode does not allow.
    Lex,
    /// Tokens in an order the grammar does not allow.
    Syntax,
    /// A name used inconsistently (a dimension label and a row variable at once).
    Name,
    /// A stride or dilation written as an identifier with no value bound to it.
    UnboundCoefficient,
    /// A capture names nothing in the spec.
    Capture,
}

/// An error in a spec or a shape literal.
///
/// `column` is the 1-based character column of the offending text when the error has one (errors
/// found on the parsed tree, such as unbound coefficients, have none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The whole text of the spec or literal.
    pub text: String,
    /// The 1-based character column of the offending text, or `None` when the error concerns the
    /// spec as a whole.
    pub column: Option<usize>,
    /// The number of characters the caret line underlines (at least 1 when there is a column, 0
    /// otherwise).
    pub width: usize,
    /// What went wrong, coarsely.
    pub kind: SpecErrorKind,
    /// What went wrong, exactly.
    pub message: String,
}

impl SpecError {
    pub(crate) fn at(
        text: &str,
        column: usize,
        width: usize,
        kind: SpecErrorKind,
        message: impl Into<String>,
    ) -> Self {
        SpecError {
            text: text.to_owned(),
            column: Some(column),
            width: width.max(1),
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn whole(text: &str, kind: SpecErrorKind, message: impl Into<String>) -> Self {
        SpecError {
            text: text.to_owned(),
            column: None,
            width: 0,
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    /// One line `column N: message`, then the text, then a caret line under the offending span.
    /// Control characters in the text are shown as spaces so that the caret stays aligned.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(column) = self.column else {
            return write!(f, "{} (in spec `{}`)", self.message, self.text);
        };
        writeln!(f, "column {column}: {}", self.message)?;
        let shown: String = self
            .text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        writeln!(f, "  {shown}")?;
        write!(f, "  {}{}", " ".repeat(column - 1), "^".repeat(self.width))
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_sits_under_the_column() {
        let err = SpecError::at("ij;jk=>i?k", 9, 1, SpecErrorKind::Lex, "unexpected '?'");
        assert_eq!(
            err.to_string(),
            "column 9: unexpected '?'\n  ij;jk=>i?k\n          ^"
        );
    }

    #[test]
    fn control_characters_do_not_shift_the_caret() {
        let err = SpecError::at("a\tb?", 4, 1, SpecErrorKind::Lex, "x");
        assert_eq!(err.to_string(), "column 4: x\n  a b?\n     ^");
    }
}
