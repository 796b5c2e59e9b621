//! Finite-difference gradient checks, for the library's own operations and for anyone defining
//! new ones: the gradient of the sum of a result's cells with respect to each input cell,
//! computed by backprop, against `(f(x + h) − f(x − h)) / 2h` in f64.

use rcannl_backends::Backend;
use rcannl_ir::Precision;

use crate::context::Context;
use crate::graph::{Graph, Init, TensorError, error};
use crate::tensor::Tensor;

/// The inputs of a check: a shape literal per input (its cell count is read off the literal) and
/// whether the values must be positive (for logarithms, roots, divisions).
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub shapes: &'a [&'a str],
    pub positive: bool,
}

/// Values in `[-2, 2]`, at least 0.15 away from 0 (where relu and friends have kinks) and
/// distinct (so that maxima have no ties), from a fixed sequence.
pub fn test_values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let magnitude = 0.15 + 1.85 * unit + i as f64 * 1e-3;
            if state & 1 == 0 {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

fn cells(literal: &str) -> Result<usize, TensorError> {
    rcannl_shape::spec::parse_shape_literal(literal)
        .map_err(|e| error(format!("gradient check: bad shape {literal:?}: {e}")))?
        .n_elements()
        .ok_or_else(|| error(format!("gradient check: {literal:?} is too large")))
}

/// Builds `build` over f64 parameters of the given shapes on `backend`, and compares every
/// gradient cell with its finite difference (relative tolerance `tolerance`, absolute below 1).
/// The error names the input, the cell and both values.
pub fn check_gradients(
    backend: Box<dyn Backend>,
    inputs: &Inputs<'_>,
    tolerance: f64,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) -> Result<(), TensorError> {
    let graph = Graph::new();
    let mut starts = Vec::new();
    for (i, literal) in inputs.shapes.iter().enumerate() {
        let values = test_values(cells(literal)?, 17 + i as u64);
        starts.push(if inputs.positive {
            values.iter().map(|x| x.abs()).collect()
        } else {
            values
        });
    }
    let params: Vec<Tensor> = inputs
        .shapes
        .iter()
        .zip(&starts)
        .enumerate()
        .map(|(i, (literal, start))| {
            graph
                .param(&format!("p{i}"))
                .shape(literal)
                .precision(Precision::F64)
                .init(Init::Values(start.clone()))
                .build()
        })
        .collect();
    let out = build(&graph, &params);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params()?;
    let backprop = ctx.backprop(&out)?;
    ctx.run(&backprop)?;
    let analytic = params
        .iter()
        .map(|p| ctx.grad(p))
        .collect::<Result<Vec<_>, _>>()?;
    let forward = ctx.forward(&[&out])?;
    let h = 1e-6;
    for (i, param) in params.iter().enumerate() {
        for cell in 0..starts[i].len() {
            let mut total = |delta: f64| -> Result<f64, TensorError> {
                let mut shifted = starts[i].clone();
                shifted[cell] += delta;
                ctx.set_values(param, &shifted)?;
                ctx.run(&forward)?;
                let sum = ctx.values(&out)?.iter().sum();
                ctx.set_values(param, &starts[i])?;
                Ok(sum)
            };
            let numeric = (total(h)? - total(-h)?) / (2.0 * h);
            let got = analytic[i][cell];
            if (numeric - got).abs() > tolerance * numeric.abs().max(1.0) {
                return Err(error(format!(
                    "gradient check: d/d input {i}[{cell}]: analytic {got}, numeric {numeric}"
                )));
            }
        }
    }
    Ok(())
}
