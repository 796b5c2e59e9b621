//! Dropout: counter-based, so the same seed and step give the same mask on every backend.

use rcannl_tensor::Tensor;

/// Zeroes each cell with probability `p` and scales the rest by `1/(1 − p)`; the mask is drawn
/// afresh for each value of `step` (a u32 tensor without axes, shape `""`, that the training
/// loop advances).
#[track_caller]
pub fn dropout(x: &Tensor, p: f64, step: &Tensor) -> Tensor {
    x.graph().called("nn::dropout::dropout", || {
        let graph = x.graph();
        let u = graph.uniform_at(&format!("dropout of {}", x.label()), step);
        graph.same_shape(&u, x);
        let keep = u.lt(&graph.number(p)).not();
        x.pmul(&keep) * (1.0 / (1.0 - p))
    })
}
