//! An encoder–decoder transformer, written from the docs and the `seq2seq` example: an
//! `EncoderDecoder` over padded source sequences (the padding masked in the encoder's
//! self-attention and the decoder's cross-attention) and target sequences under teacher forcing
//! (causal self-attention), scored by its loss, the mean cross-entropy over the target positions
//! its mask keeps. Two configurations: the example's (two post-norm encoder and two decoder
//! blocks, sinusoidal positions) and a pre-norm one (one block each, learned positions, the
//! stacks' final norms). From PyTorch's parameters and sequences (`encoder_decoder/reference.py`),
//! the logits, the loss and the loss's gradient with respect to every parameter are checked in
//! f64, and the post-norm model's also in f32.

use rcannl::backends::Backend;
use rcannl::nn::attention::{AttendOptions, Attention, PositionDense};
use rcannl::nn::embedding::Embedding;
use rcannl::nn::norm::LayerNorm;
use rcannl::nn::position::{PositionKind, Positions};
use rcannl::nn::transformer::{
    DecoderBlock, EncoderBlock, EncoderDecoder, EncoderDecoderConfig, FeedForward, Placement,
    SequencePairs,
};
use rcannl::prelude::*;

use crate::support;

const BATCH: usize = 2;
/// The label of the model: its parameters are `model.<part>…`, and so are their arrays'
/// names (`<label>.npy` the starting values, `<label>.grad.npy` the loss's gradient).
const LABEL: &str = "model";

/// The example's configuration, small: two post-norm blocks in each stack, sinusoidal positions.
const POST_NORM: EncoderDecoderConfig = EncoderDecoderConfig {
    source_vocabulary: 7,
    target_vocabulary: 8,
    source_time: 4,
    target_time: 5,
    model: 8,
    heads: 2,
    hidden: 16,
    encoder_blocks: 2,
    decoder_blocks: 2,
    placement: Placement::Post,
    positions: PositionKind::Sinusoidal,
};

/// One pre-norm block in each stack (so a final norm at the end of each), learned positions.
const PRE_NORM: EncoderDecoderConfig = EncoderDecoderConfig {
    encoder_blocks: 1,
    decoder_blocks: 1,
    placement: Placement::Pre,
    positions: PositionKind::Learned,
    ..POST_NORM
};

/// The model of `config` with parameters of `precision`. The library's constructor makes f32
/// parameters; at another precision the same blocks are built from their public fields, with
/// the axes its constructors give.
fn model(graph: &Graph, config: EncoderDecoderConfig, precision: Precision) -> EncoderDecoder {
    if precision == Precision::F32 {
        return EncoderDecoder::new(graph, LABEL, config);
    }
    let c = config;
    let head_width = c.model / c.heads;
    let param = |label: &str| graph.param(label).precision(precision);
    let norm = |label: &str| LayerNorm::with_precision(graph, label, precision);
    let dense = |label: &str, width: usize| PositionDense {
        w: param(&format!("{label}.w")).output([width]).build(),
        b: param(&format!("{label}.b")).output([width]).build(),
    };
    let feed_forward = |label: &str| FeedForward {
        up: dense(&format!("{label}.up"), c.hidden),
        down: dense(&format!("{label}.down"), c.model),
    };
    let attention = |label: &str| {
        let projection = |name: &str| {
            param(&format!("{label}.{name}"))
                .output([c.heads, head_width])
                .build()
        };
        Attention {
            query: projection("query"),
            key: projection("key"),
            value: projection("value"),
            output: param(&format!("{label}.output"))
                .input([c.heads, head_width])
                .output([c.model])
                .build(),
            head: head_width,
            causal: false,
        }
    };
    let embedding = |label: &str, vocabulary: usize| Embedding {
        table: param(&format!("{label}.table"))
            .input([vocabulary])
            .output([c.model])
            .build(),
        vocabulary,
    };
    let positions = |label: &str, time: usize| {
        Positions::with_precision(graph, label, c.positions, time, c.model, precision)
    };
    EncoderDecoder {
        config,
        source_embedding: embedding(&format!("{LABEL}.source_embedding"), c.source_vocabulary),
        target_embedding: embedding(&format!("{LABEL}.target_embedding"), c.target_vocabulary),
        source_positions: positions(&format!("{LABEL}.source_positions"), c.source_time),
        target_positions: positions(&format!("{LABEL}.target_positions"), c.target_time),
        encoder: (0..c.encoder_blocks)
            .map(|i| {
                let block = format!("{LABEL}.encoder{i}");
                EncoderBlock {
                    attention: attention(&format!("{block}.attention")),
                    feed_forward: feed_forward(&format!("{block}.mlp")),
                    norm1: norm(&format!("{block}.norm1")),
                    norm2: norm(&format!("{block}.norm2")),
                    placement: c.placement,
                }
            })
            .collect(),
        decoder: (0..c.decoder_blocks)
            .map(|i| {
                let block = format!("{LABEL}.decoder{i}");
                DecoderBlock {
                    self_attention: attention(&format!("{block}.self_attention")),
                    cross_attention: attention(&format!("{block}.cross_attention")),
                    feed_forward: feed_forward(&format!("{block}.mlp")),
                    norm1: norm(&format!("{block}.norm1")),
                    norm2: norm(&format!("{block}.norm2")),
                    norm3: norm(&format!("{block}.norm3")),
                    placement: c.placement,
                }
            })
            .collect(),
        final_norms: (c.placement == Placement::Pre).then(|| {
            (
                norm(&format!("{LABEL}.encoder_norm")),
                norm(&format!("{LABEL}.decoder_norm")),
            )
        }),
        head: dense(&format!("{LABEL}.head"), c.target_vocabulary),
    }
}

/// The sequence pairs' tensors, to be set from PyTorch's arrays of the same names.
fn pairs(graph: &Graph, config: EncoderDecoderConfig) -> SequencePairs {
    let sequences = |label: &str, time: usize| {
        graph
            .data(label)
            .shape(&format!("{BATCH}|->{time}"))
            .build()
    };
    SequencePairs {
        source: sequences("source", config.source_time),
        source_mask: sequences("source_mask", config.source_time),
        target_inputs: sequences("target_inputs", config.target_time),
        targets: sequences("targets", config.target_time),
        target_mask: sequences("target_mask", config.target_time),
    }
}

/// The model of `config` in `precision` on both CPU backends, from the arrays of `program`
/// (a folder of PyTorch's arrays): its logits, its loss and every parameter's gradient.
fn forward_and_gradients(program: &str, config: EncoderDecoderConfig, precision: Precision) {
    let graph = Graph::new();
    let model = model(&graph, config, precision);
    let pairs = pairs(&graph, config);
    let options = AttendOptions::new();
    let logits = model.logits(
        &pairs.source,
        &pairs.source_mask,
        &pairs.target_inputs,
        &options,
    );
    let loss = model.loss(&pairs, &options);
    let params = model.params();
    assert_eq!(
        params.len(),
        reference_gradients(program),
        "parameters of the model against PyTorch's"
    );
    let inputs = [
        (&pairs.source, "source"),
        (&pairs.source_mask, "source_mask"),
        (&pairs.target_inputs, "target_inputs"),
        (&pairs.targets, "targets"),
        (&pairs.target_mask, "target_mask"),
    ];
    for backend in support::backends(precision) {
        let name = backend.name();
        let mut ctx = context(&graph, backend, program, &params, &inputs);
        let forward = ctx.forward(&[&logits, &loss]).unwrap();
        ctx.run(&forward).unwrap();
        for (what, t) in [("logits", &logits), ("loss", &loss)] {
            let values = ctx.values(t).unwrap();
            support::check(
                &format!("{name}: {what}"),
                &values,
                program,
                what,
                precision,
            );
        }
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run(&backprop).unwrap();
        for param in &params {
            let label = param.label();
            support::check(
                &format!("{name}: gradient of '{label}'"),
                &ctx.grad(param).unwrap(),
                program,
                &format!("{label}.grad"),
                precision,
            );
        }
    }
}

/// The number of parameters of PyTorch's model: the gradients it wrote.
fn reference_gradients(program: &str) -> usize {
    std::fs::read_dir(support::folder(program))
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".grad.npy")
        })
        .count()
}

/// A context on `backend` holding `program`'s starting parameters and sequences.
fn context(
    graph: &Graph,
    backend: Box<dyn Backend>,
    program: &str,
    params: &[Tensor],
    inputs: &[(&Tensor, &str)],
) -> Context {
    let mut ctx = Context::with_backend(graph, backend);
    for param in params {
        support::set_from_reference(&mut ctx, param, program, &param.label());
    }
    for (t, name) in inputs {
        support::set_from_reference(&mut ctx, t, program, name);
    }
    ctx
}

#[test]
fn encoder_decoder_post_norm_f64() {
    forward_and_gradients("encoder_decoder/post_norm", POST_NORM, Precision::F64);
}

#[test]
fn encoder_decoder_post_norm_f32() {
    forward_and_gradients("encoder_decoder/post_norm", POST_NORM, Precision::F32);
}

#[test]
fn encoder_decoder_pre_norm_f64() {
    forward_and_gradients("encoder_decoder/pre_norm", PRE_NORM, Precision::F64);
}
