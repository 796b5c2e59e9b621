//! Every block the block tests build, run forward and backpropagated on a compiled backend and
//! on the interpreter (the oracle) in f32: the outputs and every parameter's gradient agree within
//! [`TOLERANCE`].

use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::attention::{
    AttendOptions, Attention, Rotary, TransformerBlock, attend, causal_mask,
};
use rcannl_nn::blocks::Mlp;
use rcannl_nn::cnn::{ConvBnRelu, DepthwiseSeparable, LeNet, ResidualBlock, VggBlock};
use rcannl_nn::conv::{Conv2d, ConvOptions, avg_pool2d, global_avg_pool, max_pool2d};
use rcannl_nn::dropout::dropout;
use rcannl_nn::embedding::{Embedding, one_hot};
use rcannl_nn::loss::{cross_entropy, mse};
use rcannl_nn::norm::{
    BatchNorm, GroupNorm, LayerNorm, Mode, RmsNorm, log_softmax, softmax, softmax_axis,
};
use rcannl_nn::optim::{Adam, Lamb};
use rcannl_nn::position::LearnedPositions;
use rcannl_nn::transformer::{DecoderBlock, EncoderBlock, Placement};
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Init, Tensor};

use crate::target::Target;

/// The largest difference allowed between a backend's cell and the interpreter's, relative to the
/// largest magnitude in the tensor (at least 1). The interpreter computes each stored cell in
/// f64 and rounds it to f32 once; a compiled backend computes in f32 throughout and sums in other
/// orders, and a GPU's exp, log and tanh are WGSL's, accurate to a few units in the last place:
/// through the dozen operations of a transformer block. On lavapipe the largest difference is
/// 7e-7 (tanh of composed layers); the bound leaves room for GPUs with less exact
/// transcendentals.
const TOLERANCE: f64 = 2e-5;

/// The cells of a shape literal such as `"2|->3,4"`: the product of its sizes.
fn cells(literal: &str) -> usize {
    literal
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().expect("a size"))
        .product()
}

/// The output of `build` over f32 parameters of `shapes` (fixed values) and the gradient of
/// every parameter of the graph (the blocks' own included, initialized from the same seed),
/// after one backprop on `backend`.
fn run(
    backend: Box<dyn Backend>,
    shapes: &[&str],
    build: &dyn Fn(&Graph, &[Tensor]) -> Tensor,
) -> (Vec<f64>, Vec<(String, Vec<f64>)>) {
    let graph = Graph::new();
    let inputs: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            graph
                .param(&format!("p{i}"))
                .shape(shape)
                .precision(Precision::F32)
                .init(Init::Values(test_values(cells(shape), 17 + i as u64)))
                .build()
        })
        .collect();
    let out = build(&graph, &inputs);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&out).unwrap();
    ctx.run(&backprop).unwrap();
    let grads = graph
        .params()
        .iter()
        .map(|p| (p.label(), ctx.grad(p).unwrap()))
        .collect();
    (ctx.values(&out).unwrap(), grads)
}

/// Asserts that what `target` gives equals the interpreter's `oracle` within [`TOLERANCE`].
fn assert_close(target: &Target, what: &str, got: &[f64], oracle: &[f64]) {
    assert_eq!(got.len(), oracle.len(), "{what}: cell counts");
    let scale = oracle.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (cell, (g, o)) in got.iter().zip(oracle).enumerate() {
        assert!(
            (g - o).abs() <= TOLERANCE * scale,
            "{what}[{cell}]: {} {g}, interpreter {o}",
            target.name()
        );
    }
}

/// Runs the block on `target` and on the interpreter and compares the output and the gradients.
fn check(
    target: &Target,
    name: &str,
    shapes: &[&str],
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) {
    let (got_out, got_grads) = run(target.backend(), shapes, &build);
    let (out, grads) = run(Box::new(Interpreter), shapes, &build);
    assert_close(target, &format!("{name}: output"), &got_out, &out);
    assert_eq!(got_grads.len(), grads.len(), "{name}: parameters");
    for ((label, got_grad), (_, grad)) in got_grads.iter().zip(&grads) {
        assert_close(
            target,
            &format!("{name}: gradient of {label}"),
            got_grad,
            grad,
        );
    }
}

/// A fixed data tensor of the given shape, to weight outputs (so that gradients are not
/// trivially zero, as they are for the plain sum of a softmax).
fn weights(graph: &Graph, shape: &str) -> Tensor {
    graph
        .data("weights")
        .shape(shape)
        .values(test_values(cells(shape), 99))
        .build()
}

fn softmax_and_its_losses(target: &Target) {
    check(target, "softmax", &["3|->4"], |g, p| {
        softmax(&p[0]).pmul(&weights(g, "3|->4"))
    });
    check(target, "log_softmax", &["3|->4"], |g, p| {
        log_softmax(&p[0]).pmul(&weights(g, "3|->4"))
    });
    check(target, "cross_entropy", &["3|->4"], |g, p| {
        let targets = g
            .data("targets")
            .shape("3|->4")
            .values(vec![0., 1., 0., 0., 0., 0., 0., 1., 1., 0., 0., 0.])
            .build();
        cross_entropy(&p[0], &targets)
    });
    check(target, "mse", &["3|->2", "3|->2"], |_, p| mse(&p[0], &p[1]));
}
conformance!(softmax_and_its_losses: cc, gpu);

fn layer_norm_and_dense_layers(target: &Target) {
    check(target, "layer_norm", &["3|->5"], |g, p| {
        LayerNorm::new(g, "norm")
            .apply(&p[0])
            .pmul(&weights(g, "3|->5"))
    });
    check(
        target,
        "composed layers",
        &["2|->3", "3->4", "4->2"],
        |_, p| (&p[2] * &(&p[1] * &p[0]).relu()).tanh(),
    );
    check(target, "mlp", &["2|->4"], |g, p| {
        Mlp::new(g, "mlp", &[3, 2])
            .apply(&p[0])
            .pmul(&weights(g, "2|->2"))
    });
}
conformance!(layer_norm_and_dense_layers: cc, gpu);

fn convolutions_and_pooling(target: &Target) {
    check(
        target,
        "conv2d valid",
        &["1|->5,5,2", "3,3,2->2"],
        |g, p| {
            let spec = "...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d";
            p[0].einsum(spec, &p[1]).pmul(&weights(g, "1|->3,3,2"))
        },
    );
    check(
        target,
        "conv2d padded strided",
        &["1|->4,4,1", "3,3,1->2"],
        |g, p| {
            let spec = "...|...->2*h=+kh, 2*w=+kw, c; kh, kw, c -> d => ...|...->h, w, d";
            p[0].einsum(spec, &p[1]).pmul(&weights(g, "1|->2,2,2"))
        },
    );
    check(target, "Conv2d", &["1|->4,4,1"], |g, p| {
        Conv2d::new(g, "conv", 1, 3, ConvOptions::default())
            .apply(&p[0])
            .pmul(&weights(g, "1|->2,2,1"))
    });
    check(target, "max_pool2d", &["1|->4,4,2"], |g, p| {
        max_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2"))
    });
    check(target, "avg_pool2d", &["1|->4,4,2"], |g, p| {
        avg_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2"))
    });
    check(target, "global_avg_pool", &["2|->3,3,2"], |g, p| {
        global_avg_pool(&p[0]).pmul(&weights(g, "2|->2"))
    });
}
conformance!(convolutions_and_pooling: cc, gpu);

fn embeddings_one_hot_rows_and_dropout(target: &Target) {
    let ids = |g: &Graph| {
        g.data("ids")
            .shape("5|->")
            .values(vec![0.0, 3.0, 1.0, 3.0, 2.0])
            .build()
    };
    check(target, "one-hot lookup", &["4->3"], |g, p| {
        (&p[0] * &one_hot(&ids(g), 4)).pmul(&weights(g, "5|->3"))
    });
    check(target, "Embedding", &[], |g, _| {
        Embedding::new(g, "embedding", 4, 3)
            .apply(&ids(g))
            .pmul(&weights(g, "5|->3"))
    });
    check(target, "one_hot of ids of any shape", &["2|->3"], |g, p| {
        let ids = g
            .data("ids")
            .shape("2|->3")
            .values(vec![0.0, 2.0, -1.0, 1.0, 1.0, 0.0])
            .build();
        one_hot(&ids, 3).pmul(&p[0])
    });
    check(target, "dropout", &["4|->8"], |g, p| {
        let step = g
            .data("step")
            .shape("")
            .precision(Precision::U32)
            .values(vec![3.0])
            .build();
        dropout(&p[0], 0.5, &step)
    });
}
conformance!(embeddings_one_hot_rows_and_dropout: cc, gpu);

fn attention_and_transformer_blocks(target: &Target) {
    // x: 2 sequences of 3 positions, width 4; 2 heads of 2.
    let shapes = ["2|->3,4", "4->2,2", "4->2,2", "4->2,2", "2,2->4"];
    for causal in [None, Some(3)] {
        check(target, "attention", &shapes, |g, p| {
            attend(&p[0], [&p[1], &p[2], &p[3], &p[4]], 2, causal, None)
                .pmul(&weights(g, "2|->3,4"))
        });
    }
    check(target, "rotary attention", &shapes, |g, p| {
        let rotary = Rotary::new(g, 3, 2);
        attend(
            &p[0],
            [&p[1], &p[2], &p[3], &p[4]],
            2,
            Some(3),
            Some(&rotary),
        )
        .pmul(&weights(g, "2|->3,4"))
    });
    check(target, "Attention", &["1|->3,4"], |g, p| {
        Attention::new(g, "attention", 4, 2, 2, true)
            .apply(&p[0], 3, Some(&Rotary::new(g, 3, 2)))
            .pmul(&weights(g, "1|->3,4"))
    });
    check(target, "transformer block", &["2|->3,4"], |g, p| {
        TransformerBlock::new(g, "block", 4, 2, 8, true)
            .apply(&p[0], 3, None)
            .pmul(&weights(g, "2|->3,4"))
    });
}
conformance!(attention_and_transformer_blocks: cc, gpu);

/// The parameters after three steps of `optimizer` (Adam or LAMB, clipping the global gradient
/// norm at 0.5: the updates reduce norms into single cells) on an MLP, and the gradient of the
/// loss with respect to its data input (built with `requires_grad`).
fn optimizer_steps(backend: Box<dyn Backend>, lamb: bool) -> (Vec<Vec<f64>>, Vec<f64>) {
    let graph = Graph::new();
    let mlp = Mlp::new(&graph, "mlp", &[8, 3]);
    let x = graph
        .data("x")
        .shape("4|->5")
        .values(test_values(20, 5))
        .requires_grad()
        .build();
    let loss = rcannl_nn::loss::sum(&mlp.apply(&x).pmul(&weights(&graph, "4|->3")));
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.set_seed(3);
    ctx.init_params().unwrap();
    let params = mlp.params();
    let step = if lamb {
        Lamb::new(&graph, &params, 0.01)
            .clip_grad_norm(0.5)
            .compile_step(&mut ctx, &loss)
    } else {
        Adam::new(&graph, &params, 0.01)
            .clip_grad_norm(0.5)
            .compile_step(&mut ctx, &loss)
    }
    .unwrap();
    for _ in 0..3 {
        ctx.run(&step).unwrap();
    }
    let values = params.iter().map(|p| ctx.values(p).unwrap()).collect();
    (values, ctx.grad(&x).unwrap())
}

fn optimizer_steps_with_norms_and_data_gradients(target: &Target) {
    for lamb in [false, true] {
        let name = if lamb { "LAMB" } else { "Adam" };
        let (got_params, got_input_grad) = optimizer_steps(target.backend(), lamb);
        let (params, input_grad) = optimizer_steps(Box::new(Interpreter), lamb);
        for (i, (g, o)) in got_params.iter().zip(&params).enumerate() {
            assert_close(target, &format!("{name}: parameter {i}"), g, o);
        }
        assert_close(
            target,
            &format!("{name}: gradient of the input"),
            &got_input_grad,
            &input_grad,
        );
    }
}
conformance!(optimizer_steps_with_norms_and_data_gradients: cc, gpu);

fn normalization_and_cnn_blocks_in_both_modes(target: &Target) {
    for mode in [Mode::Train, Mode::Eval] {
        check(
            target,
            &format!("batch norm 2-D {mode:?}"),
            &["2|->3,2,2"],
            |g, p| {
                BatchNorm::new(g, "bn", 2)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "2|->3,2,2"))
            },
        );
        check(
            target,
            &format!("conv-bn-relu {mode:?}"),
            &["2|->3,3,2"],
            |g, p| {
                ConvBnRelu::new(g, "block", 2, 3, 3, 1)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "2|->3,3,3"))
            },
        );
        check(
            target,
            &format!("residual projection {mode:?}"),
            &["2|->4,4,2"],
            |g, p| {
                ResidualBlock::new(g, "res", 2, 3, 2)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "2|->2,2,3"))
            },
        );
        check(
            target,
            &format!("depthwise-separable {mode:?}"),
            &["2|->3,3,2"],
            |g, p| {
                DepthwiseSeparable::new(g, "sep", 2, 3, 3, 1)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "2|->3,3,3"))
            },
        );
    }
    check(target, "group norm", &["2|->2,2,4"], |g, p| {
        GroupNorm::new(g, "gn", 4, 2)
            .unwrap()
            .apply(&p[0])
            .pmul(&weights(g, "2|->2,2,4"))
    });
    check(target, "rms norm", &["3|->4"], |g, p| {
        RmsNorm::new(g, "rms")
            .apply(&p[0])
            .pmul(&weights(g, "3|->4"))
    });
    check(target, "vgg block", &["1|->4,4,2"], |g, p| {
        VggBlock::new(g, "vgg", 2, 3)
            .apply(&p[0])
            .pmul(&weights(g, "1|->2,2,3"))
    });
    check(target, "lenet", &["2|->4,4,1"], |g, p| {
        LeNet::new(g, "lenet", 3)
            .apply(&p[0])
            .pmul(&weights(g, "2|->3"))
    });
}
conformance!(normalization_and_cnn_blocks_in_both_modes: cc, gpu);

fn masked_cross_attention_and_encoder_decoder_blocks(target: &Target) {
    let padding = |g: &Graph| {
        g.data("padding")
            .shape("2|->5")
            .values(vec![1., 1., 1., 0., 0., 1., 1., 1., 1., 1.])
            .build()
    };
    check(target, "softmax over an axis", &["2|->3,4"], |g, p| {
        softmax_axis(&p[0], 0).pmul(&weights(g, "2|->3,4"))
    });
    check(
        target,
        "masked cross-attention",
        &["2|->3,4", "2|->5,4"],
        |g, p| {
            let attention = Attention::new(g, "cross", 4, 2, 2, false);
            let options = AttendOptions::new().mask(&padding(g)).temperature(2.0);
            attention
                .apply_with(&p[0], &p[1], &options)
                .pmul(&weights(g, "2|->3,4"))
        },
    );
    for placement in [Placement::Post, Placement::Pre] {
        check(
            target,
            &format!("encoder block {placement:?}"),
            &["2|->5,4"],
            |g, p| {
                let options = AttendOptions::new().mask(&padding(g));
                EncoderBlock::new(g, "encoder", 4, 2, 6, placement)
                    .apply(&p[0], &options)
                    .pmul(&weights(g, "2|->5,4"))
            },
        );
        check(
            target,
            &format!("decoder block {placement:?}"),
            &["2|->3,4", "2|->5,4"],
            |g, p| {
                let self_options = AttendOptions::new().mask(&causal_mask(g, 3));
                let cross_options = AttendOptions::new().mask(&padding(g));
                DecoderBlock::new(g, "decoder", 4, 2, 6, placement)
                    .apply(&p[0], &p[1], &self_options, &cross_options)
                    .pmul(&weights(g, "2|->3,4"))
            },
        );
    }
    check(target, "learned positions", &["2|->3,4"], |g, p| {
        LearnedPositions::new(g, "positions", 3, 4)
            .apply(&p[0])
            .tanh()
            .pmul(&weights(g, "2|->3,4"))
    });
}
conformance!(masked_cross_attention_and_encoder_decoder_blocks: cc, gpu);
