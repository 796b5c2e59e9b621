//! Models of many tensors run on the GPU whatever its limit on the storage buffers a kernel
//! binds: tensors share arenas. `RCANNL_GPU_ARENA_BYTES` (set by CI for a second run of this
//! case) spreads them over many arenas, which the kernels then bind by place.

use rcannl_backends::{Backend, Interpreter};
use rcannl_nn::optim::Sgd;
use rcannl_tensor::{Context, Graph, Tensor, UnaryOp};

use super::device;

use crate::target::Target;

/// Layers of a deep tanh network, two parameter tensors each.
const LAYERS: usize = 100;

/// The parameters of a `LAYERS`-deep network of 4 × 4 tanh layers after `steps` steps of SGD
/// with momentum on the sum of squares of its output, on `backend`.
fn trained(backend: Box<dyn Backend>, steps: usize) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("8|->4")
        .values((0..32).map(|i| (i % 5) as f64 / 4.0 - 0.5).collect())
        .build();
    let mut params: Vec<Tensor> = Vec::new();
    let mut h = x;
    for layer in 0..LAYERS {
        let w = graph
            .param(&format!("w{layer}"))
            .shape("4->4")
            .values(
                (0..16)
                    .map(|i| ((i * 7 + layer * 3) % 11) as f64 / 10.0 - 0.5)
                    .collect(),
            )
            .build();
        let b = graph
            .param(&format!("b{layer}"))
            .shape("4")
            .values((0..4).map(|i| (i + layer) as f64 / 100.0).collect())
            .build();
        h = (w.compose(&h) + b.clone()).unary(UnaryOp::Tanh);
        params.extend([w, b]);
    }
    let loss = h.pmul(&h).einsum1("...|...->... => ");
    let mut sgd = Sgd::new(&graph, &params, 0.05, 0.9);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = sgd.compile(&mut ctx).unwrap();
    for _ in 0..steps {
        ctx.run(&backprop).unwrap();
        ctx.run(&step).unwrap();
    }
    params.iter().map(|p| ctx.values(p).unwrap()).collect()
}

/// 200 parameter tensors, their gradients and momenta: three training steps give the
/// interpreter's parameters.
fn a_model_of_two_hundred_parameter_tensors_trains(target: &Target) {
    let gpu = device(target);
    let ours = trained(Box::new(gpu), 3);
    let reference = trained(Box::new(Interpreter), 3);
    assert_eq!(ours.len(), 2 * LAYERS);
    for (i, (a, b)) in ours.iter().zip(&reference).enumerate() {
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-5 * y.abs().max(1.0),
                "parameter {i}: GPU {x}, interpreter {y}"
            );
        }
    }
}
conformance!(a_model_of_two_hundred_parameter_tensors_trains: gpu);
