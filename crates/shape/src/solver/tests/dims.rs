//! Dimension variables: the order of pins, caps and joins, caps flowing along adjacencies,
//! closing one commitment at a time, their errors, and parameters never given a guessed dimension.

use super::*;

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
fn parameters_never_get_guessed_dimensions() {
    // A lone parameter: nothing constrains its row.
    let mut s = Solver::new();
    let w = s.vars().row();
    let error = s.close(&[leaf("w", Row::var(w), true)]).unwrap_err();
    assert_eq!(error.kind, ShapeErrorKind::HiddenDimension);
    let msg = error.to_string();
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
