//! `cd!`'s routines composed of pieces: besides assignments, a statement may be a tensor's
//! forward, backprop or zeroed gradients (`t.forward`, `t.backprop`, `t.zero_grads`), the seed
//! of a backprop (`t.grad =: formula`), a block comment scoping statements (`~~("text" t
//! t.grad; statements…)`, its words strings and tensors, which it names by their labels), or
//! any other expression, code spliced in (`Vec<Update>`, `Vec<Piece>`, …). With one of them
//! among its statements, `cd!` gives a `Vec<Piece>`, in the order written.

use std::collections::HashSet;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{Expr, Ident};

use crate::cd::{Assignment, Scope, Target, formula, parse_assignment, punct, statements, update};

/// A statement of `cd!` outside operation definitions.
pub(crate) enum Statement {
    /// An assignment into a tensor's value, or into an intermediate it declares.
    Assign(Box<Assignment>),
    /// `tensor.grad =: rhs`.
    Seed { tensor: Expr, rhs: Expr },
    /// `tensor.forward`, `tensor.backprop`, `tensor.zero_grads`: the `Piece` constructor.
    Piece {
        constructor: &'static str,
        tensor: Expr,
    },
    /// `~~(words; body)`.
    Comment {
        words: Vec<Word>,
        body: Vec<Statement>,
    },
    /// Code spliced in.
    Splice(Expr),
}

/// A word of a block comment.
pub(crate) enum Word {
    /// A string, as written.
    Text(String),
    /// A tensor, by its label (`t`, `t.value`), or its gradient (`t.grad`).
    Tensor { tensor: Expr, grad: bool },
}

/// What a statement outside operation definitions may be, for the error of one that is none.
const STATEMENTS: &str = "a statement of cd! is an assignment (`p =- lr * p.grad`), `t.forward`, \
    `t.backprop`, `t.zero_grads`, a seed `t.grad =: 1`, a block comment `~~(\"text\" t; …)`, or \
    code to splice in (a `Vec<Update>`, a `Vec<Piece>`, …)";

/// The statement `tokens` (not empty) write.
pub(crate) fn parse_statement(tokens: Vec<TokenTree>) -> syn::Result<Statement> {
    if punct(tokens.first()) == Some('~') {
        return parse_comment(&tokens);
    }
    if tokens.iter().any(|t| punct(Some(t)) == Some('=')) {
        let a = parse_assignment(tokens)?;
        return match &a.target {
            Target::Tensor(Expr::Field(field)) if named(&field.member) == Some("grad") => {
                seed(&a, &field.base)
            }
            _ => Ok(Statement::Assign(Box::new(a))),
        };
    }
    let expr = syn::parse2::<Expr>(tokens.into_iter().collect())?;
    let (base, member, span) = match &expr {
        Expr::Field(field) => (&field.base, named(&field.member), field.member.span()),
        Expr::MethodCall(call) if call.args.is_empty() => {
            let method = call.method.to_string();
            if let Some(hint) = pytorch(&method, &call.receiver) {
                return Err(syn::Error::new(call.method.span(), hint));
            }
            return Ok(Statement::Splice(expr));
        }
        _ => return Ok(Statement::Splice(expr)),
    };
    let constructor = match member {
        Some("forward") => "forward",
        Some("backprop") => "backprop",
        Some("zero_grads") => "zero_grads",
        Some(word @ ("backward" | "zero_grad")) => {
            return Err(syn::Error::new(span, pytorch(word, base).expect("a hint")));
        }
        Some(word @ ("grad" | "value")) => {
            return Err(syn::Error::new(
                span,
                format!("`.{word}` alone is no statement: {STATEMENTS}"),
            ));
        }
        _ => return Ok(Statement::Splice(expr)),
    };
    Ok(Statement::Piece {
        constructor,
        tensor: (**base).clone(),
    })
}

/// The name of a named field.
fn named(member: &syn::Member) -> Option<&'static str> {
    let syn::Member::Named(name) = member else {
        return None;
    };
    [
        "forward",
        "backprop",
        "zero_grads",
        "backward",
        "zero_grad",
        "grad",
        "value",
    ]
    .into_iter()
    .find(|word| name == word)
}

/// What cd! writes for PyTorch's `t.backward()` and `optimizer.zero_grad()`.
fn pytorch(word: &str, receiver: &Expr) -> Option<String> {
    let t = receiver.to_token_stream().to_string();
    match word {
        "backward" => Some(format!(
            "`{t}.backward` is PyTorch's; in cd! a tensor's backprop is `{t}.backprop` (its \
             gradients from zero, the parameters' kept)"
        )),
        "zero_grad" => Some(format!(
            "`{t}.zero_grad` is PyTorch's; in cd! the gradients of a tensor's subgraph are \
             zeroed by `loss.zero_grads`"
        )),
        _ => None,
    }
}

/// `tensor.grad =: rhs`, checked: a seed sets the gradient, pointwise.
fn seed(a: &Assignment, tensor: &Expr) -> syn::Result<Statement> {
    if !a.accum.initialize || a.accum.op.is_some() {
        return Err(syn::Error::new(
            a.accum.span,
            "a gradient is seeded with `=:` (`t.grad =: 1` before `t.backprop`); it is \
             accumulated by backprop and by operation definitions (`g1 =+ …`)",
        ));
    }
    if let Some(logic) = &a.logic {
        return Err(syn::Error::new(
            logic.span(),
            "a seed has its tensor's shape: it takes no `~logic`",
        ));
    }
    Ok(Statement::Seed {
        tensor: tensor.clone(),
        rhs: a.rhs.clone(),
    })
}

/// `~~(words; statements…)`.
fn parse_comment(tokens: &[TokenTree]) -> syn::Result<Statement> {
    let shape = "a block comment is `~~(\"text\" tensor …; statements…)`: its words, then the \
        statements it scopes";
    let group = match tokens {
        [
            TokenTree::Punct(_),
            TokenTree::Punct(second),
            TokenTree::Group(group),
        ] if second.as_char() == '~' && group.delimiter() == Delimiter::Parenthesis => group,
        _ => return Err(syn::Error::new(tokens[0].span(), shape)),
    };
    let inside: Vec<TokenTree> = group.stream().into_iter().collect();
    let end = inside
        .iter()
        .position(|t| punct(Some(t)) == Some(';'))
        .unwrap_or(inside.len());
    if end == 0 {
        return Err(syn::Error::new(group.span(), shape));
    }
    let words = parse_words(&inside[..end])?;
    let rest: TokenStream = inside
        .get(end + 1..)
        .unwrap_or_default()
        .iter()
        .cloned()
        .collect();
    let body = statements(rest)
        .into_iter()
        .map(parse_statement)
        .collect::<syn::Result<Vec<_>>>()?;
    Ok(Statement::Comment { words, body })
}

/// A comment's words: strings, and tensors (`t`, `self.loss`, `(expr)`, each with `.grad` for
/// its gradient or `.value`).
fn parse_words(tokens: &[TokenTree]) -> syn::Result<Vec<Word>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let start = i;
        match &tokens[i] {
            TokenTree::Literal(literal) => match syn::parse2::<syn::Lit>(literal.to_token_stream())
            {
                Ok(syn::Lit::Str(text)) => {
                    words.push(Word::Text(text.value()));
                    i += 1;
                    continue;
                }
                _ => return Err(not_a_word(literal.span())),
            },
            TokenTree::Ident(_) => {}
            TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => {}
            other => return Err(not_a_word(other.span())),
        }
        i += 1;
        while punct(tokens.get(i)) == Some('.')
            && matches!(tokens.get(i + 1), Some(TokenTree::Ident(_)))
        {
            i += 2;
        }
        let mut end = i;
        let last = match &tokens[end - 1] {
            TokenTree::Ident(name) if end - start >= 3 => name.to_string(),
            _ => String::new(),
        };
        if last == "grad" || last == "value" {
            end -= 2;
        }
        let tensor = syn::parse2::<Expr>(tokens[start..end].iter().cloned().collect())?;
        words.push(Word::Tensor {
            tensor,
            grad: last == "grad",
        });
    }
    Ok(words)
}

fn not_a_word(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "a comment's words are strings and tensors (`~~(\"step of\" loss \"with\" w.grad; …)`)",
    )
}

/// The pieces `statements` compose, as a `Vec<Piece>`; an intermediate declared among them
/// (`{ name } =: …`) is read by name by the statements after it, whatever comment scopes it.
pub(crate) fn expand(
    k: &TokenStream,
    statements: &[Statement],
    graph: &Option<Expr>,
    declared: &mut HashSet<String>,
) -> syn::Result<TokenStream> {
    let mut body = TokenStream::new();
    pieces(k, statements, 0, graph, declared, &mut body)?;
    let scope = scope(0);
    Ok(quote!({
        let mut #scope: ::std::vec::Vec<#k::Piece> = ::std::vec::Vec::new();
        #body
        #scope
    }))
}

/// The vector the pieces at comment depth `depth` are pushed into.
fn scope(depth: usize) -> Ident {
    Ident::new(&format!("scope{depth}"), Span::mixed_site())
}

/// Pushes the pieces of `statements`, at comment depth `depth`, into `scope(depth)`.
fn pieces(
    k: &TokenStream,
    statements: &[Statement],
    depth: usize,
    graph: &Option<Expr>,
    declared: &mut HashSet<String>,
    body: &mut TokenStream,
) -> syn::Result<()> {
    let into = scope(depth);
    for statement in statements {
        match statement {
            Statement::Assign(a) => {
                let (bindings, update) = update(k, a, declared, graph)?;
                body.extend(quote!(
                    #bindings
                    #into.push(#k::Piece::Update(#update));
                ));
            }
            Statement::Seed { tensor, rhs } => {
                let f = formula(k, rhs, &Scope::Updates)?;
                body.extend(quote!(#into.push(#k::Piece::seed(&(#tensor), #f));));
            }
            Statement::Piece {
                constructor,
                tensor,
            } => {
                let constructor = Ident::new(constructor, tensor.span());
                body.extend(quote!(#into.push(#k::Piece::#constructor(&(#tensor)));));
            }
            Statement::Splice(e) => {
                body.extend(quote!(#into.extend(#k::IntoPieces::into_pieces(#e));));
            }
            Statement::Comment {
                words,
                body: statements,
            } => {
                let words = words.iter().map(|word| match word {
                    Word::Text(text) => quote!(::std::string::String::from(#text)),
                    Word::Tensor {
                        tensor,
                        grad: false,
                    } => quote!(#k::syntax::comment_word(&(#tensor))),
                    Word::Tensor { tensor, grad: true } => {
                        quote!(#k::syntax::comment_grad(&(#tensor)))
                    }
                });
                let text = Ident::new(&format!("text{}", depth + 1), Span::mixed_site());
                body.extend(quote!(let #text = #k::syntax::comment(&[#(#words),*]);));
                let scoped = if statements.is_empty() {
                    quote!(::std::vec::Vec::new())
                } else {
                    let inner = scope(depth + 1);
                    body.extend(
                        quote!(let mut #inner: ::std::vec::Vec<#k::Piece> = ::std::vec::Vec::new();),
                    );
                    pieces(k, statements, depth + 1, graph, declared, body)?;
                    quote!(#inner)
                };
                body.extend(quote!(#into.push(#k::Piece::Comment { text: #text, body: #scoped });));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// `cd! { body }` expanded, as the tensor crate's wrapper hands it over.
    fn expanded(body: &str) -> syn::Result<String> {
        crate::cd::expand(format!("(krate) {body}").parse().unwrap()).map(|e| e.to_string())
    }

    fn refused(body: &str) -> String {
        match expanded(body) {
            Ok(text) => panic!("{body} expanded: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn assignments_alone_stay_updates_and_a_piece_makes_code() {
        let updates = expanded("w =- 0.1 * w.grad; m =: w").unwrap();
        assert!(updates.contains("Vec < krate :: Update >"), "{updates}");
        assert!(!updates.contains("Piece"), "{updates}");
        let code = expanded("loss.forward; loss.zero_grads; loss.backprop; w =- w.grad").unwrap();
        for piece in [
            "krate :: Piece :: forward (& (loss))",
            "krate :: Piece :: zero_grads (& (loss))",
            "krate :: Piece :: backprop (& (loss))",
            "krate :: Piece :: Update (krate :: Tensor :: graph (& w)",
            "krate :: Update :: accumulate (& w , krate :: syntax :: Binop :: Sub , formula) . \
             with_default_logic ()",
        ] {
            assert!(code.contains(piece), "{piece} in {code}");
        }
        let seeded = expanded("self.y.grad =: 1; self.y.backprop").unwrap();
        assert!(
            seeded.contains("krate :: Piece :: seed (& (self . y) ,"),
            "{seeded}"
        );
        let spliced = expanded("loss.backprop; optimizer.updates()").unwrap();
        assert!(
            spliced.contains("krate :: IntoPieces :: into_pieces (optimizer . updates ())"),
            "{spliced}"
        );
    }

    #[test]
    fn a_block_comment_names_its_words_and_scopes_its_statements() {
        let code = expanded(
            r#"~~("step of" loss "with" (self.w).grad x.value; loss.forward; ~~("inner"))"#,
        )
        .unwrap();
        for part in [
            r#"String :: from ("step of")"#,
            "krate :: syntax :: comment_word (& (loss))",
            "krate :: syntax :: comment_grad (& ((self . w)))",
            "krate :: syntax :: comment_word (& (x))",
            "Piece :: Comment { text : text2 , body : :: std :: vec :: Vec :: new () }",
            "Piece :: Comment { text : text1 , body : scope1 }",
        ] {
            assert!(code.contains(part), "{part} in {code}");
        }
    }

    #[test]
    fn misused_pieces_are_refused_at_expansion() {
        for (body, part) in [
            ("~~ \"x\"", "a block comment is"),
            ("~~(; x.forward)", "a block comment is"),
            (
                "~~(\"x\" 2; x.forward)",
                "a comment's words are strings and tensors",
            ),
            ("x.grad; x.backprop", "`.grad` alone is no statement"),
            ("opt.zero_grad()", "`opt.zero_grad` is PyTorch's"),
            ("loss.backward", "`loss.backward` is PyTorch's"),
            ("y.grad =: 1 ~logic: \"@\"", "a seed has its tensor's shape"),
            ("y.grad =:+ 1", "a gradient is seeded with `=:`"),
        ] {
            let message = refused(body);
            assert!(message.contains(part), "{body}: {message}");
        }
    }
}
