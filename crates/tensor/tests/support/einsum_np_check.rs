//! Runs `Tensor::einsum_np` over operands of numpy shapes on a backend, and compares what it
//! gives with a naive evaluation (`naive_einsum.rs`, which the including test declares as the
//! module `naive_einsum`): numpy's shape as the result's output axes (no batch or input axes),
//! and every cell within rounding relative to the magnitude of the terms summed into it.

use rcannl_backends::Backend;
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

use super::naive_einsum::{Evaluation, Plan};

/// A result: its rows (batch, input, output) and its values in row-major order.
pub type Outcome = ([Vec<usize>; 3], Vec<f64>);

/// The einsum `equation` (numpy's notation) of operands of `shapes` in `precision` holding
/// `values`, run on `backend`, or the error building, compiling or running it gave.
pub fn run_einsum(
    backend: Box<dyn Backend>,
    precision: Precision,
    equation: &str,
    shapes: &[Vec<usize>],
    values: &[Vec<f64>],
) -> Result<Outcome, String> {
    let graph = Graph::new();
    let operands: Vec<Tensor> = shapes
        .iter()
        .zip(values)
        .enumerate()
        .map(|(i, (shape, values))| {
            graph
                .data(&format!("x{i}"))
                .batch([])
                .input([])
                .output(shape.iter().copied())
                .precision(precision)
                .values(values.clone())
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = operands.iter().collect();
    let out = Tensor::einsum_np(equation, &refs);
    let message = |e: rcannl_tensor::TensorError| e.to_string();
    graph.check().map_err(message)?;
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&out]).map_err(message)?;
    ctx.run(&forward).map_err(message)?;
    let rows = ctx.rows(&out).map_err(message)?;
    Ok((rows, ctx.values(&out).map_err(message)?))
}

/// How a result differs from numpy's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Its axes are not numpy's shape (as output axes); says whether the values agree anyway.
    Shape(String),
    /// Its shape is right but a cell is not.
    Values(String),
}

/// Relative tolerance on a cell: rounding in sums of many terms, relative to `Σ |term|`.
pub const TOLERANCE: f64 = 1e-9;

/// Compares a result with the naive evaluation of the same einsum.
pub fn compare(plan: &Plan, expected: &Evaluation, got: &Outcome) -> Result<(), Mismatch> {
    let (rows, values) = got;
    let wrong_cell = values
        .iter()
        .zip(&expected.values)
        .zip(&expected.magnitude)
        .position(|((g, e), m)| (g - e).abs() > TOLERANCE * m || g.is_nan());
    let values_seen = match wrong_cell {
        Some(at) => format!(
            "cell {at}: {} instead of {}",
            values[at], expected.values[at]
        ),
        None if values.len() != expected.values.len() => {
            format!(
                "{} cells instead of {}",
                values.len(),
                expected.values.len()
            )
        }
        None => String::new(),
    };
    let numpy_rows = [Vec::new(), Vec::new(), plan.shape.clone()];
    if *rows != numpy_rows {
        let values = match values_seen.as_str() {
            "" => "values equal",
            wrong => wrong,
        };
        return Err(Mismatch::Shape(format!(
            "rows (batch, input, output) {rows:?}, numpy's shape {:?}; {values}",
            plan.shape
        )));
    }
    match values_seen.as_str() {
        "" => Ok(()),
        _ => Err(Mismatch::Values(values_seen)),
    }
}
