//! Optimizer settings: a learning rate, momentum, decay, betas or epsilon that is not a number,
//! infinite or out of its range is refused when the step is compiled, and a schedule's when it
//! sets the learning rate, with an error naming the optimizer, the setting and its value. SGD
//! without momentum keeps no velocity.

use rcannl_backends::Interpreter;
use rcannl_nn::optim::{Adam, Schedule, Sgd};
use rcannl_tensor::{Context, Graph, Init, Tensor, TensorError};

/// A graph with one parameter, and a context of it with the parameter initialized.
fn setup() -> (Graph, Tensor, Context) {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(Init::Values(vec![1.0, -1.0]))
        .build();
    let loss = rcannl_nn::loss::sum(&w.pmul(&w));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().expect("init");
    ctx.backprop(&loss).expect("backprop");
    (graph, w, ctx)
}

/// The error's message, which must contain every one of `expected`.
fn refused<T>(result: Result<T, TensorError>, expected: &[&str]) {
    let Err(e) = result else {
        panic!("accepted, expected an error with {expected:?}");
    };
    for part in expected {
        assert!(e.message.contains(part), "{part:?} not in {:?}", e.message);
    }
}

#[test]
fn sgd_refuses_settings_that_are_not_finite_or_out_of_range() {
    type Change = fn(Sgd) -> Sgd;
    let cases: [(f64, Change, &str); 8] = [
        (f64::NAN, |s| s, "Sgd: the learning rate is NaN"),
        (-0.1, |s| s, "Sgd: the learning rate is -0.1"),
        (f64::INFINITY, |s| s, "Sgd: the learning rate is inf"),
        (
            0.1,
            |mut s| {
                s.momentum = f64::NAN;
                s
            },
            "Sgd: the momentum is NaN",
        ),
        (
            0.1,
            |mut s| {
                s.momentum = 1.0;
                s
            },
            "Sgd: the momentum is 1",
        ),
        (
            0.1,
            |mut s| {
                s.momentum = -0.5;
                s
            },
            "Sgd: the momentum is -0.5",
        ),
        (
            0.1,
            |s| s.weight_decay(f64::NEG_INFINITY),
            "Sgd: the weight decay is -inf",
        ),
        (
            0.1,
            |s| s.weight_decay(-1e-4),
            "Sgd: the weight decay is -0.0001",
        ),
    ];
    for (lr, change, expected) in cases {
        let (graph, w, mut ctx) = setup();
        let mut sgd = change(Sgd::new(&graph, &[w], lr, 0.0));
        refused(sgd.compile(&mut ctx), &[expected]);
    }
    // Zero is a learning rate (a frozen step), and 0.9 a momentum.
    let (graph, w, mut ctx) = setup();
    Sgd::new(&graph, &[w], 0.0, 0.9)
        .compile(&mut ctx)
        .expect("a valid optimizer");
}

#[test]
fn sgd_refuses_a_learning_rate_set_in_the_context() {
    let (graph, w, mut ctx) = setup();
    let mut sgd = Sgd::new(&graph, &[w], 0.1, 0.9);
    ctx.dims(&sgd.lr).expect("the learning rate's buffer");
    ctx.set_values(&sgd.lr, &[f64::NAN]).expect("values");
    refused(sgd.compile(&mut ctx), &["Sgd: the learning rate is NaN"]);
}

#[test]
fn adam_refuses_settings_that_are_not_finite_or_out_of_range() {
    type Change = fn(Adam) -> Adam;
    let cases: [(f64, Change, &str); 9] = [
        (f64::NAN, |a| a, "Adam: the learning rate is NaN"),
        (-1.0, |a| a, "Adam: the learning rate is -1"),
        (
            1e-3,
            |mut a| {
                a.beta1 = 1.0;
                a
            },
            "Adam: beta1 is 1",
        ),
        (
            1e-3,
            |mut a| {
                a.beta1 = f64::NAN;
                a
            },
            "Adam: beta1 is NaN",
        ),
        (
            1e-3,
            |mut a| {
                a.beta2 = -0.1;
                a
            },
            "Adam: beta2 is -0.1",
        ),
        (
            1e-3,
            |mut a| {
                a.epsilon = 0.0;
                a
            },
            "Adam: epsilon is 0",
        ),
        (
            1e-3,
            |mut a| {
                a.epsilon = f64::INFINITY;
                a
            },
            "Adam: epsilon is inf",
        ),
        (
            1e-3,
            |a| a.weight_decay(f64::NAN),
            "Adam: the weight decay is NaN",
        ),
        (
            1e-3,
            |a| a.weight_decay(-0.01),
            "Adam: the weight decay is -0.01",
        ),
    ];
    for (lr, change, expected) in cases {
        let (graph, w, mut ctx) = setup();
        let mut adam = change(Adam::new(&graph, &[w], lr));
        refused(adam.compile(&mut ctx), &[expected]);
    }
    let (graph, w, mut ctx) = setup();
    Adam::new(&graph, &[w], 1e-3)
        .weight_decay(0.01)
        .compile(&mut ctx)
        .expect("a valid optimizer");
}

#[test]
fn schedules_refuse_learning_rates_that_are_not_finite_or_negative() {
    let (graph, w, mut ctx) = setup();
    let mut sgd = Sgd::new(&graph, &[w], 0.5, 0.9);
    sgd.compile(&mut ctx).expect("a valid optimizer");
    for (schedule, expected) in [
        (
            Schedule::Constant(f64::NAN),
            "Schedule::Constant: the learning rate is NaN",
        ),
        (
            Schedule::Constant(-0.5),
            "Schedule::Constant: the learning rate is -0.5",
        ),
        (
            Schedule::Warmup {
                peak: f64::INFINITY,
                warmup: 10,
            },
            "Schedule::Warmup: the peak is inf",
        ),
        (
            Schedule::Cosine {
                peak: 0.1,
                floor: f64::NAN,
                warmup: 10,
            },
            "Schedule::Cosine: the floor is NaN",
        ),
        (
            Schedule::Cosine {
                peak: -0.1,
                floor: 0.0,
                warmup: 0,
            },
            "Schedule::Cosine: the peak is -0.1",
        ),
    ] {
        refused(schedule.apply(&mut ctx, &sgd.lr, 0, 100), &[expected]);
        assert_eq!(ctx.values(&sgd.lr).expect("the rate"), [0.5], "unchanged");
    }
    Schedule::Cosine {
        peak: 0.5,
        floor: 0.0,
        warmup: 0,
    }
    .apply(&mut ctx, &sgd.lr, 50, 100)
    .expect("a valid schedule");
    assert_eq!(ctx.values(&sgd.lr).expect("the rate"), [0.25]);
}

#[test]
fn sgd_without_momentum_keeps_no_velocity_and_steps_by_the_gradient() {
    // loss = Σ w², so the gradient is 2w: one step of lr 0.1 with weight decay 0.5 moves w by
    // 0.1·(2w + 0.5w) = 0.25w.
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(Init::Values(vec![1.0, -2.0]))
        .build();
    let loss = rcannl_nn::loss::sum(&w.pmul(&w));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().expect("init");
    let backprop = ctx.backprop(&loss).expect("backprop");
    let mut sgd = Sgd::new(&graph, std::slice::from_ref(&w), 0.1, 0.0).weight_decay(0.5);
    let step = sgd.compile(&mut ctx).expect("a valid optimizer");
    assert!(sgd.state().is_empty(), "{:?}", sgd.state());
    ctx.run(&backprop).expect("backprop runs");
    ctx.run(&step).expect("the step runs");
    assert_eq!(ctx.values(&w).unwrap(), vec![0.75, -1.5]);
    // With momentum, a velocity per parameter.
    let mut with_momentum = Sgd::new(&graph, &[w], 0.1, 0.9);
    with_momentum.compile(&mut ctx).expect("a valid optimizer");
    assert_eq!(with_momentum.state().len(), 1);
}
