//! Solver tests on hand-written constraint sets: the examples of the reference's §2–§4 and the
//! seeds, each error message with a constraint set that triggers it.

use super::*;
use crate::term::{Basis, ConvDim};

fn n(size: usize) -> Dim {
    Dim::size(size)
}

fn named(size: usize, basis: &str) -> Dim {
    Dim::Atom {
        size,
        basis: Basis::Named(basis.into()),
    }
}

fn le(res: Dim, opnd: Dim) -> Constraint {
    Constraint::DimLe { res, opnd }
}

fn row_le(res: Row, opnd: Row) -> Constraint {
    Constraint::RowLe { res, opnd }
}

fn closed(dims: &[Dim]) -> Row {
    Row::closed(dims.to_vec())
}

fn open(leading: &[Dim], var: RowVarId, trailing: &[Dim]) -> Row {
    Row {
        leading: leading.to_vec(),
        var: Some(var),
        trailing: trailing.to_vec(),
    }
}

/// A leaf whose only row of interest is its output row.
fn leaf(label: &str, output: Row, is_param: bool) -> Leaf {
    Leaf {
        label: label.to_owned(),
        shape: Shape {
            output,
            ..Shape::default()
        },
        is_param,
    }
}

/// `N` fresh dimension variables.
fn fresh_dims<const N: usize>(s: &mut Solver) -> [DimVar; N] {
    std::array::from_fn(|_| s.vars().dim())
}

fn error_of(result: Result<(), ShapeError>) -> String {
    result.expect_err("expected a shape error").to_string()
}

#[test]
fn dimension_order_pins_caps_and_joins() {
    let mut s = Solver::new();
    let [a, b, c, d] = fresh_dims::<4>(&mut s);
    s.add([
        le(Dim::Var(a), n(3)),      // pin: below an atom only the atom
        le(Dim::Unit, Dim::Var(b)), // pin-top
        le(n(3), Dim::Var(c)),      // cap
        le(n(5), Dim::Var(c)),      // second, different cap: joins to 1*
        le(n(4), Dim::Var(d)),      // cap only
        le(Dim::Var(d), Dim::Unit), // anything refines 1*
    ])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3));
    assert_eq!(s.resolve_dim(&Dim::Var(b)), Dim::Unit);
    assert_eq!(s.resolve_dim(&Dim::Var(c)), Dim::Unit);
    assert_eq!(
        s.resolve_dim(&Dim::Var(d)),
        Dim::Var(d),
        "a cap alone decides nothing"
    );
    s.close(&[]).unwrap();
    assert_eq!(
        s.resolve_dim(&Dim::Var(d)),
        n(4),
        "closing commits to the cap"
    );
}

#[test]
fn dimension_errors() {
    let mut s = Solver::new();
    let msg = error_of(s.add([Constraint::DimEq(n(3), n(5))]));
    assert!(
        msg == "an axis must be both of size 3 and of size 5",
        "{msg}"
    );
    let msg = error_of(Solver::new().add([Constraint::DimEq(n(4), named(4, "rgb"))]));
    assert!(
        msg == "an axis must be both 4 and 4@rgb: the same size with different bases",
        "{msg}"
    );
    // An explicit 1 is a claim: it does not broadcast.
    let msg = error_of(Solver::new().add([le(n(5), n(1))]));
    assert!(
        msg == "an axis of size 1 does not broadcast to size 5 (only an equal size or the unit 1* broadcasts to a size)",
        "{msg}"
    );
    let msg = error_of(Solver::new().add([le(named(3, "rgb"), n(3))]));
    assert!(
        msg == "an axis of size 3 does not broadcast to size 3@rgb (only an equal size or the unit 1* broadcasts to a size)",
        "{msg}"
    );
    Solver::new().add([le(n(5), Dim::Unit)]).unwrap();
}

#[test]
fn caps_flow_along_adjacencies() {
    // {3 ⊑ α, α ⊑ β, 5 ⊑ β}: β is above 3 and 5, so it is 1*; α closes to 3.
    for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2], [1, 2, 0]] {
        let mut s = Solver::new();
        let [a, b] = fresh_dims::<2>(&mut s);
        let all = [
            le(n(3), Dim::Var(a)),
            le(Dim::Var(a), Dim::Var(b)),
            le(n(5), Dim::Var(b)),
        ];
        s.add(order.map(|i| all[i].clone())).unwrap();
        assert_eq!(s.resolve_dim(&Dim::Var(b)), Dim::Unit, "order {order:?}");
        s.close(&[]).unwrap();
        assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3), "order {order:?}");
    }
}

#[test]
fn closing_propagates_each_commitment_before_the_next() {
    // {3 ⊑ α, 5 ⊑ β, γ ⊑ α, γ ⊑ β} with leaves α, β. Closing α to its cap 3 pins γ (below an
    // atom lies only the atom), so β, with both 5 and 3 below it, can only be `1*`. Committing
    // both leaves before propagating would give α = 3, β = 5 and no room for γ.
    let mut s = Solver::new();
    let [a, b, g] = fresh_dims::<3>(&mut s);
    s.add([
        le(n(3), Dim::Var(a)),
        le(n(5), Dim::Var(b)),
        le(Dim::Var(g), Dim::Var(a)),
        le(Dim::Var(g), Dim::Var(b)),
    ])
    .unwrap();
    let leaves = [
        leaf("a", closed(&[Dim::Var(a)]), false),
        leaf("b", closed(&[Dim::Var(b)]), false),
    ];
    s.close(&leaves).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3));
    assert_eq!(s.resolve_dim(&Dim::Var(g)), n(3));
    assert_eq!(s.resolve_dim(&Dim::Var(b)), Dim::Unit);
}

#[test]
fn broadcasting_in_the_middle() {
    // The operand's flanks align with the result's edges; the middle broadcasts.
    let operand = Row {
        leading: vec![n(3)],
        var: None,
        trailing: vec![n(5)],
    };
    Solver::new()
        .add([row_le(closed(&[n(3), n(4), n(5)]), operand.clone())])
        .unwrap();
    // Equal ranks, no insertion point: 3 faces 5.
    let result = Row {
        leading: vec![n(3)],
        var: None,
        trailing: vec![],
    };
    let msg = error_of(Solver::new().add([row_le(result, closed(&[n(5)]))]));
    assert!(msg.contains("does not broadcast"), "{msg}");
    let error = Solver::new()
        .add([row_le(closed(&[n(5)]), closed(&[n(4), n(5)]))])
        .unwrap_err();
    assert_eq!(
        error.message,
        "an operand has more axes than the result it broadcasts to: the result's 5 has 1 axis, \
         the operand's 4,5 needs 2"
    );
    assert_eq!(
        error.notes,
        ["for a pointwise product use `pmul` (`*` on tensors is composition, the matrix product)"]
    );
}

#[test]
fn open_operand_takes_the_result_middle_as_cap() {
    let mut s = Solver::new();
    let x = s.vars().row();
    let y = s.vars().row();
    // Two uses: [2,3] and [4,3] both refine x's row; the join keeps what they agree on.
    s.add([
        row_le(closed(&[n(2), n(3)]), Row::var(x)),
        row_le(closed(&[n(4), n(3)]), Row::var(x)),
        row_le(closed(&[n(7), n(8)]), open(&[n(7)], y, &[])),
    ])
    .unwrap();
    let leaves = [
        leaf("x", Row::var(x), false),
        leaf("y", open(&[n(7)], y, &[]), false),
    ];
    s.close(&leaves).unwrap();
    assert_eq!(s.resolve_row(&Row::var(x)), closed(&[Dim::Unit, n(3)]));
    assert_eq!(s.resolve_row(&Row::var(y)), closed(&[n(8)]));
}

#[test]
fn result_rows_grow_at_their_marker() {
    let mut s = Solver::new();
    let (r, other) = (s.vars().row(), s.vars().row());
    s.add([
        row_le(Row::var(r), closed(&[n(2), n(3)])),
        row_le(Row::var(r), open(&[n(5)], other, &[])),
    ])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(flat(&s.resolve_row(&Row::var(r))), vec![n(5), n(2), n(3)]);
}

#[test]
fn row_equality() {
    let mut s = Solver::new();
    let r = s.vars().row();
    s.add([Constraint::RowEq(
        open(&[n(1)], r, &[n(4)]),
        closed(&[n(1), n(2), n(3), n(4)]),
    )])
    .unwrap();
    assert_eq!(flat(&s.resolve_row(&Row::var(r))), vec![n(2), n(3)]);

    let msg =
        error_of(Solver::new().add([Constraint::RowEq(closed(&[n(1)]), closed(&[n(1), n(2)]))]));
    assert!(msg.starts_with("the numbers of axes differ"), "{msg}");
    let mut s = Solver::new();
    let r = s.vars().row();
    let msg = error_of(s.add([Constraint::RowEq(
        open(&[n(1)], r, &[n(2)]),
        closed(&[n(1)]),
    )]));
    assert!(msg.starts_with("too few axes"), "{msg}");

    // Two open rows, surplus on one side: that side's variable absorbs it.
    let mut s = Solver::new();
    let (a, b) = (s.vars().row(), s.vars().row());
    s.add([Constraint::RowEq(Row::var(a), open(&[n(2)], b, &[n(3)]))])
        .unwrap();
    assert_eq!(s.resolve_row(&Row::var(a)), open(&[n(2)], b, &[n(3)]));
}

#[test]
fn self_referential_rows() {
    let mut s = Solver::new();
    let r = s.vars().row();
    let msg = error_of(s.add([Constraint::RowEq(Row::var(r), open(&[n(3)], r, &[]))]));
    assert!(msg.starts_with("no number of axes fits"), "{msg}");

    // Same totals, shifted: waits, then closing tries no-axes, which needs 3 = 3.
    let mut s = Solver::new();
    let r = s.vars().row();
    s.add([Constraint::RowEq(
        open(&[n(3)], r, &[]),
        open(&[], r, &[n(3)]),
    )])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_row(&Row::var(r)), Row::default());

    let mut s = Solver::new();
    let r = s.vars().row();
    s.add([Constraint::RowEq(
        open(&[n(3)], r, &[]),
        open(&[], r, &[n(5)]),
    )])
    .unwrap();
    let msg = error_of(s.close(&[]));
    assert!(msg.contains("an axis must be both"), "{msg}");
}

#[test]
fn rank_cycles_are_rejected() {
    // ρ1 ⊑ [a]·ρ2, ρ2 ⊑ [b]·ρ1 would grow both rows forever.
    let mut s = Solver::new();
    let (r1, r2) = (s.vars().row(), s.vars().row());
    let msg = error_of(s.add([
        row_le(Row::var(r1), open(&[n(2)], r2, &[])),
        row_le(Row::var(r2), open(&[n(3)], r1, &[])),
    ]));
    assert!(
        msg == "no number of axes fits: two rows would each need more axes than the other",
        "{msg}"
    );

    // The three-variable cycle with trailing flanks.
    let mut s = Solver::new();
    let (r1, r2, r3) = (s.vars().row(), s.vars().row(), s.vars().row());
    let msg = error_of(s.add([
        row_le(Row::var(r1), open(&[], r2, &[n(2)])),
        row_le(Row::var(r2), open(&[], r3, &[n(3)])),
        row_le(Row::var(r3), open(&[], r1, &[n(4)])),
    ]));
    assert!(msg.starts_with("no number of axes fits"), "{msg}");

    // Zero-weight cycles are legal: ρ1 ⊑ ρ2 ⊑ ρ1.
    let mut s = Solver::new();
    let (r1, r2) = (s.vars().row(), s.vars().row());
    s.add([
        row_le(Row::var(r1), Row::var(r2)),
        row_le(Row::var(r2), Row::var(r1)),
    ])
    .unwrap();
    s.close(&[]).unwrap();
}

fn affine(stride: usize, over: Dim, conv: Option<(usize, Dim, bool)>) -> Dim {
    Dim::Affine(Box::new(AffineDim {
        stride,
        over,
        conv: conv.map(|(dilation, kernel, padded)| ConvDim {
            dilation,
            kernel,
            padded,
        }),
        offset: 0,
    }))
}

#[test]
fn affine_sizes() {
    let mut s = Solver::new();
    let [o, k, o2, k2] = fresh_dims::<4>(&mut s);
    s.add([
        // valid: 10 = 1·(o−1) + 1 + (3−1)·1 → o = 8
        Constraint::DimEq(affine(1, Dim::Var(o), Some((1, n(3), false))), n(10)),
        // kernel inference: 10 = 2·(4−1) + 1 + (k−1)·1 → k = 4
        Constraint::DimEq(affine(2, n(4), Some((1, Dim::Var(k), false))), n(10)),
        // padded: 10 = 2·o2
        Constraint::DimEq(
            affine(2, Dim::Var(o2), Some((1, Dim::Var(k2), true))),
            n(10),
        ),
    ])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(o)), n(8));
    assert_eq!(s.resolve_dim(&Dim::Var(k)), n(4));
    assert_eq!(s.resolve_dim(&Dim::Var(o2)), n(5));
    assert_eq!(
        s.resolve_dim(&affine(3, n(2), Some((2, n(3), false)))),
        n(3 + 1 + 4),
        "dilated span"
    );

    let mut s = Solver::new();
    let o = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(affine(2, Dim::Var(o), None), n(9))]));
    assert!(msg.starts_with("incompatible stride"), "{msg}");
    let mut s = Solver::new();
    let k = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        affine(1, n(4), Some((2, Dim::Var(k), false))),
        n(7),
    )]));
    assert!(msg.starts_with("cannot infer kernel dimension"), "{msg}");
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    let msg = error_of(s.add([Constraint::DimEq(
        affine(2, Dim::Var(a), None),
        affine(3, Dim::Var(b), None),
    )]));
    assert!(msg.starts_with("strides that cannot meet"), "{msg}");
    // 2·a = 4·b → a = 2·b
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add([
        Constraint::DimEq(affine(2, Dim::Var(a), None), affine(4, Dim::Var(b), None)),
        Constraint::DimEq(Dim::Var(b), n(3)),
    ])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(6));
    let mut s = Solver::new();
    let a = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(Dim::Var(a), affine(2, Dim::Var(a), None))]));
    assert!(
        msg.starts_with("an axis size would be defined through itself"),
        "{msg}"
    );
}

#[test]
fn concatenated_sizes() {
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add([
        Constraint::DimEq(Dim::Concat(vec![Dim::Var(a), Dim::Var(b)]), n(7)),
        Constraint::DimEq(Dim::Var(a), n(3)),
    ])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(b)), n(4));
    let mut s = Solver::new();
    let a = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        Dim::Concat(vec![n(5), Dim::Var(a)]),
        n(3),
    )]));
    assert!(
        msg.starts_with("concat: components exceed the concatenated size"),
        "{msg}"
    );
    // A discardable component closes to 0.
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add_discardable([b]);
    s.add([Constraint::DimEq(Dim::Var(a), n(3))]).unwrap();
    s.close(&[]).unwrap();
    assert_eq!(
        s.resolve_dim(&Dim::Concat(vec![Dim::Var(a), Dim::Var(b)])),
        n(3)
    );
}

#[test]
fn fixed_indices() {
    let mut s = Solver::new();
    let [a, b, c, d] = fresh_dims::<4>(&mut s);
    s.add([
        Constraint::AtLeast {
            dim: Dim::Var(a),
            size: 3,
        },
        Constraint::AtLeast {
            dim: Dim::Var(b),
            size: 1,
        },
        Constraint::AtLeast {
            dim: Dim::Var(c),
            size: 1,
        },
        le(n(5), Dim::Var(c)),
        Constraint::AtLeast {
            dim: Dim::Var(d),
            size: 2,
        },
        le(n(4), Dim::Var(d)),
    ])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3), "index 2 alone: size 3");
    assert_eq!(
        s.resolve_dim(&Dim::Var(b)),
        n(1),
        "index 0 alone: an explicit 1"
    );
    assert_eq!(
        s.resolve_dim(&Dim::Var(c)),
        Dim::Unit,
        "index 0 with a cap broadcasts"
    );
    assert_eq!(s.resolve_dim(&Dim::Var(d)), n(4), "index 1 with a cap 4");
    let msg = error_of(Solver::new().add([Constraint::AtLeast { dim: n(2), size: 3 }]));
    assert!(
        msg == "a fixed index 2 is used on an axis of size 2, which has no position 2",
        "{msg}"
    );
}

#[test]
fn parameters_never_get_guessed_dimensions() {
    // A lone parameter: nothing constrains its row.
    let mut s = Solver::new();
    let w = s.vars().row();
    let msg = error_of(s.close(&[leaf("w", Row::var(w), true)]));
    assert!(
        msg.starts_with("You forgot to specify the hidden dimension(s)"),
        "{msg}"
    );
    assert!(msg.contains("'w'"), "{msg}");
    // A parameter axis whose size nothing determines.
    let mut s = Solver::new();
    let (w, h) = (s.vars().row(), s.vars().dim());
    s.add([row_le(closed(&[Dim::Var(h), n(3)]), Row::var(w))])
        .unwrap();
    let msg = error_of(s.close(&[leaf("w", Row::var(w), true)]));
    assert!(
        msg.starts_with("You forgot to specify the hidden dimension(s)"),
        "{msg}"
    );
    // The same as data: it closes to 1*.
    let mut s = Solver::new();
    let (x, h) = (s.vars().row(), s.vars().dim());
    s.add([row_le(closed(&[Dim::Var(h), n(3)]), Row::var(x))])
        .unwrap();
    s.close(&[leaf("x", Row::var(x), false)]).unwrap();
    assert_eq!(s.resolve_row(&Row::var(x)), closed(&[Dim::Unit, n(3)]));
}

#[test]
fn total_elements() {
    // A leaf row with only an element count gets one axis of that size.
    let mut s = Solver::new();
    let x = s.vars().row();
    let c = Constraint::TotalElems {
        rows: vec![Row::var(x)],
        total: n(12),
        coefficient: 1,
    };
    s.add([c]).unwrap();
    s.close(&[leaf("x", Row::var(x), false)]).unwrap();
    assert_eq!(s.resolve_row(&Row::var(x)), closed(&[n(12)]));
    // One unknown dimension is solved by division, when closing: a count has no basis.
    let mut s = Solver::new();
    let a = s.vars().dim();
    s.add([Constraint::TotalElems {
        rows: vec![closed(&[n(3), Dim::Var(a)])],
        total: n(12),
        coefficient: 1,
    }])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), Dim::Var(a));
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(4));
    // The basis comes from whatever else constrains the axis, in either order.
    let rgb = Dim::Atom {
        size: 4,
        basis: Basis::Named("rgb".into()),
    };
    for count_first in [true, false] {
        let mut s = Solver::new();
        let a = s.vars().dim();
        let count = Constraint::TotalElems {
            rows: vec![closed(&[n(3), Dim::Var(a)])],
            total: n(12),
            coefficient: 1,
        };
        let equal = Constraint::DimEq(Dim::Var(a), rgb.clone());
        let order = if count_first {
            [count, equal]
        } else {
            [equal, count]
        };
        s.add(order).unwrap();
        s.close(&[]).unwrap();
        assert_eq!(s.resolve_dim(&Dim::Var(a)), rgb);
    }
    // A cap of the right size lends its basis.
    let mut s = Solver::new();
    let a = s.vars().dim();
    s.add([
        Constraint::TotalElems {
            rows: vec![closed(&[n(3), Dim::Var(a)])],
            total: n(12),
            coefficient: 1,
        },
        le(rgb.clone(), Dim::Var(a)),
    ])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), rgb);
    let mut s = Solver::new();
    let a = s.vars().dim();
    let msg = error_of(s.add([Constraint::TotalElems {
        rows: vec![closed(&[n(5), Dim::Var(a)])],
        total: n(12),
        coefficient: 1,
    }]));
    assert!(
        msg == "wrong number of elements: 12 are needed, which the axes 5,? cannot hold: their known sizes multiply to 5, which does not divide 12",
        "{msg}"
    );
}

#[test]
fn exact_rows() {
    let mut s = Solver::new();
    let (b, o) = (s.vars().row(), s.vars().row());
    s.add([Constraint::Exact {
        rows: vec![closed(&[n(2)]), Row::var(b), Row::var(o)],
        dims: vec![n(2), n(3)],
    }])
    .unwrap();
    s.close(&[]).unwrap();
    let all: Vec<Dim> = [b, o]
        .iter()
        .flat_map(|&v| flat(&s.resolve_row(&Row::var(v))))
        .collect();
    assert_eq!(all, vec![n(3)]);
    let msg = error_of(Solver::new().add([Constraint::Exact {
        rows: vec![closed(&[n(2), n(3)])],
        dims: vec![n(2)],
    }]));
    assert!(
        msg == "wrong number of axes: the shape has 2 axes where exactly the 1 axis 2 are required",
        "{msg}"
    );
}

fn flat(row: &Row) -> Vec<Dim> {
    row.dims().cloned().collect()
}

#[test]
fn derived_terms_with_conflicting_bases() {
    // The stride's axis counts pixels, the kernel's counts taps: the input axis has no one unit.
    let mut s = Solver::new();
    let x = s.vars().dim();
    let conv = affine(1, named(4, "px"), Some((1, named(3, "tap"), false)));
    let msg = error_of(s.add([Constraint::DimEq(Dim::Var(x), conv.clone())]));
    assert!(
        msg.starts_with("convolution: conflicting dimension bases between stride and kernel"),
        "{msg}"
    );
    let msg = error_of(Solver::new().add([le(conv, n(6))]));
    assert!(msg.starts_with("convolution: conflicting"), "{msg}");
    // One named part gives the input its unit.
    let s = Solver::new();
    assert_eq!(
        s.resolve_dim(&affine(1, n(4), Some((1, named(3, "tap"), false)))),
        named(6, "tap")
    );

    let mut s = Solver::new();
    let x = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        Dim::Var(x),
        Dim::Concat(vec![named(2, "rgb"), named(1, "alpha")]),
    )]));
    assert!(
        msg.starts_with("concat: conflicting dimension bases"),
        "{msg}"
    );
    // Against the total's unit, when a component is still unknown.
    let mut s = Solver::new();
    let y = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        named(5, "rgb"),
        Dim::Concat(vec![named(2, "xyz"), Dim::Var(y)]),
    )]));
    assert!(
        msg.starts_with("concat: conflicting dimension bases"),
        "{msg}"
    );
    // A known component already carries the total's unit, so the other may or may not: only
    // its size is certain, and closing gives it that (unless something else decides first).
    let mut s = Solver::new();
    let y = s.vars().dim();
    s.add([Constraint::DimEq(
        named(5, "rgb"),
        Dim::Concat(vec![named(2, "rgb"), Dim::Var(y)]),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(y)), Dim::Var(y));
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(y)), n(3));
    // With no known component of that unit, the last one must carry it.
    let mut s = Solver::new();
    let y = s.vars().dim();
    s.add([Constraint::DimEq(
        named(5, "rgb"),
        Dim::Concat(vec![n(2), Dim::Var(y)]),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(y)), named(3, "rgb"));
}

#[test]
fn a_fixed_index_beyond_its_use_site() {
    // `x` is read at index 3 but used where the axis has size 2: in either order.
    let index = |a| Constraint::AtLeast {
        dim: Dim::Var(a),
        size: 4,
    };
    for flip in [false, true] {
        let mut s = Solver::new();
        let a = s.vars().dim();
        let mut constraints = vec![index(a), le(n(2), Dim::Var(a))];
        if flip {
            constraints.reverse();
        }
        let msg = error_of(s.add(constraints));
        assert!(
            msg == "a fixed index 3 is used on an axis that a use gives size 2, which has no position 3",
            "{msg}"
        );
    }
}

#[test]
fn element_counts_too_big_or_too_small() {
    for total in [5, 7] {
        let msg = error_of(Solver::new().add([Constraint::TotalElems {
            rows: vec![closed(&[n(2), n(3)])],
            total: n(total),
            coefficient: 1,
        }]));
        assert!(
            msg == format!(
                "wrong number of elements: the axes 2,3 have 6 elements but {total} are needed"
            ),
            "{msg}"
        );
    }
}

#[test]
fn errors_show_the_failing_constraint_as_solved_so_far() {
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    let error = s
        .add([
            Constraint::DimEq(Dim::Var(a), n(3)),
            Constraint::DimEq(Dim::Var(b), n(4)),
            Constraint::DimEq(Dim::Var(a), Dim::Var(b)),
        ])
        .unwrap_err();
    assert_eq!(error.constraint.as_deref(), Some("3 = 4"));
    assert!(!error.to_string().contains("3 = 4"), "{error}");
}

#[test]
fn a_self_referential_deficit_waits_instead_of_growing_forever() {
    // [1, ρ, d] ⊑ [1, d, ρ]: growing ρ on the left grows the operand as well. Closing tries ρ
    // empty, where the check is exact.
    let mut s = Solver::new();
    let (d, r) = (s.vars().dim(), s.vars().row());
    s.add([row_le(
        open(&[n(1)], r, &[Dim::Var(d)]),
        open(&[n(1), Dim::Var(d)], r, &[]),
    )])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_row(&Row::var(r)), Row::default());
    // Axes at the same distance from an edge in both flanks align whatever ρ holds: the
    // claim-free 1* does not refine an explicit 1, and growing would not change that.
    let mut s = Solver::new();
    let (d, r) = (s.vars().dim(), s.vars().row());
    let msg = error_of(s.add([row_le(
        open(&[Dim::Unit], r, &[Dim::Var(d)]),
        open(&[n(1), Dim::Var(d)], r, &[]),
    )]));
    assert!(
        msg.starts_with("an axis of size 1 does not broadcast to size 1*"),
        "{msg}"
    );
}

#[test]
fn a_deficit_the_other_flank_may_cover_waits_for_closing() {
    // [d, ρ] ⊑ [3] and ρ ⊑ [3] in either order: d covers the 3, ρ stays empty.
    for flip in [false, true] {
        let mut s = Solver::new();
        let (d, r, whole) = (s.vars().dim(), s.vars().row(), s.vars().row());
        let mut constraints = vec![
            row_le(Row::var(whole), closed(&[n(3)])),
            Constraint::RowEq(Row::var(whole), open(&[Dim::Var(d)], r, &[])),
        ];
        if flip {
            constraints.reverse();
        }
        s.add(constraints).unwrap();
        s.close(&[]).unwrap();
        assert_eq!(
            flat(&s.resolve_row(&Row::var(whole))),
            vec![n(3)],
            "flip {flip}"
        );
    }
}

#[test]
fn a_clash_that_growth_recreates_is_an_infinite_row() {
    // [1, 1]·ρ0 ⊑ ρ1·[2] needs ρ0 to end in 2; [1*]·ρ1·[1, 1] ⊑ ρ0·[1, 1] then needs ρ1 to end
    // in 2, which makes the first one need another axis of ρ0, and so on. No rank fact is
    // violated (each step is forced by a clash, not by a count), so the bound on growth stops it.
    let mut s = Solver::new();
    let (r0, r1) = (s.vars().row(), s.vars().row());
    let msg = error_of(s.add([
        row_le(open(&[n(1), n(1)], r0, &[]), open(&[], r1, &[n(2)])),
        row_le(
            open(&[Dim::Unit], r1, &[n(1), n(1)]),
            open(&[], r0, &[n(1), n(1)]),
        ),
    ]));
    assert!(msg.starts_with("no number of axes fits"), "{msg}");
}

/// Solves `constraints` (over dimension variables 0–3 and row variables below `n_rows`) in the
/// given order of indices, closes, and resolves `rows`.
fn solved_in_order(
    n_rows: usize,
    constraints: &[Constraint],
    order: &[usize],
    rows: &[usize],
) -> Vec<Row> {
    let mut s = Solver::new();
    // The constraints' dimension variables are the first few.
    fresh_dims::<4>(&mut s);
    for _ in 0..n_rows {
        s.vars().row();
    }
    for &i in order {
        s.add([constraints[i].clone()]).unwrap();
    }
    s.close(&[]).unwrap();
    rows.iter()
        .map(|&i| {
            s.resolve_row(&Row::var(RowVarId(i as u32)))
                .without_marker()
        })
        .collect()
}

#[test]
fn a_row_sliced_from_a_closed_row_broadcasts_like_it_in_any_order() {
    // [5, 2] = [a]·ρ3 and ρ3 = [b]·ρ9 (two slices), then ρ6 ⊑ [5, 2] and ρ6 ⊑ ρ3. Solved first,
    // ρ3 is [2] with no marker of its own; solved through ρ9, its marker would sit after b and
    // ρ6 would need [2, 5, 2]. The marker floats to the edge it came from, in both orders.
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(
            closed(&[n(5), n(2)]),
            open(&[Dim::Var(a)], RowVarId(3), &[]),
        ),
        row_le(v(6), closed(&[n(5), n(2)])),
        row_le(v(6), v(3)),
        Constraint::RowEq(v(3), open(&[Dim::Var(b)], RowVarId(9), &[])),
    ];
    let expected = vec![closed(&[n(2)]), closed(&[n(5), n(2)]), Row::default()];
    for order in [[0, 1, 2, 3], [1, 2, 3, 0]] {
        assert_eq!(
            solved_in_order(10, &constraints, &order, &[3, 6, 9]),
            expected,
            "order {order:?}"
        );
    }
}

#[test]
fn a_computed_row_closes_to_no_further_axes_in_any_order() {
    // ρ8 ⊑ ρ1 = [5] and ρ20 ⊑ ρ8, with ρ20's own uses needing [2, 5]: ρ8 keeps only what its
    // operand forces, whether or not ρ1 was known when ρ20's bounds reached ρ8.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(v(1), closed(&[n(5)])),
        Constraint::RowEq(v(2), closed(&[n(2), n(5)])),
        row_le(v(6), v(2)),
        row_le(v(8), v(1)),
        row_le(v(20), v(8)),
        row_le(v(20), closed(&[n(5)])),
        row_le(v(23), v(20)),
        row_le(v(23), v(6)),
    ];
    let expected = vec![closed(&[n(5)]), closed(&[n(5)]), closed(&[n(2), n(5)])];
    for order in [[0, 1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 5, 6, 7, 0, 4]] {
        assert_eq!(
            solved_in_order(24, &constraints, &order, &[8, 20, 23]),
            expected,
            "order {order:?}"
        );
    }
}

#[test]
fn a_word_equation_closes_to_its_fewest_axes() {
    // ρ1 ⊑ [3, 5] grows ρ1 to ρ·[3, 5]; ρ1 = [a]·ρ4 then leaves ρ·[3, 5] = [a]·ρ4. The least
    // solution empties ρ, giving ρ4 = [5], as solving ρ1 = [a]·ρ4 first does.
    let mut s = Solver::new();
    let [a] = fresh_dims::<1>(&mut s);
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        row_le(v(1), closed(&[n(3), n(5)])),
        Constraint::RowEq(v(1), open(&[Dim::Var(a)], RowVarId(4), &[])),
    ];
    for order in [[0, 1], [1, 0]] {
        assert_eq!(
            solved_in_order(5, &constraints, &order, &[1, 4]),
            vec![closed(&[n(3), n(5)]), closed(&[n(5)])],
            "order {order:?}"
        );
    }
}

/// What one order of a constraint set closes to: the resolved `rows`, or the error.
struct Run<'a> {
    constraints: &'a [Constraint],
    n_dims: usize,
    n_rows: usize,
    leaves: &'a [Leaf],
    discardable: &'a [u32],
}

impl Run<'_> {
    fn closed(&self, batches: &[&[usize]], rows: &[u32]) -> Result<Vec<Row>, String> {
        let mut s = Solver::new();
        for _ in 0..self.n_dims {
            s.vars().dim();
        }
        for _ in 0..self.n_rows {
            s.vars().row();
        }
        s.add_discardable(self.discardable.iter().map(|&v| DimVar(v)));
        for batch in batches {
            s.add(batch.iter().map(|&i| self.constraints[i].clone()))
                .map_err(|e| e.to_string())?;
        }
        s.close(self.leaves).map_err(|e| e.to_string())?;
        Ok(rows
            .iter()
            .map(|&i| s.resolve_row(&Row::var(RowVarId(i))).without_marker())
            .collect())
    }

    /// The outcome, checked to be the same for both orders (errors may name different fresh
    /// variables).
    fn same_in(
        &self,
        first: &[&[usize]],
        second: &[&[usize]],
        rows: &[u32],
    ) -> Result<Vec<Row>, String> {
        let outcome = self.closed(first, rows);
        match (&outcome, self.closed(second, rows)) {
            (Err(_), Err(_)) => {}
            (outcome, other) => assert_eq!(*outcome, other, "orders {first:?} and {second:?}"),
        }
        outcome
    }
}

fn var_dim(i: u32) -> Dim {
    Dim::Var(DimVar(i))
}

fn param_input(var: u32) -> Leaf {
    Leaf {
        label: "w".to_owned(),
        shape: Shape {
            input: Row::var(RowVarId(var)),
            ..Shape::default()
        },
        is_param: true,
    }
}

#[test]
fn closing_visits_variables_as_given_not_as_merged() {
    // ρ14 = ρ17·[a] and ρ29 = ρ32·[b], b ≥ 1, ρ41·[c] = ρ14, ρ41·[d] = [2], then ρ47 ⊑ ρ44 ⊑ ρ14
    // and ρ47 ⊑ ρ29. Which of a and c stands for their class depends on the order; closing a
    // before b (the given order) must not become closing b first.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(v(14), open(&[], RowVarId(17), &[var_dim(0)])),
        Constraint::RowEq(v(29), open(&[], RowVarId(32), &[var_dim(1)])),
        Constraint::AtLeast {
            dim: var_dim(1),
            size: 1,
        },
        Constraint::RowEq(open(&[], RowVarId(41), &[var_dim(2)]), v(14)),
        Constraint::RowEq(open(&[], RowVarId(41), &[var_dim(3)]), closed(&[n(2)])),
        row_le(v(44), v(14)),
        row_le(v(47), v(44)),
        row_le(v(47), v(29)),
    ];
    let run = Run {
        constraints: &constraints,
        n_dims: 4,
        n_rows: 48,
        leaves: &[],
        discardable: &[],
    };
    let rows = run
        .same_in(
            &[&[0, 1, 2, 3, 4, 5, 6, 7]],
            &[&[0, 1, 2, 4, 3, 5, 6, 7]],
            &[14, 29],
        )
        .unwrap();
    assert_eq!(rows, vec![closed(&[Dim::Unit]), closed(&[n(1)])]);
}

#[test]
fn bounds_left_behind_by_merged_rows_say_nothing() {
    // ρ17 ⊑ ρ8 before ρ17 and ρ8 merge leaves the bound ρ8 ⊑ ρ8, which must not make the
    // parameter row ρ3 = ρ8 close to no axes where its cap ρ5 ⊑ [3@rgb] gives it one.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        row_le(v(1), closed(&[named(3, "rgb")])),
        row_le(v(5), v(1)),
        row_le(v(5), v(3)),
        Constraint::RowEq(v(8), v(11)),
        Constraint::RowEq(v(11), v(3)),
        row_le(v(17), v(8)),
        Constraint::RowEq(v(26), v(17)),
        Constraint::RowEq(v(26), v(8)),
    ];
    let leaves = [param_input(3)];
    let run = Run {
        constraints: &constraints,
        n_dims: 0,
        n_rows: 27,
        leaves: &leaves,
        discardable: &[],
    };
    let rows = run
        .same_in(
            &[&[0, 1, 2, 3, 4, 5, 6, 7]],
            &[&[0, 1, 2, 3, 4, 6, 7, 5]],
            &[3],
        )
        .unwrap();
    assert_eq!(rows, vec![closed(&[named(3, "rgb")])]);
}

#[test]
fn a_cap_is_read_below_a_bare_row_when_closing_not_forwarded_when_it_arrives() {
    // ρ9 ⊑ ρ6 (ρ6 a parameter's output), ρ9 = ρ15·[o<+k] and ρ39 = ρ45·[x] ⊑ ρ9. Forwarded
    // while ρ9 was still bare, ρ39 stayed behind as a second cap of ρ6 and made its join an
    // undetermined axis: a hidden-dimension error in one order only.
    let v = |i: u32| Row::var(RowVarId(i));
    let conv = affine(1, var_dim(1), Some((1, var_dim(2), false)));
    let constraints = [
        row_le(v(9), v(6)),
        Constraint::RowEq(open(&[], RowVarId(15), &[conv]), v(9)),
        row_le(v(39), v(9)),
        Constraint::RowEq(open(&[], RowVarId(45), &[var_dim(3)]), v(39)),
    ];
    let leaves = [leaf("w", v(6), true)];
    let run = Run {
        constraints: &constraints,
        n_dims: 4,
        n_rows: 46,
        leaves: &leaves,
        discardable: &[],
    };
    let rows = run
        .same_in(&[&[0, 1, 2, 3]], &[&[0, 3, 2, 1]], &[6])
        .unwrap();
    assert_eq!(rows, vec![closed(&[Dim::Unit])]);
}

#[test]
fn each_closing_commitment_retries_what_waits() {
    // [a^b^c] with c discardable and a, b known, equated with [2*s]; s's cap 3@rgb settles
    // 2*s = 6@rgb, and with it c = 0, before the axis x ⊑ a^b^c of another row closes.
    let v = |i: u32| Row::var(RowVarId(i));
    let rgb = || named(3, "rgb");
    let constraints = [
        Constraint::RowEq(
            v(2),
            open(
                &[],
                RowVarId(5),
                &[Dim::Concat(vec![var_dim(0), var_dim(1), var_dim(2)])],
            ),
        ),
        Constraint::RowEq(
            open(&[], RowVarId(5), &[var_dim(0)]),
            closed(&[rgb(), rgb()]),
        ),
        Constraint::RowEq(
            open(&[], RowVarId(5), &[var_dim(1)]),
            closed(&[rgb(), n(3)]),
        ),
        row_le(v(11), v(2)),
        Constraint::RowEq(v(17), open(&[], RowVarId(20), &[var_dim(3)])),
        Constraint::RowEq(
            open(&[], RowVarId(20), &[affine(2, var_dim(3), None)]),
            v(2),
        ),
        row_le(v(26), v(17)),
        row_le(v(26), closed(&[rgb(), rgb()])),
    ];
    let run = Run {
        constraints: &constraints,
        n_dims: 4,
        n_rows: 27,
        leaves: &[],
        discardable: &[2],
    };
    let rows = run
        .same_in(
            &[&[0, 1, 2, 3, 4, 5, 6, 7]],
            &[&[1, 2, 3, 4, 5, 6, 7, 0]],
            &[2, 17],
        )
        .unwrap();
    assert_eq!(
        rows,
        vec![closed(&[rgb(), named(6, "rgb")]), closed(&[rgb(), rgb()])]
    );
}

#[test]
fn a_derived_part_of_size_one_waits_to_learn_its_unit() {
    // [a^b] = [3] with b = 2 makes a of size 1; a later a = 1* must still be possible.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(
            v(14),
            open(
                &[],
                RowVarId(17),
                &[Dim::Concat(vec![var_dim(2), var_dim(3)])],
            ),
        ),
        Constraint::RowEq(open(&[], RowVarId(17), &[var_dim(2)]), closed(&[Dim::Unit])),
        Constraint::RowEq(open(&[], RowVarId(17), &[var_dim(3)]), closed(&[n(2)])),
        Constraint::RowEq(open(&[], RowVarId(29), &[var_dim(4)]), v(14)),
        Constraint::RowEq(open(&[], RowVarId(29), &[var_dim(4)]), closed(&[n(3)])),
    ];
    let run = Run {
        constraints: &constraints,
        n_dims: 5,
        n_rows: 30,
        leaves: &[],
        discardable: &[],
    };
    let rows = run
        .same_in(&[&[0, 1, 2, 3, 4]], &[&[0, 2, 3, 4, 1]], &[14])
        .unwrap();
    assert_eq!(rows, vec![closed(&[n(3)])]);
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add([
        Constraint::DimEq(Dim::Concat(vec![Dim::Var(a), Dim::Var(b)]), n(3)),
        Constraint::DimEq(Dim::Var(b), n(2)),
    ])
    .unwrap();
    assert_eq!(
        s.resolve_dim(&Dim::Var(a)),
        Dim::Var(a),
        "waits while solving"
    );
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(1), "closing settles it");
}

#[test]
fn a_waiting_derived_equation_gives_its_size_to_every_use() {
    // ρ15 = ρ18·[a^b^c] and ρ15 = [7]: whichever form ρ15 holds, the parameter row ρ22 ⊑ ρ15
    // sees an axis of 7, not an axis below a concatenation with unknown parts.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(
            v(15),
            open(
                &[],
                RowVarId(18),
                &[Dim::Concat(vec![var_dim(3), var_dim(4), var_dim(5)])],
            ),
        ),
        row_le(v(22), v(15)),
        Constraint::RowEq(open(&[], RowVarId(31), &[var_dim(6)]), v(15)),
        Constraint::RowEq(open(&[], RowVarId(31), &[var_dim(6)]), closed(&[n(7)])),
    ];
    let leaves = [param_input(22)];
    let run = Run {
        constraints: &constraints,
        n_dims: 7,
        n_rows: 32,
        leaves: &leaves,
        discardable: &[5],
    };
    let rows = run
        .same_in(&[&[0, 1, 2, 3]], &[&[1, 2, 3, 0]], &[22])
        .unwrap();
    assert_eq!(rows, vec![closed(&[n(7)])]);
}

#[test]
fn a_leaf_axis_brings_the_variables_of_equal_derived_terms() {
    // A parameter's output row holds either [2*a] or [o<+k] (they are equated, with a's cap 1
    // settling the first); the parameter row ρ26 ⊑ ρ0 then meets the same undetermined window in
    // both orders.
    let v = |i: u32| Row::var(RowVarId(i));
    let constraints = [
        Constraint::RowEq(v(6), open(&[], RowVarId(9), &[var_dim(0)])),
        Constraint::RowEq(open(&[], RowVarId(9), &[affine(2, var_dim(0), None)]), v(0)),
        Constraint::RowEq(
            open(
                &[],
                RowVarId(15),
                &[affine(1, var_dim(1), Some((1, var_dim(2), false)))],
            ),
            v(0),
        ),
        row_le(v(21), v(6)),
        row_le(v(21), closed(&[n(5), n(1)])),
        row_le(v(26), v(0)),
    ];
    let leaves = [leaf("w", v(0), true), param_input(26)];
    let run = Run {
        constraints: &constraints,
        n_dims: 3,
        n_rows: 27,
        leaves: &leaves,
        discardable: &[],
    };
    // Nothing determines `o` or `k` of `o<+k`: closing refuses to guess them, in both orders.
    let outcome = run.same_in(&[&[0, 1, 2, 3, 4, 5]], &[&[0, 2, 3, 4, 5, 1]], &[26]);
    assert_eq!(
        outcome.unwrap_err(),
        "Not enough shape information: nothing determines the window of a convolution or \
         pooling over an axis of size 2, nor its output size (1*?<+1*?)"
    );
}

#[test]
fn an_adjacency_within_one_class_does_not_bound_a_parameter_row() {
    // ρ32 ⊑ ρ16 is recorded, then ρ32 = ρ16 (both ρ41·[x]): once merged, the adjacency relates
    // the class to itself, and ρ16's part ρ41 is as undetermined as when they merge first.
    let v = |i: u32| Row::var(RowVarId(i));
    let x = || open(&[], RowVarId(41), &[var_dim(2)]);
    let part = |d: u32| open(&[], RowVarId(11), &[var_dim(d)]);
    let constraints = [
        Constraint::RowEq(
            v(8),
            open(
                &[],
                RowVarId(11),
                &[Dim::Concat(vec![var_dim(0), var_dim(1)])],
            ),
        ),
        Constraint::RowEq(part(0), closed(&[n(5)])),
        Constraint::RowEq(part(1), closed(&[n(2)])),
        row_le(v(19), v(8)),
        row_le(v(19), v(16)),
        row_le(v(32), v(16)),
        Constraint::RowEq(x(), v(32)),
        Constraint::RowEq(x(), v(16)),
    ];
    let leaves = [leaf("w", v(16), true)];
    let run = Run {
        constraints: &constraints,
        n_dims: 3,
        n_rows: 42,
        leaves: &leaves,
        discardable: &[],
    };
    let outcome = run.same_in(
        &[&[0, 1, 2, 3, 4, 5, 6, 7]],
        &[&[0, 3, 4, 5, 7], &[1, 2, 6]],
        &[16],
    );
    assert!(
        outcome
            .unwrap_err()
            .contains("You forgot to specify the hidden dimension")
    );
}

#[test]
fn concatenations_split_differently_are_equal_by_size_not_by_component() {
    // a^3@rgb = 3@rgb^3: the components need not pair up (3 + 3@rgb splits 6@rgb as well as
    // 3@rgb + 3 does), so a is 3 in every order, never a component-wise 3@rgb = 3 clash.
    let rgb = || named(3, "rgb");
    let cat = |a: u32, b: u32| Dim::Concat(vec![var_dim(a), var_dim(b)]);
    let constraints = [
        Constraint::DimEq(var_dim(1), rgb()),
        Constraint::DimEq(var_dim(2), rgb()),
        Constraint::DimEq(var_dim(3), n(3)),
        Constraint::RowEq(Row::var(RowVarId(0)), closed(&[cat(0, 1)])),
        Constraint::RowEq(Row::var(RowVarId(0)), closed(&[cat(2, 3)])),
    ];
    let run = Run {
        constraints: &constraints,
        n_dims: 4,
        n_rows: 1,
        leaves: &[],
        discardable: &[],
    };
    let rows = run
        .same_in(&[&[0, 1, 2, 3, 4]], &[&[3, 4], &[0, 1, 2]], &[0])
        .unwrap();
    assert_eq!(rows, vec![closed(&[named(6, "rgb")])]);
}

#[test]
fn closing_visits_the_variables_of_equal_derived_terms_at_their_own_index() {
    // ρ3 = ρ9·[a] = ρ15·[c<+d] = ρ21·[e<+f], f = 2: `a` ends up holding whichever convolution
    // term came first. Closing must not visit c, d before e (or e before c, d) because of that.
    let v = |i: u32| Row::var(RowVarId(i));
    let conv = |over: u32, kernel: u32| affine(1, var_dim(over), Some((1, var_dim(kernel), false)));
    let constraints = [
        Constraint::RowEq(open(&[], RowVarId(9), &[var_dim(0)]), v(3)),
        Constraint::RowEq(open(&[], RowVarId(15), &[conv(2, 3)]), v(3)),
        Constraint::RowEq(open(&[], RowVarId(21), &[conv(4, 5)]), v(3)),
        Constraint::DimEq(var_dim(5), n(2)),
    ];
    let data = Leaf {
        label: "x".to_owned(),
        shape: Shape {
            batch: closed(&[n(3)]),
            input: closed(&[n(2)]),
            output: v(3),
        },
        is_param: false,
    };
    let leaves = [data];
    let run = Run {
        constraints: &constraints,
        n_dims: 6,
        n_rows: 22,
        leaves: &leaves,
        discardable: &[],
    };
    let outcome = run.same_in(&[&[0, 1, 2, 3]], &[&[0, 2, 3, 1]], &[3]);
    // Closing is greedy: c and d, visited first, become 1*, and the kernel f = 2 then does not
    // fit; the same in both orders.
    assert!(outcome.unwrap_err().contains("incompatible stride"));
}
