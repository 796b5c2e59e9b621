//! `op!`: tensor expressions with inline parameter declarations, array literals, the primitive
//! operations by name, shorthands (rewritten by `shorthand` first), and functions defining
//! layers.
//!
//! Every value of an expression is an `Operand` (a tensor or a number) until the end, where it
//! becomes a tensor; every operation is built under the source position of its operator, which
//! shape errors then name.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, ExprBlock, Ident, Stmt, Token, UnOp};

use crate::basis;
use crate::common::{
    ArrayLiteral, FnDef, as_power, at_sign_or, bracket, ident_of, power, site, split_crate,
    starts_fn, unary,
};
use crate::shorthand::{self, Shorthand};

/// What op! writes for PyTorch's `a @ b`.
const MATRIX_PRODUCT: &str = "in op! `*` composes, contracting the left operand's input axes \
    with the right one's output axes (`{ w } * x` applies a weight `w` of input and output axes \
    to `x`); a matrix product of two tensors of output axes only is \
    `einsum(\"ij;jk=>ik\", a, b)`";

/// The three forms of input.
enum Input {
    /// `fn name(args) { … }`, one or more.
    Fns(Vec<FnDef>),
    /// `[in graph;] let a = …; let b = …;`: bindings in the caller's scope.
    Lets {
        graph: Option<Expr>,
        lets: Vec<(Ident, Expr)>,
    },
    /// `[in graph;] expression`: a tensor.
    Expr { graph: Option<Expr>, expr: Expr },
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Input> {
        if starts_fn(input) {
            return FnDef::parse_all(input).map(Input::Fns);
        }
        let graph = if input.peek(Token![in]) {
            input.parse::<Token![in]>()?;
            let graph = input.parse()?;
            input.parse::<Token![;]>()?;
            Some(graph)
        } else {
            None
        };
        if input.peek(Token![let]) {
            let mut lets = Vec::new();
            while !input.is_empty() {
                input.parse::<Token![let]>()?;
                let name = input.parse()?;
                input.parse::<Token![=]>()?;
                let expr = input.parse()?;
                input.parse::<Token![;]>()?;
                lets.push((name, expr));
            }
            return Ok(Input::Lets { graph, lets });
        }
        let expr = input.parse()?;
        if input.peek(Token![;]) {
            input.parse::<Token![;]>()?;
        }
        if !input.is_empty() {
            return Err(
                input.error("op! takes one expression, `let` bindings, or function definitions")
            );
        }
        Ok(Input::Expr { graph, expr })
    }
}

pub fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let (krate, rest) = split_crate(input)?;
    let rest = basis::rewrite(shorthand::rewrite(rest)?)?;
    let input =
        syn::parse2::<Input>(rest.clone()).map_err(|e| at_sign_or(e, &rest, MATRIX_PRODUCT))?;
    match input {
        Input::Fns(fns) => {
            let defs = fns
                .iter()
                .map(|f| define(&krate, f))
                .collect::<syn::Result<Vec<_>>>()?;
            Ok(quote!(#(#defs)*))
        }
        Input::Expr { graph, expr } => {
            let mut expander = Expander::new(&krate, None);
            let value = expander.expr(&expr)?;
            expander.no_captures("an `op!` expression: bind it with `op! { let name = …; }`")?;
            let find = expander.find_graph(graph.as_ref(), expr.span())?;
            let g = &expander.graph;
            let params = expander.hoisted();
            Ok(quote!({
                let #g: #krate::Graph = #find;
                #params
                #krate::syntax::tensor(&#g, #value)
            }))
        }
        Input::Lets { graph, lets } => {
            let mut declared = HashSet::new();
            let mut out = TokenStream::new();
            for (name, expr) in &lets {
                let mut expander = Expander::new(&krate, None);
                expander.bound.extend(declared.iter().cloned());
                let value = expander.expr(expr)?;
                let find = expander.find_graph(graph.as_ref(), expr.span())?;
                declared.extend(expander.params.iter().map(|p| p.name.to_string()));
                declared.extend(expander.captures.iter().map(Ident::to_string));
                let captures = expander.declare_captures();
                let g = &expander.graph;
                let params = expander.hoisted();
                out.extend(quote!(
                    let #g: #krate::Graph = #find;
                    #params
                    #captures
                    let #name: #krate::Tensor = #krate::syntax::tensor(&#g, #value);
                ));
            }
            Ok(out)
        }
    }
}

/// A parameter declared inline: its name (the binding) and its `ParamDecl`.
struct Param {
    name: Ident,
    decl: TokenStream,
    site: TokenStream,
}

/// The expansion of one expression: the parameters it declares, the identifiers it reads that
/// may give the graph.
struct Expander<'a> {
    krate: &'a TokenStream,
    graph: Ident,
    params: Vec<Param>,
    candidates: Vec<Ident>,
    bound: HashSet<String>,
    /// The names a capture list binds, not yet declared.
    captures: Vec<Ident>,
    /// The `label` argument of a defined function: its parameters' labels start with it.
    label: Option<Ident>,
}

impl<'a> Expander<'a> {
    fn new(krate: &'a TokenStream, label: Option<Ident>) -> Expander<'a> {
        Expander {
            krate,
            graph: Ident::new("graph", Span::mixed_site()),
            params: Vec::new(),
            candidates: Vec::new(),
            bound: HashSet::new(),
            captures: Vec::new(),
            label,
        }
    }

    /// The graph: the one named, else the first tensor among the identifiers read. Inline
    /// parameters need one before the expression runs, so with them and no identifier to read
    /// the graph must be named.
    fn find_graph(&self, named: Option<&Expr>, span: Span) -> syn::Result<TokenStream> {
        let k = self.krate;
        match named {
            Some(graph) => Ok(quote!(#k::syntax::graph(&#graph))),
            None => {
                let candidates: Vec<&Ident> = self
                    .candidates
                    .iter()
                    .filter(|c| !self.bound.contains(&c.to_string()))
                    .collect();
                if let (Some(param), true) = (self.params.first(), candidates.is_empty()) {
                    return Err(syn::Error::new(
                        param.name.span(),
                        "the expression names no tensor to take the graph of its inline \
                         parameters from: write `op! { in graph; … }`",
                    ));
                }
                let at = site(span);
                Ok(quote!(#k::syntax::graph_of(&[#(#k::syntax::operand(&#candidates)),*], #at)))
            }
        }
    }

    /// `let name = decl.build(&graph, site);` for every parameter declared.
    fn hoisted(&self) -> TokenStream {
        let g = &self.graph;
        let lets = self.params.iter().map(|p| {
            let (name, decl, at) = (&p.name, &p.decl, &p.site);
            quote!(let #name: _ = #decl.build(&#g, #at);)
        });
        quote!(#(#lets)*)
    }

    /// `let name: Result<Capture, TensorError>;` for every name captured since the last call:
    /// declared before the binding whose expression assigns them.
    fn declare_captures(&mut self) -> TokenStream {
        let k = self.krate;
        let names = std::mem::take(&mut self.captures);
        quote!(#(let #names: ::core::result::Result<#k::Capture, #k::TensorError>;)*)
    }

    /// An error if the expression just expanded captures a name, which nothing after `what`
    /// could read.
    fn no_captures(&self, what: &str) -> syn::Result<()> {
        match self.captures.first() {
            None => Ok(()),
            Some(name) => Err(syn::Error::new(
                name.span(),
                format!(
                    "a capture list binds its names for the code after the expression; \
                     nothing comes after {what}"
                ),
            )),
        }
    }

    fn expr(&mut self, e: &Expr) -> syn::Result<TokenStream> {
        let k = self.krate;
        let g = self.graph.clone();
        Ok(match e {
            Expr::Lit(lit) => match &lit.lit {
                syn::Lit::Float(_) | syn::Lit::Int(_) => {
                    quote!(#k::syntax::Operand::Number((#lit) as f64))
                }
                syn::Lit::Str(_) => {
                    return Err(syn::Error::new(
                        e.span(),
                        "a string is a spec: it goes first, as in `einsum(\"ij;jk=>ik\", a, b)`",
                    ));
                }
                _ => return Err(syn::Error::new(e.span(), "not a number or a tensor")),
            },
            Expr::Path(path) => {
                if let Some(name) = ident_of(e)
                    && !self.bound.contains(&name.to_string())
                {
                    self.candidates.push(name.clone());
                }
                quote!(#k::syntax::operand(&#path))
            }
            Expr::Block(block) => {
                let name = self.declare(block)?;
                quote!(#k::syntax::operand(&#name))
            }
            Expr::Paren(p) => self.expr(&p.expr)?,
            Expr::Group(p) => self.expr(&p.expr)?,
            Expr::Unary(u) => {
                let at = site(u.op.span());
                match u.op {
                    UnOp::Neg(_) => {
                        let a = self.expr(&u.expr)?;
                        quote!(#k::syntax::negate(&#g, #a, #at))
                    }
                    UnOp::Not(_) => match shorthand::take(&u.expr)? {
                        Some((_, index)) => self.embed_static(&index, at)?,
                        None => {
                            let a = self.expr(&u.expr)?;
                            quote!(#k::syntax::unary(&#g, #k::UnaryOp::Not, None, #a, #at))
                        }
                    },
                    _ => {
                        return Err(syn::Error::new(
                            u.op.span(),
                            "a `*` before an operand: `a ** b` is a power; dereference outside \
                             op!",
                        ));
                    }
                }
            }
            Expr::Binary(b) => self.binary(b)?,
            Expr::Call(call) => match ident_of(&call.func) {
                Some(name) if is_primitive(&name.to_string()) => {
                    let args: Vec<&Expr> = call.args.iter().collect();
                    self.primitive(name, &args)?
                }
                _ => {
                    // Arguments holding op! syntax are built as tensors and passed by
                    // reference; the others are plain Rust (configuration values, references).
                    let func = &call.func;
                    let args = call
                        .args
                        .iter()
                        .map(|a| {
                            if needs_op(a) {
                                let t = self.expr(a)?;
                                Ok(quote!(&#k::syntax::tensor(&#g, #t)))
                            } else {
                                Ok(quote!(#a))
                            }
                        })
                        .collect::<syn::Result<Vec<_>>>()?;
                    quote!(#k::syntax::operand(&#func(#(#args),*)))
                }
            },
            Expr::MethodCall(m) if transforms(&m.receiver) => {
                let receiver = self.expr(&m.receiver)?;
                let (method, turbofish, args) = (&m.method, &m.turbofish, &m.args);
                quote!(#k::syntax::operand(
                    &#k::syntax::tensor(&#g, #receiver).#method #turbofish(#args)
                ))
            }
            Expr::Array(_) | Expr::Tuple(_) | Expr::Macro(_) if bracket(e)?.is_some() => {
                self.bracket(e)?
            }
            Expr::Cast(_) if basis::annotation(e).is_some() => self.bracket(e)?,
            other => quote!(#k::syntax::operand(&(#other))),
        })
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> syn::Result<TokenStream> {
        let k = self.krate;
        let g = self.graph.clone();
        let at = site(b.op.span());
        if matches!(b.op, BinOp::Add(_) | BinOp::Shl(_))
            && let Some((shorthand, right)) = shorthand::take(&b.right)?
        {
            return self.shorthand(&shorthand, &b.left, &right);
        }
        if let Some((base, exponent)) = as_power(b) {
            return self.expr(&power(base, exponent, b.op.span()));
        }
        let arith = |op: &str| -> TokenStream {
            let op = Ident::new(op, Span::call_site());
            quote!(#k::syntax::Arith::#op)
        };
        let (left, right) = (self.expr(&b.left)?, self.expr(&b.right)?);
        let compare = |op: &str, a: &TokenStream, c: &TokenStream| {
            let op = Ident::new(op, Span::call_site());
            quote!(#k::syntax::binary(&#g, #k::BinaryOp::#op, None, #a, #c, #at))
        };
        Ok(match b.op {
            BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) => {
                let op = match b.op {
                    BinOp::Add(_) => arith("Add"),
                    BinOp::Sub(_) => arith("Sub"),
                    BinOp::Mul(_) => arith("Mul"),
                    _ => arith("Div"),
                };
                quote!(#k::syntax::arith(&#g, #op, #left, #right, #at))
            }
            BinOp::Lt(_) => compare("Lt", &left, &right),
            BinOp::Gt(_) => compare("Lt", &right, &left),
            BinOp::Eq(_) => compare("Eq", &left, &right),
            BinOp::Ne(_) => compare("Ne", &left, &right),
            _ => {
                return Err(syn::Error::new(
                    b.op.span(),
                    "not an operator of op! (`+ - * /`, `**` for powers, `< > == !=`; \
                     functions for the rest)",
                ));
            }
        })
    }

    /// A shorthand applied (see `shorthand`): `left` its first operand (for `++^`, a tuple of
    /// them), `right` its second (`()` for a postfix one; for `@|`, the static index).
    fn shorthand(&mut self, s: &Shorthand, left: &Expr, right: &Expr) -> syn::Result<TokenStream> {
        let k = self.krate;
        let g = self.graph.clone();
        let at = site(s.span);
        let spec = &s.spec;
        let text = s.kind.text();
        let postfix = || match right {
            Expr::Tuple(t) if t.elems.is_empty() => Ok(()),
            _ => Err(syn::Error::new(
                s.span,
                format!(
                    "`{text}` and its spec end the expression they apply to: parenthesize it \
                     to go on, as in `(x {text} \"…\") * y`"
                ),
            )),
        };
        let built = match s.kind {
            shorthand::Kind::Einsum | shorthand::Kind::Tropical => {
                let (a, b) = (self.expr(left)?, self.expr(right)?);
                let max = s.kind == shorthand::Kind::Tropical;
                quote!(#k::syntax::einsum(&#g, #spec, ::std::vec![#a, #b], #max, #at))
            }
            shorthand::Kind::OuterSum => {
                let (a, b) = (self.expr(left)?, self.expr(right)?);
                quote!(#k::syntax::outer_sum(&#g, #spec, #a, #b, #at))
            }
            shorthand::Kind::Einsum1 | shorthand::Kind::Einmax1 => {
                postfix()?;
                let a = self.expr(left)?;
                let max = s.kind == shorthand::Kind::Einmax1;
                quote!(#k::syntax::einsum(&#g, #spec, ::std::vec![#a], #max, #at))
            }
            shorthand::Kind::Concat => {
                postfix()?;
                let operands = match left {
                    Expr::Tuple(t) if t.elems.is_empty() => {
                        return Err(syn::Error::new(
                            s.span,
                            "`++^` takes one operand, or a tuple of them, on its left",
                        ));
                    }
                    Expr::Tuple(t) => t.elems.iter().collect(),
                    other => vec![other],
                }
                .into_iter()
                .map(|a| self.expr(a))
                .collect::<syn::Result<Vec<_>>>()?;
                quote!(#k::syntax::concat(&#g, #spec, ::std::vec![#(#operands),*], #at))
            }
            shorthand::Kind::Slice => {
                let a = self.expr(left)?;
                quote!(#k::syntax::slice(&#g, #a, &(#right), #at))
            }
            // A marker written by hand: the rewrite puts `!@`'s after a `!`.
            shorthand::Kind::EmbedStatic => {
                return Err(syn::Error::new(
                    s.span,
                    "`!@` goes before a static index, alone: `x + !@step`",
                ));
            }
        };
        if s.captures.is_empty() {
            return Ok(built);
        }
        let t = Ident::new("captured", Span::mixed_site());
        let mut assigns = TokenStream::new();
        for capture in &s.captures {
            let label = capture.value();
            let mut name = syn::parse_str::<Ident>(&label).map_err(|_| {
                syn::Error::new(
                    capture.span(),
                    format!(
                        "a capture names a label or row variable of the spec and binds a \
                         variable of that name: an identifier (`n` for `..n..`), not '{label}'"
                    ),
                )
            })?;
            name.set_span(capture.span());
            if !self.bound.insert(label.clone()) {
                return Err(syn::Error::new(
                    capture.span(),
                    format!("'{label}' is declared twice"),
                ));
            }
            assigns.extend(quote!(#name = #k::Tensor::capture(&#t, #label);));
            self.captures.push(name);
        }
        Ok(quote!({
            let #t: #k::Tensor = #k::syntax::tensor(&#g, #built);
            #assigns
            #k::syntax::Operand::Tensor(#t)
        }))
    }

    /// `!@index`: the static index's value as a tensor, labelled as the index is written. The
    /// index is a Rust value; a literal or op! syntax cannot hold one, and is refused here
    /// rather than left to a type error inside the expansion.
    fn embed_static(&self, index: &Expr, at: TokenStream) -> syn::Result<TokenStream> {
        if !holds_value(index) {
            return Err(syn::Error::new(
                index.span(),
                "`!@` takes a static index, a Rust value such as `step` or `self.step` (a \
                 `StaticIndex`), not a literal or an op! expression",
            ));
        }
        let (k, g) = (self.krate, &self.graph);
        let label = index.to_token_stream().to_string();
        Ok(quote!(#k::syntax::embed_static(&#g, #label, &(#index), #at)))
    }

    /// A primitive applied: `relu(x)`, `relu("spec", x)`, `max(a, b)`, `einsum("spec", a, …)`.
    fn primitive(&mut self, name: &Ident, args: &[&Expr]) -> syn::Result<TokenStream> {
        let k = self.krate;
        let g = self.graph.clone();
        let at = site(name.span());
        let text = name.to_string();
        if text == "einsum" || text == "einmax" {
            let Some((spec, operands)) = args.split_first().filter(|(_, rest)| !rest.is_empty())
            else {
                return Err(syn::Error::new(
                    name.span(),
                    format!("{text} takes a spec and one or more tensors"),
                ));
            };
            let operands = operands
                .iter()
                .map(|a| self.expr(a))
                .collect::<syn::Result<Vec<_>>>()?;
            let max = text == "einmax";
            return Ok(quote!(
                #k::syntax::einsum(&#g, #spec, ::std::vec![#(#operands),*], #max, #at)
            ));
        }
        let (arity, kind) = arity(&text);
        let (spec, operands) = if args.len() == arity + 1 {
            (Some(args[0]), &args[1..])
        } else if args.len() == arity {
            (None, args)
        } else {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "{text} takes {arity} tensor{}, or a spec and {arity}",
                    if arity == 1 { "" } else { "s" }
                ),
            ));
        };
        let spec = match spec {
            Some(spec) => quote!(::core::option::Option::Some(#spec)),
            None => quote!(::core::option::Option::None),
        };
        let mut values = operands
            .iter()
            .map(|a| self.expr(a))
            .collect::<syn::Result<Vec<_>>>()?
            .into_iter();
        let mut next = || values.next().expect("the arity was checked");
        Ok(match kind {
            Kind::Unary(op) => {
                let op = Ident::new(op, name.span());
                let a = next();
                quote!(#k::syntax::unary(&#g, #k::UnaryOp::#op, #spec, #a, #at))
            }
            Kind::Activation(op) => {
                let op = Ident::new(op, name.span());
                let a = next();
                quote!(#k::syntax::activation(&#g, #k::Activation::#op, #spec, #a, #at))
            }
            Kind::Binary(op) => {
                let op = Ident::new(op, name.span());
                let (a, b) = (next(), next());
                quote!(#k::syntax::binary(&#g, #k::BinaryOp::#op, #spec, #a, #b, #at))
            }
            Kind::Ternary(op) => {
                let op = Ident::new(op, name.span());
                let (a, b, c) = (next(), next(), next());
                quote!(#k::syntax::ternary(&#g, #k::syntax::Ternary::#op, #spec, [#a, #b, #c], #at))
            }
        })
    }

    /// An array literal (numbers) or a block of tensors stacked along a new axis.
    fn bracket(&mut self, e: &Expr) -> syn::Result<TokenStream> {
        let k = self.krate;
        let g = self.graph.clone();
        let at = site(e.span());
        if let Some(literal) = ArrayLiteral::parse(e)?.or_else(|| ArrayLiteral::annotated_number(e))
        {
            let (dims, cells) = literal.tokens(k);
            let label = basis::label(e);
            return Ok(quote!(#k::syntax::literal(&#g, #label, #dims, #cells, #at)));
        }
        if let Some((name, _)) = basis::annotation(e) {
            return Err(syn::Error::new(
                name.span(),
                "a basis annotation labels an axis of an array literal of numbers \
                 (`([1.0, 2.0, 3.0] : rgb)`) or a number standing alone (`(2.0 : q)`), not a \
                 tensor",
            ));
        }
        let (kind, elems) = bracket(e)?.expect("a bracket");
        let operands = elems
            .iter()
            .map(|a| self.expr(a))
            .collect::<syn::Result<Vec<_>>>()?;
        let axis = kind.stack_axis(k);
        Ok(quote!(#k::syntax::stack(&#g, #axis, ::std::vec![#(#operands),*], #at)))
    }

    /// An inline declaration `{ name }`, `{ name = init; o = [..]; i = [..]; b = [..] }`: the
    /// parameter is hoisted, its name bound; the declaration reads as the parameter.
    fn declare(&mut self, block: &ExprBlock) -> syn::Result<Ident> {
        let k = self.krate;
        let shape_error = || {
            syn::Error::new(
                block.span(),
                "an inline parameter is `{ name }` or `{ name = init; o = [..]; i = [..] }`",
            )
        };
        let mut stmts = block.block.stmts.iter().map(|s| match s {
            Stmt::Expr(e, _) => Ok(e),
            _ => Err(shape_error()),
        });
        let first = stmts.next().ok_or_else(shape_error)??;
        let (name, init) = match first {
            Expr::Assign(a) => (ident_of(&a.left).ok_or_else(shape_error)?, Some(&*a.right)),
            other => (ident_of(other).ok_or_else(shape_error)?, None),
        };
        if !self.bound.insert(name.to_string()) {
            return Err(syn::Error::new(
                name.span(),
                format!("'{name}' is declared twice"),
            ));
        }
        let text = name.to_string();
        let label = match &self.label {
            Some(prefix) => quote!(::std::format!("{}.{}", #prefix, #text)),
            None => quote!(#text),
        };
        let mut decl = quote!(#k::syntax::ParamDecl::new(#label));
        if let Some(init) = init {
            let literal =
                ArrayLiteral::parse(init)?.or_else(|| ArrayLiteral::annotated_number(init));
            if literal.is_none()
                && let Some((name, _)) = basis::annotation(init)
            {
                return Err(syn::Error::new(name.span(), basis::FORM));
            }
            decl.extend(match literal {
                Some(literal) => {
                    let (dims, cells) = literal.tokens(k);
                    quote!(.values(#dims, #cells))
                }
                None => quote!(.init(#init)),
            });
        }
        for stmt in stmts {
            let Expr::Assign(field) = stmt? else {
                return Err(shape_error());
            };
            let key = ident_of(&field.left).ok_or_else(shape_error)?;
            let value = &field.right;
            decl.extend(match key.to_string().as_str() {
                "o" | "output_dims" => quote!(.output(#value)),
                "i" | "input_dims" => quote!(.input(#value)),
                "b" | "batch_dims" => quote!(.batch(#value)),
                "precision" => quote!(.precision(#value)),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown field '{key}' of an inline parameter (o or output_dims, i \
                             or input_dims, b or batch_dims, precision)"
                        ),
                    ));
                }
            });
        }
        self.params.push(Param {
            name: name.clone(),
            decl,
            site: site(block.span()),
        });
        Ok(name.clone())
    }
}

/// Whether an expression holds syntax of op! (so a method called on it is called on the tensor
/// it builds); plain Rust receivers are left alone.
fn transforms(e: &Expr) -> bool {
    match e {
        Expr::Block(_) | Expr::Binary(_) | Expr::Unary(_) | Expr::Array(_) | Expr::Tuple(_) => true,
        Expr::Cast(_) => basis::annotation(e).is_some(),
        Expr::Paren(p) => transforms(&p.expr),
        Expr::Call(c) => ident_of(&c.func).is_some_and(|n| is_primitive(&n.to_string())),
        Expr::MethodCall(m) => transforms(&m.receiver),
        _ => false,
    }
}

/// Whether an expression is a Rust value that may hold a static index: a name, a field, an
/// element, a call or a reference to one, not a literal or op! syntax.
fn holds_value(e: &Expr) -> bool {
    match e {
        Expr::Paren(p) => holds_value(&p.expr),
        Expr::Reference(r) => holds_value(&r.expr),
        Expr::Path(_) | Expr::Field(_) | Expr::Index(_) | Expr::Call(_) | Expr::MethodCall(_) => {
            !needs_op(e)
        }
        _ => false,
    }
}

/// Whether an expression holds syntax only op! reads (an inline parameter, a primitive called
/// by name, a power), so that as an argument of another function it is built as a tensor.
fn needs_op(e: &Expr) -> bool {
    match e {
        Expr::Block(_) => true,
        Expr::Binary(b) => {
            as_power(b).is_some()
                || shorthand::marked(&b.right)
                || needs_op(&b.left)
                || needs_op(&b.right)
        }
        Expr::Unary(u) => shorthand::marked(&u.expr) || needs_op(&u.expr),
        Expr::Paren(p) => needs_op(&p.expr),
        Expr::Call(c) => {
            ident_of(&c.func).is_some_and(|n| is_primitive(&n.to_string()))
                || c.args.iter().any(needs_op)
        }
        Expr::MethodCall(m) => needs_op(&m.receiver),
        Expr::Array(a) => a.elems.iter().any(needs_op),
        Expr::Tuple(t) => t.elems.iter().any(needs_op),
        Expr::Cast(_) => basis::annotation(e).is_some(),
        _ => false,
    }
}

enum Kind {
    Unary(&'static str),
    /// A function of one operand the IR composes from primitives (`Activation`).
    Activation(&'static str),
    Binary(&'static str),
    Ternary(&'static str),
}

fn is_primitive(name: &str) -> bool {
    name == "einsum" || name == "einmax" || arity_of(name).is_some()
}

fn arity(name: &str) -> (usize, Kind) {
    arity_of(name).expect("a primitive")
}

fn arity_of(name: &str) -> Option<(usize, Kind)> {
    if let Some(op) = unary(name) {
        return Some((1, Kind::Unary(op)));
    }
    Some(match name {
        "stop_gradient" => (1, Kind::Unary("StopGradient")),
        "sigmoid" => (1, Kind::Activation("Sigmoid")),
        "abs" => (1, Kind::Activation("Abs")),
        "gelu" => (1, Kind::Activation("Gelu")),
        "gelu_tanh" => (1, Kind::Activation("GeluTanh")),
        "silu" => (1, Kind::Activation("Silu")),
        "softplus" => (1, Kind::Activation("Softplus")),
        "add" => (2, Kind::Binary("Add")),
        "sub" => (2, Kind::Binary("Sub")),
        "pmul" => (2, Kind::Binary("Mul")),
        "div" => (2, Kind::Binary("Div")),
        "pow" => (2, Kind::Binary("Pow")),
        "max" => (2, Kind::Binary("Max")),
        "min" => (2, Kind::Binary("Min")),
        "lt" => (2, Kind::Binary("Lt")),
        "eq" => (2, Kind::Binary("Eq")),
        "ne" => (2, Kind::Binary("Ne")),
        "where_" => (3, Kind::Ternary("Where")),
        "fma" => (3, Kind::Ternary("Fma")),
        _ => return None,
    })
}

/// A function body: `let name = …;` bindings, then the expression it computes.
fn parse_body(input: ParseStream) -> syn::Result<(Vec<(Ident, Expr)>, Expr)> {
    let mut lets = Vec::new();
    while input.peek(Token![let]) {
        input.parse::<Token![let]>()?;
        let name = input.parse()?;
        input.parse::<Token![=]>()?;
        let init = input.parse()?;
        input.parse::<Token![;]>()?;
        lets.push((name, init));
    }
    if input.is_empty() {
        return Err(input.error("the body of an op! function ends with the expression it computes"));
    }
    let last = input.parse()?;
    if !input.is_empty() {
        return Err(input.error(
            "the body of an op! function is `let name = …;` bindings and a final expression",
        ));
    }
    Ok((lets, last))
}

/// A function defined with `op!`: without configuration arguments, `fn name(x: &Tensor, …) ->
/// Tensor` whose parameters are made at its first application on a graph and shared by every
/// later one there; with them, `fn name(config…) -> impl Fn(&Tensor, …) -> Tensor`, each call a
/// new layer whose parameters are made at its first application.
fn define(krate: &TokenStream, f: &FnDef) -> syn::Result<TokenStream> {
    let k = krate;
    let label = f
        .args
        .iter()
        .find(|a| a.ty.is_some() && a.name == "label")
        .map(|a| a.name.clone());
    let mut expander = Expander::new(k, label);
    let tensors = f.tensors();
    expander
        .bound
        .extend(f.args.iter().map(|a| a.name.to_string()));
    let (lets, last) = syn::parse::Parser::parse2(parse_body, f.body.clone())
        .map_err(|e| at_sign_or(e, &f.body, MATRIX_PRODUCT))?;
    let mut body = TokenStream::new();
    for (name, init) in &lets {
        let value = expander.expr(init)?;
        expander.bound.insert(name.to_string());
        let captures = expander.declare_captures();
        body.extend(quote!(#captures let #name: #k::syntax::Operand = #value;));
    }
    let result = expander.expr(&last)?;
    expander.no_captures("a function's last expression: bind it with `let name = …;` first")?;
    let g = &expander.graph;
    let first = tensors[0];
    let names: Vec<&Ident> = expander.params.iter().map(|p| &p.name).collect();
    let indices = 0..names.len();
    let builds = expander.params.iter().map(|p| {
        let (decl, at) = (&p.decl, &p.site);
        quote!(#decl.build(&#g, #at))
    });
    let params = quote!(::std::vec![#(#builds),*]);
    let (attrs, vis, name) = (&f.attrs, &f.vis, &f.name);
    let config = f.config();
    let params_ident = Ident::new("params", Span::mixed_site());
    let unpack = quote!(#(let #names: #k::Tensor = #params_ident[#indices].clone();)*);
    if config.is_empty() {
        let key = format!("{name}");
        let key_site = site(f.name.span());
        Ok(quote!(
            #(#attrs)*
            #vis fn #name(#(#tensors: &#k::Tensor),*) -> #k::Tensor {
                let #g: #k::Graph = #k::Tensor::graph(#first).clone();
                let #params_ident = #k::syntax::shared_params(
                    &#g,
                    ::core::concat!(::core::module_path!(), "::", #key, "@", #key_site),
                    || #params,
                );
                #unpack
                #body
                #k::syntax::tensor(&#g, #result)
            }
        ))
    } else {
        let cell = Ident::new("layer", Span::mixed_site());
        let refs = tensors.iter().map(|_| quote!(&#k::Tensor));
        Ok(quote!(
            #(#attrs)*
            #vis fn #name(#(#config),*) -> impl Fn(#(#refs),*) -> #k::Tensor {
                let #cell = ::std::cell::OnceCell::<::std::vec::Vec<#k::Tensor>>::new();
                move |#(#tensors: &#k::Tensor),*| -> #k::Tensor {
                    let #g: #k::Graph = #k::Tensor::graph(#first).clone();
                    let #params_ident = #cell.get_or_init(|| #params);
                    #unpack
                    #body
                    #k::syntax::tensor(&#g, #result)
                }
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `op! { body }` expanded, as the tensor crate's wrapper hands it over.
    fn expanded(body: &str) -> syn::Result<String> {
        expand(format!("(krate) {body}").parse().unwrap()).map(|e| e.to_string())
    }

    #[test]
    fn embedding_builds_the_index_as_written_and_labels_it_so() {
        let text = expanded("x + !@self.step").unwrap();
        let call = r#"embed_static (& graph , "self . step" , & (self . step) ,"#;
        assert!(text.contains(call), "{text}");
        // A plain `!` stays the logical not.
        assert!(expanded("!x").unwrap().contains("UnaryOp :: Not"));
    }

    #[test]
    fn embedding_refuses_what_cannot_hold_a_static_index() {
        for body in [
            "x + !@3",
            "x + !@{ w }",
            "x + !@relu(x)",
            "x + !@[1.0, 2.0]",
            "x + !@-step",
        ] {
            let message = expanded(body).unwrap_err().to_string();
            assert!(
                message.contains("`!@` takes a static index"),
                "{body}: {message}"
            );
        }
    }
}
