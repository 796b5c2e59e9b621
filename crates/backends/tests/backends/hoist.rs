//! Loop-invariant hoisting on hand-built routines: what moves out of which loop (and what must
//! stay), and both versions run by the interpreter on the same inputs with the same bits.

use crate::common::run_routine_on;
use rcannl_backends::cc::codegen::{Step, generate};
use rcannl_backends::interpreter::Buffers;
use rcannl_ir::optimize::hoist::{hoist_invariants, hoist_invariants_into_nests};
use rcannl_ir::{
    Binop, Index, LocalId, LoopVar, NodeId, Precision, Routine, Scalar, Stmt, TensorNode, Ternop,
    Unop,
};

fn at(var: u32) -> Index {
    Index::var(LoopVar(var), 0)
}

fn zero() -> Index {
    Index::constant(0)
}

fn get(node: u32, index: Vec<Index>) -> Box<Scalar> {
    Box::new(Scalar::Get(NodeId(node), index))
}

fn local(id: u32) -> Box<Scalar> {
    Box::new(Scalar::Local(LocalId(id)))
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

fn for_(var: u32, range: usize, body: Vec<Stmt>) -> Stmt {
    Stmt::For {
        var: LoopVar(var),
        range,
        body,
    }
}

fn set(node: u32, index: Vec<Index>, value: Scalar) -> Stmt {
    Stmt::Set {
        node: NodeId(node),
        index,
        value,
    }
}

fn routine(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
    Routine {
        name: "r".to_owned(),
        nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
        statics: Default::default(),
        body,
    }
}

fn body_text(routine: &Routine) -> String {
    routine.body.iter().map(ToString::to_string).collect()
}

/// A hoisting pass.
type Pass = fn(Routine) -> Routine;

/// Hoists `before` with `pass`, checks the printed body of the result, runs both on `inputs` and
/// checks that every node holds the same bits; returns the hoisted run's buffers.
fn hoists_to(pass: Pass, before: &Routine, expected: &str, inputs: &[(u32, Vec<f64>)]) -> Buffers {
    let after = pass(before.clone());
    assert_eq!(body_text(&after), expected);
    assert_eq!(pass(after.clone()), after, "hoisting again moves nothing");
    let expected_run = run_routine_on(before, inputs);
    let got = run_routine_on(&after, inputs);
    let bits = |values: Vec<f64>| values.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    for node in before.nodes.values() {
        assert_eq!(
            bits(got.values(node.id)),
            bits(expected_run.values(node.id)),
            "{} '{}'",
            node.id,
            node.label
        );
    }
    got
}

fn values(n: usize, scale: f64, shift: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7 + 3) % 11) as f64 * scale + shift)
        .collect()
}

/// Adam's bias-corrected step on a `rows × cols` parameter in `precision`: `p := p − 0.01·m /
/// (1 − 0.9^t)`, with `t` a one-cell step counter.
fn bias_corrected_step(precision: Precision, rows: usize, cols: usize) -> Routine {
    let nodes = vec![
        TensorNode::new(0, "p", precision, &[rows, cols]),
        TensorNode::new(1, "m", precision, &[rows, cols]),
        TensorNode::new(2, "t", precision, &[1]),
    ];
    let correction = bin(
        Binop::Sub,
        c(1.0),
        bin(Binop::Pow, c(0.9), get(2, vec![zero()])),
    );
    let step = bin(
        Binop::Div,
        bin(Binop::Mul, c(0.01), get(1, vec![at(0), at(1)])),
        correction,
    );
    routine(
        nodes,
        vec![for_(
            0,
            rows,
            vec![for_(
                1,
                cols,
                vec![set(
                    0,
                    vec![at(0), at(1)],
                    *bin(Binop::Sub, get(0, vec![at(0), at(1)]), step),
                )],
            )],
        )],
    )
}

#[test]
fn a_power_of_a_step_counter_leaves_the_inner_loop() {
    let inputs = [
        (0, values(12, 0.37, -1.1)),
        (1, values(12, 0.013, -0.05)),
        (2, vec![3.0]),
    ];
    // Invariant in both loops: computed once, before the top-level loop (in each thread's
    // part of it on the C backend).
    let expected = "\
local v0: f32 := (1 - (0.9 ** n2[0]))
for l0 in 0..4 {
  for l1 in 0..3 {
    n0[l0, l1] := (n0[l0, l1] - ((0.01 * n1[l0, l1]) / v0))
  }
}
";
    let buffers = hoists_to(
        hoist_invariants,
        &bias_corrected_step(Precision::F32, 4, 3),
        expected,
        &inputs,
    );
    // Computed independently in f32, as C computes the statement.
    let correction = 1.0f32 - 0.9f32.powf(3.0);
    let want: Vec<f64> = inputs[0]
        .1
        .iter()
        .zip(&inputs[1].1)
        .map(|(&p, &m)| f64::from(p as f32 - (0.01f32 * m as f32) / correction))
        .collect();
    let got = buffers.values(NodeId(0));
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn a_half_precision_use_gets_a_local_in_its_compute_precision() {
    let inputs = [
        (0, values(6, 0.37, -1.1)),
        (1, values(6, 0.013, -0.05)),
        (2, vec![7.0]),
    ];
    // The local is f32, not f16: the statement computes in f32 and rounds only on the store.
    let expected = "\
local v0: f32 := (1 - (0.9 ** n2[0]))
for l0 in 0..2 {
  for l1 in 0..3 {
    n0[l0, l1] := (n0[l0, l1] - ((0.01 * n1[l0, l1]) / v0))
  }
}
";
    hoists_to(
        hoist_invariants,
        &bias_corrected_step(Precision::F16, 2, 3),
        expected,
        &inputs,
    );
    let expected = expected.replace("v0: f32", "v0: f64");
    hoists_to(
        hoist_invariants,
        &bias_corrected_step(Precision::F64, 2, 3),
        &expected,
        &inputs,
    );
}

#[test]
fn a_top_level_loop_keeps_its_split_across_threads() {
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[5]),
            TensorNode::new(1, "t", Precision::F32, &[1]),
        ],
        vec![for_(
            0,
            5,
            vec![set(0, vec![at(0)], *un(Unop::Exp, get(1, vec![zero()])))],
        )],
    );
    let expected = "\
local v0: f32 := exp(n1[0])
for l0 in 0..5 {
  n0[l0] := v0
}
";
    let after = hoists_to(hoist_invariants, &before, expected, &[(1, vec![0.5])]);
    assert_eq!(after.values(NodeId(0)), vec![f64::from(0.5f32.exp()); 5]);
    // The local is the preamble of the loop's kernel, which each thread runs before its part
    // of the range: the kernel is still split.
    let generated = generate(&hoist_invariants(before.clone())).unwrap();
    let [Step::Kernel(kernel)] = generated.steps.as_slice() else {
        panic!("one kernel: {:?}", generated.steps)
    };
    assert_eq!(kernel.parallel, Some(5));
    let kernel_source = &generated.source[generated.source.find("rc_k0").unwrap()..];
    let local = kernel_source.find("v0 = ").expect("the local is computed");
    let split_loop = kernel_source.find("= begin;").expect("the split loop");
    assert!(local < split_loop, "{kernel_source}");
}

#[test]
fn a_local_read_after_the_loop_keeps_the_run_serial() {
    // The loop's kernel cannot hold the local when a later statement reads it too.
    let mut before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[5]),
            TensorNode::new(1, "t", Precision::F32, &[1]),
            TensorNode::new(2, "s", Precision::F32, &[1]),
        ],
        vec![],
    );
    before.body = vec![
        Stmt::Local {
            id: LocalId(0),
            precision: Precision::F32,
            value: *un(Unop::Exp, get(1, vec![zero()])),
        },
        for_(0, 5, vec![set(0, vec![at(0)], *local(0))]),
        set(2, vec![zero()], *local(0)),
    ];
    let generated = generate(&before).unwrap();
    assert!(
        matches!(generated.steps.as_slice(), [Step::Kernel(k)] if k.parallel.is_none()),
        "{:?}",
        generated.steps
    );
}

#[test]
fn the_pass_for_every_backend_keeps_chains_of_loops_nested_alone() {
    // The GPU backend flattens such a chain into invocations; a local between its loops would
    // leave the inner ones serial. exp(n2[l0]) is invariant in l1 only.
    let nodes = || {
        vec![
            TensorNode::new(0, "p", Precision::F32, &[4, 3]),
            TensorNode::new(2, "t", Precision::F32, &[4]),
        ]
    };
    let update = |body_of_l0: Vec<Stmt>| routine(nodes(), vec![for_(0, 4, body_of_l0)]);
    let inner = for_(
        1,
        3,
        vec![set(
            0,
            vec![at(0), at(1)],
            *bin(
                Binop::Sub,
                get(0, vec![at(0), at(1)]),
                un(Unop::Exp, get(2, vec![at(0)])),
            ),
        )],
    );
    let chain = update(vec![inner.clone()]);
    assert_eq!(hoist_invariants(chain.clone()), chain);
    let inputs = [(0, values(12, 0.37, -1.1)), (2, values(4, 0.2, -0.3))];
    let hoisted = "\
for l0 in 0..4 {
  local v0: f32 := exp(n2[l0])
  for l1 in 0..3 {
    n0[l0, l1] := (n0[l0, l1] - v0)
  }
}
";
    // The C backend splits only the top-level loop: it hoists into the chain.
    hoists_to(hoist_invariants_into_nests, &chain, hoisted, &inputs);
    // Below the chain (here, a loop beside a store in its parent's body) hoisting goes on.
    let beside = update(vec![set(2, vec![at(0)], *get(2, vec![at(0)])), inner]);
    let expected = "\
for l0 in 0..4 {
  n2[l0] := n2[l0]
  local v0: f32 := exp(n2[l0])
  for l1 in 0..3 {
    n0[l0, l1] := (n0[l0, l1] - v0)
  }
}
";
    hoists_to(hoist_invariants, &beside, expected, &inputs);
}

#[test]
fn a_read_of_a_node_the_loop_writes_stays() {
    // r[l0, 0] is written by the inner loop itself; a[l0] is not.
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[2, 3]),
            TensorNode::new(1, "a", Precision::F32, &[2]),
        ],
        vec![for_(
            0,
            2,
            vec![for_(
                1,
                3,
                vec![set(
                    0,
                    vec![at(0), at(1)],
                    *bin(
                        Binop::Add,
                        un(Unop::Exp, get(0, vec![at(0), zero()])),
                        un(Unop::Exp, get(1, vec![at(0)])),
                    ),
                )],
            )],
        )],
    );
    let expected = "\
for l0 in 0..2 {
  local v0: f32 := exp(n1[l0])
  for l1 in 0..3 {
    n0[l0, l1] := (exp(n0[l0, 0]) + v0)
  }
}
";
    hoists_to(
        hoist_invariants_into_nests,
        &before,
        expected,
        &[(0, values(6, 0.1, 0.2)), (1, values(2, 0.3, -0.4))],
    );
}

#[test]
fn a_local_set_in_the_loop_is_not_read_before_it() {
    // v0 is set inside the inner loop (a running sum): exp(v0 * 2) changes each iteration.
    // v1 is declared before the inner loop and never set in it: exp(v1) does not.
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[2, 3]),
            TensorNode::new(1, "a", Precision::F32, &[2, 3]),
        ],
        vec![for_(
            0,
            2,
            vec![
                Stmt::Local {
                    id: LocalId(0),
                    precision: Precision::F32,
                    value: Scalar::Const(0.0),
                },
                Stmt::Local {
                    id: LocalId(1),
                    precision: Precision::F32,
                    value: *bin(Binop::Mul, get(1, vec![at(0), zero()]), c(3.0)),
                },
                for_(
                    1,
                    3,
                    vec![
                        Stmt::SetLocal {
                            id: LocalId(0),
                            value: *bin(Binop::Add, local(0), get(1, vec![at(0), at(1)])),
                        },
                        set(
                            0,
                            vec![at(0), at(1)],
                            *bin(
                                Binop::Add,
                                un(Unop::Exp, bin(Binop::Mul, local(0), c(2.0))),
                                un(Unop::Exp, local(1)),
                            ),
                        ),
                    ],
                ),
            ],
        )],
    );
    let expected = "\
for l0 in 0..2 {
  local v0: f32 := 0
  local v1: f32 := (n1[l0, 0] * 3)
  local v2: f32 := exp(v1)
  for l1 in 0..3 {
    v0 := (v0 + n1[l0, l1])
    n0[l0, l1] := (exp((v0 * 2)) + v2)
  }
}
";
    // The inner loop shares its parent's body: both passes hoist out of it.
    for pass in [hoist_invariants as Pass, hoist_invariants_into_nests] {
        hoists_to(pass, &before, expected, &[(1, values(6, 0.1, -0.3))]);
    }
}

#[test]
fn each_operation_leaves_as_many_loops_as_it_is_invariant_in() {
    // exp(a[l0]) is invariant in l1 and l2, sqrt(b[l1]) in l2 only; the top-level l0 keeps both.
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[2, 3, 4]),
            TensorNode::new(1, "a", Precision::F32, &[2]),
            TensorNode::new(2, "b", Precision::F32, &[3]),
            TensorNode::new(3, "x", Precision::F32, &[2, 3, 4]),
        ],
        vec![for_(
            0,
            2,
            vec![for_(
                1,
                3,
                vec![for_(
                    2,
                    4,
                    vec![set(
                        0,
                        vec![at(0), at(1), at(2)],
                        *bin(
                            Binop::Add,
                            bin(
                                Binop::Mul,
                                get(3, vec![at(0), at(1), at(2)]),
                                un(Unop::Exp, get(1, vec![at(0)])),
                            ),
                            un(Unop::Sqrt, get(2, vec![at(1)])),
                        ),
                    )],
                )],
            )],
        )],
    );
    let expected = "\
for l0 in 0..2 {
  local v0: f32 := exp(n1[l0])
  for l1 in 0..3 {
    local v1: f32 := sqrt(n2[l1])
    for l2 in 0..4 {
      n0[l0, l1, l2] := ((n3[l0, l1, l2] * v0) + v1)
    }
  }
}
";
    hoists_to(
        hoist_invariants_into_nests,
        &before,
        expected,
        &[
            (1, values(2, 0.7, -0.5)),
            (2, values(3, 0.9, 0.1)),
            (3, values(24, 0.2, -1.0)),
        ],
    );
}

#[test]
fn integer_statements_stay() {
    // Their locals would be i64, which the GPU lacks; a division would fail on a zero besides.
    let invariant = || {
        bin(
            Binop::Add,
            bin(Binop::Div, get(1, vec![at(0)]), get(2, vec![at(0)])),
            bin(Binop::Mul, get(1, vec![at(0)]), get(2, vec![at(0)])),
        )
    };
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::I32, &[2, 3]),
            TensorNode::new(1, "x", Precision::I32, &[2]),
            TensorNode::new(2, "y", Precision::I32, &[2]),
        ],
        vec![for_(
            0,
            2,
            vec![for_(
                1,
                3,
                vec![set(
                    0,
                    vec![at(0), at(1)],
                    *bin(Binop::Add, invariant(), Box::new(Scalar::Embed(at(1)))),
                )],
            )],
        )],
    );
    assert_eq!(hoist_invariants_into_nests(before.clone()), before);
    assert_eq!(hoist_invariants(before.clone()), before);
}

#[test]
fn branches_short_loops_and_empty_loops_keep_their_work() {
    // where(c[l0] < 0.5, exp(a[l0]), b[l0, l1]) + sqrt(c[l0]): the sqrt moves; the branch's exp
    // does not, nor the condition (computed in f64, which an f32 routine's device may lack). A
    // loop of one iteration is not hoisted out of, and nothing moves out of a loop of none.
    let before = routine(
        vec![
            TensorNode::new(0, "r", Precision::F32, &[2, 3]),
            TensorNode::new(1, "a", Precision::F32, &[2]),
            TensorNode::new(2, "b", Precision::F32, &[2, 3]),
            TensorNode::new(3, "c", Precision::F32, &[2]),
        ],
        vec![for_(
            0,
            2,
            vec![
                for_(
                    1,
                    3,
                    vec![set(
                        0,
                        vec![at(0), at(1)],
                        *bin(
                            Binop::Add,
                            Box::new(Scalar::Ternop(
                                Ternop::Where,
                                bin(Binop::Lt, get(3, vec![at(0)]), c(0.5)),
                                un(Unop::Exp, get(1, vec![at(0)])),
                                get(2, vec![at(0), at(1)]),
                            )),
                            un(Unop::Sqrt, get(3, vec![at(0)])),
                        ),
                    )],
                ),
                for_(
                    2,
                    1,
                    vec![set(
                        0,
                        vec![at(0), at(2)],
                        *un(Unop::Exp, get(1, vec![at(0)])),
                    )],
                ),
                for_(
                    3,
                    2,
                    vec![for_(
                        4,
                        0,
                        vec![set(
                            0,
                            vec![at(0), at(3)],
                            *un(Unop::Exp, get(1, vec![at(0)])),
                        )],
                    )],
                ),
            ],
        )],
    );
    let expected = "\
for l0 in 0..2 {
  local v0: f32 := sqrt(n3[l0])
  for l1 in 0..3 {
    n0[l0, l1] := (where((n3[l0] < 0.5), exp(n1[l0]), n2[l0, l1]) + v0)
  }
  for l2 in 0..1 {
    n0[l0, l2] := exp(n1[l0])
  }
  for l3 in 0..2 {
    for l4 in 0..0 {
      n0[l0, l3] := exp(n1[l0])
    }
  }
}
";
    for pass in [hoist_invariants as Pass, hoist_invariants_into_nests] {
        hoists_to(
            pass,
            &before,
            expected,
            &[
                (1, values(2, 0.7, -0.5)),
                (2, values(6, 0.9, 0.1)),
                (3, vec![0.2, 0.8]),
            ],
        );
    }
}
