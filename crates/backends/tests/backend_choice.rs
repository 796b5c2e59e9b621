//! Choosing a backend, the compile cache, and the checks compiled routines make before they run.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::*;
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Buffers, Interpreter, default_backend};
use rcannl_ir::{Binop, NodeId, Precision, Routine, TensorNode, Unop};

const CHILD: &str = "RCANNL_BACKENDS_TEST_CHILD";

#[test]
fn without_a_compiler_the_interpreter_runs_after_one_warning() {
    if std::env::var_os(CHILD).is_some() {
        // In the child process, where CC names no program.
        let first = default_backend();
        let second = default_backend();
        assert_eq!(
            (first.name(), second.name()),
            ("interpreter", "interpreter")
        );
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "without_a_compiler_the_interpreter_runs_after_one_warning",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("CC", "/nonexistent/cc")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(stderr.matches("no C compiler found").count(), 1, "{stderr}");
    // It says what was tried, and why that failed: `$CC` alone when it is set.
    assert!(stderr.contains("$CC is \"/nonexistent/cc\""), "{stderr}");
    assert!(stderr.contains("No such file"), "{stderr}");
    assert!(!stderr.contains("then cc"), "{stderr}");
}

fn doubling() -> Routine {
    let double = unary(
        true,
        Binop::Arg2,
        1,
        Unop::Identity,
        0,
        projections(&[5], (&[5], vec![it(0)]), vec![(&[5], vec![it(0)])]),
    );
    Routine::lower("copy", &double, vec![node(0, &[5]), node(1, &[5])]).unwrap()
}

#[test]
fn a_second_compilation_comes_from_the_cache() {
    let dir = std::env::temp_dir().join(format!("rcannl-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let compiler = Compiler::find().expect("a C compiler").with_cache_dir(&dir);
    let routine = doubling();
    assert!(!compiler.compile(&routine).unwrap().from_cache);
    let again = compiler.compile(&routine).unwrap();
    assert!(again.from_cache);
    let mut buffers = Buffers::for_routine(&routine).unwrap();
    buffers.set_values(NodeId(0), &range(5)).unwrap();
    again.run(&mut buffers, &HashMap::new()).unwrap();
    assert_eq!(buffers.values(NodeId(1)), range(5));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn both_backends_refuse_buffers_of_another_shape() {
    let routine = doubling();
    let compiler = Compiler::find().expect("a C compiler");
    for backend in [&Interpreter as &dyn Backend, &compiler] {
        let executable = backend.compile(&routine).unwrap();
        let mut wrong = Buffers::new([
            node(0, &[5]),
            TensorNode::new(1, "t1", Precision::F32, &[5]),
        ])
        .unwrap();
        let result = executable.run(&mut wrong, &HashMap::new());
        if backend.name() == "cc" {
            let error = result.unwrap_err();
            assert!(
                error.message.contains("was compiled for f64 [5]"),
                "{error}"
            );
        }
        let mut missing = Buffers::new([node(0, &[5])]).unwrap();
        let error = executable.run(&mut missing, &HashMap::new()).unwrap_err();
        assert!(
            error.message.contains("no buffer for n1"),
            "{}: {error}",
            backend.name()
        );
    }
}

#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    // A large pointwise nest (split across threads), a reduction, and an f32 product.
    let (rows, columns, depth) = (256, 160, 160);
    let scale = unary(
        true,
        Binop::Arg2,
        3,
        Unop::Tanh,
        0,
        projections(
            &[rows, depth],
            (&[rows, depth], vec![it(0), it(1)]),
            vec![(&[rows, depth], vec![it(0), it(1)])],
        ),
    );
    let product = binary(
        true,
        Binop::Add,
        2,
        Binop::Mul,
        (3, 1),
        projections(
            &[rows, columns, depth],
            (&[rows, columns], vec![it(0), it(1)]),
            vec![
                (&[rows, depth], vec![it(0), it(2)]),
                (&[depth, columns], vec![it(2), it(1)]),
            ],
        ),
    );
    let sums = unary(
        true,
        Binop::Add,
        4,
        Unop::Exp,
        2,
        projections(
            &[rows, columns],
            (&[rows], vec![it(0)]),
            vec![(&[rows, columns], vec![it(0), it(1)])],
        ),
    );
    let f32_node =
        |id, dims: &[usize]| TensorNode::new(id, &format!("t{id}"), Precision::F32, dims);
    let nodes = vec![
        f32_node(0, &[rows, depth]),
        f32_node(1, &[depth, columns]),
        f32_node(2, &[rows, columns]),
        f32_node(3, &[rows, depth]),
        f32_node(4, &[rows]),
    ];
    let routine = Routine::lower(
        "threads",
        &rcannl_ir::Assignment::Seq(vec![scale, product, sums]),
        nodes,
    )
    .unwrap();
    let optimized = rcannl_ir::optimize::optimize(&routine).unwrap();
    assert!(optimized.to_string().contains("gemm n2"), "{optimized}");
    let compiled = Compiler::find()
        .expect("a C compiler")
        .compile(&optimized)
        .unwrap();
    // The pointwise and the reduction kernels are both split across threads.
    assert_eq!(
        compiled.source.matches(" < end; ++").count(),
        2,
        "{}",
        compiled.source
    );
    let results: Vec<Vec<rcannl_ir::Value>> = [1, 2, 3]
        .iter()
        .map(|&threads| {
            let mut buffers = Buffers::for_routine(&optimized).unwrap();
            let x: Vec<f64> = (0..rows * depth)
                .map(|i| (i % 23) as f64 / 7.0 - 1.5)
                .collect();
            let w: Vec<f64> = (0..depth * columns)
                .map(|i| (i % 19) as f64 / 9.0 - 1.0)
                .collect();
            buffers.set_values(NodeId(0), &x).unwrap();
            buffers.set_values(NodeId(1), &w).unwrap();
            compiled
                .run_on(&mut buffers, &HashMap::new(), threads)
                .unwrap();
            [2, 4]
                .iter()
                .flat_map(|id| buffers.cells(NodeId(*id)))
                .collect()
        })
        .collect();
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
}

/// `totals[1, c] += f(x[r, c])` over `for r in 0..rows { for c in 0..64 }`: every row of `x`
/// summed into the second row of `totals` (`2 × 64`, f32), `f` the identity or `tanh`.
fn column_sums(rows: usize, tanh: bool) -> Routine {
    use rcannl_ir::{Index, LoopVar, Scalar, Stmt};
    let at = |var: u32| Index::var(LoopVar(var), 0);
    let index = vec![Index::constant(1), at(1)];
    let x = Scalar::Get(NodeId(0), vec![at(0), at(1)]);
    let x = if tanh {
        Scalar::Unop(Unop::Tanh, Box::new(x))
    } else {
        x
    };
    let sum = Scalar::Binop(
        Binop::Add,
        Box::new(Scalar::Get(NodeId(1), index.clone())),
        Box::new(x),
    );
    let columns = Stmt::For {
        var: LoopVar(1),
        range: 64,
        body: vec![Stmt::Set {
            node: NodeId(1),
            index,
            value: sum,
        }],
    };
    Routine {
        name: "column sums".to_owned(),
        nodes: [
            TensorNode::new(0, "x", Precision::F32, &[rows, 64]),
            TensorNode::new(1, "totals", Precision::F32, &[2, 64]),
        ]
        .into_iter()
        .map(|n| (n.id, n))
        .collect(),
        statics: Default::default(),
        body: vec![Stmt::For {
            var: LoopVar(0),
            range: rows,
            body: vec![columns],
        }],
    }
}

/// `routine`'s `totals` after a run on `threads` threads (`None`: on the interpreter), from `x`
/// and totals whose first row is −0 and second 0.5.
fn totals(routine: &Routine, x: &[f64], threads: Option<usize>) -> Vec<rcannl_ir::Value> {
    let mut buffers = Buffers::for_routine(routine).unwrap();
    buffers.set_values(NodeId(0), x).unwrap();
    let start: Vec<f64> = (0..128).map(|i| if i < 64 { -0.0 } else { 0.5 }).collect();
    buffers.set_values(NodeId(1), &start).unwrap();
    match threads {
        Some(threads) => {
            let compiled = Compiler::find()
                .expect("a C compiler")
                .compile(routine)
                .unwrap();
            compiled
                .run_on(&mut buffers, &HashMap::new(), threads)
                .unwrap();
        }
        None => Interpreter
            .compile(routine)
            .unwrap()
            .run(&mut buffers, &HashMap::new())
            .unwrap(),
    }
    buffers.cells(NodeId(1))
}

#[test]
fn sums_into_a_few_cells_split_across_threads_and_match_on_every_thread_count() {
    let rows = 4096;
    let routine = column_sums(rows, false);
    // The rows are cut into parts, each into its own scratch copy of the totals.
    let generated = rcannl_backends::cc::codegen::generate(&routine).unwrap();
    assert_eq!(generated.scratch.len(), 1, "{}", generated.source);
    assert!(
        generated.source.contains(" < end; ++"),
        "{}",
        generated.source
    );
    // Small integers sum exactly in any order: the interpreter's sums bit for bit, the first
    // row's −0 (which no part adds into) kept.
    let x: Vec<f64> = (0..rows * 64).map(|i| (i % 17) as f64 - 8.0).collect();
    let interpreted = totals(&routine, &x, None);
    assert!(
        interpreted[..64]
            .iter()
            .all(|v| matches!(v, rcannl_ir::Value::Float(z) if z.to_bits() == (-0.0f64).to_bits()))
    );
    for threads in [1, 2, 3] {
        assert_eq!(
            totals(&routine, &x, Some(threads)),
            interpreted,
            "{threads} threads"
        );
    }
    // Other values round differently in parts, but the same on any number of threads.
    let routine = column_sums(rows, true);
    let x: Vec<f64> = (0..rows * 64)
        .map(|i| (i % 23) as f64 / 7.0 - 1.5)
        .collect();
    let one = totals(&routine, &x, Some(1));
    for threads in [2, 3] {
        assert_eq!(
            totals(&routine, &x, Some(threads)),
            one,
            "{threads} threads"
        );
    }
    let interpreted = totals(&routine, &x, None);
    for (ours, theirs) in one.iter().zip(&interpreted) {
        let (ours, theirs) = (ours.as_f64(), theirs.as_f64());
        assert!(
            (ours - theirs).abs() <= 1e-5 * theirs.abs().max(1.0),
            "{ours} vs {theirs}"
        );
    }
}

#[test]
fn a_huge_rayon_num_threads_runs_on_as_many_threads_as_the_machine_has() {
    if std::env::var_os(CHILD).is_some() {
        // In the child process, where RAYON_NUM_THREADS asks for far more threads than any
        // machine has.
        let (rows, columns) = (256, 160);
        let tanh = unary(
            true,
            Binop::Arg2,
            1,
            Unop::Tanh,
            0,
            projections(
                &[rows, columns],
                (&[rows, columns], vec![it(0), it(1)]),
                vec![(&[rows, columns], vec![it(0), it(1)])],
            ),
        );
        let routine = Routine::lower(
            "tanh",
            &tanh,
            vec![node(0, &[rows, columns]), node(1, &[rows, columns])],
        )
        .unwrap();
        let compiled = Compiler::find()
            .expect("a C compiler")
            .compile(&routine)
            .unwrap();
        let input: Vec<f64> = (0..rows * columns)
            .map(|i| (i % 17) as f64 / 4.0 - 2.0)
            .collect();
        let mut buffers = Buffers::for_routine(&routine).unwrap();
        buffers.set_values(NodeId(0), &input).unwrap();
        compiled.run(&mut buffers, &HashMap::new()).unwrap();
        assert_eq!(
            buffers.values(NodeId(1)),
            input.iter().map(|x| x.tanh()).collect::<Vec<_>>()
        );
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        assert!(rcannl_backends::cc::kernel_threads() <= available);
        if cfg!(target_os = "linux") {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let threads: usize = status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            // The kernel threads, the test's and the harness's.
            assert!(threads <= available + 4, "{threads} threads");
        }
        return;
    }
    for requested in ["100000", "many", "-3"] {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_huge_rayon_num_threads_runs_on_as_many_threads_as_the_machine_has",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("RAYON_NUM_THREADS", requested)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "RAYON_NUM_THREADS={requested}: {stderr}"
        );
    }
}
