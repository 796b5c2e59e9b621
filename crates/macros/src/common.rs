//! What both macros share: the tensor crate's path they are handed, source positions, the
//! primitive operations by name, array literals, function signatures, and the error for
//! PyTorch's `@`.

use crate::basis;
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Attribute, BinOp, Expr, ExprBinary, Ident, Token, Type, UnOp, Visibility};

/// Splits the input the tensor crate's `macro_rules!` wrapper passes, `($crate) tokens…`, into
/// the crate's path and the user's tokens.
pub fn split_crate(input: TokenStream) -> syn::Result<(TokenStream, TokenStream)> {
    let mut tokens = input.into_iter();
    match tokens.next() {
        Some(TokenTree::Group(group)) => Ok((group.stream(), tokens.collect())),
        _ => Err(syn::Error::new(
            Span::call_site(),
            "expand op! and cd! through rcannl (or rcannl-tensor), not rcannl-macros",
        )),
    }
}

/// `error` of parsing `tokens`, or where they hold `@` (which Rust reads in patterns only, so
/// no expression of op! or cd! parses with it: PyTorch's matrix product, most likely) an error
/// there saying what to write instead, `instead`.
pub fn at_sign_or(error: syn::Error, tokens: &TokenStream, instead: &str) -> syn::Error {
    match first_at_sign(tokens.clone()) {
        Some(at) => syn::Error::new(
            at,
            format!("`@` is not an operator here (PyTorch's matrix product); {instead}"),
        ),
        None => error,
    }
}

/// The first `@` among `tokens`, looking inside brackets.
fn first_at_sign(tokens: TokenStream) -> Option<Span> {
    tokens.into_iter().find_map(|token| match token {
        TokenTree::Punct(p) if p.as_char() == '@' => Some(p.span()),
        TokenTree::Group(g) => first_at_sign(g.stream()),
        _ => None,
    })
}

/// An expression giving the `file:line:column` of `span` as a `&'static str`.
pub fn site(span: Span) -> TokenStream {
    quote_spanned!(span=> ::core::concat!(::core::file!(), ":", ::core::line!(), ":", ::core::column!()))
}

/// A pointwise operation of one operand, by name.
pub fn unary(name: &str) -> Option<&'static str> {
    Some(match name {
        "neg" => "Neg",
        "relu" => "Relu",
        "sat01" => "Sat01",
        "exp" => "Exp",
        "log" => "Log",
        "exp2" => "Exp2",
        "log2" => "Log2",
        "sin" => "Sin",
        "cos" => "Cos",
        "sqrt" => "Sqrt",
        "recip" => "Recip",
        "recip_sqrt" => "RecipSqrt",
        "tanh" => "Tanh",
        "not" => "Not",
        "trunc" => "Trunc",
        _ => return None,
    })
}

/// A slot name of an operation definition: `v` (the result), `g` (its gradient), `v1`..`v3`
/// (the operands), `g1`..`g3` (their gradients). `Some((is_gradient, operand))`, the operand
/// counted from 1 and 0 for the result.
pub fn slot(name: &str) -> Option<(bool, usize)> {
    let (gradient, rest) = match name.as_bytes().first() {
        Some(b'v') => (false, &name[1..]),
        Some(b'g') => (true, &name[1..]),
        _ => return None,
    };
    match rest {
        "" => Some((gradient, 0)),
        "1" | "2" | "3" => Some((gradient, rest.parse().ok()?)),
        _ => None,
    }
}

/// `(base, exponent)` if `b` is `base ** exponent`, which Rust reads as `base * (*exponent)`.
pub fn as_power(b: &ExprBinary) -> Option<(&Expr, &Expr)> {
    match (&b.op, &*b.right) {
        (BinOp::Mul(_), Expr::Unary(u)) if matches!(u.op, UnOp::Deref(_)) => {
            Some((&b.left, &u.expr))
        }
        _ => None,
    }
}

/// `base ** exponent` as a call of the primitive `pow` (spanned at the operator `star`), binding
/// tighter than a product, quotient or negation on its left, as it reads in mathematics: Rust's
/// `(a * b) * (*c)` becomes `a * pow(b, c)`, and `(-b) * (*c)` becomes `-pow(b, c)`.
pub fn power(base: &Expr, exponent: &Expr, star: Span) -> Expr {
    match base {
        Expr::Binary(inner)
            if matches!(inner.op, BinOp::Mul(_) | BinOp::Div(_)) && as_power(inner).is_none() =>
        {
            let mut outer = inner.clone();
            outer.right = Box::new(power(&inner.right, exponent, star));
            Expr::Binary(outer)
        }
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
            let mut outer = u.clone();
            outer.expr = Box::new(power(&u.expr, exponent, star));
            Expr::Unary(outer)
        }
        _ => {
            let pow = Ident::new("pow", star);
            syn::parse_quote_spanned!(star=> #pow(#base, #exponent))
        }
    }
}

/// An identifier expression's name, if the expression is one.
pub fn ident_of(e: &Expr) -> Option<&Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => p.path.get_ident(),
        _ => None,
    }
}

/// The kinds of axes an array literal nests, outermost first: `vec![…]` batch, `[…]` output,
/// `(…)` input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AxisKind {
    Batch,
    Output,
    Input,
}

impl AxisKind {
    pub fn stack_axis(self, krate: &TokenStream) -> TokenStream {
        match self {
            AxisKind::Batch => quote!(#krate::StackAxis::Batch),
            AxisKind::Output => quote!(#krate::StackAxis::Output),
            AxisKind::Input => quote!(#krate::StackAxis::Input),
        }
    }
}

/// The elements of `e` if it is a bracket of a kind: `[a, b]`, `(a, b)` (a tuple), `vec![a, b]`.
/// A basis annotation around the bracket (`([a, b] : rgb)`) is seen through.
pub fn bracket(e: &Expr) -> syn::Result<Option<(AxisKind, Vec<Expr>)>> {
    Ok(match basis::unannotated(e) {
        Expr::Array(a) => Some((AxisKind::Output, a.elems.iter().cloned().collect())),
        Expr::Tuple(t) if !t.elems.is_empty() => {
            Some((AxisKind::Input, t.elems.iter().cloned().collect()))
        }
        Expr::Macro(m) if m.mac.path.is_ident("vec") => {
            let elems = m.mac.parse_body_with(
                syn::punctuated::Punctuated::<Expr, Token![,]>::parse_terminated,
            )?;
            Some((AxisKind::Batch, elems.into_iter().collect()))
        }
        _ => None,
    })
}

/// Whether `e` is a number written as one (possibly negated): what makes a bracket an array of
/// numbers rather than a block of tensors.
pub fn is_number(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) => matches!(l.lit, syn::Lit::Float(_) | syn::Lit::Int(_)),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_number(&u.expr),
        Expr::Paren(p) => is_number(&p.expr),
        _ => false,
    }
}

/// Whether the first leaf of nested brackets is a number written as one.
pub fn first_leaf_is_number(e: &Expr) -> syn::Result<bool> {
    match bracket(e)? {
        Some((_, elems)) => match elems.first() {
            Some(first) => first_leaf_is_number(first),
            None => Ok(false),
        },
        None => Ok(is_number(e)),
    }
}

/// An array literal of numbers: its axes by kind, with the bases annotations name, and its
/// cells, row-major.
pub struct ArrayLiteral {
    pub dims: Vec<LiteralAxis>,
    pub cells: Vec<Expr>,
}

/// One axis of an array literal: its kind, its size, the basis an annotation names.
#[derive(Clone)]
pub struct LiteralAxis {
    pub kind: AxisKind,
    pub size: usize,
    pub basis: Option<Ident>,
}

impl PartialEq for LiteralAxis {
    fn eq(&self, other: &LiteralAxis) -> bool {
        self.kind == other.kind
            && self.size == other.size
            && self.basis.as_ref().map(Ident::to_string)
                == other.basis.as_ref().map(Ident::to_string)
    }
}

impl ArrayLiteral {
    /// `e` as an array of numbers, if its first leaf is a number written as one; an error if
    /// it is ragged, nests its kinds out of order, or annotates what has no axis.
    pub fn parse(e: &Expr) -> syn::Result<Option<ArrayLiteral>> {
        let basis = basis::annotation(e).map(|(name, _)| name.clone());
        if let Some((name, inner)) = basis::annotation(e)
            && basis::annotation(inner).is_some()
        {
            return Err(syn::Error::new(
                name.span(),
                "an axis has one basis: annotate each level of brackets once",
            ));
        }
        let Some((kind, elems)) = bracket(e)? else {
            return Ok(None);
        };
        let Some(first) = elems.first() else {
            return Err(syn::Error::new(
                e.span(),
                "an empty array literal has no cells",
            ));
        };
        if !first_leaf_is_number(first)? {
            return Ok(None);
        }
        if let Some(name) = &basis
            && name == basis::CLAIM_FREE
            && elems.len() != 1
        {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "only an axis of size 1 can be the claim-free unit `{}`; this one has {}",
                    basis::CLAIM_FREE,
                    elems.len()
                ),
            ));
        }
        let mut literal = ArrayLiteral {
            dims: vec![LiteralAxis {
                kind,
                size: elems.len(),
                basis,
            }],
            cells: Vec::new(),
        };
        let mut inner: Option<Vec<LiteralAxis>> = None;
        for elem in &elems {
            let (dims, cells) = match ArrayLiteral::parse(elem)? {
                Some(sub) => (sub.dims, sub.cells),
                None if bracket(elem)?.is_some() => {
                    return Err(syn::Error::new(
                        elem.span(),
                        "an array literal holds numbers, or arrays of numbers, throughout",
                    ));
                }
                None => {
                    if let Some((name, _)) = basis::annotation(elem) {
                        return Err(syn::Error::new(
                            name.span(),
                            "a basis names an axis: annotate the brackets around the numbers \
                             (`([1.0, 2.0] : rgb)`), not a number inside them",
                        ));
                    }
                    (Vec::new(), vec![elem.clone()])
                }
            };
            if let Some(outer) = dims.first()
                && outer.kind < kind
            {
                return Err(syn::Error::new(
                    elem.span(),
                    "array literals nest batch axes (`vec![…]`) outside output axes (`[…]`) \
                         outside input axes (`(…)`)",
                ));
            }
            match &inner {
                None => inner = Some(dims),
                Some(expected) if *expected != dims => {
                    let bases_only = expected.len() == dims.len()
                        && expected
                            .iter()
                            .zip(&dims)
                            .all(|(a, b)| a.kind == b.kind && a.size == b.size);
                    return Err(syn::Error::new(
                        elem.span(),
                        if bases_only {
                            "the elements of an array literal annotate the same bases on the \
                             same axes"
                        } else {
                            "a ragged array literal: every element has the same axes"
                        },
                    ));
                }
                Some(_) => {}
            }
            literal.cells.extend(cells);
        }
        literal.dims.extend(inner.unwrap_or_default());
        Ok(Some(literal))
    }

    /// A number standing alone under an annotation (`(2.0 : q)`): one output axis of size 1 of
    /// the basis named.
    pub fn annotated_number(e: &Expr) -> Option<ArrayLiteral> {
        let (name, inner) = basis::annotation(e)?;
        is_number(inner).then(|| ArrayLiteral {
            dims: vec![LiteralAxis {
                kind: AxisKind::Output,
                size: 1,
                basis: Some(name.clone()),
            }],
            cells: vec![inner.clone()],
        })
    }

    /// The expansion's `LiteralDims` and `Vec<f64>` of cells.
    pub fn tokens(&self, krate: &TokenStream) -> (TokenStream, TokenStream) {
        let of = |kind: AxisKind| {
            let sizes = self
                .dims
                .iter()
                .filter(|axis| axis.kind == kind)
                .map(|axis| axis.size);
            quote!(::std::vec![#(#sizes),*])
        };
        let (batch, output, input) = (
            of(AxisKind::Batch),
            of(AxisKind::Output),
            of(AxisKind::Input),
        );
        let bases = [AxisKind::Batch, AxisKind::Output, AxisKind::Input]
            .into_iter()
            .flat_map(|kind| {
                let axis = kind.stack_axis(krate);
                self.dims
                    .iter()
                    .filter(move |a| a.kind == kind)
                    .enumerate()
                    .filter_map(move |(i, a)| {
                        let name = a.basis.as_ref()?.to_string();
                        Some(quote!((#axis, #i, #name)))
                    })
            });
        let cells = &self.cells;
        (
            quote!(#krate::syntax::LiteralDims {
                batch: #batch,
                output: #output,
                input: #input,
                bases: ::std::vec![#(#bases),*],
            }),
            quote!(::std::vec![#((#cells) as f64),*]),
        )
    }
}

/// An argument of a defined function: a tensor (`x`) or a configuration value (`hid: usize`).
pub struct Arg {
    pub name: Ident,
    pub ty: Option<Type>,
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Arg> {
        let name = input.parse()?;
        let ty = if input.peek(Token![:]) {
            input.parse::<Token![:]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Arg { name, ty })
    }
}

/// `#[attrs] vis fn name(args) { body }`, the body left as tokens for each macro to read.
pub struct FnDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub args: Vec<Arg>,
    pub body: TokenStream,
}

impl FnDef {
    /// The tensor arguments.
    pub fn tensors(&self) -> Vec<&Ident> {
        self.args
            .iter()
            .filter(|a| a.ty.is_none())
            .map(|a| &a.name)
            .collect()
    }

    /// The configuration arguments, as Rust parameters.
    pub fn config(&self) -> Vec<TokenStream> {
        self.args
            .iter()
            .filter_map(|a| {
                let (name, ty) = (&a.name, a.ty.as_ref()?);
                Some(quote!(#name: #ty))
            })
            .collect()
    }
}

impl Parse for FnDef {
    fn parse(input: ParseStream) -> syn::Result<FnDef> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![fn]>()?;
        let name: Ident = input.parse()?;
        let content;
        syn::parenthesized!(content in input);
        let args = content.parse_terminated(Arg::parse, Token![,])?;
        let body;
        syn::braced!(body in input);
        let def = FnDef {
            attrs,
            vis,
            name,
            args: args.into_iter().collect(),
            body: body.parse()?,
        };
        if def.tensors().is_empty() {
            return Err(syn::Error::new(
                def.name.span(),
                "a defined function takes at least one tensor (an argument without a type)",
            ));
        }
        Ok(def)
    }
}

impl FnDef {
    /// The function definitions filling `input`.
    pub fn parse_all(input: ParseStream) -> syn::Result<Vec<FnDef>> {
        let mut fns = Vec::new();
        while !input.is_empty() {
            fns.push(input.parse()?);
        }
        Ok(fns)
    }
}

/// Whether the input starts a function definition (`fn`, `pub fn`, `#[…]`, `///`).
pub fn starts_fn(input: ParseStream) -> bool {
    input.peek(Token![fn])
        || input.peek(Token![pub])
        || input.peek(Token![#])
        || (input.peek(Token![crate]) && input.peek2(Token![fn]))
}
