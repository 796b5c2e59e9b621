//! What the CPU block tests share: both CPU backends, a finite-difference check of a block on
//! each, and fixed f64 weights for its outputs.

#![allow(dead_code)] // each test file uses its own subset

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients, test_values};
use rcannl_tensor::{Graph, Tensor};

/// The interpreter and the C backend.
pub fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// Checks the gradients of `build` over f64 inputs of `shapes` by finite differences on both
/// CPU backends; panics naming the block and the backend.
pub fn check(name: &str, shapes: &[&str], build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs {
            shapes,
            positive: false,
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, &build) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

/// An f64 data tensor of the given shape and values.
pub fn data(graph: &Graph, label: &str, shape: &str, values: Vec<f64>) -> Tensor {
    graph
        .data(label)
        .shape(shape)
        .precision(Precision::F64)
        .values(values)
        .build()
}

/// Fixed f64 weights of the given shape (`n` cells), to weight outputs: the plain sum of a
/// softmax or a normalized tensor does not depend on its input, so its gradients would be 0.
pub fn weights(graph: &Graph, shape: &str, n: usize) -> Tensor {
    data(graph, "weights", shape, test_values(n, 99))
}

/// The moons training set (noise 0.1, seed 1) as `batches` batches of `batch` points: the data
/// tensors `xs` (`batches,batch|->2`) and `ys` (`batches,batch|->1`, labels ±1).
pub fn moons_batches(graph: &Graph, batches: usize, batch: usize) -> (Tensor, Tensor) {
    let (x, y) = rcannl_nn::data::moons(batches * batch, 0.1, 1);
    let xs = graph
        .data("xs")
        .shape(&format!("{batches},{batch}|->2"))
        .values(x)
        .build();
    let ys = graph
        .data("ys")
        .shape(&format!("{batches},{batch}|->1"))
        .values(y)
        .build();
    (xs, ys)
}
