//! Recursive-descent parser for einsum specs and shape specs.
//!
//! ```text
//! einsum  ::= slot { ";" slot } "=>" slot
//! slot    ::= row | row "->" row | row "|" row | row "|" row "->" row
//! row     ::= items separated by "," (optional around a row variable, implicit in single-char
//!             mode); at most one row variable; a trailing "," is allowed
//! rowvar  ::= "..." | ".." IDENT [","] ".."
//! axis    ::= INT | IDENT | "_" | concat | affine
//! concat  ::= comp "^" comp { "^" comp }          comp ::= IDENT | INT
//! affine  ::= coef "*" IDENT [ "+" INT ]
//!           | [ coef "*" ] IDENT [ "=" | "<" ] "+" [ INT "+" ] [ coef "*" ] IDENT
//! coef    ::= INT | IDENT
//! ```
//!
//! After parsing, every name is checked to be either a dimension label or a row variable, never both
//! (`...` counts as the row variable named after its kind).

use std::collections::HashMap;

use super::ast::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, ConvSpec, EinsumSpec, ExplicitPadding,
    Kind, Padding, RowSpec, RowVar, SlotSpec,
};
use super::error::{SpecError, SpecErrorKind};
use super::lexer::{Mode, Spanned, Tok, lex};

/// Parses an einsum spec `rhs1; …; rhsN => lhs`.
pub fn parse_einsum(text: &str) -> Result<EinsumSpec, SpecError> {
    let mut parser = Parser::new(text)?;
    let mut rhs = vec![parser.slot()?];
    while parser.eat(&Tok::Semi) {
        rhs.push(parser.slot()?);
    }
    if !parser.eat(&Tok::FatArrow) {
        let found = parser.peek().clone();
        let message = if found == Tok::Eof {
            "an einsum spec needs '=>' followed by the result slot".to_owned()
        } else {
            format!("expected ';' or '=>', found {}", found.describe())
        };
        return Err(parser.error_here(SpecErrorKind::Syntax, message));
    }
    let lhs = parser.slot()?;
    parser.expect_end("after the result slot")?;
    parser.check_names()?;
    Ok(EinsumSpec { rhs, lhs })
}

/// Parses a shape spec: a single slot such as `"b | i -> o"` or `"2*o<+3*k, c"`.
pub fn parse_shape_spec(text: &str) -> Result<SlotSpec, SpecError> {
    let mut parser = Parser::new(text)?;
    let slot = parser.slot()?;
    if matches!(parser.peek(), Tok::Semi | Tok::FatArrow) {
        return Err(parser.error_here(
            SpecErrorKind::Syntax,
            "a shape spec is a single slot; ';' and '=>' belong to einsum specs",
        ));
    }
    parser.expect_end("after the slot")?;
    parser.check_names()?;
    Ok(slot)
}

/// Where a name was seen, and as what.
#[derive(Debug, Clone, Copy)]
struct NameUse {
    column: usize,
    width: usize,
    as_row_var: bool,
    /// Set for `...`, whose name is implied by the row's kind.
    ellipsis: Option<Kind>,
}

struct Parser<'t> {
    text: &'t str,
    mode: Mode,
    tokens: Vec<Spanned>,
    pos: usize,
    names: HashMap<String, NameUse>,
    clash: Option<SpecError>,
}

impl<'t> Parser<'t> {
    fn new(text: &'t str) -> Result<Self, SpecError> {
        let mode = Mode::of(text);
        Ok(Parser {
            text,
            mode,
            tokens: lex(text, mode)?,
            pos: 0,
            names: HashMap::new(),
            clash: None,
        })
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + ahead).min(last)].tok
    }

    fn current(&self) -> &Spanned {
        &self.tokens[self.pos]
    }

    fn bump(&mut self) -> Spanned {
        let token = self.tokens[self.pos].clone();
        if token.tok != Tok::Eof {
            self.pos += 1;
        }
        token
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn error_here(&self, kind: SpecErrorKind, message: impl Into<String>) -> SpecError {
        let token = self.current();
        SpecError::at(self.text, token.column, token.width, kind, message)
    }

    fn unexpected(&self, expected: &str) -> SpecError {
        let found = self.peek().describe();
        let hint = match self.peek() {
            Tok::Amp => " ('&' is reserved)",
            _ => "",
        };
        self.error_here(
            SpecErrorKind::Syntax,
            format!("expected {expected}, found {found}{hint}"),
        )
    }

    fn expect_end(&self, context: &str) -> Result<(), SpecError> {
        match self.peek() {
            Tok::Eof => Ok(()),
            Tok::FatArrow => Err(self.error_here(
                SpecErrorKind::Syntax,
                format!("unexpected '=>' {context}: a spec has exactly one '=>'"),
            )),
            _ => Err(self.unexpected(&format!("the end of the spec {context}"))),
        }
    }

    fn slot(&mut self) -> Result<SlotSpec, SpecError> {
        // A row's kind depends on the separators after it, so find them before parsing the rows:
        // `...` is named after the kind.
        let (has_pipe, has_arrow) = self.separators_of_slot();
        let mut slot = SlotSpec::default();
        if has_pipe {
            slot.batch = self.row(Kind::Batch)?;
            self.bump();
        }
        if has_arrow {
            slot.input = self.row(Kind::Input)?;
            if *self.peek() != Tok::Arrow {
                return Err(self.error_here(
                    SpecErrorKind::Syntax,
                    "a slot has at most one '|', and it comes before '->'",
                ));
            }
            self.bump();
        }
        slot.output = self.row(Kind::Output)?;
        match self.peek() {
            Tok::Pipe => Err(self.error_here(
                SpecErrorKind::Syntax,
                "a slot has at most one '|', and it comes before '->'",
            )),
            Tok::Arrow => {
                Err(self.error_here(SpecErrorKind::Syntax, "a slot has at most one '->'"))
            }
            _ => Ok(slot),
        }
    }

    /// Whether the slot starting at the current token has a `|` and a `->` before its end.
    fn separators_of_slot(&self) -> (bool, bool) {
        let rest = self.tokens[self.pos..]
            .iter()
            .take_while(|t| !matches!(t.tok, Tok::Semi | Tok::FatArrow | Tok::Eof));
        let (mut has_pipe, mut has_arrow) = (false, false);
        for token in rest {
            match token.tok {
                Tok::Pipe if !has_pipe && !has_arrow => has_pipe = true,
                Tok::Arrow if !has_arrow => has_arrow = true,
                _ => {}
            }
        }
        (has_pipe, has_arrow)
    }

    /// Parses one row of the given kind, up to the next separator.
    fn row(&mut self, kind: Kind) -> Result<RowSpec, SpecError> {
        #[derive(PartialEq)]
        enum Last {
            Start,
            Axis,
            Comma,
            RowVar,
        }
        let mut before = Vec::new();
        let mut after = Vec::new();
        let mut row_var: Option<(RowVar, usize)> = None;
        let mut last = Last::Start;
        loop {
            match self.peek() {
                Tok::Pipe | Tok::Arrow | Tok::FatArrow | Tok::Semi | Tok::Eof => break,
                Tok::Comma => {
                    let next = self.peek_at(1);
                    let allowed = match last {
                        Last::Axis | Last::RowVar => true,
                        // A row may be just "," and may start ", ...".
                        Last::Start => matches!(
                            next,
                            Tok::Ellipsis
                                | Tok::DotDot
                                | Tok::Pipe
                                | Tok::Arrow
                                | Tok::FatArrow
                                | Tok::Semi
                                | Tok::Eof
                        ),
                        Last::Comma => false,
                    };
                    if !allowed {
                        return Err(self.unexpected(match last {
                            Last::Comma => "an axis after ','",
                            _ => "an axis before ','",
                        }));
                    }
                    self.bump();
                    last = Last::Comma;
                }
                Tok::Ellipsis | Tok::DotDot => {
                    let column = self.current().column;
                    let var = self.row_var(kind)?;
                    if let Some((_, first)) = &row_var {
                        return Err(SpecError::at(
                            self.text,
                            column,
                            self.tokens[self.pos - 1].column + self.tokens[self.pos - 1].width
                                - column,
                            SpecErrorKind::Syntax,
                            format!(
                                "a row has at most one row variable (the first is at column {first})"
                            ),
                        ));
                    }
                    row_var = Some((var, column));
                    last = Last::RowVar;
                }
                _ => {
                    if last == Last::Axis && self.mode == Mode::MultiChar {
                        return Err(self.unexpected("',' between axes"));
                    }
                    let axis = self.axis()?;
                    if row_var.is_some() {
                        after.push(axis);
                    } else {
                        before.push(axis);
                    }
                    last = Last::Axis;
                }
            }
        }
        Ok(match row_var {
            Some((var, _)) => RowSpec::open(before, var, after),
            None => RowSpec::closed(before),
        })
    }

    fn row_var(&mut self, kind: Kind) -> Result<RowVar, SpecError> {
        let start = self.bump();
        if start.tok == Tok::Ellipsis {
            self.use_name(
                kind.ellipsis_name(),
                NameUse {
                    column: start.column,
                    width: start.width,
                    as_row_var: true,
                    ellipsis: Some(kind),
                },
            );
            return Ok(RowVar::Ellipsis);
        }
        let Tok::Ident(name) = self.peek().clone() else {
            return Err(self.unexpected("a row variable name after '..'"));
        };
        let name_token = self.bump();
        self.eat(&Tok::Comma);
        if !self.eat(&Tok::DotDot) {
            return Err(self.unexpected(&format!("'..' to close the row variable '..{name}..'")));
        }
        self.use_name(
            &name,
            NameUse {
                column: name_token.column,
                width: name_token.width,
                as_row_var: true,
                ellipsis: None,
            },
        );
        Ok(RowVar::Named(name))
    }

    fn axis(&mut self) -> Result<AxisSpec, SpecError> {
        match self.peek().clone() {
            Tok::Underscore => {
                self.bump();
                Ok(AxisSpec::Anonymous)
            }
            Tok::Int(n) => match self.peek_at(1) {
                Tok::Star => self.affine_after_coefficient(),
                Tok::Caret => self.concat(),
                _ => {
                    self.bump();
                    Ok(AxisSpec::Fixed { index: n })
                }
            },
            Tok::Ident(name) => match self.peek_at(1) {
                Tok::Star => self.affine_after_coefficient(),
                Tok::Caret => self.concat(),
                Tok::Plus | Tok::Eq | Tok::Lt | Tok::LBracket => {
                    let over = self.label()?;
                    self.affine_tail(Coefficient::Int(1), over, false)
                }
                _ => {
                    self.label()?;
                    Ok(AxisSpec::Label { name })
                }
            },
            _ => Err(self.unexpected("an axis")),
        }
    }

    /// Consumes an identifier used as a dimension label.
    fn label(&mut self) -> Result<String, SpecError> {
        let Tok::Ident(name) = self.peek().clone() else {
            return Err(self.unexpected("a label"));
        };
        let token = self.bump();
        self.use_name(
            &name,
            NameUse {
                column: token.column,
                width: token.width,
                as_row_var: false,
                ellipsis: None,
            },
        );
        Ok(name)
    }

    fn concat(&mut self) -> Result<AxisSpec, SpecError> {
        let mut components = vec![self.concat_component()?];
        while self.eat(&Tok::Caret) {
            components.push(self.concat_component()?);
        }
        Ok(AxisSpec::Concat { components })
    }

    fn concat_component(&mut self) -> Result<ConcatComponent, SpecError> {
        match self.peek().clone() {
            Tok::Int(size) => {
                self.bump();
                Ok(ConcatComponent::Size { size })
            }
            Tok::Ident(_) => Ok(ConcatComponent::Label {
                name: self.label()?,
            }),
            _ => Err(self.unexpected("a concatenation component (a label or a size)")),
        }
    }

    /// Parses a coefficient (integer or identifier) followed by `*`.
    fn coefficient(&mut self, role: &str) -> Result<Coefficient, SpecError> {
        let token = self.bump();
        let coefficient = match token.tok {
            Tok::Int(0) => {
                return Err(SpecError::at(
                    self.text,
                    token.column,
                    token.width,
                    SpecErrorKind::Syntax,
                    format!("a {role} must be at least 1"),
                ));
            }
            Tok::Int(n) => Coefficient::Int(n),
            Tok::Ident(name) => Coefficient::Ident(name),
            _ => unreachable!("callers check for an integer or identifier before '*'"),
        };
        let star = self.bump();
        debug_assert_eq!(star.tok, Tok::Star);
        Ok(coefficient)
    }

    fn affine_after_coefficient(&mut self) -> Result<AxisSpec, SpecError> {
        let stride = self.coefficient("stride")?;
        if !matches!(self.peek(), Tok::Ident(_)) {
            return Err(self.unexpected("the label a stride applies to"));
        }
        let over = self.label()?;
        self.affine_tail(stride, over, true)
    }

    /// Parses what follows `[stride*]over`: nothing (pure stride), `+ offset`, or a kernel part.
    fn affine_tail(
        &mut self,
        stride: Coefficient,
        over: String,
        explicit_stride: bool,
    ) -> Result<AxisSpec, SpecError> {
        let padding = match self.peek() {
            Tok::Eq => Padding::Padded,
            Tok::Lt => Padding::Valid,
            Tok::LBracket => Padding::Explicit(self.explicit_padding()?),
            Tok::Plus => Padding::Unspecified,
            _ => {
                return Ok(AxisSpec::Affine(AffineSpec {
                    stride,
                    over,
                    offset: 0,
                    conv: None,
                }));
            }
        };
        if matches!(padding, Padding::Padded | Padding::Valid) {
            self.bump();
        }
        if padding != Padding::Unspecified && *self.peek() != Tok::Plus {
            return Err(self.unexpected("'+' after the padding marker"));
        }
        let plus = self.bump();
        if padding == Padding::Unspecified
            && let Tok::Int(offset) = *self.peek()
            && !matches!(self.peek_at(1), Tok::Plus | Tok::Star)
        {
            if !explicit_stride {
                return Err(SpecError::at(
                    self.text,
                    plus.column,
                    1,
                    SpecErrorKind::Syntax,
                    format!(
                        "an offset needs an explicit stride: write '1*{over}+{offset}' \
                         (a bare '{over}+{offset}' is not an axis)"
                    ),
                ));
            }
            self.bump();
            return Ok(AxisSpec::Affine(AffineSpec {
                stride,
                over,
                offset,
                conv: None,
            }));
        }
        let mut offset = 0;
        if let Tok::Int(n) = *self.peek()
            && *self.peek_at(1) == Tok::Plus
        {
            offset = n;
            self.bump();
            self.bump();
        }
        let dilation = if matches!(self.peek(), Tok::Int(_) | Tok::Ident(_))
            && *self.peek_at(1) == Tok::Star
        {
            self.coefficient("dilation")?
        } else {
            Coefficient::Int(1)
        };
        if !matches!(self.peek(), Tok::Ident(_)) {
            return Err(self.unexpected("the kernel label of a convolution axis"));
        }
        let kernel = self.label()?;
        if *self.peek() == Tok::Plus {
            return Err(self.error_here(
                SpecErrorKind::Syntax,
                "the offset of a convolution axis goes before the kernel: \
                 write 'stride*over<+offset+kernel'",
            ));
        }
        Ok(AxisSpec::Affine(AffineSpec {
            stride,
            over,
            offset,
            conv: Some(ConvSpec {
                dilation,
                kernel,
                padding,
            }),
        }))
    }

    /// Parses `[before,after]` and an optional `^` (the output size rounded up).
    fn explicit_padding(&mut self) -> Result<ExplicitPadding, SpecError> {
        self.bump();
        let mut sides = [0; 2];
        for (i, side) in sides.iter_mut().enumerate() {
            let Tok::Int(n) = *self.peek() else {
                return Err(self.unexpected("the padding before and after, as '[1,1]'"));
            };
            *side = n;
            self.bump();
            let closing = if i == 0 { Tok::Comma } else { Tok::RBracket };
            if *self.peek() != closing {
                return Err(self.unexpected("the padding before and after, as '[1,1]'"));
            }
            self.bump();
        }
        let ceil = self.eat(&Tok::Caret);
        Ok(ExplicitPadding {
            before: sides[0],
            after: sides[1],
            ceil,
        })
    }

    /// Records a use of `name`; the first use that contradicts an earlier one is kept as an error.
    fn use_name(&mut self, name: &str, new: NameUse) {
        let Some(old) = self.names.get(name).copied() else {
            self.names.insert(name.to_owned(), new);
            return;
        };
        if old.as_row_var == new.as_row_var || self.clash.is_some() {
            return;
        }
        let describe = |u: NameUse| match u.ellipsis {
            Some(kind) => format!("'...' in a {kind} row is the row variable '{kind}'"),
            None if u.as_row_var => format!("row variable at column {}", u.column),
            None => format!("dimension label at column {}", u.column),
        };
        self.clash = Some(SpecError::at(
            self.text,
            new.column,
            new.width,
            SpecErrorKind::Name,
            format!(
                "Name '{name}' is used as both a dimension variable and a row variable ({}; {})",
                describe(old),
                describe(new)
            ),
        ));
    }

    fn check_names(&mut self) -> Result<(), SpecError> {
        match self.clash.take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}
