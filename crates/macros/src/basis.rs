//! Bases on the axes of array literals: `([1.0, 2.0, 3.0] : rgb)` names the basis of the output
//! axis the brackets make, `((1.0, 2.0) : feat)` of an input axis, `(vec![…] : examples)` of a
//! batch axis, and `(2.0 : q)` of the one output axis of a number standing alone.
//!
//! Rust parses no `(expression : name)`, so the annotation is rewritten on the tokens first, to
//! `(expression as __rcannl_basis::name)`, which the expansion reads back (`annotation`) and
//! never emits.

use proc_macro2::{Delimiter, Group, Ident, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::Expr;

/// The path segment that marks a rewritten annotation.
const MARKER: &str = "__rcannl_basis";

/// The basis that lets an axis of size 1 broadcast: the claim-free unit `1*`.
pub const CLAIM_FREE: &str = "bcast_if_1";

/// What an annotation is, for the errors.
pub const FORM: &str = "a basis annotation is one name after a colon, inside parentheses \
    around an array literal or a number: `([1.0, 2.0, 3.0] : rgb)`, `((1.0, 2.0) : feat)`, \
    `(2.0 : q)`";

/// `tokens` with every `(expression : name)` rewritten to `(expression as __rcannl_basis::name)`;
/// an error where the colon is not followed by exactly one name. The parentheses of a function's
/// arguments (`fn layer(hid: usize)`) are left alone.
pub fn rewrite(tokens: TokenStream) -> syn::Result<TokenStream> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    for (i, token) in tokens.iter().enumerate() {
        let TokenTree::Group(group) = token else {
            out.push(token.clone());
            continue;
        };
        let arguments = i >= 2
            && matches!(&tokens[i - 2], TokenTree::Ident(f) if f == "fn")
            && matches!(&tokens[i - 1], TokenTree::Ident(_));
        let inner = rewrite(group.stream())?;
        let stream = if group.delimiter() == Delimiter::Parenthesis && !arguments {
            annotated(inner)?
        } else {
            inner
        };
        let mut rewritten = Group::new(group.delimiter(), stream);
        rewritten.set_span(group.span());
        out.push(TokenTree::Group(rewritten));
    }
    Ok(out.into_iter().collect())
}

/// The inside of parentheses, rewritten if it is `expression : name`.
fn annotated(inner: TokenStream) -> syn::Result<TokenStream> {
    let tokens: Vec<TokenTree> = inner.clone().into_iter().collect();
    let is_punct = |t: &TokenTree, c: char| matches!(t, TokenTree::Punct(p) if p.as_char() == c);
    if tokens.iter().any(|t| is_punct(t, ',')) {
        return Ok(inner);
    }
    // A colon alone: neither half of a path's `::`.
    let lone = |i: usize| {
        matches!(&tokens[i], TokenTree::Punct(p) if p.as_char() == ':' && p.spacing() == Spacing::Alone)
            && !(i > 0
                && matches!(&tokens[i - 1], TokenTree::Punct(p)
                    if p.as_char() == ':' && p.spacing() == Spacing::Joint))
    };
    let Some(colon) = (0..tokens.len()).find(|&i| lone(i)) else {
        return Ok(inner);
    };
    if colon == 0 {
        return Ok(inner);
    }
    let name: TokenStream = tokens[colon + 1..].iter().cloned().collect();
    let name = match syn::parse2::<Ident>(name.clone()) {
        Ok(name) => name,
        Err(_) => {
            let span = tokens
                .get(colon + 1)
                .map_or_else(|| tokens[colon].span(), TokenTree::span);
            return Err(syn::Error::new(span, FORM));
        }
    };
    let span = tokens[colon].span();
    let mut out: TokenStream = tokens[..colon].iter().cloned().collect();
    out.extend(quote::quote_spanned!(span=> as __rcannl_basis::));
    out.extend(name.into_token_stream());
    Ok(out)
}

/// The basis an annotation names and the expression it labels, if `e` is one (inside any
/// parentheses).
pub fn annotation(e: &Expr) -> Option<(&Ident, &Expr)> {
    match e {
        Expr::Paren(p) => annotation(&p.expr),
        Expr::Group(g) => annotation(&g.expr),
        Expr::Cast(c) => match &*c.ty {
            syn::Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 2 => {
                let segments = &p.path.segments;
                (segments[0].ident == MARKER).then(|| (&segments[1].ident, &*c.expr))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `e` without its annotation, if it has one: the brackets whose axis it labels.
pub fn unannotated(e: &Expr) -> &Expr {
    annotation(e).map_or(e, |(_, inner)| inner)
}

/// The expression as written, annotations with their colons: a literal's label.
pub fn label(e: &Expr) -> String {
    e.to_token_stream()
        .to_string()
        .replace(&format!(" as {MARKER} :: "), " : ")
}
