//! Loops longer than one GPU invocation may run (lavapipe ends a shader after 65535 iterations
//! of its loops, silently) give the interpreter's results: a long serial statement runs as a
//! sequence of dispatches, and a nest's disjoint loops move outward to become invocations.

use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Tensor};

use super::device;

use crate::target::Target;

/// The sum of all cells of a tensor of `dims` holding `1 + (cell mod 3)`: exact in f32.
fn total(backend: Box<dyn Backend>, dims: &[usize]) -> (f64, String) {
    let graph = Graph::new();
    let cells: usize = dims.iter().product();
    let shape: Vec<String> = dims.iter().map(ToString::to_string).collect();
    let x = graph
        .data("x")
        .shape(&shape.join(","))
        .values((0..cells).map(|i| 1.0 + (i % 3) as f64).collect())
        .build();
    let spec = if dims.len() == 1 { "i=>" } else { "ij=>" };
    let sum = x.einsum1(spec);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.run(&forward).unwrap();
    (
        ctx.values(&sum).unwrap()[0],
        forward.source().unwrap_or_default(),
    )
}

fn long_serial_sums_run_in_ordered_dispatches(target: &Target) {
    let gpu = device(target);
    for dims in [vec![70_000], vec![300, 300], vec![3, 100_000]] {
        let cells: usize = dims.iter().product();
        let want = (0..cells).map(|i| 1.0 + (i % 3) as f64).sum::<f64>();
        let (got, code) = total(Box::new(gpu.clone()), &dims);
        assert_eq!(got, want, "{dims:?}");
        assert!(code.contains("dispatched"), "{dims:?}:\n{code}");
        assert_eq!(total(Box::new(Interpreter), &dims).0, want);
    }
}
conformance!(long_serial_sums_run_in_ordered_dispatches: gpu);

/// Cells in [-1, 1), multiples of 2^-10.
fn values(cells: usize, seed: usize) -> Vec<f64> {
    (0..cells)
        .map(|i| ((i * 7919 + seed * 104_729) % 2048) as f64 / 1024.0 - 1.0)
        .collect()
}

/// A padded 3×3 convolution of 32 one-channel 16×16 images into 8 channels, weighted per output
/// cell and summed: the loss, and the gradients of the input and the kernel.
fn convolution(backend: Box<dyn Backend>) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let x = graph
        .param("x")
        .shape("32|->16,16,1")
        .values(values(32 * 16 * 16, 1))
        .build();
    let kernel = graph
        .param("kernel")
        .shape("3,3,1->8")
        .values(values(9 * 8, 2))
        .build();
    let convolved = x.einsum(
        "...|...->h=+kh, w=+kw, c; kh, kw, c -> d => ...|...->h, w, d",
        &kernel,
    );
    for label in ["kh", "kw"] {
        let capture = convolved.capture(label).unwrap();
        graph.set_dim(&capture, 3).unwrap();
    }
    let weights = graph
        .data("weights")
        .shape("32|->16,16,8")
        .values(values(32 * 16 * 16 * 8, 3))
        .build();
    let loss: Tensor = convolved.pmul(&weights).einsum1("...|...->... => ");
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    vec![
        ctx.values(&loss).unwrap(),
        ctx.grad(&x).unwrap(),
        ctx.grad(&kernel).unwrap(),
    ]
}

fn a_convolution_over_a_large_batch_has_the_oracles_gradients(target: &Target) {
    let gpu = device(target);
    let reference = convolution(Box::new(Interpreter));
    let ours = convolution(Box::new(gpu));
    for (what, (a, b)) in ["loss", "input gradient", "kernel gradient"]
        .iter()
        .zip(ours.iter().zip(&reference))
    {
        let largest = b.iter().fold(0f64, |m, x| m.max(x.abs()));
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-4 * largest,
                "{what} cell {i}: GPU {x}, interpreter {y}"
            );
        }
    }
}
conformance!(a_convolution_over_a_large_batch_has_the_oracles_gradients: gpu);
