//! What several modules' tests share: the two CPU backends every case runs on, data tensors of
//! f64 cells, and a comparison of computed values with hand computation.

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

/// A data tensor of f64 cells declared with no shape: what relates it gives it one.
pub fn unshaped(graph: &Graph, label: &str) -> Tensor {
    graph.data(label).precision(Precision::F64).build()
}

/// Asserts `got` equals `want` within 10⁻⁹ relative (absolute below 1), naming `what`.
pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-9 * w.abs().max(1.0),
            "{what}: {got:?} vs {want:?}"
        );
    }
}
