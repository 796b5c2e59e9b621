//! A loss of one's own, as a PyTorch user writes a `torch.autograd.Function`: the Huber loss
//! defined with `cd!` by its forward formula and its gradient, the gradient checked against
//! finite differences (PyTorch's `gradcheck`), then used to fit a line to points of which one
//! in ten is an outlier — beside the same fit by the squared error, which the outliers pull
//! away.
//!
//! `cargo run --release --example custom_loss`

use rcannl::backends::Interpreter;
use rcannl::nn::blocks::Linear;
use rcannl::nn::data::Rng;
use rcannl::nn::loss::{mean, mse};
use rcannl::nn::optim::Adam;
use rcannl::nn::train::{Plan, fit_step};
use rcannl::prelude::*;
use rcannl::tensor::gradcheck::{Inputs, check_gradients};

const POINTS: usize = 200;
const SLOPE: f64 = 2.0;
const INTERCEPT: f64 = 1.0;

cd! {
    /// The Huber loss of each `prediction` against its `target`: `d²/2` where the residual `d`
    /// is within `delta`, `delta·(|d| − delta/2)` beyond. Its gradient is the residual clipped
    /// to `[−delta, delta]` for the prediction, minus that for the target.
    fn huber(prediction, target, delta: f64) {
        v =: where_((v1 - v2) * (v1 - v2) < delta * delta,
                    0.5 * (v1 - v2) * (v1 - v2),
                    delta * (max(v1 - v2, v2 - v1) - 0.5 * delta));
        g1 =+ g * max(-delta, min(delta, v1 - v2));
        g2 =- g * max(-delta, min(delta, v1 - v2));
    }
}

/// Points on `y = SLOPE·x + INTERCEPT` with a little noise, every tenth moved far above it.
fn points(rng: &mut Rng) -> (Vec<f64>, Vec<f64>) {
    let xs: Vec<f64> = (0..POINTS)
        .map(|i| -2.0 + 4.0 * i as f64 / POINTS as f64)
        .collect();
    let ys = xs
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let outlier = if i % 10 == 3 { 15.0 } else { 0.0 };
            SLOPE * x + INTERCEPT + 0.1 * rng.normal() + outlier
        })
        .collect();
    (xs, ys)
}

/// The slope and intercept a line fitted by `loss` (of the predictions and the targets) finds.
fn fit(
    xs: &[f64],
    ys: &[f64],
    loss: impl Fn(&Tensor, &Tensor) -> Tensor,
) -> Result<(f64, f64), TensorError> {
    let graph = Graph::new();
    let shape = format!("1,{POINTS}|->1");
    let x = graph.data("x").shape(&shape).values(xs.to_vec()).build();
    let y = graph.data("y").shape(&shape).values(ys.to_vec()).build();
    let line = Linear::new(&graph, "line", 1);
    let batch = graph.static_index();
    let loss = loss(&line.apply(&x.slice(&batch)), &y.slice(&batch));
    let mut ctx = Context::new(&graph);
    ctx.init_params()?;
    let mut adam = Adam::new(&graph, &line.params(), 0.05);
    let step = adam.compile_step(&mut ctx, &loss)?;
    let plan = Plan {
        epochs: 600,
        batches: 1,
        batch_size: POINTS,
        progress: false,
    };
    fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(()))?;
    let bias = line.b.as_ref().expect("a bias");
    Ok((ctx.values(&line.w)?[0], ctx.values(bias)?[0]))
}

fn main() -> Result<(), TensorError> {
    // The gradient written by hand, against finite differences of the forward formula, at
    // residuals on both sides of delta.
    let inputs = Inputs {
        shapes: &["3,4", "3,4"],
        positive: false,
    };
    check_gradients(Box::new(Interpreter), &inputs, 1e-6, |_, t| {
        huber(&t[0], &t[1], 0.5)
    })?;
    println!("huber's gradient agrees with finite differences");

    let (xs, ys) = points(&mut Rng::new(3));
    let (huber_slope, huber_intercept) = fit(&xs, &ys, |p, t| mean(&huber(p, t, 1.0)))?;
    let (mse_slope, mse_intercept) = fit(&xs, &ys, mse)?;
    println!("the line: slope {SLOPE}, intercept {INTERCEPT}; one point in ten 15 above it");
    println!("fitted by the Huber loss:    slope {huber_slope:.3}, intercept {huber_intercept:.3}");
    println!("fitted by the squared error: slope {mse_slope:.3}, intercept {mse_intercept:.3}");
    Ok(())
}
