//! Random draws and parameter initialization on the GPU equal the C backend's bit for bit.

use rcannl_backends::Backend;
use rcannl_backends::cc::Compiler;
use rcannl_tensor::{BinaryOp, Context, Graph, Init};

mod common;
use common::gpu;

fn cc() -> Box<dyn Backend> {
    Box::new(Compiler::find().expect("a C compiler"))
}

fn initial_values(backend: Box<dyn Backend>, seed: u64) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let w = graph.param("w").shape("64->32").build();
    let u = graph
        .param("u")
        .shape("1000")
        .init(Init::Uniform(2.0, 3.0))
        .build();
    let n = graph
        .param("n")
        .shape("4000")
        .init(Init::Normal(1.0, 0.5))
        .build();
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(seed);
    ctx.init_params().unwrap();
    [w, u, n].iter().map(|t| ctx.values(t).unwrap()).collect()
}

#[test]
fn parameter_init_equals_the_c_backend_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    assert_eq!(initial_values(Box::new(gpu), 7), initial_values(cc(), 7));
}

fn draws(backend: Box<dyn Backend>) -> Vec<f64> {
    let graph = Graph::new();
    let u = graph.uniform("u");
    let x = graph.data("x").shape("3, 5, 7").build();
    let y = u.binary(BinaryOp::Add, &x).binary(BinaryOp::Mul, &u);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(11);
    let forward = ctx.forward(&[&y, &u]).unwrap();
    ctx.set_values(&x, &vec![0.0; 105]).unwrap();
    ctx.run(&forward).unwrap();
    let mut out = ctx.values(&u).unwrap();
    out.extend(ctx.values(&y).unwrap());
    out
}

#[test]
fn random_draws_equal_the_c_backend_bit_for_bit() {
    let Some(gpu) = gpu() else { return };
    assert_eq!(draws(Box::new(gpu)), draws(cc()));
}
