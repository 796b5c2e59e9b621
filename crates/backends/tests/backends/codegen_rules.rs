//! The rules the C generator follows so that results do not depend on the compiler or the
//! target, checked on the kernels that broke them: ReLU gradients whose gate selected a read
//! (gcc 12 vectorized the selected read for AVX2 with masked loads under the wrong mask), run
//! for every x86-64 level this CPU has, with exact comparison against the interpreter; and the
//! generated source itself, which must hold no conditional construct.

use std::collections::HashMap;

use crate::common::cached_compiler;
use rcannl_backends::Buffers;
use rcannl_backends::cc::{Compiler, cpu_levels};
use rcannl_backends::interpreter::run_routine;
use rcannl_ir::{
    Binop, Index, LocalId, LoopVar, NodeId, Precision, Routine, Scalar, Stmt, TensorNode, Ternop,
    Unop, Value,
};

fn at(var: u32) -> Index {
    Index::var(LoopVar(var), 0)
}

fn get(node: u32, index: Vec<Index>) -> Box<Scalar> {
    Box::new(Scalar::Get(NodeId(node), index))
}

/// `body` inside loops of the given ranges, `l0` outermost.
fn nest(ranges: &[usize], body: Vec<Stmt>) -> Vec<Stmt> {
    ranges
        .iter()
        .enumerate()
        .rev()
        .fold(body, |body, (var, &range)| {
            vec![Stmt::For {
                var: LoopVar(var as u32),
                range,
                body,
            }]
        })
}

fn routine(nodes: Vec<TensorNode>, body: Vec<Stmt>) -> Routine {
    Routine {
        name: "rule".to_owned(),
        nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
        statics: Default::default(),
        body,
    }
}

/// The backward kernel of `relu` on a 2×3 input: `g[i,j] += x[i,j] > 0 ? up[i,j] : 0`.
fn relu_backward() -> Routine {
    let index = || vec![at(0), at(1)];
    let value = Scalar::Binop(
        Binop::Add,
        get(1, index()),
        Box::new(Scalar::Binop(
            Binop::ReluGate,
            get(0, index()),
            get(3, index()),
        )),
    );
    routine(
        vec![
            TensorNode::new(0, "x", Precision::F64, &[2, 3]),
            TensorNode::new(1, "x.grad", Precision::F64, &[2, 3]),
            TensorNode::new(3, "y.grad", Precision::F64, &[2, 3]),
        ],
        nest(
            &[2, 3],
            vec![Stmt::Set {
                node: NodeId(1),
                index: index(),
                value,
            }],
        ),
    )
}

/// The transformer block's failing kernel: a dense layer's bias added again in the backward
/// pass to gate the gradient, `v = h[a,b,c] + bias[c]; g[a,b,c] += v > 0 ? up[a,b,c] : 0`,
/// the bias in f32.
fn biased_relu_backward() -> Routine {
    let index = || vec![at(0), at(1), at(2)];
    let sum = LocalId(0);
    let gated = Scalar::Binop(
        Binop::Add,
        get(2, index()),
        Box::new(Scalar::Binop(
            Binop::ReluGate,
            Box::new(Scalar::Local(sum)),
            get(3, index()),
        )),
    );
    routine(
        vec![
            TensorNode::new(0, "h", Precision::F64, &[2, 3, 8]),
            TensorNode::new(1, "bias", Precision::F32, &[8]),
            TensorNode::new(2, "h.grad", Precision::F64, &[2, 3, 8]),
            TensorNode::new(3, "up", Precision::F64, &[2, 3, 8]),
        ],
        nest(
            &[2, 3, 8],
            vec![
                Stmt::Local {
                    id: sum,
                    precision: Precision::F64,
                    value: Scalar::Binop(Binop::Add, get(0, index()), get(1, vec![at(2)])),
                },
                Stmt::Set {
                    node: NodeId(2),
                    index: index(),
                    value: gated,
                },
            ],
        ),
    )
}

/// Whether two cells are the same value: floats bit for bit, any NaN matching any NaN.
fn same(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (a, b) => a == b,
    }
}

/// Runs `routine` compiled with each target's flags and on the interpreter, from the inputs
/// `fill` gives for each trial; the outputs must be equal bit for bit.
fn agree_on_every_level(
    routine: &Routine,
    trials: usize,
    fill: impl Fn(usize, &mut Buffers),
) -> Vec<String> {
    let compiler = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"));
    let mut levels: Vec<String> = cpu_levels().iter().map(|l| format!("-march={l}")).collect();
    levels.push("-march=native".to_owned());
    for flags in &levels {
        let compiled = compiler
            .clone()
            .with_flags(&["-O3", flags.as_str()])
            .compile(routine)
            .unwrap_or_else(|e| panic!("{flags}: {e}"));
        for trial in 0..trials {
            let mut interpreted = Buffers::for_routine(routine).unwrap();
            fill(trial, &mut interpreted);
            let mut native = interpreted.clone();
            run_routine(routine, &mut interpreted, &HashMap::new()).unwrap();
            compiled.run(&mut native, &HashMap::new()).unwrap();
            for id in routine.nodes.keys() {
                let (want, got) = (interpreted.cells(*id), native.cells(*id));
                let inputs = interpreted.cells(NodeId(0));
                if let Some(cell) = (0..want.len()).find(|&c| !same(want[c], got[c])) {
                    panic!(
                        "{flags}, trial {trial}: {id} differs first at cell {cell} (n0 there \
                         {:?}): interpreter {:?}, C {:?}\n{}",
                        inputs.get(cell),
                        want[cell],
                        got[cell],
                        compiled.source
                    );
                }
            }
        }
    }
    levels
}

#[test]
fn relu_gradients_are_right_on_every_level() {
    let levels = agree_on_every_level(&relu_backward(), 64, |signs, buffers| {
        let x: Vec<f64> = (0..6)
            .map(|i| if signs >> i & 1 == 1 { 1.5 } else { -1.5 })
            .collect();
        buffers.set_values(NodeId(0), &x).unwrap();
        buffers.set_values(NodeId(3), &[1.0; 6]).unwrap();
    });
    if !levels.iter().any(|l| l == "-march=x86-64-v3") {
        println!("relu gradients: x86-64-v3 not checked: this CPU lacks AVX2 or FMA");
    }
}

#[test]
fn biased_relu_gradients_are_right_on_every_level() {
    agree_on_every_level(&biased_relu_backward(), 200, |trial, buffers| {
        let mut state = (trial as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) + 1;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % 64) as f64 / 32.0 - 1.0
        };
        let h: Vec<f64> = (0..48).map(|_| next()).collect();
        let bias: Vec<f64> = (0..8).map(|_| next() + 1.0 / 64.0).collect();
        let up: Vec<f64> = (0..48).map(|i| i as f64 + 1.0).collect();
        buffers.set_values(NodeId(0), &h).unwrap();
        buffers.set_values(NodeId(1), &bias).unwrap();
        buffers.set_values(NodeId(3), &up).unwrap();
    });
}

/// Every operation whose meaning is a choice, in every compute type.
fn choices(precision: Precision) -> Routine {
    let read = |node: u32| get(node, vec![at(0)]);
    let values = [
        Scalar::Unop(Unop::Relu, read(0)),
        Scalar::Unop(Unop::Sat01, read(0)),
        Scalar::Binop(Binop::ReluGate, read(0), read(1)),
        Scalar::Binop(Binop::Sat01Gate, read(0), read(1)),
        Scalar::Binop(Binop::Max, read(0), read(1)),
        Scalar::Binop(Binop::Min, read(0), read(1)),
        Scalar::Binop(Binop::Or, read(0), read(1)),
        Scalar::Binop(Binop::And, read(0), read(1)),
        Scalar::Binop(Binop::Mod, read(0), read(1)),
        Scalar::Binop(Binop::Div, read(0), read(1)),
        Scalar::Ternop(Ternop::Where, read(0), read(1), read(2)),
    ];
    let n = values.len() as u32;
    let mut nodes: Vec<TensorNode> = (0..3)
        .map(|i| TensorNode::new(i, &format!("in{i}"), precision, &[16]))
        .collect();
    let mut body = Vec::new();
    for (k, value) in values.into_iter().enumerate() {
        let id = 3 + k as u32;
        nodes.push(TensorNode::new(id, &format!("out{k}"), precision, &[16]));
        body.push(Stmt::Set {
            node: NodeId(id),
            index: vec![at(0)],
            value,
        });
    }
    assert_eq!(nodes.len() as u32, 3 + n);
    routine(nodes, nest(&[16], body))
}

#[test]
fn generated_kernels_hold_no_conditional_construct() {
    for precision in [
        Precision::F32,
        Precision::F64,
        Precision::F16,
        Precision::I32,
        Precision::I64,
    ] {
        let source = rcannl_backends::cc::codegen::generate(&choices(precision))
            .unwrap()
            .source;
        let kernels = &source[source.find("\nstatic inline void rc_k").expect("a kernel")..];
        for construct in ["?", "&&", "||", "if (", "if("] {
            assert!(
                !kernels.contains(construct),
                "{precision}: `{construct}` in\n{kernels}"
            );
        }
        agree_on_every_level(&choices(precision), 8, |trial, buffers| {
            for node in 0..3 {
                let values: Vec<f64> = (0..16)
                    .map(|i| {
                        let v = ((i * 7 + node * 5 + trial * 3) % 9) as f64 / 2.0 - 2.0;
                        // The divisor (node 1) is never 0: an integer division by 0 is an
                        // error in the interpreter.
                        if node == 1 && v.abs() < 1.0 {
                            v + 3.0
                        } else {
                            v
                        }
                    })
                    .collect();
                buffers.set_values(NodeId(node as u32), &values).unwrap();
            }
        });
    }
}

#[test]
fn flags_for_instructions_this_cpu_lacks_are_refused() {
    if !cfg!(target_arch = "x86_64") || cpu_levels().contains(&"x86-64-v4") {
        println!("refused flags: not checked: this CPU runs every x86-64 level");
        return;
    }
    let error = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_flags(&["-O3", "-march=x86-64-v4"])
        .compile(&relu_backward())
        .expect_err("AVX-512 code on a CPU without it");
    assert!(
        error.message.contains("illegal instruction") && error.message.contains("avx512f"),
        "{error}"
    );
}

/// Values where choices are easy to get wrong: NaN, both zeros, infinities, the edges of [0, 1].
const AWKWARD: [f64; 8] = [
    f64::NAN,
    -0.0,
    0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1.0,
    0.5,
    -2.0,
];

#[test]
fn choices_treat_nan_zeros_and_infinities_as_the_interpreter_does() {
    // Found by rcannl-fuzz (seed 1013424 at x86-64-v3): sat01 of NaN was 0 in C, NaN in the
    // interpreter.
    for precision in [Precision::F32, Precision::F64] {
        agree_on_every_level(&choices(precision), 8, |trial, buffers| {
            for node in 0..3 {
                let values: Vec<f64> = (0..16)
                    .map(|i| AWKWARD[(i + node * 3 + trial) % AWKWARD.len()])
                    .collect();
                buffers.set_values(NodeId(node as u32), &values).unwrap();
            }
        });
    }
}

/// Each unary transcendental function of node 0, then node 0 to the power of node 1, as `read`
/// reads a node.
fn transcendental_values(read: impl Fn(u32) -> Box<Scalar>) -> Vec<Scalar> {
    let mut values: Vec<Scalar> = [
        Unop::Exp,
        Unop::Exp2,
        Unop::Log,
        Unop::Log2,
        Unop::Tanh,
        Unop::Sin,
        Unop::Cos,
    ]
    .into_iter()
    .map(|op| Scalar::Unop(op, read(0)))
    .collect();
    values.push(Scalar::Binop(Binop::Pow, read(0), read(1)));
    values
}

/// Every transcendental function of `precision`'s values (node 0), and powers with a variable
/// exponent (node 1) and with each constant exponent the generator treats apart, one output each.
fn transcendentals(precision: Precision, cells: usize) -> Routine {
    let read = |node: u32| get(node, vec![at(0)]);
    let mut values = transcendental_values(read);
    for exponent in [2.0, 3.0, 1.0, -1.0, 0.5, -2.5, 0.0] {
        values.push(Scalar::Binop(
            Binop::Pow,
            read(0),
            Box::new(Scalar::Const(exponent)),
        ));
    }
    let mut nodes: Vec<TensorNode> = (0..2)
        .map(|i| TensorNode::new(i, &format!("in{i}"), precision, &[cells]))
        .collect();
    let mut body = Vec::new();
    for (k, value) in values.into_iter().enumerate() {
        let id = 2 + k as u32;
        nodes.push(TensorNode::new(id, &format!("out{k}"), precision, &[cells]));
        body.push(Stmt::Set {
            node: NodeId(id),
            index: vec![at(0)],
            value,
        });
    }
    routine(nodes, nest(&[cells], body))
}

/// Arguments for the transcendental functions: the special values, then `f32` bit patterns
/// spread over the whole range (every exponent, both signs, subnormals, NaNs) that move with
/// `trial`.
fn spread_arguments(trial: usize, cells: usize) -> Vec<f64> {
    let specials = [
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        0.5,
        2.0,
        88.72284,
        -103.97208,
        9.010913,
        f64::from(f32::MAX),
        f64::from(f32::MIN_POSITIVE),
        1e-45,
        16_367_173.0 * 2f64.powi(72),
    ];
    let patterns = (0..cells - specials.len()).map(|i| {
        let bits = (i as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add((trial as u32).wrapping_mul(0x9E37_79B9));
        f64::from(f32::from_bits(bits))
    });
    specials.into_iter().chain(patterns).collect()
}

/// Exponents for the variable powers: special values, small integers and halves, and spread bit
/// patterns.
fn spread_exponents(trial: usize, cells: usize) -> Vec<f64> {
    (0..cells)
        .map(|i| match (i + trial) % 4 {
            0 => [
                f64::NAN,
                0.0,
                -0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                2.0,
                3.0,
                -1.0,
                1.0,
            ][i / 4 % 9],
            1 => ((i * 7 + trial) % 41) as f64 / 2.0 - 10.0,
            2 => ((i * 13 + trial) % 1001) as f64 / 37.0 - 13.5,
            _ => f64::from(f32::from_bits(
                (i as u32).wrapping_mul(0x85EB_CA6B) ^ trial as u32,
            )),
        })
        .collect()
}

#[test]
fn transcendental_functions_agree_with_the_interpreter_bit_for_bit_on_every_level() {
    const CELLS: usize = 4096;
    for precision in [Precision::F32, Precision::F16, Precision::Bf16] {
        agree_on_every_level(&transcendentals(precision, CELLS), 4, |trial, buffers| {
            buffers
                .set_values(NodeId(0), &spread_arguments(trial, CELLS))
                .unwrap();
            buffers
                .set_values(NodeId(1), &spread_exponents(trial, CELLS))
                .unwrap();
        });
    }
}

#[test]
fn double_powers_agree_with_the_interpreter_bit_for_bit_on_every_level() {
    const CELLS: usize = 512;
    let read = |node: u32| get(node, vec![at(0)]);
    let nodes = (0..4)
        .map(|i| TensorNode::new(i, &format!("t{i}"), Precision::F64, &[CELLS]))
        .collect();
    let set = |node: u32, value: Scalar| Stmt::Set {
        node: NodeId(node),
        index: vec![at(0)],
        value,
    };
    let body = vec![
        set(2, Scalar::Binop(Binop::Pow, read(0), read(1))),
        set(
            3,
            Scalar::Binop(Binop::Pow, read(0), Box::new(Scalar::Const(2.0))),
        ),
    ];
    agree_on_every_level(
        &routine(nodes, nest(&[CELLS], body)),
        2,
        |trial, buffers| {
            let bases: Vec<f64> = (0..CELLS)
                .map(|i| ((i * 31 + trial) % 997) as f64 / 7.0 - 70.0)
                .collect();
            buffers.set_values(NodeId(0), &bases).unwrap();
            buffers
                .set_values(NodeId(1), &spread_exponents(trial, CELLS))
                .unwrap();
        },
    );
}

/// One kernel per transcendental function of f32 cells (and pow with a variable and a constant
/// exponent), each a loop of its own: the `k`th over `cells + k` cells, so that no two merge.
fn one_kernel_per_function(cells: usize) -> Routine {
    let read = |node: u32| get(node, vec![at(0)]);
    let mut values = transcendental_values(read);
    values.push(Scalar::Binop(
        Binop::Pow,
        read(0),
        Box::new(Scalar::Const(2.0)),
    ));
    let inputs = cells + values.len();
    let mut nodes: Vec<TensorNode> = (0..2)
        .map(|i| TensorNode::new(i, &format!("in{i}"), Precision::F32, &[inputs]))
        .collect();
    let mut body = Vec::new();
    for (k, value) in values.into_iter().enumerate() {
        let id = 2 + k as u32;
        nodes.push(TensorNode::new(
            id,
            &format!("out{k}"),
            Precision::F32,
            &[cells + k],
        ));
        body.extend(nest(
            &[cells + k],
            vec![Stmt::Set {
                node: NodeId(id),
                index: vec![at(0)],
                value,
            }],
        ));
    }
    routine(nodes, body)
}

/// Vectorization is speed, not correctness: the suites above hold the results. This checks that
/// each compiler here vectorizes a loop calling each function, on the baseline and with AVX2.
#[test]
fn loops_calling_transcendental_functions_vectorize() {
    let routine = one_kernel_per_function(1 << 16);
    let source = rcannl_backends::cc::codegen::generate(&routine)
        .unwrap()
        .source;
    // The line of each kernel's loop, as the compilers report it (counted from 1).
    let loops: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, line)| line.trim_start().starts_with("for (int64_t l0 = begin"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(loops.len(), 9, "{source}");
    let dir = std::env::temp_dir().join(format!("rcannl-vectorize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kernels.c");
    std::fs::write(&file, &source).unwrap();
    // Each compiler's report of a vectorized loop: gcc's optimization notes, clang's remarks.
    let compilers = [
        ("gcc", "-fopt-info-vec-optimized", "loop vectorized"),
        ("clang", "-Rpass=loop-vectorize", "vectorized loop"),
    ];
    let mut checked = Vec::new();
    for ((compiler, report, vectorized), level) in compilers
        .into_iter()
        .flat_map(|c| ["x86-64", "x86-64-v3"].map(|level| (c, level)))
    {
        let output = std::process::Command::new(compiler)
            .args(["-O3", &format!("-march={level}"), "-fno-math-errno"])
            .args(["-ffp-contract=off", "-fopenmp-simd", report, "-c", "-o"])
            .arg(dir.join("kernels.o"))
            .arg(&file)
            .output();
        let Ok(output) = output else {
            println!("vectorization: {compiler} not checked: not installed");
            continue;
        };
        let notes = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() && notes.contains(level) {
            println!("vectorization: {compiler} not checked at {level}: it does not know it");
            continue;
        }
        assert!(output.status.success(), "{compiler} fails:\n{notes}");
        for line in &loops {
            let at_line = format!("kernels.c:{line}:");
            assert!(
                notes
                    .lines()
                    .any(|note| note.contains(&at_line) && note.contains(vectorized)),
                "{compiler} -march={level}: the loop at line {line} is not vectorized:\n{notes}\n\
                 {source}"
            );
        }
        checked.push(format!("{compiler} {level}"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    println!("vectorization checked with {checked:?}");
}

/// Maxima (or minima) of the `length` cells of each of 6 rows of node 0 kept in a local, into
/// node 1: `v = op(v, x[r, i])` (or `op(x[r, i], v)` where `term_first`) from `start`, stored
/// per row; a loop the C generator keeps in vector lanes when it has 16 terms or more.
fn extrema(
    precision: Precision,
    op: Binop,
    term_first: bool,
    length: usize,
    start: f64,
) -> Routine {
    let v = LocalId(0);
    let (term, local) = (get(0, vec![at(0), at(1)]), Box::new(Scalar::Local(v)));
    let (a, b) = if term_first {
        (term, local)
    } else {
        (local, term)
    };
    let row = vec![
        Stmt::Local {
            id: v,
            precision,
            value: Scalar::Const(start),
        },
        Stmt::For {
            var: LoopVar(1),
            range: length,
            body: vec![Stmt::SetLocal {
                id: v,
                value: Scalar::Binop(op, a, b),
            }],
        },
        Stmt::Set {
            node: NodeId(1),
            index: vec![at(0)],
            value: Scalar::Local(v),
        },
    ];
    routine(
        vec![
            TensorNode::new(0, "x", precision, &[6, length]),
            TensorNode::new(1, "extrema", precision, &[6]),
        ],
        nest(&[6], row),
    )
}

#[test]
fn maxima_and_minima_kept_in_lanes_are_the_interpreters_to_the_bit() {
    for precision in [Precision::F32, Precision::F64] {
        for (op, term_first, length, start) in [
            (Binop::Max, false, 64, f64::NEG_INFINITY),
            (Binop::Max, true, 37, -0.0),
            (Binop::Min, false, 16, f64::INFINITY),
            (Binop::Min, true, 50, 0.0),
        ] {
            let routine = extrema(precision, op, term_first, length, start);
            let source = rcannl_backends::cc::codegen::generate(&routine)
                .unwrap()
                .source;
            assert!(source.contains("v0_lanes[16]"), "{source}");
            // Rows where ties between zeros of both signs, NaNs, infinities or ordinary values
            // decide the result, in positions that move with the trial.
            agree_on_every_level(&routine, 12, |trial, buffers| {
                let x: Vec<f64> = (0..6 * length)
                    .map(|cell| {
                        let (row, i) = (cell / length, cell % length);
                        let spread = ((i * 37 + trial * 11) % 101) as f64 / 8.0 - 6.0;
                        match row {
                            // Only zeros of both signs.
                            0 => [-0.0, 0.0][(i * 7 + trial) % 3 % 2],
                            // Zeros of both signs above negatives (maxima) or below positives.
                            1 => match (i + trial) % 3 {
                                0 => -0.0,
                                1 => 0.0,
                                _ if op == Binop::Max => -spread.abs() - 1.0,
                                _ => spread.abs() + 1.0,
                            },
                            // A NaN somewhere.
                            2 if i == (trial * 5) % length => f64::NAN,
                            // Infinities among ordinary values.
                            3 if i % 9 == trial % 9 => [f64::INFINITY, f64::NEG_INFINITY][i % 2],
                            // A first zero in a later lane than a second zero of the other sign.
                            4 if i == 1 + trial % 8 => 0.0,
                            4 if i == 16 => -0.0,
                            4 if op == Binop::Max => -spread.abs() - 1.0,
                            4 => spread.abs() + 1.0,
                            _ => spread,
                        }
                    })
                    .collect();
                buffers.set_values(NodeId(0), &x).unwrap();
            });
        }
    }
}

/// `n{to}[l] = tanh(n{from}[l] − n{from}[0]) * scale` over 64 cells (80 from node 6 on), with its
/// own loop variable and local. The read of the first cell, which the last layer's first
/// iteration writes, keeps the layers' loops from merging into one kernel.
fn scaled_tanh(from: u32, to: u32, scale: f64, var: u32, local: u32) -> Stmt {
    let l = LoopVar(var);
    let index = vec![Index::var(l, 0)];
    let centered = Scalar::Binop(
        Binop::Sub,
        get(from, index.clone()),
        get(from, vec![Index::constant(0)]),
    );
    Stmt::For {
        var: l,
        range: if from >= 6 { 80 } else { 64 },
        body: vec![
            Stmt::Local {
                id: LocalId(local),
                precision: Precision::F32,
                value: Scalar::Unop(Unop::Tanh, Box::new(centered)),
            },
            Stmt::Set {
                node: NodeId(to),
                index,
                value: Scalar::Binop(
                    Binop::Mul,
                    Box::new(Scalar::Local(LocalId(local))),
                    Box::new(Scalar::Const(scale)),
                ),
            },
        ],
    }
}

#[test]
fn kernels_differing_only_in_their_buffers_are_one_function() {
    // A chain of layers: three alike, one with another constant, one into a buffer of another
    // precision, one over a longer range (the range a kernel splits is the caller's: the same
    // function).
    let mut nodes: Vec<TensorNode> = (0..5)
        .map(|id| TensorNode::new(id, "h", Precision::F32, &[64]))
        .collect();
    nodes.push(TensorNode::new(5, "double", Precision::F64, &[64]));
    nodes.push(TensorNode::new(6, "wide", Precision::F32, &[80]));
    nodes.push(TensorNode::new(7, "wide", Precision::F32, &[80]));
    let body = vec![
        scaled_tanh(0, 1, 2.0, 10, 20),
        scaled_tanh(1, 2, 2.0, 11, 21),
        scaled_tanh(2, 3, 2.0, 12, 22),
        scaled_tanh(3, 4, 3.0, 13, 23),
        scaled_tanh(4, 5, 2.0, 14, 24),
        scaled_tanh(6, 7, 2.0, 15, 25),
    ];
    let layers = routine(nodes, body);
    let generated = rcannl_backends::cc::codegen::generate(&layers).unwrap();
    let calls: Vec<(String, Vec<usize>)> = generated
        .steps
        .iter()
        .map(|step| match step {
            rcannl_backends::cc::codegen::Step::Kernel(kernel) => {
                (kernel.name.clone(), kernel.arguments.clone())
            }
            other => panic!("a kernel: {other:?}"),
        })
        .collect();
    let expected = [
        ("rc_k0", vec![0, 1]),
        ("rc_k0", vec![1, 2]),
        ("rc_k0", vec![2, 3]),
        ("rc_k1", vec![3, 4]),
        ("rc_k2", vec![4, 5]),
        ("rc_k0", vec![6, 7]),
    ]
    .map(|(name, arguments)| (name.to_owned(), arguments));
    assert_eq!(calls, expected, "{}", generated.source);
    assert_eq!(generated.source.matches("\nvoid rc_k").count(), 3);
    // Each call reads and writes its own buffers: the interpreter's bits on every level.
    agree_on_every_level(&layers, 4, |trial, buffers| {
        let x: Vec<f64> = (0..64)
            .map(|i| f64::from(i + trial as i32) / 16.0 - 2.0)
            .collect();
        buffers.set_values(NodeId(0), &x).unwrap();
    });
}

/// `for r { local acc := init; for c { acc := acc ⊕ n{from}[r, c] }; n{to}[r] := acc }` over
/// `rows` × `cols`, with its own loop variables and local: a row's statistic.
fn row_statistic(from: u32, to: u32, op: Binop, init: f64, vars: (u32, u32), local: u32) -> Stmt {
    let (r, c) = vars;
    Stmt::For {
        var: LoopVar(r),
        range: SOFTMAX_ROWS,
        body: vec![
            Stmt::Local {
                id: LocalId(local),
                precision: Precision::F32,
                value: Scalar::Const(init),
            },
            Stmt::For {
                var: LoopVar(c),
                range: SOFTMAX_COLUMNS,
                body: vec![Stmt::SetLocal {
                    id: LocalId(local),
                    value: Scalar::Binop(
                        op,
                        Box::new(Scalar::Local(LocalId(local))),
                        get(from, vec![at(r), at(c)]),
                    ),
                }],
            },
            Stmt::Set {
                node: NodeId(to),
                index: vec![at(r)],
                value: Scalar::Local(LocalId(local)),
            },
        ],
    }
}

/// `n{to}[r, c] := n{cell}[r, c] ⊕ n{row}[r]` (then `exp` when asked) over `rows` × `cols`.
fn row_pointwise(cell: u32, row: u32, to: u32, op: Binop, exp: bool, vars: (u32, u32)) -> Stmt {
    let (r, c) = vars;
    let combined = Scalar::Binop(op, get(cell, vec![at(r), at(c)]), get(row, vec![at(r)]));
    let value = if exp {
        Scalar::Unop(Unop::Exp, Box::new(combined))
    } else {
        combined
    };
    nest_as(
        &[(r, SOFTMAX_ROWS), (c, SOFTMAX_COLUMNS)],
        Stmt::Set {
            node: NodeId(to),
            index: vec![at(r), at(c)],
            value,
        },
    )
}

/// `stmt` inside loops of the given variables and ranges, the first outermost.
fn nest_as(loops: &[(u32, usize)], stmt: Stmt) -> Stmt {
    loops
        .iter()
        .rev()
        .fold(stmt, |body, &(var, range)| Stmt::For {
            var: LoopVar(var),
            range,
            body: vec![body],
        })
}

const SOFTMAX_ROWS: usize = 24;
const SOFTMAX_COLUMNS: usize = 37;

#[test]
fn a_softmax_over_rows_is_one_kernel_split_across_threads() {
    // A softmax as the optimizer leaves it: the rows' maxima, the exponentials of the
    // differences, the rows' sums, the quotients, four loops over the rows. Each later loop
    // reads only its own row of what the earlier ones stored, so the C backend runs them as one
    // loop over the rows, which still splits across threads.
    let (rows, cols) = (SOFTMAX_ROWS, SOFTMAX_COLUMNS);
    let nodes = vec![
        TensorNode::new(0, "x", Precision::F32, &[rows, cols]),
        TensorNode::new(1, "max", Precision::F32, &[rows]),
        TensorNode::new(2, "exp", Precision::F32, &[rows, cols]),
        TensorNode::new(3, "sum", Precision::F32, &[rows]),
        TensorNode::new(4, "softmax", Precision::F32, &[rows, cols]),
    ];
    let body = vec![
        row_statistic(0, 1, Binop::Max, f64::NEG_INFINITY, (0, 1), 0),
        row_pointwise(0, 1, 2, Binop::Sub, true, (2, 3)),
        row_statistic(2, 3, Binop::Add, 0.0, (4, 5), 1),
        row_pointwise(2, 3, 4, Binop::Div, false, (6, 7)),
    ];
    let softmax = routine(nodes, body);
    let generated = rcannl_backends::cc::codegen::generate(&softmax).unwrap();
    let kernels: Vec<Option<usize>> = generated
        .steps
        .iter()
        .map(|step| match step {
            rcannl_backends::cc::codegen::Step::Kernel(kernel) => kernel.parallel,
            other => panic!("a kernel: {other:?}"),
        })
        .collect();
    assert_eq!(kernels, [Some(rows)], "{}", generated.source);
    // The interpreter's values (the C backend sums a row in lanes, the interpreter in order:
    // the sums, and the quotients by them, may differ in the last places), with maxima of
    // either sign and rows of equal values.
    let compiled = Compiler::find()
        .expect("a C compiler (cc or $CC)")
        .with_cache_dir(&std::env::temp_dir().join("rcannl-test-cache"))
        .compile(&softmax)
        .unwrap();
    for trial in 0..3 {
        let x: Vec<f64> = (0..rows * cols)
            .map(|i| match trial {
                0 => ((i * 7919) % 101) as f64 / 9.0 - 5.0,
                1 => -(((i * 31) % 17) as f64) - 1.0,
                _ => (i / cols) as f64,
            })
            .collect();
        let mut interpreted = Buffers::for_routine(&softmax).unwrap();
        interpreted.set_values(NodeId(0), &x).unwrap();
        let mut native = interpreted.clone();
        run_routine(&softmax, &mut interpreted, &HashMap::new()).unwrap();
        compiled.run(&mut native, &HashMap::new()).unwrap();
        for id in 1..=4 {
            let (want, got) = (interpreted.values(NodeId(id)), native.values(NodeId(id)));
            for (cell, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(
                    (w - g).abs() <= 1e-6 * w.abs().max(1.0),
                    "trial {trial}: n{id}[{cell}]: interpreter {w}, C {g}"
                );
            }
        }
        for (row, values) in interpreted.values(NodeId(4)).chunks(cols).enumerate() {
            let total: f64 = values.iter().sum();
            assert!((total - 1.0).abs() < 1e-5, "row {row} sums to {total}");
        }
    }
}

#[test]
fn margins_are_filled_slab_by_slab_and_the_interior_is_left_alone() {
    // Margins of every kind: on both sides of an axis, on none, on one side only; filled by
    // loops (a number) and by the C dialect's own slabs (a NaN, which no constant gives back).
    let mut padded = TensorNode::new(0, "padded", Precision::F32, &[3, 4, 5]);
    padded.padding = vec![(1, 2), (0, 0), (0, 1)];
    let interior = |[a, b, c]: [usize; 3]| (1..4).contains(&a) && b < 4 && c < 5;
    let agree = |got: &[f64], want: &[f64]| {
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
    };
    for value in [7.0, f64::NAN] {
        let routine = routine(
            vec![padded.clone()],
            vec![Stmt::FillMargins {
                node: NodeId(0),
                value,
            }],
        );
        let source = rcannl_backends::cc::codegen::generate(&routine)
            .unwrap()
            .source;
        let kernels = &source[source.find("\nstatic inline void rc_k").expect("a kernel")..];
        assert!(!kernels.contains("if ("), "a test per cell in\n{kernels}");
        let values: Vec<f64> = (0..60).map(|i| f64::from(i) - 30.5).collect();
        let dims = padded.buffer_dims();
        let mut expected = Vec::new();
        let mut next = values.iter();
        for a in 0..dims[0] {
            for b in 0..dims[1] {
                for c in 0..dims[2] {
                    expected.push(if interior([a, b, c]) {
                        *next.next().unwrap()
                    } else {
                        value
                    });
                }
            }
        }
        let compiled = cached_compiler().compile(&routine).unwrap();
        let mut native = Buffers::for_routine(&routine).unwrap();
        native.set_values(NodeId(0), &values).unwrap();
        let mut interpreted = native.clone();
        compiled.run(&mut native, &HashMap::new()).unwrap();
        run_routine(&routine, &mut interpreted, &HashMap::new()).unwrap();
        let got = native.buffer(NodeId(0));
        assert!(agree(&got, &expected), "{got:?}\n{}", compiled.source);
        assert!(agree(&interpreted.buffer(NodeId(0)), &expected));
    }
}
