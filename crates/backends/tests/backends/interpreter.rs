//! Hand-built programs lowered and run by the interpreter, checked against values computed
//! independently here.

use std::collections::HashMap;

use crate::common::*;

use rcannl_backends::interpreter::{Buffers, run};
use rcannl_ir::{
    Assignment, AxisIndex, Binop, NodeId, Precision, Projections, Rhs, TensorNode, Unop, lower,
};

#[test]
fn matmul() {
    // c[i,k] =:+ a[i,j] * b[j,k], 2×3 · 3×4.
    let p = projections(
        &[2, 4, 3],
        (&[2, 4], vec![it(0), it(1)]),
        vec![(&[2, 3], vec![it(0), it(2)]), (&[3, 4], vec![it(2), it(1)])],
    );
    let assignment = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Add,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: p,
    };
    let a = range(6);
    let b: Vec<f64> = (0..12).map(|i| (i as f64) * 0.5 - 1.0).collect();
    let c = execute(
        &assignment,
        vec![node(0, &[2, 3]), node(1, &[3, 4]), node(2, &[2, 4])],
        &[(0, a.clone()), (1, b.clone())],
        2,
    );
    let mut expected = vec![0.0; 8];
    for i in 0..2 {
        for k in 0..4 {
            expected[i * 4 + k] = (0..3).map(|j| a[i * 3 + j] * b[j * 4 + k]).sum();
        }
    }
    assert_eq!(c, expected);
}

#[test]
fn the_printed_loops_show_the_fill_and_the_accumulation() {
    let p = projections(
        &[2, 3],
        (&[2], vec![it(0)]),
        vec![(&[2, 3], vec![it(0), it(1)])],
    );
    let assignment = unary(true, Binop::Add, 1, Unop::Identity, 0, p);
    assert_eq!(assignment.to_string(), "n1 =:+ n0 ~logic:\"hand-built\"");
    let table: HashMap<NodeId, TensorNode> =
        [node(0, &[2, 3]), node(1, &[2])].map(|n| (n.id, n)).into();
    let shown: String = lower(&assignment, &table)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        "fill n1 with 0\nfor l0 in 0..2 {\n  for l1 in 0..3 {\n    n1[l0] := (n1[l0] + id(n0[l0, l1]))\n  }\n}\n"
    );
}

#[test]
fn pointwise_broadcast_is_a_plain_store() {
    // r[p,q] =: s[0] * m[p,q].
    let p = projections(
        &[2, 3],
        (&[2, 3], vec![it(0), it(1)]),
        vec![
            (&[1], vec![AxisIndex::Fixed(0)]),
            (&[2, 3], vec![it(0), it(1)]),
        ],
    );
    let assignment = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Arg2,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: p,
    };
    let table: HashMap<NodeId, TensorNode> = [node(0, &[1]), node(1, &[2, 3]), node(2, &[2, 3])]
        .map(|n| (n.id, n))
        .into();
    let stmts = lower(&assignment, &table).unwrap();
    assert!(
        !stmts
            .iter()
            .any(|s| matches!(s, rcannl_ir::Stmt::Fill { .. })),
        "no pre-fill"
    );
    let r = execute(
        &assignment,
        vec![node(0, &[1]), node(1, &[2, 3]), node(2, &[2, 3])],
        &[(0, vec![3.0]), (1, range(6))],
        2,
    );
    assert_eq!(r, vec![0.0, 3.0, 6.0, 9.0, 12.0, 15.0]);
}

#[test]
fn sum_by_a_ones_vector_and_max_reduction() {
    // r[p] =:+ m[p,q] * ones[q].
    let p = projections(
        &[2, 3],
        (&[2], vec![it(0)]),
        vec![(&[2, 3], vec![it(0), it(1)]), (&[3], vec![it(1)])],
    );
    let sum = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Add,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: p.clone(),
    };
    let nodes = || vec![node(0, &[2, 3]), node(1, &[3]), node(2, &[2])];
    let m = vec![1.0, -2.0, 5.0, -4.0, 0.5, -1.0];
    let r = execute(&sum, nodes(), &[(0, m.clone()), (1, vec![1.0; 3])], 2);
    assert_eq!(r, vec![4.0, -4.5]);
    // The same loops under a max accumulator start from −∞.
    let max = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Max,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: p,
    };
    let r = execute(&max, nodes(), &[(0, m), (1, vec![1.0; 3])], 2);
    assert_eq!(r, vec![5.0, 0.5]);
}

#[test]
fn one_dimensional_convolutions_valid_and_padded() {
    let x: Vec<f64> = vec![1.0, 2.0, -1.0, 3.0, 0.5];
    let w = vec![0.5, -1.0, 2.0];
    let conv = |lhs: u32, offset: i64, out: usize| Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Add,
        lhs: NodeId(lhs),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: projections(
            &[out, 3],
            (&[out], vec![it(0)]),
            vec![
                (&[5], vec![affine(&[(1, 0), (1, 1)], offset)]),
                (&[3], vec![it(1)]),
            ],
        ),
    };
    // Valid: y[o] = Σ_k x[o+k] w[k], 3 outputs.
    let valid = execute(
        &conv(2, 0, 3),
        vec![node(0, &[5]), node(1, &[3]), node(2, &[3])],
        &[(0, x.clone()), (1, w.clone())],
        2,
    );
    let expected: Vec<f64> = (0..3)
        .map(|o| (0..3).map(|k| x[o + k] * w[k]).sum())
        .collect();
    assert_eq!(valid, expected);
    // Padded ("same"): x gets one margin cell on each side, holding 0.
    let mut padded_x = node(0, &[5]);
    padded_x.padding = vec![(1, 1)];
    let same = execute(
        &conv(2, -1, 5),
        vec![padded_x, node(1, &[3]), node(2, &[5])],
        &[(0, x.clone()), (1, w.clone())],
        2,
    );
    let at = |i: i64| {
        if (0..5).contains(&i) {
            x[i as usize]
        } else {
            0.0
        }
    };
    let expected: Vec<f64> = (0..5)
        .map(|o| (0..3).map(|k| at(o + k as i64 - 1) * w[k]).sum())
        .collect();
    assert_eq!(same, expected);
}

#[test]
fn interleaving_writes_even_then_odd() {
    // out[2*i] =: a[i]; out[2*i+1] =: b[i].
    let write = |source: u32, offset: i64| {
        unary(
            false,
            Binop::Arg2,
            2,
            Unop::Identity,
            source,
            projections(
                &[3],
                (&[6], vec![affine(&[(2, 0)], offset)]),
                vec![(&[3], vec![it(0)])],
            ),
        )
    };
    let program = Assignment::Seq(vec![write(0, 0), write(1, 1)]);
    let out = execute(
        &program,
        vec![node(0, &[3]), node(1, &[3]), node(2, &[6])],
        &[(0, vec![1.0, 2.0, 3.0]), (1, vec![10.0, 20.0, 30.0])],
        2,
    );
    assert_eq!(out, vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
}

#[test]
fn stores_round_to_the_nodes_precision() {
    let p = projections(&[2], (&[2], vec![it(0)]), vec![(&[2], vec![it(0)])]);
    let assignment = unary(true, Binop::Arg2, 1, Unop::Recip, 0, p);
    let mut half = node(1, &[2]);
    half.precision = Precision::F16;
    let out = execute(
        &assignment,
        vec![node(0, &[2]), half],
        &[(0, vec![3.0, 7.0])],
        1,
    );
    assert_eq!(
        out,
        vec![
            Precision::F16.round(1.0 / 3.0),
            Precision::F16.round(1.0 / 7.0)
        ]
    );
    assert_ne!(out[0], 1.0 / 3.0);
}

#[test]
fn lowering_and_running_report_errors() {
    let p = projections(&[2], (&[2], vec![it(0)]), vec![(&[3], vec![it(0)])]);
    let assignment = unary(true, Binop::Arg2, 1, Unop::Identity, 0, p);
    let table: HashMap<NodeId, TensorNode> =
        [node(0, &[2]), node(1, &[2])].map(|n| (n.id, n)).into();
    let error = lower(&assignment, &table).unwrap_err();
    assert!(error.message.contains("expect [3]"), "{error}");
    // A read past the buffer (no margin for a padded read) is an error, not a wild read.
    let p = projections(
        &[2],
        (&[2], vec![it(0)]),
        vec![(&[2], vec![affine(&[(1, 0)], -1)])],
    );
    let reads_before = unary(true, Binop::Arg2, 1, Unop::Identity, 0, p);
    let stmts = lower(&reads_before, &table).unwrap();
    let mut buffers = Buffers::new([node(0, &[2]), node(1, &[2])]).unwrap();
    let error = run(&stmts, &mut buffers).unwrap_err();
    assert!(error.message.contains("outside its buffer"), "{error}");
}

fn block(lhs: u32, sources: &[u32], projections: Projections) -> Assignment {
    Assignment::Block {
        initialize_neutral: true,
        accum: Binop::Arg2,
        lhs: NodeId(lhs),
        op: Unop::Identity,
        sources: sources.iter().map(|&s| NodeId(s)).collect(),
        projections,
    }
}

#[test]
fn concatenation_table_forward() {
    let a = vec![1.0, 2.0];
    let b = vec![10.0, 20.0, 30.0];
    // a; b => a^b.
    let join = block(
        2,
        &[0, 1],
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![(&[2], vec![it(0)]), (&[3], vec![it(1)])],
        ),
    );
    assert_eq!(
        join.to_string(),
        "n2 =: block(n0; n1) ~logic:\"hand-built\""
    );
    let nodes = || vec![node(0, &[2]), node(1, &[3]), node(2, &[5])];
    let out = execute(&join, nodes(), &[(0, a.clone()), (1, b.clone())], 2);
    assert_eq!(out, vec![1.0, 2.0, 10.0, 20.0, 30.0]);
    // a^b => a and a^b => b: extractions.
    let whole = vec![1.0, 2.0, 10.0, 20.0, 30.0];
    for (symbol, size, expected) in [(0, 2, a.clone()), (1, 3, b.clone())] {
        let slice = unary(
            true,
            Binop::Arg2,
            1,
            Unop::Identity,
            0,
            coupled(
                vec![vec![(0, 2), (1, 3)]],
                (&[size], vec![it(symbol)]),
                vec![(&[5], vec![cat(&[0, 1])])],
            ),
        );
        let out = execute(
            &slice,
            vec![node(0, &[5]), node(1, &[size])],
            &[(0, whole.clone())],
            1,
        );
        assert_eq!(out, expected);
    }
    // b => a^b: a partial update; with `=:` the untouched stretch is cleared first.
    let update = unary(
        true,
        Binop::Arg2,
        1,
        Unop::Identity,
        0,
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![(&[3], vec![it(1)])],
        ),
    );
    let out = execute(
        &update,
        vec![node(0, &[3]), node(1, &[5])],
        &[(0, b.clone())],
        1,
    );
    assert_eq!(out, vec![0.0, 0.0, 10.0, 20.0, 30.0]);
    // b => a^b^c: the middle stretch of 2 + 3 + 4.
    let middle = unary(
        false,
        Binop::Arg2,
        1,
        Unop::Identity,
        0,
        coupled(
            vec![vec![(0, 2), (1, 3), (2, 4)]],
            (&[9], vec![cat(&[0, 1, 2])]),
            vec![(&[3], vec![it(1)])],
        ),
    );
    let out = execute(&middle, vec![node(0, &[3]), node(1, &[9])], &[(0, b)], 1);
    assert_eq!(out, vec![0.0, 0.0, 10.0, 20.0, 30.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn a_block_matrix_is_assembled_from_its_four_blocks() {
    // [[p (1×2), q (1×1)], [r (2×2), s (2×1)]] => 3×3.
    let m = block(
        4,
        &[0, 1, 2, 3],
        coupled(
            vec![vec![(0, 1), (2, 2)], vec![(1, 2), (3, 1)]],
            (&[3, 3], vec![cat(&[0, 2]), cat(&[1, 3])]),
            vec![
                (&[1, 2], vec![it(0), it(1)]),
                (&[1, 1], vec![it(0), it(3)]),
                (&[2, 2], vec![it(2), it(1)]),
                (&[2, 1], vec![it(2), it(3)]),
            ],
        ),
    );
    let out = execute(
        &m,
        vec![
            node(0, &[1, 2]),
            node(1, &[1, 1]),
            node(2, &[2, 2]),
            node(3, &[2, 1]),
            node(4, &[3, 3]),
        ],
        &[
            (0, vec![1.0, 2.0]),
            (1, vec![3.0]),
            (2, vec![4.0, 5.0, 7.0, 8.0]),
            (3, vec![6.0, 9.0]),
        ],
        4,
    );
    assert_eq!(out, (1..=9).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn two_sources_for_one_cell_is_an_error() {
    // Both sources read through maps that do not tell the components apart (each broadcasts
    // one value over its stretch).
    let ambiguous = block(
        2,
        &[0, 1],
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![
                (&[1], vec![AxisIndex::Fixed(0)]),
                (&[1], vec![AxisIndex::Fixed(0)]),
            ],
        ),
    );
    // With one concatenated written axis per source, each source owns its component...
    let table: HashMap<NodeId, TensorNode> = [node(0, &[1]), node(1, &[1]), node(2, &[5])]
        .map(|n| (n.id, n))
        .into();
    assert!(lower(&ambiguous, &table).is_ok());
    let out = execute(
        &ambiguous,
        vec![node(0, &[1]), node(1, &[1]), node(2, &[5])],
        &[(0, vec![7.0]), (1, vec![9.0])],
        2,
    );
    assert_eq!(out, vec![7.0, 7.0, 9.0, 9.0, 9.0]);
    // ...but three sources over two components leave two viable at some point.
    let three = block(
        3,
        &[0, 1, 2],
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![
                (&[1], vec![AxisIndex::Fixed(0)]),
                (&[1], vec![AxisIndex::Fixed(0)]),
                (&[1], vec![AxisIndex::Fixed(0)]),
            ],
        ),
    );
    let table: HashMap<NodeId, TensorNode> =
        [node(0, &[1]), node(1, &[1]), node(2, &[1]), node(3, &[5])]
            .map(|n| (n.id, n))
            .into();
    let error = lower(&three, &table).unwrap_err();
    assert!(error.message.contains("ambiguous"), "{error}");
}

fn scatter(source: u32, targets: &[u32], projections: Projections) -> Assignment {
    Assignment::RevSides {
        initialize_neutral: false,
        accum: Binop::Add,
        source: NodeId(source),
        op: Unop::Identity,
        targets: targets.iter().map(|&t| NodeId(t)).collect(),
        projections,
    }
}

#[test]
fn concatenation_gradients_scatter_back() {
    // The gradient of a; b => a^b: g (5) scattered into a.grad (2) and b.grad (3), accumulated
    // into what they hold.
    let backward = scatter(
        0,
        &[1, 2],
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![(&[2], vec![it(0)]), (&[3], vec![it(1)])],
        ),
    );
    assert_eq!(
        backward.to_string(),
        "block(n1; n2) =+ n0 ~logic:\"hand-built\""
    );
    let nodes = vec![node(0, &[5]), node(1, &[2]), node(2, &[3])];
    let table: HashMap<NodeId, TensorNode> = nodes.iter().map(|n| (n.id, n.clone())).collect();
    let stmts = lower(&backward, &table).unwrap();
    let mut buffers = Buffers::new(nodes).unwrap();
    buffers
        .set_values(NodeId(0), &[1.0, 2.0, 3.0, 4.0, 5.0])
        .unwrap();
    buffers.set_values(NodeId(1), &[100.0, 100.0]).unwrap();
    run(&stmts, &mut buffers).unwrap();
    assert_eq!(buffers.values(NodeId(1)), vec![101.0, 102.0]);
    assert_eq!(buffers.values(NodeId(2)), vec![3.0, 4.0, 5.0]);
    // The gradient of a^b => b (an extraction): the incoming 3 cells go back into the middle
    // stretch of the whole; with `=:` the rest of the whole's gradient is cleared.
    let extract_backward = Assignment::RevSides {
        initialize_neutral: true,
        accum: Binop::Add,
        source: NodeId(0),
        op: Unop::Identity,
        targets: vec![NodeId(1)],
        projections: coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[3], vec![it(1)]),
            vec![(&[5], vec![cat(&[0, 1])])],
        ),
    };
    let out = execute(
        &extract_backward,
        vec![node(0, &[3]), node(1, &[5])],
        &[(0, vec![7.0, 8.0, 9.0]), (1, vec![1.0; 5])],
        1,
    );
    assert_eq!(out, vec![0.0, 0.0, 7.0, 8.0, 9.0]);
}

#[test]
fn a_scatter_with_two_targets_for_one_cell_is_an_error() {
    let both = scatter(
        0,
        &[1, 2],
        coupled(
            vec![vec![(0, 2), (1, 3)]],
            (&[5], vec![cat(&[0, 1])]),
            vec![
                (&[1], vec![AxisIndex::Fixed(0)]),
                (&[1], vec![AxisIndex::Fixed(0)]),
            ],
        ),
    );
    let table: HashMap<NodeId, TensorNode> = [node(0, &[5]), node(1, &[1]), node(2, &[1])]
        .map(|n| (n.id, n))
        .into();
    let error = lower(&both, &table).unwrap_err();
    assert!(error.message.contains("ambiguous"), "{error}");
}

/// `y[oh, ow] =+ x[s·oh + d·kh − pad, s·ow + d·kw − pad] * w[kh, kw]` over a `size×size` input
/// and a `k×k` kernel, checked against the same sum computed directly.
fn conv2d(size: usize, k: usize, stride: usize, dilation: usize, padded: bool) {
    let span = (k - 1) * dilation + 1;
    let (out, left, right) = if padded {
        let overrun = (k - 1) * dilation;
        (size / stride, overrun / 2, overrun - overrun / 2)
    } else {
        ((size - span) / stride + 1, 0, 0)
    };
    let (s, d, pad) = (stride as i64, dilation as i64, left as i64);
    let p = projections(
        &[out, out, k, k],
        (&[out, out], vec![it(0), it(1)]),
        vec![
            (
                &[size, size],
                vec![
                    affine(&[(s, 0), (d, 2)], -pad),
                    affine(&[(s, 1), (d, 3)], -pad),
                ],
            ),
            (&[k, k], vec![it(2), it(3)]),
        ],
    );
    let assignment = Assignment::Accum {
        initialize_neutral: true,
        accum: Binop::Add,
        lhs: NodeId(2),
        rhs: Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
        projections: p,
    };
    let mut x_node = node(0, &[size, size]);
    x_node.padding = vec![(left, right); 2];
    let x: Vec<f64> = (0..size * size)
        .map(|i| ((i * 7) % 11) as f64 - 5.0)
        .collect();
    let w: Vec<f64> = (0..k * k).map(|i| (i as f64) * 0.5 - 1.0).collect();
    let y = execute(
        &assignment,
        vec![x_node, node(1, &[k, k]), node(2, &[out, out])],
        &[(0, x.clone()), (1, w.clone())],
        2,
    );
    let at = |r: i64, c: i64| {
        let inside = |v: i64| (0..size as i64).contains(&v);
        if inside(r) && inside(c) {
            x[r as usize * size + c as usize]
        } else {
            0.0
        }
    };
    let mut expected = vec![0.0; out * out];
    for oh in 0..out as i64 {
        for ow in 0..out as i64 {
            let mut sum = 0.0;
            for kh in 0..k as i64 {
                for kw in 0..k as i64 {
                    sum += at(s * oh + d * kh - pad, s * ow + d * kw - pad)
                        * w[(kh * k as i64 + kw) as usize];
                }
            }
            expected[(oh * out as i64 + ow) as usize] = sum;
        }
    }
    assert_eq!(
        y, expected,
        "size {size}, k {k}, stride {stride}, dilation {dilation}"
    );
}

#[test]
fn two_dimensional_convolutions() {
    conv2d(6, 3, 1, 1, false);
    conv2d(6, 3, 1, 1, true);
    conv2d(7, 3, 2, 1, false);
    conv2d(8, 3, 2, 1, true);
    conv2d(9, 3, 1, 2, false);
    conv2d(6, 3, 1, 2, true);
    conv2d(9, 2, 2, 2, false);
}

#[test]
fn max_pooling_starts_from_minus_infinity() {
    // y[i, j] =:max x[2i + a, 2j + b] over a 4×4 input with 2×2 windows.
    let p = projections(
        &[2, 2, 2, 2],
        (&[2, 2], vec![it(0), it(1)]),
        vec![(
            &[4, 4],
            vec![affine(&[(2, 0), (1, 2)], 0), affine(&[(2, 1), (1, 3)], 0)],
        )],
    );
    let pool = unary(true, Binop::Max, 1, Unop::Identity, 0, p);
    let x: Vec<f64> = (0..16).map(|i| -((i * 5 % 16) as f64) - 1.0).collect();
    let y = execute(
        &pool,
        vec![node(0, &[4, 4]), node(1, &[2, 2])],
        &[(0, x.clone())],
        1,
    );
    let expected: Vec<f64> = (0..4)
        .map(|cell| {
            let (i, j) = (cell / 2, cell % 2);
            (0..4)
                .map(|w| x[(2 * i + w / 2) * 4 + 2 * j + w % 2])
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    assert_eq!(y, expected);
    assert!(y.iter().all(|v| *v < 0.0), "a zero start would have won");
}

#[test]
fn deinterleaving_reads_odd_positions() {
    // out[i] =: x[2*i + 1].
    let p = projections(
        &[3],
        (&[3], vec![it(0)]),
        vec![(&[6], vec![affine(&[(2, 0)], 1)])],
    );
    let odd = unary(true, Binop::Arg2, 1, Unop::Identity, 0, p);
    let out = execute(
        &odd,
        vec![node(0, &[6]), node(1, &[3])],
        &[(0, range(6))],
        1,
    );
    assert_eq!(out, vec![1.0, 3.0, 5.0]);
}
