//! Construct-by-construct tests of the spec parser: every construct of the notation's grammar
//! (reference §1.2–§1.4) parsed to its expected tree, the error cases with their columns and kinds,
//! canonical printing, `...` naming, name clashes, `EinsumSpec::bind` and `EinsumSpec::capture`.

use rcannl_shape::spec::{
    AffineSpec, AxisSpec, Bindings, CaptureKind, Coefficient, ConcatComponent, ConvSpec,
    DimLiteral, EinsumSpec, Kind, Padding, RowSpec, RowVar, ShapeLiteral, SlotSpec, SpecError,
    SpecErrorKind, parse_einsum, parse_shape_literal, parse_shape_spec,
};

// ---------------------------------------------------------------------------------------------
// Tree builders
// ---------------------------------------------------------------------------------------------

fn lab(name: &str) -> AxisSpec {
    AxisSpec::label(name)
}

/// One label per entry.
fn labs(names: &[&str]) -> Vec<AxisSpec> {
    names.iter().map(|name| lab(name)).collect()
}

/// One label per character (what single-character mode makes of a word).
fn chars(word: &str) -> Vec<AxisSpec> {
    word.chars().map(|c| lab(&c.to_string())).collect()
}

fn fixed(index: usize) -> AxisSpec {
    AxisSpec::Fixed { index }
}

const ANON: AxisSpec = AxisSpec::Anonymous;

fn closed(axes: Vec<AxisSpec>) -> RowSpec {
    RowSpec::closed(axes)
}

fn open(leading: Vec<AxisSpec>, var: RowVar, trailing: Vec<AxisSpec>) -> RowSpec {
    RowSpec::open(leading, var, trailing)
}

fn ell() -> RowVar {
    RowVar::Ellipsis
}

fn named(name: &str) -> RowVar {
    RowVar::Named(name.to_owned())
}

/// A slot with only output axes.
fn out(axes: Vec<AxisSpec>) -> SlotSpec {
    out_row(closed(axes))
}

fn out_row(output: RowSpec) -> SlotSpec {
    SlotSpec {
        output,
        ..SlotSpec::default()
    }
}

fn slot(batch: RowSpec, input: RowSpec, output: RowSpec) -> SlotSpec {
    SlotSpec {
        batch,
        input,
        output,
    }
}

fn int(n: usize) -> Coefficient {
    Coefficient::Int(n)
}

fn ident(name: &str) -> Coefficient {
    Coefficient::Ident(name.to_owned())
}

/// `stride*over[+offset]`.
fn strided(stride: Coefficient, over: &str, offset: usize) -> AxisSpec {
    AxisSpec::Affine(AffineSpec {
        stride,
        over: over.to_owned(),
        offset,
        conv: None,
    })
}

/// `stride*over <padding> + offset + dilation*kernel`.
fn conv(
    stride: Coefficient,
    over: &str,
    padding: Padding,
    offset: usize,
    dilation: Coefficient,
    kernel: &str,
) -> AxisSpec {
    AxisSpec::Affine(AffineSpec {
        stride,
        over: over.to_owned(),
        offset,
        conv: Some(ConvSpec {
            dilation,
            kernel: kernel.to_owned(),
            padding,
        }),
    })
}

fn explicit(before: usize, after: usize, ceil: bool) -> Padding {
    Padding::Explicit(rcannl_shape::spec::ExplicitPadding {
        before,
        after,
        ceil,
    })
}

fn cl(name: &str) -> ConcatComponent {
    ConcatComponent::Label {
        name: name.to_owned(),
    }
}

fn cs(size: usize) -> ConcatComponent {
    ConcatComponent::Size { size }
}

fn concat(components: Vec<ConcatComponent>) -> AxisSpec {
    AxisSpec::Concat { components }
}

fn einsum(rhs: Vec<SlotSpec>, lhs: SlotSpec) -> EinsumSpec {
    EinsumSpec { rhs, lhs }
}

// ---------------------------------------------------------------------------------------------
// Checkers
// ---------------------------------------------------------------------------------------------

/// Parses `text` as a shape spec, compares with `expected`, and checks that the canonical text
/// parses back to the same tree.
fn check_shape(text: &str, expected: &SlotSpec) {
    let parsed = parse_shape_spec(text)
        .unwrap_or_else(|err| panic!("shape spec {text:?} should parse, got:\n{err}"));
    assert_eq!(&parsed, expected, "shape spec {text:?}");
    let printed = parsed.to_string();
    assert_eq!(
        parse_shape_spec(&printed).as_ref(),
        Ok(expected),
        "canonical text {printed:?} of {text:?} does not parse back"
    );
}

/// Parses `text` as an einsum spec, compares with `expected`, and checks that the canonical text
/// parses back to the same tree.
fn check_einsum(text: &str, expected: &EinsumSpec) {
    let parsed = parse_einsum(text)
        .unwrap_or_else(|err| panic!("einsum spec {text:?} should parse, got:\n{err}"));
    assert_eq!(&parsed, expected, "einsum spec {text:?}");
    let printed = parsed.to_string();
    assert_eq!(
        parse_einsum(&printed).as_ref(),
        Ok(expected),
        "canonical text {printed:?} of {text:?} does not parse back"
    );
}

#[derive(Debug, Clone, Copy)]
enum Parser {
    Shape,
    Einsum,
    Literal,
}

fn parse_err(parser: Parser, text: &str) -> SpecError {
    match parser {
        Parser::Shape => match parse_shape_spec(text) {
            Ok(tree) => panic!("shape spec {text:?} should fail, parsed as {tree:?}"),
            Err(err) => err,
        },
        Parser::Einsum => match parse_einsum(text) {
            Ok(tree) => panic!("einsum spec {text:?} should fail, parsed as {tree:?}"),
            Err(err) => err,
        },
        Parser::Literal => match parse_shape_literal(text) {
            Ok(tree) => panic!("shape literal {text:?} should fail, parsed as {tree:?}"),
            Err(err) => err,
        },
    }
}

/// Asserts that `text` fails with an error of `kind` at 1-based character `column`.
fn check_error(parser: Parser, text: &str, column: usize, kind: SpecErrorKind) {
    let err = parse_err(parser, text);
    assert_eq!(
        (err.column, err.kind),
        (Some(column), kind),
        "{parser:?} {text:?}: wrong column or kind in\n{err}"
    );
    assert_eq!(err.text, text, "the error quotes the text it is about");
}

// ---------------------------------------------------------------------------------------------
// §1.3: the constructs, one table row each
// ---------------------------------------------------------------------------------------------

#[test]
fn axes_and_kinds() {
    let table: Vec<(&str, SlotSpec)> = vec![
        // single-char axes
        ("ijk", out(chars("ijk"))),
        ("i j k", out(chars("ijk"))),
        // kinds
        (
            "b|i->o",
            slot(closed(chars("b")), closed(chars("i")), closed(chars("o"))),
        ),
        (
            "b|o",
            slot(closed(chars("b")), closed(vec![]), closed(chars("o"))),
        ),
        (
            "i->o",
            slot(closed(vec![]), closed(chars("i")), closed(chars("o"))),
        ),
        // multi-char axes
        ("a, b, c", out(labs(&["a", "b", "c"]))),
        ("a, b,", out(labs(&["a", "b"]))),
        ("abc,", out(labs(&["abc"]))),
        ("x_1, Y2", out(labs(&["x_1", "Y2"]))),
        // multi-char kinds
        (
            "batch|input->output,",
            slot(
                closed(labs(&["batch"])),
                closed(labs(&["input"])),
                closed(labs(&["output"])),
            ),
        ),
        // the single-char gotcha: no comma, so every letter is an axis
        (
            "batch | input -> output",
            slot(
                closed(chars("batch")),
                closed(chars("input")),
                closed(chars("output")),
            ),
        ),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn row_variables() {
    let table: Vec<(&str, SlotSpec)> = vec![
        // ellipsis
        (
            "...|...->...",
            slot(
                open(vec![], ell(), vec![]),
                open(vec![], ell(), vec![]),
                open(vec![], ell(), vec![]),
            ),
        ),
        // leading + trailing
        (
            "...b|...i->...o",
            slot(
                open(vec![], ell(), chars("b")),
                open(vec![], ell(), chars("i")),
                open(vec![], ell(), chars("o")),
            ),
        ),
        // leading axes
        (
            "ij...->0",
            slot(
                closed(vec![]),
                open(chars("ij"), ell(), vec![]),
                closed(vec![fixed(0)]),
            ),
        ),
        // named row variables
        ("a..v..b", out_row(open(chars("a"), named("v"), chars("b")))),
        (
            "i, ..v.., j",
            out_row(open(chars("i"), named("v"), chars("j"))),
        ),
        ("..v,..", out_row(open(vec![], named("v"), vec![]))),
        ("..v..", out_row(open(vec![], named("v"), vec![]))),
        (
            "..rows.., c",
            out_row(open(vec![], named("rows"), labs(&["c"]))),
        ),
        // optional commas around row variables
        (", ..., a,", out_row(open(vec![], ell(), labs(&["a"])))),
        ("a ..., b", out_row(open(labs(&["a"]), ell(), labs(&["b"])))),
        ("a, ... b", out_row(open(labs(&["a"]), ell(), labs(&["b"])))),
        ("a, ...,", out_row(open(labs(&["a"]), ell(), vec![]))),
        (
            "x, ..v,.., y",
            out_row(open(labs(&["x"]), named("v"), labs(&["y"]))),
        ),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn placeholders_and_fixed_indices() {
    let table: Vec<(&str, SlotSpec)> = vec![
        ("a_b", out(vec![lab("a"), ANON, lab("b")])),
        ("_", out(vec![ANON])),
        ("_, _", out(vec![ANON, ANON])),
        ("__", out(vec![ANON, ANON])),
        ("i0j", out(vec![lab("i"), fixed(0), lab("j")])),
        (
            "...|1->...",
            slot(
                open(vec![], ell(), vec![]),
                closed(vec![fixed(1)]),
                open(vec![], ell(), vec![]),
            ),
        ),
        (
            "2..v..|...",
            slot(
                open(vec![fixed(2)], named("v"), vec![]),
                closed(vec![]),
                open(vec![], ell(), vec![]),
            ),
        ),
        // a maximal digit run is one index, in both modes
        ("i12j", out(vec![lab("i"), fixed(12), lab("j")])),
        ("b00c", out(vec![lab("b"), fixed(0), lab("c")])),
        ("007", out(vec![fixed(7)])),
        ("1 2", out(vec![fixed(1), fixed(2)])),
        ("12, 3", out(vec![fixed(12), fixed(3)])),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn strides_and_offsets() {
    let table: Vec<(&str, SlotSpec)> = vec![
        ("2*output", out(vec![strided(int(2), "output", 0)])),
        ("3*i", out(vec![strided(int(3), "i", 0)])),
        ("1*i", out(vec![strided(int(1), "i", 0)])),
        (
            "input -> 2*output",
            slot(
                closed(vec![]),
                closed(labs(&["input"])),
                closed(vec![strided(int(2), "output", 0)]),
            ),
        ),
        (
            "regular, 3*strided",
            out(vec![lab("regular"), strided(int(3), "strided", 0)]),
        ),
        ("2*i + 1", out(vec![strided(int(2), "i", 1)])),
        ("1*i+1", out(vec![strided(int(1), "i", 1)])),
        (
            "... | ... -> ..., 2*i + 1",
            slot(
                open(vec![], ell(), vec![]),
                open(vec![], ell(), vec![]),
                open(vec![], ell(), vec![strided(int(2), "i", 1)]),
            ),
        ),
        // `a*b` is a stride with an identifier coefficient
        ("a*b", out(vec![strided(ident("a"), "b", 0)])),
        ("s*i+2", out(vec![strided(ident("s"), "i", 2)])),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn convolutions() {
    use Padding::{Padded, Unspecified, Valid};
    let table: Vec<(&str, SlotSpec)> = vec![
        // valid
        ("o<+k", out(vec![conv(int(1), "o", Valid, 0, int(1), "k")])),
        (
            "o<+3*k",
            out(vec![conv(int(1), "o", Valid, 0, int(3), "k")]),
        ),
        (
            "2*oh<+wh, 2*ow<+ww",
            out(vec![
                conv(int(2), "oh", Valid, 0, int(1), "wh"),
                conv(int(2), "ow", Valid, 0, int(1), "ww"),
            ]),
        ),
        // explicit padding, rounded down or up
        (
            "2*o[1,2]+3*k",
            out(vec![conv(
                int(2),
                "o",
                explicit(1, 2, false),
                0,
                int(3),
                "k",
            )]),
        ),
        (
            "oh[0,0]^+wh, ow[3,0]+ww",
            out(vec![
                conv(int(1), "oh", explicit(0, 0, true), 0, int(1), "wh"),
                conv(int(1), "ow", explicit(3, 0, false), 0, int(1), "ww"),
            ]),
        ),
        // padded
        ("o=+k", out(vec![conv(int(1), "o", Padded, 0, int(1), "k")])),
        (
            "2*o=+k",
            out(vec![conv(int(2), "o", Padded, 0, int(1), "k")]),
        ),
        (
            "2*o=+3*k",
            out(vec![conv(int(2), "o", Padded, 0, int(3), "k")]),
        ),
        (
            "oh=+wh, ow=+ww",
            out(vec![
                conv(int(1), "oh", Padded, 0, int(1), "wh"),
                conv(int(1), "ow", Padded, 0, int(1), "ww"),
            ]),
        ),
        // unspecified padding
        (
            "o+k",
            out(vec![conv(int(1), "o", Unspecified, 0, int(1), "k")]),
        ),
        (
            "2*o+3*k",
            out(vec![conv(int(2), "o", Unspecified, 0, int(3), "k")]),
        ),
        (
            "a+bc",
            out(vec![conv(int(1), "a", Unspecified, 0, int(1), "bc")]),
        ),
        (
            "3*output+1*kernel,",
            out(vec![conv(
                int(3),
                "output",
                Unspecified,
                0,
                int(1),
                "kernel",
            )]),
        ),
        // with an offset (before the kernel)
        (
            "2*i<+1+3*k",
            out(vec![conv(int(2), "i", Valid, 1, int(3), "k")]),
        ),
        (
            "i=+1+k",
            out(vec![conv(int(1), "i", Padded, 1, int(1), "k")]),
        ),
        (
            "i+1+k",
            out(vec![conv(int(1), "i", Unspecified, 1, int(1), "k")]),
        ),
        (
            "2 * o < + 4 + 3 * k",
            out(vec![conv(int(2), "o", Valid, 4, int(3), "k")]),
        ),
        // identifier coefficients
        (
            "s*i<+d*k",
            out(vec![conv(ident("s"), "i", Valid, 0, ident("d"), "k")]),
        ),
        (
            "i+dil*k",
            out(vec![conv(int(1), "i", Unspecified, 0, ident("dil"), "k")]),
        ),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn concatenations() {
    let table: Vec<(&str, SlotSpec)> = vec![
        ("a^b", out(vec![concat(vec![cl("a"), cl("b")])])),
        (
            "a^b^c, d",
            out(vec![concat(vec![cl("a"), cl("b"), cl("c")]), lab("d")]),
        ),
        (
            "a, b ^ c",
            out(vec![lab("a"), concat(vec![cl("b"), cl("c")])]),
        ),
        // integer components (an extension over the reference grammar)
        ("3^a", out(vec![concat(vec![cs(3), cl("a")])])),
        ("a^3", out(vec![concat(vec![cl("a"), cs(3)])])),
        ("3^a^5", out(vec![concat(vec![cs(3), cl("a"), cs(5)])])),
        ("2^7", out(vec![concat(vec![cs(2), cs(7)])])),
    ];
    for (text, expected) in &table {
        check_shape(text, expected);
    }
}

#[test]
fn einsum_arities() {
    let table: Vec<(&str, EinsumSpec)> = vec![
        // unary
        ("ij=>ji", einsum(vec![out(chars("ij"))], out(chars("ji")))),
        // binary
        (
            "ij;jk=>ik",
            einsum(vec![out(chars("ij")), out(chars("jk"))], out(chars("ik"))),
        ),
        // ternary
        (
            "ij;jk;km=>im",
            einsum(
                vec![out(chars("ij")), out(chars("jk")), out(chars("km"))],
                out(chars("im")),
            ),
        ),
        // single-char mode, so "out" is three axes
        (
            "p;a;b=>out",
            einsum(
                vec![out(chars("p")), out(chars("a")), out(chars("b"))],
                out(chars("out")),
            ),
        ),
        (
            "p;a;b=>out,",
            einsum(
                vec![out(labs(&["p"])), out(labs(&["a"])), out(labs(&["b"]))],
                out(labs(&["out"])),
            ),
        ),
        // n-ary (block)
        (
            "x, ...; y, ...; z, ... => x^y^z, ...",
            einsum(
                vec![
                    out_row(open(labs(&["x"]), ell(), vec![])),
                    out_row(open(labs(&["y"]), ell(), vec![])),
                    out_row(open(labs(&["z"]), ell(), vec![])),
                ],
                out_row(open(
                    vec![concat(vec![cl("x"), cl("y"), cl("z")])],
                    ell(),
                    vec![],
                )),
            ),
        ),
        (
            "a;b;c;d=>abcd",
            einsum(
                vec![
                    out(chars("a")),
                    out(chars("b")),
                    out(chars("c")),
                    out(chars("d")),
                ],
                out(chars("abcd")),
            ),
        ),
        (
            "a; b; c; d; e; f => f^e",
            einsum(
                "abcdef"
                    .chars()
                    .map(|c| out(chars(&c.to_string())))
                    .collect(),
                out(vec![concat(vec![cl("f"), cl("e")])]),
            ),
        ),
        // whitespace is free in single-char mode
        (
            "i j => i j 0",
            einsum(
                vec![out(chars("ij"))],
                out(vec![lab("i"), lab("j"), fixed(0)]),
            ),
        ),
        (
            "hw => hw_",
            einsum(vec![out(chars("hw"))], out(vec![lab("h"), lab("w"), ANON])),
        ),
        // integer concat components on either side
        (
            "3^a => a",
            einsum(
                vec![out(vec![concat(vec![cs(3), cl("a")])])],
                out(chars("a")),
            ),
        ),
        (
            "a => a^3",
            einsum(
                vec![out(chars("a"))],
                out(vec![concat(vec![cl("a"), cs(3)])]),
            ),
        ),
        (
            "3^a^5 => a",
            einsum(
                vec![out(vec![concat(vec![cs(3), cl("a"), cs(5)])])],
                out(chars("a")),
            ),
        ),
        // a named row variable used across kinds
        (
            "..v..|...ijk => ..v..kji",
            einsum(
                vec![slot(
                    open(vec![], named("v"), vec![]),
                    closed(vec![]),
                    open(vec![], ell(), chars("ijk")),
                )],
                out_row(open(vec![], named("v"), chars("kji"))),
            ),
        ),
        // affine axes on the result side
        (
            "..., i => ..., 2*i + 1",
            einsum(
                vec![out_row(open(vec![], ell(), labs(&["i"])))],
                out_row(open(vec![], ell(), vec![strided(int(2), "i", 1)])),
            ),
        ),
    ];
    for (text, expected) in &table {
        check_einsum(text, expected);
    }
}

#[test]
fn multi_and_single_char_texts_of_one_tree_are_equal() {
    let pairs = [
        ("ij;jk=>ik", "i, j; j, k => i, k"),
        ("b|i->o=>o", "b | i -> o => o,"),
        ("a..v..b => b", "a, ..v.., b => b,"),
        ("i0j => j", "i, 0, j => j,"),
        ("a_ => a", "a, _ => a,"),
    ];
    for (single, multi) in pairs {
        let a = parse_einsum(single).unwrap();
        let b = parse_einsum(multi).unwrap();
        assert_eq!(a, b, "{single:?} vs {multi:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// §1.2 notes: empty rows, slots and sides
// ---------------------------------------------------------------------------------------------

#[test]
fn empty_rows_and_slots() {
    for text in ["", ",", "->", "|->", "|", " , ", "|,->,"] {
        check_shape(text, &SlotSpec::default());
    }
    let empty = SlotSpec::default;
    let table: Vec<(&str, EinsumSpec)> = vec![
        ("=> a", einsum(vec![empty()], out(chars("a")))),
        ("a =>", einsum(vec![out(chars("a"))], empty())),
        (
            "a;=>b",
            einsum(vec![out(chars("a")), empty()], out(chars("b"))),
        ),
        (
            ";a=>b",
            einsum(vec![empty(), out(chars("a"))], out(chars("b"))),
        ),
        ("=>", einsum(vec![empty()], empty())),
        (";;=>", einsum(vec![empty(), empty(), empty()], empty())),
        ("|->=>->", einsum(vec![empty()], empty())),
        // an empty result is not the result `0` (one axis, fixed index 0)
        ("a=>0", einsum(vec![out(chars("a"))], out(vec![fixed(0)]))),
    ];
    for (text, expected) in &table {
        check_einsum(text, expected);
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
fn syntax_errors_point_at_their_column() {
    use Parser::{Einsum, Shape};
    use SpecErrorKind::{Lex, Name, Syntax};
    let table: &[(Parser, &str, usize, SpecErrorKind)] = &[
        // at most one `->` and one `|` per slot, `|` first
        (Shape, "a->b->c", 5, Syntax),
        (Einsum, "a->b->c=>a", 5, Syntax),
        (Shape, "a|b|c", 4, Syntax),
        (Shape, "a->b|c", 5, Syntax),
        (Shape, "a|b|c->d", 4, Syntax),
        (Shape, "a|b->c->d", 7, Syntax),
        (Einsum, "ij=>a|b|c", 8, Syntax),
        // an einsum needs `=>`; a shape spec must not have it
        (Einsum, "ij;jk", 6, Syntax),
        (Einsum, "ij", 3, Syntax),
        (Einsum, "", 1, Syntax),
        (Einsum, "a=>b=>c", 5, Syntax),
        (Einsum, "a=>b;c", 5, Syntax),
        (Shape, "a;b", 2, Syntax),
        (Shape, "a=>b", 2, Syntax),
        // affine axes
        (Shape, "i+1", 2, Syntax),
        (Shape, "2*i<+k+1", 7, Syntax),
        (Shape, "o+k+1", 4, Syntax),
        (Shape, "0*i", 1, Syntax),
        (Shape, "o<+0*k", 4, Syntax),
        (Shape, "o[1]+k", 4, Syntax),
        (Shape, "o[1,x]+k", 5, Syntax),
        (Shape, "o[1,1]k", 7, Syntax),
        (Shape, "2*o=+00*k", 6, Syntax),
        (Shape, "2*", 3, Syntax),
        (Shape, "2*3", 3, Syntax),
        (Shape, "o<k", 3, Syntax),
        (Shape, "o=", 3, Syntax),
        (Shape, "o<+", 4, Syntax),
        (Shape, "o<+2", 4, Syntax),
        // multi-char axes must be comma-separated
        (Shape, "a b, c", 3, Syntax),
        (Shape, "a,,b", 3, Syntax),
        (Shape, ", a", 1, Syntax),
        (Shape, "_x,", 2, Syntax),
        (Shape, "12a,", 3, Syntax),
        // concatenation
        (Shape, "a^", 3, Syntax),
        (Shape, "a^_", 3, Syntax),
        (Shape, "^a", 1, Syntax),
        // `&` is reserved
        (Shape, "a&b", 2, Syntax),
        (Shape, "&", 1, Syntax),
        // row variables
        (Shape, "..a.., ..b..", 8, Syntax),
        (Shape, "......", 4, Syntax),
        (Shape, "..vw..", 4, Syntax),
        (Shape, "..v", 4, Syntax),
        (Shape, "..", 3, Syntax),
        (Shape, "..v,,..", 5, Syntax),
        // lexical errors
        (Einsum, "ij;jk=>i?k", 9, Lex),
        (Shape, "a.b", 2, Lex),
        (Shape, "a-b", 2, Lex),
        (Shape, "....", 4, Lex),
        (Shape, "→", 1, Lex),
        (Shape, "a, b, ∘", 7, Lex),
        (Shape, "i - > j", 3, Lex),
        (Shape, "99999999999999999999999", 1, Syntax),
        (Shape, "i 99999999999999999999999", 3, Syntax),
        // names used as both a dimension label and a row variable
        (Shape, "d, ..d..", 6, Name),
        (Shape, "..d.., d", 8, Name),
        (Shape, "...|batch,", 5, Name),
        (Shape, "batch, ...|x", 8, Name),
        (Shape, "..., output", 6, Name),
        (Shape, "input, ... -> x", 8, Name),
        (Einsum, "i..v.. => v", 11, Name),
        (Einsum, "..b..|x => ..., b", 17, Name),
        (Einsum, "2*o+k, ..k.. => o", 10, Name),
        (Einsum, "a^v => ..v..", 10, Name),
    ];
    for &(parser, text, column, kind) in table {
        check_error(parser, text, column, kind);
    }
}

#[test]
fn a_failed_parse_leaves_no_state_behind() {
    // OCANNL's single-char lexer leaks a pending comma after an error; ours must not.
    for bad in ["..vw..", "ij;jk", "i+1", "a b, c", "?"] {
        assert!(parse_einsum(bad).is_err(), "{bad:?}");
        assert!(parse_shape_spec(bad).is_err(), "{bad:?}");
        assert_eq!(
            parse_shape_spec("ij"),
            Ok(out(chars("ij"))),
            "after {bad:?}"
        );
        assert_eq!(
            parse_einsum("ij=>ji"),
            Ok(einsum(vec![out(chars("ij"))], out(chars("ji")))),
            "after {bad:?}"
        );
    }
}

#[test]
fn rendered_errors_have_a_caret_under_the_offending_text() {
    let cases: &[(Parser, &str, &str)] = &[
        (
            Parser::Einsum,
            "ij;jk=>i?k",
            "column 9: unexpected character '?' in single-char mode\n  ij;jk=>i?k\n          ^",
        ),
        (
            Parser::Shape,
            "2*i<+k+1",
            "column 7: the offset of a convolution axis goes before the kernel: write \
             'stride*over<+offset+kernel'\n  2*i<+k+1\n        ^",
        ),
        (
            Parser::Shape,
            "a->b->c",
            "column 5: a slot has at most one '->'\n  a->b->c\n      ^^",
        ),
        (
            Parser::Shape,
            "d, ..d..",
            "column 6: Name 'd' is used as both a dimension variable and a row variable \
             (dimension label at column 1; row variable at column 6)\n  d, ..d..\n       ^",
        ),
        (
            Parser::Shape,
            "...|batch,",
            "column 5: Name 'batch' is used as both a dimension variable and a row variable \
             ('...' in a batch row is the row variable 'batch'; dimension label at column 5)\
             \n  ...|batch,\n      ^^^^^",
        ),
        (
            Parser::Einsum,
            "ij;jk",
            "column 6: an einsum spec needs '=>' followed by the result slot\n  ij;jk\n       ^",
        ),
        (
            Parser::Shape,
            "i+1",
            "column 2: an offset needs an explicit stride: write '1*i+1' (a bare 'i+1' is not \
             an axis)\n  i+1\n   ^",
        ),
        (
            Parser::Shape,
            "a b, c",
            "column 3: expected ',' between axes, found identifier 'b'\n  a b, c\n    ^",
        ),
        (
            Parser::Shape,
            "..a.., ..b..",
            "column 8: a row has at most one row variable (the first is at column 1)\n  \
             ..a.., ..b..\n         ^^^^^",
        ),
        (
            Parser::Literal,
            "3,x",
            "column 3: expected a size after ','\n  3,x\n    ^",
        ),
    ];
    for &(parser, text, rendered) in cases {
        assert_eq!(parse_err(parser, text).to_string(), rendered, "{text:?}");
    }
}

#[test]
fn error_messages_name_what_went_wrong() {
    let cases: &[(Parser, &str, &[&str])] = &[
        (Parser::Shape, "0*i", &["stride", "at least 1"]),
        (Parser::Shape, "o<+0*k", &["dilation", "at least 1"]),
        (Parser::Shape, "a&b", &["reserved"]),
        (Parser::Shape, "a.b", &["'...'", "'..name..'"]),
        (Parser::Shape, "a-b", &["'->'"]),
        (Parser::Shape, "ab ∘", &["single-char mode"]),
        (Parser::Shape, "a, ∘", &["multi-char mode"]),
        (Parser::Shape, "a;b", &["single slot"]),
        (Parser::Einsum, "a=>b=>c", &["exactly one '=>'"]),
        (Parser::Shape, "99999999999999999999999", &["too large"]),
    ];
    for &(parser, text, needles) in cases {
        let message = parse_err(parser, text).message;
        for needle in needles {
            assert!(
                message.contains(needle),
                "{text:?}: message {message:?} lacks {needle:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `...` naming and name clashes
// ---------------------------------------------------------------------------------------------

#[test]
fn ellipsis_is_named_after_its_kind() {
    let spec = parse_einsum("...|...->... => ...").unwrap();
    assert_eq!(spec.row_vars(), ["batch", "input", "output"]);
    assert!(spec.dim_labels().is_empty());

    // `...` in two batch rows is one variable; a named `..batch..` is that same variable.
    let spec = parse_einsum("...|x; ..batch..|y => ..batch.., x, y").unwrap();
    assert_eq!(spec.row_vars(), ["batch"]);
    assert_eq!(spec.dim_labels(), ["x", "y"]);

    // `..output..` in a batch row is the output row's `...`.
    let spec = parse_einsum("..output.. | x, => ...").unwrap();
    assert_eq!(spec.row_vars(), ["output"]);

    // Kinds come from the separators of each slot separately.
    let spec = parse_einsum("... ; ...|a ; ...->a => ..v..").unwrap();
    assert_eq!(spec.row_vars(), ["output", "batch", "input", "v"]);
    assert_eq!(
        spec.rhs[2]
            .input
            .row_var
            .as_ref()
            .map(|v| v.name_in(Kind::Input)),
        Some("input")
    );
}

#[test]
fn names_are_either_labels_or_row_variables() {
    // Fine: a label named after a kind whose row has no `...`.
    for text in [
        "batch, ... => batch",
        "..v..|...ijk => ..v..kji",
        "..s.., s*i => i",
        "s*i, ..s.. => i",
        "..v..; ..v.. => ..v..",
    ] {
        parse_einsum(text).unwrap_or_else(|err| panic!("{text:?} should parse:\n{err}"));
    }
    // Stride and dilation identifiers are not labels.
    let spec = parse_einsum("s*i<+d*k, ..v.. => i").unwrap();
    assert_eq!(spec.dim_labels(), ["i", "k"]);
    assert_eq!(spec.row_vars(), ["v"]);
}

#[test]
fn dim_labels_and_row_vars_in_order_of_first_appearance() {
    let spec = parse_einsum("b, 2*o<+k, 3^c^a, _, 4; ..r.., a => ...|..r.., o^b").unwrap();
    assert_eq!(spec.dim_labels(), ["b", "o", "k", "c", "a"]);
    assert_eq!(spec.row_vars(), ["r", "batch"]);
    assert_eq!(spec.arity(), 2);
}

// ---------------------------------------------------------------------------------------------
// Canonical printing
// ---------------------------------------------------------------------------------------------

#[test]
fn canonical_text() {
    let einsums = [
        ("ij;jk=>ik", "i, j; j, k => i, k"),
        ("ij=>ji", "i, j => j, i"),
        ("i=>i", "i => i"),
        ("=> a", "=> a"),
        ("a =>", "a =>"),
        ("a;=>b", "a; => b"),
        (";a=>b", "; a => b"),
        ("=>", "=>"),
        ("abc, => x", "abc => x,"),
        ("..vw.., => x", "..vw.. => x,"),
        ("b|i->o => o", "b | i -> o => o"),
        ("...|...->... => ...", "... | ... -> ... => ..."),
        ("x, ...; y, ... => x^y, ...", "x, ...; y, ... => x^y, ..."),
        ("3^a^5 => a", "3^a^5 => a"),
        ("hw => hw_", "h, w => h, w, _"),
        ("i12j => j", "i, 12, j => j"),
        ("ij...->0 => ...", "i, j, ... -> 0 => ..."),
    ];
    for (text, canonical) in einsums {
        let spec = parse_einsum(text).unwrap();
        assert_eq!(spec.to_string(), canonical, "canonical text of {text:?}");
        assert_eq!(parse_einsum(canonical).unwrap(), spec, "{canonical:?}");
    }
    let shapes = [
        ("abc,", "abc,"),
        ("a", "a"),
        ("ab", "a, b"),
        ("", ""),
        ("|->", ""),
        (",", ""),
        ("b|o", "b | o"),
        ("i->", "i ->"),
        ("input ->,", "input ->,"),
        ("batch |,", "batch |,"),
        ("..v,..", "..v.."),
        ("..vw..,", "..vw..,"),
        ("a..v..b", "a, ..v.., b"),
        ("2*i + 1", "2*i+1"),
        ("1*i", "1*i"),
        ("a*b", "a*b"),
        ("o+k", "o+k"),
        ("1*o<+1*k", "o<+k"),
        ("1*o=+0+1*k", "o=+k"),
        ("2*o<+1+3*k", "2*o<+1+3*k"),
        ("3*output+1*kernel,", "3*output+kernel"),
        ("s * i <+ d * k", "s*i<+d*k"),
        ("a , b ^ c", "a, b^c"),
        ("x1,", "x1,"),
        ("007", "7"),
        ("_", "_"),
    ];
    for (text, canonical) in shapes {
        let slot = parse_shape_spec(text).unwrap();
        assert_eq!(slot.to_string(), canonical, "canonical text of {text:?}");
        assert_eq!(parse_shape_spec(canonical).unwrap(), slot, "{canonical:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Binding identifier coefficients and padding
// ---------------------------------------------------------------------------------------------

#[test]
fn bind_substitutes_coefficients() {
    let spec = parse_einsum("x, s*o<+d*k; k => x, o").unwrap();
    let bound = spec
        .bind(&Bindings::default().coefficient("s", 2).coefficient("d", 3))
        .unwrap();
    assert_eq!(
        bound,
        parse_einsum("x, 2*o<+3*k; k => x, o").unwrap(),
        "bound spec"
    );
    // The original is untouched.
    assert_eq!(spec, parse_einsum("x, s*o<+d*k; k => x, o").unwrap());

    // Identifier strides on the result side and in pure strides are bound too.
    let spec = parse_einsum("i => a*i+1").unwrap();
    let bound = spec.bind(&Bindings::default().coefficient("a", 4)).unwrap();
    assert_eq!(
        bound.lhs.output.trailing,
        [strided(int(4), "i", 1)],
        "{bound}"
    );

    // Extra bindings are ignored; a spec without identifiers binds to itself.
    let spec = parse_einsum("2*o<+k => o").unwrap();
    assert_eq!(
        spec.bind(&Bindings::default().coefficient("zzz", 9)),
        Ok(spec.clone())
    );
}

#[test]
fn bind_reports_unbound_coefficients() {
    let spec = parse_einsum("x, s*o<+d*k; k => x, o").unwrap();
    let err = spec
        .bind(&Bindings::default().coefficient("s", 2))
        .unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::UnboundCoefficient);
    assert_eq!(err.column, None);
    assert!(err.message.contains("'d'"), "{err}");
    assert!(err.message.contains("dilation"), "{err}");
    assert!(err.message.contains("s*o<+d*k"), "{err}");
    assert!(err.to_string().contains(&spec.to_string()), "{err}");

    let err = spec.bind(&Bindings::default()).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::UnboundCoefficient);
    assert!(err.message.contains("stride 's'"), "{err}");

    let spec = parse_einsum("a*b => b").unwrap();
    let err = spec.bind(&Bindings::default()).unwrap_err();
    assert_eq!(err.kind, SpecErrorKind::UnboundCoefficient);
    assert!(err.message.contains("'a'"), "{err}");

    // A coefficient bound to 0 is rejected like a literal 0.
    let err = spec
        .bind(&Bindings::default().coefficient("a", 0))
        .unwrap_err();
    assert!(err.message.contains("at least 1"), "{err}");
}

#[test]
fn bind_resolves_unspecified_padding() {
    let spec = parse_einsum("o+k, 2*p<+q, 2*r=+s => o, p, r").unwrap();
    let paddings = |spec: &EinsumSpec| -> Vec<Padding> {
        spec.rhs[0]
            .output
            .trailing
            .iter()
            .map(|axis| match axis {
                AxisSpec::Affine(AffineSpec {
                    conv: Some(conv), ..
                }) => conv.padding,
                other => panic!("not a convolution: {other:?}"),
            })
            .collect()
    };
    use Padding::{Padded, Unspecified, Valid};
    assert_eq!(
        paddings(&spec.bind(&Bindings::default()).unwrap()),
        [Unspecified, Valid, Padded]
    );
    assert_eq!(
        paddings(&spec.bind(&Bindings::default().use_padding(true)).unwrap()),
        [Padded, Valid, Padded]
    );
    assert_eq!(
        paddings(&spec.bind(&Bindings::default().use_padding(false)).unwrap()),
        [Valid, Valid, Padded]
    );
}

// ---------------------------------------------------------------------------------------------
// Captures
// ---------------------------------------------------------------------------------------------

#[test]
fn capture_names_labels_and_row_variables() {
    let spec = parse_einsum("..v..|...ijk => ..v..kji").unwrap();
    assert_eq!(spec.capture("i"), Ok(CaptureKind::Dim));
    assert_eq!(spec.capture("k"), Ok(CaptureKind::Dim));
    assert_eq!(spec.capture("v"), Ok(CaptureKind::Row));
    // `...` without `->` is in the output row.
    assert_eq!(spec.capture("output"), Ok(CaptureKind::Row));

    for missing in ["batch", "input", "x", "", "..."] {
        let err = spec.capture(missing).unwrap_err();
        assert_eq!(err.kind, SpecErrorKind::Capture, "{missing:?}");
        assert_eq!(err.column, None);
        assert!(err.message.contains(&format!("'{missing}'")), "{err}");
        assert!(err.message.contains("i, j, k"), "{err}");
        assert!(err.message.contains("v, output"), "{err}");
    }

    // Affine over/kernel labels and concat components are capturable; coefficients are not.
    let spec = parse_einsum("s*o<+k, a^3 => o, a").unwrap();
    assert_eq!(spec.capture("o"), Ok(CaptureKind::Dim));
    assert_eq!(spec.capture("k"), Ok(CaptureKind::Dim));
    assert_eq!(spec.capture("a"), Ok(CaptureKind::Dim));
    assert_eq!(spec.capture("s").unwrap_err().kind, SpecErrorKind::Capture);
    let err = parse_einsum("0 => 1").unwrap().capture("x").unwrap_err();
    assert!(err.message.contains("(none)"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Shape literals
// ---------------------------------------------------------------------------------------------

#[test]
fn shape_literals() {
    let dim = |size, basis: Option<&str>| match basis {
        Some(name) => DimLiteral::named(size, name),
        None => DimLiteral::new(size),
    };
    let table: Vec<(&str, ShapeLiteral, &str)> = vec![
        (
            "2|3->4",
            ShapeLiteral {
                batch: vec![dim(2, None)],
                input: vec![dim(3, None)],
                output: vec![dim(4, None)],
            },
            "2|3->4",
        ),
        (
            " 2 , 3 @ rgb | -> 4 @default ,",
            ShapeLiteral {
                batch: vec![dim(2, None), dim(3, Some("rgb"))],
                input: vec![],
                output: vec![dim(4, None)],
            },
            "2,3@rgb|4",
        ),
        (
            "5->",
            ShapeLiteral {
                input: vec![dim(5, None)],
                ..ShapeLiteral::default()
            },
            "5->",
        ),
        (
            "1@_x,0",
            ShapeLiteral {
                output: vec![dim(1, Some("_x")), dim(0, None)],
                ..ShapeLiteral::default()
            },
            "1@_x,0",
        ),
        ("|->", ShapeLiteral::default(), ""),
        (
            "1 * , 1 | 1*->",
            ShapeLiteral {
                batch: vec![DimLiteral::claim_free(), dim(1, None)],
                input: vec![DimLiteral::claim_free()],
                ..ShapeLiteral::default()
            },
            "1*,1|1*->",
        ),
    ];
    for (text, expected, canonical) in &table {
        let parsed = parse_shape_literal(text).unwrap();
        assert_eq!(&parsed, expected, "{text:?}");
        assert_eq!(parsed.to_string(), *canonical, "{text:?}");
        assert_eq!(parse_shape_literal(canonical).as_ref(), Ok(expected));
    }
    for (text, column) in [
        ("2,,3", 3),
        ("2@", 3),
        ("2@rgb@x", 6),
        ("a", 1),
        ("3-4", 2),
        ("4*", 1),
        ("1*@rgb", 3),
        ("1@rgb*", 6),
    ] {
        check_error(Parser::Literal, text, column, SpecErrorKind::Syntax);
    }
}
