//! The differential suites: the random routines and random graphs of `rcannl-fuzz` must give
//! the interpreter's results on every compiled backend, at a budget sized for CI (the
//! `rcannl-fuzz` binary runs the same checks at any budget). On the C backend, for the compiler
//! and flags `$CC` and `$RCANNL_CFLAGS` choose (`.ci/matrix` runs this for every target and
//! compiler), in every precision; on a GPU, in the precisions the device holds: a seed that
//! draws f64, i64 or u64 (or f16 on a device without it) makes the same case in f32 or i32.
//!
//! Cases the fuzzers found, reduced to one operation each over a handful of cells, pin what
//! failed, on every backend: NaN through choices and conversions, and floats beyond 32 bits into
//! integers.

use std::collections::HashMap;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Buffers};
use rcannl_fuzz::{Comparison, Precisions, Tolerance, graphs, routines};
use rcannl_ir::{
    Assignment, AxisIndex, Binop, Factor, NodeId, Precision, Projections, Rhs, Routine, Symbol,
    TensorNode, Ternop, Unop, Value,
};

use crate::target::{OnDevice, Target};

/// How far a GPU's float results may be from the interpreter's: relative, absolute below a
/// magnitude of 1. Integers and random bits must be equal.
///
/// f32: the interpreter computes each expression in f64 and rounds it once, on the store; the
/// GPU rounds every operation to f32 (6e-8 each), and its transcendentals are not correctly
/// rounded: WGSL allows `exp` and `exp2` 3 + 2·|x| units in the last place, `log` and `log2` an
/// absolute 2⁻²¹ near 1, `tanh` and `pow` what their definitions through `exp` and `log2`
/// inherit, and `sin` and `cos` an absolute 2⁻¹¹ (4.9e-4) on [−π, π]. 1e-3 holds the sine's
/// bound with room for an operation or two after it; a wrong index, operation or reduction moves
/// these O(1) values much further. Sums run in the interpreter's order, matrix products included
/// (each runs as the nest it stands for).
///
/// f16: cells are computed in f32 and rounded on the store, where the interpreter rounds its f64
/// value: one rounding of f16 (4.9e-4) may differ per store, and a chain of stores compounds it,
/// as on the C backend.
///
/// f64: the C backend's tolerance. Arithmetic rounds as the interpreter's does; the prelude's
/// transcendental functions are within a few units in the last place of the correctly rounded
/// values the interpreter's library gives.
fn gpu_comparison(gpu: &OnDevice) -> Comparison {
    let features = gpu.0.device().features();
    Comparison {
        precisions: Precisions::Gpu {
            f16: features.f16,
            int64: features.int64,
            f64: features.f64,
        },
        tolerance: Tolerance {
            half: 1e-2,
            single: 1e-3,
            double: Tolerance::HOST.double,
        },
    }
}

/// The C compiler of a C case, caching in a folder of its own for the tests.
fn cached(target: &Target) -> Compiler {
    target
        .compiler()
        .expect("a C or GPU case: the interpreter is the oracle")
        .clone()
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
}

fn random_routines_agree(target: &Target) {
    let seeds: Vec<u64> = (0..300).collect();
    let outcome = match target.gpu() {
        Some(gpu) => routines::check_on(gpu, &seeds, &gpu_comparison(gpu)),
        // The C backend compiles a hundred routines into one library at a time.
        None => {
            let compiler = cached(target);
            seeds
                .chunks(100)
                .try_for_each(|batch| routines::check(&compiler, batch))
        }
    };
    if let Err(mismatch) = outcome {
        panic!("{mismatch}");
    }
}
conformance!(random_routines_agree: cc, gpu);

/// The C backend's quick tier computes the optimized build's bits, for the compiler and target
/// `$CC` and `$RCANNL_CFLAGS` choose (`.ci/matrix` runs every one): the optimization level
/// changes no result, so that a routine that swaps its kernels mid-training stays on course.
fn quick_and_optimized_builds_agree_bit_for_bit(target: &Target) {
    let compiler = cached(target);
    let seeds: Vec<u64> = (0..300).collect();
    for batch in seeds.chunks(100) {
        match routines::check_tiers(&compiler, batch) {
            Some(Ok(())) => {}
            Some(Err(mismatch)) => panic!("{mismatch}"),
            None => {
                println!("the C flags do not optimize: there is no quick tier to compare");
                return;
            }
        }
    }
}
conformance!(quick_and_optimized_builds_agree_bit_for_bit: cc);

/// Long sums of products, whose result depends on the order of the terms, and maxima, in both
/// float precisions over lengths around the lanes' widths: the quick build's bits are the
/// optimized build's.
fn quick_and_optimized_builds_sum_in_the_same_order(target: &Target) {
    let compiler = cached(target).with_tiers(false);
    let Some(quick) = compiler.quick_tier() else {
        println!("the C flags do not optimize: there is no quick tier to compare");
        return;
    };
    for precision in [Precision::F32, Precision::F64] {
        for n in [3, 8, 13, 16, 31, 100, 1037] {
            // Terms over seven orders of magnitude, of both signs: reordering them changes the
            // rounding of nearly every sum.
            let x: Vec<f64> = (0..n)
                .map(|i| (i as f64 * 0.7).sin() * 10f64.powi(i as i32 % 7))
                .collect();
            let y: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.3).cos()).collect();
            for accum in [Binop::Add, Binop::Max] {
                let lowered = one_operation(
                    precision,
                    accum,
                    Rhs::Binop(Binop::Mul, NodeId(0), NodeId(1)),
                    2,
                    n,
                    true,
                );
                let routine = rcannl_ir::optimize::optimize(&lowered).unwrap();
                let (want, source) = run_case(&compiler, &routine, &[&x, &y]);
                let (got, _) = run_case(&quick, &routine, &[&x, &y]);
                let bits = |cells: &[Value]| match cells {
                    [Value::Float(v)] => v.to_bits(),
                    other => panic!("one float cell, not {other:?}"),
                };
                assert_eq!(
                    bits(&want),
                    bits(&got),
                    "{precision:?} {accum:?} over {n}: optimized {want:?}, quick {got:?}\n{source}"
                );
            }
        }
    }
}
conformance!(quick_and_optimized_builds_sum_in_the_same_order: cc);

fn random_graphs_agree(target: &Target) {
    let check = |seed| match target.gpu() {
        Some(gpu) => graphs::check_on(Box::new(gpu.clone()), seed, &gpu_comparison(gpu)),
        None => graphs::check(&cached(target), seed),
    };
    for seed in 0..40 {
        if let Err(mismatch) = check(seed) {
            panic!("{mismatch}");
        }
    }
}
conformance!(random_graphs_agree: cc, gpu);

/// One assignment over a loop of `n` positions: `accum` of `rhs` over `inputs` operands (the
/// nodes `n0`, `n1`, … of `n` cells, read at the loop's position) into the next node, a cell per
/// position, or one cell pre-filled with the accumulator's neutral element when `reduce`. Every
/// node in `precision`.
fn one_operation(
    precision: Precision,
    accum: Binop,
    rhs: Rhs,
    inputs: usize,
    n: usize,
    reduce: bool,
) -> Routine {
    let position = AxisIndex::Iterator(Symbol(0));
    let result = NodeId(inputs as u32);
    let mut nodes: Vec<TensorNode> = (0..inputs)
        .map(|i| TensorNode::new(i as u32, &format!("x{i}"), precision, &[n]))
        .collect();
    let lhs_dims = if reduce { vec![] } else { vec![n] };
    nodes.push(TensorNode::new(result.0, "y", precision, &lhs_dims));
    let assignment = Assignment::Accum {
        initialize_neutral: reduce,
        accum,
        lhs: result,
        rhs,
        projections: Projections {
            product_space: vec![Factor::single(Symbol(0), n)],
            lhs_padding: vec![(0, 0); lhs_dims.len()],
            rhs_padding: vec![vec![(0, 0)]; inputs],
            lhs_index: if reduce {
                vec![]
            } else {
                vec![position.clone()]
            },
            lhs_dims,
            rhs_dims: vec![vec![n]; inputs],
            rhs_index: vec![vec![position]; inputs],
            label: "reduced case".to_owned(),
        },
    };
    Routine::lower("case", &assignment, nodes).expect("a well-formed assignment")
}

/// The result's cells (the last node's) after `routine` runs on `backend` with its inputs holding
/// `inputs`, and the code the backend generated.
fn run_case(backend: &dyn Backend, routine: &Routine, inputs: &[&[f64]]) -> (Vec<Value>, String) {
    let mut buffers = Buffers::for_routine(routine).unwrap();
    for (i, values) in inputs.iter().enumerate() {
        buffers.set_values(NodeId(i as u32), values).unwrap();
    }
    let executable = backend.compile(routine).unwrap();
    executable.run(&mut buffers, &HashMap::new()).unwrap();
    let cells = buffers.read_cells(NodeId(inputs.len() as u32)).unwrap();
    (cells, executable.source().unwrap_or("").to_owned())
}

/// Runs `routine` on `target`: it must give `expected` (NaN for NaN).
fn assert_gives(target: &Target, routine: &Routine, inputs: &[&[f64]], expected: &[Value]) {
    let same = |got: &[Value]| {
        got.len() == expected.len()
            && got.iter().zip(expected).all(|(g, e)| match (g, e) {
                (Value::Float(g), Value::Float(e)) => g == e || (g.is_nan() && e.is_nan()),
                (g, e) => g == e,
            })
    };
    let (got, source) = run_case(target.backend().as_ref(), routine, inputs);
    assert!(
        same(&got),
        "{} gives {got:?}, not {expected:?}\n{routine}\n{source}",
        target.name()
    );
}

fn a_nan_wins_a_maximum_or_minimum_reduction_wherever_it_comes(target: &Target) {
    let x = [1.0, f64::NAN, 2.0];
    for accum in [Binop::Max, Binop::Min] {
        let routine = one_operation(
            Precision::F32,
            accum,
            Rhs::Unop(Unop::Identity, NodeId(0)),
            1,
            3,
            true,
        );
        assert_gives(target, &routine, &[&x], &[Value::Float(f64::NAN)]);
    }
}
conformance!(a_nan_wins_a_maximum_or_minimum_reduction_wherever_it_comes);

fn nan_passes_through_relu_sat01_and_their_gates(target: &Target) {
    let x = [f64::NAN, -1.0, 0.5, 2.0];
    let g = [3.0, 3.0, 3.0, 3.0];
    let nan = Value::Float(f64::NAN);
    let cases = [
        (
            Rhs::Unop(Unop::Relu, NodeId(0)),
            [nan, Value::Float(0.0), Value::Float(0.5), Value::Float(2.0)],
        ),
        (
            Rhs::Unop(Unop::Sat01, NodeId(0)),
            [nan, Value::Float(0.0), Value::Float(0.5), Value::Float(1.0)],
        ),
        (
            Rhs::Binop(Binop::ReluGate, NodeId(0), NodeId(1)),
            [nan, Value::Float(0.0), Value::Float(3.0), Value::Float(3.0)],
        ),
        (
            Rhs::Binop(Binop::Sat01Gate, NodeId(0), NodeId(1)),
            [nan, Value::Float(0.0), Value::Float(3.0), Value::Float(0.0)],
        ),
    ];
    for (rhs, expected) in cases {
        let inputs = rhs.operands().len();
        let routine = one_operation(Precision::F32, Binop::Arg2, rhs, inputs, 4, false);
        assert_gives(target, &routine, &[&x[..], &g[..]][..inputs], &expected);
    }
}
conformance!(nan_passes_through_relu_sat01_and_their_gates);

fn where_takes_its_first_branch_where_the_condition_is_nan(target: &Target) {
    // NaN is not 0, so it is true, as in C and numpy.
    let condition = [f64::NAN, 0.0, 1.0];
    let (then, otherwise) = ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]);
    let rhs = Rhs::Ternop(Ternop::Where, NodeId(0), NodeId(1), NodeId(2));
    let routine = one_operation(Precision::F32, Binop::Arg2, rhs, 3, 3, false);
    let expected = [1.0, 2.0, 1.0].map(Value::Float);
    assert_gives(
        target,
        &routine,
        &[&condition, &then, &otherwise],
        &expected,
    );
}
conformance!(where_takes_its_first_branch_where_the_condition_is_nan);

fn floats_become_integers_through_a_saturating_64_bit_conversion(target: &Target) {
    // An i32 computation converts a float result into 64 bits, saturating (NaN is 0), and the
    // store keeps the low 32 bits: log(−1) is NaN, 0; log(0) is −∞, i64::MIN, whose low bits are
    // 0; 1/0 is +∞, i64::MAX, whose low bits are all ones, −1.
    let x = [-1.0, 0.0, 2.0];
    let log = one_operation(
        Precision::I32,
        Binop::Arg2,
        Rhs::Unop(Unop::Log, NodeId(0)),
        1,
        3,
        false,
    );
    assert_gives(target, &log, &[&x], &[0, 0, 0].map(Value::Int));
    let recip = one_operation(
        Precision::I32,
        Binop::Arg2,
        Rhs::Unop(Unop::Recip, NodeId(0)),
        1,
        3,
        false,
    );
    assert_gives(target, &recip, &[&x], &[-1, -1, 0].map(Value::Int));
}
conformance!(floats_become_integers_through_a_saturating_64_bit_conversion);
