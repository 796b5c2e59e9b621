//! Every block built `with_precision` holds its parameters and fixed tables in that precision and
//! computes in it: f64 blocks over f64 inputs give f64 outputs, rotary embeddings in f64 match
//! their formula to the last digits; `new` builds blocks of the precision their users compute
//! in (the graph's default where nothing decides).

use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_nn::attention::{
    AttendOptions, Attention, PositionDense, Rotary, TransformerBlock, causal_mask,
};
use rcannl_nn::blocks::{Dense, Mlp};
use rcannl_nn::embedding::Embedding;
use rcannl_nn::position::{LearnedPositions, PositionKind, Positions};
use rcannl_nn::transformer::{
    DecoderBlock, EncoderBlock, EncoderDecoder, EncoderDecoderConfig, FeedForward, Placement,
    SequencePairs,
};
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Tensor};

use crate::support::data;

const F64: Precision = Precision::F64;

/// Asserts that every tensor of `block`'s parameters, and its output `out`, are f64; then runs
/// `out` forward on the interpreter, so that the block's shapes and precisions make a program,
/// and checks its values are finite.
fn assert_f64(block: &str, params: &[Tensor], out: &Tensor) {
    assert!(!params.is_empty(), "{block}: no parameters");
    for p in params {
        assert_eq!(p.precision(), F64, "{block}: parameter '{}'", p.label());
    }
    assert_eq!(out.precision(), F64, "{block}: output");
    let values = run(out.graph(), out);
    assert!(values.iter().all(|v| v.is_finite()), "{block}: {values:?}");
}

/// `out`'s values after one forward run on the interpreter, the parameters initialized.
fn run(graph: &Graph, out: &Tensor) -> Vec<f64> {
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let routine = ctx.forward(&[out]).unwrap();
    ctx.run(&routine).unwrap();
    ctx.values(out).unwrap()
}

/// 2 sequences of 3 positions of 4 values, f64.
fn sequence(graph: &Graph) -> Tensor {
    data(graph, "x", "2|->3,4", test_values(24, 7))
}

#[test]
fn dense_layers_embeddings_and_learned_positions_hold_f64() {
    let graph = Graph::new();
    let x = data(&graph, "x", "2|->3", test_values(6, 3));
    let dense = Dense::with_precision(&graph, "dense", 5, F64);
    assert_f64("Dense", &dense.params(), &dense.apply(&x));

    let graph = Graph::new();
    let x = data(&graph, "x", "2|->3", test_values(6, 3));
    let mlp = Mlp::with_precision(&graph, "mlp", &[4, 2], F64);
    assert_f64("Mlp", &mlp.params(), &mlp.apply(&x));

    let graph = Graph::new();
    let ids = data(&graph, "ids", "2|->3", vec![0., 4., 2., 1., 1., 3.]);
    let embedding = Embedding::with_precision(&graph, "embedding", 5, 4, F64);
    assert_f64("Embedding", &embedding.params(), &embedding.apply(&ids));

    let graph = Graph::new();
    let positions = LearnedPositions::with_precision(&graph, "positions", 3, 4, F64);
    assert_f64(
        "LearnedPositions",
        &positions.params(),
        &positions.apply(&sequence(&graph)),
    );
}

#[test]
fn attention_blocks_hold_f64() {
    let graph = Graph::new();
    let attention = Attention::with_precision(&graph, "attention", 4, 2, 2, true, F64);
    let rotary = Rotary::with_precision(&graph, 3, 2, F64);
    let out = attention.apply(&sequence(&graph), 3, Some(&rotary));
    assert_f64("Attention", &attention.params(), &out);

    let graph = Graph::new();
    let dense = PositionDense::with_precision(&graph, "dense", 5, F64);
    assert_f64(
        "PositionDense",
        &dense.params(),
        &dense.apply(&sequence(&graph)),
    );

    for causal in [false, true] {
        let graph = Graph::new();
        let block = TransformerBlock::with_precision(&graph, "block", 4, 2, 8, causal, F64);
        let rotary = Rotary::with_precision(&graph, 3, 2, F64);
        let out = block.apply(&sequence(&graph), 3, Some(&rotary));
        assert_f64("TransformerBlock", &block.params(), &out);
    }
}

#[test]
fn transformer_blocks_hold_f64() {
    let graph = Graph::new();
    let feed_forward = FeedForward::with_precision(&graph, "mlp", 4, 6, F64);
    let out = feed_forward.apply(&sequence(&graph));
    assert_f64("FeedForward", &feed_forward.params(), &out);

    for placement in [Placement::Post, Placement::Pre] {
        let graph = Graph::new();
        let block = EncoderBlock::with_precision(&graph, "encoder", 4, 2, 6, placement, F64);
        let out = block.apply(&sequence(&graph), &AttendOptions::new());
        assert_f64("EncoderBlock", &block.params(), &out);

        let graph = Graph::new();
        let block = DecoderBlock::with_precision(&graph, "decoder", 4, 2, 6, placement, F64);
        let memory = data(&graph, "memory", "2|->5,4", test_values(40, 8));
        let self_options = AttendOptions::new().mask(&causal_mask(&graph, 3));
        let out = block.apply(
            &sequence(&graph),
            &memory,
            &self_options,
            &AttendOptions::new(),
        );
        assert_f64("DecoderBlock", &block.params(), &out);
    }
}

#[test]
fn the_encoder_decoder_holds_f64() {
    for (placement, positions) in [
        (Placement::Post, PositionKind::Sinusoidal),
        (Placement::Pre, PositionKind::Learned),
    ] {
        let config = EncoderDecoderConfig {
            source_vocabulary: 6,
            target_vocabulary: 5,
            source_time: 4,
            target_time: 3,
            model: 4,
            heads: 2,
            hidden: 6,
            encoder_blocks: 1,
            decoder_blocks: 1,
            placement,
            positions,
        };
        let graph = Graph::new();
        let model = EncoderDecoder::with_precision(&graph, "model", config, F64);
        for fixed in [&model.source_positions, &model.target_positions] {
            if let Positions::Sinusoidal(sinusoidal) = fixed {
                assert_eq!(sinusoidal.table.precision(), F64, "sinusoidal table");
            }
        }
        let pairs = SequencePairs {
            source: data(
                &graph,
                "source",
                "2|->4",
                vec![1., 5., 0., 0., 2., 3., 4., 1.],
            ),
            source_mask: data(
                &graph,
                "source mask",
                "2|->4",
                vec![1., 1., 0., 0., 1., 1., 1., 1.],
            ),
            target_inputs: data(
                &graph,
                "target inputs",
                "2|->3",
                vec![0., 3., 2., 0., 1., 4.],
            ),
            targets: data(&graph, "targets", "2|->3", vec![3., 2., 0., 1., 4., 2.]),
            target_mask: data(&graph, "target mask", "2|->3", vec![1., 1., 0., 1., 1., 1.]),
        };
        let options = AttendOptions::new();
        let logits = model.logits(
            &pairs.source,
            &pairs.source_mask,
            &pairs.target_inputs,
            &options,
        );
        assert_f64("EncoderDecoder logits", &model.params(), &logits);
        assert_f64(
            "EncoderDecoder loss",
            &model.params(),
            &model.loss(&pairs, &options),
        );
    }
}

#[test]
fn f64_rotary_embeddings_match_their_formula() {
    let (heads, time, head) = (2, 3, 4);
    let graph = Graph::new();
    let rotary = Rotary::with_precision(&graph, time, head, F64);
    let input = test_values(2 * heads * time * head, 5);
    let x = data(
        &graph,
        "x",
        &format!("2|->{heads},{time},{head}"),
        input.clone(),
    );
    let out = rotary.apply(&x);
    assert_eq!(out.precision(), F64);
    let actual = run(&graph, &out);
    // Pair i, (a, b) at values (2i, 2i + 1) of position t, turns by t · 10000^(−2i/head) to
    // (a·cos − b·sin, b·cos + a·sin).
    let mut expected = Vec::with_capacity(input.len());
    for row in input.chunks(head) {
        let position = (expected.len() / head) % time;
        for (i, pair) in row.chunks(2).enumerate() {
            let angle = position as f64 * 10_000f64.powf(-2.0 * i as f64 / head as f64);
            let (a, b) = (pair[0], pair[1]);
            expected.push(a * angle.cos() - b * angle.sin());
            expected.push(b * angle.cos() + a * angle.sin());
        }
    }
    assert_eq!(actual.len(), expected.len());
    for (k, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert!((a - e).abs() <= 1e-12, "value {k}: {a} vs {e}");
    }
}

#[test]
fn new_builds_blocks_of_their_users_precision() {
    // Used beside f64 data, a block built by `new` holds f64, its tables too: as the graph is
    // built, and as a context settles the precisions.
    let graph = Graph::new();
    let x = sequence(&graph);
    let (dense, mlp) = (
        Dense::new(&graph, "dense", 3),
        Mlp::new(&graph, "mlp", &[3, 2]),
    );
    let block = TransformerBlock::new(&graph, "block", 4, 2, 8, true);
    let positions = LearnedPositions::new(&graph, "positions", 3, 4);
    let rotary = Rotary::new(&graph, 3, 2);
    let outs = [
        (
            "Dense",
            dense.params(),
            dense.apply(&data(&graph, "v", "2|->3", test_values(6, 2))),
        ),
        (
            "Mlp",
            mlp.params(),
            mlp.apply(&data(&graph, "w", "2|->3", test_values(6, 4))),
        ),
        ("TransformerBlock", block.params(), block.apply(&x, 3, None)),
        ("LearnedPositions", positions.params(), positions.apply(&x)),
        (
            "Rotary",
            vec![],
            rotary.apply(&data(&graph, "r", "1|->1,3,2", test_values(6, 6))),
        ),
    ];
    for (block, params, out) in &outs {
        for p in params {
            assert_eq!(
                p.precision(),
                F64,
                "{block}: parameter '{}' as built",
                p.label()
            );
        }
        assert_eq!(out.precision(), F64, "{block}: output as built");
    }
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let routine = ctx
        .forward(&outs.iter().map(|(_, _, out)| out).collect::<Vec<_>>())
        .unwrap();
    ctx.run(&routine).unwrap();
    for (block, params, out) in &outs {
        for p in params {
            assert_eq!(p.precision(), F64, "{block}: parameter '{}'", p.label());
        }
        assert_eq!(out.precision(), F64, "{block}: output");
        assert!(
            ctx.values(out).unwrap().iter().all(|v| v.is_finite()),
            "{block}"
        );
    }

    // Beside nothing that decides, the graph's default: f32 unless changed, bf16 here.
    for default in [None, Some(Precision::Bf16)] {
        let graph = Graph::new();
        if let Some(precision) = default {
            graph.set_default_precision(precision);
        }
        let expected = default.unwrap_or(Precision::F32);
        let blocks: [(&str, Vec<Tensor>); 4] = [
            ("Dense", Dense::new(&graph, "dense", 3).params()),
            (
                "Embedding",
                Embedding::new(&graph, "embedding", 5, 4).params(),
            ),
            ("FeedForward", FeedForward::new(&graph, "ff", 4, 6).params()),
            (
                "DecoderBlock",
                DecoderBlock::new(&graph, "decoder", 4, 2, 6, Placement::Post).params(),
            ),
        ];
        for (block, params) in blocks {
            for p in params {
                assert_eq!(p.precision(), expected, "{block}: '{}'", p.label());
            }
        }
    }

    // A precision chosen is kept whatever the users: an f32 layer over f64 data.
    let graph = Graph::new();
    let chosen = Dense::with_precision(&graph, "chosen", 3, Precision::F32);
    let out = chosen.apply(&data(&graph, "v", "2|->3", test_values(6, 2)));
    assert!(
        chosen
            .params()
            .iter()
            .all(|p| p.precision() == Precision::F32)
    );
    assert_eq!(out.precision(), F64);
}

#[test]
fn convolutional_blocks_hold_f64_with_their_running_statistics() {
    use rcannl_nn::cnn::{ConvBn, ConvBnRelu, DepthwiseSeparable, LeNet, ResidualBlock, VggBlock};
    use rcannl_nn::conv::{Conv2d, ConvOptions, DepthwiseConv2d};
    use rcannl_nn::norm::Mode;
    let image = |graph: &Graph| data(graph, "images", "2|->8,8,3", test_values(384, 5));
    let state_is_f64 = |block: &str, state: Vec<Tensor>| {
        for t in state {
            assert_eq!(t.precision(), F64, "{block}: state '{}'", t.label());
        }
    };

    let graph = Graph::new();
    let conv = Conv2d::new(&graph, "conv", 4, 3, ConvOptions::default().precision(F64));
    assert_f64("Conv2d", &conv.params(), &conv.apply(&image(&graph)));
    let graph = Graph::new();
    let depthwise = DepthwiseConv2d::with_precision(&graph, "depthwise", 3, 1, true, F64);
    assert_f64(
        "DepthwiseConv2d",
        &depthwise.params(),
        &depthwise.apply(&image(&graph)),
    );
    let graph = Graph::new();
    let block = ConvBn::with_precision(&graph, "conv_bn", [3, 4], 3, 1, F64);
    state_is_f64("ConvBn", block.state());
    assert_f64(
        "ConvBn",
        &block.params(),
        &block.apply(&image(&graph), Mode::Eval),
    );
    let graph = Graph::new();
    let block = ConvBnRelu::with_precision(&graph, "conv_bn_relu", [3, 4], 3, 2, F64);
    assert_f64(
        "ConvBnRelu",
        &block.params(),
        &block.apply(&image(&graph), Mode::Eval),
    );
    let graph = Graph::new();
    let block = ResidualBlock::with_precision(&graph, "residual", [3, 8], 2, F64);
    state_is_f64("ResidualBlock", block.state());
    assert_f64(
        "ResidualBlock",
        &block.params(),
        &block.apply(&image(&graph), Mode::Eval),
    );
    let graph = Graph::new();
    let block = VggBlock::with_precision(&graph, "vgg", 2, 4, F64);
    assert_f64("VggBlock", &block.params(), &block.apply(&image(&graph)));
    let graph = Graph::new();
    let block = LeNet::with_precision(&graph, "lenet", 10, F64);
    assert_f64("LeNet", &block.params(), &block.apply(&image(&graph)));
    let graph = Graph::new();
    let block = DepthwiseSeparable::with_precision(&graph, "separable", [3, 6], 3, 1, F64);
    state_is_f64("DepthwiseSeparable", block.state());
    assert_f64(
        "DepthwiseSeparable",
        &block.params(),
        &block.apply(&image(&graph), Mode::Eval),
    );
}
