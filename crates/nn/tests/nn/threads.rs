//! The blocks cross threads: every public type is `Send + Sync`, and a batch normalization
//! applied on one thread records its statistics for a clone on another.

use rcannl_ir::Precision;
use rcannl_nn::attention::{AttendOptions, Attention, PositionDense, Rotary, TransformerBlock};
use rcannl_nn::blocks::{Dense, Mlp};
use rcannl_nn::cnn::{ConvBn, ConvBnRelu, DepthwiseSeparable, LeNet, ResidualBlock, VggBlock};
use rcannl_nn::conv::{Conv2d, DepthwiseConv2d};
use rcannl_nn::data::Rng;
use rcannl_nn::embedding::Embedding;
use rcannl_nn::loss::sum;
use rcannl_nn::norm::{BatchNorm, GroupNorm, LayerNorm, Mode, RmsNorm};
use rcannl_nn::optim::{Adam, Lamb, Schedule, Sgd};
use rcannl_nn::position::{LearnedPositions, PositionKind, Positions, Sinusoidal};
use rcannl_nn::train::{History, Plan};
use rcannl_nn::transformer::{
    DecoderBlock, EncoderBlock, EncoderDecoder, EncoderDecoderConfig, FeedForward, Placement,
    SequencePairs,
};
use rcannl_tensor::{Context, Graph};

use crate::support::{backends, data};

fn send_and_sync<T: Send + Sync>() {}

#[test]
fn the_blocks_are_send_and_sync() {
    send_and_sync::<Dense>();
    send_and_sync::<Mlp>();
    send_and_sync::<AttendOptions>();
    send_and_sync::<Attention>();
    send_and_sync::<PositionDense>();
    send_and_sync::<Rotary>();
    send_and_sync::<TransformerBlock>();
    send_and_sync::<ConvBn>();
    send_and_sync::<ConvBnRelu>();
    send_and_sync::<DepthwiseSeparable>();
    send_and_sync::<LeNet>();
    send_and_sync::<ResidualBlock>();
    send_and_sync::<VggBlock>();
    send_and_sync::<Conv2d>();
    send_and_sync::<DepthwiseConv2d>();
    send_and_sync::<Rng>();
    send_and_sync::<Embedding>();
    send_and_sync::<BatchNorm>();
    send_and_sync::<GroupNorm>();
    send_and_sync::<LayerNorm>();
    send_and_sync::<Mode>();
    send_and_sync::<RmsNorm>();
    send_and_sync::<Adam>();
    send_and_sync::<Lamb>();
    send_and_sync::<Schedule>();
    send_and_sync::<Sgd>();
    send_and_sync::<LearnedPositions>();
    send_and_sync::<PositionKind>();
    send_and_sync::<Positions>();
    send_and_sync::<Sinusoidal>();
    send_and_sync::<History>();
    send_and_sync::<Plan>();
    send_and_sync::<DecoderBlock>();
    send_and_sync::<EncoderBlock>();
    send_and_sync::<EncoderDecoder>();
    send_and_sync::<EncoderDecoderConfig>();
    send_and_sync::<FeedForward>();
    send_and_sync::<Placement>();
    send_and_sync::<SequencePairs>();
}

#[test]
fn batch_statistics_recorded_on_one_thread_update_on_another() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = data(&graph, "x", "4|->1", vec![1.0, 2.0, 3.0, 6.0]);
        let norm = BatchNorm::with_precision(&graph, "bn", 1, Precision::F64);
        // A clone applied on another thread: the step its graph's loss depends on updates the
        // running statistics `norm` shares.
        let (clone, input) = (norm.clone(), x.clone());
        let out = std::thread::spawn(move || clone.apply(&input, Mode::Train))
            .join()
            .unwrap();
        let loss = sum(&out);
        let mut sgd = Sgd::new(&graph, &norm.params(), 0.1, 0.0);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = sgd.compile_step(&mut ctx, &loss).unwrap();
        let (mean, var) = std::thread::spawn(move || {
            ctx.run(&step).unwrap();
            (
                ctx.values(&norm.running_mean).unwrap(),
                ctx.values(&norm.running_var).unwrap(),
            )
        })
        .join()
        .unwrap();
        // Mean 3, unbiased variance (4 + 1 + 0 + 9) / 3; momentum 0.1 from 0 and 1.
        assert!(
            (mean[0] - 0.3).abs() < 1e-12,
            "{name}: running mean {mean:?}"
        );
        let expected = 0.9 + 0.1 * 14.0 / 3.0;
        assert!(
            (var[0] - expected).abs() < 1e-12,
            "{name}: running variance {var:?}"
        );
    }
}
