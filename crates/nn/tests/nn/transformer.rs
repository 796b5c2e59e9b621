//! The transformer family: gradients by finite differences on both CPU backends for softmax over
//! any axis, masked and cross-attention, temperature, attention dropout, the encoder and decoder
//! blocks, the encoder–decoder loss and learned positions; values against direct computations.

use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_nn::attention::{
    AttendOptions, TransformerBlock, attend, attend_with, attention_weights, causal_mask,
};
use rcannl_nn::embedding::Embedding;
use rcannl_nn::loss::sequence_cross_entropy;
use rcannl_nn::norm::{
    log_softmax_axis, log_softmax_with, output_axis_spec, softmax_axis, softmax_with,
};
use rcannl_nn::position::{LearnedPositions, PositionKind, Sinusoidal};
use rcannl_nn::transformer::{
    DecoderBlock, EncoderBlock, EncoderDecoder, EncoderDecoderConfig, Placement, SequencePairs,
    embed_sequence,
};
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Tensor};

use crate::support::{backends, check, data, weights};

/// A padding mask for 2 sequences of 5 keys: the first has 3 tokens, the second 5.
fn padding(graph: &Graph) -> Tensor {
    data(
        graph,
        "padding",
        "2|->5",
        vec![1., 1., 1., 0., 0., 1., 1., 1., 1., 1.],
    )
}

/// How far apart two backends' values of `precision` may be, relative to their size: a few
/// units of the precision's last place, as reordered sums and vectorized functions round.
fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F64 => 1e-9,
        Precision::F32 => 1e-5,
        _ => 1e-2,
    }
}

/// Runs `outs` forward on every backend, returning their values (within the tolerance of the
/// least precise of each output and the graph's parameters, which it may be computed through,
/// on both).
fn forward(graph: &Graph, outs: &[&Tensor]) -> Vec<Vec<f64>> {
    let params = graph.params();
    let mut results = Vec::new();
    for backend in backends() {
        let mut ctx = Context::with_backend(graph, backend);
        ctx.init_params().unwrap();
        let routine = ctx.forward(outs).unwrap();
        ctx.run(&routine).unwrap();
        let values: Vec<Vec<f64>> = outs.iter().map(|o| ctx.values(o).unwrap()).collect();
        results.push(values);
    }
    for ((first, second), out) in results[0].iter().zip(&results[1]).zip(outs) {
        let tolerance = params
            .iter()
            .map(|p| tolerance(p.precision()))
            .fold(tolerance(out.precision()), f64::max);
        for (a, b) in first.iter().zip(second) {
            assert!(
                (a - b).abs() <= tolerance * a.abs().max(1.0),
                "'{}': {a} vs {b}",
                out.label()
            );
        }
    }
    results.remove(0)
}

// The four projections of attention over width 4 with 2 heads of 2, as check inputs.
const PROJECTIONS: [&str; 4] = ["4->2,2", "4->2,2", "4->2,2", "2,2->4"];

fn projections(p: &[Tensor]) -> [&Tensor; 4] {
    [&p[0], &p[1], &p[2], &p[3]]
}

#[test]
fn softmax_over_other_axes_gradients() {
    for axis in [0, 1, -2] {
        check("softmax_axis", &["2|->3,4,2"], |g, p| {
            softmax_axis(&p[0], axis).pmul(&weights(g, "2|->3,4,2", 48))
        });
        check("log_softmax_axis", &["2|->3,4,2"], |g, p| {
            log_softmax_axis(&p[0], axis).pmul(&weights(g, "2|->3,4,2", 48))
        });
    }
    // Over the batch axis, by a spec.
    let over_batch = "b|...->... => 0|...->...";
    check("softmax_with over the batch", &["3|->4"], |g, p| {
        softmax_with(&p[0], over_batch).pmul(&weights(g, "3|->4", 12))
    });
    check("log_softmax_with over the batch", &["3|->4"], |g, p| {
        log_softmax_with(&p[0], over_batch).pmul(&weights(g, "3|->4", 12))
    });
}

#[test]
fn softmax_over_other_axes_values() {
    let graph = Graph::new();
    let values = test_values(24, 3);
    let x = data(&graph, "x", "2|->3,4", values.clone());
    let outs = forward(
        &graph,
        &[
            &softmax_axis(&x, 0),
            &softmax_axis(&x, -1),
            &log_softmax_axis(&x, -2),
            &softmax_with(&x, "b|...->... => 0|...->..."),
        ],
    );
    let at = |b: usize, i: usize, j: usize| values[b * 12 + i * 4 + j];
    for b in 0..2 {
        for i in 0..3 {
            for j in 0..4 {
                let cell = b * 12 + i * 4 + j;
                let over_rows: f64 = (0..3).map(|k| at(b, k, j).exp()).sum();
                let over_columns: f64 = (0..4).map(|k| at(b, i, k).exp()).sum();
                let over_batch: f64 = (0..2).map(|k| at(k, i, j).exp()).sum();
                let expected = [
                    at(b, i, j).exp() / over_rows,
                    at(b, i, j).exp() / over_columns,
                    at(b, i, j) - over_rows.ln(),
                    at(b, i, j).exp() / over_batch,
                ];
                for (out, e) in outs.iter().zip(expected) {
                    assert!((out[cell] - e).abs() < 1e-12, "{} vs {e}", out[cell]);
                }
            }
        }
    }
}

#[test]
fn masked_attention_gradients() {
    // x: 2 sequences of 5 positions, width 4.
    let mut shapes = vec!["2|->5,4"];
    shapes.extend(PROJECTIONS);
    check("padding-masked self-attention", &shapes, |g, p| {
        let options = AttendOptions::new().mask(&padding(g));
        let out = attend_with(&p[0], &p[0], projections(&p[1..]), 2, &options);
        out.pmul(&weights(g, "2|->5,4", 40))
    });
    check("arbitrary and causal masks", &shapes, |g, p| {
        let pairs: Vec<f64> = (0..25).map(|i| f64::from(i % 3 != 1)).collect();
        let options = AttendOptions::new()
            .mask(&data(g, "pairs", "5,5", pairs))
            .mask(&causal_mask(g, 5))
            .mask(&padding(g));
        let out = attend_with(&p[0], &p[0], projections(&p[1..]), 2, &options);
        out.pmul(&weights(g, "2|->5,4", 40))
    });
    check("a mask per sequence", &shapes, |g, p| {
        let per_sequence: Vec<f64> = (0..50).map(|i| f64::from(i % 4 != 2)).collect();
        let options = AttendOptions::new().mask(&data(g, "masks", "2|->5,5", per_sequence));
        let out = attend_with(&p[0], &p[0], projections(&p[1..]), 2, &options);
        out.pmul(&weights(g, "2|->5,4", 40))
    });
    check("temperature", &shapes, |g, p| {
        let options = AttendOptions::new().temperature(0.5);
        let out = attend_with(&p[0], &p[0], projections(&p[1..]), 2, &options);
        out.pmul(&weights(g, "2|->5,4", 40))
    });
    check("attention dropout", &shapes, |g, p| {
        let step = g
            .data("step")
            .shape("")
            .precision(Precision::U32)
            .values(vec![7.0])
            .build();
        let options = AttendOptions::new().dropout(0.3, &step);
        let out = attend_with(&p[0], &p[0], projections(&p[1..]), 2, &options);
        out.pmul(&weights(g, "2|->5,4", 40))
    });
}

#[test]
fn cross_attention_gradients() {
    // Queries: 2 sequences of 3 positions; memory: 5 positions, padded.
    let mut shapes = vec!["2|->3,4", "2|->5,4"];
    shapes.extend(PROJECTIONS);
    check("cross-attention", &shapes, |g, p| {
        let options = AttendOptions::new().mask(&padding(g)).temperature(2.0);
        let out = attend_with(&p[0], &p[1], projections(&p[2..]), 2, &options);
        out.pmul(&weights(g, "2|->3,4", 24))
    });
}

/// A deep stack, built as the compile benchmark builds one: its backprop routine is long
/// enough (over a thousand top-level statements) that the optimizer works on it chunk by chunk,
/// each repeated block's chunks once.
#[test]
fn a_deep_stack_of_blocks_gradients() {
    check("eight causal transformer blocks", &["2|->5,4"], |g, p| {
        (0..8)
            .fold(p[0].clone(), |h, i| {
                TransformerBlock::new(g, &format!("block{i}"), 4, 2, 8, true).apply(&h, 5, None)
            })
            .pmul(&weights(g, "2|->5,4", 40))
    });
}

#[test]
fn encoder_and_decoder_block_gradients() {
    for placement in [Placement::Post, Placement::Pre] {
        check("encoder block", &["2|->5,4"], |g, p| {
            let block = EncoderBlock::new(g, "encoder", 4, 2, 6, placement);
            let options = AttendOptions::new().mask(&padding(g));
            block
                .apply(&p[0], &options)
                .pmul(&weights(g, "2|->5,4", 40))
        });
        check("decoder block", &["2|->3,4", "2|->5,4"], |g, p| {
            let block = DecoderBlock::new(g, "decoder", 4, 2, 6, placement);
            let self_options = AttendOptions::new().mask(&causal_mask(g, 3));
            let cross_options = AttendOptions::new().mask(&padding(g));
            block
                .apply(&p[0], &p[1], &self_options, &cross_options)
                .pmul(&weights(g, "2|->3,4", 24))
        });
    }
}

#[test]
fn learned_positions_and_sequence_loss_gradients() {
    check("learned positions", &["2|->3,4", "3,4"], |g, p| {
        let positions = LearnedPositions {
            table: p[1].clone(),
        };
        positions
            .apply(&p[0])
            .tanh()
            .pmul(&weights(g, "2|->3,4", 24))
    });
    check("sequence cross-entropy", &["2|->3,5"], |g, p| {
        let targets = data(g, "targets", "2|->3", vec![4., 0., 2., 1., 3., 3.]);
        let mask = data(g, "mask", "2|->3", vec![1., 1., 0., 1., 1., 1.]);
        sequence_cross_entropy(&p[0], &targets, &mask)
    });
}

/// Two pairs: sources of 4 tokens (the first padded after 2), targets of 3 (the first padded
/// after 2), over vocabularies of 6 and 5.
fn pairs(graph: &Graph) -> SequencePairs {
    SequencePairs {
        source: data(
            graph,
            "source",
            "2|->4",
            vec![1., 5., 0., 0., 2., 3., 4., 1.],
        ),
        source_mask: data(
            graph,
            "source mask",
            "2|->4",
            vec![1., 1., 0., 0., 1., 1., 1., 1.],
        ),
        target_inputs: data(
            graph,
            "target inputs",
            "2|->3",
            vec![0., 3., 2., 0., 1., 4.],
        ),
        targets: data(graph, "targets", "2|->3", vec![3., 2., 0., 1., 4., 2.]),
        target_mask: data(graph, "target mask", "2|->3", vec![1., 1., 0., 1., 1., 1.]),
    }
}

fn config(placement: Placement, positions: PositionKind) -> EncoderDecoderConfig {
    EncoderDecoderConfig {
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
    }
}

#[test]
fn encoder_decoder_loss_gradients() {
    // The source embedding, the target's learned positions and the head's weights are the check's
    // inputs: the loss's gradient reaches the first only through the encoder and
    // cross-attention.
    for (placement, positions) in [
        (Placement::Post, PositionKind::Learned),
        (Placement::Pre, PositionKind::Sinusoidal),
    ] {
        check("encoder-decoder loss", &["6->4", "3,4", "4->5"], |g, p| {
            let mut model = EncoderDecoder::new(g, "model", config(placement, positions));
            model.source_embedding.table = p[0].clone();
            model.target_positions = rcannl_nn::position::Positions::Learned(LearnedPositions {
                table: p[1].clone(),
            });
            model.head.w = p[2].clone();
            model.loss(&pairs(g), &AttendOptions::new())
        });
    }
}

/// Direct multi-head attention in f64: `x` (`t × d`) attending to `memory` (`s × d`) through
/// projections laid out as tensors hold them (output axes first: `[h][e][d]` for the query, key
/// and value, `[d][h][e]` for the output), with an additive mask per query and key (1 or 0) and
/// a temperature. Returns the weights (`[h][t][s]`) and the output (`[t][d]`).
#[allow(clippy::too_many_arguments)]
fn direct_attention(
    x: &[f64],
    memory: &[f64],
    w: [&[f64]; 4],
    (t, s, d, h, e): (usize, usize, usize, usize, usize),
    mask: impl Fn(usize, usize) -> bool,
    temperature: f64,
) -> (Vec<f64>, Vec<f64>) {
    let project = |source: &[f64], w: &[f64], len: usize| {
        let mut out = vec![0.0; h * len * e];
        for hh in 0..h {
            for p in 0..len {
                for ee in 0..e {
                    out[(hh * len + p) * e + ee] = (0..d)
                        .map(|dd| source[p * d + dd] * w[(hh * e + ee) * d + dd])
                        .sum();
                }
            }
        }
        out
    };
    let (q, k, v) = (
        project(x, w[0], t),
        project(memory, w[1], s),
        project(memory, w[2], s),
    );
    let mut weights = vec![0.0; h * t * s];
    for hh in 0..h {
        for tt in 0..t {
            let scores: Vec<f64> = (0..s)
                .map(|ss| {
                    let dot: f64 = (0..e)
                        .map(|ee| q[(hh * t + tt) * e + ee] * k[(hh * s + ss) * e + ee])
                        .sum();
                    dot / ((e as f64).sqrt() * temperature)
                })
                .collect();
            let top = (0..s)
                .filter(|&ss| mask(tt, ss))
                .map(|ss| scores[ss])
                .fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = (0..s)
                .map(|ss| {
                    if mask(tt, ss) {
                        (scores[ss] - top).exp()
                    } else {
                        0.0
                    }
                })
                .collect();
            let total: f64 = exps.iter().sum();
            for ss in 0..s {
                weights[(hh * t + tt) * s + ss] = exps[ss] / total;
            }
        }
    }
    let mut out = vec![0.0; t * d];
    for tt in 0..t {
        for dd in 0..d {
            let mut sum = 0.0;
            for hh in 0..h {
                for ee in 0..e {
                    let mixed: f64 = (0..s)
                        .map(|ss| weights[(hh * t + tt) * s + ss] * v[(hh * s + ss) * e + ee])
                        .sum();
                    sum += mixed * w[3][(dd * h + hh) * e + ee];
                }
            }
            out[tt * d + dd] = sum;
        }
    }
    (weights, out)
}

fn assert_close(actual: &[f64], expected: &[f64], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!((a - e).abs() < 1e-9, "{what}, cell {i}: {a} vs {e}");
    }
}

#[test]
fn masked_cross_attention_matches_a_direct_computation() {
    // One sequence of 3 queries over a memory of 5 keys, 2 heads of 2, temperature 1.5, the
    // keys masked by padding (the last two) and per pair (query 0 ignores key 1).
    let (t, s, d, h, e) = (3, 5, 4, 2, 2);
    let x_values = test_values(t * d, 11);
    let memory_values = test_values(s * d, 12);
    let w_values: Vec<Vec<f64>> = (0..4).map(|i| test_values(16, 20 + i)).collect();
    let keep = |tt: usize, ss: usize| ss < 3 && !(tt == 0 && ss == 1);

    let graph = Graph::new();
    let x = data(&graph, "x", "1|->3,4", x_values.clone());
    let memory = data(&graph, "memory", "1|->5,4", memory_values.clone());
    let w: Vec<Tensor> = PROJECTIONS
        .iter()
        .zip(&w_values)
        .map(|(shape, values)| data(&graph, "w", shape, values.clone()))
        .collect();
    let pair_mask: Vec<f64> = (0..t * s)
        .map(|i| f64::from(!(i / s == 0 && i % s == 1)))
        .collect();
    let options = AttendOptions::new()
        .mask(&data(&graph, "padding", "1|->5", vec![1., 1., 1., 0., 0.]))
        .mask(&data(&graph, "pairs", "3,5", pair_mask))
        .temperature(1.5);
    let attention_weights = attention_weights(&x, &memory, [&w[0], &w[1]], e, &options);
    let out = attend_with(&x, &memory, projections(&w), e, &options);
    let values = forward(&graph, &[&attention_weights, &out]);

    let w_slices: Vec<&[f64]> = w_values.iter().map(Vec::as_slice).collect();
    let (expected_weights, expected_out) = direct_attention(
        &x_values,
        &memory_values,
        [w_slices[0], w_slices[1], w_slices[2], w_slices[3]],
        (t, s, d, h, e),
        keep,
        1.5,
    );
    assert_close(&values[0], &expected_weights, "weights");
    assert_close(&values[1], &expected_out, "output");
    // Masked keys get exactly zero weight.
    for hh in 0..h {
        for tt in 0..t {
            for ss in 0..s {
                if !keep(tt, ss) {
                    assert_eq!(values[0][(hh * t + tt) * s + ss], 0.0);
                }
            }
        }
    }
}

#[test]
fn a_padding_mask_gives_the_result_of_the_unpadded_sequence() {
    // Sequences of 3 tokens padded to 5 with arbitrary values, against the same 3 unpadded.
    let tokens = test_values(2 * 3 * 4, 31);
    let mut padded = Vec::new();
    for sequence in tokens.chunks(12) {
        padded.extend_from_slice(sequence);
        padded.extend(test_values(8, 32 + padded.len() as u64));
    }
    let graph = Graph::new();
    let w: Vec<Tensor> = PROJECTIONS
        .iter()
        .enumerate()
        .map(|(i, shape)| data(&graph, "w", shape, test_values(16, 40 + i as u64)))
        .collect();
    let short = data(&graph, "short", "2|->3,4", tokens);
    let long = data(&graph, "long", "2|->5,4", padded);
    let mask = data(
        &graph,
        "padding",
        "2|->5",
        vec![1., 1., 1., 0., 0., 1., 1., 1., 0., 0.],
    );
    let options = AttendOptions::new().mask(&mask);
    // Cross-attention from the short sequence over either memory.
    let cross_padded = attend_with(&short, &long, projections(&w), 2, &options);
    let cross_plain = attend_with(&short, &short, projections(&w), 2, &AttendOptions::new());
    // A post-norm encoder block: its first 3 positions.
    let block = EncoderBlock::new(&graph, "encoder", 4, 2, 6, Placement::Post);
    let block_padded = block.apply(&long, &options);
    let block_plain = block.apply(&short, &AttendOptions::new());
    let values = forward(
        &graph,
        &[&cross_padded, &cross_plain, &block_padded, &block_plain],
    );
    assert_close(&values[0], &values[1], "cross-attention");
    let unpadded: Vec<f64> = values[2]
        .chunks(20)
        .flat_map(|sequence| sequence[..12].to_vec())
        .collect();
    assert_close(&unpadded, &values[3], "encoder block");
}

#[test]
fn the_causal_mask_as_a_tensor() {
    let graph = Graph::new();
    let mask = causal_mask(&graph, 3);
    let values = forward(&graph, &[&mask]);
    assert_eq!(values[0], vec![1., 0., 0., 1., 1., 0., 1., 1., 1.]);
    // The old form of causal attention is the causal mask given as a tensor.
    let x = data(&graph, "x", "2|->3,4", test_values(24, 51));
    let w: Vec<Tensor> = PROJECTIONS
        .iter()
        .enumerate()
        .map(|(i, shape)| data(&graph, "w", shape, test_values(16, 60 + i as u64)))
        .collect();
    let old = attend(&x, projections(&w), 2, Some(3), None);
    let new = attend_with(
        &x,
        &x,
        projections(&w),
        2,
        &AttendOptions::new().mask(&mask),
    );
    let values = forward(&graph, &[&old, &new]);
    assert_eq!(values[0], values[1]);
}

#[test]
fn sinusoidal_positions_at_known_positions() {
    let graph = Graph::new();
    let positions = Sinusoidal::new(&graph, 3, 4);
    let zeros = data(&graph, "zeros", "1|->3,4", vec![0.0; 12]);
    let values = forward(&graph, &[&positions.apply(&zeros)]);
    // Position p, pair i: sin and cos of p / 10000^(2i/4), i.e. of p and p/100.
    let expected: Vec<f64> = (0..3)
        .flat_map(|p| {
            let p = p as f64;
            [p.sin(), p.cos(), (p / 100.0).sin(), (p / 100.0).cos()]
        })
        .collect();
    // The table is held in f32.
    for (a, e) in values[0].iter().zip(&expected) {
        assert!((a - e).abs() < 1e-7, "{a} vs {e}");
    }
    assert_eq!(values[0][..4], [0.0, 1.0, 0.0, 1.0]);
}

#[test]
fn sequence_loss_leaves_padded_positions_out() {
    let graph = Graph::new();
    let logits_values = test_values(2 * 3 * 5, 71);
    let logits = data(&graph, "logits", "2|->3,5", logits_values.clone());
    let targets = [4usize, 0, 2, 1, 3, 3];
    let mask = [1., 1., 0., 1., 1., 1.];
    let loss = sequence_cross_entropy(
        &logits,
        &data(
            &graph,
            "targets",
            "2|->3",
            targets.iter().map(|&t| t as f64).collect(),
        ),
        &data(&graph, "mask", "2|->3", mask.to_vec()),
    );
    let values = forward(&graph, &[&loss]);
    let mut total = 0.0;
    for (position, row) in logits_values.chunks(5).enumerate() {
        let normalizer: f64 = row.iter().map(|l| l.exp()).sum::<f64>().ln();
        total += mask[position] * (normalizer - row[targets[position]]);
    }
    assert_close(&values[0], &[total / 5.0], "loss");
}

#[test]
fn meaningless_attention_settings_are_errors() {
    for (setting, expected) in [(0, "temperature"), (1, "dropout probability")] {
        let graph = Graph::new();
        let x = data(&graph, "x", "1|->2,4", test_values(8, 81));
        let w: Vec<Tensor> = PROJECTIONS
            .iter()
            .map(|shape| data(&graph, "w", shape, test_values(16, 82)))
            .collect();
        let options = if setting == 0 {
            AttendOptions::new().temperature(0.0)
        } else {
            AttendOptions::new().dropout(1.0, &graph.number(0.0))
        };
        let out = attend_with(&x, &x, projections(&w), 2, &options);
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        let error = ctx.forward(&[&out]).unwrap_err();
        assert!(error.message.contains(expected), "{}", error.message);
    }
}

#[test]
fn the_encoder_decoder_decodes_position_by_position() {
    // Changing a later target input changes no earlier position's logits (the decoder is causal),
    // and changing a padded source token changes nothing.
    let logits_for = |target_inputs: Vec<f64>, source: Vec<f64>| {
        let graph = Graph::new();
        let model = EncoderDecoder::new(
            &graph,
            "model",
            config(Placement::Post, PositionKind::Learned),
        );
        let mut pairs = pairs(&graph);
        pairs.target_inputs = data(&graph, "inputs", "2|->3", target_inputs);
        pairs.source = data(&graph, "source", "2|->4", source);
        let logits = model.logits(
            &pairs.source,
            &pairs.source_mask,
            &pairs.target_inputs,
            &AttendOptions::new(),
        );
        forward(&graph, &[&logits]).remove(0)
    };
    let source = vec![1., 5., 0., 0., 2., 3., 4., 1.];
    let base = logits_for(vec![0., 3., 2., 0., 1., 4.], source.clone());
    let later = logits_for(vec![0., 3., 1., 0., 1., 4.], source.clone());
    // Sequence 0, positions 0 and 1 (10 logits), unchanged; position 2 changed.
    assert_eq!(base[..10], later[..10]);
    assert_ne!(base[10..15], later[10..15]);
    assert_eq!(base[15..], later[15..]);
    let mut padded_source = source;
    padded_source[3] = 4.0;
    assert_eq!(
        logits_for(vec![0., 3., 2., 0., 1., 4.], padded_source),
        base
    );
}

#[test]
fn attention_dropout_zeroes_weights_or_scales_them() {
    let graph = Graph::new();
    let x = data(&graph, "x", "2|->5,4", test_values(40, 91));
    let w: Vec<Tensor> = PROJECTIONS
        .iter()
        .enumerate()
        .map(|(i, shape)| data(&graph, "w", shape, test_values(16, 92 + i as u64)))
        .collect();
    let step = graph
        .data("step")
        .shape("")
        .precision(Precision::U32)
        .values(vec![1.0])
        .build();
    let plain = attention_weights(&x, &x, [&w[0], &w[1]], 2, &AttendOptions::new());
    let dropped = attention_weights(
        &x,
        &x,
        [&w[0], &w[1]],
        2,
        &AttendOptions::new().dropout(0.5, &step),
    );
    let values = forward(&graph, &[&plain, &dropped]);
    let mut zeroed = 0;
    for (p, d) in values[0].iter().zip(&values[1]) {
        if *d == 0.0 {
            zeroed += 1;
        } else {
            assert!((d - 2.0 * p).abs() < 1e-12, "{d} vs 2 × {p}");
        }
    }
    // 100 weights, each dropped with probability 1/2.
    assert!((25..75).contains(&zeroed), "{zeroed} of 100 dropped");
}

#[test]
fn softmax_over_an_axis_the_tensor_lacks_is_an_error() {
    let graph = Graph::new();
    let x = data(&graph, "x", "2|->3,4", test_values(24, 3));
    let out = softmax_axis(&x, 2);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let error = ctx.forward(&[&out]).unwrap_err();
    // The error names the operand and says it has too few axes.
    assert!(
        error.message.contains("operand 1 'x': 2|->3,4") && error.message.contains("has 2"),
        "{}",
        error.message
    );
}

#[test]
fn softmax_over_an_axis_beyond_reach_is_an_error() {
    for axis in [isize::MIN, isize::MAX, 65, -66] {
        let graph = Graph::new();
        let x = data(&graph, "x", "2|->3,4", test_values(24, 3));
        let out = log_softmax_axis(&x, axis);
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        let error = ctx.forward(&[&out]).unwrap_err();
        assert!(
            error.message.contains(&format!("output axis {axis}")),
            "{}",
            error.message
        );
    }
    assert!(output_axis_spec(64).is_ok() && output_axis_spec(-65).is_ok());
}

#[test]
fn sequences_are_embedded_position_by_position() {
    let graph = Graph::new();
    let mut embedding = Embedding::new(&graph, "embedding", 3, 2);
    // `3 -> 2`, held output first: row `o` holds the `o`-th value of every token's vector.
    embedding.table = data(&graph, "table", "3->2", vec![10., 20., 30., 11., 21., 31.]);
    let ids = data(&graph, "ids", "2|->3", vec![2., 0., 1., 1., 1., 2.]);
    let values = forward(&graph, &[&embed_sequence(&embedding, &ids)]);
    assert_eq!(
        values[0],
        vec![30., 31., 10., 11., 20., 21., 20., 21., 20., 21., 30., 31.]
    );
}

#[test]
fn a_fully_masked_query_gets_uniform_weights_in_every_precision() {
    // 3 queries over 5 keys, 2 heads of 2: query 0 has every key masked, query 1 keys 1 and 3,
    // query 2 none.
    let (t, s, d, h, e) = (3, 5, 4, 2, 2);
    let x_values = test_values(t * d, 41);
    let memory_values = test_values(s * d, 42);
    let w_values: Vec<Vec<f64>> = (0..4).map(|i| test_values(16, 50 + i)).collect();
    let keep = |tt: usize, ss: usize| tt == 2 || (tt == 1 && ss != 1 && ss != 3);
    let w_slices: Vec<&[f64]> = w_values.iter().map(Vec::as_slice).collect();
    let (expected, _) = direct_attention(
        &x_values,
        &memory_values,
        [w_slices[0], w_slices[1], w_slices[2], w_slices[3]],
        (t, s, d, h, e),
        keep,
        1.0,
    );
    for (precision, tolerance) in [(Precision::F64, 1e-14), (Precision::F32, 1e-6)] {
        let graph = Graph::new();
        let tensor = |label: &str, shape: &str, values: &[f64]| {
            (graph.data(label).shape(shape).precision(precision))
                .values(values.to_vec())
                .build()
        };
        let x = tensor("x", "1|->3,4", &x_values);
        let memory = tensor("memory", "1|->5,4", &memory_values);
        let w: Vec<Tensor> = (PROJECTIONS.iter().zip(&w_values))
            .map(|(shape, values)| tensor("w", shape, values))
            .collect();
        let mask: Vec<f64> = (0..t * s).map(|i| f64::from(keep(i / s, i % s))).collect();
        let options = AttendOptions::new().mask(&tensor("mask", "3,5", &mask));
        let weights = attention_weights(&x, &memory, [&w[0], &w[1]], e, &options);
        // Each backend on its own: in f32 they may differ in the last bit.
        for backend in backends() {
            let name = backend.name();
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.forward(&[&weights]).unwrap();
            ctx.run(&routine).unwrap();
            let got = ctx.values(&weights).unwrap();
            check_uniform_or_masked(
                &got,
                &expected,
                (t, s, h),
                keep,
                tolerance,
                &format!("{name} {precision}"),
            );
        }
    }
}

/// Checks attention weights `got` (`[h][t][s]`) against `expected` (a direct softmax over the
/// keys `keep` keeps), within `tolerance`: query 0, whose every key is masked, weighs each
/// key 1/s; a masked key weighs exactly 0.
fn check_uniform_or_masked(
    got: &[f64],
    expected: &[f64],
    (t, s, h): (usize, usize, usize),
    keep: impl Fn(usize, usize) -> bool,
    tolerance: f64,
    run: &str,
) {
    for hh in 0..h {
        for tt in 0..t {
            for ss in 0..s {
                let cell = (hh * t + tt) * s + ss;
                let (value, what) = (got[cell], format!("{run} h{hh} t{tt} s{ss}"));
                if tt == 0 {
                    let uniform = 1.0 / s as f64;
                    assert!(
                        (value - uniform).abs() <= tolerance,
                        "{what}: {value}, not 1/{s}"
                    );
                } else if keep(tt, ss) {
                    let want = expected[cell];
                    assert!(
                        (value - want).abs() <= tolerance,
                        "{what}: {value} vs {want}"
                    );
                } else {
                    assert_eq!(value, 0.0, "{what}: a masked key");
                }
            }
        }
    }
}
