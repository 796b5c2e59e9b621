//! What several modules' tests share: the two CPU backends every case runs on, and data
//! tensors of f64 cells.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Graph, Tensor};

/// The interpreter and the C backend.
pub fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// A data tensor of f64 cells, of this shape literal and these values.
pub fn data(graph: &Graph, label: &str, shape: &str, values: &[f64]) -> Tensor {
    graph
        .data(label)
        .shape(shape)
        .precision(Precision::F64)
        .values(values.to_vec())
        .build()
}
