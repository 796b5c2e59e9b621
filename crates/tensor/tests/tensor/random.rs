//! Counter-based randomness on the host: parameters are initialized once, and random words fan
//! out into four floats each. That every backend draws the same bits is the conformance suite's
//! (`rcannl-fuzz`'s `tests/conformance/random.rs`).

use rcannl_backends::cc::Compiler;
use rcannl_tensor::{Context, Graph, Init};

#[test]
fn parameters_are_initialized_once() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("8")
        .init(Init::Uniform(-1.0, 1.0))
        .build();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let first = ctx.values(&w).unwrap();
    ctx.set_values(&w, &[1.0; 8]).unwrap();
    ctx.init_params().unwrap();
    assert_eq!(ctx.values(&w).unwrap(), vec![1.0; 8]);
    assert_ne!(first, vec![1.0; 8]);
}

#[test]
fn random_words_fan_out_into_four_floats_each() {
    let graph = Graph::new();
    let counters = graph
        .data("counters")
        .shape("8")
        .precision(rcannl_ir::Precision::U32)
        .values((0..8).map(f64::from).collect())
        .build();
    let words = graph.seed().threefry(&counters);
    let floats = words.to_uniform(rcannl_ir::Precision::F32);
    let target = graph
        .data("target")
        .shape("32")
        .values(vec![0.0; 32])
        .build();
    let sum = &floats + &target;
    let mut ctx = Context::with_backend(&graph, Box::new(Compiler::find().expect("a C compiler")));
    ctx.set_seed(5);
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.run(&forward).unwrap();
    let expected: Vec<f64> = (0..8u32)
        .flat_map(|i| {
            let counter = [i, i ^ 0x9E37_79B9, i ^ 0x6C07_8965, i ^ i.rotate_left(16)];
            rcannl_ir::value::uniform(
                rcannl_ir::threefry4x32([5, 0, 0, 0], counter),
                rcannl_ir::Precision::F32,
            )
        })
        .map(|v| v.as_f64())
        .collect();
    assert_eq!(ctx.values(&sum).unwrap(), expected);
}
