//! Rows: broadcasting around a row variable, row equality, self-referential rows, rank cycles,
//! and deficits that wait instead of growing a row forever.

use super::*;

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
