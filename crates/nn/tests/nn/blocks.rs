//! Every block's gradients by finite differences on both backends, and its values against a
//! direct computation.

use rcannl_ir::Precision;
use rcannl_nn::attention::{
    AttendOptions, Attention, AttentionBiases, MultiheadAttention, Rotary, TransformerBlock,
    attend, attend_with_biases,
};
use rcannl_nn::blocks::{Linear, LinearOptions, Mlp};
use rcannl_nn::conv::{Conv2d, ConvOptions, avg_pool2d, global_avg_pool, max_pool2d};
use rcannl_nn::dropout::dropout;
use rcannl_nn::embedding::Embedding;
use rcannl_nn::loss::cross_entropy;
use rcannl_nn::norm::{LayerNorm, log_softmax, softmax};
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Init, Tensor};

use crate::support::{self, backends, check, weights};

#[test]
fn softmax_and_its_losses() {
    check("softmax", &["3|->4"], |g, p| {
        softmax(&p[0]).pmul(&weights(g, "3|->4", 12))
    });
    check("log_softmax", &["3|->4"], |g, p| {
        log_softmax(&p[0]).pmul(&weights(g, "3|->4", 12))
    });
    check("cross_entropy", &["3|->4"], |g, p| {
        let targets = g
            .data("targets")
            .shape("3|->4")
            .precision(Precision::F64)
            .values(vec![0., 1., 0., 0., 0., 0., 0., 1., 1., 0., 0., 0.])
            .build();
        cross_entropy(&p[0], &targets)
    });
}

#[test]
fn layer_norm_and_dense_layers() {
    check("layer_norm", &["3|->5"], |g, p| {
        LayerNorm::with_precision(g, "norm", Precision::F64)
            .apply(&p[0])
            .pmul(&weights(g, "3|->5", 15))
    });
    check("linear over the last two axes", &["2|->3,4"], |g, p| {
        let options = LinearOptions::new()
            .precision(Precision::F64)
            .contracted_axes(2);
        Linear::with_options(g, "linear", &[2, 3], options)
            .apply(&p[0])
            .pmul(&weights(g, "2|->2,3", 12))
    });
    check("linear per position", &["2|->3,4"], |g, p| {
        let options = LinearOptions::new().precision(Precision::F64);
        Linear::with_options(g, "linear", &[5], options)
            .apply(&p[0])
            .pmul(&weights(g, "2|->3,5", 30))
    });
    check("mlp", &["2|->3", "3->4", "4->2"], |_, p| {
        // The inputs after the first are the layers' weights, bound by hand.
        (&p[2] * &(&p[1] * &p[0]).relu()).tanh()
    });
}

#[test]
fn convolutions_and_pooling() {
    check("conv2d valid", &["1|->5,5,2", "3,3,2->2"], |g, p| {
        let spec = "...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d";
        let out = p[0].einsum(spec, &p[1]);
        out.pmul(&weights(g, "1|->3,3,2", 18))
    });
    check(
        "conv2d padded strided",
        &["1|->4,4,1", "3,3,1->2"],
        |g, p| {
            let spec = "...|...->2*h=+kh, 2*w=+kw, c; kh, kw, c -> d => ...|...->h, w, d";
            let out = p[0].einsum(spec, &p[1]);
            out.pmul(&weights(g, "1|->2,2,2", 8))
        },
    );
    check("max_pool2d", &["1|->4,4,2"], |g, p| {
        max_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2", 8))
    });
    check("avg_pool2d", &["1|->4,4,2"], |g, p| {
        avg_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2", 8))
    });
    check("global_avg_pool", &["2|->3,3,2"], |g, p| {
        global_avg_pool(&p[0]).pmul(&weights(g, "2|->2", 4))
    });
}

#[test]
fn embeddings_and_dropout() {
    check("embedding", &["4->3"], |g, p| {
        let ids = g
            .data("ids")
            .shape("5|->")
            .precision(Precision::F64)
            .values(vec![0.0, 3.0, 1.0, 3.0, 2.0])
            .build();
        let looked_up = &p[0] * &rcannl_nn::embedding::one_hot(&ids, 4);
        looked_up.pmul(&weights(g, "5|->3", 15))
    });
    check("dropout", &["4|->8"], |g, p| {
        let step = g
            .data("step")
            .shape("")
            .precision(Precision::U32)
            .values(vec![3.0])
            .build();
        dropout(&p[0], 0.5, &step)
    });
}

/// Runs `out` forward on every backend, returning its values (the same on both).
fn forward(graph: &Graph, out: &Tensor) -> Vec<f64> {
    let mut results = Vec::new();
    for backend in backends() {
        let mut ctx = Context::with_backend(graph, backend);
        ctx.init_params().unwrap();
        let routine = ctx.forward(&[out]).unwrap();
        ctx.run(&routine).unwrap();
        results.push(ctx.values(out).unwrap());
    }
    for pair in results.windows(2) {
        for (a, b) in pair[0].iter().zip(&pair[1]) {
            assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0), "{a} vs {b}");
        }
    }
    results.remove(0)
}

#[test]
fn block_values() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("2|->4")
        .precision(Precision::F64)
        .values(vec![1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0, 6.0])
        .build();
    let conv = Conv2d::new(&graph, "conv", 1, 3, ConvOptions::default());
    let image = graph
        .data("image")
        .shape("1|->4,4,1")
        .precision(Precision::F64)
        .values((0..16).map(f64::from).collect())
        .build();
    let convolved = conv.apply(&image);
    let embedding = Embedding::new(&graph, "embedding", 5, 3);
    let ids = graph
        .data("ids")
        .shape("2|->")
        .values(vec![4.0, 1.0])
        .build();
    let looked_up = embedding.apply(&ids);
    let mlp = Mlp::new(&graph, "mlp", &[3, 2]);
    let mlp_out = mlp.apply(&x);
    let probabilities = forward(&graph, &softmax(&x));
    for row in probabilities.chunks(4) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
    let e: Vec<f64> = [1.0f64, 2.0, 3.0, 4.0].iter().map(|v| v.exp()).collect();
    assert!((probabilities[3] - e[3] / e.iter().sum::<f64>()).abs() < 1e-12);

    let normalized = forward(
        &graph,
        &LayerNorm::with_precision(&graph, "norm", Precision::F64).apply(&x),
    );
    for row in normalized.chunks(4) {
        let mean = row.iter().sum::<f64>() / 4.0;
        let variance = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0;
        assert!(
            mean.abs() < 1e-12 && (variance - 1.0).abs() < 1e-4,
            "{mean} {variance}"
        );
    }

    // Pooling a 4×4 single-channel image with 2×2 windows.
    assert_eq!(
        forward(&graph, &max_pool2d(&image, 2)),
        vec![5.0, 7.0, 13.0, 15.0]
    );
    assert_eq!(
        forward(&graph, &avg_pool2d(&image, 2)),
        vec![2.5, 4.5, 10.5, 12.5]
    );
    assert_eq!(forward(&graph, &global_avg_pool(&image)), vec![7.5]);

    // A 3×3 convolution of ones, valid: each output sums a window.
    let ones = graph
        .param("ones")
        .shape("3,3,1->1")
        .precision(Precision::F32)
        .init(Init::Constant(1.0))
        .build();
    let spec = "...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d";
    let window_sums = forward(&graph, &image.einsum(spec, &ones));
    assert_eq!(window_sums, vec![45.0, 54.0, 81.0, 90.0]);
    assert_eq!(forward(&graph, &convolved).len(), 4);
    assert_eq!(forward(&graph, &looked_up).len(), 6);
    assert_eq!(forward(&graph, &mlp_out).len(), 4);
}

#[test]
fn attention_and_transformer_blocks() {
    // x: 2 sequences of 3 positions, width 4; 2 heads of 2.
    let shapes = ["2|->3,4", "4->2,2", "4->2,2", "4->2,2", "2,2->4"];
    for causal in [None, Some(3)] {
        check("attention", &shapes, |g, p| {
            let out = attend(&p[0], [&p[1], &p[2], &p[3], &p[4]], 2, causal, None);
            out.pmul(&weights(g, "2|->3,4", 24))
        });
    }
    check("rotary attention", &shapes, |g, p| {
        let rotary = Rotary::new(g, 3, 2);
        let out = attend(
            &p[0],
            [&p[1], &p[2], &p[3], &p[4]],
            2,
            Some(3),
            Some(&rotary),
        );
        out.pmul(&weights(g, "2|->3,4", 24))
    });
    // The same with biases on every projection, a boolean mask (true = ignored) and an additive
    // one.
    let biased_shapes = [&shapes[..], &["->2,2", "->2,2", "->2,2", "->4"]].concat();
    check("biased masked attention", &biased_shapes, |g, p| {
        let biases = AttentionBiases {
            query: p[5].clone(),
            key: p[6].clone(),
            value: p[7].clone(),
            output: p[8].clone(),
        };
        let ignored = support::data(
            g,
            "ignored",
            "3,3",
            vec![0., 1., 0., 0., 0., 1., 0., 0., 0.],
        );
        let added = support::data(g, "added", "2|->3", vec![0.5, -1.0, 0.0, 2.0, 0.0, -0.5]);
        let options = AttendOptions::new()
            .mask_where_true(&ignored)
            .additive_mask(&added);
        let projections = [&p[1], &p[2], &p[3], &p[4]];
        let out = attend_with_biases(&p[0], &p[0], projections, Some(&biases), 2, &options);
        out.pmul(&weights(g, "2|->3,4", 24))
    });
    check("transformer block", &["2|->3,4"], |g, p| {
        let block = TransformerBlock::new(g, "block", 4, 2, 8, true);
        block.apply(&p[0], 3, None).pmul(&weights(g, "2|->3,4", 24))
    });
}

#[test]
fn causal_attention_does_not_look_ahead() {
    // Changing the last position changes no earlier output.
    let outputs = |last: f64| {
        let graph = Graph::new();
        let mut values = test_values(12, 5);
        values[8..12].fill(last);
        let x = graph
            .data("x")
            .shape("1|->3,4")
            .precision(Precision::F64)
            .values(values)
            .build();
        let attention = Attention::new(&graph, "attention", 4, 2, 2, true);
        forward(
            &graph,
            &attention.apply(&x, 3, Some(&Rotary::new(&graph, 3, 2))),
        )
    };
    let (a, b) = (outputs(1.0), outputs(-3.0));
    assert_eq!(a[..8], b[..8]);
    assert_ne!(a[8..], b[8..]);
}

#[test]
fn one_hot_rows_for_ids_of_any_shape() {
    let graph = Graph::new();
    let ids = graph
        .data("ids")
        .shape("2|->3")
        .values(vec![0.0, 2.0, -1.0, 1.0, 1.0, 0.0])
        .build();
    let rows = forward(&graph, &rcannl_nn::embedding::one_hot(&ids, 3));
    assert_eq!(
        rows,
        vec![
            1., 0., 0., 0., 0., 1., 0., 0., 0., //
            0., 1., 0., 0., 1., 0., 1., 0., 0.,
        ]
    );
}

#[test]
fn misconfigured_linear_norm_and_attention_are_errors_naming_them() {
    let graph = Graph::new();
    let x = support::data(&graph, "x", "2|->3,4", test_values(24, 1));
    let options = LinearOptions::new().contracted_axes(0);
    let _ = Linear::with_options(&graph, "nothing contracted", &[5], options).apply(&x);
    let error = graph.check().unwrap_err().to_string();
    assert!(error.contains("nothing contracted"), "{error}");

    let graph = Graph::new();
    let x = support::data(&graph, "x", "2|->3,4", test_values(24, 1));
    let _ = LayerNorm::new(&graph, "norm").apply_trailing(&x, 0);
    let error = graph.check().unwrap_err().to_string();
    assert!(error.contains("0 trailing axes"), "{error}");

    let error = MultiheadAttention::new(&Graph::new(), "uneven", 10, 3, true).unwrap_err();
    assert!(error.to_string().contains("uneven"), "{error}");
}
