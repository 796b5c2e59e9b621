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
    let mut buffers = Buffers::for_routine(&routine);
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
        ]);
        let result = executable.run(&mut wrong, &HashMap::new());
        if backend.name() == "cc" {
            let error = result.unwrap_err();
            assert!(
                error.message.contains("was compiled for f64 [5]"),
                "{error}"
            );
        }
        let mut missing = Buffers::new([node(0, &[5])]);
        let error = executable.run(&mut missing, &HashMap::new()).unwrap_err();
        assert!(
            error.message.contains("no buffer for n1"),
            "{}: {error}",
            backend.name()
        );
    }
}
