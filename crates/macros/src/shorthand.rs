//! The shorthands of `op!`: OCANNL's einsum operators `+*`, `++`, `+++`, `@^+`, `@^^`, `++^`,
//! its slice `@|` and its embedded static index `!@`.
//!
//! Rust has none of these operators, and syn parses no expression holding them, so before the
//! expression is parsed each is rewritten into a Rust operator of the precedence OCaml gives it
//! (`+` for those starting with `+`; `<<`, which binds below `+ -` and above comparisons as
//! OCaml's `@` operators do, for those starting with `@`; the prefix `!`, binding tightest as
//! OCaml's `!` operators do, for `!@`), followed by a marker attribute holding the shorthand, its
//! spec and its captures. syn attaches an attribute to the operand it precedes, the leftmost leaf
//! of that operator's right operand, where [`take`] finds it back. A postfix shorthand
//! (`x ++ "spec"`) gets `()` as its right operand.

use proc_macro2::{Delimiter, Group, Spacing, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Ident, LitStr, Token};

/// The name of the marker attribute.
const MARKER: &str = "rcannl_shorthand";

/// The shorthands, as written and what they build; a longer spelling before its prefixes.
const SHORTHANDS: [(&str, Kind); 8] = [
    ("+++", Kind::OuterSum),
    ("++^", Kind::Concat),
    ("++", Kind::Einsum1),
    ("+*", Kind::Einsum),
    ("@^+", Kind::Tropical),
    ("@^^", Kind::Einmax1),
    ("@|", Kind::Slice),
    ("!@", Kind::EmbedStatic),
];

/// What a shorthand builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `a +* "spec" b`: products, summed.
    Einsum,
    /// `a ++ "spec"`: one operand, summed.
    Einsum1,
    /// `a +++ "spec" b`: sums, summed.
    OuterSum,
    /// `a @^+ "spec" b`: sums, the largest kept.
    Tropical,
    /// `a @^^ "spec"`: one operand, the largest kept.
    Einmax1,
    /// `(a, b) ++^ "spec"`: the operands' stretches assembled.
    Concat,
    /// `a @| index`: the tensor at a static index of its first batch axis.
    Slice,
    /// `!@index`: the value of a static index, as a tensor.
    EmbedStatic,
}

/// Where a shorthand's operands are.
enum Form {
    /// A spec, then the second operand.
    Binary,
    /// A spec, and no operand on the right.
    Postfix,
    /// A static index (plain Rust) on the right, no spec.
    Index,
    /// No operand on the left, a static index (plain Rust) on the right.
    Prefix,
}

impl Kind {
    /// How it is written.
    pub fn text(self) -> &'static str {
        SHORTHANDS
            .iter()
            .find(|(_, kind)| *kind == self)
            .map(|(text, _)| *text)
            .expect("every kind is spelled")
    }

    fn form(self) -> Form {
        match self {
            Kind::Einsum | Kind::OuterSum | Kind::Tropical => Form::Binary,
            Kind::Einsum1 | Kind::Einmax1 | Kind::Concat => Form::Postfix,
            Kind::Slice => Form::Index,
            Kind::EmbedStatic => Form::Prefix,
        }
    }

    /// The Rust operator carrying it, spanned at `span`.
    fn carrier(self, span: Span) -> TokenStream {
        match self.text().chars().next() {
            Some('+') => quote_spanned!(span=> +),
            Some('!') => quote_spanned!(span=> !),
            _ => quote_spanned!(span=> <<),
        }
    }

    /// How a shorthand taking a static index (`@|`, `!@`) is written, for messages.
    fn example(self) -> &'static str {
        if self == Kind::Slice {
            "x @| batch"
        } else {
            "x + !@step"
        }
    }
}

/// A shorthand found back in a parsed expression.
pub struct Shorthand {
    pub kind: Kind,
    /// The spec: a string, or an identifier holding one (none for `@|`).
    pub spec: Option<Expr>,
    /// The names to capture, in order.
    pub captures: Vec<LitStr>,
    /// Where the operator is written.
    pub span: Span,
}

/// The shorthand spelled at the start of `tokens`, if one is.
fn spelled_at(tokens: &[TokenTree]) -> Option<Kind> {
    SHORTHANDS.iter().find_map(|&(text, kind)| {
        let n = text.len();
        let matches = tokens.len() >= n
            && text.chars().zip(tokens).enumerate().all(|(i, (c, t))| {
                matches!(t, TokenTree::Punct(p)
                    if p.as_char() == c && (i + 1 == n || p.spacing() == Spacing::Joint))
            });
        matches.then_some(kind)
    })
}

/// Whether `token` may end a left operand (a name, a number, a bracket, a `?`).
fn ends_operand(token: Option<&TokenTree>) -> bool {
    match token {
        Some(TokenTree::Punct(p)) => p.as_char() == '?',
        Some(_) => true,
        None => false,
    }
}

fn is_string(token: &TokenTree) -> bool {
    syn::parse2::<LitStr>(token.clone().into()).is_ok()
}

fn is_punct(token: Option<&TokenTree>, chars: &[char]) -> bool {
    matches!(token, Some(TokenTree::Punct(p)) if chars.contains(&p.as_char()))
}

/// Whether no operand starts at `tokens[i]`.
fn operand_missing(tokens: &[TokenTree], i: usize) -> bool {
    i == tokens.len() || is_punct(tokens.get(i), &[',', ';'])
}

/// The capture list at `tokens[i]`, `["name", …]` (a bracket of strings only; none if there is
/// no such bracket), and the index past it.
fn captures_at(tokens: &[TokenTree], i: usize) -> (Vec<LitStr>, usize) {
    let list = match tokens.get(i) {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket => {
            Punctuated::<LitStr, Token![,]>::parse_terminated
                .parse2(g.stream())
                .ok()
                .filter(|names| !names.is_empty())
        }
        _ => None,
    };
    match list {
        Some(names) => (names.into_iter().collect(), i + 1),
        None => (Vec::new(), i),
    }
}

/// The tokens with every shorthand rewritten (inside brackets too).
pub fn rewrite(tokens: TokenStream) -> syn::Result<TokenStream> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let Some(kind) = spelled_at(&tokens[i..]) else {
            out.push(match &tokens[i] {
                TokenTree::Group(g) => {
                    let mut group = Group::new(g.delimiter(), rewrite(g.stream())?);
                    group.set_span(g.span());
                    TokenTree::Group(group)
                }
                other => other.clone(),
            });
            i += 1;
            continue;
        };
        let span = tokens[i].span();
        let text = kind.text();
        placed(kind, span, out.last())?;
        i += text.len();
        out.extend(kind.carrier(span));
        match kind.form() {
            Form::Index | Form::Prefix => {
                if operand_missing(&tokens, i) {
                    return Err(syn::Error::new(
                        span,
                        format!(
                            "`{text}` takes a static index on its right: `{}`",
                            kind.example()
                        ),
                    ));
                }
                out.extend(marker(kind, span, None, &[]));
            }
            Form::Postfix => {
                let (spec, captures, next) = spec_after(kind, span, &tokens, i)?;
                i = next;
                if tokens
                    .get(i)
                    .is_some_and(|t| !matches!(t, TokenTree::Punct(_)))
                {
                    return Err(syn::Error::new(
                        tokens[i].span(),
                        format!(
                            "`{text}` takes its operand on the left only, then its spec; the \
                             binary einsum is `a +* \"spec\" b`"
                        ),
                    ));
                }
                out.extend(marker(kind, span, Some(spec), &captures));
                out.extend(quote_spanned!(span=> ()));
            }
            Form::Binary => {
                if let Some((operand, spec, next)) = mixfix(&tokens, i)? {
                    let (captures, next) = captures_at(&tokens, next);
                    i = next;
                    out.extend(marker(kind, span, Some(spec), &captures));
                    out.push(TokenTree::Group(Group::new(
                        Delimiter::Parenthesis,
                        operand,
                    )));
                } else {
                    let (spec, captures, next) = spec_after(kind, span, &tokens, i)?;
                    i = next;
                    if operand_missing(&tokens, i) {
                        return Err(syn::Error::new(
                            span,
                            format!(
                                "`{text}` takes a spec and a second operand, as in \
                                 `a {text} \"ij;jk=>ik\" b`"
                            ),
                        ));
                    }
                    out.extend(marker(kind, span, Some(spec), &captures));
                }
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// An error unless `kind`, at `span`, stands where it goes: after its (first) operand, or for
/// a prefix one where no operand ends just before it (`before`, the token there).
fn placed(kind: Kind, span: Span, before: Option<&TokenTree>) -> syn::Result<()> {
    let text = kind.text();
    match (matches!(kind.form(), Form::Prefix), ends_operand(before)) {
        (false, false) => Err(syn::Error::new(
            span,
            format!("`{text}` follows its (first) operand"),
        )),
        (true, true) => Err(syn::Error::new(
            span,
            format!(
                "`{text}` goes before its operand, not after another: `{}`",
                kind.example()
            ),
        )),
        _ => Ok(()),
    }
}

/// The spec right after a shorthand's operator, at `tokens[i]` (a string or an identifier),
/// and the capture list after it: the spec, the captures and the index past them.
fn spec_after(
    kind: Kind,
    span: Span,
    tokens: &[TokenTree],
    i: usize,
) -> syn::Result<(TokenTree, Vec<LitStr>, usize)> {
    let spec = match tokens.get(i) {
        Some(t @ TokenTree::Literal(_)) if is_string(t) => t.clone(),
        Some(t @ TokenTree::Ident(_)) => t.clone(),
        _ => {
            let text = kind.text();
            let example = match kind.form() {
                Form::Binary => format!(
                    "`a {text} \"ij;jk=>ik\" b`, or `a {text} b \"ij;jk=>ik\"` with a literal"
                ),
                _ => format!("`a {text} \"ij=>i\"`"),
            };
            return Err(syn::Error::new(
                tokens.get(i).map_or(span, TokenTree::span),
                format!("`{text}` takes a spec, a string or a variable holding one: {example}"),
            ));
        }
    };
    let (captures, next) = captures_at(tokens, i + 1);
    Ok((spec, captures, next))
}

/// The mixfix form of a binary shorthand, `a +* b "spec"`: from `tokens[i]`, one operand
/// followed by a string (before any `,` `;` or other shorthand). The operand (rewritten), the
/// spec and the index past it.
fn mixfix(tokens: &[TokenTree], i: usize) -> syn::Result<Option<(TokenStream, TokenTree, usize)>> {
    if tokens.get(i).is_some_and(is_string) {
        return Ok(None);
    }
    let Some(at) = (i..tokens.len())
        .take_while(|&j| {
            !is_punct(tokens.get(j), &[',', ';']) && spelled_at(&tokens[j..]).is_none()
        })
        .find(|&j| is_string(&tokens[j]))
    else {
        return Ok(None);
    };
    let operand = rewrite(tokens[i..at].iter().cloned().collect())?;
    match syn::parse2::<Expr>(operand.clone()) {
        // Not one operand (`spec b "…"`): the spec is the identifier after the operator.
        Err(_) => Ok(None),
        Ok(Expr::Binary(b)) => Err(syn::Error::new_spanned(
            b.op,
            "before a spec written after the second operand comes one operand: parenthesize it",
        )),
        Ok(_) => Ok(Some((operand, tokens[at].clone(), at + 1))),
    }
}

/// `#[rcannl_shorthand("+*", spec, ["name", …])]`, spanned at the operator.
fn marker(kind: Kind, span: Span, spec: Option<TokenTree>, captures: &[LitStr]) -> TokenStream {
    let name = Ident::new(MARKER, span);
    let text = LitStr::new(kind.text(), span);
    let spec = spec.map(|s| quote!(, #s));
    let captures = (!captures.is_empty()).then(|| quote!(, [#(#captures),*]));
    quote_spanned!(span=> #[#name(#text #spec #captures)])
}

impl Shorthand {
    fn parse(attr: &Attribute) -> syn::Result<Shorthand> {
        attr.parse_args_with(|input: ParseStream| {
            let text: LitStr = input.parse()?;
            let kind = SHORTHANDS
                .iter()
                .find(|(t, _)| *t == text.value())
                .map(|(_, kind)| *kind)
                .ok_or_else(|| syn::Error::new(text.span(), "not a shorthand"))?;
            let mut spec = None;
            let mut captures = Vec::new();
            if input.parse::<Option<Token![,]>>()?.is_some() {
                spec = Some(input.parse::<Expr>()?);
            }
            if input.parse::<Option<Token![,]>>()?.is_some() {
                let list;
                syn::bracketed!(list in input);
                captures = Punctuated::<LitStr, Token![,]>::parse_terminated(&list)?
                    .into_iter()
                    .collect();
            }
            Ok(Shorthand {
                kind,
                spec,
                captures,
                span: text.span(),
            })
        })
    }
}

/// The shorthand marked on `right`, the right operand of a `+` or a `<<`, and that operand
/// without its marker; `None` for a plain `+` or `<<`.
pub fn take(right: &Expr) -> syn::Result<Option<(Shorthand, Expr)>> {
    let mut right = right.clone();
    let mut leaf = &mut right;
    loop {
        if let Some(attrs) = attrs_mut(leaf)
            && let Some(at) = attrs.iter().position(|a| a.path().is_ident(MARKER))
        {
            let shorthand = Shorthand::parse(&attrs.remove(at))?;
            return Ok(Some((shorthand, right)));
        }
        // The operators binding tighter than `+` keep the marked operand leftmost.
        leaf = match leaf {
            Expr::Binary(b) => &mut b.left,
            Expr::Cast(c) => &mut c.expr,
            _ => return Ok(None),
        };
    }
}

/// Whether `right`, the right operand of a binary operator, carries a shorthand.
pub fn marked(right: &Expr) -> bool {
    matches!(take(right), Ok(Some(_)))
}

/// The attributes of an expression.
fn attrs_mut(e: &mut Expr) -> Option<&mut Vec<Attribute>> {
    Some(match e {
        Expr::Array(x) => &mut x.attrs,
        Expr::Assign(x) => &mut x.attrs,
        Expr::Async(x) => &mut x.attrs,
        Expr::Await(x) => &mut x.attrs,
        Expr::Binary(x) => &mut x.attrs,
        Expr::Block(x) => &mut x.attrs,
        Expr::Break(x) => &mut x.attrs,
        Expr::Call(x) => &mut x.attrs,
        Expr::Cast(x) => &mut x.attrs,
        Expr::Closure(x) => &mut x.attrs,
        Expr::Const(x) => &mut x.attrs,
        Expr::Continue(x) => &mut x.attrs,
        Expr::Field(x) => &mut x.attrs,
        Expr::ForLoop(x) => &mut x.attrs,
        Expr::Group(x) => &mut x.attrs,
        Expr::If(x) => &mut x.attrs,
        Expr::Index(x) => &mut x.attrs,
        Expr::Infer(x) => &mut x.attrs,
        Expr::Let(x) => &mut x.attrs,
        Expr::Lit(x) => &mut x.attrs,
        Expr::Loop(x) => &mut x.attrs,
        Expr::Macro(x) => &mut x.attrs,
        Expr::Match(x) => &mut x.attrs,
        Expr::MethodCall(x) => &mut x.attrs,
        Expr::Paren(x) => &mut x.attrs,
        Expr::Path(x) => &mut x.attrs,
        Expr::Range(x) => &mut x.attrs,
        Expr::RawAddr(x) => &mut x.attrs,
        Expr::Reference(x) => &mut x.attrs,
        Expr::Repeat(x) => &mut x.attrs,
        Expr::Return(x) => &mut x.attrs,
        Expr::Struct(x) => &mut x.attrs,
        Expr::Try(x) => &mut x.attrs,
        Expr::TryBlock(x) => &mut x.attrs,
        Expr::Tuple(x) => &mut x.attrs,
        Expr::Unary(x) => &mut x.attrs,
        Expr::Unsafe(x) => &mut x.attrs,
        Expr::While(x) => &mut x.attrs,
        Expr::Yield(x) => &mut x.attrs,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` as tokens, as the compiler hands them over: `quote!` would not keep `+*` joint.
    fn tokens(text: &str) -> TokenStream {
        text.parse().unwrap()
    }

    #[test]
    fn each_shorthand_becomes_its_carrier_and_marker() {
        let cases = [
            (
                tokens(r#"a +* "ij;jk=>ik" b"#),
                quote!(
                    a + #[rcannl_shorthand("+*", "ij;jk=>ik")]
                    b
                ),
            ),
            (
                tokens(r#"a +* b "ij;jk=>ik" ["j"]"#),
                quote!(
                    a + #[rcannl_shorthand("+*", "ij;jk=>ik", ["j"])]
                    (b)
                ),
            ),
            (
                tokens(r#"a +* spec ["j", "k"] b"#),
                quote!(
                    a + #[rcannl_shorthand("+*", spec, ["j", "k"])]
                    b
                ),
            ),
            (
                tokens(r#"x ++ "ij=>i""#),
                quote!(
                    x + #[rcannl_shorthand("++", "ij=>i")]
                    ()
                ),
            ),
            (
                tokens(r#"a +++ "i;j=>ij" b"#),
                quote!(
                    a + #[rcannl_shorthand("+++", "i;j=>ij")]
                    b
                ),
            ),
            (
                tokens(r#"x @^+ "o<+k;k=>o" w"#),
                quote!(
                    x << #[rcannl_shorthand("@^+", "o<+k;k=>o")]
                    w
                ),
            ),
            (
                tokens(r#"x @^^ "ij=>i""#),
                quote!(
                    x << #[rcannl_shorthand("@^^", "ij=>i")]
                    ()
                ),
            ),
            (
                tokens(r#"(a, b) ++^ "i;j=>i^j""#),
                quote!(
                    (a, b)
                        + #[rcannl_shorthand("++^", "i;j=>i^j")]
                        ()
                ),
            ),
            (
                tokens(r#"x @| batch"#),
                quote!(
                    x << #[rcannl_shorthand("@|")]
                    batch
                ),
            ),
            (
                tokens(r#"x + !@step"#),
                quote!(
                    x + !#[rcannl_shorthand("!@")]
                    step
                ),
            ),
            // Inside brackets too; plain operators stay.
            (
                tokens(r#"relu(x ++ "ij=>i") + y"#),
                quote!(
                    relu(
                        x + #[rcannl_shorthand("++", "ij=>i")]
                        ()
                    ) + y
                ),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(rewrite(input).unwrap().to_string(), want.to_string());
        }
    }

    #[test]
    fn the_marker_is_found_on_the_operand_after_its_operator() {
        // `*` binds tighter than `+`: the marked operand is `b * c`.
        let e: Expr = syn::parse2(rewrite(tokens(r#"a +* "s" b * c + d"#)).unwrap()).unwrap();
        let Expr::Binary(outer) = e else {
            panic!("a sum")
        };
        assert!(take(&outer.right).unwrap().is_none(), "`+ d` is plain");
        let Expr::Binary(inner) = *outer.left else {
            panic!("a sum")
        };
        let (shorthand, right) = take(&inner.right).unwrap().expect("marked");
        assert_eq!(shorthand.kind, Kind::Einsum);
        assert_eq!(quote!(#right).to_string(), quote!(b * c).to_string());
        assert!(marked(&inner.right) && !marked(&inner.left));
    }

    #[test]
    fn malformed_shorthands_are_refused() {
        let cases = [
            (tokens(r#"a +*"#), "takes a spec"),
            (tokens(r#"a +* "s""#), "second operand"),
            (tokens(r#"a +* b"#), "second operand"),
            (tokens(r#"++ "s""#), "follows its (first) operand"),
            (tokens(r#"x ++ 3"#), "takes a spec"),
            (tokens(r#"x ++ "s" y"#), "on the left only"),
            (tokens(r#"x @|"#), "static index"),
            (tokens(r#"x + !@"#), "`!@` takes a static index"),
            (tokens(r#"x !@ step"#), "goes before its operand"),
            (tokens(r#"a +* b * c "s""#), "parenthesize"),
        ];
        for (input, want) in cases {
            let text = input.to_string();
            let message = rewrite(input).unwrap_err().to_string();
            assert!(message.contains(want), "{text}: {message}");
        }
    }
}
