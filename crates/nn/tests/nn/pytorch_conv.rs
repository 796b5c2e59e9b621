//! Convolutions and pooling with PyTorch's options against PyTorch with the same weights
//! (`tests/pytorch/conv/reference.py` wrote the arrays): strides whose output sizes round down,
//! explicit and `same` padding, dilation, groups; max-pooling rounded down and up, padded,
//! dilated, with windows other than strides; average pooling padded and rounded up, counting the
//! padding or not; max-pooling's gradient to the first of tied maxima. Outputs and the gradients of `sum(y·r)`, on the interpreter and the C
//! backend, in f64.

use std::path::PathBuf;

use rcannl_ir::Precision;
use rcannl_nn::conv::{
    Conv2d, ConvOptions, Padding, PoolOptions, Ties, avg_pool2d_with, max_pool2d_with,
};
use rcannl_nn::loss::sum;
use rcannl_tensor::{Context, Graph, Tensor, npy};

use crate::support::backends;

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pytorch/conv")
        .join(format!("{name}.npy"))
}

/// PyTorch's array `name`: its dims and its cells, row-major.
fn pytorch(name: &str) -> (Vec<usize>, Vec<f64>) {
    let path = path(name);
    let reader = npy::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dims = reader.header().dims.iter().map(|d| *d as usize).collect();
    let (_, cells) = reader
        .read_cells(usize::MAX)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (dims, cells.into_iter().map(|c| c.as_f64()).collect())
}

/// `got` (of dims `dims`) against PyTorch's array `name`, relative to its largest value.
fn check(what: &str, dims: Vec<usize>, got: &[f64], name: &str) {
    let (want_dims, want) = pytorch(name);
    assert_eq!(dims, want_dims, "{what}: {name}'s dims");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let error = (g - w).abs() / scale;
        assert!(
            error <= 1e-12,
            "{what}, {name} cell {i}: {g} vs PyTorch's {w} (relative error {error:.2e})"
        );
    }
}

/// An f64 image batch `2 | -> h, w, c` holding PyTorch's array `name`, with a gradient.
fn image(graph: &Graph, name: &str) -> Tensor {
    let (dims, cells) = pytorch(name);
    let shape = format!("{}|->{},{},{}", dims[0], dims[1], dims[2], dims[3]);
    graph
        .data(name)
        .shape(&shape)
        .precision(Precision::F64)
        .values(cells)
        .requires_grad()
        .build()
}

/// Builds `y` from the case's input on each CPU backend, back-propagates `sum(y·r)` and checks
/// the output and the input's gradient; `params` are loaded from and checked against PyTorch's
/// arrays (`(tensor, array of its values, array of its gradient)`).
fn compare(case: &str, build: impl Fn(&Graph, &Tensor) -> (Tensor, Vec<(Tensor, String)>)) {
    for backend in backends() {
        let what = format!("{case} on {}", backend.name());
        let graph = Graph::new();
        let x = image(&graph, &format!("{case}.x"));
        let (y, params) = build(&graph, &x);
        let r = image(&graph, &format!("{case}.r"));
        let loss = sum(&y.pmul(&r));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        for (param, name) in &params {
            ctx.load_npy(param, path(&format!("{case}.{name}")))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let backprop = ctx
            .backprop(&loss)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        ctx.run(&backprop).unwrap();
        let forward = ctx.forward(&[&y]).unwrap();
        ctx.run(&forward).unwrap();
        let values = ctx.values(&y).unwrap();
        check(&what, ctx.dims(&y).unwrap(), &values, &format!("{case}.y"));
        let grad = ctx.grad(&x).unwrap();
        check(
            &what,
            ctx.dims(&x).unwrap(),
            &grad,
            &format!("{case}.grad_x"),
        );
        for (param, name) in &params {
            let grad = ctx.grad(param).unwrap();
            let dims = ctx.dims(param).unwrap();
            check(&what, dims, &grad, &format!("{case}.grad_{name}"));
        }
    }
}

fn conv(case: &str, out_channels: usize, window: (usize, usize), options: ConvOptions) {
    compare(case, |graph, x| {
        let options = options.precision(Precision::F64);
        let conv = Conv2d::new(graph, case, out_channels, window, options);
        let bias = conv.bias.clone().expect("a bias");
        let params = vec![
            (conv.kernel.clone(), "kernel".into()),
            (bias, "bias".into()),
        ];
        (conv.apply(x), params)
    });
}

#[test]
fn a_strided_convolution_rounds_its_output_down_as_pytorch_does() {
    conv("conv_stride", 4, (3, 3), ConvOptions::default().stride(2));
}

#[test]
fn a_convolution_padded_per_axis_and_dilated_matches_pytorch() {
    let options = ConvOptions::default()
        .stride(2)
        .padding((1, 2))
        .dilation((2, 1));
    conv("conv_padded", 4, (3, 3), options);
}

#[test]
fn a_grouped_convolution_matches_pytorch() {
    let options = ConvOptions::default().groups(2).padding(1);
    conv("conv_groups", 6, (3, 2), options);
}

#[test]
fn same_padding_with_an_even_window_puts_the_odd_position_after() {
    conv(
        "conv_same",
        3,
        (4, 4),
        ConvOptions::default().padding(Padding::Same),
    );
}

fn max_pool(case: &str, window: (usize, usize), options: PoolOptions) {
    compare(case, |_, x| (max_pool2d_with(x, window, &options), vec![]));
}

fn avg_pool(case: &str, window: (usize, usize), options: PoolOptions) {
    compare(case, |_, x| (avg_pool2d_with(x, window, &options), vec![]));
}

#[test]
fn max_pooling_rounds_down_or_up_pads_with_minus_infinity_and_dilates() {
    max_pool("max_floor", (2, 2), PoolOptions::default());
    let ceil = PoolOptions::default().stride(2).padding(1).ceil_mode(true);
    max_pool("max_ceil", (3, 3), ceil);
    let dilated = PoolOptions::default().stride((1, 2)).dilation((2, 1));
    max_pool("max_dilated", (2, 3), dilated);
}

#[test]
fn max_pooling_can_give_a_tie_s_gradient_to_the_first_maximum_as_pytorch_does() {
    let first = PoolOptions::default().ties(Ties::First);
    max_pool("max_ties", (3, 3), first.stride(2).padding(1));
    max_pool("max_ties_overlap", (2, 2), first.stride(1));
}

#[test]
fn average_pooling_counts_the_padding_or_not_and_never_the_overrun() {
    let padded = PoolOptions::default().stride(2).padding(1);
    avg_pool("avg_pad", (3, 3), padded);
    avg_pool("avg_pad_excluded", (3, 3), padded.count_include_pad(false));
    avg_pool("avg_ceil", (3, 3), padded.ceil_mode(true));
    let excluded = padded.ceil_mode(true).count_include_pad(false);
    avg_pool("avg_ceil_excluded", (3, 3), excluded);
}
