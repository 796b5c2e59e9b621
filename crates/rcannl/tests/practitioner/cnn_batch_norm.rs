//! A small ResNet-like CNN with batch normalization, as a practitioner writes one from the docs:
//! 6×6 one-channel images (`batch|->h,w,c`) through a 3×3 stem convolution with batch
//! normalization and ReLU, 2×2 max-pooling, a residual block (two 3×3 convolutions with batch
//! normalization, the identity shortcut), global average pooling and a dense head of 3 classes,
//! trained on `loss::mean(loss::cross_entropy_ids(..))` with SGD and momentum.
//!
//! Checked against PyTorch (`cnn_batch_norm/reference.py`, `torch.nn.BatchNorm2d` for each
//! normalization) on the interpreter and the C backend, from the same parameters and images:
//! the train-mode logits, loss and the gradient of every parameter; every parameter and running
//! statistic after three SGD steps; and the eval-mode logits of a model built afresh in eval
//! mode and loaded from a checkpoint of the trained one.
//!
//! In f64 the model is written from the layers (`conv2d`, `BatchNorm::with_precision`,
//! `max_pool2d`, `global_avg_pool`), since the blocks of `nn::cnn` and `nn::blocks` make f32
//! parameters; in f32 it is those blocks (`ConvBnRelu`, `ResidualBlock`, `Dense`), with the same
//! labels, checked against the same references within f32's tolerance.

use std::path::PathBuf;

use rcannl::nn::blocks::Dense;
use rcannl::nn::checkpoint::{load_params, save_params};
use rcannl::nn::cnn::{ConvBnRelu, ResidualBlock};
use rcannl::nn::conv::{conv2d, global_avg_pool, max_pool2d};
use rcannl::nn::loss::{cross_entropy_ids, mean};
use rcannl::nn::norm::{BatchNorm, Mode};
use rcannl::nn::optim::Sgd;
use rcannl::prelude::*;

use crate::support::{backends, check, set_from_reference};

const PROGRAM: &str = "cnn_batch_norm";
const BATCH: usize = 4;
const CHANNELS: usize = 4;
const CLASSES: usize = 3;
const TEST_IMAGES: usize = 3;
const STEPS: usize = 3;
const LR: f64 = 0.1;
const MOMENTUM: f64 = 0.9;

/// The parameters' labels, as the blocks name them (and the reference files are named).
const PARAMS: [&str; 11] = [
    "stem.kernel",
    "stem.norm.gain",
    "stem.norm.bias",
    "block.first.kernel",
    "block.first.norm.gain",
    "block.first.norm.bias",
    "block.second.kernel",
    "block.second.norm.gain",
    "block.second.norm.bias",
    "head.w",
    "head.b",
];

/// The running statistics' labels.
const STATE: [&str; 6] = [
    "stem.norm.running_mean",
    "stem.norm.running_var",
    "block.first.norm.running_mean",
    "block.first.norm.running_var",
    "block.second.norm.running_mean",
    "block.second.norm.running_var",
];

/// A padded 3×3 convolution without bias, then batch normalization: `nn::cnn::ConvBn` written
/// from the layers in a chosen precision.
struct ConvBn {
    kernel: Tensor,
    norm: BatchNorm,
}

impl ConvBn {
    fn new(graph: &Graph, label: &str, in_channels: usize, precision: Precision) -> ConvBn {
        ConvBn {
            kernel: graph
                .param(&format!("{label}.kernel"))
                .shape(&format!("|3,3,{in_channels}->{CHANNELS}"))
                .precision(precision)
                .build(),
            norm: BatchNorm::with_precision(graph, &format!("{label}.norm"), CHANNELS, precision),
        }
    }

    fn apply(&self, x: &Tensor, mode: Mode) -> Tensor {
        self.norm.apply(&conv2d(x, &self.kernel, 3, 1, true), mode)
    }
}

/// The network, in f64 from the layers or in f32 from the blocks.
enum Network {
    Layers {
        stem: ConvBn,
        first: ConvBn,
        second: ConvBn,
        head_w: Tensor,
        head_b: Tensor,
    },
    Blocks {
        stem: ConvBnRelu,
        block: ResidualBlock,
        head: Dense,
    },
}

impl Network {
    fn new(graph: &Graph, precision: Precision) -> Network {
        match precision {
            Precision::F32 => Network::Blocks {
                stem: ConvBnRelu::new(graph, "stem", 1, CHANNELS, 3, 1),
                block: ResidualBlock::new(graph, "block", CHANNELS, CHANNELS, 1),
                head: Dense::new(graph, "head", CLASSES),
            },
            _ => Network::Layers {
                stem: ConvBn::new(graph, "stem", 1, precision),
                first: ConvBn::new(graph, "block.first", CHANNELS, precision),
                second: ConvBn::new(graph, "block.second", CHANNELS, precision),
                head_w: graph
                    .param("head.w")
                    .output([CLASSES])
                    .precision(precision)
                    .build(),
                head_b: graph.param("head.b").precision(precision).build(),
            },
        }
    }

    /// The logits of `images` (`batch|->6,6,1`).
    fn apply(&self, images: &Tensor, mode: Mode) -> Tensor {
        match self {
            Network::Layers {
                stem,
                first,
                second,
                head_w,
                head_b,
            } => {
                let h = max_pool2d(&stem.apply(images, mode).relu(), 2);
                let residual = second.apply(&first.apply(&h, mode).relu(), mode);
                let features = global_avg_pool(&(&residual + &h).relu());
                &(head_w * &features) + head_b
            }
            Network::Blocks { stem, block, head } => {
                let h = max_pool2d(&stem.apply(images, mode), 2);
                head.apply(&global_avg_pool(&block.apply(&h, mode)))
            }
        }
    }
}

/// The training program: a batch of images and their class ids, the network in train mode,
/// the mean cross-entropy, on one backend.
struct Program {
    graph: Graph,
    images: Tensor,
    classes: Tensor,
    logits: Tensor,
    loss: Tensor,
    ctx: Context,
}

impl Program {
    fn new(precision: Precision, backend: Box<dyn rcannl::backends::Backend>) -> Program {
        let graph = Graph::new();
        let images = graph
            .data("images")
            .shape(&format!("{BATCH}|->6,6,1"))
            .precision(precision)
            .build();
        let classes = graph
            .data("classes")
            .shape(&format!("{BATCH}|->"))
            .precision(precision)
            .build();
        let network = Network::new(&graph, precision);
        let logits = network.apply(&images, Mode::Train);
        let loss = mean(&cross_entropy_ids(&logits, &classes));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().expect("init");
        start_from_reference(&mut ctx, &graph);
        Program {
            graph,
            images,
            classes,
            logits,
            loss,
            ctx,
        }
    }

    /// Sets the images and class ids of training batch `step`.
    fn batch(&mut self, step: usize) {
        set_from_reference(
            &mut self.ctx,
            &self.images,
            PROGRAM,
            &format!("images.{step}"),
        );
        set_from_reference(
            &mut self.ctx,
            &self.classes,
            PROGRAM,
            &format!("classes.{step}"),
        );
    }
}

/// Checks that `graph`'s parameters are the model's (every one compared), with the dims
/// PyTorch's arrays were laid out in, and sets them to PyTorch's starting values.
fn start_from_reference(ctx: &mut Context, graph: &Graph) {
    let params = graph.params();
    let mut labels: Vec<String> = params.iter().map(Tensor::label).collect();
    labels.sort();
    let mut expected = PARAMS.map(str::to_owned).to_vec();
    expected.sort();
    assert_eq!(labels, expected, "the model's parameters");
    for p in &params {
        let dims = ctx.dims(p).expect("dims");
        let want: &[usize] = match p.label().as_str() {
            "stem.kernel" => &[CHANNELS, 3, 3, 1],
            "block.first.kernel" | "block.second.kernel" => &[CHANNELS, 3, 3, CHANNELS],
            "head.w" => &[CLASSES, CHANNELS],
            "head.b" => &[CLASSES],
            _ => &[CHANNELS],
        };
        assert_eq!(dims, want, "dims of '{}' in memory order", p.label());
        set_from_reference(ctx, p, PROGRAM, &p.label());
    }
}

/// The train-mode logits and loss of the first batch, and the gradient of the loss with respect
/// to every parameter.
fn forward_and_gradients(precision: Precision) {
    for backend in backends(precision) {
        let on = format!("{} {precision}", backend.name());
        let mut program = Program::new(precision, backend);
        program.batch(0);
        let outputs = [&program.logits, &program.loss];
        let forward = program.ctx.forward(&outputs).expect("forward");
        let backprop = program.ctx.backprop(&program.loss).expect("backprop");
        program.ctx.run(&forward).expect("forward runs");
        program.ctx.run(&backprop).expect("backprop runs");
        let ctx = &program.ctx;
        let logits = ctx.values(&program.logits).expect("logits");
        check(
            &format!("{on}: logits"),
            &logits,
            PROGRAM,
            "logits",
            precision,
        );
        let loss = ctx.values(&program.loss).expect("loss");
        check(&format!("{on}: loss"), &loss, PROGRAM, "loss", precision);
        for p in program.graph.params() {
            let label = p.label();
            let grad = ctx.grad(&p).expect("gradient");
            let what = format!("{on}: gradient of '{label}'");
            check(&what, &grad, PROGRAM, &format!("grad.{label}"), precision);
        }
    }
}

/// How the training steps are written.
#[derive(Clone, Copy)]
enum Optimizer {
    /// `nn::optim::Sgd`.
    Library,
    /// The same updates written with `cd!`, each velocity a zero-filled tensor of its
    /// parameter's shape and precision.
    ByHand,
}

/// `program` after three steps of SGD with momentum, one per training batch.
fn trained(
    precision: Precision,
    backend: Box<dyn rcannl::backends::Backend>,
    optimizer: Optimizer,
) -> Program {
    let mut program = Program::new(precision, backend);
    let params = program.graph.params();
    let step = match optimizer {
        Optimizer::Library => {
            let mut sgd = Sgd::new(&program.graph, &params, LR, MOMENTUM);
            sgd.compile_step(&mut program.ctx, &program.loss)
        }
        Optimizer::ByHand => {
            let mut updates = Vec::new();
            for w in &params {
                let rows = program.ctx.rows(w).expect("rows");
                let [batch, input, output] = rows.clone().map(|row| {
                    row.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                });
                let cells = rows.iter().flatten().product();
                let velocity = program
                    .graph
                    .data(&format!("{} velocity", w.label()))
                    .shape(&format!("{batch}|{input}->{output}"))
                    .precision(precision)
                    .values(vec![0.0; cells])
                    .build();
                updates.extend(cd! {
                    velocity =: MOMENTUM * velocity + w.grad;
                    w =- LR * velocity;
                });
            }
            program.ctx.train_step(&program.loss, &updates)
        }
    }
    .expect("step");
    for s in 0..STEPS {
        program.batch(s);
        program.ctx.run(&step).expect("step runs");
    }
    program
}

/// Every parameter and running statistic after three training steps. With `nn::optim::Sgd`
/// the steps must be taken in the parameters' precision (velocities and learning rate
/// included) to meet f64's tolerance; the same steps written with `cd!` over f64 velocities are
/// checked too, so that a failure of the one and not the other points at the optimizer, not at
/// the model or its running statistics.
fn sgd_steps(precision: Precision, optimizer: Optimizer) {
    for backend in backends(precision) {
        let on = format!("{} {precision}", backend.name());
        let program = trained(precision, backend, optimizer);
        let state = program.graph.state_tensors();
        let labels: Vec<String> = state.iter().map(Tensor::label).collect();
        assert_eq!(labels, STATE, "{on}: the model's state");
        for t in program.graph.params().iter().chain(&state) {
            let label = t.label();
            let values = program.ctx.values(t).expect("values");
            let what = format!("{on}: '{label}' after {STEPS} steps");
            check(
                &what,
                &values,
                PROGRAM,
                &format!("trained.{label}"),
                precision,
            );
        }
    }
}

/// A folder of this program's own under the build's temporary folder.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("practitioner")
        .join(PROGRAM)
        .join(name);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// The eval-mode logits of the test images, from a model built afresh in eval mode and loaded
/// from a checkpoint of the trained one.
fn reloaded_in_eval_mode(precision: Precision) {
    for (backend, fresh_backend) in backends(precision).into_iter().zip(backends(precision)) {
        let on = format!("{} {precision}", backend.name());
        // In f64, trained with SGD written with `cd!`: the library's optimizers keep their state in
        // f32 (see `sgd_steps`), and this check is about the checkpoint and eval mode alone.
        let optimizer = match precision {
            Precision::F32 => Optimizer::Library,
            _ => Optimizer::ByHand,
        };
        let mut program = trained(precision, backend, optimizer);
        let path = scratch(&on.replace(' ', "-")).join("model.safetensors");
        save_params(&path, &mut program.ctx, &program.graph).expect("save");

        // A fresh program, as an inference binary would build it: the same model, applied
        // in eval mode only, to the test images.
        let graph = Graph::new();
        let test_images = graph
            .data("test images")
            .shape(&format!("{TEST_IMAGES}|->6,6,1"))
            .precision(precision)
            .build();
        let network = Network::new(&graph, precision);
        let logits = network.apply(&test_images, Mode::Eval);
        let mut ctx = Context::with_backend(&graph, fresh_backend);
        ctx.init_params().expect("init");
        load_params(&path, &mut ctx, &graph).expect("load");
        set_from_reference(&mut ctx, &test_images, PROGRAM, "test_images");
        let evaluate = ctx.forward(&[&logits]).expect("evaluation");
        ctx.run(&evaluate).expect("evaluation runs");

        // What the checkpoint held is what the fresh model evaluates with: every parameter
        // and running statistic as training left it.
        for (saved, loaded) in program.graph.params().iter().zip(graph.params()) {
            assert_eq!(loaded.label(), saved.label());
            assert_eq!(
                ctx.values(&loaded).expect("loaded"),
                program.ctx.values(saved).expect("saved"),
                "{on}: '{}' reloaded",
                saved.label()
            );
        }
        let statistics = match &network {
            Network::Layers {
                stem,
                first,
                second,
                ..
            } => [&stem.norm, &first.norm, &second.norm],
            Network::Blocks { stem, block, .. } => [
                &stem.conv_bn.norm,
                &block.first.conv_bn.norm,
                &block.second.norm,
            ],
        }
        .into_iter()
        .flat_map(BatchNorm::state);
        for (saved, loaded) in program.graph.state_tensors().iter().zip(statistics) {
            assert_eq!(loaded.label(), saved.label());
            assert_eq!(
                ctx.values(&loaded).expect("loaded"),
                program.ctx.values(saved).expect("saved"),
                "{on}: running statistic '{}' reloaded into the eval-mode model",
                saved.label()
            );
        }

        let values = ctx.values(&logits).expect("logits");
        let what = format!("{on}: eval-mode logits of the reloaded model");
        check(&what, &values, PROGRAM, "eval_logits", precision);
    }
}

#[test]
fn cnn_batch_norm_f64_forward_and_gradients_match_pytorch() {
    forward_and_gradients(Precision::F64);
}

#[test]
fn cnn_batch_norm_f32_blocks_forward_and_gradients_match_pytorch() {
    forward_and_gradients(Precision::F32);
}

#[test]
fn cnn_batch_norm_f64_sgd_steps_match_pytorch_parameters_and_running_statistics() {
    sgd_steps(Precision::F64, Optimizer::Library);
}

#[test]
fn cnn_batch_norm_f32_blocks_sgd_steps_match_pytorch_parameters_and_running_statistics() {
    sgd_steps(Precision::F32, Optimizer::Library);
}

#[test]
fn cnn_batch_norm_f64_reloaded_in_eval_mode_matches_pytorch_eval() {
    reloaded_in_eval_mode(Precision::F64);
}

#[test]
fn cnn_batch_norm_f32_blocks_reloaded_in_eval_mode_matches_pytorch_eval() {
    reloaded_in_eval_mode(Precision::F32);
}

#[test]
fn cnn_batch_norm_f64_sgd_written_with_cd_matches_pytorch_parameters_and_running_statistics() {
    sgd_steps(Precision::F64, Optimizer::ByHand);
}
