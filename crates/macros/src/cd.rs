//! `cd!`: assignments `target =<accumulator> formula [~logic: "…"]`, either as updates a routine
//! runs (a `Vec<Update>`), among the pieces of a routine's code (`t.forward`, `t.backprop`, block
//! comments, …: see `compose`), or, inside `fn name(x, …) { v =: …; g1 =+ …; }`, as the
//! statements of a new differentiable operation: its forward assignment, its gradient
//! assignments, and the intermediates (`{ name } =: …`) they read, in the order written.
//!
//! Accumulators are `=` then `:` to start from the accumulator's neutral element, then the
//! operator: `=:` sets, `=+`, `=-`, `=*`, `=/`, `=**`, `=max` (or `=@^`), `=min` (or `=@-`),
//! `=?/` (relu gate), `=?^` (sat01 gate), `=||`, `=&&`.

use std::collections::HashSet;

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};
use quote::quote;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Ident, UnOp};

use crate::common::{
    FnDef, as_power, at_sign_or, ident_of, power, site, slot, split_crate, starts_fn, unary,
};
use crate::compose;

/// What cd! writes for PyTorch's `a @ b`.
const MATRIX_PRODUCT: &str = "in cd! a matrix product is `*` under `~logic: \"@\"` (`c =:+ a * \
    b ~logic: \"@\"` contracts `a`'s input axes with `b`'s output axes), or `*` under an einsum \
    spec (`~logic: \"ij;jk=>ik\"`)";

pub fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let (krate, rest) = split_crate(input)?;
    let fns = syn::parse::Parser::parse2(
        |input: syn::parse::ParseStream| {
            if starts_fn(input) {
                FnDef::parse_all(input).map(Some)
            } else {
                input.parse::<TokenStream>().map(|_| None)
            }
        },
        rest.clone(),
    )?;
    if let Some(fns) = fns {
        let defs = fns
            .iter()
            .map(|f| define(&krate, f))
            .collect::<syn::Result<Vec<_>>>()?;
        return Ok(quote!(#(#defs)*));
    }
    updates(&krate, rest)
}

/// What an assignment writes.
pub(crate) enum Target {
    /// A tensor (an expression).
    Tensor(Expr),
    /// `{ name }`: an intermediate declared here.
    Inline(Ident),
    /// A slot of an operation definition: `v`, `g`, `v1`…, `g1`….
    Slot {
        name: Ident,
        gradient: bool,
        operand: usize,
    },
}

/// `=`, `:` or not, the operator (a `Binop` variant's name; none for `=:` alone).
pub(crate) struct Accumulator {
    pub initialize: bool,
    pub op: Option<&'static str>,
    pub span: Span,
}

/// `target =<accumulator> rhs [~logic: …]`.
pub(crate) struct Assignment {
    pub target: Target,
    pub accum: Accumulator,
    pub rhs: Expr,
    pub logic: Option<Expr>,
    pub span: Span,
}

/// Splits tokens at top-level `;`.
pub(crate) fn statements(tokens: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut out = vec![Vec::new()];
    for t in tokens {
        match &t {
            TokenTree::Punct(p) if p.as_char() == ';' => out.push(Vec::new()),
            _ => out.last_mut().expect("one at least").push(t),
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

pub(crate) fn punct(t: Option<&TokenTree>) -> Option<char> {
    match t {
        Some(TokenTree::Punct(p)) => Some(p.as_char()),
        _ => None,
    }
}

pub(crate) fn parse_assignment(tokens: Vec<TokenTree>) -> syn::Result<Assignment> {
    let span = tokens[0].span();
    let Some(eq) = tokens.iter().position(|t| punct(Some(t)) == Some('=')) else {
        return Err(syn::Error::new(
            span,
            "expected an assignment `target =<accumulator> formula` (`=:` sets, `=+` adds, …)",
        ));
    };
    let lhs: Vec<TokenTree> = tokens[..eq].to_vec();
    if let Some(c @ ('+' | '-' | '*' | '/')) = punct(lhs.last()) {
        return Err(syn::Error::new(
            lhs.last().expect("a token").span(),
            format!("the accumulator follows `=`: write `={c}`, not `{c}=`"),
        ));
    }
    if lhs.is_empty() {
        return Err(syn::Error::new(
            tokens[eq].span(),
            "an assignment needs a target",
        ));
    }
    let mut i = eq + 1;
    let initialize = punct(tokens.get(i)) == Some(':');
    if initialize {
        i += 1;
    }
    let at = |i: usize| tokens.get(i);
    let accum_span = at(i).map_or(tokens[eq].span(), TokenTree::span);
    // An accumulator is written against `=` or `=:` (`=:-`); after a space, a sign belongs to
    // the formula (`=: -x` sets `-x`).
    let against = matches!(at(i - 1), Some(TokenTree::Punct(p)) if p.spacing() == Spacing::Joint);
    let (op, width) = match (at(i), punct(at(i + 1))) {
        (Some(TokenTree::Punct(_)), _) if !against => (None, 0),
        (Some(TokenTree::Punct(p)), next) => match (p.as_char(), next) {
            ('+', _) => (Some("Add"), 1),
            ('-', _) => (Some("Sub"), 1),
            ('/', _) => (Some("Div"), 1),
            ('*', Some('*')) => (Some("Pow"), 2),
            ('*', _) => (Some("Mul"), 1),
            ('@', Some('^')) => (Some("Max"), 2),
            ('@', Some('-')) => (Some("Min"), 2),
            ('?', Some('/')) => (Some("ReluGate"), 2),
            ('?', Some('^')) => (Some("Sat01Gate"), 2),
            ('|', Some('|')) => (Some("Or"), 2),
            ('&', Some('&')) => (Some("And"), 2),
            (c, _) => {
                return Err(syn::Error::new(
                    p.span(),
                    format!(
                        "unknown accumulator `={}{c}`: `=:` sets; `=+ =- =* =/ =** =max =min \
                         =?/ =?^ =|| =&&` accumulate, with `:` after `=` starting from the \
                         neutral element (`=:+`)",
                        if initialize { ":" } else { "" }
                    ),
                ));
            }
        },
        (Some(TokenTree::Ident(word)), _) if !matches!(at(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis) => {
            match word.to_string().as_str() {
                "max" => (Some("Max"), 1),
                "min" => (Some("Min"), 1),
                _ => (None, 0),
            }
        }
        _ => (None, 0),
    };
    if op.is_none() && !initialize {
        return Err(syn::Error::new(
            tokens[eq].span(),
            "unknown accumulator `=`: `=:` sets; `=+ =- =* =/ =** =max =min =?/ =?^ =|| =&&` \
             accumulate, with `:` after `=` starting from the neutral element (`=:+`)",
        ));
    }
    let accum_span = if op.is_some() {
        accum_span
    } else {
        tokens[eq].span()
    };
    i += width;
    let rest = &tokens[i..];
    let tilde = rest.iter().position(|t| punct(Some(t)) == Some('~'));
    let (rhs, logic) = match tilde {
        Some(t) => {
            let after = &rest[t + 1..];
            match (after.first(), punct(after.get(1))) {
                (Some(TokenTree::Ident(word)), Some(':')) if word == "logic" => {
                    let logic: TokenStream = after[2..].iter().cloned().collect();
                    (&rest[..t], Some(syn::parse2::<Expr>(logic)?))
                }
                _ => {
                    return Err(syn::Error::new(
                        rest[t].span(),
                        "after `~`, `logic: \".\"` (pointwise), `\"@\"` (composition), `\"T\"` \
                         (transposition) or an einsum spec",
                    ));
                }
            }
        }
        None => (rest, None),
    };
    if rhs.is_empty() {
        return Err(syn::Error::new(accum_span, "an assignment needs a formula"));
    }
    let rhs: TokenStream = rhs.iter().cloned().collect();
    let rhs = syn::parse2::<Expr>(rhs.clone()).map_err(|e| at_sign_or(e, &rhs, MATRIX_PRODUCT))?;
    let target = match lhs.as_slice() {
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::Brace => {
            let name = syn::parse2::<Ident>(g.stream()).map_err(|_| {
                syn::Error::new(g.span(), "`{ name }` declares an intermediate tensor")
            })?;
            Target::Inline(name)
        }
        _ => {
            let e = syn::parse2::<Expr>(lhs.iter().cloned().collect())?;
            match ident_of(&e).and_then(|n| Some((n.clone(), slot(&n.to_string())?))) {
                Some((name, (gradient, operand))) => Target::Slot {
                    name,
                    gradient,
                    operand,
                },
                None => Target::Tensor(e),
            }
        }
    };
    Ok(Assignment {
        target,
        accum: Accumulator {
            initialize,
            op,
            span: accum_span,
        },
        rhs,
        logic,
        span,
    })
}

/// The logic given as a string literal, checked: `Some(text)`.
fn literal_logic(logic: &Option<Expr>) -> Option<String> {
    match logic {
        Some(Expr::Lit(l)) => match &l.lit {
            syn::Lit::Str(s) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

/// OCANNL rejects `/` and `**` under `~logic:"@"`: they read as a matrix inverse or power but
/// would compute a contraction of quotients or powers.
fn check_composition(a: &Assignment) -> syn::Result<()> {
    if literal_logic(&a.logic).as_deref() != Some("@") {
        return Ok(());
    }
    let mut root = &a.rhs;
    while let Expr::Paren(p) = root {
        root = &p.expr;
    }
    let offending = match root {
        Expr::Binary(b) if matches!(b.op, BinOp::Div(_)) => Some(("/", b.op.span())),
        Expr::Binary(b) if as_power(b).is_some() => Some(("**", b.op.span())),
        Expr::Call(c) => match ident_of(&c.func).map(|n| n.to_string()).as_deref() {
            Some("div") => Some(("div", c.func.span())),
            Some("pow") => Some(("pow", c.func.span())),
            _ => None,
        },
        _ => None,
    };
    match offending {
        Some((op, span)) => Err(syn::Error::new(
            span,
            format!(
                "`{op}` under `~logic:\"@\"` reads as a matrix {} but would sum \
                 {} over the contracted axes; use `~logic:\".\"` for the pointwise operation or \
                 an einsum spec for a custom contraction",
                if op == "/" || op == "div" {
                    "inverse"
                } else {
                    "power"
                },
                if op == "/" || op == "div" {
                    "quotients"
                } else {
                    "powers"
                }
            ),
        )),
        None => Ok(()),
    }
}

fn logic_tokens(k: &TokenStream, logic: &Expr) -> TokenStream {
    match literal_logic(&Some(logic.clone())).as_deref() {
        Some(".") => quote!(#k::OpLogic::Pointwise),
        Some("@") => quote!(#k::OpLogic::Compose),
        Some("T") => quote!(#k::OpLogic::Transpose),
        Some(spec) => quote!(#k::OpLogic::Spec(::std::string::String::from(#spec))),
        None => quote!(#k::syntax::logic(&#logic)),
    }
}

/// Where a formula is: in updates (intermediates declared so far), or in a statement of an
/// operation definition.
pub(crate) enum Scope<'a> {
    Updates,
    Definition(&'a Body<'a>),
}

/// What a statement of an operation definition names, where it stands: the operation's tensor
/// arguments, the intermediates declared before it, and the pass it runs in. Statements run in
/// the order written, so a name is read only after the statement writing it.
pub(crate) struct Body<'a> {
    /// The tensor arguments, in order.
    tensors: &'a [&'a Ident],
    /// Every intermediate the definition declares, in order.
    declared: Vec<&'a Ident>,
    /// How many of them are declared before the statement.
    known: usize,
    /// Whether the statement comes after the forward assignment: in the backward pass, where
    /// `v` and `g` are computed.
    backward: bool,
}

pub(crate) fn formula(k: &TokenStream, e: &Expr, scope: &Scope) -> syn::Result<TokenStream> {
    let rec = |e: &Expr| formula(k, e, scope);
    Ok(match e {
        Expr::Lit(lit) => match &lit.lit {
            syn::Lit::Float(_) | syn::Lit::Int(_) => quote!(#k::Formula::Const((#lit) as f64)),
            _ => return Err(syn::Error::new(e.span(), "not a number or a tensor")),
        },
        Expr::Path(path) => match ident_of(e) {
            Some(name) => identifier(k, name, scope)?,
            None => quote!(#k::syntax::term(&#path)),
        },
        Expr::Field(f) => match &f.member {
            syn::Member::Named(m) if m == "grad" => {
                if let Scope::Definition(_) = scope {
                    return Err(syn::Error::new(
                        m.span(),
                        "inside an operation definition, gradients are the slots g, g1, g2, g3",
                    ));
                }
                let base = &f.base;
                quote!(#k::syntax::grad(&#base))
            }
            syn::Member::Named(m) if m == "value" => {
                let base = &f.base;
                quote!(#k::syntax::term(&#base))
            }
            _ => quote!(#k::syntax::term(&(#f))),
        },
        Expr::Paren(p) => rec(&p.expr)?,
        Expr::Group(p) => rec(&p.expr)?,
        Expr::Unary(u) => {
            let a = rec(&u.expr)?;
            match u.op {
                UnOp::Neg(_) => quote!(-(#a)),
                UnOp::Not(_) => quote!((#a).apply(#k::syntax::Unop::Not)),
                _ => {
                    return Err(syn::Error::new(
                        u.op.span(),
                        "a `*` before an operand: `a ** b` is a power",
                    ));
                }
            }
        }
        Expr::Binary(b) => {
            if let Some((base, exponent)) = as_power(b) {
                return formula(k, &power(base, exponent, b.op.span()), scope);
            }
            let (x, y) = (rec(&b.left)?, rec(&b.right)?);
            let binop = |op: &str, x: &TokenStream, y: &TokenStream| {
                let op = Ident::new(op, Span::call_site());
                quote!((#x).binop(#k::syntax::Binop::#op, #y))
            };
            match b.op {
                BinOp::Add(_) => quote!((#x) + (#y)),
                BinOp::Sub(_) => quote!((#x) - (#y)),
                BinOp::Mul(_) => quote!((#x) * (#y)),
                BinOp::Div(_) => quote!((#x) / (#y)),
                BinOp::Rem(_) => binop("Mod", &x, &y),
                BinOp::Lt(_) => binop("Lt", &x, &y),
                BinOp::Gt(_) => binop("Lt", &y, &x),
                BinOp::Eq(_) => binop("Eq", &x, &y),
                BinOp::Ne(_) => binop("Ne", &x, &y),
                BinOp::And(_) => binop("And", &x, &y),
                BinOp::Or(_) => binop("Or", &x, &y),
                _ => {
                    return Err(syn::Error::new(
                        b.op.span(),
                        "not an operator of cd! (`+ - * / % **`, `< > == !=`, `&& ||`; \
                         functions for the rest)",
                    ));
                }
            }
        }
        Expr::Call(call) => match ident_of(&call.func) {
            Some(name) if primitive(&name.to_string()).is_some() => {
                let (arity, op) = primitive(&name.to_string()).expect("a primitive");
                if call.args.len() != arity {
                    return Err(syn::Error::new(
                        name.span(),
                        format!(
                            "{name} takes {arity} operand{} (its projections are the \
                             assignment's)",
                            if arity == 1 { "" } else { "s" }
                        ),
                    ));
                }
                let args = call.args.iter().map(rec).collect::<syn::Result<Vec<_>>>()?;
                let op = Ident::new(op, name.span());
                match (arity, &args[..]) {
                    (1, [a]) if op == "Identity" => a.clone(),
                    (1, [a]) => quote!((#a).apply(#k::syntax::Unop::#op)),
                    (2, [a, b]) => quote!((#a).binop(#k::syntax::Binop::#op, #b)),
                    (3, [a, b, c]) if op == "Where" => quote!((#a).select(#b, #c)),
                    (3, [a, b, c]) => quote!(#k::Formula::Ternop(
                        #k::syntax::Ternop::#op,
                        ::std::boxed::Box::new(#a),
                        ::std::boxed::Box::new(#b),
                        ::std::boxed::Box::new(#c),
                    )),
                    _ => unreachable!("arity checked"),
                }
            }
            _ => quote!(#k::syntax::term(&(#call))),
        },
        other => quote!(#k::syntax::term(&(#other))),
    })
}

/// A slot name (`v1`, `g`, …) read or written outside an operation definition.
fn slot_outside_definition(name: &Ident) -> syn::Error {
    syn::Error::new(
        name.span(),
        format!(
            "slot name `{name}` outside an operation definition: slots (v, v1..v3, g, g1..g3) \
             name an operation's tensors inside `cd! {{ fn name(x) {{ v =: …; g1 =+ … }} }}`"
        ),
    )
}

fn identifier(k: &TokenStream, name: &Ident, scope: &Scope) -> syn::Result<TokenStream> {
    let text = name.to_string();
    match scope {
        Scope::Updates => {
            if slot(&text).is_some() {
                return Err(slot_outside_definition(name));
            }
            Ok(quote!(#k::syntax::term(&#name)))
        }
        Scope::Definition(body) => {
            if let Some(i) = body.tensors.iter().position(|t| *t == name) {
                return Ok(quote!(#k::Formula::input(#i)));
            }
            if let Some(j) = body.declared.iter().position(|d| *d == name) {
                if j < body.known {
                    return Ok(quote!(#k::Formula::intermediate(#j)));
                }
                return Err(syn::Error::new(
                    name.span(),
                    format!(
                        "`{name}` is read before `{{ {name} }} =…` writes it: an operation's \
                         statements run in the order written"
                    ),
                ));
            }
            let forward_reads = "the forward pass (the statements up to `v =: …`) reads the \
                operands v1, v2, v3 and the intermediates before it";
            match slot(&text) {
                Some((false, 0)) if !body.backward => Err(syn::Error::new(
                    name.span(),
                    format!("`v` is read before the forward assignment writes it: {forward_reads}"),
                )),
                Some((true, _)) if !body.backward => Err(syn::Error::new(
                    name.span(),
                    format!("{forward_reads}, not gradients"),
                )),
                Some((true, n)) if n > 0 => Err(syn::Error::new(
                    name.span(),
                    format!("`{text}` is written by a gradient assignment, not read"),
                )),
                Some((false, 0)) => Ok(quote!(#k::Formula::result())),
                Some((true, _)) => Ok(quote!(#k::Formula::result_grad())),
                Some((false, n)) if n <= body.tensors.len() => {
                    let i = n - 1;
                    Ok(quote!(#k::Formula::input(#i)))
                }
                Some((false, _)) => Err(operands_only(name, body.tensors.len())),
                None if named_slot(&text).is_some() => Err(syn::Error::new(
                    name.span(),
                    format!(
                        "unknown intermediate `{name}`: no `{{ {name} }} =: …` of the operation \
                         declares it"
                    ),
                )),
                None => Ok(quote!(#k::syntax::term(&#name))),
            }
        }
    }
}

/// `name` naming an operand or its slot that an operation of `arity` operands lacks.
fn operands_only(name: &Ident, arity: usize) -> syn::Error {
    syn::Error::new(
        name.span(),
        format!(
            "`{name}`: the operation has {arity} operand{}",
            if arity == 1 { "" } else { "s" }
        ),
    )
}

/// The slot OCANNL's naming gives an intermediate of an operation, as `slot` counts them: 0 for
/// the result's (`lhs_…`, `…_lhs`), `n` for operand `n`'s (`rhsn_…`, `…_rhsn`; `rhs_…` and
/// `…_rhs` are operand 1's); `None` for a name without one.
fn named_slot(name: &str) -> Option<usize> {
    [
        ("lhs", 0),
        ("rhs", 1),
        ("rhs1", 1),
        ("rhs2", 2),
        ("rhs3", 3),
    ]
    .into_iter()
    .find(|(word, _)| name.starts_with(&format!("{word}_")) || name.ends_with(&format!("_{word}")))
    .map(|(_, operand)| operand)
}

/// A primitive by name: its arity and its `Unop`/`Binop`/`Ternop` variant.
fn primitive(name: &str) -> Option<(usize, &'static str)> {
    if let Some(op) = unary(name) {
        return Some((1, op));
    }
    Some(match name {
        "id" => (1, "Identity"),
        "fst" => (2, "Arg1"),
        "snd" => (2, "Arg2"),
        "add" => (2, "Add"),
        "sub" => (2, "Sub"),
        "mul" => (2, "Mul"),
        "div" => (2, "Div"),
        "pow" => (2, "Pow"),
        "max" => (2, "Max"),
        "min" => (2, "Min"),
        "relu_gate" => (2, "ReluGate"),
        "sat01_gate" => (2, "Sat01Gate"),
        "lt" => (2, "Lt"),
        "eq" => (2, "Eq"),
        "ne" => (2, "Ne"),
        "or_" => (2, "Or"),
        "and_" => (2, "And"),
        "mod_" => (2, "Mod"),
        "where_" => (3, "Where"),
        "fma" => (3, "Fma"),
        _ => return None,
    })
}

/// Updates: `[in graph;] a =… f; b =… f; …` as a `Vec<Update>`; with a piece among them
/// (`t.forward`, `t.backprop`, `t.zero_grads`, a seed `t.grad =: …`, a block comment
/// `~~("…"; …)` or code spliced in), a routine's code as a `Vec<Piece>` (see `compose`).
fn updates(k: &TokenStream, tokens: TokenStream) -> syn::Result<TokenStream> {
    let mut tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut graph = None;
    if matches!(tokens.first(), Some(TokenTree::Ident(i)) if i == "in") {
        let end = tokens
            .iter()
            .position(|t| punct(Some(t)) == Some(';'))
            .ok_or_else(|| syn::Error::new(tokens[0].span(), "`in graph;` ends with `;`"))?;
        let named: TokenStream = tokens[1..end].iter().cloned().collect();
        graph = Some(syn::parse2::<Expr>(named)?);
        tokens.drain(..=end);
    }
    let statements = statements(tokens.into_iter().collect())
        .into_iter()
        .map(compose::parse_statement)
        .collect::<syn::Result<Vec<_>>>()?;
    let mut declared = HashSet::new();
    let plain: Option<Vec<&Assignment>> = statements
        .iter()
        .map(|s| match s {
            compose::Statement::Assign(a) => Some(&**a),
            _ => None,
        })
        .collect();
    let Some(assignments) = plain else {
        return compose::expand(k, &statements, &graph, &mut declared);
    };
    let updates = Ident::new("updates", Span::mixed_site());
    let mut body = TokenStream::new();
    for a in assignments {
        let (bindings, update) = update(k, a, &mut declared, &graph)?;
        body.extend(quote!(
            #bindings
            #updates.push(#update);
        ));
    }
    Ok(quote!({
        let mut #updates: ::std::vec::Vec<#k::Update> = ::std::vec::Vec::new();
        #body
        #updates
    }))
}

/// The update an assignment writes: the bindings it needs first (its formula, and the
/// intermediate it declares, named in `declared`), and the `Update` itself.
pub(crate) fn update(
    k: &TokenStream,
    a: &Assignment,
    declared: &mut HashSet<String>,
    graph: &Option<Expr>,
) -> syn::Result<(TokenStream, TokenStream)> {
    check_composition(a)?;
    let f = formula(k, &a.rhs, &Scope::Updates)?;
    let at = site(a.accum.span);
    let value = Ident::new("formula", Span::mixed_site());
    let (target_binding, target) = match &a.target {
        Target::Tensor(Expr::Field(field)) if matches!(&field.member, syn::Member::Named(m) if m == "grad") =>
        {
            return Err(syn::Error::new(
                field.member.span(),
                "updates write tensors' values; a gradient is seeded with `=:` (`t.grad =: 1` \
                 before `t.backprop`), and accumulated by backprop and by operation definitions \
                 (`g1 =+ …`)",
            ));
        }
        Target::Tensor(e) => (quote!(), quote!(&#e)),
        Target::Slot { name, .. } => return Err(slot_outside_definition(name)),
        Target::Inline(name) => {
            let text = name.to_string();
            if !declared.insert(text.clone()) {
                return Err(syn::Error::new(
                    name.span(),
                    format!("'{name}' is declared twice"),
                ));
            }
            let find = match graph {
                Some(g) => quote!(#k::syntax::graph(&#g)),
                None => quote!(#k::syntax::graph_of_terms(&[&#value], #text, #at)),
            };
            (
                quote!(let #name: #k::Tensor = #k::syntax::intermediate(&#find, #text, &#value);),
                quote!(&#name),
            )
        }
    };
    let constructor = match (a.accum.initialize, a.accum.op) {
        (true, None) => quote!(#k::Update::set(#target, #value)),
        (true, Some(op)) => {
            let op = Ident::new(op, a.accum.span);
            quote!(#k::Update::reduce(#target, #k::syntax::Binop::#op, #value))
        }
        (false, Some(op)) => {
            let op = Ident::new(op, a.accum.span);
            quote!(#k::Update::accumulate(#target, #k::syntax::Binop::#op, #value))
        }
        (false, None) => unreachable!("rejected when parsed"),
    };
    // Without a logic, pointwise (but for tensors of one cell: `Update::with_default_logic`).
    let related = match (&a.logic, &a.target) {
        (Some(logic), _) => {
            let logic = logic_tokens(k, logic);
            quote!(#constructor.with_logic(#logic))
        }
        (None, _) => quote!(#constructor.with_default_logic()),
    };
    let update = quote!(#k::Tensor::graph(#target).at_site(#at, || #related));
    Ok((
        quote!(
            let #value: #k::Formula = #f;
            #target_binding
        ),
        update,
    ))
}

/// An operation defined by its statements, in the order they run: the intermediates of the
/// forward pass (`{ name } =:… formula`), the forward assignment (`v =:… formula [~logic: …]`),
/// then the intermediates of the backward pass and the gradient assignments (`gN =+ formula`).
fn define(k: &TokenStream, f: &FnDef) -> syn::Result<TokenStream> {
    let tensors = f.tensors();
    let assignments = statements(f.body.clone())
        .into_iter()
        .map(parse_assignment)
        .collect::<syn::Result<Vec<_>>>()?;
    let mut body = Body {
        tensors: &tensors,
        declared: declarations(f, &assignments)?,
        known: 0,
        backward: false,
    };
    let mut forward = None;
    let mut gradients = Vec::new();
    let mut intermediates = Vec::new();
    for a in &assignments {
        check_composition(a)?;
        let writes_result = matches!(
            a.target,
            Target::Slot {
                gradient: false,
                operand: 0,
                ..
            }
        );
        if let (Some(logic), false) = (&a.logic, writes_result) {
            return Err(syn::Error::new(
                logic.span(),
                "only the forward assignment takes `~logic`: an operation's other statements \
                 use its projections",
            ));
        }
        match &a.target {
            Target::Slot {
                name,
                gradient: false,
                operand: 0,
            } => {
                if body.backward {
                    return Err(syn::Error::new(name.span(), "a second forward assignment"));
                }
                from_neutral(a, "the result")?;
                let value = formula(k, &a.rhs, &Scope::Definition(&body))?;
                let op = Ident::new(a.accum.op.unwrap_or("Arg2"), a.accum.span);
                let logic = match &a.logic {
                    Some(logic) => logic_tokens(k, logic),
                    None => quote!(#k::OpLogic::Pointwise),
                };
                forward = Some((quote!(#k::syntax::Binop::#op), value, logic));
                body.backward = true;
            }
            Target::Slot {
                name,
                gradient: true,
                operand,
            } if *operand > 0 => {
                if *operand > tensors.len() {
                    return Err(operands_only(name, tensors.len()));
                }
                if !body.backward {
                    return Err(syn::Error::new(
                        name.span(),
                        format!(
                            "a gradient is computed after the result: write `{name} =+ …` after \
                             `v =: …`"
                        ),
                    ));
                }
                let value = formula(k, &a.rhs, &Scope::Definition(&body))?;
                let value = match (a.accum.initialize, a.accum.op) {
                    (false, Some("Add")) => value,
                    (false, Some("Sub")) => quote!(-(#value)),
                    _ => {
                        return Err(syn::Error::new(
                            a.accum.span,
                            "a gradient accumulates: write `=+` (or `=-`)",
                        ));
                    }
                };
                let i = operand - 1;
                gradients.push(quote!((#i, #value)));
            }
            Target::Inline(name) => {
                from_neutral(a, "an intermediate")?;
                let operand = named_slot(&name.to_string()).unwrap_or(0);
                let slot = match operand {
                    0 => quote!(#k::syntax::Slot::Lhs),
                    n if n <= tensors.len() => {
                        let i = n - 1;
                        quote!(#k::syntax::Slot::Rhs(#i))
                    }
                    _ => return Err(operands_only(name, tensors.len())),
                };
                let value = formula(k, &a.rhs, &Scope::Definition(&body))?;
                let op = Ident::new(a.accum.op.unwrap_or("Arg2"), a.accum.span);
                let (text, backward) = (name.to_string(), body.backward);
                intermediates.push(quote!(#k::define::Intermediate {
                    name: ::std::string::String::from(#text),
                    slot: #slot,
                    accum: #k::syntax::Binop::#op,
                    formula: #value,
                    backward: #backward,
                }));
                body.known += 1;
            }
            _ => {
                return Err(syn::Error::new(
                    a.span,
                    "an operation definition assigns `v` (its result), `g1`, `g2`, `g3` (its \
                     operands' gradients) and each intermediate once, where `{ name } =: …` \
                     declares it",
                ));
            }
        }
    }
    let Some((accum, forward, logic)) = forward else {
        return Err(syn::Error::new(
            f.name.span(),
            "an operation definition needs a forward assignment `v =: …`",
        ));
    };
    let (attrs, vis, name) = (&f.attrs, &f.vis, &f.name);
    let text = name.to_string();
    let args = f.args.iter().map(|a| {
        let n = &a.name;
        match &a.ty {
            Some(ty) => quote!(#n: #ty),
            None => quote!(#n: &#k::Tensor),
        }
    });
    let first = tensors[0];
    let g = Ident::new("graph", Span::mixed_site());
    let at = site(f.name.span());
    Ok(quote!(
        #(#attrs)*
        #vis fn #name(#(#args),*) -> #k::Tensor {
            let #g: #k::Graph = #k::Tensor::graph(#first).clone();
            #g.at_site(#at, || {
                #g.define_with(
                    #text,
                    &[#(#tensors),*],
                    #k::Definition {
                        logic: #logic,
                        accum: #accum,
                        forward: #forward,
                        gradients: ::std::vec![#(#gradients),*],
                    },
                    ::std::vec![#(#intermediates),*],
                )
            })
        }
    ))
}

/// That `a`, writing `what` (the result or an intermediate), starts from the accumulator's
/// neutral element: a definition writes each once, and what it held before is nothing the
/// definition computed.
fn from_neutral(a: &Assignment, what: &str) -> syn::Result<()> {
    if a.accum.initialize {
        return Ok(());
    }
    Err(syn::Error::new(
        a.accum.span,
        format!(
            "{what} starts from the accumulator's neutral element: write `=:` (set) or `=:+`, \
             `=:max`, …"
        ),
    ))
}

/// The intermediates an operation definition declares (`{ name } =: …`), in order: each once,
/// under a name no argument or slot of the operation has.
fn declarations<'a>(f: &FnDef, assignments: &'a [Assignment]) -> syn::Result<Vec<&'a Ident>> {
    let mut declared: Vec<&Ident> = Vec::new();
    for a in assignments {
        let Target::Inline(name) = &a.target else {
            continue;
        };
        if declared.contains(&name) {
            return Err(syn::Error::new(
                name.span(),
                format!("'{name}' is declared twice"),
            ));
        }
        if f.args.iter().any(|arg| arg.name == *name) || slot(&name.to_string()).is_some() {
            return Err(syn::Error::new(
                name.span(),
                format!("`{name}` already names an argument or slot of the operation"),
            ));
        }
        declared.push(name);
    }
    Ok(declared)
}
