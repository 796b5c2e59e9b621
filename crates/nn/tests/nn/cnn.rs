//! The normalization layers and CNN blocks: every block's gradients by finite differences on
//! both CPU backends, batch normalization's values in both modes against a direct computation,
//! and its running statistics after several training steps against a hand computation.

use rcannl_ir::Precision;
use rcannl_nn::cnn::{ConvBnRelu, DepthwiseSeparable, LeNet, ResidualBlock, VggBlock};
use rcannl_nn::conv::{DepthwiseConv2d, depthwise_conv2d};
use rcannl_nn::loss::sum;
use rcannl_nn::norm::{BatchNorm, GroupNorm, Mode, RmsNorm};
use rcannl_nn::optim::Sgd;
use rcannl_tensor::gradcheck::test_values;
use rcannl_tensor::{Context, Graph, Tensor};

use crate::support::{backends, check, weights};

/// Batch normalization of `channels` f64 channels whose gain and bias are the check's inputs
/// 1 and 2.
fn batch_norm(graph: &Graph, inputs: &[Tensor], channels: usize) -> BatchNorm {
    let mut norm = BatchNorm::with_precision(graph, "bn", channels, Precision::F64);
    norm.gain = inputs[1].clone();
    norm.bias = inputs[2].clone();
    norm
}

#[test]
fn batch_norm_gradients_in_both_modes() {
    for mode in [Mode::Train, Mode::Eval] {
        check(
            &format!("batch norm 1-D {mode:?}"),
            &["4|->3", "|->3", "|->3"],
            |g, p| {
                batch_norm(g, p, 3)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "4|->3", 12))
            },
        );
        check(
            &format!("batch norm 2-D {mode:?}"),
            &["2|->3,2,2", "|->2", "|->2"],
            |g, p| {
                batch_norm(g, p, 2)
                    .apply(&p[0], mode)
                    .pmul(&weights(g, "2|->3,2,2", 24))
            },
        );
    }
}

#[test]
fn group_and_rms_norm_gradients() {
    check("group norm", &["2|->2,2,4", "|->4", "|->4"], |g, p| {
        let mut norm = GroupNorm::with_precision(g, "gn", 4, 2, Precision::F64).unwrap();
        norm.gain = p[1].clone();
        norm.bias = p[2].clone();
        norm.apply(&p[0]).pmul(&weights(g, "2|->2,2,4", 32))
    });
    check("rms norm", &["3|->4", "|->4"], |g, p| {
        let norm = RmsNorm {
            gain: p[1].clone(),
            epsilon: 1e-6,
        };
        norm.apply(&p[0]).pmul(&weights(g, "3|->4", 12))
    });
}

/// Per-channel mean and biased variance of `x`, rows of `channels` cells (the channel is the
/// fastest-moving axis, as in memory).
fn channel_statistics(x: &[f64], channels: usize) -> (Vec<f64>, Vec<f64>) {
    let n = (x.len() / channels) as f64;
    let mean: Vec<f64> = (0..channels)
        .map(|c| x.iter().skip(c).step_by(channels).sum::<f64>() / n)
        .collect();
    let variance = (0..channels)
        .map(|c| {
            x.iter()
                .skip(c)
                .step_by(channels)
                .map(|v| (v - mean[c]).powi(2))
                .sum::<f64>()
                / n
        })
        .collect();
    (mean, variance)
}

/// `(x − mean)/√(var + 1e-5)·gain + bias`, channel by channel.
fn normalized(x: &[f64], mean: &[f64], variance: &[f64], gain: &[f64], bias: &[f64]) -> Vec<f64> {
    let channels = mean.len();
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let c = i % channels;
            (v - mean[c]) / (variance[c] + 1e-5).sqrt() * gain[c] + bias[c]
        })
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-10 * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn batch_norm_values_in_both_modes() {
    for (shape, channels) in [("4|->3", 3), ("2|->3,1,2", 2), ("3|->1,1,4", 4)] {
        let cells = 12;
        let input = test_values(cells, 5);
        let gain: Vec<f64> = test_values(channels, 6);
        let bias: Vec<f64> = test_values(channels, 7);
        let running_mean: Vec<f64> = test_values(channels, 8);
        let running_var: Vec<f64> = test_values(channels, 9).iter().map(|v| v * v).collect();
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape(shape)
            .precision(Precision::F64)
            .values(input.clone())
            .build();
        let norm = BatchNorm::with_precision(&graph, "bn", channels, Precision::F64);
        let train = norm.apply(&x, Mode::Train);
        let eval = norm.apply(&x, Mode::Eval);
        for backend in backends() {
            let name = backend.name();
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            ctx.set_values(&norm.gain, &gain).unwrap();
            ctx.set_values(&norm.bias, &bias).unwrap();
            ctx.set_values(&norm.running_mean, &running_mean).unwrap();
            ctx.set_values(&norm.running_var, &running_var).unwrap();
            let routine = ctx.forward(&[&train, &eval]).unwrap();
            ctx.run(&routine).unwrap();
            let (mean, variance) = channel_statistics(&input, channels);
            assert_close(
                &ctx.values(&train).unwrap(),
                &normalized(&input, &mean, &variance, &gain, &bias),
                &format!("{shape} train on {name}"),
            );
            assert_close(
                &ctx.values(&eval).unwrap(),
                &normalized(&input, &running_mean, &running_var, &gain, &bias),
                &format!("{shape} eval on {name}"),
            );
        }
    }
}

#[test]
fn running_statistics_follow_the_batches_of_each_step() {
    for (shape, channels) in [("4|->3", 3), ("2|->3,1,2", 2)] {
        let cells = 12;
        let n = (cells / channels) as f64;
        for backend in backends() {
            let name = backend.name();
            let graph = Graph::new();
            let x = graph
                .data("x")
                .shape(shape)
                .precision(Precision::F64)
                .build();
            let norm = BatchNorm::with_precision(&graph, "bn", channels, Precision::F64);
            let out = norm.apply(&x, Mode::Train);
            let loss = sum(&out.pmul(&weights(&graph, shape, cells)));
            let mut sgd = Sgd::new(&graph, &norm.params(), 0.1, 0.0);
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let step = sgd.compile_step(&mut ctx, &loss).unwrap();
            let mut running_mean = vec![0.0; channels];
            let mut running_var = vec![1.0; channels];
            for i in 0..4 {
                let input = test_values(cells, 30 + i);
                ctx.set_values(&x, &input).unwrap();
                ctx.run(&step).unwrap();
                let (mean, variance) = channel_statistics(&input, channels);
                for c in 0..channels {
                    running_mean[c] = 0.9 * running_mean[c] + 0.1 * mean[c];
                    running_var[c] = 0.9 * running_var[c] + 0.1 * variance[c] * n / (n - 1.0);
                }
                let what = format!("{shape} after step {} on {name}", i + 1);
                assert_close(
                    &ctx.values(&norm.running_mean).unwrap(),
                    &running_mean,
                    &format!("running mean, {what}"),
                );
                assert_close(
                    &ctx.values(&norm.running_var).unwrap(),
                    &running_var,
                    &format!("running variance, {what}"),
                );
            }
        }
    }
}

#[test]
fn an_application_no_step_computes_never_moves_the_running_statistics() {
    let (shape, channels, cells) = ("4|->3", 3, 12);
    let n = (cells / channels) as f64;
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape(shape)
            .precision(Precision::F64)
            .build();
        let probe_values = test_values(6, 99).iter().map(|v| 10.0 * v + 5.0).collect();
        let probe = graph
            .data("probe")
            .shape("2|->3")
            .precision(Precision::F64)
            .values(probe_values)
            .build();
        let norm = BatchNorm::with_precision(&graph, "bn", channels, Precision::F64);
        let out = norm.apply(&x, Mode::Train);
        // A diagnostic pass in train mode over other data, not part of the loss.
        let diagnostic = norm.apply(&probe, Mode::Train);
        let loss = sum(&out.pmul(&weights(&graph, shape, cells)));
        let mut sgd = Sgd::new(&graph, &norm.params(), 0.1, 0.0);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = sgd.compile_step(&mut ctx, &loss).unwrap();
        let look = ctx.forward(&[&diagnostic]).unwrap();
        let mut running_mean = vec![0.0; channels];
        let mut running_var = vec![1.0; channels];
        for i in 0..3 {
            let input = test_values(cells, 40 + i);
            ctx.set_values(&x, &input).unwrap();
            ctx.run(&step).unwrap();
            ctx.run(&look).unwrap();
            let (mean, variance) = channel_statistics(&input, channels);
            for c in 0..channels {
                running_mean[c] = 0.9 * running_mean[c] + 0.1 * mean[c];
                running_var[c] = 0.9 * running_var[c] + 0.1 * variance[c] * n / (n - 1.0);
            }
        }
        assert_close(
            &ctx.values(&norm.running_mean).unwrap(),
            &running_mean,
            &format!("running mean on {name}"),
        );
        assert_close(
            &ctx.values(&norm.running_var).unwrap(),
            &running_var,
            &format!("running variance on {name}"),
        );
        assert_eq!(graph.state_tensors(), norm.state());
    }
}

#[test]
fn conv_bn_relu_gradients_in_both_modes() {
    for mode in [Mode::Train, Mode::Eval] {
        check(
            &format!("conv-bn-relu {mode:?}"),
            &["2|->3,3,2", "|3,3,2->3", "|->3", "|->3"],
            |g, p| {
                let mut block = ConvBnRelu::new(g, "block", 2, 3, 3, 1);
                block.conv_bn.kernel = p[1].clone();
                block.conv_bn.norm.gain = p[2].clone();
                block.conv_bn.norm.bias = p[3].clone();
                block.apply(&p[0], mode).pmul(&weights(g, "2|->3,3,3", 54))
            },
        );
    }
}

#[test]
fn residual_block_gradients_with_and_without_projection() {
    for mode in [Mode::Train, Mode::Eval] {
        check(
            &format!("residual identity {mode:?}"),
            &["2|->3,3,2"],
            |g, p| {
                let block = ResidualBlock::new(g, "res", 2, 2, 1);
                assert!(block.projection.is_none());
                block.apply(&p[0], mode).pmul(&weights(g, "2|->3,3,2", 36))
            },
        );
        check(
            &format!("residual strided projection {mode:?}"),
            &["2|->4,4,2", "|1,1,2->3"],
            |g, p| {
                let mut block = ResidualBlock::new(g, "res", 2, 3, 2);
                let projection = block.projection.as_mut().expect("a projection");
                projection.kernel = p[1].clone();
                block.apply(&p[0], mode).pmul(&weights(g, "2|->2,2,3", 24))
            },
        );
    }
    check("residual widening projection", &["2|->2,2,2"], |g, p| {
        let block = ResidualBlock::new(g, "res", 2, 3, 1);
        assert!(block.projection.is_some());
        block
            .apply(&p[0], Mode::Train)
            .pmul(&weights(g, "2|->2,2,3", 24))
    });
}

#[test]
fn vgg_block_and_lenet_gradients() {
    check("vgg block", &["1|->4,4,2"], |g, p| {
        VggBlock::new(g, "vgg", 2, 3)
            .apply(&p[0])
            .pmul(&weights(g, "1|->2,2,3", 12))
    });
    check("lenet", &["2|->4,4,1"], |g, p| {
        LeNet::new(g, "lenet", 3)
            .apply(&p[0])
            .pmul(&weights(g, "2|->3", 6))
    });
}

#[test]
fn depthwise_separable_gradients_in_both_modes() {
    for mode in [Mode::Train, Mode::Eval] {
        check(
            &format!("depthwise-separable {mode:?}"),
            &["2|->3,3,2", "|3,3->2"],
            |g, p| {
                let mut block = DepthwiseSeparable::new(g, "sep", 2, 3, 3, 1);
                block.depthwise_kernel = p[1].clone();
                block.apply(&p[0], mode).pmul(&weights(g, "2|->3,3,3", 54))
            },
        );
    }
    check("depthwise-separable strided", &["2|->4,4,2"], |g, p| {
        DepthwiseSeparable::new(g, "sep", 2, 3, 3, 2)
            .apply(&p[0], Mode::Train)
            .pmul(&weights(g, "2|->2,2,3", 24))
    });
    check("depthwise conv", &["1|->4,4,2", "|3,3->2"], |g, p| {
        depthwise_conv2d(&p[0], &p[1], 3, 1, false).pmul(&weights(g, "1|->2,2,2", 8))
    });
}

#[test]
fn depthwise_convolution_convolves_each_channel_alone() {
    // A 3×3 image of two channels, channel 1 the negated channel 0 plus 10.
    let channel0: Vec<f64> = (0..9).map(f64::from).collect();
    let image: Vec<f64> = channel0.iter().flat_map(|&v| [v, 10.0 - v]).collect();
    // Filters in memory order (the output axis, the channel, first, then kh, kw): channel 0
    // sums its window, channel 1 takes its centre twice.
    let filters: Vec<f64> = [[1.0; 9], [0., 0., 0., 0., 2., 0., 0., 0., 0.]].concat();
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("1|->3,3,2")
        .precision(Precision::F64)
        .values(image)
        .build();
    let kernel = graph
        .data("kernel")
        .shape("|3,3->2")
        .precision(Precision::F64)
        .values(filters.clone())
        .build();
    let valid = depthwise_conv2d(&x, &kernel, 3, 1, false);
    let block = DepthwiseConv2d::new(&graph, "dw", 3, 1, true);
    let padded = block.apply(&x);
    for backend in backends() {
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        ctx.set_values(&block.kernel, &filters).unwrap();
        ctx.set_values(&block.bias, &[0.5, -1.0]).unwrap();
        let routine = ctx.forward(&[&valid, &padded]).unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&valid).unwrap(), vec![36.0, 12.0]);
        // Padded with zeros: channel 0's window sums, channel 1's doubled centres, plus the
        // bias.
        assert_eq!(
            ctx.values(&padded).unwrap(),
            vec![
                8.5, 19.0, 15.5, 17.0, 12.5, 15.0, //
                21.5, 13.0, 36.5, 11.0, 27.5, 9.0, //
                20.5, 7.0, 33.5, 5.0, 24.5, 3.0,
            ]
        );
    }
}

#[test]
fn normalization_settings_and_shapes_are_checked() {
    let graph = Graph::new();
    let e = GroupNorm::new(&graph, "gn", 6, 4).unwrap_err();
    assert!(
        e.message
            .contains("GroupNorm 'gn': 4 groups do not divide 6 channels"),
        "{}",
        e.message
    );
    let mut norm = BatchNorm::new(&graph, "bn", 3);
    let x = graph.data("x").shape("4|->2,2,3").build();
    norm.momentum = 1.5;
    let e = norm.apply(&x, Mode::Train).error().expect("an error");
    assert!(
        e.message.contains("BatchNorm 'bn': the momentum is 1.5"),
        "{}",
        e.message
    );
    norm.momentum = 0.1;
    norm.epsilon = 0.0;
    let e = norm.apply(&x, Mode::Eval).error().expect("an error");
    assert!(
        e.message.contains("BatchNorm 'bn': epsilon is 0"),
        "{}",
        e.message
    );

    // Five channels where the block has three: the per-channel gain cannot fit.
    let wrong = Graph::new();
    let x = wrong.data("x").shape("4|->2,2,5").build();
    BatchNorm::new(&wrong, "bn", 3).apply(&x, Mode::Train);
    let e = wrong.check().unwrap_err();
    assert!(e.message.contains("bn.gain"), "{}", e.message);
}

#[test]
fn group_and_rms_norm_values() {
    // Two examples of 2×1 positions and 4 channels, in 2 groups of 2 channels.
    let input = test_values(16, 11);
    let gain = test_values(4, 12);
    let bias = test_values(4, 13);
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("2|->2,1,4")
        .precision(Precision::F64)
        .values(input.clone())
        .build();
    let group_norm = GroupNorm::with_precision(&graph, "gn", 4, 2, Precision::F64).unwrap();
    let grouped = group_norm.apply(&x);
    let rms_norm = RmsNorm::with_precision(&graph, "rms", Precision::F64);
    let rows = graph
        .data("rows")
        .shape("4|->4")
        .precision(Precision::F64)
        .values(input.clone())
        .build();
    let rms = rms_norm.apply(&rows);

    let mut want_grouped = vec![0.0; 16];
    for example in 0..2 {
        for group in 0..2 {
            // Cells of this example and group: 2 positions × 2 channels.
            let cells: Vec<usize> = (0..2)
                .flat_map(|position| {
                    (0..2).map(move |k| example * 8 + position * 4 + group * 2 + k)
                })
                .collect();
            let mean = cells.iter().map(|&i| input[i]).sum::<f64>() / 4.0;
            let variance = cells
                .iter()
                .map(|&i| (input[i] - mean).powi(2))
                .sum::<f64>()
                / 4.0;
            for &i in &cells {
                let c = i % 4;
                want_grouped[i] = (input[i] - mean) / (variance + 1e-5).sqrt() * gain[c] + bias[c];
            }
        }
    }
    let rms_gain = test_values(4, 14);
    let want_rms: Vec<f64> = input
        .chunks(4)
        .flat_map(|row| {
            let root = (row.iter().map(|v| v * v).sum::<f64>() / 4.0 + 1e-6).sqrt();
            row.iter()
                .zip(&rms_gain)
                .map(move |(v, g)| v / root * g)
                .collect::<Vec<_>>()
        })
        .collect();
    for backend in backends() {
        let name = backend.name();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        ctx.set_values(&group_norm.gain, &gain).unwrap();
        ctx.set_values(&group_norm.bias, &bias).unwrap();
        ctx.set_values(&rms_norm.gain, &rms_gain).unwrap();
        let routine = ctx.forward(&[&grouped, &rms]).unwrap();
        ctx.run(&routine).unwrap();
        assert_close(
            &ctx.values(&grouped).unwrap(),
            &want_grouped,
            &format!("group norm on {name}"),
        );
        assert_close(
            &ctx.values(&rms).unwrap(),
            &want_rms,
            &format!("rms norm on {name}"),
        );
    }
}
