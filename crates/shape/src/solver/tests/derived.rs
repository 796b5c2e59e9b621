//! Derived dimensions: affine (convolution) sizes, concatenations, fixed indices, element counts
//! and exact rows, and the errors each raises.

use super::*;

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
fn a_component_repeated_shares_what_the_known_ones_leave() {
    let mut s = Solver::new();
    let a = s.vars().dim();
    s.add([Constraint::DimEq(
        Dim::Concat(vec![Dim::Var(a), Dim::Var(a)]),
        n(6),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3));
    // a^a^b = 8 waits for b; with b = 2, the 6 left make a = 3, whichever comes first.
    let a_a_b = |a: DimVar, b: DimVar| Dim::Concat(vec![Dim::Var(a), Dim::Var(a), Dim::Var(b)]);
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add([Constraint::DimEq(a_a_b(a, b), n(8))]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), Dim::Var(a));
    for b_first in [false, true] {
        let mut s = Solver::new();
        let [a, b] = fresh_dims::<2>(&mut s);
        let concat = Constraint::DimEq(a_a_b(a, b), n(8));
        let b_is_2 = Constraint::DimEq(Dim::Var(b), n(2));
        let constraints = if b_first {
            [b_is_2, concat]
        } else {
            [concat, b_is_2]
        };
        s.add(constraints).unwrap();
        assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3), "b first: {b_first}");
    }
}

#[test]
fn a_component_repeated_that_cannot_share_evenly_is_an_error() {
    let mut s = Solver::new();
    let a = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        Dim::Concat(vec![Dim::Var(a), Dim::Var(a)]),
        n(7),
    )]));
    assert_eq!(
        msg,
        "concat: the size 7 does not split evenly among ?^? (2 equal unknown components sharing \
         7 positions)"
    );
    let mut s = Solver::new();
    let a = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        Dim::Concat(vec![Dim::Var(a), n(3), Dim::Var(a)]),
        n(8),
    )]));
    assert_eq!(
        msg,
        "concat: the size 8 does not split evenly among ?^3^? (2 equal unknown components sharing \
         5 positions)"
    );
}

#[test]
fn different_unknown_components_wait() {
    let mut s = Solver::new();
    let [a, b] = fresh_dims::<2>(&mut s);
    s.add([Constraint::DimEq(
        Dim::Concat(vec![Dim::Var(a), Dim::Var(b), Dim::Var(a)]),
        n(6),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), Dim::Var(a));
    assert_eq!(s.resolve_dim(&Dim::Var(b)), Dim::Var(b));
}

#[test]
fn a_component_repeated_beside_the_totals_unit_is_sized_by_closing() {
    // 2@rgb already carries the total's unit, so a's is open: only its size, 3, is certain.
    let mut s = Solver::new();
    let a = s.vars().dim();
    s.add([Constraint::DimEq(
        named(8, "rgb"),
        Dim::Concat(vec![Dim::Var(a), named(2, "rgb"), Dim::Var(a)]),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), Dim::Var(a));
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)), n(3));
}

/// `stride*over[before,after]+dilation*kernel`, rounded up when `ceil`.
fn padded_by(stride: usize, over: Dim, kernel: Dim, sides: (usize, usize), ceil: bool) -> Dim {
    Dim::Affine(Box::new(AffineDim {
        stride,
        over,
        conv: Some(ConvDim {
            dilation: 1,
            kernel,
            border: Border::Explicit(crate::term::ExplicitPadding {
                before: sides.0,
                after: sides.1,
                ceil,
            }),
        }),
        offset: 0,
    }))
}

#[test]
fn explicit_padding_rounds_the_output_as_pytorch_does() {
    // (input, kernel, stride, padding, ceil, output): PyTorch's
    // ⌊(input + 2·padding − kernel)/stride⌋ + 1, ceil_mode's ⌈…⌉ + 1 less the window that would
    // start in the right padding.
    let cases = [
        (8, 3, 2, 0, false, 3),
        (7, 2, 2, 0, false, 3),
        (7, 2, 2, 0, true, 4),
        (7, 3, 2, 1, false, 4),
        (6, 3, 2, 1, true, 4),
        (5, 2, 2, 1, true, 3),
        (32, 3, 1, 1, false, 32),
    ];
    for (input, kernel, stride, pad, ceil, expected) in cases {
        let mut s = Solver::new();
        let o = s.vars().dim();
        let axis = padded_by(stride, Dim::Var(o), n(kernel), (pad, pad), ceil);
        s.add([Constraint::DimEq(axis, n(input))]).unwrap();
        assert_eq!(
            s.resolve_dim(&Dim::Var(o)),
            n(expected),
            "input {input}, kernel {kernel}, stride {stride}, padding {pad}, ceil {ceil}"
        );
    }
    // An output that does not match the input's rounding is an error.
    let mut s = Solver::new();
    let msg = error_of(s.add([Constraint::DimEq(
        padded_by(2, n(4), n(3), (0, 0), false),
        n(8),
    )]));
    assert!(msg.contains('3') && msg.contains('4'), "{msg}");
    let mut s = Solver::new();
    let o = s.vars().dim();
    let msg = error_of(s.add([Constraint::DimEq(
        padded_by(1, Dim::Var(o), n(6), (1, 1), false),
        n(3),
    )]));
    assert!(msg.starts_with("the kernel span 6 is wider"), "{msg}");
}

#[test]
fn a_rounding_axis_waits_for_its_input_and_closes_to_the_smallest() {
    // Stride 2 rounds: the output 3 and kernel 3 allow inputs 7 and 8, so the input variable
    // stays open until something sizes it...
    let mut s = Solver::new();
    let input = s.vars().dim();
    s.add([Constraint::DimEq(
        Dim::Var(input),
        padded_by(2, n(3), n(3), (0, 0), false),
    )])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(input)), Dim::Var(input));
    s.add([Constraint::DimEq(Dim::Var(input), n(8))]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(input)), n(8));
    // ...and, when nothing does, closing takes the smallest that fits.
    let mut s = Solver::new();
    let input = s.vars().dim();
    s.add([Constraint::DimEq(
        Dim::Var(input),
        padded_by(2, n(3), n(3), (1, 1), true),
    )])
    .unwrap();
    s.close(&[]).unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(input)), n(4));
    // Stride 1 does not round: the input follows from the output, and the kernel from both.
    let mut s = Solver::new();
    let [input, k] = fresh_dims::<2>(&mut s);
    s.add([
        Constraint::DimEq(Dim::Var(input), padded_by(1, n(5), n(3), (1, 1), false)),
        Constraint::DimEq(padded_by(1, n(9), Dim::Var(k), (2, 0), false), n(8)),
    ])
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(input)), n(5));
    assert_eq!(s.resolve_dim(&Dim::Var(k)), n(2));
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
