//! Where an optimizer's tensors come from: the precision of each parameter's state and of what
//! the optimizer shares among its parameters, the state tensors and the scalar settings it holds.

use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, Tensor, TensorError};

/// The precision of `param`'s state: f64 for an f64 parameter, so that its gradient is never
/// rounded to f32 on its way into the update; f32 for the others (an f16 or bf16 parameter's
/// squared gradients would underflow in its own precision).
pub(super) fn state_precision(param: &Tensor) -> Precision {
    match param.precision() {
        Precision::F64 => Precision::F64,
        _ => Precision::F32,
    }
}

/// The precision of what an optimizer shares among its parameters (the learning rate, the step
/// count, the global gradient norm, the bias corrections): f64 when any parameter is f64, else
/// f32, which every backend holds (the GPU has no f64).
pub(super) fn shared_precision(params: &[Tensor]) -> Precision {
    (params.iter().map(state_precision))
        .find(|&p| p == Precision::F64)
        .unwrap_or(Precision::F32)
}

/// A parameter's dims by kind: batch, input and output axes.
pub(super) type Rows = [Vec<usize>; 3];

/// The rows of each of `params`, all read after one inference: the state tensors made from them
/// must be made afterwards, since each new tensor would have the whole graph inferred again
/// before the next parameter's rows (an optimizer of many parameters would take time growing
/// with their number times the graph's size).
pub(super) fn rows_of(ctx: &mut Context, params: &[Tensor]) -> Result<Vec<Rows>, TensorError> {
    params.iter().map(|param| ctx.rows(param)).collect()
}

/// A state tensor of `param`'s shape (its `rows`, from [`rows_of`]) and of its state precision,
/// starting at zero. It is declared with that shape rather than related to the parameter, so
/// that it can never influence what the parameter's shape is inferred to be.
pub(super) fn state_like(param: &Tensor, [batch, input, output]: &Rows, name: &str) -> Tensor {
    let row = |dims: &[usize]| {
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let literal = format!("{}|{}->{}", row(batch), row(input), row(output));
    // Moments start at zero, set when a context first holds them: a tensor never given any
    // values is an error to read.
    param
        .graph()
        .data(&format!("{} {name}", param.label()))
        .shape(&literal)
        .precision(state_precision(param))
        .init(Init::Constant(0.0))
        .build()
}

/// One scalar tensor of `precision` holding `value`.
pub(super) fn scalar(graph: &Graph, label: &str, precision: Precision, value: f64) -> Tensor {
    (graph.data(label).shape("1").precision(precision))
        .values(vec![value])
        .build()
}

/// The learning-rate tensor of `params` holding `lr`, in their shared precision; each update
/// reads it in its parameter's precision.
pub(super) fn learning_rate(graph: &Graph, lr: f64, params: &[Tensor]) -> Tensor {
    scalar(graph, "lr", shared_precision(params), lr)
}
