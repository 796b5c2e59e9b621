//! Concrete shape literals: `B|I->O` with comma-separated sizes, each optionally `size@basis`,
//! or the claim-free unit `1*`.
//!
//! Tools use these to describe real arrays: `"2|3->4"`, `"3,4"` (output axes only), `"|5->"`,
//! `"2,3|->4@rgb"`, `"1*,3"`. A kind that is not written has no axes. Unlike a shape spec, every
//! axis here is a known size, and a basis names the axis's unit (`@default`, the unit of
//! unannotated axes, is the same as writing no basis). An axis of size 1 with a basis (`1`,
//! `1@rgb`) is a claim: it broadcasts to nothing but itself; `1*` claims nothing and broadcasts
//! to any size, as numpy's axes of size 1 do.

use std::fmt;

use serde::Serialize;

use super::ast::Kind;
use super::error::{SpecError, SpecErrorKind};

/// What one axis of a literal says about its unit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum LiteralBasis {
    /// No basis written (or `@default`).
    Default,
    /// `@name`.
    Named(String),
    /// `1*`: the claim-free unit, which broadcasts to any size. Its axis has size 1 (the parser
    /// makes no other).
    ClaimFree,
}

/// One axis of a concrete shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DimLiteral {
    /// The number of positions along the axis (1 for the claim-free unit).
    pub size: usize,
    /// The axis's unit.
    pub basis: LiteralBasis,
}

impl DimLiteral {
    /// An axis of `size` in the default basis.
    pub fn new(size: usize) -> Self {
        DimLiteral {
            size,
            basis: LiteralBasis::Default,
        }
    }

    /// An axis of `size` in the basis `name` (`"default"` is the default basis).
    pub fn named(size: usize, name: &str) -> Self {
        let basis = match name {
            "default" => LiteralBasis::Default,
            name => LiteralBasis::Named(name.to_owned()),
        };
        DimLiteral { size, basis }
    }

    /// The claim-free unit `1*`.
    pub fn claim_free() -> Self {
        DimLiteral {
            size: 1,
            basis: LiteralBasis::ClaimFree,
        }
    }
}

/// A concrete shape: sizes (and bases) for the batch, input and output axes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ShapeLiteral {
    /// The batch axes, in the order written.
    pub batch: Vec<DimLiteral>,
    /// The input axes, in the order written.
    pub input: Vec<DimLiteral>,
    /// The output axes, in the order written.
    pub output: Vec<DimLiteral>,
}

impl ShapeLiteral {
    /// The axes of the row of `kind`.
    pub fn row(&self, kind: Kind) -> &[DimLiteral] {
        match kind {
            Kind::Batch => &self.batch,
            Kind::Input => &self.input,
            Kind::Output => &self.output,
        }
    }

    /// The number of cells: the product of all sizes (1 for a scalar), or `None` on overflow.
    pub fn n_elements(&self) -> Option<usize> {
        Kind::ALL
            .iter()
            .flat_map(|&kind| self.row(kind))
            .try_fold(1usize, |acc, dim| acc.checked_mul(dim.size))
    }
}

impl fmt::Display for DimLiteral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.size)?;
        match &self.basis {
            LiteralBasis::Default => Ok(()),
            LiteralBasis::Named(basis) => write!(f, "@{basis}"),
            LiteralBasis::ClaimFree => f.write_str("*"),
        }
    }
}

impl fmt::Display for ShapeLiteral {
    /// The shortest form that parses back to the same shape: `batch|input->output`, leaving out
    /// `batch|` and `input->` when they are empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |dims: &[DimLiteral]| {
            dims.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        if !self.batch.is_empty() {
            write!(f, "{}|", row(&self.batch))?;
        }
        if !self.input.is_empty() {
            write!(f, "{}->", row(&self.input))?;
        }
        f.write_str(&row(&self.output))
    }
}

/// Parses a concrete shape literal.
pub fn parse_shape_literal(text: &str) -> Result<ShapeLiteral, SpecError> {
    let mut cursor = Cursor {
        text,
        chars: text.chars().collect(),
        pos: 0,
    };
    let first = cursor.row()?;
    let mut shape = ShapeLiteral::default();
    let mut has_pipe = false;
    let mut second = None;
    if cursor.eat("|") {
        has_pipe = true;
        shape.batch = first.clone();
        second = Some(cursor.row()?);
    }
    let before_arrow = second.unwrap_or(first);
    if cursor.eat("->") {
        shape.input = before_arrow;
        shape.output = cursor.row()?;
    } else {
        shape.output = before_arrow;
    }
    cursor.skip_space();
    if cursor.pos < cursor.chars.len() {
        let message = match cursor.chars[cursor.pos] {
            '|' if has_pipe => "a shape has at most one '|', before '->'".to_owned(),
            '|' => "'|' must come before '->'".to_owned(),
            '-' if cursor.chars.get(cursor.pos + 1) == Some(&'>') => {
                "a shape has at most one '->'".to_owned()
            }
            '-' => "'-' only appears in '->'".to_owned(),
            c => format!("unexpected character {c:?} in a shape"),
        };
        return Err(cursor.error(message));
    }
    Ok(shape)
}

struct Cursor<'t> {
    text: &'t str,
    chars: Vec<char>,
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r' | '\n')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        let matches = token
            .chars()
            .enumerate()
            .all(|(i, c)| self.chars.get(self.pos + i) == Some(&c));
        if matches {
            self.pos += token.chars().count();
        }
        matches
    }

    fn error(&self, message: impl Into<String>) -> SpecError {
        SpecError::at(self.text, self.pos + 1, 1, SpecErrorKind::Syntax, message)
    }

    /// A possibly empty comma-separated list of dims; a trailing comma is allowed.
    fn row(&mut self) -> Result<Vec<DimLiteral>, SpecError> {
        let mut dims = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some(c) if c.is_ascii_digit() => dims.push(self.dim()?),
                None | Some('|' | '-') if dims.is_empty() => return Ok(dims),
                _ if dims.is_empty() => return Err(self.error("expected a size")),
                _ => return Err(self.error("expected a size after ','")),
            }
            self.skip_space();
            if !self.eat(",") {
                return Ok(dims);
            }
            self.skip_space();
            if matches!(self.peek(), None | Some('|' | '-')) {
                return Ok(dims);
            }
        }
    }

    fn dim(&mut self) -> Result<DimLiteral, SpecError> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        let size = digits.parse::<usize>().map_err(|_| {
            SpecError::at(
                self.text,
                start + 1,
                self.pos - start,
                SpecErrorKind::Syntax,
                format!("size {digits} is too large"),
            )
        })?;
        self.skip_space();
        if self.peek() == Some('*') {
            if size != 1 {
                return Err(SpecError::at(
                    self.text,
                    start + 1,
                    self.pos - start,
                    SpecErrorKind::Syntax,
                    format!("only 1 can be the claim-free unit `1*`, not {digits}"),
                ));
            }
            self.pos += 1;
            self.skip_space();
            if self.peek() == Some('@') {
                return Err(self.error("the claim-free unit `1*` has no basis"));
            }
            return Ok(DimLiteral::claim_free());
        }
        if !self.eat("@") {
            return Ok(DimLiteral::new(size));
        }
        self.skip_space();
        let basis_start = self.pos;
        if !self
            .peek()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        {
            return Err(self.error("expected a basis name after '@'"));
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        let basis: String = self.chars[basis_start..self.pos].iter().collect();
        Ok(DimLiteral::named(size, &basis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(sizes: &[usize]) -> Vec<DimLiteral> {
        sizes.iter().map(|&size| DimLiteral::new(size)).collect()
    }

    #[test]
    fn every_omission() {
        let shape = parse_shape_literal("2|3->4").unwrap();
        assert_eq!(
            shape,
            ShapeLiteral {
                batch: dims(&[2]),
                input: dims(&[3]),
                output: dims(&[4])
            }
        );
        assert_eq!(
            parse_shape_literal("3,4").unwrap(),
            ShapeLiteral {
                output: dims(&[3, 4]),
                ..Default::default()
            }
        );
        assert_eq!(
            parse_shape_literal("|5->").unwrap(),
            ShapeLiteral {
                input: dims(&[5]),
                ..Default::default()
            }
        );
        assert_eq!(
            parse_shape_literal("2 | 7").unwrap(),
            ShapeLiteral {
                batch: dims(&[2]),
                output: dims(&[7]),
                ..Default::default()
            }
        );
        assert_eq!(parse_shape_literal("").unwrap(), ShapeLiteral::default());
        assert_eq!(parse_shape_literal("->").unwrap(), ShapeLiteral::default());
    }

    #[test]
    fn bases() {
        let shape = parse_shape_literal("2,3|->4@rgb").unwrap();
        assert_eq!(shape.batch, dims(&[2, 3]));
        assert!(shape.input.is_empty());
        assert_eq!(shape.output, [DimLiteral::named(4, "rgb")]);
        assert_eq!(parse_shape_literal("4@default").unwrap().output, dims(&[4]));
        assert_eq!(shape.to_string(), "2,3|4@rgb");
        assert_eq!(shape.n_elements(), Some(24));
    }

    #[test]
    fn the_claim_free_unit() {
        let shape = parse_shape_literal("1*, 3 | 1 * -> 1*,2").unwrap();
        assert_eq!(shape.batch, [DimLiteral::claim_free(), DimLiteral::new(3)]);
        assert_eq!(shape.input, [DimLiteral::claim_free()]);
        assert_eq!(shape.output, [DimLiteral::claim_free(), DimLiteral::new(2)]);
        assert_eq!(shape.to_string(), "1*,3|1*->1*,2");
        assert_eq!(parse_shape_literal(&shape.to_string()), Ok(shape.clone()));
        assert_eq!(shape.n_elements(), Some(6));
        // A claim-free unit is not an explicit 1, which claims the default basis.
        assert_ne!(
            parse_shape_literal("1").unwrap(),
            parse_shape_literal("1*").unwrap()
        );
    }

    #[test]
    fn errors_point_at_the_column() {
        for (text, column) in [
            ("2|3|4", 4),
            ("3->4->5", 5),
            ("3,,4", 3),
            ("3,x", 3),
            ("4@", 3),
            ("4@9", 3),
            ("a", 1),
            ("3 4", 3),
            ("5->2|3", 5),
            ("3-4", 2),
            ("2*", 1),
            ("0*", 1),
            ("3,12*", 3),
            ("1*@rgb", 3),
            ("1**", 3),
            ("*", 1),
        ] {
            let err = parse_shape_literal(text).unwrap_err();
            assert_eq!(err.column, Some(column), "{text}: {err}");
        }
        let err = parse_shape_literal("99999999999999999999999").unwrap_err();
        assert!(err.message.contains("too large"), "{err}");
    }
}
