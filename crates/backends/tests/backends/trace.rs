//! Tracing stores (`rcannl_backends::trace`): the C backend's lines are the interpreter's, line
//! for line, on a routine with a fill, a matrix product, a parallel loop and padded margins, on
//! values of many digits in f32, f64 and f16, and on scatters, random bits and 128-bit words;
//! the lines name the labels and hold the values the buffers end with; untraced C has no trace
//! call and is cached apart; a backend that cannot trace says so, naming the setting.

use std::collections::HashMap;

use crate::common::*;
use rcannl_backends::trace::{Sink, Tracing, tracing_form};
use rcannl_backends::{Backend, Buffers, CompileErrorKind, Executable, Interpreter};
use rcannl_ir::optimize::optimize;
use rcannl_ir::{
    Assignment, Binop, FetchOp, MemoryMode, NodeId, Precision, Routine, Stmt, TensorNode, Unop,
};

/// `c =: a · b` (16×16 by 16×16, f32: large enough to be a matrix product), `r =: relu(c)` into
/// a buffer with a margin of one cell before and after its rows, filled with −1, and `k` filled
/// with 2: lowered and optimized (the product recognized as one, the margin fill and the fill
/// kept).
fn routine() -> Routine {
    let typed = |id: u32, label: &str, dims: &[usize]| {
        TensorNode::new(id, label, Precision::F32, dims).with_mode(MemoryMode::Materialized)
    };
    let mut padded = typed(3, "relu c", &[N, N]);
    padded.padding = vec![(1, 1), (0, 0)];
    let nodes = vec![
        typed(0, "a", &[N, N]),
        typed(1, "b", &[N, N]),
        typed(2, "c", &[N, N]),
        padded,
        // A label the kernels' renaming of their own names must leave alone.
        typed(4, "n1 \"k\"", &[2]),
    ];
    let product = binary(
        true,
        Binop::Add,
        2,
        Binop::Mul,
        (0, 1),
        projections(
            &[N, N, N],
            (&[N, N], vec![it(0), it(1)]),
            vec![(&[N, N], vec![it(0), it(2)]), (&[N, N], vec![it(2), it(1)])],
        ),
    );
    let mut relu = pointwise(&[N, N], 1);
    relu.lhs_padding = vec![(1, 1), (0, 0)];
    let program = Assignment::Seq(vec![
        product,
        unary(true, Binop::Arg2, 3, Unop::Relu, 2, relu),
        Assignment::Fetch {
            node: NodeId(4),
            op: FetchOp::Constant(2.0),
        },
    ]);
    let lowered = Routine::lower("traced", &program, nodes).unwrap();
    let mut optimized = optimize(&lowered).unwrap();
    // The margins hold −1 (a value no neutral element gives), filled apart.
    optimized.body.insert(
        0,
        Stmt::FillMargins {
            node: NodeId(3),
            value: -1.0,
        },
    );
    optimized
}

/// The inputs: quarter-integers, so that every sum is exact in f32.
fn inputs() -> [(u32, Vec<f64>); 2] {
    let cells = (N * N) as i32;
    [
        (
            0,
            (0..cells).map(|i| f64::from(i % 9) / 4.0 - 1.0).collect(),
        ),
        (
            1,
            (0..cells).map(|i| 0.75 - f64::from(i % 7) / 4.0).collect(),
        ),
    ]
}

/// The size of every axis.
const N: usize = 16;

/// The lines of one run of `routine` on `backend`, traced into a file of `folder`, and the
/// buffers after it.
fn traced_run(backend: &dyn Backend, routine: &Routine, folder: &Folder) -> (String, Buffers) {
    let path = folder.path().join(format!("{}.log", backend.name()));
    let executable = backend
        .compile_traced(routine, Sink::File(path.clone()))
        .unwrap();
    let mut buffers = Buffers::for_routine(routine).unwrap();
    for (node, values) in inputs() {
        buffers.set_values(NodeId(node), &values).unwrap();
    }
    executable.run(&mut buffers, &HashMap::new()).unwrap();
    (std::fs::read_to_string(path).unwrap(), buffers)
}

#[test]
fn the_c_backends_lines_are_the_interpreters_line_for_line() {
    let routine = routine();
    assert!(
        routine.body.iter().any(|s| matches!(s, Stmt::Gemm { .. })),
        "the product should be recognized:\n{routine}"
    );
    let folder = Folder::new("trace-lines");
    let (interpreted, buffers) = traced_run(&Interpreter, &routine, &folder);
    let (compiled, c_buffers) = traced_run(&cached_compiler(), &routine, &folder);
    for id in [2, 3, 4] {
        assert_eq!(
            buffers.values(NodeId(id)),
            c_buffers.values(NodeId(id)),
            "n{id}"
        );
    }
    let lines: Vec<&str> = interpreted.lines().collect();
    let c_lines: Vec<&str> = compiled.lines().collect();
    for (i, (line, c_line)) in lines.iter().zip(&c_lines).enumerate() {
        assert_eq!(line, c_line, "line {i}");
    }
    assert_eq!(lines.len(), c_lines.len());
    // Every store: the margins' 2 rows, the product's zeros and terms, the relus and the
    // fill's 2 cells.
    assert_eq!(lines.len(), 2 * N + N * N + N * N * N + N * N + 2);
    assert_eq!(lines[0], "traced 'relu c'[-1, 0] = -1");
    assert_eq!(
        lines[2 * N - 1],
        format!("traced 'relu c'[{N}, {}] = -1", N - 1)
    );
    assert!(lines.contains(&"traced 'n1 \"k\"'[1] = 2"));
    // The last store of each cell leaves the value the buffer ends with.
    let a = &inputs()[0].1;
    let b = &inputs()[1].1;
    for row in 0..N {
        for column in 0..N {
            let sum: f64 = (0..N).map(|j| a[row * N + j] * b[j * N + column]).sum();
            let relu = sum.max(0.0);
            let last = |label: &str| {
                let at = format!("traced '{label}'[{row}, {column}] = ");
                lines
                    .iter()
                    .rev()
                    .find_map(|l| l.strip_prefix(at.as_str()))
                    .unwrap()
            };
            assert_eq!(last("c").parse::<f64>().unwrap(), sum);
            assert_eq!(last("relu c").parse::<f64>().unwrap(), relu);
        }
    }
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("'a'") && !l.contains("'b'")),
        "the product's operands are read, never stored"
    );
}

#[test]
fn untraced_c_has_no_trace_calls_and_is_cached_apart() {
    let routine = routine();
    let cache = Folder::new("trace-cache");
    let compiler = cached_compiler().with_cache_dir(cache.path());
    let plain = compiler.compile(&routine).unwrap();
    let traced = compiler
        .compile_traced(&routine, Sink::StandardError)
        .unwrap();
    assert!(!plain.source.contains("rc_trace"), "{}", plain.source);
    assert!(
        traced.source.contains("rc_trace_float(\"c\""),
        "{}",
        traced.source
    );
    // The label reads as written, its quotes escaped and the `n` of `n1` too, which kernel
    // identity would otherwise take for a node of its own.
    assert!(
        traced.source.contains(r#""\1561 \042k\042""#),
        "{}",
        traced.source
    );
    assert!(!traced.from_cache);
    let libraries = std::fs::read_dir(cache.path())
        .unwrap()
        .filter(|entry| {
            entry.as_ref().unwrap().path().extension() == Some(std::ffi::OsStr::new("so"))
        })
        .count();
    // The routine's two libraries, and the products' kernels the untraced one loads.
    assert_eq!(libraries, 3);
    let again = compiler
        .compile_traced(&routine, Sink::StandardError)
        .unwrap();
    assert!(again.from_cache);
    assert_eq!(again.source, traced.source);
}

#[test]
fn the_tracing_form_stores_every_cell_a_fill_or_a_product_did() {
    let routine = routine();
    let form = tracing_form(&routine);
    for stmt in &form.body {
        stmt.walk(&mut |s| {
            assert!(
                !matches!(
                    s,
                    Stmt::Fill { .. } | Stmt::FillMargins { .. } | Stmt::Gemm { .. }
                ),
                "{form}"
            );
        });
    }
    let plain = run_routine_on(&routine, &inputs());
    let traced = run_routine_on(&form, &inputs());
    for id in 0..5 {
        assert_eq!(plain.buffer(NodeId(id)), traced.buffer(NodeId(id)), "n{id}");
    }
}

#[test]
fn a_backend_that_cannot_print_refuses_naming_the_setting() {
    #[derive(Debug)]
    struct Silent;
    impl Backend for Silent {
        fn name(&self) -> &'static str {
            "silent"
        }
        fn compile(
            &self,
            _: &Routine,
        ) -> Result<Box<dyn Executable>, rcannl_backends::CompileError> {
            unreachable!("a traced compile does not fall back to an untraced one")
        }
    }
    let error = Tracing::new(Box::new(Silent), Sink::StandardError)
        .compile(&routine())
        .unwrap_err();
    assert_eq!(error.kind, CompileErrorKind::Setting);
    assert!(
        error.message.contains("routine traced")
            && error.message.contains("silent backend cannot trace")
            && error.message.contains("trace_stores"),
        "{error}"
    );
}

#[test]
fn values_of_many_digits_read_alike_on_both_backends() {
    // exp and sin of 97 fractions, in f32 (9 digits), f64 (17) and f16: values whose decimals
    // run long, each written once by Rust and once by C's printf.
    for precision in [Precision::F32, Precision::F64, Precision::F16] {
        let typed = |id: u32, label: &str| {
            TensorNode::new(id, label, precision, &[97]).with_mode(MemoryMode::Materialized)
        };
        let program = Assignment::Seq(vec![
            unary(true, Binop::Arg2, 1, Unop::Exp, 0, pointwise(&[97], 1)),
            unary(true, Binop::Arg2, 2, Unop::Sin, 1, pointwise(&[97], 1)),
        ]);
        let nodes = vec![typed(0, "x"), typed(1, "exp x"), typed(2, "sin exp x")];
        let routine = optimize(&Routine::lower("digits", &program, nodes).unwrap()).unwrap();
        let x: Vec<f64> = (0..97).map(|i| f64::from(i) / 7.0 - 6.5).collect();
        let folder = Folder::new(&format!("trace-digits-{precision}"));
        let lines = [&Interpreter as &dyn Backend, &cached_compiler()].map(|backend| {
            let path = folder.path().join(backend.name());
            let executable = backend
                .compile_traced(&routine, Sink::File(path.clone()))
                .unwrap();
            let mut buffers = Buffers::for_routine(&routine).unwrap();
            buffers.set_values(NodeId(0), &x).unwrap();
            executable.run(&mut buffers, &HashMap::new()).unwrap();
            std::fs::read_to_string(path).unwrap()
        });
        assert_eq!(lines[0].lines().count(), 2 * 97, "{precision}");
        assert_eq!(lines[0], lines[1], "{precision}");
    }
}

#[test]
fn scatters_random_bits_and_words_read_alike_on_both_backends() {
    use rcannl_ir::{AxisIndex, Factor, Projections, Symbol, Value, VecUnop};
    let (p, w, v) = (Symbol(0), Symbol(1), Symbol(2));
    let it = AxisIndex::Iterator;
    // A gather's gradient: `grad out` (5×3) added into `grad table` (3×4) at the ids, one of
    // them (−1) selecting no cell, another (2) selected twice.
    let projections = Projections {
        product_space: vec![
            Factor::single(p, 5),
            Factor::single(w, 3),
            Factor::single(v, 4),
        ],
        lhs_dims: vec![5, 3],
        rhs_dims: vec![vec![3, 4], vec![5]],
        lhs_index: vec![it(p), it(w)],
        rhs_index: vec![vec![it(w), it(v)], vec![it(p)]],
        lhs_padding: vec![(0, 0); 2],
        rhs_padding: vec![vec![(0, 0); 2], vec![(0, 0)]],
        label: "gather".to_owned(),
    };
    let typed = |id: u32, label: &str, precision: Precision, dims: &[usize]| {
        TensorNode::new(id, label, precision, dims).with_mode(MemoryMode::Materialized)
    };
    let nodes = vec![
        typed(0, "ids", Precision::F32, &[5]),
        typed(1, "grad out", Precision::F32, &[5, 3]),
        typed(2, "grad table", Precision::F32, &[3, 4]),
        typed(3, "key", Precision::Uint4x32, &[2]),
        typed(4, "draws", Precision::F32, &[8]),
        typed(5, "id", Precision::Uint4x32, &[1]),
    ];
    let program = Assignment::Seq(vec![
        Assignment::Fetch {
            node: NodeId(2),
            op: FetchOp::Constant(0.5),
        },
        Assignment::ScatterAdd {
            target: NodeId(2),
            source: NodeId(1),
            ids: NodeId(0),
            projections,
        },
        Assignment::SetVecUnop {
            op: VecUnop::Uint4x32ToPrecUniform,
            lhs: NodeId(4),
            rhs: NodeId(3),
            projections: fan_out(2, 8, 4),
        },
        Assignment::Fetch {
            node: NodeId(5),
            op: FetchOp::EmbedSelfId,
        },
    ]);
    let routine = Routine::lower("mixed", &program, nodes).unwrap();
    let folder = Folder::new("trace-mixed");
    let lines = [&Interpreter as &dyn Backend, &cached_compiler()].map(|backend| {
        let path = folder.path().join(backend.name());
        let executable = backend
            .compile_traced(&routine, Sink::File(path.clone()))
            .unwrap();
        let mut buffers = Buffers::for_routine(&routine).unwrap();
        buffers
            .set_values(NodeId(0), &[2.0, 0.0, -1.0, 2.0, 3.0])
            .unwrap();
        let grads: Vec<f64> = (0..15).map(|i| f64::from(i) / 3.0).collect();
        buffers.set_values(NodeId(1), &grads).unwrap();
        let key = [
            Value::Word([1, 2, 3, 4]),
            Value::Word([0xdead_beef, 5, 0, 7]),
        ];
        buffers.set_cells(NodeId(3), &key).unwrap();
        executable.run(&mut buffers, &HashMap::new()).unwrap();
        std::fs::read_to_string(path).unwrap()
    });
    assert_eq!(lines[0], lines[1]);
    let count = |label: &str| {
        let at = format!("mixed '{label}'[");
        lines[0].lines().filter(|l| l.starts_with(&at)).count()
    };
    // The fill's 12 cells, then 3 stores per id that selects a cell (4 of 5).
    assert_eq!(count("grad table"), 12 + 3 * 4, "{}", lines[0]);
    assert_eq!(count("draws"), 8);
    assert!(
        lines[0].contains("mixed 'id'[0] = [0x00000005, 0x00000000, 0x00000000, 0x00000000]"),
        "{}",
        lines[0]
    );
}
