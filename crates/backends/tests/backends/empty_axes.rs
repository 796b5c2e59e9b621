//! Axes of size 0 on both backends: loops that run no times, buffers without cells, reductions
//! over nothing (the accumulator's neutral element, as numpy's `initial`), and matrix products
//! with an empty dimension, each run as lowered and as optimized.

use std::collections::HashMap;

use crate::common::*;
use rcannl_backends::Buffers;
use rcannl_backends::cc::Compiler;
use rcannl_backends::interpreter::run_routine;
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, Binop, GemmPlan, Index, LoopVar, MemoryMode, NodeId, Routine, Scalar, Stmt,
    TensorNode, Unop,
};

fn compiler() -> Compiler {
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

/// Runs `routine` on the interpreter, and as it is and optimized on the C backend, every node
/// that is not an input starting from leftovers (`7`) the routine must overwrite; returns the
/// values of `output` after each of the three runs.
fn three_ways(routine: &Routine, inputs: &[(u32, Vec<f64>)], output: u32) -> [Vec<f64>; 3] {
    let run = |routine: &Routine, compiled: bool| {
        let mut buffers = Buffers::for_routine(routine).unwrap();
        let stored = routine
            .nodes
            .values()
            .filter(|node| node.memory_mode != Some(MemoryMode::Virtual));
        for node in stored {
            let leftovers = vec![7.0; node.len()];
            buffers.set_values(node.id, &leftovers).unwrap();
        }
        for (node, values) in inputs {
            buffers.set_values(NodeId(*node), values).unwrap();
        }
        if compiled {
            let library = compiler().compile(routine).unwrap();
            library.run(&mut buffers, &HashMap::new()).unwrap();
        } else {
            run_routine(routine, &mut buffers, &HashMap::new()).unwrap();
        }
        buffers.values(NodeId(output))
    };
    let mut materialized = routine.clone();
    materialized
        .nodes
        .get_mut(&NodeId(output))
        .unwrap()
        .memory_mode = Some(MemoryMode::Materialized);
    let optimized = optimize(&materialized).unwrap();
    [
        run(routine, false),
        run(routine, true),
        run(&optimized, true),
    ]
}

/// `out[j] =:accum x[i, j]` with `i` over 0 positions and `j` over 3.
fn reduce_empty_rows(accum: Binop) -> Routine {
    let p = projections(
        &[3, 0],
        (&[3], vec![it(0)]),
        vec![(&[0, 3], vec![it(1), it(0)])],
    );
    let assignment = unary(true, accum, 1, Unop::Identity, 0, p);
    Routine::lower("reduce", &assignment, [node(0, &[0, 3]), node(1, &[3])]).unwrap()
}

#[test]
fn a_sum_over_an_empty_axis_is_zero() {
    // numpy: np.einsum('ij->j', np.zeros((0, 3))) == [0., 0., 0.]
    for values in three_ways(&reduce_empty_rows(Binop::Add), &[(0, vec![])], 1) {
        assert_eq!(values, vec![0.0; 3]);
    }
}

#[test]
fn a_maximum_over_an_empty_axis_is_minus_infinity() {
    // numpy: np.max(np.zeros((0, 3)), axis=0, initial=-np.inf) == [-inf, -inf, -inf]; without
    // `initial` numpy refuses, here the neutral element stands as everywhere a max writes nothing.
    for values in three_ways(&reduce_empty_rows(Binop::Max), &[(0, vec![])], 1) {
        assert_eq!(values, vec![f64::NEG_INFINITY; 3]);
    }
}

#[test]
fn a_product_over_an_empty_axis_is_one() {
    // numpy: np.prod(np.zeros((0, 3)), axis=0) == [1., 1., 1.]
    for values in three_ways(&reduce_empty_rows(Binop::Mul), &[(0, vec![])], 1) {
        assert_eq!(values, vec![1.0; 3]);
    }
}

#[test]
fn a_copy_of_an_empty_tensor_compiles_and_writes_nothing() {
    // The nest reads x[l0, l1] with l0 over 0 positions: no access happens, so none is out of
    // the buffer of 0 cells.
    let assignment = unary(true, Binop::Arg2, 1, Unop::Neg, 0, pointwise(&[0, 3], 1));
    let routine =
        Routine::lower("copy", &assignment, [node(0, &[0, 3]), node(1, &[0, 3])]).unwrap();
    for values in three_ways(&routine, &[(0, vec![])], 1) {
        assert!(values.is_empty());
    }
}

#[test]
fn a_fixed_read_of_an_empty_buffer_under_an_empty_loop_compiles() {
    // for l0 in 0..0 { out[l0] := x[0] }: x has no cell 0, but the loop never runs.
    let routine = Routine {
        name: "fixed".to_owned(),
        nodes: [node(0, &[0]), node(1, &[0])]
            .into_iter()
            .map(|n| (n.id, n))
            .collect(),
        statics: Default::default(),
        body: vec![Stmt::For {
            var: LoopVar(0),
            range: 0,
            body: vec![Stmt::Set {
                node: NodeId(1),
                index: vec![Index::var(LoopVar(0), 0)],
                value: Scalar::Get(NodeId(0), vec![Index::constant(0)]),
            }],
        }],
    };
    let compiled = compiler().compile(&routine);
    assert!(compiled.is_ok(), "{:?}", compiled.err());
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    compiled
        .unwrap()
        .run(&mut buffers, &HashMap::new())
        .unwrap();
    assert!(buffers.values(NodeId(1)).is_empty());
}

/// `c[i,k] =:+ a[i,j] * b[j,k]` over `rows × columns × depth`.
fn matmul_routine(rows: usize, columns: usize, depth: usize) -> Routine {
    let assignment = binary(
        true,
        Binop::Add,
        2,
        Binop::Mul,
        (0, 1),
        projections(
            &[rows, columns, depth],
            (&[rows, columns], vec![it(0), it(1)]),
            vec![
                (&[rows, depth], vec![it(0), it(2)]),
                (&[depth, columns], vec![it(2), it(1)]),
            ],
        ),
    );
    let nodes = [
        node(0, &[rows, depth]),
        node(1, &[depth, columns]),
        node(2, &[rows, columns]),
    ];
    Routine::lower("matmul", &assignment, nodes).unwrap()
}

fn ramp(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i % 5) as f64 - 2.0).collect()
}

#[test]
fn matrix_products_with_an_empty_dimension() {
    // numpy: np.zeros((r, 0)) @ np.zeros((0, c)) == np.zeros((r, c)); an empty row or column
    // count gives an empty result. Sizes large enough for the tuned product when not empty.
    for (rows, columns, depth) in [(64, 64, 0), (0, 64, 64), (64, 0, 64), (2, 3, 0)] {
        let routine = matmul_routine(rows, columns, depth);
        let inputs = [(0, ramp(rows * depth)), (1, ramp(depth * columns))];
        for values in three_ways(&routine, &inputs, 2) {
            assert_eq!(
                values,
                vec![0.0; rows * columns],
                "{rows}×{depth}·{depth}×{columns}"
            );
        }
    }
}

#[test]
fn a_batched_product_over_an_empty_batch_is_optimized_without_a_fault() {
    // c[b,i,k] =:+ a[b,i,j] * b[b,j,k] with b over 0: each batch element is a product large
    // enough for the tuned routine, but there is none.
    let (batch, n) = (0usize, 64usize);
    let at = |axes: [u32; 3]| axes.map(it).to_vec();
    let assignment = binary(
        true,
        Binop::Add,
        2,
        Binop::Mul,
        (0, 1),
        projections(
            &[batch, n, n, n],
            (&[batch, n, n], at([0, 1, 2])),
            vec![
                (&[batch, n, n], at([0, 1, 3])),
                (&[batch, n, n], at([0, 3, 2])),
            ],
        ),
    );
    let nodes = [
        node(0, &[batch, n, n]),
        node(1, &[batch, n, n]),
        node(2, &[batch, n, n]),
    ];
    let routine = Routine::lower("batched", &assignment, nodes).unwrap();
    for values in three_ways(&routine, &[], 2) {
        assert!(values.is_empty());
    }
}

/// A product statement over `c[l0,l1] (+)= a[l0,l2] · b[l2,l1]` with the given ranges, standing
/// for its nest (as the optimizer would have made it, had the ranges been large).
fn gemm_statement(rows: usize, columns: usize, depth: usize, zero_first: bool) -> Routine {
    let (i, k, j) = (LoopVar(0), LoopVar(1), LoopVar(2));
    let v = |var| Index::var(var, 0);
    let (c_index, a_index, b_index) = (vec![v(i), v(k)], vec![v(i), v(j)], vec![v(j), v(k)]);
    let term = Scalar::Binop(
        Binop::Add,
        Box::new(Scalar::Get(NodeId(2), c_index.clone())),
        Box::new(Scalar::Binop(
            Binop::Mul,
            Box::new(Scalar::Get(NodeId(0), a_index.clone())),
            Box::new(Scalar::Get(NodeId(1), b_index.clone())),
        )),
    );
    let set = Stmt::Set {
        node: NodeId(2),
        index: c_index.clone(),
        value: term,
    };
    let nest = |var, range, body| Stmt::For {
        var,
        range,
        body: vec![body],
    };
    let mut statements = Vec::new();
    if zero_first {
        statements.push(Stmt::Fill {
            node: NodeId(2),
            value: 0.0,
        });
    }
    statements.push(nest(i, rows, nest(k, columns, nest(j, depth, set))));
    let plan = GemmPlan {
        c: NodeId(2),
        a: NodeId(0),
        b: NodeId(1),
        zero_first,
        batch: Vec::new(),
        m: vec![(i, rows)],
        n: vec![(k, columns)],
        k: vec![(j, depth)],
        c_index,
        a_index,
        b_index,
        a_margins: Vec::new(),
    };
    let nodes: [TensorNode; 3] = [
        node(0, &[rows, depth]),
        node(1, &[depth, columns]),
        node(2, &[rows, columns]),
    ];
    Routine {
        name: "gemm".to_owned(),
        nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
        statics: Default::default(),
        body: vec![Stmt::Gemm {
            plan: Box::new(plan),
            nest: statements,
        }],
    }
}

#[test]
fn the_tuned_product_runs_an_empty_dimension_as_its_nest_does() {
    // An empty reduction leaves `c` at its fill (zeros) or as it was (the leftovers, 7);
    // an empty row or column count leaves nothing to write.
    for (rows, columns, depth, zero_first, expected) in [
        (3, 4, 0, true, 0.0),
        (3, 4, 0, false, 7.0),
        (0, 4, 5, true, 0.0),
        (3, 0, 5, false, 0.0),
    ] {
        let routine = gemm_statement(rows, columns, depth, zero_first);
        let inputs = [(0, ramp(rows * depth)), (1, ramp(depth * columns))];
        let [interpreted, compiled, _] = three_ways(&routine, &inputs, 2);
        assert_eq!(interpreted, vec![expected; rows * columns]);
        assert_eq!(compiled, interpreted, "{rows}×{depth}·{depth}×{columns}");
    }
}

#[test]
fn an_empty_assignment_sequence_of_fills_and_reads_agrees() {
    // out[j] =:+ x[i, j] then y[j] =: out[j] * 2 with i empty: the second reads the zeros.
    let first = unary(
        true,
        Binop::Add,
        1,
        Unop::Identity,
        0,
        projections(
            &[3, 0],
            (&[3], vec![it(0)]),
            vec![(&[0, 3], vec![it(1), it(0)])],
        ),
    );
    let second = binary(true, Binop::Arg2, 2, Binop::Add, (1, 1), pointwise(&[3], 2));
    let routine = Routine::lower(
        "chain",
        &Assignment::Seq(vec![first, second]),
        [node(0, &[0, 3]), node(1, &[3]), node(2, &[3])],
    )
    .unwrap();
    for values in three_ways(&routine, &[(0, vec![])], 2) {
        assert_eq!(values, vec![0.0; 3]);
    }
}
#[test]
fn fusion_of_a_producer_whose_loop_never_runs_keeps_the_fill() {
    // Hand-built, as lowering no longer emits such nests: `fill n1 with 0; for l0 in 0..3 {
    // for l1 in 0..0 { n1[l0] := STORE } }` then `n2[l2] := n1[l2] + n1[l2]`, where STORE
    // accumulates `n1[l0] + n0[l1, l0]` or stores `n0[l1, l0]` plainly. Either way the loop
    // never runs and n2 is twice the fill.
    let (l0, l1, l2) = (LoopVar(0), LoopVar(1), LoopVar(2));
    let get = |node, index: Vec<Index>| Box::new(Scalar::Get(NodeId(node), index));
    let read = get(0, vec![Index::var(l1, 0), Index::var(l0, 0)]);
    let accumulated = Scalar::Binop(Binop::Add, get(1, vec![Index::var(l0, 0)]), read.clone());
    for store in [accumulated, *read] {
        let producer = Stmt::For {
            var: l0,
            range: 3,
            body: vec![Stmt::For {
                var: l1,
                range: 0,
                body: vec![Stmt::Set {
                    node: NodeId(1),
                    index: vec![Index::var(l0, 0)],
                    value: store,
                }],
            }],
        };
        let reader = Stmt::For {
            var: l2,
            range: 3,
            body: vec![Stmt::Set {
                node: NodeId(2),
                index: vec![Index::var(l2, 0)],
                value: Scalar::Binop(
                    Binop::Add,
                    get(1, vec![Index::var(l2, 0)]),
                    get(1, vec![Index::var(l2, 0)]),
                ),
            }],
        };
        let routine = Routine {
            name: "fused".to_owned(),
            nodes: [node(0, &[0, 3]), node(1, &[3]), node(2, &[3])]
                .into_iter()
                .map(|n| (n.id, n))
                .collect(),
            statics: Default::default(),
            body: vec![
                Stmt::Fill {
                    node: NodeId(1),
                    value: 0.5,
                },
                producer,
                reader,
            ],
        };
        for values in three_ways(&routine, &[(0, vec![])], 2) {
            assert_eq!(values, vec![1.0; 3], "{routine}");
        }
    }
}
