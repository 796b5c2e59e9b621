//! The worked examples of the projection seeds, as hand-written records: what lowering reads off
//! each (reductions, surjectivity, injectivity, reads of the written tensor) and the slot views
//! of the matmul gradients.

use rcannl_ir::{AxisIndex, Factor, Projections, Slot, Symbol};

const I: Symbol = Symbol(0);
const J: Symbol = Symbol(1);
const K: Symbol = Symbol(2);

fn it(symbol: Symbol) -> AxisIndex {
    AxisIndex::Iterator(symbol)
}

fn record(
    product: Vec<Factor>,
    lhs: (Vec<usize>, Vec<AxisIndex>),
    rhs: Vec<(Vec<usize>, Vec<AxisIndex>)>,
) -> Projections {
    let (rhs_dims, rhs_index): (Vec<Vec<usize>>, Vec<Vec<AxisIndex>>) = rhs.into_iter().unzip();
    let no_margins = |dims: &[usize]| vec![(0, 0); dims.len()];
    Projections {
        product_space: product,
        lhs_padding: no_margins(&lhs.0),
        rhs_padding: rhs_dims.iter().map(|dims| no_margins(dims)).collect(),
        lhs_dims: lhs.0,
        rhs_dims,
        lhs_index: lhs.1,
        rhs_index,
        label: "example".to_owned(),
    }
}

/// `c[i,k] =:+ a[i,j] * b[j,k]` over sizes i = 2, j = 3, k = 4.
fn matmul() -> Projections {
    record(
        vec![
            Factor::single(I, 2),
            Factor::single(J, 3),
            Factor::single(K, 4),
        ],
        (vec![2, 4], vec![it(I), it(K)]),
        vec![
            (vec![2, 3], vec![it(I), it(J)]),
            (vec![3, 4], vec![it(J), it(K)]),
        ],
    )
}

#[test]
fn matmul_reduces_over_the_axis_its_output_omits() {
    let c = matmul();
    assert_eq!(c.reduction_symbols(), vec![J]);
    assert!(c.is_surjective());
    assert!(!c.is_injective(), "two j's write one c cell");
}

#[test]
fn matmul_gradients_are_slot_views_that_move_the_reduction() {
    let c = matmul();
    // g1 =+ g * v2: the first operand's map is written.
    let g1 = c.view(Slot::Rhs(0), &[Slot::Lhs, Slot::Rhs(1)]);
    assert_eq!(g1.lhs_index, vec![it(I), it(J)]);
    assert_eq!(g1.lhs_dims, vec![2, 3]);
    assert_eq!(g1.rhs_index, vec![vec![it(I), it(K)], vec![it(J), it(K)]]);
    assert_eq!(g1.reduction_symbols(), vec![K]);
    // g2 =+ v1 * g.
    let g2 = c.view(Slot::Rhs(1), &[Slot::Rhs(0), Slot::Lhs]);
    assert_eq!(g2.reduction_symbols(), vec![I]);
    assert_eq!(g2.product_space, c.product_space);
}

#[test]
fn a_broadcast_scalar_is_read_at_zero_and_the_write_is_plain() {
    // r[p,q] = s * m[p,q]: s's axes are fixed at 0.
    let r = record(
        vec![Factor::single(I, 3), Factor::single(J, 5)],
        (vec![3, 5], vec![it(I), it(J)]),
        vec![
            (vec![1, 1], vec![AxisIndex::Fixed(0), AxisIndex::Fixed(0)]),
            (vec![3, 5], vec![it(I), it(J)]),
        ],
    );
    assert!(r.reduction_symbols().is_empty());
    assert!(r.is_surjective() && r.is_injective());
}

#[test]
fn summing_by_a_ones_vector_reduces() {
    // r[p] = m[p,q] * ones[q].
    let r = record(
        vec![Factor::single(I, 3), Factor::single(J, 5)],
        (vec![3], vec![it(I)]),
        vec![(vec![3, 5], vec![it(I), it(J)]), (vec![5], vec![it(J)])],
    );
    assert_eq!(r.reduction_symbols(), vec![J]);
    assert!(r.is_surjective() && !r.is_injective());
}

#[test]
fn a_valid_convolution_reads_at_a_sum_and_writes_plainly_per_kernel_position() {
    // y[o] =+ x[o+k] * w[k], o < 4, k < 3, x of 6.
    let y = record(
        vec![Factor::single(I, 4), Factor::single(K, 3)],
        (vec![4], vec![it(I)]),
        vec![
            (vec![6], vec![AxisIndex::affine([(1, I), (1, K)], 0)]),
            (vec![3], vec![it(K)]),
        ],
    );
    assert_eq!(y.reduction_symbols(), vec![K]);
    assert!(y.is_surjective() && !y.is_injective());
    // Its input gradient writes x[o+k]: every cell, but several times.
    let gx = y.view(Slot::Rhs(0), &[Slot::Lhs, Slot::Rhs(1)]);
    assert!(gx.is_surjective());
    assert!(!gx.is_injective());
}

#[test]
fn strided_and_interleaved_writes() {
    // out[2*i] = a[i] over out of 6: every other cell, once each.
    let even = record(
        vec![Factor::single(I, 3)],
        (vec![6], vec![AxisIndex::affine([(2, I)], 0)]),
        vec![(vec![3], vec![it(I)])],
    );
    assert!(even.is_injective());
    assert!(!even.is_surjective(), "odd cells are not written");
    let odd = record(
        vec![Factor::single(I, 3)],
        (vec![6], vec![AxisIndex::affine([(2, I)], 1)]),
        vec![(vec![3], vec![it(I)])],
    );
    assert!(odd.is_injective() && !odd.is_surjective());
    // out[2*i + j] over i < 3, j < 2: the interleave as one assignment covers everything once.
    let both = record(
        vec![Factor::single(I, 3), Factor::single(J, 2)],
        (vec![6], vec![AxisIndex::affine([(2, I), (1, J)], 0)]),
        vec![(vec![3, 2], vec![it(I), it(J)])],
    );
    assert!(both.is_injective() && both.is_surjective());
    // out[i + j] over i < 3, j < 2 overlaps: not injective, still covering.
    let overlapping = record(
        vec![Factor::single(I, 3), Factor::single(J, 2)],
        (vec![4], vec![AxisIndex::affine([(1, I), (1, J)], 0)]),
        vec![(vec![3, 2], vec![it(I), it(J)])],
    );
    assert!(!overlapping.is_injective() && overlapping.is_surjective());
}

#[test]
fn a_triangular_write_is_injective_through_the_fixpoint() {
    // out[i, i + j]: the first axis pins i, then the second pins j.
    let triangular = record(
        vec![Factor::single(I, 3), Factor::single(J, 4)],
        (
            vec![3, 6],
            vec![it(I), AxisIndex::affine([(1, I), (1, J)], 0)],
        ),
        vec![],
    );
    assert!(triangular.is_injective());
    assert!(!triangular.is_surjective());
}

#[test]
fn a_diagonal_write_is_not_surjective() {
    // out[i, i] = a[i].
    let diagonal = record(
        vec![Factor::single(I, 3)],
        (vec![3, 3], vec![it(I), it(I)]),
        vec![(vec![3], vec![it(I)])],
    );
    assert!(diagonal.is_injective() && !diagonal.is_surjective());
}

#[test]
fn a_read_of_the_written_tensor_sees_prior_values_only_at_the_cell_each_point_writes_once() {
    // t[i,j] ⊕= t[i,j] * s: the written cell, read before it is written.
    let own = record(
        vec![Factor::single(I, 2), Factor::single(J, 3)],
        (vec![2, 3], vec![it(I), it(J)]),
        vec![
            (vec![2, 3], vec![it(I), it(J)]),
            (vec![1], vec![AxisIndex::Fixed(0)]),
        ],
    );
    assert!(own.reads_prior_values(0, false) && own.reads_prior_values(0, true));
    // t[i,j] := t[j,i]: another cell, which an earlier point may have written.
    let transposed = record(
        vec![Factor::single(I, 2), Factor::single(J, 2)],
        (vec![2, 2], vec![it(I), it(J)]),
        vec![(vec![2, 2], vec![it(J), it(I)])],
    );
    assert!(!transposed.reads_prior_values(0, true));
    // n[0] ⊕= n[0] * g[k]: the written map, but every point writes the one cell.
    let reduced = record(
        vec![Factor::single(K, 4)],
        (vec![1], vec![AxisIndex::Fixed(0)]),
        vec![(vec![1], vec![AxisIndex::Fixed(0)]), (vec![4], vec![it(K)])],
    );
    assert!(!reduced.reads_prior_values(0, false));
    // t[i,0] =:+ t[i,0]: written once, but the fill before the loops resets the rest of t.
    let column = record(
        vec![Factor::single(I, 2)],
        (vec![2, 3], vec![it(I), AxisIndex::Fixed(0)]),
        vec![(vec![2, 3], vec![it(I), AxisIndex::Fixed(0)])],
    );
    assert!(column.reads_prior_values(0, false));
    assert!(!column.reads_prior_values(0, true));
}

const A: Symbol = Symbol(10);
const B: Symbol = Symbol(11);
const C: Symbol = Symbol(12);

fn concat(symbols: &[Symbol]) -> AxisIndex {
    AxisIndex::Concat(symbols.to_vec())
}

#[test]
fn the_concatenation_table() {
    // Components a < 2, b < 3, c < 4, coupled into one factor where a concatenation names them.
    let ab = || Factor::coupled([(A, 2), (B, 3)]);
    let abc = || Factor::coupled([(A, 2), (B, 3), (C, 4)]);
    // a; b => a^b: a gather; every cell once.
    let join = record(
        vec![ab()],
        (vec![5], vec![concat(&[A, B])]),
        vec![(vec![2], vec![it(A)]), (vec![3], vec![it(B)])],
    );
    assert!(join.is_surjective() && join.is_injective());
    // a^b => a and a^b => b: extracting a slice writes the whole slice once.
    for (symbol, size) in [(A, 2), (B, 3)] {
        let slice = record(
            vec![ab()],
            (vec![size], vec![it(symbol)]),
            vec![(vec![5], vec![concat(&[A, B])])],
        );
        assert!(slice.is_surjective() && slice.is_injective());
    }
    // a => a^b and b => a^b: a partial update leaves the other part unwritten.
    for symbol in [A, B] {
        let update = record(
            vec![ab()],
            (vec![5], vec![concat(&[A, B])]),
            vec![(vec![2], vec![it(symbol)])],
        );
        assert!(!update.is_surjective(), "{update}");
        assert!(update.is_injective());
    }
    // a^b^c => b and b => a^b^c.
    let middle = record(
        vec![abc()],
        (vec![3], vec![it(B)]),
        vec![(vec![9], vec![concat(&[A, B, C])])],
    );
    assert!(middle.is_surjective() && middle.is_injective());
    let into_middle = record(
        vec![abc()],
        (vec![9], vec![concat(&[A, B, C])]),
        vec![(vec![3], vec![it(B)])],
    );
    assert!(!into_middle.is_surjective() && into_middle.is_injective());
}

#[test]
fn a_block_diagonal_write_covers_only_its_blocks() {
    // out[a^b, a^b] = x[a, a'] ... two concatenated axes on the written side share their
    // symbols: only diagonal blocks are written.
    let diagonal = record(
        vec![Factor::coupled([(A, 2), (B, 3)])],
        (vec![5, 5], vec![concat(&[A, B]), concat(&[A, B])]),
        vec![(vec![2], vec![it(A)]), (vec![3], vec![it(B)])],
    );
    assert!(!diagonal.is_surjective());
}

#[test]
fn reducing_over_a_concatenated_axis_is_not_injective() {
    // out = sum over a^b of x[a^b]: both components write the one cell.
    let sum = record(
        vec![Factor::coupled([(A, 2), (B, 3)])],
        (vec![], vec![]),
        vec![(vec![5], vec![concat(&[A, B])])],
    );
    assert!(!sum.is_injective());
    assert!(sum.is_surjective());
}

#[test]
fn the_printed_record_shows_factors_maps_and_reductions() {
    let shown = matmul().to_string();
    assert_eq!(
        shown,
        "projections for example\n  product: i0<2> × i1<3> × i2<4>\n  lhs [2, 4]: [i0, i2]\n  \
         rhs1 [2, 3]: [i0, i1]\n  rhs2 [3, 4]: [i1, i2]\n  reduces over: i1"
    );
    let coupled = record(
        vec![Factor::coupled([(A, 2), (B, 3)])],
        (vec![5], vec![concat(&[A, B])]),
        vec![],
    );
    assert!(coupled.to_string().contains("product: (i10<2> | i11<3>)"));
    assert!(coupled.to_string().contains("lhs [5]: [i10^i11]"));
}
