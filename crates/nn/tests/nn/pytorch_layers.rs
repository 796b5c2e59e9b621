//! The layers a PyTorch user reaches for first, against PyTorch with the same weights
//! (`tests/pytorch/layers/reference.py` wrote the arrays): `blocks::Linear` against
//! `nn.Linear` on a sequence, layer and RMS normalization over two trailing axes, batch
//! normalization's cumulative running statistics (`momentum=None`), and multi-head attention
//! with biases and boolean or additive masks against `nn.MultiheadAttention`. Each on the
//! interpreter and the C backend, in f64 (and the batch norm's statistics in f32 too).

use std::path::PathBuf;

use rcannl_ir::Precision;
use rcannl_nn::attention::{AttendOptions, MultiheadAttention};
use rcannl_nn::blocks::{Linear, LinearOptions};
use rcannl_nn::loss::sum;
use rcannl_nn::norm::{BatchNorm, LayerNorm, Mode, RmsNorm};
use rcannl_tensor::{Context, Graph, Init, Tensor, npy};

use crate::support::{self, backends};

/// The path of PyTorch's array `name`.
fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pytorch/layers")
        .join(format!("{name}.npy"))
}

/// PyTorch's array `name`, its cells row-major.
fn pytorch(name: &str) -> Vec<f64> {
    let path = path(name);
    let reader = npy::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (_, cells) = reader
        .read_cells(usize::MAX)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    cells.into_iter().map(|c| c.as_f64()).collect()
}

/// Checks `got` against PyTorch's array `name` within `tolerance`, relative to the larger of
/// each value and the largest one compared (cells near zero are differences of larger terms).
fn check(what: &str, got: &[f64], name: &str, tolerance: f64) {
    let want = pytorch(name);
    assert_eq!(got.len(), want.len(), "{what}: number of cells");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let error = (g - w).abs() / w.abs().max(scale);
        assert!(
            error <= tolerance,
            "{what}, cell {i}: {g} vs PyTorch's {w} (relative error {error:.2e})"
        );
    }
}

/// An f64 data tensor of `shape` holding PyTorch's array `name`.
fn data(graph: &Graph, name: &str, shape: &str) -> Tensor {
    support::data(graph, name, shape, pytorch(name))
}

/// An f64 parameter of `shape` starting from PyTorch's array `name`.
fn param(graph: &Graph, name: &str, shape: &str) -> Tensor {
    graph
        .param(name)
        .shape(shape)
        .precision(Precision::F64)
        .init(Init::Values(pytorch(name)))
        .build()
}

/// A context on `backend` with the parameters initialized, then each `(tensor, array)` loaded.
fn context(
    graph: &Graph,
    backend: Box<dyn rcannl_backends::Backend>,
    load: &[(&Tensor, &str)],
) -> Context {
    let mut ctx = Context::with_backend(graph, backend);
    ctx.init_params().unwrap();
    for (t, name) in load {
        ctx.load_npy(t, path(name)).unwrap();
    }
    ctx
}

/// Runs the forward pass of `outputs`.
fn forward(ctx: &mut Context, outputs: &[&Tensor]) {
    let routine = ctx.forward(outputs).unwrap();
    ctx.run(&routine).unwrap();
}

#[test]
fn linear_over_the_last_axis_of_a_sequence_matches_torch_nn_linear() {
    for backend in backends() {
        let what = format!("Linear on {}", backend.name());
        let graph = Graph::new();
        let x = data(&graph, "linear.x", "2|->5,4");
        let r = data(&graph, "linear.r", "2|->5,3");
        let f64_options = LinearOptions::new().precision(Precision::F64);
        let linear = Linear::with_options(&graph, "linear", &[3], f64_options);
        let y = linear.apply(&x);
        let unbiased = Linear::with_options(&graph, "unbiased", &[3], f64_options.bias(false));
        let y_unbiased = unbiased.apply(&x);
        let heads = Linear::with_options(&graph, "heads", &[2, 3], f64_options);
        let y_heads = heads.apply(&x);
        let flat_x = data(&graph, "linear.flat.x", "2|->3,4");
        let flat = Linear::with_options(&graph, "flat", &[5], f64_options.contracted_axes(2));
        let y_flat = flat.apply(&flat_x);
        let loss = sum(&y.pmul(&r));
        assert_eq!(unbiased.params().len(), 1, "{what}: no bias without one");
        let b = linear.b.as_ref().unwrap();
        let mut ctx = context(
            &graph,
            backend,
            &[
                (&linear.w, "linear.w"),
                (b, "linear.b"),
                (&unbiased.w, "linear.w"),
                (&heads.w, "linear.heads.w"),
                (heads.b.as_ref().unwrap(), "linear.heads.b"),
                (&flat.w, "linear.flat.w"),
                (flat.b.as_ref().unwrap(), "linear.flat.b"),
            ],
        );
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run(&backprop).unwrap();
        forward(&mut ctx, &[&y, &y_unbiased, &y_heads, &y_flat]);
        assert_eq!(ctx.dims(&y).unwrap(), vec![2, 5, 3], "{what}");
        assert_eq!(ctx.dims(&linear.w).unwrap(), vec![3, 4], "{what}");
        assert_eq!(ctx.dims(&y_heads).unwrap(), vec![2, 5, 2, 3], "{what}");
        assert_eq!(ctx.dims(&y_flat).unwrap(), vec![2, 5], "{what}");
        let tolerance = 1e-12;
        check(&what, &ctx.values(&y).unwrap(), "linear.y", tolerance);
        check(
            &what,
            &ctx.grad(&linear.w).unwrap(),
            "linear.grad_w",
            tolerance,
        );
        check(&what, &ctx.grad(b).unwrap(), "linear.grad_b", tolerance);
        let got = ctx.values(&y_unbiased).unwrap();
        check(&what, &got, "linear.y_nobias", tolerance);
        check(
            &what,
            &ctx.values(&y_heads).unwrap(),
            "linear.heads.y",
            tolerance,
        );
        check(
            &what,
            &ctx.values(&y_flat).unwrap(),
            "linear.flat.y",
            tolerance,
        );
    }
}

/// Normalizes `x` over its last two axes with the norm `name` (`layer_norm` or `rms_norm`),
/// returning the result and the parameters with the names of their PyTorch gradients.
fn norm_over_two_axes<'a>(
    graph: &Graph,
    name: &str,
    x: &Tensor,
) -> (Tensor, Vec<(Tensor, &'a str)>) {
    if name == "layer_norm" {
        let norm = LayerNorm::with_precision(graph, name, Precision::F64);
        let params = vec![(norm.gain.clone(), "gain"), (norm.bias.clone(), "bias")];
        (norm.apply_trailing(x, 2), params)
    } else {
        let norm = RmsNorm::with_precision(graph, name, Precision::F64);
        (norm.apply_trailing(x, 2), vec![(norm.gain.clone(), "gain")])
    }
}

#[test]
fn layer_and_rms_norms_over_two_trailing_axes_match_pytorch() {
    for norm in ["layer_norm", "rms_norm"] {
        for backend in backends() {
            let what = format!("{norm} on {}", backend.name());
            let graph = Graph::new();
            let x = param(&graph, "norm.x", "2,3|->4,5");
            let r = data(&graph, "norm.r", "2,3|->4,5");
            let (y, params) = norm_over_two_axes(&graph, norm, &x);
            let arrays: Vec<String> = params.iter().map(|(_, n)| format!("{norm}.{n}")).collect();
            let load: Vec<(&Tensor, &str)> = params
                .iter()
                .zip(&arrays)
                .map(|((p, _), array)| (p, array.as_str()))
                .collect();
            let mut ctx = context(&graph, backend, &load);
            let backprop = ctx.backprop(&sum(&y.pmul(&r))).unwrap();
            ctx.run(&backprop).unwrap();
            forward(&mut ctx, &[&y]);
            let tolerance = 1e-10;
            check(
                &what,
                &ctx.values(&y).unwrap(),
                &format!("{norm}.y"),
                tolerance,
            );
            check(
                &what,
                &ctx.grad(&x).unwrap(),
                &format!("{norm}.grad_x"),
                tolerance,
            );
            for (p, name) in &params {
                assert_eq!(ctx.dims(p).unwrap(), vec![4, 5], "{what}: {name}");
                let got = ctx.grad(p).unwrap();
                check(&what, &got, &format!("{norm}.grad_{name}"), tolerance);
            }
        }
    }
}

/// Three training steps of a cumulative batch norm of `channels` channels over PyTorch's
/// batches `<name>.x.<k>` (of `shape`), its statistics in `precision`; after each, `check_step`
/// is given the context, the step and the block's output.
fn cumulative_batch_norm_steps(
    name: &str,
    shape: &str,
    channels: usize,
    precision: Precision,
    check_step: impl Fn(&mut Context, usize, &BatchNorm, &Tensor),
) {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape(shape)
            .precision(precision)
            .values(pytorch(&format!("{name}.x.0")))
            .build();
        let norm = BatchNorm::with_cumulative_average(&graph, name, channels, precision);
        let y = norm.apply(&x, Mode::Train);
        let mut ctx = context(&graph, backend, &[]);
        let backprop = ctx.backprop(&sum(&y.pmul(&y))).unwrap();
        for step in 0..3 {
            ctx.load_npy(&x, path(&format!("{name}.x.{step}"))).unwrap();
            ctx.run(&backprop).unwrap();
            // Its train-mode output, which a forward pass computes without a step's updates.
            forward(&mut ctx, &[&y]);
            check_step(&mut ctx, step, &norm, &y);
        }
        assert_eq!(norm.state().len(), 3, "mean, variance and count");
        assert_eq!(
            ctx.values(&norm.state()[2]).unwrap(),
            vec![3.0],
            "batches tracked"
        );
    }
}

#[test]
fn batch_norm_1d_with_a_cumulative_average_matches_pytorch_momentum_none() {
    cumulative_batch_norm_steps("bn1d", "8|->3", 3, Precision::F64, |ctx, step, norm, y| {
        let what = format!("BatchNorm1d step {step}");
        check(
            &what,
            &ctx.values(y).unwrap(),
            &format!("bn1d.y.{step}"),
            1e-10,
        );
        let mean = ctx.values(&norm.running_mean).unwrap();
        check(&what, &mean, &format!("bn1d.running_mean.{step}"), 1e-12);
        let var = ctx.values(&norm.running_var).unwrap();
        check(&what, &var, &format!("bn1d.running_var.{step}"), 1e-12);
    });
}

#[test]
fn batch_norm_2d_with_a_cumulative_average_matches_pytorch_momentum_none() {
    for (precision, tolerance) in [(Precision::F64, 1e-12), (Precision::F32, 1e-5)] {
        cumulative_batch_norm_steps("bn2d", "4|->3,3,2", 2, precision, |ctx, step, norm, _| {
            if step == 2 {
                let what = format!("BatchNorm2d in {precision:?}");
                let mean = ctx.values(&norm.running_mean).unwrap();
                check(&what, &mean, "bn2d.running_mean", tolerance);
                let var = ctx.values(&norm.running_var).unwrap();
                check(&what, &var, "bn2d.running_var", tolerance);
            }
        });
    }
}

#[test]
fn multihead_attention_with_biases_and_boolean_or_additive_masks_matches_pytorch() {
    for case in ["bool", "additive"] {
        for backend in backends() {
            let what = format!("{case} masks on {}", backend.name());
            let graph = Graph::new();
            let queries = data(&graph, "mha.queries", "2|->5,8");
            let memory = data(&graph, "mha.memory", "2|->6,8");
            let options = if case == "bool" {
                // True = ignored, as nn.MultiheadAttention's boolean masks.
                AttendOptions::new()
                    .mask_where_true(&data(&graph, "mha.attn_mask", "5,6"))
                    .mask_where_true(&data(&graph, "mha.key_padding", "2|->6"))
            } else {
                AttendOptions::new().additive_mask(&data(&graph, "mha.additive", "5,6"))
            };
            let attention =
                MultiheadAttention::with_precision(&graph, "mha", [8, 2], true, Precision::F64)
                    .unwrap();
            let y = attention.apply_with(&queries, &memory, &options);
            let weights = attention.weights(&queries, &memory, &options);
            let params = attention.params();
            assert_eq!(params.len(), 8, "{what}: four projections and four biases");
            let labels: Vec<String> = params.iter().map(Tensor::label).collect();
            let load: Vec<(&Tensor, &str)> = params
                .iter()
                .zip(&labels)
                .map(|(p, l)| (p, l.as_str()))
                .collect();
            let mut ctx = context(&graph, backend, &load);
            forward(&mut ctx, &[&y, &weights]);
            assert_eq!(ctx.dims(&y).unwrap(), vec![2, 5, 8], "{what}");
            assert_eq!(ctx.dims(&weights).unwrap(), vec![2, 2, 5, 6], "{what}");
            check(
                &what,
                &ctx.values(&y).unwrap(),
                &format!("mha.{case}.y"),
                1e-10,
            );
            let got = ctx.values(&weights).unwrap();
            check(
                &format!("{what}: weights"),
                &got,
                &format!("mha.{case}.weights"),
                1e-10,
            );
        }
    }
}
