//! Constraint generation through the public API: specs parsed from text, bound, and turned into
//! constraints the way shape inference and projection inference will call it. The unit tests in
//! `src/logic.rs` pin every constraint list; these check the structural promises over a corpus of
//! specs (one equality per slot and kind, one variable per name, the reported names match the
//! spec's) and a few whole operations.

use std::collections::BTreeSet;

use rcannl_shape::constraint::Constraint;
use rcannl_shape::logic::{
    Generated, Logic, TerminalInit, discardable_labels, generate, terminal_constraints,
};
use rcannl_shape::spec::{AxisSpec, Bindings, CaptureKind, EinsumSpec, Kind, parse_einsum};
use rcannl_shape::term::{AffineDim, Border, ConvDim, Dim, DimVar, Row, Shape, VarSupply};

/// Specs covering every construct: labels, `_`, fixed indices, strides, convolutions, concatenations,
/// `...` in every kind, named row variables, one to four operands.
const CORPUS: &[&str] = &[
    "ij=>ji",
    "ij;jk=>ik",
    "i;i=>",
    "=>ij",
    "ii=>i",
    "i=>ii",
    "b|i->o; b|o->p => b|i->p",
    "...|i->o => ...|o->i",
    "...|... => ...|..., k",
    "...|...->... => ...|...->...",
    "..v..|...ijk => ..v..kji",
    "..r.., i; ..r.., i => ..r..",
    "i, ..r.., j => j, ..r.., i",
    "_, _ => _",
    "i, 2 => i",
    "i => i, 0",
    "0, 1; 1 => 1",
    "2*i+1 => i",
    "..., 2*o<+3*k, c; k, c, d => ..., o, d",
    "o=+k; k => o",
    "..., 1*o=+2+k => ..., o",
    "a^b => a",
    "a; b => a^b^c",
    "a^3^b; b => a",
    "x, a^b; x => x, a",
    "a; b; c; d => a^b^c^d",
    "p; a; b => a^b",
];

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn spec(text: &str) -> EinsumSpec {
    parse_einsum(text).unwrap_or_else(|err| panic!("{text:?} should parse, got:\n{err}"))
}

/// A shape of three fresh row variables.
fn open_shape(vars: &mut VarSupply) -> Shape {
    Shape {
        batch: Row::var(vars.row()),
        input: Row::var(vars.row()),
        output: Row::var(vars.row()),
    }
}

/// Generates `logic` for a result and `n_operands` open operand shapes; returns them with it.
fn generate_open(logic: &Logic, n_operands: usize) -> (Generated, Shape, Vec<Shape>, VarSupply) {
    let mut vars = VarSupply::default();
    let result = open_shape(&mut vars);
    let operands: Vec<Shape> = (0..n_operands).map(|_| open_shape(&mut vars)).collect();
    let generated = generate(logic, &result, &operands, &mut vars)
        .unwrap_or_else(|err| panic!("{logic:?} should generate, got:\n{err}"));
    (generated, result, operands, vars)
}

/// Counts the axes of `spec` that get a variable of their own rather than a label's.
fn n_unlabelled_axes(spec: &EinsumSpec) -> usize {
    spec.slots()
        .flat_map(|(_, slot)| slot.rows().flat_map(|(_, row)| row.axes()))
        .filter(|axis| matches!(axis, AxisSpec::Anonymous | AxisSpec::Fixed { .. }))
        .count()
}

// ---------------------------------------------------------------------------------------------
// Structural promises over the corpus
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_constraints_have_one_equality_per_slot_and_kind() {
    for text in CORPUS {
        let spec = spec(text);
        let n = spec.arity();
        let (generated, result, operands, _) = generate_open(&Logic::Spec(spec.clone()), n);

        // The equalities come first: the result's three rows, then each operand's. The shape's
        // row is on the left of the result's equalities and on the right of an operand's.
        let (equalities, side) = generated.constraints.split_at(3 * (n + 1));
        let slots = std::iter::once((&spec.lhs, &result)).chain(spec.rhs.iter().zip(&operands));
        for (slot, ((slot_spec, shape), rows)) in slots.zip(equalities.chunks(3)).enumerate() {
            for ((kind, row_spec), constraint) in slot_spec.rows().zip(rows) {
                let Constraint::RowEq(left, right) = constraint else {
                    panic!("{text:?}: expected a row equality, got {constraint:?}");
                };
                let (shape_row, template_row) = if slot == 0 {
                    (left, right)
                } else {
                    (right, left)
                };
                assert_eq!(shape_row, shape.row(kind), "{text:?}: slot {slot}, {kind}");
                assert_eq!(
                    template_row.var.is_some(),
                    row_spec.row_var.is_some(),
                    "{text:?}: a template row is open exactly when the spec's row is"
                );
                assert_eq!(
                    template_row.n_explicit(),
                    row_spec.axes().count(),
                    "{text:?}: one term per written axis"
                );
            }
        }

        // The rest are the fixed indices' lower bounds.
        let bounds: Vec<Constraint> = generated
            .fixed_indices
            .iter()
            .map(|&(var, index)| Constraint::AtLeast {
                dim: Dim::Var(var),
                size: index + 1,
            })
            .collect();
        assert_eq!(side, bounds, "{text:?}: side constraints");
    }
}

#[test]
fn reported_names_are_the_specs_names() {
    for text in CORPUS {
        let spec = spec(text);
        let (generated, _, _, vars) = generate_open(&Logic::Block(spec.clone()), spec.arity());

        let labels: BTreeSet<&str> = generated.labels.keys().map(String::as_str).collect();
        assert_eq!(labels, spec.dim_labels().into_iter().collect(), "{text:?}");
        let row_vars: BTreeSet<&str> = generated.row_vars.keys().map(String::as_str).collect();
        assert_eq!(row_vars, spec.row_vars().into_iter().collect(), "{text:?}");

        // One variable per label, one per `_` or fixed index, nothing else.
        let distinct: BTreeSet<DimVar> = generated.labels.values().copied().collect();
        assert_eq!(distinct.len(), generated.labels.len(), "{text:?}");
        assert_eq!(
            vars.n_dims(),
            generated.labels.len() + n_unlabelled_axes(&spec),
            "{text:?}: fresh dimension variables"
        );

        // Every capture the spec accepts resolves to a reported variable.
        for name in spec.dim_labels() {
            assert_eq!(spec.capture(name), Ok(CaptureKind::Dim));
            assert!(generated.labels.contains_key(name));
        }
        for name in spec.row_vars() {
            assert_eq!(spec.capture(name), Ok(CaptureKind::Row));
            assert!(generated.row_vars.contains_key(name));
        }

        // Discardable variables are those of the discardable labels.
        let expected: Vec<DimVar> = discardable_labels(&spec)
            .into_iter()
            .map(|name| generated.labels[name])
            .collect();
        assert_eq!(generated.discardable, expected, "{text:?}");
    }
}

#[test]
fn block_and_spec_assert_the_same_equalities() {
    for text in CORPUS {
        let spec = spec(text);
        let n = spec.arity();
        let (as_spec, ..) = generate_open(&Logic::Spec(spec.clone()), n);
        let (as_block, ..) = generate_open(&Logic::Block(spec), n);
        assert_eq!(as_spec.constraints, as_block.constraints, "{text:?}");
        assert_eq!(as_spec.labels, as_block.labels, "{text:?}");
        assert!(as_spec.discardable.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Whole operations
// ---------------------------------------------------------------------------------------------

#[test]
fn convolution_after_binding() {
    let text = "..., s*oh+kh, c; kh, c, d => ..., oh, d";
    let bindings = Bindings::default().coefficient("s", 2).use_padding(false);
    let unbound = spec(text);
    let mut vars = VarSupply::default();
    let shapes: Vec<Shape> = (0..3).map(|_| open_shape(&mut vars)).collect();
    let err = generate(
        &Logic::Spec(unbound.clone()),
        &shapes[0],
        &shapes[1..],
        &mut vars,
    )
    .expect_err("an unbound stride");
    assert!(
        err.message
            .starts_with("Invalid stride value (expected integer): s"),
        "{err}"
    );

    let bound = unbound.bind(&bindings).unwrap();
    let (generated, ..) = generate_open(&Logic::Spec(bound), 2);
    let var = |name: &str| Dim::Var(generated.labels[name]);
    let Constraint::RowEq(image_template, _) = &generated.constraints[5] else {
        panic!("the image's output equality");
    };
    assert_eq!(image_template.var, Some(generated.row_vars["output"]));
    assert_eq!(
        image_template.trailing,
        [
            Dim::Affine(Box::new(AffineDim {
                stride: 2,
                over: var("oh"),
                conv: Some(ConvDim {
                    dilation: 1,
                    kernel: var("kh"),
                    border: Border::Valid,
                }),
                offset: 0,
            })),
            var("c"),
        ]
    );
}

#[test]
fn concatenation_and_its_slice() {
    // `++^` of two operands, and the spec that takes the first part back out.
    let (concat, ..) = generate_open(&Logic::Block(spec("a; b => a^b")), 2);
    assert!(concat.discardable.is_empty(), "both parts carry through");
    let (slice, ..) = generate_open(&Logic::Block(spec("a^b => a")), 1);
    assert_eq!(
        slice.discardable,
        [slice.labels["b"]],
        "the rest may be empty"
    );
    let (skip, ..) = generate_open(&Logic::Block(spec("3^a => a")), 1);
    assert!(
        skip.discardable.is_empty(),
        "a known-size prefix has no variable"
    );
    let Constraint::RowEq(template, _) = &skip.constraints[5] else {
        panic!("the operand's output equality");
    };
    assert_eq!(
        template,
        &Row::closed(vec![Dim::Concat(vec![
            Dim::size(3),
            Dim::Var(skip.labels["a"])
        ])])
    );
}

#[test]
fn every_logic_with_the_wrong_number_of_operands_is_an_error() {
    let logics = [
        Logic::Pointwise(1),
        Logic::Pointwise(2),
        Logic::Pointwise(3),
        Logic::Compose,
        Logic::ComposeAccumulate,
        Logic::Transpose,
        Logic::Spec(spec("i;j=>ij")),
        Logic::Block(spec("a;b=>a^b")),
        Logic::BatchSlice { static_range: None },
        Logic::Uint4x32ToPrec { coefficient: 4 },
    ];
    for logic in &logics {
        for given in 0..=4 {
            let mut vars = VarSupply::default();
            let shapes: Vec<Shape> = (0..=given).map(|_| open_shape(&mut vars)).collect();
            let outcome = generate(logic, &shapes[0], &shapes[1..], &mut vars);
            assert_eq!(
                outcome.is_ok(),
                given == logic.arity(),
                "{logic:?} with {given} operands: {outcome:?}"
            );
        }
    }
}

#[test]
fn terminal_initializers() {
    let mut vars = VarSupply::default();
    let shape = open_shape(&mut vars);
    let rows: Vec<Row> = Kind::ALL.map(|kind| shape.row(kind).clone()).into();
    assert_eq!(
        terminal_constraints(&shape, &TerminalInit::NElements(6)),
        [Constraint::TotalElems {
            rows: rows.clone(),
            total: Dim::size(6),
            coefficient: 1,
        }]
    );
    let dims = vec![Dim::size(2), Dim::size(3)];
    assert_eq!(
        terminal_constraints(&shape, &TerminalInit::ExactDims(dims.clone())),
        [Constraint::Exact { rows, dims }]
    );
    assert_eq!(
        terminal_constraints(&shape, &TerminalInit::Unconstrained),
        []
    );
}
