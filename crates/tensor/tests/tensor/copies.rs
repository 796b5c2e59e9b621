//! Copies between contexts of one graph: a tensor's cells exactly as stored, and every
//! parameter at once, from a context on one backend to a context on another; a context of
//! another graph and a tensor holding no values are refused.

use rcannl_backends::Interpreter;
use rcannl_backends::cc::Compiler;
use rcannl_ir::{Precision, Value};
use rcannl_tensor::{Context, Graph, TensorErrorKind};

#[test]
fn every_parameter_copies_to_a_context_on_another_backend() {
    let graph = Graph::new();
    let w = graph.param("w").input([3]).output([2]).build();
    let b = graph.param("b").output([2]).build();
    let x = graph
        .data("x")
        .output([3])
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let y = &(&w * &x) + &b;
    let mut source = Context::with_backend(&graph, Box::new(Interpreter));
    let compiler = Compiler::find().expect("a C compiler (cc or $CC)");
    let mut copy = Context::with_backend(&graph, Box::new(compiler));
    source.set_seed(1);
    copy.set_seed(2);
    source.init_params().unwrap();
    copy.init_params().unwrap();
    assert_ne!(source.values(&w).unwrap(), copy.values(&w).unwrap());

    copy.copy_params_from(&source).unwrap();
    for param in [&w, &b] {
        assert_eq!(
            copy.cells(param).unwrap(),
            source.cells(param).unwrap(),
            "{}",
            param.label()
        );
    }
    let (forward_source, forward_copy) =
        (source.forward(&[&y]).unwrap(), copy.forward(&[&y]).unwrap());
    source.run(&forward_source).unwrap();
    copy.run(&forward_copy).unwrap();
    assert_eq!(copy.values(&y).unwrap(), source.values(&y).unwrap());
}

#[test]
fn a_tensors_cells_copy_exactly_and_refusals_say_why() {
    let graph = Graph::new();
    // Beyond f64's 53 bits: a copy through floats would round it.
    let big = (1_i64 << 60) + 1;
    let n = graph
        .data("n")
        .output([2])
        .precision(Precision::I64)
        .build();
    let doubled = &n + &n;
    let mut source = Context::with_backend(&graph, Box::new(Interpreter));
    let mut copy = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = copy.forward(&[&doubled]).unwrap();

    let nothing = copy.copy_values_from(&source, &n).unwrap_err();
    assert_eq!(nothing.kind, TensorErrorKind::NoValues, "{nothing}");
    assert!(nothing.message.contains("'n'"), "{nothing}");

    source
        .set_cells(&n, &[Value::Int(big), Value::Int(-3)])
        .unwrap();
    copy.copy_values_from(&source, &n).unwrap();
    assert_eq!(copy.cells(&n).unwrap(), [Value::Int(big), Value::Int(-3)]);
    copy.run(&forward).unwrap();
    assert_eq!(
        copy.cells(&doubled).unwrap(),
        [Value::Int(2 * big), Value::Int(-6)]
    );

    let other = Graph::new();
    let elsewhere = Context::with_backend(&other, Box::new(Interpreter));
    for refused in [
        copy.copy_values_from(&elsewhere, &n).unwrap_err(),
        copy.copy_params_from(&elsewhere).unwrap_err(),
    ] {
        assert!(refused.message.contains("another graph"), "{refused}");
    }
}
