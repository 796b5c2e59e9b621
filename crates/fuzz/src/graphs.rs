//! Random tensor graphs, trained one step on both backends: the loss and every parameter's
//! gradient must agree.
//!
//! A graph starts from two or three parameters (matrices or vectors of random sizes, f64 or
//! f32) and applies two to eight random operations, each to tensors already made: pointwise
//! unary and binary operations, choices (`where`, maxima), contractions, transposes and
//! reductions. The loss is the sum of every tensor nothing else read, so that every parameter
//! has a gradient. Shapes are inferred, routines lowered, optimized and compiled as for any
//! user's model. [`check`] runs a graph on the C backend, [`check_on`] on any backend.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Init, Tensor, TensorError};

use crate::rng::{Draw, Rng};
use crate::{Comparison, Mismatch, Precisions, close};

/// A tensor of the graph being made, its dims (one or two output axes), and whether something
/// read it.
struct Made {
    tensor: Tensor,
    dims: Vec<usize>,
    read: bool,
}

/// The graph made from `seed`: its parameters, its loss, and a description of how it was made.
pub fn graph(seed: u64, graph: &Graph) -> (Vec<Tensor>, Tensor, Precision, String) {
    graph_in(seed, graph, Precisions::All)
}

/// The graph made from `seed` in one of `precisions`, as [`graph`] describes.
pub fn graph_in(
    seed: u64,
    graph: &Graph,
    precisions: Precisions,
) -> (Vec<Tensor>, Tensor, Precision, String) {
    let mut rng = Rng::new(seed);
    let precision = precisions.fit(if rng.one_in(4) {
        Precision::F32
    } else {
        Precision::F64
    });
    let mut made: Vec<Made> = Vec::new();
    let mut params = Vec::new();
    let mut recipe = Vec::new();
    for i in 0..rng.between(2, 3) {
        let dims: Vec<usize> = (0..rng.between(1, 2)).map(|_| rng.between(1, 5)).collect();
        let cells = dims.iter().product();
        let literal = dims
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let tensor = graph
            .param(&format!("p{i}"))
            .shape(&literal)
            .precision(precision)
            .init(Init::Values(test_values(
                cells,
                seed.wrapping_add(i as u64),
            )))
            .build();
        recipe.push(format!("p{i}: {literal}"));
        params.push(tensor.clone());
        made.push(Made {
            tensor,
            dims,
            read: false,
        });
    }
    for _ in 0..rng.between(2, 8) {
        let x = rng.below(made.len());
        let same: Vec<usize> = (0..made.len())
            .filter(|&j| made[j].dims == made[x].dims)
            .collect();
        let y = *rng.pick(&same);
        let (a, b) = (&made[x].tensor, &made[y].tensor);
        let (dims_x, dims_y) = (made[x].dims.clone(), made[y].dims.clone());
        let (tensor, dims, what) = match rng.below(8) {
            0 => {
                let (name, t) = match rng.below(7) {
                    0 => ("relu", a.relu()),
                    1 => ("tanh", a.tanh()),
                    2 => ("neg", a.neg()),
                    3 => ("sin", a.sin()),
                    4 => ("exp", (a * 0.5).exp()),
                    5 => ("sat01", (a * 0.4).sat01()),
                    _ => ("scale", a * 1.5),
                };
                (t, dims_x, format!("{name}(t{x})"))
            }
            1 => {
                let (name, t) = match rng.below(5) {
                    0 => ("+", a + b),
                    1 => ("-", a - b),
                    2 => ("pmul", a.pmul(b)),
                    3 => ("max", a.max(b)),
                    _ => ("min", a.min(b)),
                };
                (t, dims_x, format!("t{x} {name} t{y}"))
            }
            2 => (
                Tensor::where_(&a.lt(b), a, b),
                dims_x,
                format!("where(t{x} < t{y}, t{x}, t{y})"),
            ),
            3 | 4 => {
                // A contraction with any tensor sharing an axis size.
                let partner = (0..made.len()).find(|&j| {
                    j != x && made[j].dims.first() == dims_x.last() && made[j].dims.len() <= 2
                });
                match (partner, dims_x.len()) {
                    (Some(j), 2) if made[j].dims.len() == 2 => (
                        a.einsum("ij;jk=>ik", &made[j].tensor),
                        vec![dims_x[0], made[j].dims[1]],
                        format!("t{x} ij;jk=>ik t{j}"),
                    ),
                    (Some(j), 2) => (
                        a.einsum("ij;j=>i", &made[j].tensor),
                        vec![dims_x[0]],
                        format!("t{x} ij;j=>i t{j}"),
                    ),
                    (Some(j), _) if made[j].dims.len() == 2 => (
                        a.einsum("j;jk=>k", &made[j].tensor),
                        vec![made[j].dims[1]],
                        format!("t{x} j;jk=>k t{j}"),
                    ),
                    (Some(j), _) => (
                        a.einsum("j;j=>j", &made[j].tensor),
                        dims_x,
                        format!("t{x} j;j=>j t{j}"),
                    ),
                    (None, 2) => (
                        a.einsum1("ij=>ji"),
                        vec![dims_x[1], dims_x[0]],
                        format!("t{x}ᵀ"),
                    ),
                    (None, _) => (a.exp(), dims_x, format!("exp(t{x})")),
                }
            }
            5 if dims_x.len() == 2 => (a.einsum1("ij=>i"), vec![dims_x[0]], format!("Σ_j t{x}")),
            5 => (a.einsum1("i=>i"), dims_x, format!("copy(t{x})")),
            6 => (
                a.einsum1(if dims_x.len() == 2 { "ij=>ji" } else { "i=>i" })
                    .relu(),
                dims_x.iter().rev().copied().collect(),
                format!("relu(t{x}ᵀ)"),
            ),
            _ => (
                Tensor::fma(a, b, a),
                dims_y,
                format!("fma(t{x}, t{y}, t{x})"),
            ),
        };
        made[x].read = true;
        made[y].read = true;
        recipe.push(format!("t{} = {what}", made.len()));
        made.push(Made {
            tensor,
            dims,
            read: false,
        });
    }
    let mut loss: Option<Tensor> = None;
    for m in made.iter().filter(|m| !m.read) {
        let total = m
            .tensor
            .einsum1(if m.dims.len() == 2 { "ij=>" } else { "i=>" });
        loss = Some(match loss {
            Some(l) => &l + &total,
            None => total,
        });
    }
    let loss = loss.expect("the last tensor is never read");
    (params, loss, precision, recipe.join("; "))
}

/// The loss and every parameter's gradient after one backpropagation of the graph of `seed` (in
/// one of `precisions`) on `backend`.
fn run(
    seed: u64,
    precisions: Precisions,
    backend: Box<dyn Backend>,
) -> Result<(Vec<f64>, Precision, String), TensorError> {
    let g = Graph::new();
    let (params, loss, precision, recipe) = graph_in(seed, &g, precisions);
    let mut ctx = Context::with_backend(&g, backend);
    ctx.init_params()?;
    let backprop = ctx.backprop(&loss)?;
    ctx.run(&backprop)?;
    let mut results = ctx.values(&loss)?;
    for p in &params {
        // A parameter the loss reads only through operations without a gradient (a comparison)
        // has none kept: NaN stands for it, on both backends alike.
        match ctx.grad(p) {
            Ok(grad) => results.extend(grad),
            Err(_) => results.push(f64::NAN),
        }
    }
    Ok((results, precision, recipe))
}

/// Runs the graph of `seed` on the interpreter and with `compiler`.
pub fn check(compiler: &Compiler, seed: u64) -> Result<(), Mismatch> {
    check_on(Box::new(compiler.clone()), seed, &Comparison::HOST)
}

/// Runs the graph of `seed`, in the precisions `comparison` allows, on the interpreter and on
/// `backend`.
pub fn check_on(
    backend: Box<dyn Backend>,
    seed: u64,
    comparison: &Comparison,
) -> Result<(), Mismatch> {
    let mismatch = |message: String| Mismatch { seed, message };
    let name = backend.name();
    let (want, precision, recipe) = run(seed, comparison.precisions, Box::new(Interpreter))
        .map_err(|e| mismatch(format!("the interpreter failed: {e}")))?;
    let (got, _, _) = run(seed, comparison.precisions, backend)
        .map_err(|e| mismatch(format!("the {name} backend failed: {e}\n{recipe}")))?;
    if want.len() != got.len() {
        return Err(mismatch(format!(
            "the interpreter gave {} values (the loss and the gradients), {name} {}\n{recipe}",
            want.len(),
            got.len()
        )));
    }
    let relative = comparison.tolerance.of(precision);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if !close(*w, *g, relative) {
            let what = if i == 0 {
                "the loss".to_owned()
            } else {
                format!("gradient cell {}", i - 1)
            };
            return Err(mismatch(format!(
                "{what}: interpreter {w}, {name} {g}\n{recipe}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_are_functions_of_their_seed() {
        let (_, _, _, a) = graph(5, &Graph::new());
        let (_, _, _, b) = graph(5, &Graph::new());
        assert_eq!(a, b);
        let recipes: std::collections::HashSet<String> =
            (0..40).map(|s| graph(s, &Graph::new()).3).collect();
        assert!(recipes.len() > 35, "{}", recipes.len());
    }

    #[test]
    fn graphs_for_a_gpu_are_the_same_graphs_in_f32() {
        let gpu = Precisions::Gpu {
            f16: false,
            int64: false,
            f64: false,
        };
        for seed in 0..20 {
            let (_, _, _, recipe) = graph(seed, &Graph::new());
            let (params, _, precision, device_recipe) = graph_in(seed, &Graph::new(), gpu);
            assert_eq!(precision, Precision::F32, "seed {seed}");
            assert!(params.iter().all(|p| p.precision() == Precision::F32));
            assert_eq!(recipe, device_recipe, "seed {seed}");
        }
    }
}
