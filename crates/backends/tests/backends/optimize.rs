//! The optimizer's passes on hand-built routines: the printed routine before and after each, and
//! both versions run by the interpreter on the same inputs with the same results.

use crate::common::*;

use rcannl_backends::interpreter::Buffers;
use rcannl_ir::optimize::{accumulate, cse, fills, memory, simplify, slices, virtualize};
use rcannl_ir::{
    Assignment, Binop, FetchOp, Index, LocalId, LoopVar, MemoryMode, NodeId, Precision,
    Projections, Routine, Scalar, Stmt, TensorNode, Ternop, Unop, Var, optimize,
};

fn f32_node(id: u32, label: &str, dims: &[usize]) -> TensorNode {
    TensorNode::new(id, label, Precision::F32, dims)
}

fn lowered(assignments: Vec<Assignment>, nodes: Vec<TensorNode>) -> Routine {
    Routine::lower("r", &Assignment::Seq(assignments), nodes).unwrap()
}

fn mode(routine: &Routine, node: u32) -> MemoryMode {
    routine.nodes[&NodeId(node)].memory_mode.unwrap()
}

/// Whether any statement of `routine` writes `node`.
fn writes(routine: &Routine, node: u32) -> bool {
    let mut found = false;
    for stmt in &routine.body {
        stmt.walk(&mut |s| found |= s.written_node() == Some(NodeId(node)));
    }
    found
}

/// Runs both routines on `inputs` and checks that every node the optimized one keeps after the
/// run holds the same bits in both; returns the optimized run's buffers.
fn same_results(before: &Routine, after: &Routine, inputs: &[(u32, Vec<f64>)]) -> Buffers {
    let expected = run_routine_on(before, inputs);
    let got = run_routine_on(after, inputs);
    let bits = |values: Vec<f64>| values.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    let mut compared = 0;
    for node in after.nodes.values() {
        if node.memory_mode.unwrap_or(MemoryMode::Materialized) == MemoryMode::Materialized {
            assert_eq!(
                bits(got.values(node.id)),
                bits(expected.values(node.id)),
                "{} '{}'",
                node.id,
                node.label
            );
            compared += 1;
        }
    }
    assert!(compared > 0, "no node to compare");
    got
}

fn shows(routine: &Routine, expected: &str) {
    assert_eq!(routine.to_string(), expected);
}

fn small_values(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7 + 3) % 11) as f64 * scale - 2.0)
        .collect()
}

#[test]
fn pointwise_chains_fuse_into_one_nest() {
    // t = a * b; u = t + c; r = relu(u), all f32.
    let dims = [2, 3];
    let nodes = vec![
        f32_node(0, "a", &dims),
        f32_node(1, "b", &dims),
        f32_node(2, "c", &dims),
        f32_node(3, "t", &dims),
        f32_node(4, "u", &dims),
        f32_node(5, "r", &dims),
    ];
    let before = lowered(
        vec![
            binary(
                true,
                Binop::Arg2,
                3,
                Binop::Mul,
                (0, 1),
                pointwise(&dims, 2),
            ),
            binary(
                true,
                Binop::Arg2,
                4,
                Binop::Add,
                (3, 2),
                pointwise(&dims, 2),
            ),
            unary(true, Binop::Arg2, 5, Unop::Relu, 4, pointwise(&dims, 1)),
        ],
        nodes,
    );
    shows(
        &before,
        "\
routine r():
  n0 'a': f32 [2, 3]
  n1 'b': f32 [2, 3]
  n2 'c': f32 [2, 3]
  n3 't': f32 [2, 3]
  n4 'u': f32 [2, 3]
  n5 'r': f32 [2, 3]
for l0 in 0..2 {
  for l1 in 0..3 {
    n3[l0, l1] := (n0[l0, l1] * n1[l0, l1])
  }
}
for l2 in 0..2 {
  for l3 in 0..3 {
    n4[l2, l3] := (n3[l2, l3] + n2[l2, l3])
  }
}
for l4 in 0..2 {
  for l5 in 0..3 {
    n5[l4, l5] := relu(n4[l4, l5])
  }
}
",
    );
    let after = optimize(&before).unwrap();
    shows(
        &after,
        "\
routine r():
  n0 'a': f32 [2, 3] materialized
  n1 'b': f32 [2, 3] materialized
  n2 'c': f32 [2, 3] materialized
  n3 't': f32 [2, 3] virtual
  n4 'u': f32 [2, 3] virtual
  n5 'r': f32 [2, 3] materialized
for l4 in 0..2 {
  for l5 in 0..3 {
    local v0: f32 := (n0[l4, l5] * n1[l4, l5])
    local v1: f32 := (v0 + n2[l4, l5])
    n5[l4, l5] := relu(v1)
  }
}
",
    );
    assert_eq!(after.body.len(), 1, "one top-level nest");
    assert!(matches!(after.body[0], Stmt::For { .. }));
    for virtual_node in [3, 4] {
        assert_eq!(mode(&after, virtual_node), MemoryMode::Virtual);
        assert!(!writes(&after, virtual_node));
    }
    assert_eq!(mode(&after, 5), MemoryMode::Materialized);
    let (a, b, c) = (
        small_values(6, 0.1),
        small_values(6, -0.3),
        small_values(6, 0.7),
    );
    let buffers = same_results(
        &before,
        &after,
        &[(0, a.clone()), (1, b.clone()), (2, c.clone())],
    );
    let expected: Vec<f64> = (0..6)
        .map(|i| {
            let t = a[i] as f32 * b[i] as f32;
            f64::from((t + c[i] as f32).max(0.0))
        })
        .collect();
    assert_eq!(buffers.values(NodeId(5)), expected);
}

/// `n2 =:+ n0 * n1` over `product` (its symbols in `order`), `a` of `[i, k]`, `b` of `[k, j]`.
fn matmul(lhs: u32, (i, k, j): (usize, usize, usize), symbols: [u32; 3]) -> Assignment {
    let [si, sk, sj] = symbols;
    let mut sizes = [0; 3];
    sizes[si as usize] = i;
    sizes[sk as usize] = k;
    sizes[sj as usize] = j;
    binary(
        true,
        Binop::Add,
        lhs,
        Binop::Mul,
        (0, 1),
        projections(
            &sizes,
            (&[i, j], vec![it(si), it(sj)]),
            vec![
                (&[i, k], vec![it(si), it(sk)]),
                (&[k, j], vec![it(sk), it(sj)]),
            ],
        ),
    )
}

fn matmul_expected(a: &[f64], b: &[f64], (i, k, j): (usize, usize, usize)) -> Vec<f64> {
    let mut c = vec![0.0; i * j];
    for r in 0..i {
        for s in 0..j {
            c[r * j + s] = (0..k).map(|m| a[r * k + m] * b[m * j + s]).sum();
        }
    }
    c
}

#[test]
fn a_matmul_read_once_inlines_as_a_local_accumulator() {
    // n2 =:+ a * b (2×3 · 3×4), then c[j, i] := n2[i, j].
    let sizes = (2, 3, 4);
    let transpose = unary(
        true,
        Binop::Arg2,
        3,
        Unop::Identity,
        2,
        projections(
            &[4, 2],
            (&[4, 2], vec![it(0), it(1)]),
            vec![(&[2, 4], vec![it(1), it(0)])],
        ),
    );
    let before = lowered(
        vec![matmul(2, sizes, [0, 2, 1]), transpose],
        vec![
            node(0, &[2, 3]),
            node(1, &[3, 4]),
            node(2, &[2, 4]),
            node(3, &[4, 2]),
        ],
    );
    shows(
        &before,
        "\
routine r():
  n0 't0': f64 [2, 3]
  n1 't1': f64 [3, 4]
  n2 't2': f64 [2, 4]
  n3 't3': f64 [4, 2]
fill n2 with 0
for l0 in 0..2 {
  for l1 in 0..4 {
    for l2 in 0..3 {
      n2[l0, l1] := (n2[l0, l1] + (n0[l0, l2] * n1[l2, l1]))
    }
  }
}
for l3 in 0..4 {
  for l4 in 0..2 {
    n3[l3, l4] := id(n2[l4, l3])
  }
}
",
    );
    let after = optimize(&before).unwrap();
    shows(
        &after,
        "\
routine r():
  n0 't0': f64 [2, 3] materialized
  n1 't1': f64 [3, 4] materialized
  n2 't2': f64 [2, 4] virtual
  n3 't3': f64 [4, 2] materialized
for l3 in 0..4 {
  for l4 in 0..2 {
    local v0: f64 := 0
    for l2 in 0..3 {
      v0 := (v0 + (n0[l4, l2] * n1[l2, l3]))
    }
    n3[l3, l4] := v0
  }
}
",
    );
    assert_eq!(mode(&after, 2), MemoryMode::Virtual);
    assert!(!writes(&after, 2), "no fill of n2 left");
    // Fusion alone leaves the identity for simplification to remove.
    let fused = virtualize::virtualize(&memory::decide_memory_modes(&before).unwrap()).unwrap();
    assert_eq!(
        fused.body[0].to_string(),
        "\
for l3 in 0..4 {
  for l4 in 0..2 {
    local v0: f64 := 0
    for l2 in 0..3 {
      v0 := (v0 + (n0[l4, l2] * n1[l2, l3]))
    }
    n3[l3, l4] := id(v0)
  }
}
"
    );
    let (a, b) = (range(6), small_values(12, 0.5));
    let buffers = same_results(&before, &after, &[(0, a.clone()), (1, b.clone())]);
    let product = matmul_expected(&a, &b, sizes);
    let transposed: Vec<f64> = (0..8).map(|c| product[(c % 2) * 4 + c / 2]).collect();
    assert_eq!(buffers.values(NodeId(3)), transposed);
}

/// `s[i] =:+ m[i, j]`, then `r[i, j] := s[i] * m[i, j]`: the sum read once per column.
fn row_sums_broadcast(rows: usize) -> Routine {
    let dims = [rows, 2];
    let sum = unary(
        true,
        Binop::Add,
        1,
        Unop::Identity,
        0,
        projections(
            &dims,
            (&[rows], vec![it(0)]),
            vec![(&dims, vec![it(0), it(1)])],
        ),
    );
    let scale = binary(
        true,
        Binop::Arg2,
        2,
        Binop::Mul,
        (1, 0),
        projections(
            &dims,
            (&dims, vec![it(0), it(1)]),
            vec![(&[rows], vec![it(0)]), (&dims, vec![it(0), it(1)])],
        ),
    );
    lowered(
        vec![sum, scale],
        vec![node(0, &dims), node(1, &[rows]), node(2, &dims)],
    )
}

#[test]
fn a_reduction_read_many_times_is_stored() {
    let before = row_sums_broadcast(3);
    let after = optimize(&before).unwrap();
    shows(
        &after,
        "\
routine r():
  n0 't0': f64 [3, 2] materialized
  n1 't1': f64 [3] local
  n2 't2': f64 [3, 2] materialized
for l0 in 0..3 {
  local v0: f64 := 0
  for l1 in 0..2 {
    v0 := (v0 + n0[l0, l1])
  }
  n1[l0] := v0
}
for l2 in 0..3 {
  for l3 in 0..2 {
    n2[l2, l3] := (n1[l2] * n0[l2, l3])
  }
}
",
    );
    assert_eq!(mode(&after, 1), MemoryMode::Local);
    let m = small_values(6, 1.0);
    let buffers = same_results(&before, &after, &[(0, m.clone())]);
    let expected: Vec<f64> = (0..6)
        .map(|c| (m[c / 2 * 2] + m[c / 2 * 2 + 1]) * m[c])
        .collect();
    assert_eq!(buffers.values(NodeId(2)), expected);
    // 2048 f64 cells fill the 16 KiB of a local buffer; one more does not fit.
    let fits = memory::decide_memory_modes(&row_sums_broadcast(2048)).unwrap();
    assert_eq!(mode(&fits, 1), MemoryMode::Local);
    let before = row_sums_broadcast(2049);
    let after = optimize(&before).unwrap();
    assert_eq!(mode(&after, 1), MemoryMode::Materialized);
    same_results(&before, &after, &[(0, small_values(2049 * 2, 1.0))]);
}

#[test]
fn a_write_between_producer_and_reader_keeps_the_intermediate() {
    // t = a * b; a := c; r = t + a: inlining t into r would read the new a.
    let dims = [4];
    let nodes = || {
        vec![
            node(0, &dims),
            node(1, &dims),
            node(2, &dims),
            node(3, &dims),
            node(4, &dims),
        ]
    };
    let assignments = vec![
        binary(
            true,
            Binop::Arg2,
            3,
            Binop::Mul,
            (0, 1),
            pointwise(&dims, 2),
        ),
        unary(true, Binop::Arg2, 0, Unop::Identity, 2, pointwise(&dims, 1)),
        binary(
            true,
            Binop::Arg2,
            4,
            Binop::Add,
            (3, 0),
            pointwise(&dims, 2),
        ),
    ];
    let before = lowered(assignments.clone(), nodes());
    let after = optimize(&before).unwrap();
    shows(
        &after,
        "\
routine r():
  n0 't0': f64 [4] materialized
  n1 't1': f64 [4] materialized
  n2 't2': f64 [4] materialized
  n3 't3': f64 [4] local
  n4 't4': f64 [4] materialized
for l0 in 0..4 {
  n3[l0] := (n0[l0] * n1[l0])
  n0[l0] := n2[l0]
  n4[l0] := (n3[l0] + n0[l0])
}
",
    );
    assert_eq!(mode(&after, 3), MemoryMode::Local);
    assert!(writes(&after, 3));
    let (a, b, c) = (
        small_values(4, 1.0),
        small_values(4, 0.5),
        small_values(4, 2.0),
    );
    let buffers = same_results(
        &before,
        &after,
        &[(0, a.clone()), (1, b.clone()), (2, c.clone())],
    );
    let expected: Vec<f64> = (0..4).map(|i| a[i] * b[i] + c[i]).collect();
    assert_eq!(buffers.values(NodeId(4)), expected);
    // Forced to be virtual, it is an error.
    let mut forced = nodes();
    forced[3] = forced[3].clone().with_mode(MemoryMode::Virtual);
    let error = optimize(&lowered(assignments, forced)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "n3 't3' is set to be virtual, but it cannot be inlined: statement 1 writes n0, which its \
         producer reads, before statement 2 reads it"
    );
}

#[test]
fn state_read_before_it_is_written_is_materialized() {
    // x =+ g; y =: x * x. x accumulates into what it held before the run.
    let dims = [3];
    let nodes = || vec![node(0, &dims), node(1, &dims), node(2, &dims)];
    let assignments = vec![
        unary(false, Binop::Add, 1, Unop::Identity, 0, pointwise(&dims, 1)),
        binary(
            true,
            Binop::Arg2,
            2,
            Binop::Mul,
            (1, 1),
            pointwise(&dims, 2),
        ),
    ];
    let before = lowered(assignments.clone(), nodes());
    let after = optimize(&before).unwrap();
    shows(
        &after,
        "\
routine r():
  n0 't0': f64 [3] materialized
  n1 't1': f64 [3] materialized
  n2 't2': f64 [3] materialized
for l0 in 0..3 {
  n1[l0] := (n1[l0] + n0[l0])
  n2[l0] := (n1[l0] * n1[l0])
}
",
    );
    for id in 0..3 {
        assert_eq!(mode(&after, id), MemoryMode::Materialized, "n{id}");
    }
    let (g, x) = (small_values(3, 1.0), vec![10.0, 20.0, 30.0]);
    let buffers = same_results(&before, &after, &[(0, g.clone()), (1, x.clone())]);
    let updated: Vec<f64> = (0..3).map(|i| x[i] + g[i]).collect();
    assert_eq!(buffers.values(NodeId(1)), updated);
    assert_eq!(
        buffers.values(NodeId(2)),
        updated.iter().map(|v| v * v).collect::<Vec<_>>()
    );
    // Neither the input g nor x can be virtual.
    for (forced_node, reason) in [
        (
            0,
            "n0 't0' is set to be virtual, but it cannot be inlined: the routine does not write it",
        ),
        (
            1,
            "n1 't1' is set to be virtual, but it cannot be inlined: it accumulates into cells \
             nothing set before",
        ),
    ] {
        let mut forced = nodes();
        forced[forced_node] = forced[forced_node].clone().with_mode(MemoryMode::Virtual);
        let error = optimize(&lowered(assignments.clone(), forced)).unwrap_err();
        assert_eq!(error.to_string(), reason);
    }
}

#[test]
fn a_small_product_accumulates_in_place_along_its_rows() {
    // c[i, j] =:+ a[i, k] * b[k, j] over the product space [i, k, j]: summed over k innermost,
    // b would be read down its columns; instead each row of c gains a[i, k] times a row of b,
    // k outermost (c is small), every cell still summing its terms in order.
    let sizes = (2, 3, 4);
    let before = lowered(
        vec![matmul(2, sizes, [0, 1, 2])],
        vec![node(0, &[2, 3]), node(1, &[3, 4]), node(2, &[2, 4])],
    );
    shows(
        &before,
        "\
routine r():
  n0 't0': f64 [2, 3]
  n1 't1': f64 [3, 4]
  n2 't2': f64 [2, 4]
fill n2 with 0
for l0 in 0..2 {
  for l1 in 0..3 {
    for l2 in 0..4 {
      n2[l0, l2] := (n2[l0, l2] + (n0[l0, l1] * n1[l1, l2]))
    }
  }
}
",
    );
    let moved = accumulate::local_accumulators(before.clone());
    shows(
        &moved,
        "\
routine r():
  n0 't0': f64 [2, 3]
  n1 't1': f64 [3, 4]
  n2 't2': f64 [2, 4]
fill n2 with 0
for l1 in 0..3 {
  for l0 in 0..2 {
    for l2 in 0..4 {
      n2[l0, l2] := (n2[l0, l2] + (n0[l0, l1] * n1[l1, l2]))
    }
  }
}
",
    );
    assert_eq!(optimize(&before).unwrap().body, moved.body);
    let (a, b) = (small_values(6, 1.0), small_values(12, 3.0));
    let buffers = same_results(&before, &moved, &[(0, a.clone()), (1, b.clone())]);
    assert_eq!(buffers.values(NodeId(2)), matmul_expected(&a, &b, sizes));
}

fn at(var: u32) -> Index {
    Index::var(LoopVar(var), 0)
}

fn get(node: u32, index: Vec<Index>) -> Box<Scalar> {
    Box::new(Scalar::Get(NodeId(node), index))
}

fn c(x: f64) -> Box<Scalar> {
    Box::new(Scalar::Const(x))
}

fn bin(op: Binop, a: Box<Scalar>, b: Box<Scalar>) -> Box<Scalar> {
    Box::new(Scalar::Binop(op, a, b))
}

fn un(op: Unop, a: Box<Scalar>) -> Box<Scalar> {
    Box::new(Scalar::Unop(op, a))
}

fn hand_built(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
    Routine {
        name: "r".to_owned(),
        nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
        statics: Default::default(),
        body,
    }
}

#[test]
fn simplification_folds_drops_and_keeps_what_it_must() {
    let nodes = vec![
        f32_node(0, "x", &[3]),
        TensorNode::new(1, "k", Precision::I32, &[3]),
        f32_node(2, "y", &[3]),
    ];
    // The index l1 + l0 + 2·l1 − 2·l1, with l0 of one iteration.
    let tangled = Index {
        terms: vec![
            (1, Var::Loop(LoopVar(1))),
            (1, Var::Loop(LoopVar(0))),
            (2, Var::Loop(LoopVar(1))),
            (-2, Var::Loop(LoopVar(1))),
        ]
        .into(),
        offset: 0,
    };
    let float_value = bin(
        Binop::Add,
        bin(
            Binop::Add,
            bin(Binop::Mul, get(0, vec![tangled.clone()]), c(1.0)),
            bin(Binop::Mul, c(2.0), c(3.0)),
        ),
        // x·0 stays: x may be NaN or infinite.
        bin(Binop::Mul, get(0, vec![at(1)]), c(0.0)),
    );
    let int_value = bin(
        Binop::Add,
        // k·0 is 0 in integers.
        bin(Binop::Mul, get(1, vec![at(1)]), c(0.0)),
        un(
            Unop::Neg,
            un(
                Unop::Neg,
                un(Unop::Identity, Box::new(Scalar::Embed(at(1)))),
            ),
        ),
    );
    let chosen = Scalar::Ternop(
        Ternop::Where,
        bin(Binop::Lt, c(1.0), c(2.0)),
        bin(Binop::Arg1, get(0, vec![at(1)]), c(5.0)),
        c(7.0),
    );
    let body = vec![Stmt::For {
        var: LoopVar(0),
        range: 1,
        body: vec![Stmt::For {
            var: LoopVar(1),
            range: 3,
            body: vec![
                Stmt::Local {
                    id: LocalId(0),
                    precision: Precision::F32,
                    value: *bin(Binop::Div, c(1.0), c(4.0)),
                },
                Stmt::Set {
                    node: NodeId(2),
                    index: vec![tangled],
                    value: *float_value,
                },
                Stmt::Set {
                    node: NodeId(1),
                    index: vec![at(1)],
                    value: Scalar::Binop(Binop::Sub, int_value, Box::new(chosen)),
                },
                Stmt::For {
                    var: LoopVar(2),
                    range: 0,
                    body: vec![Stmt::Set {
                        node: NodeId(2),
                        index: vec![at(1)],
                        value: Scalar::Const(9.0),
                    }],
                },
            ],
        }],
    }];
    let before = hand_built(nodes, body);
    shows(
        &before,
        "\
routine r():
  n0 'x': f32 [3]
  n1 'k': i32 [3]
  n2 'y': f32 [3]
for l0 in 0..1 {
  for l1 in 0..3 {
    local v0: f32 := (1 / 4)
    n2[l1+l0+2*l1-2*l1] := (((n0[l1+l0+2*l1-2*l1] * 1) + (2 * 3)) + (n0[l1] * 0))
    n1[l1] := (((n1[l1] * 0) + neg(neg(id(#(l1))))) - where((1 < 2), arg1(n0[l1], 5), 7))
    for l2 in 0..0 {
      n2[l1] := 9
    }
  }
}
",
    );
    let after = simplify::simplify(&before);
    shows(
        &after,
        "\
routine r():
  n0 'x': f32 [3]
  n1 'k': i32 [3]
  n2 'y': f32 [3]
for l1 in 0..3 {
  n2[l1] := ((n0[l1] + 6) + (n0[l1] * 0))
  n1[l1] := (#(l1) - n0[l1])
}
",
    );
    let x = vec![0.5, -1.25, 3.0];
    let buffers = same_results(&before, &after, &[(0, x.clone()), (1, vec![4.0, 5.0, 6.0])]);
    assert_eq!(
        buffers.values(NodeId(2)),
        x.iter().map(|v| v + 6.0 + v * 0.0).collect::<Vec<_>>()
    );
    // k = l1 − trunc(x): the where's branch computed in i32.
    assert_eq!(buffers.values(NodeId(1)), vec![0.0, 2.0, -1.0]);
}

#[test]
fn a_repeated_sum_is_computed_once() {
    // r = (a + b) * (a + b) in f32.
    let sum = || bin(Binop::Add, get(0, vec![at(0)]), get(1, vec![at(0)]));
    let before = hand_built(
        vec![
            f32_node(0, "a", &[4]),
            f32_node(1, "b", &[4]),
            f32_node(2, "r", &[4]),
        ],
        vec![Stmt::For {
            var: LoopVar(0),
            range: 4,
            body: vec![Stmt::Set {
                node: NodeId(2),
                index: vec![at(0)],
                value: Scalar::Binop(Binop::Mul, sum(), sum()),
            }],
        }],
    );
    shows(
        &before,
        "\
routine r():
  n0 'a': f32 [4]
  n1 'b': f32 [4]
  n2 'r': f32 [4]
for l0 in 0..4 {
  n2[l0] := ((n0[l0] + n1[l0]) * (n0[l0] + n1[l0]))
}
",
    );
    let after = cse::cse(before.clone());
    shows(
        &after,
        "\
routine r():
  n0 'a': f32 [4]
  n1 'b': f32 [4]
  n2 'r': f32 [4]
for l0 in 0..4 {
  local v0: f32 := (n0[l0] + n1[l0])
  n2[l0] := (v0 * v0)
}
",
    );
    // Values whose f32 sum and square round: the local keeps the sum in f32, rounded as the
    // statement rounded it.
    let a = vec![0.1, 1.0e8, -3.3, 7.77];
    let b = vec![0.2, 3.0, 1.1, 1.0e-7];
    let buffers = same_results(&before, &after, &[(0, a.clone()), (1, b.clone())]);
    let expected: Vec<f64> = (0..4)
        .map(|i| {
            let s = a[i] as f32 + b[i] as f32;
            f64::from(s * s)
        })
        .collect();
    assert_eq!(buffers.values(NodeId(2)), expected);
}

/// Lowers `assignments`, optimizes, and checks both give the same values; the optimized routine.
fn optimized_agrees(
    assignments: Vec<Assignment>,
    nodes: Vec<TensorNode>,
    inputs: &[(u32, Vec<f64>)],
) -> Routine {
    let before = lowered(assignments, nodes);
    let after = optimize(&before).unwrap();
    same_results(&before, &after, inputs);
    assert_eq!(
        optimize(&after).unwrap(),
        after,
        "optimizing again changes nothing"
    );
    after
}

fn conv1d(lhs: u32, input: u32, offset: i64, out: usize) -> Assignment {
    binary(
        true,
        Binop::Add,
        lhs,
        Binop::Mul,
        (input, 1),
        projections(
            &[out, 3],
            (&[out], vec![it(0)]),
            vec![
                (&[5], vec![affine(&[(1, 0), (1, 1)], offset)]),
                (&[3], vec![it(1)]),
            ],
        ),
    )
}

fn max_pool(lhs: u32, input: u32) -> Assignment {
    unary(
        true,
        Binop::Max,
        lhs,
        Unop::Identity,
        input,
        projections(
            &[2, 2, 2, 2],
            (&[2, 2], vec![it(0), it(1)]),
            vec![(
                &[4, 4],
                vec![affine(&[(2, 0), (1, 2)], 0), affine(&[(2, 1), (1, 3)], 0)],
            )],
        ),
    )
}

fn concatenation(lhs: u32, a: u32, b: u32, (na, nb): (usize, usize)) -> Assignment {
    Assignment::Block {
        initialize_neutral: true,
        accum: Binop::Arg2,
        lhs: NodeId(lhs),
        op: Unop::Identity,
        sources: vec![NodeId(a), NodeId(b)],
        projections: coupled(
            vec![vec![(0, na), (1, nb)]],
            (&[na + nb], vec![cat(&[0, 1])]),
            vec![(&[na], vec![it(0)]), (&[nb], vec![it(1)])],
        ),
    }
}

fn scatter_back(source: u32, targets: [u32; 2], (na, nb): (usize, usize)) -> Assignment {
    Assignment::RevSides {
        initialize_neutral: false,
        accum: Binop::Add,
        source: NodeId(source),
        op: Unop::Identity,
        targets: targets.iter().map(|t| NodeId(*t)).collect(),
        projections: coupled(
            vec![vec![(0, na), (1, nb)]],
            (&[na + nb], vec![cat(&[0, 1])]),
            vec![(&[na], vec![it(0)]), (&[nb], vec![it(1)])],
        ),
    }
}

fn padded(mut node: TensorNode, margins: (usize, usize)) -> TensorNode {
    node.padding = vec![margins; node.dims.len()];
    node
}

#[test]
fn interpreter_programs_give_the_same_values_optimized() {
    let x = vec![1.0, 2.0, -1.0, 3.0, 0.5];
    let w = vec![0.5, -1.0, 2.0];
    // A matmul.
    optimized_agrees(
        vec![matmul(2, (2, 3, 4), [0, 2, 1])],
        vec![node(0, &[2, 3]), node(1, &[3, 4]), node(2, &[2, 4])],
        &[(0, range(6)), (1, small_values(12, 0.5))],
    );
    // A padded 1-D convolution, alone and followed by a relu it fuses into.
    optimized_agrees(
        vec![conv1d(2, 0, -1, 5)],
        vec![padded(node(0, &[5]), (1, 1)), node(1, &[3]), node(2, &[5])],
        &[(0, x.clone()), (1, w.clone())],
    );
    let fused = optimized_agrees(
        vec![
            conv1d(2, 0, -1, 5),
            unary(true, Binop::Arg2, 3, Unop::Relu, 2, pointwise(&[5], 1)),
        ],
        vec![
            padded(node(0, &[5]), (1, 1)),
            node(1, &[3]),
            node(2, &[5]),
            node(3, &[5]),
        ],
        &[(0, x.clone()), (1, w.clone())],
    );
    assert_eq!(mode(&fused, 2), MemoryMode::Virtual);
    // A max-pool, alone and read by a pointwise product.
    let pooled: Vec<f64> = (0..16).map(|i| -((i * 5 % 16) as f64) - 1.0).collect();
    optimized_agrees(
        vec![max_pool(1, 0)],
        vec![node(0, &[4, 4]), node(1, &[2, 2])],
        &[(0, pooled.clone())],
    );
    let scaled = optimized_agrees(
        vec![
            max_pool(1, 0),
            binary(
                true,
                Binop::Arg2,
                3,
                Binop::Mul,
                (1, 2),
                pointwise(&[2, 2], 2),
            ),
        ],
        vec![
            node(0, &[4, 4]),
            node(1, &[2, 2]),
            node(2, &[2, 2]),
            node(3, &[2, 2]),
        ],
        &[(0, pooled), (2, small_values(4, 1.0))],
    );
    assert_eq!(mode(&scaled, 1), MemoryMode::Virtual);
    // A concatenation, alone and read afterwards: two nests write it, so it stays stored.
    let (a, b) = (vec![1.0, 2.0], vec![10.0, 20.0, 30.0]);
    let nodes = || vec![node(0, &[2]), node(1, &[3]), node(2, &[5]), node(3, &[5])];
    optimized_agrees(
        vec![concatenation(2, 0, 1, (2, 3))],
        nodes()[..3].to_vec(),
        &[(0, a.clone()), (1, b.clone())],
    );
    let read = optimized_agrees(
        vec![
            concatenation(2, 0, 1, (2, 3)),
            binary(true, Binop::Arg2, 3, Binop::Mul, (2, 2), pointwise(&[5], 2)),
        ],
        nodes(),
        &[(0, a), (1, b)],
    );
    assert_eq!(mode(&read, 2), MemoryMode::Local);
    // Its gradient scattered back into what the targets hold.
    let scattered = optimized_agrees(
        vec![scatter_back(0, [1, 2], (2, 3))],
        vec![node(0, &[5]), node(1, &[2]), node(2, &[3])],
        &[
            (0, range(5)),
            (1, vec![100.0, 100.0]),
            (2, vec![1.0, 2.0, 3.0]),
        ],
    );
    assert_eq!(mode(&scattered, 1), MemoryMode::Materialized);
}

#[test]
fn a_transposing_copy_runs_in_tiles_on_both_backends() {
    use rcannl_backends::cc::Compiler;
    // n1[k, j, i] := 2·n0[i, j, k] over 64×3×96: n0 moves by one cell along k, n1 along i.
    let (ni, nj, nk) = (64, 3, 96);
    let nest = |var: u32, range: usize, body: Vec<Stmt>| Stmt::For {
        var: LoopVar(var),
        range,
        body,
    };
    let store = Stmt::Set {
        node: NodeId(1),
        index: vec![at(2), at(1), at(0)],
        value: *bin(Binop::Mul, c(2.0), get(0, vec![at(0), at(1), at(2)])),
    };
    let before = hand_built(
        vec![
            f32_node(0, "x", &[ni, nj, nk]),
            f32_node(1, "t", &[nk, nj, ni]),
        ],
        vec![nest(
            0,
            ni,
            vec![nest(1, nj, vec![nest(2, nk, vec![store])])],
        )],
    );
    let after = optimize(&before).unwrap();
    let shown = after.to_string();
    assert!(
        shown.contains("for l3 in 0..3 {\n  for l1 in 0..3 {\n    for l5 in 0..8 {")
            && shown.contains("n1[32*l3+l4, l1, 8*l5+l6] := (2 * n0[8*l5+l6, l1, 32*l3+l4])"),
        "{shown}"
    );
    let x: Vec<f64> = (0..ni * nj * nk).map(|v| v as f64).collect();
    let expected: Vec<f64> = (0..nk)
        .flat_map(|k| (0..nj).flat_map(move |j| (0..ni).map(move |i| (i, j, k))))
        .map(|(i, j, k)| 2.0 * x[(i * nj + j) * nk + k])
        .collect();
    let buffers = same_results(&before, &after, &[(0, x.clone())]);
    assert_eq!(buffers.values(NodeId(1)), expected);
    let compiled = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .compile(&after)
        .unwrap();
    let mut native = Buffers::for_routine(&after).unwrap();
    native.set_values(NodeId(0), &x).unwrap();
    compiled
        .run(&mut native, &std::collections::HashMap::new())
        .unwrap();
    assert_eq!(native.values(NodeId(1)), expected);
}

#[test]
fn exponentials_read_at_two_sites_are_stored_once_where_cheap_operations_are_inlined() {
    // Softmax over 4 cells: e = exp(x), s = Σ e, y = e / s. The sum and the division both read
    // e: inlined, every exponential would be computed twice.
    let softmax = |op: Unop| {
        vec![
            unary(true, Binop::Arg2, 1, op, 0, pointwise(&[4], 1)),
            unary(
                true,
                Binop::Add,
                2,
                Unop::Identity,
                1,
                projections(
                    &[4],
                    (&[1], vec![rcannl_ir::AxisIndex::Fixed(0)]),
                    vec![(&[4], vec![it(0)])],
                ),
            ),
            binary(
                true,
                Binop::Arg2,
                3,
                Binop::Div,
                (1, 2),
                projections(
                    &[4],
                    (&[4], vec![it(0)]),
                    vec![
                        (&[4], vec![it(0)]),
                        (&[1], vec![rcannl_ir::AxisIndex::Fixed(0)]),
                    ],
                ),
            ),
        ]
    };
    let nodes = || vec![node(0, &[4]), node(1, &[4]), node(2, &[1]), node(3, &[4])];
    let x = vec![0.5, -1.0, 2.0, 0.25];
    let stored = optimized_agrees(softmax(Unop::Exp), nodes(), &[(0, x.clone())]);
    assert_ne!(mode(&stored, 1), MemoryMode::Virtual);
    let exps = stored
        .body
        .iter()
        .map(ToString::to_string)
        .collect::<String>();
    assert_eq!(exps.matches("exp(").count(), 1, "{exps}");
    // A negation is cheaper to compute twice than to store and load.
    let inlined = optimized_agrees(softmax(Unop::Neg), nodes(), &[(0, x)]);
    assert_eq!(mode(&inlined, 1), MemoryMode::Virtual);
}

#[test]
fn a_zero_fill_is_dropped_where_the_first_contribution_writes_every_cell() {
    // As a backward pass has it: t1 := 0; t1 += −t0; t2 = t0 + t0 (between, not touching t1);
    // t1 += exp(t0).
    let zero = |node: u32| Assignment::Fetch {
        node: NodeId(node),
        op: FetchOp::Constant(0.0),
    };
    let gradient = |between: (u32, u32)| {
        vec![
            zero(1),
            unary(false, Binop::Add, 1, Unop::Neg, 0, pointwise(&[2, 3], 1)),
            binary(
                true,
                Binop::Arg2,
                2,
                Binop::Add,
                between,
                pointwise(&[2, 3], 2),
            ),
            unary(false, Binop::Add, 1, Unop::Exp, 0, pointwise(&[2, 3], 1)),
        ]
    };
    let nodes = || vec![node(0, &[2, 3]), node(1, &[2, 3]), node(2, &[2, 3])];
    let fills = |r: &Routine| {
        r.body
            .iter()
            .filter(|s| matches!(s, Stmt::Fill { .. }))
            .count()
    };
    let before = lowered(gradient((0, 0)), nodes());
    assert_eq!(fills(&before), 1, "{before}");
    let absorbed = fills::absorb_fills(&before);
    assert_eq!(fills(&absorbed), 0, "{absorbed}");
    let text = absorbed.to_string();
    assert!(text.contains(":= (0 + neg(n0["), "{text}");
    assert!(
        text.contains(":= (n1[l"),
        "the second contribution still adds: {text}"
    );
    let inputs = [(0, small_values(6, 0.3))];
    same_results(&before, &absorbed, &inputs);
    optimized_agrees(gradient((0, 0)), nodes(), &inputs);

    // Kept: a fill read before the first write, a node with margins (the fill writes them too),
    // a reduction (left to local accumulators), and a value no constant reproduces.
    let mut read_first = lowered(gradient((1, 1)), nodes());
    read_first.body.swap(1, 2);
    assert_eq!(fills::absorb_fills(&read_first), read_first);
    let one_contribution = |nodes: Vec<TensorNode>, projections: Projections| {
        lowered(
            vec![
                zero(1),
                unary(false, Binop::Add, 1, Unop::Neg, 0, projections),
            ],
            nodes,
        )
    };
    let with_margins = one_contribution(
        vec![node(0, &[2, 3]), padded(node(1, &[2, 3]), (1, 0))],
        pointwise(&[2, 3], 1),
    );
    assert_eq!(fills::absorb_fills(&with_margins), with_margins);
    let reduction = one_contribution(
        vec![node(0, &[2, 3]), node(1, &[2])],
        projections(
            &[2, 3],
            (&[2], vec![it(0)]),
            vec![(&[2, 3], vec![it(0), it(1)])],
        ),
    );
    assert_eq!(fills(&reduction), 1, "{reduction}");
    assert_eq!(fills::absorb_fills(&reduction), reduction);
    let half = |n: TensorNode| TensorNode {
        precision: Precision::F16,
        ..n
    };
    let filled_with = |value: f64| {
        let mut routine = one_contribution(
            vec![half(node(0, &[2, 3])), half(node(1, &[2, 3]))],
            pointwise(&[2, 3], 1),
        );
        routine.body[0] = Stmt::Fill {
            node: NodeId(1),
            value,
        };
        routine
    };
    let not_a_number = filled_with(f64::NAN);
    // (NaN is not equal to itself: the routines are compared as printed.)
    assert_eq!(
        fills::absorb_fills(&not_a_number).to_string(),
        not_a_number.to_string()
    );
    // 0.1 is stored as the f16 nearest it, which the constant then is.
    let tenth = filled_with(0.1);
    let absorbed = fills::absorb_fills(&tenth);
    assert!(
        absorbed.to_string().contains("(0.0999755859375 + neg("),
        "{absorbed}"
    );
    same_results(&tenth, &absorbed, &[(0, small_values(6, 0.3))]);
}

/// `n1 := xs[s]` (a row of `n0`, 4 × 3, chosen by the static index `s`), then `n2 := n1 · 2`,
/// with `between` run after the copy.
fn sliced_then_doubled(between: Vec<Stmt>) -> Routine {
    let s = rcannl_ir::Symbol(0);
    let row = |var: u32| {
        vec![
            Index {
                terms: vec![(1, Var::Static(s))].into(),
                offset: 0,
            },
            at(var),
        ]
    };
    let mut body = vec![Stmt::For {
        var: LoopVar(0),
        range: 3,
        body: vec![Stmt::Set {
            node: NodeId(1),
            index: vec![at(0)],
            value: *un(Unop::Identity, Box::new(Scalar::Get(NodeId(0), row(0)))),
        }],
    }];
    body.extend(between);
    body.push(Stmt::For {
        var: LoopVar(1),
        range: 3,
        body: vec![Stmt::Set {
            node: NodeId(2),
            index: vec![at(1)],
            value: *bin(Binop::Mul, get(1, vec![at(1)]), c(2.0)),
        }],
    });
    let mut routine = hand_built(
        vec![
            f32_node(0, "xs", &[4, 3]),
            f32_node(1, "x", &[3]),
            f32_node(2, "y", &[3]).with_mode(MemoryMode::Materialized),
        ],
        body,
    );
    routine.statics.insert(s, 4);
    routine
}

#[test]
fn a_slice_is_read_where_it_lies_unless_its_source_changes_or_it_is_kept() {
    let forwarded = slices::forward_slices(&sliced_then_doubled(vec![]));
    shows(
        &forwarded,
        "\
routine r(s0 < 4):
  n0 'xs': f32 [4, 3]
  n1 'x': f32 [3] virtual
  n2 'y': f32 [3] materialized
for l1 in 0..3 {
  n2[l1] := (n0[s0, l1] * 2)
}
",
    );
    let xs: Vec<f64> = (0..12).map(f64::from).collect();
    for s in 0..4 {
        let statics = std::collections::HashMap::from([(rcannl_ir::Symbol(0), s)]);
        let run = |routine: &Routine| {
            let mut buffers = Buffers::for_routine(routine).unwrap();
            buffers.set_values(NodeId(0), &xs).unwrap();
            rcannl_backends::interpreter::run_routine(routine, &mut buffers, &statics).unwrap();
            buffers.values(NodeId(2))
        };
        let expected: Vec<f64> = (0..3).map(|i| 2.0 * xs[3 * s as usize + i]).collect();
        assert_eq!(run(&forwarded), expected);
        assert_eq!(run(&sliced_then_doubled(vec![])), expected);
    }

    // The source written between the copy and its reader: the copy holds the old cells.
    let rewritten = sliced_then_doubled(vec![Stmt::Fill {
        node: NodeId(0),
        value: 0.0,
    }]);
    assert_eq!(slices::forward_slices(&rewritten), rewritten);
    // A slice whose mode was chosen (kept by the routine, or by its user) stays a buffer.
    let mut kept = sliced_then_doubled(vec![]);
    kept.nodes.get_mut(&NodeId(1)).unwrap().memory_mode = Some(MemoryMode::Materialized);
    assert_eq!(slices::forward_slices(&kept), kept);
    // A slice read before the copy holds what an earlier run left.
    let mut early = sliced_then_doubled(vec![]);
    let reader = early.body.pop().unwrap();
    early.body.insert(0, reader);
    assert_eq!(slices::forward_slices(&early), early);
}

/// A deep stack optimized in chunks computes what it computes lowered, bit for bit: each layer
/// `h = x * w`, `y = tanh(h) + x` (the next layer's `x`), then, layer by layer backwards, `g =
/// h * g' + y`: each `h` is cheap enough to be virtual, so the backward nests, hundreds of
/// statements after the layer's forward (in other chunks), compute it again from `x` and `w`.
#[test]
fn a_deep_stack_read_again_far_below_computes_as_lowered() {
    const LAYERS: u32 = 200;
    let dims = [3, 4];
    let cells = 12;
    // Per layer: w, h, y; then each layer's backward value g.
    let (w, h, y) = (|l: u32| 1 + 3 * l, |l: u32| 2 + 3 * l, |l: u32| 3 + 3 * l);
    let x = |l: u32| if l == 0 { 0 } else { y(l - 1) };
    let g = |l: u32| 1 + 3 * LAYERS + l;
    let mut nodes = vec![f32_node(0, "x", &dims)];
    let mut assignments = Vec::new();
    let mut inputs = vec![(0, small_values(cells, 0.2))];
    for l in 0..LAYERS {
        nodes.push(f32_node(w(l), &format!("w{l}"), &dims));
        nodes.push(f32_node(h(l), &format!("h{l}"), &dims));
        nodes.push(f32_node(y(l), &format!("y{l}"), &dims));
        inputs.push((w(l), small_values(cells, 0.01 * f64::from(l % 7 + 1))));
        assignments.push(binary(
            true,
            Binop::Arg2,
            h(l),
            Binop::Mul,
            (x(l), w(l)),
            pointwise(&dims, 2),
        ));
        assignments.push(unary(
            true,
            Binop::Arg2,
            9_000 + l,
            Unop::Tanh,
            h(l),
            pointwise(&dims, 1),
        ));
        nodes.push(f32_node(9_000 + l, &format!("t{l}"), &dims));
        assignments.push(binary(
            true,
            Binop::Arg2,
            y(l),
            Binop::Add,
            (9_000 + l, x(l)),
            pointwise(&dims, 2),
        ));
    }
    for l in (0..LAYERS).rev() {
        nodes.push(f32_node(g(l), &format!("g{l}"), &dims));
        let below = if l + 1 == LAYERS { y(l) } else { g(l + 1) };
        nodes.push(f32_node(12_000 + l, &format!("p{l}"), &dims));
        assignments.push(binary(
            true,
            Binop::Arg2,
            12_000 + l,
            Binop::Mul,
            (h(l), below),
            pointwise(&dims, 2),
        ));
        assignments.push(binary(
            true,
            Binop::Arg2,
            g(l),
            Binop::Add,
            (12_000 + l, y(l)),
            pointwise(&dims, 2),
        ));
    }
    let before = lowered(assignments, nodes);
    // Well past the size from which the optimizer works chunk by chunk.
    assert!(
        before.body.len() >= 1_000,
        "{} statements",
        before.body.len()
    );
    let after = optimize(&before).unwrap();
    assert_eq!(mode(&after, h(0)), MemoryMode::Virtual);
    assert!(!writes(&after, h(0)));
    same_results(&before, &after, &inputs);
}
