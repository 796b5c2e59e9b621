//! Projection inference from specs and logics on closed shapes: the worked examples of the seeds
//! (matmul and its gradients, broadcast, sum by a ones-vector, compose, convolutions, strides,
//! interleaving, the concatenation table, block matrices), fixed indices, batch slices,
//! locality, the fan-out of random words, and the errors for open shapes.

use rcannl_ir::{AxisIndex, Slot, Symbol};
use rcannl_shape::logic::Logic;
use rcannl_shape::projection::derive_projections;
use rcannl_shape::spec::parse_einsum;
use rcannl_shape::term::{Dim, Row, Shape};

/// A closed shape from sizes per row.
fn shape(batch: &[usize], input: &[usize], output: &[usize]) -> Shape {
    let row = |sizes: &[usize]| Row::closed(sizes.iter().map(|&s| Dim::size(s)).collect());
    Shape {
        batch: row(batch),
        input: row(input),
        output: row(output),
    }
}

fn out(sizes: &[usize]) -> Shape {
    shape(&[], &[], sizes)
}

fn spec(text: &str) -> Logic {
    Logic::Spec(parse_einsum(text).unwrap())
}

fn it(n: u32) -> AxisIndex {
    AxisIndex::Iterator(Symbol(n))
}

#[test]
fn matmul_contracts_the_shared_axis_and_its_gradients_move_the_contraction() {
    let c = derive_projections(
        &spec("ij;jk=>ik"),
        &out(&[2, 4]),
        &[out(&[2, 3]), out(&[3, 4])],
        0,
        None,
    )
    .unwrap();
    // Iterators are named in the order of the result's axes, then the operands'.
    assert_eq!(c.lhs_index, vec![it(0), it(1)]);
    assert_eq!(c.rhs_index, vec![vec![it(0), it(2)], vec![it(2), it(1)]]);
    assert_eq!(c.reduction_symbols(), vec![Symbol(2)]);
    assert_eq!(c.ranges()[&Symbol(2)], 3);
    assert!(c.is_surjective() && !c.is_injective());
    let g1 = c.view(Slot::Rhs(0), &[Slot::Lhs, Slot::Rhs(1)]);
    assert_eq!(g1.reduction_symbols(), vec![Symbol(1)], "g1 contracts k");
    let g2 = c.view(Slot::Rhs(1), &[Slot::Rhs(0), Slot::Lhs]);
    assert_eq!(g2.reduction_symbols(), vec![Symbol(0)], "g2 contracts i");
}

#[test]
fn a_size_one_operand_axis_broadcasts_at_zero() {
    let r = derive_projections(
        &Logic::Pointwise(2),
        &out(&[3, 5]),
        &[out(&[1]), out(&[3, 5])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(r.lhs_index, vec![it(0), it(1)]);
    assert_eq!(
        r.rhs_index,
        vec![vec![AxisIndex::Fixed(0)], vec![it(0), it(1)]]
    );
    assert!(r.reduction_symbols().is_empty());
    assert!(r.is_surjective() && r.is_injective());
}

#[test]
fn summing_by_a_ones_vector() {
    let r = derive_projections(
        &spec("pq;q=>p"),
        &out(&[3]),
        &[out(&[3, 5]), out(&[5])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(r.rhs_index, vec![vec![it(0), it(1)], vec![it(1)]]);
    assert_eq!(r.reduction_symbols(), vec![Symbol(1)]);
    assert!(!r.is_injective());
}

#[test]
fn compose_contracts_the_weights_input_with_the_operands_output() {
    // y = w * x: w is 3 -> 4, x has 3 outputs, y has 4.
    let y = derive_projections(
        &Logic::Compose,
        &out(&[4]),
        &[shape(&[], &[3], &[4]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    // w's axes in memory order: output, then input.
    assert_eq!(y.lhs_index, vec![it(0)]);
    assert_eq!(y.rhs_index, vec![vec![it(0), it(1)], vec![it(1)]]);
    assert_eq!(y.reduction_symbols(), vec![Symbol(1)]);
}

#[test]
fn transpose_swaps_the_maps_of_input_and_output() {
    let t = derive_projections(
        &Logic::Transpose,
        &shape(&[], &[2], &[3]),
        &[shape(&[], &[3], &[2])],
        0,
        None,
    )
    .unwrap();
    // Result: output 3 then input 2; operand: output 2 then input 3.
    assert_eq!(t.lhs_index, vec![it(0), it(1)]);
    assert_eq!(t.rhs_index, vec![vec![it(1), it(0)]]);
    assert!(t.is_surjective() && t.is_injective());
}

#[test]
fn a_fixed_index_pins_its_axis() {
    let r = derive_projections(&spec("i, 1 => i"), &out(&[3]), &[out(&[3, 2])], 0, None).unwrap();
    assert_eq!(r.rhs_index, vec![vec![it(0), AxisIndex::Fixed(1)]]);
    assert_eq!(r.product_space.len(), 1);
}

#[test]
fn a_batch_slice_reads_its_axis_at_the_outside_symbol() {
    let slice = Symbol(100);
    for static_range in [None, Some(5)] {
        let r = derive_projections(
            &Logic::BatchSlice { static_range },
            &out(&[3]),
            &[shape(&[5], &[], &[3])],
            0,
            Some(slice),
        )
        .unwrap();
        assert_eq!(r.lhs_index, vec![it(0)]);
        assert_eq!(r.rhs_index, vec![vec![AxisIndex::Iterator(slice), it(0)]]);
        assert!(r.is_injective() && r.is_surjective());
    }
}

#[test]
fn axes_of_equal_size_share_a_loop_only_where_this_operation_says_so() {
    // An outer product of two length-3 vectors: equal sizes (another operation might even have
    // forced them equal), independent loops.
    let r = derive_projections(
        &spec("i;j=>ij"),
        &out(&[3, 3]),
        &[out(&[3]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(r.lhs_index, vec![it(0), it(1)]);
    assert_eq!(r.rhs_index, vec![vec![it(0)], vec![it(1)]]);
    assert_eq!(r.product_space.len(), 2);
}

#[test]
fn the_record_prints_readably() {
    let c = derive_projections(
        &spec("ij;jk=>ik"),
        &out(&[2, 4]),
        &[out(&[2, 3]), out(&[3, 4])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(
        c.to_string(),
        "projections for einsum \"i, j; j, k => i, k\"\n  product: i0<2> × i1<4> × i2<3>\n  \
         lhs [2, 4]: [i0, i1]\n  rhs1 [2, 3]: [i0, i2]\n  rhs2 [3, 4]: [i2, i1]\n  \
         reduces over: i2"
    );
}

#[test]
fn a_fan_out_writes_each_words_values_from_a_multiple_of_its_position() {
    let fan_out = |coefficient, result: Shape, words: Shape| {
        derive_projections(
            &Logic::Uint4x32ToPrec { coefficient },
            &result,
            &[words],
            0,
            None,
        )
    };
    // 2 words, 4 values each, into one axis of 8.
    let p = fan_out(4, out(&[8]), out(&[2])).unwrap();
    assert_eq!(p.ranges().len(), 1);
    assert_eq!(p.ranges()[&Symbol(0)], 2);
    assert_eq!(p.rhs_index, vec![vec![it(0)]]);
    assert_eq!(p.lhs_index, vec![affine(&[(4, 0)], 0)]);
    assert!(p.is_injective() && !p.is_surjective());
    // Into 3×2×4 (8 values a word): the innermost axis carries the position past its own size,
    // into the rows after it; the outer axes are read at 0.
    let p = fan_out(8, shape(&[3], &[], &[2, 4]), shape(&[], &[3], &[])).unwrap();
    assert_eq!(p.rhs_index, vec![vec![it(0)]]);
    assert_eq!(
        p.lhs_index,
        vec![
            AxisIndex::Fixed(0),
            AxisIndex::Fixed(0),
            affine(&[(8, 0)], 0)
        ]
    );
    // One word: no loop, the values written from cell 0.
    let p = fan_out(2, out(&[2]), out(&[1])).unwrap();
    assert!(p.product_space.is_empty());
    assert_eq!(p.lhs_index, vec![affine(&[], 0)]);
    // The words must be one axis.
    let err = fan_out(4, out(&[8]), shape(&[], &[1], &[2])).unwrap_err();
    assert!(err.message.contains("one axis, not 2"), "{err}");
}

#[test]
fn open_shapes_and_a_slice_without_its_symbol_are_errors() {
    let open = Shape {
        output: Row::var(rcannl_shape::term::RowVarId(0)),
        ..Shape::default()
    };
    let err = derive_projections(&Logic::Pointwise(1), &out(&[3]), &[open], 0, None);
    assert!(err.unwrap_err().message.contains("closed shapes"));
    let slice = derive_projections(
        &Logic::BatchSlice { static_range: None },
        &out(&[3]),
        &[shape(&[5], &[], &[3])],
        0,
        None,
    );
    assert!(slice.unwrap_err().message.contains("slice symbol"));
}

#[test]
fn a_layer_solved_by_the_session_gets_its_loops() {
    use rcannl_shape::{Inference, LeafDecl};
    let mut inf = Inference::new();
    let x = inf
        .leaf("x", LeafDecl::data().batch([8]).output([3]))
        .unwrap();
    let w = inf.leaf("w", LeafDecl::param().output([4])).unwrap();
    let no_axes: [usize; 0] = [];
    let bias = inf
        .leaf("bias", LeafDecl::data().batch(no_axes).output([4]))
        .unwrap();
    let (z, compose) = inf.apply("z", Logic::Compose, &[w, x]).unwrap();
    let (_, add) = inf.apply("zb", Logic::Pointwise(2), &[z, bias]).unwrap();
    inf.finish().unwrap();
    let z = inf.projections(compose, 0, None).unwrap();
    // z[b, o] =+ w[o, i] * x[b, i]: batch 8, output 4, contracted input 3.
    assert_eq!(z.lhs_dims, vec![8, 4]);
    assert_eq!(z.lhs_index, vec![it(0), it(1)]);
    assert_eq!(z.rhs_dims, vec![vec![4, 3], vec![8, 3]]);
    assert_eq!(z.rhs_index, vec![vec![it(1), it(2)], vec![it(0), it(2)]]);
    assert_eq!(z.reduction_symbols(), vec![Symbol(2)]);
    let zb = inf.projections(add, 0, None).unwrap();
    // The bias has no batch axis: it is read at the output iterator alone.
    assert_eq!(zb.lhs_index, vec![it(0), it(1)]);
    assert_eq!(zb.rhs_index, vec![vec![it(0), it(1)], vec![it(1)]]);
    assert!(zb.is_surjective() && zb.is_injective());
}

#[test]
fn an_operand_broadcasts_in_the_middle_at_its_marker() {
    // The operand's row is [2 | 5] (broadcast point between its axes): against [2, 3, 5] its
    // axes pair with the first and the last, and the 3 iterates on its own.
    let operand = Shape {
        output: Row {
            leading: vec![Dim::size(2)],
            var: None,
            trailing: vec![Dim::size(5)],
        },
        ..Shape::default()
    };
    let r =
        derive_projections(&Logic::Pointwise(1), &out(&[2, 3, 5]), &[operand], 0, None).unwrap();
    assert_eq!(r.lhs_index, vec![it(0), it(1), it(2)]);
    assert_eq!(r.rhs_index, vec![vec![it(0), it(2)]]);
}

fn affine(terms: &[(i64, u32)], offset: i64) -> AxisIndex {
    AxisIndex::affine(terms.iter().map(|&(c, s)| (c, Symbol(s))), offset)
}

#[test]
fn a_valid_convolution_reads_its_input_at_output_plus_kernel() {
    // y[o] =+ x[o+k] * w[k]: the same nest as a matrix-vector product, with a computed read.
    let y = derive_projections(
        &spec("o<+k; k => o"),
        &out(&[4]),
        &[out(&[6]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(y.lhs_index, vec![it(0)]);
    assert_eq!(
        y.rhs_index,
        vec![vec![affine(&[(1, 0), (1, 1)], 0)], vec![it(1)]]
    );
    assert_eq!(y.reduction_symbols(), vec![Symbol(1)]);
    assert_eq!(
        y.product_space.len(),
        2,
        "the input axis has no loop of its own"
    );
}

#[test]
fn strided_dilated_and_padded_convolutions() {
    // Stride 2, dilation 2, valid: x[2*o + 2*k] over o < 3, k < 2 (x of 2·2 + 1 + 2 = 7).
    let y = derive_projections(
        &spec("2*o<+2*k; k => o"),
        &out(&[3]),
        &[out(&[7]), out(&[2])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(y.rhs_index[0], vec![affine(&[(2, 0), (2, 1)], 0)]);
    // Padded, kernel 3: x[o + k − 1], one position of margin on each side.
    let same = derive_projections(
        &spec("o=+k; k => o"),
        &out(&[5]),
        &[out(&[5]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(same.rhs_index[0], vec![affine(&[(1, 0), (1, 1)], -1)]);
    // Padded with dilation 2 and kernel 3: the dilated span 5 overruns by 4, two on the left.
    let dilated = derive_projections(
        &spec("o=+2*k; k => o"),
        &out(&[5]),
        &[out(&[5]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(dilated.rhs_index[0], vec![affine(&[(1, 0), (2, 1)], -2)]);
    // The margins each access needs travel with the record, and with its slot views.
    assert_eq!(y.rhs_padding, vec![vec![(0, 0)], vec![(0, 0)]]);
    assert_eq!(same.rhs_padding[0], vec![(1, 1)]);
    assert_eq!(dilated.rhs_padding[0], vec![(2, 2)]);
    let input_gradient = same.view(Slot::Rhs(0), &[Slot::Lhs, Slot::Rhs(1)]);
    assert_eq!(input_gradient.lhs_padding, vec![(1, 1)]);
    assert!(
        same.to_string()
            .contains("rhs1 [5] padded [(1, 1)]: [i0+i1-1]"),
        "{same}"
    );
    assert_eq!(rcannl_shape::projection::derive::padding_of(3, 2), (2, 2));
    assert_eq!(rcannl_shape::projection::derive::padding_of(4, 1), (1, 2));
}

#[test]
fn interleaving_writes_even_and_odd_positions() {
    for (text, offset) in [("i => 2*i", 0), ("i => 2*i+1", 1)] {
        let r = derive_projections(&spec(text), &out(&[6]), &[out(&[3])], 0, None).unwrap();
        assert_eq!(r.lhs_index, vec![affine(&[(2, 0)], offset)], "{text}");
        assert_eq!(r.rhs_index, vec![vec![it(0)]]);
        assert!(r.is_injective() && !r.is_surjective(), "{text}");
    }
}

#[test]
fn strided_reading_skips_positions() {
    // r[i] = x[2*i]: a subsampling read.
    let r = derive_projections(&spec("2*i => i"), &out(&[3]), &[out(&[6])], 0, None).unwrap();
    assert_eq!(r.rhs_index, vec![vec![affine(&[(2, 0)], 0)]]);
    assert!(r.is_injective() && r.is_surjective());
}

fn block(text: &str) -> Logic {
    Logic::Block(parse_einsum(text).unwrap())
}

fn cat(symbols: &[u32]) -> AxisIndex {
    AxisIndex::Concat(symbols.iter().map(|&s| Symbol(s)).collect())
}

/// The coupled factor of the one product space, as `(symbol, range)` pairs.
fn coupled(p: &rcannl_ir::Projections) -> Vec<(u32, usize)> {
    assert_eq!(p.product_space.len(), 1, "{p}");
    p.product_space[0]
        .components
        .iter()
        .map(|(s, r)| (s.0, *r))
        .collect()
}

#[test]
fn the_concatenation_table() {
    // a = 2, b = 3, c = 4 throughout.
    let sizes: std::collections::HashMap<String, usize> = [("a", 2), ("b", 3), ("c", 4)]
        .map(|(n, s)| (n.to_owned(), s))
        .into();
    let derive = |text: &str, result: &[usize], operands: &[&[usize]]| {
        let operands: Vec<Shape> = operands.iter().map(|o| out(o)).collect();
        rcannl_shape::projection::derive::derive_projections_with_labels(
            &block(text),
            &out(result),
            &operands,
            &sizes,
            0,
            None,
        )
        .unwrap()
    };
    // a; b => a^b: a gather into consecutive stretches.
    let join = derive("a; b => a^b", &[5], &[&[2], &[3]]);
    assert_eq!(join.lhs_index, vec![cat(&[0, 1])]);
    assert_eq!(join.rhs_index, vec![vec![it(0)], vec![it(1)]]);
    assert_eq!(coupled(&join), vec![(0, 2), (1, 3)]);
    assert!(join.is_surjective() && join.is_injective());
    // a^b => a and a^b => b: extractions.
    let first = derive("a^b => a", &[2], &[&[5]]);
    assert_eq!(first.lhs_index, vec![it(0)]);
    assert_eq!(first.rhs_index, vec![vec![cat(&[0, 1])]]);
    assert!(first.is_surjective() && first.is_injective());
    let second = derive("a^b => b", &[3], &[&[5]]);
    assert_eq!(second.lhs_index, vec![it(0)]);
    assert_eq!(second.rhs_index, vec![vec![cat(&[1, 0])]]);
    assert_eq!(coupled(&second), vec![(1, 2), (0, 3)]);
    // a => a^b and b => a^b: partial updates, leaving the other stretch unwritten.
    for (text, operand) in [("a => a^b", 2), ("b => a^b", 3)] {
        let update = derive(text, &[5], &[&[operand]]);
        assert!(!update.is_surjective() && update.is_injective(), "{text}");
    }
    // a^b^c => b and b => a^b^c: the middle stretch, with both neighbours' sizes from the
    // global solve.
    let middle = derive("a^b^c => b", &[3], &[&[9]]);
    assert_eq!(middle.rhs_index, vec![vec![cat(&[1, 0, 2])]]);
    assert!(middle.is_surjective() && middle.is_injective());
    let into_middle = derive("b => a^b^c", &[9], &[&[3]]);
    assert_eq!(into_middle.lhs_index, vec![cat(&[1, 0, 2])]);
    assert_eq!(coupled(&into_middle), vec![(1, 2), (0, 3), (2, 4)]);
    assert!(!into_middle.is_surjective());
}

#[test]
fn a_component_of_size_one_keeps_its_loop() {
    let join = derive_projections(
        &block("a; b => a^b"),
        &out(&[3]),
        &[out(&[1]), out(&[2])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(join.lhs_index, vec![cat(&[0, 1])]);
    assert_eq!(coupled(&join), vec![(0, 1), (1, 2)]);
    // A component given by its size gets a loop too: 3^a => a reads past the first 3.
    let tail = derive_projections(&block("3^a => a"), &out(&[2]), &[out(&[5])], 0, None).unwrap();
    assert_eq!(tail.lhs_index, vec![it(0)]);
    assert_eq!(tail.rhs_index, vec![vec![cat(&[1, 0])]]);
    assert_eq!(tail.ranges()[&Symbol(1)], 3);
}

#[test]
fn a_two_by_two_block_matrix_couples_each_axis_separately() {
    // [[a11, a12], [a21, a22]] => rows r1^r2, columns c1^c2.
    let m = derive_projections(
        &block("r, s; r, t; u, s; u, t => r^u, s^t"),
        &out(&[5, 7]),
        &[out(&[2, 3]), out(&[2, 4]), out(&[3, 3]), out(&[3, 4])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(m.product_space.len(), 2, "{m}");
    // Iterators in order of first axis: r, s (first block), t (second), u (third).
    assert_eq!(m.lhs_index, vec![cat(&[0, 3]), cat(&[1, 2])]);
    assert_eq!(m.rhs_index[3], vec![it(3), it(2)]);
    assert!(m.is_surjective() && m.is_injective());
}

#[test]
fn concatenations_sharing_symbols_write_a_block_diagonal() {
    // x; y => a^b, a^b: the two concatenated axes share their components.
    let d = derive_projections(
        &block("a; b => a^b, a^b"),
        &out(&[5, 5]),
        &[out(&[2]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(d.lhs_index, vec![cat(&[0, 1]), cat(&[0, 1])]);
    assert_eq!(d.product_space.len(), 1);
    assert!(!d.is_surjective() && d.is_injective());
}

#[test]
fn explicitly_padded_convolutions_read_their_padding_as_margins() {
    // PyTorch's padding=1 with ceil_mode over 6 positions, window 3, stride 2: 4 windows from
    // position −1, the last overrunning the right padding by one more position.
    let ceil = derive_projections(
        &spec("2*o[1,1]^+k; k => o"),
        &out(&[4]),
        &[out(&[6]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(ceil.rhs_index[0], vec![affine(&[(2, 0), (1, 1)], -1)]);
    assert_eq!(ceil.rhs_padding[0], vec![(1, 2)]);
    // Causal: two positions before, none after, no rounding at stride 1.
    let causal = derive_projections(
        &spec("o[2,0]+k; k => o"),
        &out(&[5]),
        &[out(&[5]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(causal.rhs_index[0], vec![affine(&[(1, 0), (1, 1)], -2)]);
    assert_eq!(causal.rhs_padding[0], vec![(2, 0)]);
}

#[test]
fn a_tensors_margins_cover_its_widest_padded_reader() {
    use rcannl_shape::{Inference, LeafDecl};
    let mut inf = Inference::new();
    let no_axes: [usize; 0] = [];
    let x = inf
        .leaf(
            "x",
            LeafDecl::data().batch(no_axes).input(no_axes).output([8]),
        )
        .unwrap();
    let k3 = inf.leaf("k3", LeafDecl::data().output([3])).unwrap();
    let k5 = inf.leaf("k5", LeafDecl::data().output([5])).unwrap();
    inf.apply("narrow", spec("o=+k; k => o"), &[x, k3]).unwrap();
    inf.apply("wide", spec("o=+k; k => o"), &[x, k5]).unwrap();
    inf.apply("valid", spec("o<+k; k => o"), &[x, k5]).unwrap();
    inf.finish().unwrap();
    assert_eq!(inf.margins(x).unwrap().per_axis(), &[(2, 2)]);
    assert_eq!(inf.margins(k5).unwrap().per_axis(), &[(0, 0)]);
}

#[test]
fn sizes_forced_equal_elsewhere_do_not_share_a_loop_here() {
    use rcannl_shape::{Inference, LeafDecl};
    let mut inf = Inference::new();
    let no_axes: [usize; 0] = [];
    let decl = || LeafDecl::data().batch(no_axes).input(no_axes);
    let u = inf.leaf("u", decl().output([3])).unwrap();
    // v's length is inferred: the pointwise sum forces it equal to u's.
    let v = inf
        .leaf("v", LeafDecl::data().batch(no_axes).input(no_axes))
        .unwrap();
    inf.apply("sum", Logic::Pointwise(2), &[u, v]).unwrap();
    let (_, outer) = inf.apply("outer", spec("i;j=>ij"), &[u, v]).unwrap();
    inf.finish().unwrap();
    let p = inf.projections(outer, 0, None).unwrap();
    assert_eq!(p.lhs_dims, vec![3, 3]);
    assert_eq!(p.lhs_index, vec![it(0), it(1)], "{p}");
    assert_eq!(p.product_space.len(), 2);
}

#[test]
fn matrix_vector_and_one_dimensional_convolution_share_their_nest() {
    // y[o] =+ m[o, k] * v[k] and y[o] =+ x[o + k] * w[k]: the same loops over o and k, the same
    // reduction; only the first operand's index differs.
    let mv = derive_projections(
        &spec("ok;k=>o"),
        &out(&[4]),
        &[out(&[4, 3]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    let conv = derive_projections(
        &spec("o<+k; k => o"),
        &out(&[4]),
        &[out(&[6]), out(&[3])],
        0,
        None,
    )
    .unwrap();
    assert_eq!(mv.product_space, conv.product_space);
    assert_eq!(mv.lhs_index, conv.lhs_index);
    assert_eq!(mv.rhs_index[1], conv.rhs_index[1]);
    assert_eq!(mv.reduction_symbols(), conv.reduction_symbols());
    assert_eq!(mv.rhs_index[0], vec![it(0), it(1)]);
    assert_eq!(conv.rhs_index[0], vec![affine(&[(1, 0), (1, 1)], 0)]);
}

#[test]
fn a_window_only_the_input_mentions_is_iterated() {
    // A unary max-pool: the kernel label appears in no tensor, only in the input's affine axis;
    // with 8 inputs and 4 outputs at stride 2 the window has 2 positions, reduced over.
    let p = rcannl_shape::projection::derive::derive_projections_with_labels(
        &spec("2*o<+k=>o"),
        &out(&[4]),
        &[out(&[8])],
        &[("k".to_owned(), 2)].into(),
        0,
        None,
    )
    .unwrap();
    assert_eq!(
        p.to_string().lines().nth(1),
        Some("  product: i0<4> × i1<2>")
    );
    assert_eq!(
        p.rhs_index[0],
        vec![AxisIndex::affine([(2, Symbol(0)), (1, Symbol(1))], 0)]
    );
    assert_eq!(p.reduction_symbols(), vec![Symbol(1)]);
}
