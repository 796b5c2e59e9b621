//! The optimizers and the initializers' fans against PyTorch's: SGD with momentum, dampening,
//! Nesterov momentum and weight decay, Adam with weight decay added to the gradient, AdamW,
//! AMSGrad, parameter groups with rates and weight decays of their own (under a schedule too),
//! the split of a model's parameters for weight decay, and the fans of dense weights and
//! convolution kernels. The references are `.npy` files that `tests/pytorch/optim/reference.py`
//! writes (PyTorch is no test-time dependency): parameters after five steps on given gradients,
//! in f64, on both CPU backends.

use std::path::PathBuf;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::conv::{Conv2d, ConvOptions, DepthwiseConv2d, Padding};
use rcannl_nn::optim::{Adam, Group, Schedule, Sgd, split_decay};
use rcannl_tensor::npy;
use rcannl_tensor::{Context, Graph, Init, Routine, Tensor, TensorError};

/// The number of steps each reference optimizer took.
const STEPS: usize = 5;

/// The parameters of the references and their shapes in rcannl: a dense weight, a bias and a
/// second dense weight (the "head").
const PARAMS: [(&str, &str); 3] = [("w", "|3->2"), ("b", "2"), ("head", "|2->2")];

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// The reference array `name`: its dims and values (row-major).
fn reference(name: &str) -> (Vec<usize>, Vec<f64>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pytorch/optim")
        .join(format!("{name}.npy"));
    let reader = npy::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (dims, cells) = reader
        .read_cells(usize::MAX)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (dims, cells.into_iter().map(|c| c.as_f64()).collect())
}

/// The f64 parameters at PyTorch's starting values, the data tensors standing for their
/// gradients (the loss is `Σ sum(x·w)`, whose gradient with respect to `w` is `x`), and the
/// loss.
struct Model {
    graph: Graph,
    params: Vec<Tensor>,
    gradients: Vec<Tensor>,
    loss: Tensor,
}

fn model() -> Model {
    let graph = Graph::new();
    let mut params = Vec::new();
    let mut gradients = Vec::new();
    let mut terms = Vec::new();
    for (name, shape) in PARAMS {
        let (_, start) = reference(name);
        let cells = start.len();
        let w = (graph.param(name).shape(shape).precision(Precision::F64))
            .init(Init::Values(start))
            .build();
        let x = (graph.data(&format!("{name} gradient")).shape(shape))
            .precision(Precision::F64)
            .values(vec![0.0; cells])
            .build();
        terms.push(rcannl_nn::loss::sum(&x.pmul(&w)));
        params.push(w);
        gradients.push(x);
    }
    let loss = &(&terms[0] + &terms[1]) + &terms[2];
    Model {
        graph,
        params,
        gradients,
        loss,
    }
}

/// The parameters named `names`, in that order.
fn named(model: &Model, names: &[&str]) -> Vec<Tensor> {
    (names.iter())
        .map(|name| {
            PARAMS
                .iter()
                .position(|(n, _)| n == name)
                .expect("a parameter")
        })
        .map(|i| model.params[i].clone())
        .collect()
}

/// What a case's optimizer gives the test: its compiled step and its learning rate.
type Compiled = Result<(Routine, Tensor), TensorError>;

/// Runs `STEPS` steps of the optimizer `make` compiles, on PyTorch's gradients, with the rate
/// set by `schedule` before each step if any; then checks every parameter against the
/// reference `case`.
fn check_case(
    case: &str,
    schedule: Option<Schedule>,
    make: impl Fn(&Model, &mut Context) -> Compiled,
) {
    for backend in backends() {
        let name = backend.name();
        let model = model();
        let mut ctx = Context::with_backend(&model.graph, backend);
        ctx.init_params().unwrap();
        let (step, lr) = make(&model, &mut ctx).unwrap_or_else(|e| panic!("{case}: {e}"));
        for t in 0..STEPS {
            for ((param, _), x) in PARAMS.iter().zip(&model.gradients) {
                let (_, grads) = reference(&format!("{param}.grads"));
                let cells = grads.len() / STEPS;
                ctx.set_values(x, &grads[t * cells..(t + 1) * cells])
                    .unwrap();
            }
            if let Some(schedule) = schedule {
                schedule.apply(&mut ctx, &lr, t, STEPS).unwrap();
            }
            ctx.run(&step).unwrap();
        }
        for ((param, _), w) in PARAMS.iter().zip(&model.params) {
            let got = ctx.values(w).unwrap();
            let (_, want) = reference(&format!("{case}.{param}"));
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for (g, e) in got.iter().zip(&want) {
                assert!(
                    (g - e).abs() <= 1e-12 * scale,
                    "{case} on {name}, '{param}': {got:?} vs PyTorch's {want:?}"
                );
            }
        }
    }
}

/// The step of `optimizer` (any of rcannl's) and its rate.
macro_rules! compiled {
    ($optimizer:expr, $model:expr, $ctx:expr) => {{
        let mut optimizer = $optimizer;
        optimizer
            .compile_step($ctx, &$model.loss)
            .map(|step| (step, optimizer.lr.clone()))
    }};
}

#[test]
fn sgd_with_momentum_dampening_and_weight_decay_matches_pytorch() {
    check_case("sgd_dampening", None, |m, ctx| {
        let sgd = Sgd::new(&m.graph, &m.params, 0.1, 0.9)
            .dampening(0.3)
            .weight_decay(0.01);
        compiled!(sgd, m, ctx)
    });
}

#[test]
fn sgd_with_nesterov_momentum_and_weight_decay_matches_pytorch() {
    check_case("sgd_nesterov", None, |m, ctx| {
        let sgd = Sgd::new(&m.graph, &m.params, 0.1, 0.9)
            .nesterov()
            .weight_decay(0.01);
        compiled!(sgd, m, ctx)
    });
}

#[test]
fn sgd_parameter_groups_match_pytorch() {
    check_case("sgd_groups", None, |m, ctx| {
        let groups = [
            Group::new(&named(m, &["w", "head"])),
            Group::new(&named(m, &["b"]))
                .lr_scale(0.5)
                .weight_decay(0.0),
        ];
        let sgd = Sgd::with_groups(&m.graph, &groups, 0.1, 0.9).weight_decay(0.01);
        compiled!(sgd, m, ctx)
    });
}

#[test]
fn adam_and_its_weight_decays_match_pytorch() {
    check_case("adam", None, |m, ctx| {
        compiled!(Adam::new(&m.graph, &m.params, 0.01), m, ctx)
    });
    check_case("adam_coupled", None, |m, ctx| {
        let adam = Adam::new(&m.graph, &m.params, 0.01).coupled_weight_decay(0.1);
        compiled!(adam, m, ctx)
    });
    check_case("adamw", None, |m, ctx| {
        let adamw = Adam::new(&m.graph, &m.params, 0.01).weight_decay(0.1);
        compiled!(adamw, m, ctx)
    });
}

#[test]
fn amsgrad_matches_pytorch() {
    // The gradients shrink, so the second moments fall: AMSGrad must take another path.
    for (plain, amsgrad) in [("adam_coupled", "adam_amsgrad"), ("adamw", "adamw_amsgrad")] {
        let apart = PARAMS.iter().any(|(param, _)| {
            let (_, a) = reference(&format!("{plain}.{param}"));
            let (_, b) = reference(&format!("{amsgrad}.{param}"));
            a.iter().zip(&b).any(|(a, b)| (a - b).abs() > 1e-6)
        });
        assert!(apart, "{amsgrad} is {plain}'s result: it tests nothing");
    }
    check_case("adam_amsgrad", None, |m, ctx| {
        let adam = (Adam::new(&m.graph, &m.params, 0.01).coupled_weight_decay(0.1)).amsgrad();
        compiled!(adam, m, ctx)
    });
    check_case("adamw_amsgrad", None, |m, ctx| {
        let adamw = Adam::new(&m.graph, &m.params, 0.01)
            .weight_decay(0.1)
            .amsgrad();
        compiled!(adamw, m, ctx)
    });
}

/// PyTorch's `AdamW([{'params': [w]}, {'params': [b], 'weight_decay': 0}, {'params': [head],
/// 'lr': 0.03}], lr=0.01, weight_decay=0.1)`, the first two groups split by rank.
fn adamw_groups(m: &Model, ctx: &mut Context) -> Compiled {
    let (decay, no_decay) = split_decay(ctx, &named(m, &["w", "b"]))?;
    assert_eq!((&decay, &no_decay), (&named(m, &["w"]), &named(m, &["b"])));
    let groups = [
        Group::new(&decay),
        Group::new(&no_decay).weight_decay(0.0),
        Group::new(&named(m, &["head"])).lr_scale(3.0),
    ];
    compiled!(
        Adam::with_groups(&m.graph, &groups, 0.01).weight_decay(0.1),
        m,
        ctx
    )
}

#[test]
fn adamw_parameter_groups_match_pytorch() {
    check_case("adamw_groups", None, adamw_groups);
}

#[test]
fn a_schedule_moves_every_groups_rate_alike_as_pytorchs_schedulers_do() {
    let warmup = Schedule::Warmup {
        peak: 0.01,
        warmup: 3,
    };
    check_case("adamw_groups_warmup", Some(warmup), adamw_groups);
}

#[test]
fn groups_refuse_bad_settings_and_a_parameter_in_two_groups() {
    let m = model();
    let mut ctx = Context::with_backend(&m.graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let twice = [
        Group::new(&named(&m, &["w", "b"])),
        Group::new(&named(&m, &["head", "w"])),
    ];
    let e = Adam::with_groups(&m.graph, &twice, 0.01)
        .compile(&mut ctx)
        .unwrap_err();
    assert!(
        e.message
            .contains("Adam: parameter 'w' is in group 0 and again in group 1"),
        "{e}"
    );
    let negative = [Group::new(&m.params).lr_scale(-1.0)];
    let e = Sgd::with_groups(&m.graph, &negative, 0.1, 0.0)
        .compile(&mut ctx)
        .unwrap_err();
    assert!(
        e.message
            .contains("Sgd: group 0's learning-rate scale is -1"),
        "{e}"
    );
    let nan = [Group::new(&m.params).weight_decay(f64::NAN)];
    let e = Adam::with_groups(&m.graph, &nan, 0.1)
        .compile(&mut ctx)
        .unwrap_err();
    assert!(
        e.message.contains("Adam: group 0's weight decay is NaN"),
        "{e}"
    );
    let e = Sgd::new(&m.graph, &m.params, 0.1, 0.9)
        .dampening(1.5)
        .compile(&mut ctx)
        .unwrap_err();
    assert!(e.message.contains("Sgd: the dampening is 1.5"), "{e}");
    // PyTorch refuses Nesterov momentum with dampening too.
    let e = Sgd::new(&m.graph, &m.params, 0.1, 0.9)
        .nesterov()
        .dampening(0.1)
        .compile(&mut ctx)
        .unwrap_err();
    assert!(e.message.contains("Nesterov momentum"), "{e}");
}

#[test]
fn optimizer_state_grows_by_what_dampening_and_amsgrad_keep() {
    let m = model();
    let mut ctx = Context::with_backend(&m.graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let mut sgd = Sgd::new(&m.graph, &m.params, 0.1, 0.9).dampening(0.5);
    sgd.compile(&mut ctx).unwrap();
    // A velocity per parameter, then the share of the gradient entering them.
    assert_eq!(sgd.state().len(), 4);
    assert_eq!(sgd.state()[3].label(), "sgd gradient share");
    let mut adam = Adam::new(&m.graph, &m.params, 0.1).amsgrad();
    adam.compile(&mut ctx).unwrap();
    // The step count, then per parameter both moments and the largest second moment.
    let labels: Vec<String> = adam.state().iter().map(Tensor::label).collect();
    assert_eq!(labels.len(), 1 + 3 * 3);
    assert_eq!(
        labels[1..4],
        [
            "w first moment",
            "w second moment",
            "w largest second moment"
        ]
    );
}

#[test]
fn fans_of_dense_weights_and_convolution_kernels_are_pytorchs() {
    // PyTorch's kernels (out, in, *window), in reference.py's order, and rcannl's.
    let (dims, fans) = reference("fans");
    assert_eq!(dims, [4, 2]);
    let graph = Graph::new();
    let dense = graph.param("dense").shape("|64->128").build();
    let conv = Conv2d::new(
        &graph,
        "conv",
        128,
        3,
        ConvOptions::default().padding(Padding::Same),
    );
    let image = graph.data("image").shape("2|->8,8,64").build();
    let convolved = conv.apply(&image);
    let depthwise = DepthwiseConv2d::new(&graph, "depthwise", 3, 1, true);
    let channels = graph.data("channels").shape("2|->8,8,32").build();
    let filtered = depthwise.apply(&channels);
    let conv1d = (graph.param("conv1d").shape("|5,8->16"))
        .window_axes(1)
        .build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.dims(&convolved).unwrap();
    ctx.dims(&filtered).unwrap();
    for (i, kernel) in [&dense, &conv.kernel, &depthwise.kernel, &conv1d]
        .into_iter()
        .enumerate()
    {
        let (fan_in, fan_out) = ctx.fans(kernel).unwrap();
        assert_eq!(
            [fan_in as f64, fan_out as f64],
            fans[2 * i..2 * i + 2],
            "'{}'",
            kernel.label()
        );
    }
}

#[test]
fn xavier_draws_a_kernel_with_the_deviation_of_pytorchs_fans() {
    // A `|3,3,64->128` kernel: PyTorch's Xavier deviation is √(2/(576 + 1152)) ≈ 0.034 (the
    // output channels alone would give √(2/(576 + 128)) ≈ 0.053).
    let graph = Graph::new();
    let kernel = (graph.param("kernel").shape("|3,3,64->128"))
        .window_axes(2)
        .init(Init::XavierNormal)
        .precision(Precision::F64)
        .build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let values = ctx.values(&kernel).unwrap();
    let n = values.len() as f64;
    let deviation = (values.iter().map(|v| v * v).sum::<f64>() / n).sqrt();
    let expected = (2.0f64 / (576.0 + 1152.0)).sqrt();
    // 73728 draws: the sample deviation is within a percent of the true one.
    assert!(
        (deviation / expected - 1.0).abs() < 0.01,
        "{deviation} vs {expected}"
    );
    let declared_badly = graph.param("bad").shape("|3->2").window_axes(2).build();
    let e = ctx.fans(&declared_badly).unwrap_err();
    assert!(
        e.message
            .contains("parameter 'bad': 2 window axes declared, but it has 1 input axes"),
        "{e}"
    );
}
