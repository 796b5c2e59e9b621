//! Declarativeness: constraint sets that once closed differently by the order they arrived in,
//! each solved in several orders and checked to close alike.

use super::*;

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
