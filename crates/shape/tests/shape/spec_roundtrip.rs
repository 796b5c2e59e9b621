//! Property tests of the canonical printer: for generated einsum-spec, shape-spec and shape-literal
//! trees, printing and parsing again gives back the same tree, and printing is idempotent.

use proptest::prelude::*;
use proptest::sample::select;

use rcannl_shape::spec::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, ConvSpec, DimLiteral, EinsumSpec,
    ExplicitPadding, Kind, MAX_INTEGER, Padding, RowSpec, RowVar, ShapeLiteral, SlotSpec,
    parse_einsum, parse_shape_literal, parse_shape_spec,
};

/// Dimension labels: single letters (which single-character mode reads as they are) and longer
/// names (which force the printer into multi-character mode), in any script. None is named after
/// a kind, so a label never clashes with a `...`.
const LABELS: &[&str] = &[
    "i", "j", "k", "a", "B", "hw", "out", "k2", "c_1", "Xy", "α", "жx", "Ω_2",
];
/// Row-variable names, disjoint from the labels. `batch`/`input`/`output` are the names `...`
/// takes in rows of those kinds, so they are row variables only.
const ROW_VARS: &[&str] = &["v", "w", "rows", "r_2", "batch", "input", "output", "ρ"];
/// Stride and dilation identifiers, disjoint from both.
const COEFFICIENTS: &[&str] = &["s", "d", "st", "dil2"];

fn label() -> impl Strategy<Value = String> {
    select(LABELS).prop_map(str::to_owned)
}

fn coefficient() -> impl Strategy<Value = Coefficient> {
    prop_oneof![
        3 => (1usize..5).prop_map(Coefficient::Int),
        1 => select(COEFFICIENTS).prop_map(|name| Coefficient::Ident(name.to_owned())),
    ]
}

fn padding() -> impl Strategy<Value = Padding> {
    prop_oneof![
        Just(Padding::Padded),
        Just(Padding::Valid),
        Just(Padding::Unspecified),
        (0usize..4, 0usize..4, any::<bool>()).prop_map(|(before, after, ceil)| {
            Padding::Explicit(ExplicitPadding {
                before,
                after,
                ceil,
            })
        })
    ]
}

fn affine() -> impl Strategy<Value = AxisSpec> {
    let conv =
        (coefficient(), label(), padding()).prop_map(|(dilation, kernel, padding)| ConvSpec {
            dilation,
            kernel,
            padding,
        });
    (
        coefficient(),
        label(),
        prop_oneof![Just(0usize), 1usize..4],
        proptest::option::of(conv),
    )
        .prop_map(|(stride, over, offset, conv)| {
            AxisSpec::Affine(AffineSpec {
                stride,
                over,
                offset,
                conv,
            })
        })
}

fn concat_component() -> impl Strategy<Value = ConcatComponent> {
    prop_oneof![
        2 => label().prop_map(|name| ConcatComponent::Label { name }),
        1 => (1usize..8).prop_map(|size| ConcatComponent::Size { size }),
    ]
}

/// A fixed index: small, or anything a spec may write (up to the largest integer).
fn index() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..13, 1 => 0..=MAX_INTEGER, 1 => Just(MAX_INTEGER)]
}

/// A size in a shape literal, which may be any `usize`.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..13, 1 => any::<usize>()]
}

fn axis() -> impl Strategy<Value = AxisSpec> {
    prop_oneof![
        4 => label().prop_map(AxisSpec::label),
        1 => Just(AxisSpec::Anonymous),
        1 => index().prop_map(|index| AxisSpec::Fixed { index }),
        2 => affine(),
        1 => proptest::collection::vec(concat_component(), 2..5)
            .prop_map(|components| AxisSpec::Concat { components }),
    ]
}

/// Axes that single-character mode can also express (no affine or concat axes).
fn plain_axis() -> impl Strategy<Value = AxisSpec> {
    prop_oneof![
        4 => label().prop_map(AxisSpec::label),
        1 => Just(AxisSpec::Anonymous),
        1 => index().prop_map(|index| AxisSpec::Fixed { index }),
    ]
}

fn row_var() -> impl Strategy<Value = RowVar> {
    prop_oneof![
        Just(RowVar::Ellipsis),
        select(ROW_VARS).prop_map(|name| RowVar::Named(name.to_owned())),
    ]
}

/// A row of `axes`: closed (all axes trailing, as the invariant requires) or open.
fn row_of<S>(axes: fn() -> S, max: usize) -> impl Strategy<Value = RowSpec>
where
    S: Strategy<Value = AxisSpec> + 'static,
{
    prop_oneof![
        proptest::collection::vec(axes(), 0..=max).prop_map(RowSpec::closed),
        (
            proptest::collection::vec(axes(), 0..=max / 2),
            row_var(),
            proptest::collection::vec(axes(), 0..=max / 2),
        )
            .prop_map(|(leading, var, trailing)| RowSpec::open(leading, var, trailing)),
    ]
}

fn slot_of<S>(axes: fn() -> S, max: usize) -> impl Strategy<Value = SlotSpec>
where
    S: Strategy<Value = AxisSpec> + 'static,
{
    // Unwritten kinds are common in real specs: make the empty row likely.
    let row = move || {
        prop_oneof![
            1 => Just(RowSpec::default()),
            2 => row_of(axes, max),
        ]
    };
    (row(), row(), row()).prop_map(|(batch, input, output)| SlotSpec {
        batch,
        input,
        output,
    })
}

fn slot() -> impl Strategy<Value = SlotSpec> {
    slot_of(axis, 4)
}

/// Slots with at most one item per row (one axis, or a lone row variable) and no affine or concat
/// axes: their canonical text is often in single-character mode, which is where multi-letter names
/// need the printer's trailing comma.
fn small_slot() -> impl Strategy<Value = SlotSpec> {
    slot_of(plain_axis, 1)
}

fn einsum_of<S>(slot: fn() -> S) -> impl Strategy<Value = EinsumSpec>
where
    S: Strategy<Value = SlotSpec> + 'static,
{
    (proptest::collection::vec(slot(), 1..=5), slot())
        .prop_map(|(rhs, lhs)| EinsumSpec { rhs, lhs })
}

fn dim_literal() -> impl Strategy<Value = DimLiteral> {
    let basis = proptest::option::of(select(&["rgb", "feat", "_x", "a1", "default2", "B"][..]));
    prop_oneof![
        8 => (size(), basis).prop_map(|(size, basis)| match basis {
            Some(name) => DimLiteral::named(size, name),
            None => DimLiteral::new(size),
        }),
        1 => Just(DimLiteral::claim_free()),
    ]
}

fn shape_literal() -> impl Strategy<Value = ShapeLiteral> {
    let row = || proptest::collection::vec(dim_literal(), 0..4);
    (row(), row(), row()).prop_map(|(batch, input, output)| ShapeLiteral {
        batch,
        input,
        output,
    })
}

/// The generators keep the parser's invariants; check them so that a failure below is the
/// printer's or the parser's fault, not the generator's.
fn assert_well_formed(spec: &EinsumSpec) {
    for (_, slot) in spec.slots() {
        for kind in Kind::ALL {
            let row = slot.row(kind);
            assert!(row.row_var.is_some() || row.leading.is_empty());
        }
    }
    let labels = spec.dim_labels();
    assert!(spec.row_vars().iter().all(|var| !labels.contains(var)));
}

fn check_einsum(spec: &EinsumSpec) -> Result<(), TestCaseError> {
    assert_well_formed(spec);
    let text = spec.to_string();
    let parsed = parse_einsum(&text);
    prop_assert_eq!(parsed.as_ref(), Ok(spec), "canonical text {:?}", text);
    prop_assert_eq!(parsed.unwrap().to_string(), text);
    Ok(())
}

fn check_slot(slot: &SlotSpec) -> Result<(), TestCaseError> {
    let text = slot.to_string();
    let parsed = parse_shape_spec(&text);
    prop_assert_eq!(parsed.as_ref(), Ok(slot), "canonical text {:?}", text);
    prop_assert_eq!(parsed.unwrap().to_string(), text);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn einsum_specs_round_trip(spec in einsum_of(slot)) {
        check_einsum(&spec)?;
    }

    #[test]
    fn small_einsum_specs_round_trip(spec in einsum_of(small_slot)) {
        check_einsum(&spec)?;
    }

    #[test]
    fn shape_specs_round_trip(slot in slot()) {
        check_slot(&slot)?;
    }

    #[test]
    fn small_shape_specs_round_trip(slot in small_slot()) {
        check_slot(&slot)?;
    }

    #[test]
    fn shape_literals_round_trip(literal in shape_literal()) {
        let text = literal.to_string();
        let parsed = parse_shape_literal(&text);
        prop_assert_eq!(parsed.as_ref(), Ok(&literal), "canonical text {:?}", text);
        prop_assert_eq!(parsed.unwrap().to_string(), text);
    }
}
