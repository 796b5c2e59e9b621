//! Finite-difference gradient checks, for the library's own operations and for anyone defining
//! new ones: the gradient of the sum of a result's cells with respect to each input cell,
//! computed by backprop, against `(f(x + h) − f(x − h)) / 2h` in f64 ([`check_gradients`]).
//!
//! In a precision too coarse for finite differences (f32, where a GPU computes), the same graph's
//! backprop on a backend is compared with a reference backend's instead, the interpreter's
//! ([`compare_gradients`]).

use rcannl_backends::Backend;
use rcannl_ir::Precision;

use crate::context::Context;
use crate::graph::{Graph, Init, TensorError, error};
use crate::tensor::Tensor;

/// The inputs of a check: a shape literal per input (its cell count is read off the literal) and
/// whether the values must be positive (for logarithms, roots, divisions).
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// One shape literal per input (`"2,3"`, `"2|3->4"`); the input's cell count is read off it.
    pub shapes: &'a [&'a str],
    /// Whether the inputs' values are made positive (absolute values), for operations defined only
    /// there.
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

/// What one backpropagation of a check's graph gives: the result's cells and each input's
/// gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct Backprop {
    /// The result's cells.
    pub values: Vec<f64>,
    /// Per input, the gradient of the sum of the result's cells with respect to its cells.
    pub gradients: Vec<Vec<f64>>,
}

/// A check's graph after one backpropagation, ready for more runs.
struct Backpropagated {
    ctx: Context,
    params: Vec<Tensor>,
    /// Each parameter's starting values.
    starts: Vec<Vec<f64>>,
    out: Tensor,
    backprop: Backprop,
}

/// Builds `build` over parameters of the given shapes in `precision`, holding the check's values,
/// and backpropagates the sum of its result's cells once on `backend`.
fn backpropagate(
    backend: Box<dyn Backend>,
    inputs: &Inputs<'_>,
    precision: Precision,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) -> Result<Backpropagated, TensorError> {
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
                .precision(precision)
                .init(Init::Values(start.clone()))
                .build()
        })
        .collect();
    let out = build(&graph, &params);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params()?;
    let backprop = ctx.backprop(&out)?;
    ctx.run(&backprop)?;
    let gradients = params
        .iter()
        .map(|p| ctx.grad(p))
        .collect::<Result<Vec<_>, _>>()?;
    let values = ctx.values(&out)?;
    Ok(Backpropagated {
        ctx,
        params,
        starts,
        out,
        backprop: Backprop { values, gradients },
    })
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
    let Backpropagated {
        mut ctx,
        params,
        starts,
        out,
        backprop,
    } = backpropagate(backend, inputs, Precision::F64, build)?;
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
            let got = backprop.gradients[i][cell];
            if (numeric - got).abs() > tolerance * numeric.abs().max(1.0) {
                return Err(error(format!(
                    "gradient check: d/d input {i}[{cell}]: analytic {got}, numeric {numeric}"
                )));
            }
        }
    }
    Ok(())
}

/// The result's cells and every gradient of `build` over parameters of the given shapes in
/// `precision` (holding the values [`check_gradients`] starts from), after one backpropagation
/// on `backend`.
pub fn backprop(
    backend: Box<dyn Backend>,
    inputs: &Inputs<'_>,
    precision: Precision,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) -> Result<Backprop, TensorError> {
    Ok(backpropagate(backend, inputs, precision, build)?.backprop)
}

/// Builds `build` over parameters of the given shapes in `precision` and backpropagates it on
/// `reference` and on `backend`: the result's cells and every gradient cell must agree within
/// `tolerance` (relative, absolute below 1; NaN agrees with NaN). The error names the result's or
/// the input's cell and both backends' values.
pub fn compare_gradients(
    reference: Box<dyn Backend>,
    backend: Box<dyn Backend>,
    inputs: &Inputs<'_>,
    precision: Precision,
    tolerance: f64,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) -> Result<(), TensorError> {
    let names = [reference.name(), backend.name()];
    let want = backprop(reference, inputs, precision, &build)?;
    let got = backprop(backend, inputs, precision, &build)?;
    let results = std::iter::once(("the result".to_owned(), &want.values, &got.values));
    let gradients = want
        .gradients
        .iter()
        .zip(&got.gradients)
        .enumerate()
        .map(|(i, (w, g))| (format!("d/d input {i}"), w, g));
    for (what, want, got) in results.chain(gradients) {
        if want.len() != got.len() {
            return Err(error(format!(
                "gradient comparison: {what}: {} cells on {}, {} on {}",
                want.len(),
                names[0],
                got.len(),
                names[1]
            )));
        }
        for (cell, (w, g)) in want.iter().zip(got).enumerate() {
            let agree = (w.is_nan() && g.is_nan())
                || w == g
                || (w - g).abs() <= tolerance * w.abs().max(g.abs()).max(1.0);
            if !agree {
                return Err(error(format!(
                    "gradient comparison: {what}[{cell}]: {} {w}, {} {g}",
                    names[0], names[1]
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rcannl_backends::CompileError;
    use rcannl_backends::interpreter::{RunError, run_routine};
    use rcannl_backends::{Buffers, Executable, Interpreter};
    use rcannl_ir::{Routine, Symbol};

    use super::*;

    /// The interpreter, with every float cell of a routine's nodes scaled by 1.01 after it runs.
    #[derive(Debug)]
    struct Skewed;

    #[derive(Debug)]
    struct SkewedRun(Routine);

    impl Backend for Skewed {
        fn name(&self) -> &'static str {
            "skewed"
        }

        fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
            Ok(Box::new(SkewedRun(routine.clone())))
        }
    }

    impl Executable for SkewedRun {
        fn run(
            &self,
            buffers: &mut Buffers,
            statics: &HashMap<Symbol, i64>,
        ) -> Result<(), RunError> {
            run_routine(&self.0, buffers, statics)?;
            for (id, node) in &self.0.nodes {
                if node.precision.is_float() && buffers.nodes().contains_key(id) {
                    let scaled: Vec<f64> =
                        buffers.read_values(*id)?.iter().map(|x| x * 1.01).collect();
                    buffers.set_values(*id, &scaled)?;
                }
            }
            Ok(())
        }

        fn routine(&self) -> &Routine {
            &self.0
        }
    }

    fn squares(_: &Graph, p: &[Tensor]) -> Tensor {
        p[0].pmul(&p[0])
    }

    const INPUTS: Inputs<'static> = Inputs {
        shapes: &["2,3"],
        positive: false,
    };

    #[test]
    fn backprop_computes_in_the_precision_asked_for() {
        let start: Vec<f64> = test_values(6, 17)
            .iter()
            .map(|&x| f64::from(x as f32))
            .collect();
        let got = backprop(Box::new(Interpreter), &INPUTS, Precision::F32, squares).unwrap();
        let expected_values: Vec<f64> = start.iter().map(|x| f64::from((x * x) as f32)).collect();
        let expected_gradient: Vec<f64> = start.iter().map(|x| 2.0 * x).collect();
        assert_eq!(got.values, expected_values);
        assert_eq!(got.gradients, vec![expected_gradient]);
    }

    #[test]
    fn comparing_a_backend_with_itself_agrees_and_with_a_skewed_one_names_the_cell() {
        compare_gradients(
            Box::new(Interpreter),
            Box::new(Interpreter),
            &INPUTS,
            Precision::F32,
            1e-6,
            squares,
        )
        .unwrap();
        let e = compare_gradients(
            Box::new(Interpreter),
            Box::new(Skewed),
            &INPUTS,
            Precision::F32,
            1e-3,
            squares,
        )
        .unwrap_err();
        assert!(
            e.message.contains("gradient comparison: the result["),
            "{}",
            e.message
        );
        assert!(e.message.contains("interpreter"), "{}", e.message);
        assert!(e.message.contains("skewed"), "{}", e.message);
        // Within a tolerance larger than the skew, they agree.
        compare_gradients(
            Box::new(Interpreter),
            Box::new(Skewed),
            &INPUTS,
            Precision::F32,
            0.05,
            squares,
        )
        .unwrap();
    }
}
