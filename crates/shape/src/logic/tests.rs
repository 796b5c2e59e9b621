//! Most tests render the generated constraints as text and compare the whole list. The
//! operation's shapes are fixture rows `C.b`, `A.i`, … (row variables numbered from 100, so
//! the generator's own variables start at `$0` and `..$0..`).

use super::*;
use crate::spec::{AffineSpec, AxisSpec, Bindings, Coefficient, RowSpec, SlotSpec, parse_einsum};
use crate::term::{AffineDim, Border, ConvDim};

// -----------------------------------------------------------------------------------------
// Fixtures and rendering
// -----------------------------------------------------------------------------------------

/// The result, then the operands in order.
const SLOT_NAMES: [&str; 4] = ["C", "A", "B", "D"];
const FIRST_FIXTURE_ROW: u32 = 100;

fn fixture_row(slot: usize, kind: Kind) -> RowVarId {
    RowVarId(FIRST_FIXTURE_ROW + 10 * slot as u32 + kind as u32)
}

/// Slot `slot`'s shape: three bare row variables.
fn open(slot: usize) -> Shape {
    let row = |kind| Row::var(fixture_row(slot, kind));
    Shape {
        batch: row(Kind::Batch),
        input: row(Kind::Input),
        output: row(Kind::Output),
    }
}

fn row_var_name(var: RowVarId) -> String {
    if var.0 < FIRST_FIXTURE_ROW {
        return format!("${}", var.0);
    }
    let offset = (var.0 - FIRST_FIXTURE_ROW) as usize;
    let kind = ["b", "i", "o"][offset % 10];
    format!("{}.{kind}", SLOT_NAMES[offset / 10])
}

/// A bare fixture row as `C.b`; any other row as `[$0,..$1..,3]` (`◇` marks the position of
/// a closed row's marker when it has a leading flank).
fn render_row(row: &Row) -> String {
    if row.n_explicit() == 0
        && let Some(var) = row.var
        && var.0 >= FIRST_FIXTURE_ROW
    {
        return row_var_name(var);
    }
    let mut items: Vec<String> = row.leading.iter().map(ToString::to_string).collect();
    match row.var {
        Some(var) => items.push(format!("..{}..", row_var_name(var))),
        None if !row.leading.is_empty() => items.push("◇".to_owned()),
        None => {}
    }
    items.extend(row.trailing.iter().map(ToString::to_string));
    format!("[{}]", items.join(","))
}

fn render_rows(rows: &[Row]) -> String {
    rows.iter().map(render_row).collect::<Vec<_>>().join(" ")
}

fn render(constraint: &Constraint) -> String {
    match constraint {
        Constraint::DimEq(a, b) => format!("{a} = {b}"),
        Constraint::DimLe { res, opnd } => format!("{res} ⊑ {opnd}"),
        Constraint::AtLeast { dim, size } => format!("{dim} ≥ {size}"),
        Constraint::RowEq(a, b) => format!("{} ≈ {}", render_row(a), render_row(b)),
        Constraint::RowLe { res, opnd } => {
            format!("{} ≤ {}", render_row(res), render_row(opnd))
        }
        Constraint::TotalElems {
            rows,
            total,
            coefficient,
        } => format!("#({}) = {coefficient}·{total}", render_rows(rows)),
        Constraint::Exact { rows, dims } => {
            let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
            format!("({}) is [{}]", render_rows(rows), dims.join(","))
        }
    }
}

fn rendered(generated: &Generated) -> Vec<String> {
    generated.constraints.iter().map(render).collect()
}

/// Runs `logic` on fixture shapes with `n_operands` operands and a fresh supply.
fn run_with(logic: &Logic, n_operands: usize) -> Result<Generated, ShapeError> {
    let operands: Vec<Shape> = (1..=n_operands).map(open).collect();
    generate(logic, &open(0), &operands, &mut VarSupply::default())
}

fn run(logic: &Logic) -> Generated {
    run_with(logic, logic.arity())
        .unwrap_or_else(|err| panic!("{logic:?} should generate, got:\n{err}"))
}

fn spec(text: &str) -> EinsumSpec {
    parse_einsum(text).unwrap_or_else(|err| panic!("{text:?} should parse, got:\n{err}"))
}

fn run_spec(text: &str) -> Generated {
    run(&Logic::Spec(spec(text)))
}

fn spec_error(text: &str) -> ShapeError {
    match run_with(&Logic::Spec(spec(text)), spec(text).arity()) {
        Ok(generated) => panic!("{text:?} should fail, generated {:?}", rendered(&generated)),
        Err(err) => err,
    }
}

fn check(what: &str, generated: &Generated, expected: &[&str]) {
    assert_eq!(rendered(generated), expected, "constraints of {what}");
}

/// The constraints other than the equalities of a fixture row with the closed empty row
/// (what a kind the spec does not write asserts).
fn written(generated: &Generated) -> Vec<String> {
    rendered(generated)
        .into_iter()
        .filter(|c| !c.starts_with("[] ≈ ") && !c.ends_with(" ≈ []"))
        .collect()
}

fn dim_vars(ids: &[u32]) -> Vec<DimVar> {
    ids.iter().map(|&id| DimVar(id)).collect()
}

// -----------------------------------------------------------------------------------------
// Broadcasting logics
// -----------------------------------------------------------------------------------------

#[test]
fn broadcasting_logics() {
    #[rustfmt::skip]
    let cases: [(Logic, &[&str]); 6] = [
        (Logic::Pointwise(1), &["C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o"]),
        (Logic::Pointwise(2), &[
            "C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o",
            "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ B.o",
        ]),
        (Logic::Pointwise(3), &[
            "C.b ≤ A.b", "C.i ≤ A.i", "C.o ≤ A.o",
            "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ B.o",
            "C.b ≤ D.b", "C.i ≤ D.i", "C.o ≤ D.o",
        ]),
        (Logic::Transpose, &["C.b ≤ A.b", "C.i ≤ A.o", "C.o ≤ A.i"]),
        (Logic::Compose, &[
            "A.i ≤ B.o", "C.b ≤ A.b", "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ A.o",
        ]),
        (Logic::ComposeAccumulate, &[
            "A.i ≤ B.o", "C.b ≤ A.b", "C.b ≤ B.b", "C.i ≤ B.i", "C.o ≤ A.o",
            "C.b ≤ D.b", "C.i ≤ D.i", "C.o ≤ D.o",
        ]),
    ];
    for (logic, expected) in cases {
        let generated = run(&logic);
        check(&format!("{logic:?}"), &generated, expected);
        assert_eq!(
            generated,
            Generated {
                constraints: generated.constraints.clone(),
                ..Generated::default()
            },
            "{logic:?} reports no names or variables"
        );
    }
}

#[test]
fn broadcasting_passes_rows_through_unchanged() {
    let vars = &mut VarSupply::default();
    let (r, s) = (vars.row(), vars.row());
    let a = Shape {
        batch: Row::var(r),
        input: Row::closed(vec![Dim::size(3)]),
        output: Row::closed(vec![Dim::size(4), Dim::Unit]),
    };
    let b = Shape {
        output: Row {
            leading: vec![Dim::size(2)],
            var: Some(s),
            trailing: vec![Dim::size(3)],
        },
        ..Shape::default()
    };
    let c = Shape::default();
    let generated = generate(&Logic::Compose, &c, &[a.clone(), b.clone()], vars).unwrap();
    let le = |res: &Row, opnd: &Row| Constraint::RowLe {
        res: res.clone(),
        opnd: opnd.clone(),
    };
    assert_eq!(
        generated.constraints,
        vec![
            le(&a.input, &b.output),
            le(&c.batch, &a.batch),
            le(&c.batch, &b.batch),
            le(&c.input, &b.input),
            le(&c.output, &a.output),
        ]
    );
    assert_eq!(
        rendered(&generated)[0],
        "[3] ≤ [2,..$1..,3]",
        "the rendering used by the other tests"
    );
    assert_eq!((vars.n_dims(), vars.n_rows()), (0, 2), "no fresh variables");
}

// -----------------------------------------------------------------------------------------
// Specs: equalities with templates
// -----------------------------------------------------------------------------------------

#[test]
fn spec_equalities_result_first_then_operands() {
    #[rustfmt::skip]
    let cases: [(&str, &[&str]); 4] = [
        ("ij=>ji", &[
            "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$1,$0]",
            "[] ≈ A.b", "[] ≈ A.i", "[$0,$1] ≈ A.o",
        ]),
        // `j` is one variable in both operands: the environment is shared by all slots.
        ("ij;jk=>ik", &[
            "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0,$2]",
            "[] ≈ A.b", "[] ≈ A.i", "[$0,$1] ≈ A.o",
            "[] ≈ B.b", "[] ≈ B.i", "[$1,$2] ≈ B.o",
        ]),
        // Labels link rows of different kinds and slots (`o`: A's output is B's input).
        ("b|i->o; b|o->p; p => b|i->p", &[
            "C.b ≈ [$0]", "C.i ≈ [$1]", "C.o ≈ [$3]",
            "[$0] ≈ A.b", "[$1] ≈ A.i", "[$2] ≈ A.o",
            "[$0] ≈ B.b", "[$2] ≈ B.i", "[$3] ≈ B.o",
            "[] ≈ D.b",   "[] ≈ D.i",   "[$3] ≈ D.o",
        ]),
        // A spec without operand axes: the result's axes are only in the result.
        ("=> ab", &[
            "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0,$1]",
            "[] ≈ A.b", "[] ≈ A.i", "[] ≈ A.o",
        ]),
    ];
    for (text, expected) in cases {
        check(text, &run_spec(text), expected);
    }
}

#[test]
fn spec_environments_are_returned() {
    let generated = run_spec("..r.., i; i, j => ..r.., j");
    let labels: Vec<(&str, DimVar)> = generated
        .labels
        .iter()
        .map(|(name, &var)| (name.as_str(), var))
        .collect();
    assert_eq!(labels, [("i", DimVar(0)), ("j", DimVar(1))]);
    let row_vars: Vec<(&str, RowVarId)> = generated
        .row_vars
        .iter()
        .map(|(name, &var)| (name.as_str(), var))
        .collect();
    assert_eq!(row_vars, [("r", RowVarId(0))]);
    assert_eq!(
        written(&generated),
        ["C.o ≈ [..$0..,$1]", "[..$0..,$0] ≈ A.o", "[$0,$1] ≈ B.o"]
    );
}

#[test]
fn ellipsis_is_named_after_its_kind() {
    #[rustfmt::skip]
    let cases: [(&str, &[&str], &[&str]); 4] = [
        // `...` in the batch rows of an operand and the result: one variable.
        ("...|i->o => ...|o->i", &["batch"], &[
            "C.b ≈ [..$0..]", "C.i ≈ [$1]", "C.o ≈ [$0]",
            "[..$0..] ≈ A.b", "[$0] ≈ A.i", "[$1] ≈ A.o",
        ]),
        // `...` in a batch row and in an output row: two variables.
        ("...|i => ..., i", &["batch", "output"], &[
            "C.o ≈ [..$1..,$0]",
            "[..$0..] ≈ A.b", "[$0] ≈ A.o",
        ]),
        // One per kind, each shared between operand and result.
        ("...|...->... => ...|...->...", &["batch", "input", "output"], &[
            "C.b ≈ [..$0..]", "C.i ≈ [..$1..]", "C.o ≈ [..$2..]",
            "[..$0..] ≈ A.b", "[..$1..] ≈ A.i", "[..$2..] ≈ A.o",
        ]),
        // A named row variable is keyed by name only: here it moves batch axes to the output.
        ("..v..|...ijk => ..v..kji", &["output", "v"], &[
            "C.o ≈ [..$0..,$2,$1,$0]",
            "[..$0..] ≈ A.b", "[..$1..,$0,$1,$2] ≈ A.o",
        ]),
    ];
    for (text, row_names, expected) in cases {
        let generated = run_spec(text);
        let names: Vec<&str> = generated.row_vars.keys().map(String::as_str).collect();
        assert_eq!(names, row_names, "row variables of {text:?}");
        assert_eq!(written(&generated), expected, "constraints of {text:?}");
    }
}

#[test]
fn axis_elaboration() {
    let cases: [(&str, &[&str]); 9] = [
        // `_` is a fresh variable at every occurrence.
        ("_, _ => _", &["C.o ≈ [$2]", "[$0,$1] ≈ A.o"]),
        // A fixed index is a fresh variable with room for the index.
        ("i, 2 => i", &["C.o ≈ [$0]", "[$0,$1] ≈ A.o", "$1 ≥ 3"]),
        ("i => i, 0", &["C.o ≈ [$0,$1]", "[$0] ≈ A.o", "$1 ≥ 1"]),
        (
            "0, 1 => 1",
            &["C.o ≈ [$2]", "[$0,$1] ≈ A.o", "$0 ≥ 1", "$1 ≥ 2", "$2 ≥ 2"],
        ),
        // Strided and convolution axes are affine terms over the label variables.
        ("2*i+1 => i", &["C.o ≈ [$0]", "[2*$0+1] ≈ A.o"]),
        (
            "2*o<+3*k; k => o",
            &["C.o ≈ [$0]", "[2*$0<+3*$1] ≈ A.o", "[$1] ≈ B.o"],
        ),
        (
            "o=+1+k; k => o",
            &["C.o ≈ [$0]", "[1*$0=+1*$1+1] ≈ A.o", "[$1] ≈ B.o"],
        ),
        // Concatenations: label variables and default-basis atoms.
        ("a^3^b => a, b", &["C.o ≈ [$0,$1]", "[$0^3^$1] ≈ A.o"]),
        (
            "a; b => a^b",
            &["C.o ≈ [$0^$1]", "[$0] ≈ A.o", "[$1] ≈ B.o"],
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(
            written(&run_spec(text)),
            expected,
            "constraints of {text:?}"
        );
    }
}

#[test]
fn fixed_indices_are_reported() {
    let generated = run_spec("i, 2; 0 => i");
    assert_eq!(generated.fixed_indices, [(DimVar(1), 2), (DimVar(2), 0)]);
    assert!(
        !generated.labels.contains_key("2"),
        "a fixed index is no label"
    );
}

#[test]
fn affine_terms_are_built_exactly() {
    let generated = run_spec("2*o<+3*k => o");
    let expected = Dim::Affine(Box::new(AffineDim {
        stride: 2,
        over: Dim::Var(DimVar(0)),
        conv: Some(ConvDim {
            dilation: 3,
            kernel: Dim::Var(DimVar(1)),
            border: Border::Valid,
        }),
        offset: 0,
    }));
    assert_eq!(
        generated.constraints[5],
        Constraint::RowEq(Row::closed(vec![expected]), open(1).output)
    );
}

#[test]
fn each_call_is_a_new_instance() {
    let logic = Logic::Spec(spec("i => i"));
    let vars = &mut VarSupply::default();
    let first = generate(&logic, &open(0), &[open(1)], vars).unwrap();
    let second = generate(&logic, &open(0), &[open(1)], vars).unwrap();
    assert_eq!(first.labels["i"], DimVar(0));
    assert_eq!(second.labels["i"], DimVar(1), "fresh variables per call");
    let again = generate(&logic, &open(0), &[open(1)], &mut VarSupply::default()).unwrap();
    assert_eq!(first, again, "deterministic on a fresh supply");
}

// -----------------------------------------------------------------------------------------
// Errors
// -----------------------------------------------------------------------------------------

#[test]
fn arity_errors() {
    let cases: [(Logic, usize, &str); 7] = [
        (
            Logic::Spec(spec("ij;jk=>ik")),
            1,
            "Invalid permutation spec (expected one argument): i, j; j, k => i, k",
        ),
        (
            Logic::Spec(spec("ij=>ji")),
            2,
            "Invalid einsum spec (expected two arguments): i, j => j, i",
        ),
        (
            Logic::Spec(spec("i;j=>ij")),
            3,
            "Invalid einsum spec (expected three arguments): i; j => i, j",
        ),
        (
            Logic::Spec(spec("i=>i")),
            4,
            "Invalid einsum spec (expected 4 arguments): i => i",
        ),
        (
            Logic::Block(spec("a;b=>a^b")),
            3,
            "Invalid block spec (expected 3 arguments): a; b => a^b",
        ),
        (
            Logic::Pointwise(2),
            1,
            "pointwise binary takes 2 operand(s); the operation was given 1 operand(s)",
        ),
        (
            Logic::BatchSlice { static_range: None },
            0,
            "batch slice takes 1 operand(s); the operation was given 0 \
             operand(s)",
        ),
    ];
    for (logic, given, message) in cases {
        let err = run_with(&logic, given).expect_err("wrong arity");
        assert_eq!(err.message, message, "{logic:?} with {given} operands");
    }
}

#[test]
fn spec_errors() {
    let cases: [(&str, &str); 3] = [
        (
            "s*o<+k => o",
            "Invalid stride value (expected integer): s in axis 's*o<+k'; bind it with \
             EinsumSpec::bind before generating constraints",
        ),
        (
            "2*o<+d*k => o",
            "Invalid dilation value (expected integer): d in axis '2*o<+d*k'; bind it with \
             EinsumSpec::bind before generating constraints",
        ),
        (
            "2*o+k => o",
            "use_padding must be specified in convolution spec: write '=+' (padded) or '<+' \
             (valid)",
        ),
    ];
    for (text, message) in cases {
        let err = spec_error(text);
        assert_eq!(err.message, message, "{text:?}");
        assert!(
            err.notes
                .iter()
                .any(|line| line.contains(&spec(text).to_string())),
            "the error quotes the spec: {err}"
        );
    }
    // Binding removes both errors.
    let bound = spec("s*o+k => o")
        .bind(&Bindings::default().coefficient("s", 2).use_padding(true))
        .unwrap();
    assert_eq!(
        written(&run(&Logic::Spec(bound))),
        ["C.o ≈ [$0]", "[2*$0=+1*$1] ≈ A.o"]
    );
}

#[test]
fn malformed_trees_are_errors_not_panics() {
    let output_only = |axis: AxisSpec| EinsumSpec {
        rhs: vec![SlotSpec {
            output: RowSpec::closed(vec![axis]),
            ..SlotSpec::default()
        }],
        lhs: SlotSpec::default(),
    };
    let zero_stride = output_only(AxisSpec::Affine(AffineSpec {
        stride: Coefficient::Int(0),
        over: "o".to_owned(),
        offset: 0,
        conv: None,
    }));
    let huge_index = output_only(AxisSpec::Fixed { index: usize::MAX });
    for (tree, message) in [
        (
            zero_stride,
            "Invalid stride value: 0 in axis '0*o'; it must be at least 1",
        ),
        (
            huge_index,
            "Fixed index 18446744073709551615 is too large: the axis would need more than \
             18446744073709551615 positions",
        ),
    ] {
        let err = run_with(&Logic::Spec(tree), 1).expect_err("malformed tree");
        assert_eq!(err.message, message);
    }
    let err = run_with(&Logic::Uint4x32ToPrec { coefficient: 0 }, 1).expect_err("zero");
    assert!(err.message.contains("at least 1"), "{err}");
}

// -----------------------------------------------------------------------------------------
// Blocks: discardable components
// -----------------------------------------------------------------------------------------

#[test]
fn discardable_labels_quantifier_test() {
    let cases: [(&str, &[&str]); 20] = [
        // The worked cases of the design notes.
        ("a^b => a", &["b"]),
        ("a^b => b", &["a"]),
        ("a^b => a^b", &[]),
        ("b^c => a", &[]),
        ("a; b => a^b", &[]),
        ("a; b => a^c", &[]),
        ("a; b => a^b^c", &["c"]),
        // Integer components have no variable: never discardable, never covering.
        ("3^a => a", &[]),
        ("a => a^3", &[]),
        ("a^3^b => a", &["b"]),
        ("a^b => a^3", &[]),
        // One covered axis per slot is enough; other axes do not matter.
        ("x, a^b => x, a", &["b"]),
        ("a^b; c^d => a, c", &["b", "d"]),
        ("a^b; c => a", &["b"]),
        // Every slot of the other side must be covered.
        ("a; x => a^b", &[]),
        ("a; c => a^b^c", &["b"]),
        // `_` and fixed indices are never covered.
        ("a^b => _", &[]),
        ("a^b => 0", &[]),
        // A component the other side names is carried through.
        ("a^b => a, b", &[]),
        ("a^b; c => a, b", &[]),
    ];
    for (text, expected) in cases {
        assert_eq!(
            discardable_labels(&spec(text)),
            expected,
            "discardable in {text:?}"
        );
    }
}

#[test]
fn block_reports_discardable_variables() {
    let generated = run(&Logic::Block(spec("a; b => a^b^c")));
    #[rustfmt::skip]
    let expected = [
        "C.b ≈ []", "C.i ≈ []", "C.o ≈ [$0^$1^$2]",
        "[] ≈ A.b", "[] ≈ A.i", "[$0] ≈ A.o",
        "[] ≈ B.b", "[] ≈ B.i", "[$1] ≈ B.o",
    ];
    check("a; b => a^b^c", &generated, &expected);
    assert_eq!(generated.discardable, dim_vars(&[2]));
    assert_eq!(generated.labels["c"], DimVar(2));

    let spec_only = run(&Logic::Spec(spec("a; b => a^b^c")));
    assert_eq!(
        spec_only.discardable,
        [],
        "only a block reports discardable variables"
    );
    assert_eq!(spec_only.constraints, generated.constraints);
}

// -----------------------------------------------------------------------------------------
// Batch slices, bit casts, terminals
// -----------------------------------------------------------------------------------------

#[test]
fn batch_slice() {
    let dynamic = run(&Logic::BatchSlice { static_range: None });
    check(
        "a dynamic slice",
        &dynamic,
        &["A.b ≈ [$0,..C.b..]", "C.i ≈ A.i", "C.o ≈ A.o"],
    );
    assert_eq!(dynamic.slice_dim, Some(Dim::Var(DimVar(0))));

    let fixed = run(&Logic::BatchSlice {
        static_range: Some(5),
    });
    check(
        "a static slice",
        &fixed,
        &["A.b ≈ [5,..C.b..]", "C.i ≈ A.i", "C.o ≈ A.o"],
    );
    assert_eq!(fixed.slice_dim, Some(Dim::size(5)));

    // The slice axis goes in front of the result's leading flank.
    let vars = &mut VarSupply::default();
    let r = vars.row();
    let result = Shape {
        batch: Row {
            leading: vec![Dim::size(2)],
            var: Some(r),
            trailing: vec![Dim::size(3)],
        },
        ..Shape::default()
    };
    let closed_result = Shape {
        batch: Row::closed(vec![Dim::size(2)]),
        ..Shape::default()
    };
    let logic = Logic::BatchSlice { static_range: None };
    for (result, expected) in [(result, "[$0,2,..$0..,3]"), (closed_result, "[$1,◇,2]")] {
        let generated = generate(&logic, &result, &[open(1)], vars).unwrap();
        assert_eq!(rendered(&generated)[0], format!("A.b ≈ {expected}"));
    }
}

#[test]
fn uint4x32_to_prec() {
    let generated = run(&Logic::Uint4x32ToPrec { coefficient: 4 });
    check(
        "a bit cast",
        &generated,
        &["(A.b A.i A.o) is [$0]", "#(C.b C.i C.o) = 4·$0"],
    );
}

#[test]
fn terminals() {
    let shape = open(0);
    let cases: [(TerminalInit, &[&str]); 3] = [
        (TerminalInit::Unconstrained, &[]),
        (TerminalInit::NElements(12), &["#(C.b C.i C.o) = 1·12"]),
        (
            TerminalInit::ExactDims(vec![Dim::size(3), Dim::size(4)]),
            &["(C.b C.i C.o) is [3,4]"],
        ),
    ];
    for (init, expected) in cases {
        let constraints: Vec<String> = terminal_constraints(&shape, &init)
            .iter()
            .map(render)
            .collect();
        assert_eq!(constraints, expected, "{init:?}");
    }
}
