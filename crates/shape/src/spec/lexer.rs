//! Tokens of the spec language and the rule that picks the lexical mode.
//!
//! The mode is decided once for the whole text: it is multi-character iff the text contains any of
//! `, * + ^ & <` or an `=` not followed by `>`. In single-character mode every letter is its own
//! identifier (so `"ijk"` is three axes and separators are implicit); a maximal digit run is one
//! integer in both modes (so `"b00c"` is `b`, `0`, `c`). A letter is any character for which
//! `char::is_alphabetic` holds, in any script (`"αβ"` is two axes).

use serde::Serialize;

use super::error::{SpecError, SpecErrorKind};

/// The largest integer a spec may write (a fixed index, a stride, a dilation, an offset or a
/// concatenated size): 2^62 − 1. Indices are computed in 64-bit signed arithmetic as an offset
/// plus iterators times strides; with the written integers at most half of `i64::MAX`, that sum
/// stays in range for every axis a buffer can have, so no integer of a spec can wrap around.
pub const MAX_INTEGER: usize = (i64::MAX / 2) as usize;

/// How identifiers are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Mode {
    /// Every letter is one axis name; no separators are needed.
    #[serde(rename = "single-char")]
    SingleChar,
    /// Identifiers are a letter followed by letters, digits `0-9` and `_`, and axes are
    /// separated by commas.
    #[serde(rename = "multi-char")]
    MultiChar,
}

impl Mode {
    /// The mode the notation assigns to `text`.
    pub fn of(text: &str) -> Mode {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                ',' | '*' | '+' | '^' | '&' | '<' => return Mode::MultiChar,
                '=' if chars.peek() != Some(&'>') => return Mode::MultiChar,
                _ => {}
            }
        }
        Mode::SingleChar
    }

    /// The mode's name as messages print it: `single-char` or `multi-char`.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::SingleChar => "single-char",
            Mode::MultiChar => "multi-char",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    Pipe,
    Arrow,
    FatArrow,
    Semi,
    Comma,
    Ellipsis,
    DotDot,
    Eq,
    Lt,
    Plus,
    Star,
    Caret,
    LBracket,
    RBracket,
    Amp,
    Underscore,
    Ident(String),
    Int(usize),
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Pipe => "'|'".into(),
            Tok::Arrow => "'->'".into(),
            Tok::FatArrow => "'=>'".into(),
            Tok::Semi => "';'".into(),
            Tok::Comma => "','".into(),
            Tok::Ellipsis => "'...'".into(),
            Tok::DotDot => "'..'".into(),
            Tok::Eq => "'='".into(),
            Tok::Lt => "'<'".into(),
            Tok::Plus => "'+'".into(),
            Tok::Star => "'*'".into(),
            Tok::Caret => "'^'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::Amp => "'&'".into(),
            Tok::Underscore => "'_'".into(),
            Tok::Ident(name) => format!("identifier '{name}'"),
            Tok::Int(n) => format!("integer {n}"),
            Tok::Eof => "the end of the spec".into(),
        }
    }
}

/// A token with its 1-based character column and its width in characters.
#[derive(Debug, Clone)]
pub(super) struct Spanned {
    pub tok: Tok,
    pub column: usize,
    pub width: usize,
}

/// Splits `text` into tokens, ending with [`Tok::Eof`] at the column after the last character.
pub(super) fn lex(text: &str, mode: Mode) -> Result<Vec<Spanned>, SpecError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut pos = 0;
    while pos < chars.len() {
        let start = pos;
        let c = chars[pos];
        let at = |offset: usize| chars.get(pos + offset).copied();
        let (tok, width) = match c {
            ' ' | '\t' | '\r' | '\n' => {
                pos += 1;
                continue;
            }
            '|' => (Tok::Pipe, 1),
            ';' => (Tok::Semi, 1),
            ',' => (Tok::Comma, 1),
            '<' => (Tok::Lt, 1),
            '+' => (Tok::Plus, 1),
            '*' => (Tok::Star, 1),
            '^' => (Tok::Caret, 1),
            '[' => (Tok::LBracket, 1),
            ']' => (Tok::RBracket, 1),
            '&' => (Tok::Amp, 1),
            '_' => (Tok::Underscore, 1),
            '-' if at(1) == Some('>') => (Tok::Arrow, 2),
            '=' if at(1) == Some('>') => (Tok::FatArrow, 2),
            '=' => (Tok::Eq, 1),
            '.' if at(1) == Some('.') && at(2) == Some('.') => (Tok::Ellipsis, 3),
            '.' if at(1) == Some('.') => (Tok::DotDot, 2),
            '0'..='9' => {
                let width = chars[pos..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                let digits: String = chars[pos..pos + width].iter().collect();
                let value = digits
                    .parse::<usize>()
                    .ok()
                    .filter(|value| *value <= MAX_INTEGER)
                    .ok_or_else(|| {
                        SpecError::at(
                            text,
                            start + 1,
                            width,
                            SpecErrorKind::Syntax,
                            format!("integer {digits} is too large (at most {MAX_INTEGER})"),
                        )
                    })?;
                (Tok::Int(value), width)
            }
            c if c.is_alphabetic() => {
                let width = match mode {
                    Mode::SingleChar => 1,
                    Mode::MultiChar => chars[pos..]
                        .iter()
                        .take_while(|c| c.is_alphabetic() || c.is_ascii_digit() || **c == '_')
                        .count(),
                };
                (Tok::Ident(chars[pos..pos + width].iter().collect()), width)
            }
            other => {
                let hint = match other {
                    '-' => " ('-' only appears in '->')",
                    '.' => " ('.' only appears in '...' and '..name..')",
                    _ => "",
                };
                return Err(SpecError::at(
                    text,
                    start + 1,
                    1,
                    SpecErrorKind::Lex,
                    format!(
                        "unexpected character {other:?} in {} mode{hint}",
                        mode.describe()
                    ),
                ));
            }
        };
        tokens.push(Spanned {
            tok,
            column: start + 1,
            width,
        });
        pos += width;
    }
    tokens.push(Spanned {
        tok: Tok::Eof,
        column: chars.len() + 1,
        width: 1,
    });
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        lex(text, Mode::of(text))
            .unwrap()
            .into_iter()
            .map(|s| s.tok)
            .collect()
    }

    #[test]
    fn mode_triggers() {
        for text in ["a,b", "2*i", "o+k", "a^b", "a&b", "o<+k", "o=+k"] {
            assert_eq!(Mode::of(text), Mode::MultiChar, "{text}");
        }
        for text in ["ij=>ji", "b|i->o", "...|...->...", "i0j", "a..v..b", ""] {
            assert_eq!(Mode::of(text), Mode::SingleChar, "{text}");
        }
    }

    #[test]
    fn single_char_letters_are_separate_but_digit_runs_are_one() {
        assert_eq!(
            toks("b00c"),
            [
                Tok::Ident("b".into()),
                Tok::Int(0),
                Tok::Ident("c".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("i12j"),
            [
                Tok::Ident("i".into()),
                Tok::Int(12),
                Tok::Ident("j".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn multi_char_identifiers_take_digits_and_underscores() {
        assert_eq!(
            toks("ab_1, c"),
            [
                Tok::Ident("ab_1".into()),
                Tok::Comma,
                Tok::Ident("c".into()),
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("_x,"),
            [
                Tok::Underscore,
                Tok::Ident("x".into()),
                Tok::Comma,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn letters_of_any_script_are_identifiers() {
        assert_eq!(
            toks("αé"),
            [Tok::Ident("α".into()), Tok::Ident("é".into()), Tok::Eof]
        );
        assert_eq!(
            toks("ж_2, Ωx"),
            [
                Tok::Ident("ж_2".into()),
                Tok::Comma,
                Tok::Ident("Ωx".into()),
                Tok::Eof
            ]
        );
        // Digits of other scripts are not identifier characters.
        assert!(lex("a, b٣", Mode::MultiChar).is_err());
    }

    #[test]
    fn columns_count_characters() {
        let spanned = lex("∘", Mode::SingleChar).unwrap_err();
        assert_eq!(spanned.column, Some(1));
        let tokens = lex("ab => ba", Mode::SingleChar).unwrap();
        let columns: Vec<usize> = tokens.iter().map(|s| s.column).collect();
        assert_eq!(columns, [1, 2, 4, 7, 8, 9]);
    }

    #[test]
    fn oversized_integers_are_errors() {
        let err = lex("99999999999999999999999", Mode::SingleChar).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        // Beyond the largest integer by one, at its column; the largest itself is read.
        let beyond = format!("i, {}", MAX_INTEGER + 1);
        let err = lex(&beyond, Mode::MultiChar).unwrap_err();
        assert_eq!(err.column, Some(4));
        assert!(
            err.to_string()
                .contains("integer 4611686018427387904 is too large (at most 4611686018427387903)"),
            "{err}"
        );
        let largest = lex(&format!("i, {MAX_INTEGER}"), Mode::MultiChar).unwrap();
        assert_eq!(largest[2].tok, Tok::Int(MAX_INTEGER));
    }
}
