//! Differential tests of the C backend against the interpreter on random programs: random product
//! spaces, broadcasts, reductions, fixed indices and strided (affine) reads, every accumulator,
//! in f32, f64 and i32, several assignments per routine (later ones reading earlier results).

mod common;

use std::collections::HashMap;

use proptest::prelude::*;
use rcannl_backends::Buffers;
use rcannl_backends::cc::Compiler;
use rcannl_backends::interpreter::run_routine;
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, Kind, NodeId, Precision, Projections, Rhs, Routine,
    Symbol, TensorNode, Ternop, Unop, Value,
};

/// How one axis of a read tensor is indexed, before sizes are known.
#[derive(Debug, Clone)]
enum AxisPlan {
    /// The symbol with this (wrapped) number.
    Iterate(usize),
    /// `2·s + t`: a strided window.
    Window(usize, usize),
    /// A fixed position on an axis of this size.
    Fixed(usize, usize),
}

#[derive(Debug, Clone)]
struct AssignmentPlan {
    ranges: Vec<usize>,
    /// Which product symbols the written tensor keeps (the others are reduced), and a leading
    /// fixed axis of size 2 when set.
    written: Vec<bool>,
    fixed_written: bool,
    operands: Vec<Vec<AxisPlan>>,
    /// Read an earlier result instead of a fresh input, when its dims match.
    chain: bool,
    op: usize,
    accum: usize,
    initialize_neutral: bool,
}

const UNOPS: [Unop; 8] = [
    Unop::Identity,
    Unop::Neg,
    Unop::Relu,
    Unop::Exp,
    Unop::Tanh,
    Unop::Sat01,
    Unop::Not,
    Unop::Trunc,
];
const BINOPS: [Binop; 9] = [
    Binop::Add,
    Binop::Sub,
    Binop::Mul,
    Binop::Max,
    Binop::Min,
    Binop::ReluGate,
    Binop::Lt,
    Binop::Eq,
    Binop::Mod,
];
const ACCUMS: [Binop; 5] = [Binop::Add, Binop::Max, Binop::Min, Binop::Arg2, Binop::Mul];

fn axis_plan() -> impl Strategy<Value = AxisPlan> {
    prop_oneof![
        4 => (0..3usize).prop_map(AxisPlan::Iterate),
        1 => (0..3usize, 0..3usize).prop_map(|(s, t)| AxisPlan::Window(s, t)),
        1 => (1..4usize, 0..3usize).prop_map(|(size, at)| AxisPlan::Fixed(size, at % size)),
    ]
}

fn assignment_plan() -> impl Strategy<Value = AssignmentPlan> {
    (
        prop::collection::vec(1..6usize, 1..4),
        prop::collection::vec(any::<bool>(), 3),
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(axis_plan(), 0..4), 3),
        any::<bool>(),
        0..(UNOPS.len() + BINOPS.len() + 2),
        0..ACCUMS.len(),
        any::<bool>(),
    )
        .prop_map(
            |(ranges, written, fixed_written, operands, chain, op, accum, initialize_neutral)| {
                AssignmentPlan {
                    ranges,
                    written,
                    fixed_written,
                    operands,
                    chain,
                    op,
                    accum,
                    initialize_neutral,
                }
            },
        )
}

/// Builds the routine a list of plans describes: returns it with its input nodes.
fn build(plans: &[AssignmentPlan], precision: Precision) -> (Routine, Vec<NodeId>) {
    let mut nodes: Vec<TensorNode> = Vec::new();
    let mut inputs = Vec::new();
    let mut results: Vec<(NodeId, Vec<usize>)> = Vec::new();
    let mut assignments = Vec::new();
    let new_node = |dims: &[usize], nodes: &mut Vec<TensorNode>| {
        let id = nodes.len() as u32;
        nodes.push(TensorNode::new(id, &format!("t{id}"), precision, dims));
        NodeId(id)
    };
    for plan in plans {
        let symbols = plan.ranges.len();
        let symbol = |k: usize| k % symbols;
        let product_space: Vec<Factor> = plan
            .ranges
            .iter()
            .enumerate()
            .map(|(s, &r)| Factor::single(Symbol(s as u32), r))
            .collect();
        let (arity, rhs_op) = if plan.op < UNOPS.len() {
            (1, Some(plan.op))
        } else if plan.op < UNOPS.len() + BINOPS.len() {
            (2, Some(plan.op - UNOPS.len()))
        } else {
            (3, None)
        };
        let mut rhs_dims = Vec::new();
        let mut rhs_index = Vec::new();
        let mut operands = Vec::new();
        for axes in plan.operands.iter().take(arity) {
            let mut dims = Vec::new();
            let mut index = Vec::new();
            for axis in axes {
                match *axis {
                    AxisPlan::Iterate(s) => {
                        dims.push(plan.ranges[symbol(s)]);
                        index.push(AxisIndex::Iterator(Symbol(symbol(s) as u32)));
                    }
                    AxisPlan::Window(s, t) => {
                        let (s, t) = (symbol(s), symbol(t));
                        let top = if s == t {
                            3 * (plan.ranges[s] - 1)
                        } else {
                            2 * (plan.ranges[s] - 1) + plan.ranges[t] - 1
                        };
                        dims.push(top + 1);
                        index.push(AxisIndex::affine(
                            [(2, Symbol(s as u32)), (1, Symbol(t as u32))],
                            0,
                        ));
                    }
                    AxisPlan::Fixed(size, at) => {
                        dims.push(size);
                        index.push(AxisIndex::Fixed(at as i64));
                    }
                }
            }
            let earlier = results
                .iter()
                .rev()
                .find(|(_, d)| *d == dims)
                .map(|(id, _)| *id);
            let id = match earlier {
                Some(id) if plan.chain => id,
                _ => {
                    let id = new_node(&dims, &mut nodes);
                    inputs.push(id);
                    id
                }
            };
            operands.push(id);
            rhs_dims.push(dims);
            rhs_index.push(index);
        }
        let mut lhs_dims = Vec::new();
        let mut lhs_index = Vec::new();
        if plan.fixed_written {
            lhs_dims.push(2);
            lhs_index.push(AxisIndex::Fixed(1));
        }
        for s in 0..symbols {
            if plan.written[s] {
                lhs_dims.push(plan.ranges[s]);
                lhs_index.push(AxisIndex::Iterator(Symbol(s as u32)));
            }
        }
        let lhs = new_node(&lhs_dims, &mut nodes);
        let rhs = match (arity, rhs_op) {
            (1, Some(op)) => Rhs::Unop(UNOPS[op], operands[0]),
            // An integer remainder by zero is an error in the interpreter (and 0 in C).
            (2, Some(op)) if BINOPS[op] == Binop::Mod && precision.kind() == Kind::Int => {
                Rhs::Binop(Binop::Add, operands[0], operands[1])
            }
            (2, Some(op)) => Rhs::Binop(BINOPS[op], operands[0], operands[1]),
            _ => Rhs::Ternop(Ternop::Where, operands[0], operands[1], operands[2]),
        };
        assignments.push(Assignment::Accum {
            initialize_neutral: plan.initialize_neutral,
            accum: ACCUMS[plan.accum],
            lhs,
            rhs,
            projections: Projections {
                product_space,
                lhs_padding: vec![(0, 0); lhs_dims.len()],
                rhs_padding: rhs_dims.iter().map(|d| vec![(0, 0); d.len()]).collect(),
                lhs_dims: lhs_dims.clone(),
                lhs_index,
                rhs_dims,
                rhs_index,
                label: "random".to_owned(),
            },
        });
        results.push((lhs, lhs_dims));
    }
    let routine = Routine::lower("random", &Assignment::Seq(assignments), nodes).unwrap();
    (routine, inputs)
}

/// Whether two results agree: integers exactly, floats to within 1e-5 of their size (inputs are
/// multiples of 1/4, so sums and products are exact and only the transcendental operations and
/// f32's narrower intermediate results can differ).
fn agree(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan())
                || x == y
                || (x - y).abs() <= 1e-5 * x.abs().max(y.abs()).max(1.0)
        }
        (a, b) => a == b,
    }
}

fn compiler() -> Compiler {
    let dir = std::env::temp_dir().join("rcannl-test-cache");
    Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&dir)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(7),
        ..ProptestConfig::default()
    })]

    #[test]
    fn compiled_routines_give_the_interpreters_results(
        plans in prop::collection::vec(assignment_plan(), 1..6),
        precision in prop_oneof![Just(Precision::F32), Just(Precision::F64), Just(Precision::I32)],
        seed in any::<u64>(),
    ) {
        let (routine, inputs) = build(&plans, precision);
        let compiled = compiler().compile(&routine).unwrap();
        let mut interpreted = Buffers::for_routine(&routine);
        let mut state = seed;
        for id in &inputs {
            let n = routine.nodes[id].len();
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    ((state >> 33) % 17) as f64 / 4.0 - 2.0
                })
                .collect();
            interpreted.set_values(*id, &values).unwrap();
        }
        let mut native = interpreted.clone();
        run_routine(&routine, &mut interpreted, &HashMap::new()).unwrap();
        compiled.run(&mut native, &HashMap::new()).unwrap();
        for id in routine.nodes.keys() {
            let (want, got) = (interpreted.cells(*id), native.cells(*id));
            for (cell, (w, g)) in want.iter().zip(&got).enumerate() {
                prop_assert!(agree(*w, *g), "{id} cell {cell}: interpreter {w:?}, C {g:?}\n{routine}");
            }
        }
    }
}
