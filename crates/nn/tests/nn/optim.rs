//! Optimizer settings: a learning rate, momentum, decay, betas or epsilon that is not a number,
//! infinite or out of its range is refused when the step is compiled, and a schedule's when it
//! sets the learning rate, with an error naming the optimizer, the setting and its value. SGD
//! without momentum keeps no velocity. Clipping by the global gradient norm and LAMB's trust
//! ratios (reductions inside the step), per parameter group too, match a direct computation on
//! both CPU backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::optim::{Adam, Group, Lamb, Schedule, Sgd};
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

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn clipping_scales_every_gradient_by_the_global_norm() {
    // loss = a·(3, 0) + b·4: the gradients are (3, 0) and 4, of global norm 5.
    for (max_norm, scale) in [(1.0, 1.0 / (5.0 + 1e-6)), (10.0, 1.0)] {
        for backend in backends() {
            let name = backend.name();
            let graph = Graph::new();
            let a = graph
                .param("a")
                .shape("2")
                .init(Init::Values(vec![1.0, 1.0]))
                .build();
            let b = graph
                .param("b")
                .shape("1")
                .init(Init::Values(vec![1.0]))
                .build();
            let xa = graph.data("xa").shape("2").values(vec![3.0, 0.0]).build();
            let xb = graph.data("xb").shape("1").values(vec![4.0]).build();
            let loss = &rcannl_nn::loss::sum(&a.pmul(&xa)) + &rcannl_nn::loss::sum(&b.pmul(&xb));
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let mut sgd =
                Sgd::new(&graph, &[a.clone(), b.clone()], 1.0, 0.0).clip_grad_norm(max_norm);
            let step = sgd.compile_step(&mut ctx, &loss).unwrap();
            ctx.run(&step).unwrap();
            let norm = sgd.grad_norm().expect("clipping keeps the norm").clone();
            assert!((ctx.values(&norm).unwrap()[0] - 5.0).abs() < 1e-5, "{name}");
            let a_now = ctx.values(&a).unwrap();
            let b_now = ctx.values(&b).unwrap();
            let expected = [1.0 - 3.0 * scale, 1.0, 1.0 - 4.0 * scale];
            for (got, want) in a_now.iter().chain(&b_now).zip(expected) {
                assert!(
                    (got - want).abs() < 1e-6,
                    "{name} max {max_norm}: {got} vs {want}"
                );
            }
        }
    }
}

/// LAMB computed directly in f64: `steps` steps on `loss = Σ c·w²` (gradient `2c·w`) per
/// parameter.
fn lamb_by_hand(params: &[(Vec<f64>, f64)], lr: f64, decay: f64, steps: usize) -> Vec<Vec<f64>> {
    let (beta1, beta2, epsilon) = (0.9f64, 0.999f64, 1e-6);
    let mut ws: Vec<Vec<f64>> = params.iter().map(|(w, _)| w.clone()).collect();
    let mut ms: Vec<Vec<f64>> = ws.iter().map(|w| vec![0.0; w.len()]).collect();
    let mut vs = ms.clone();
    for t in 1..=steps {
        let t = t as f64;
        for (p, (_, c)) in params.iter().enumerate() {
            let w = &mut ws[p];
            let g: Vec<f64> = w.iter().map(|w| 2.0 * c * w).collect();
            let mut r = Vec::new();
            for i in 0..w.len() {
                ms[p][i] = beta1 * ms[p][i] + (1.0 - beta1) * g[i];
                vs[p][i] = beta2 * vs[p][i] + (1.0 - beta2) * g[i] * g[i];
                let m_hat = ms[p][i] / (1.0 - beta1.powf(t));
                let v_hat = vs[p][i] / (1.0 - beta2.powf(t));
                r.push(m_hat / (v_hat.sqrt() + epsilon) + decay * w[i]);
            }
            let w_norm = w.iter().map(|v| v * v).sum::<f64>().sqrt();
            let r_norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            let ratio = if w_norm > 0.0 && r_norm > 0.0 {
                w_norm / r_norm
            } else {
                1.0
            };
            for i in 0..w.len() {
                w[i] -= lr * ratio * r[i];
            }
        }
    }
    ws
}

#[test]
fn lamb_scales_each_step_by_its_trust_ratio() {
    let start = [(vec![1.0, -2.0, 0.5], 1.0), (vec![3.0, 0.25], 0.5)];
    let expected = lamb_by_hand(&start, 0.05, 0.01, 3);
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let params: Vec<Tensor> = start
            .iter()
            .enumerate()
            .map(|(i, (w, _))| {
                graph
                    .param(&format!("w{i}"))
                    .shape(&w.len().to_string())
                    .init(Init::Values(w.clone()))
                    .build()
            })
            .collect();
        let terms: Vec<Tensor> = params
            .iter()
            .zip(&start)
            .map(|(w, (_, c))| rcannl_nn::loss::sum(&w.pmul(w)) * *c)
            .collect();
        let loss = &terms[0] + &terms[1];
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let mut lamb = Lamb::new(&graph, &params, 0.05).weight_decay(0.01);
        let step = lamb.compile_step(&mut ctx, &loss).unwrap();
        assert_eq!(lamb.state().len(), 1 + 4 * params.len());
        for _ in 0..3 {
            ctx.run(&step).unwrap();
        }
        for (w, want) in params.iter().zip(&expected) {
            let got = ctx.values(w).unwrap();
            for (g, e) in got.iter().zip(want) {
                assert!((g - e).abs() < 2e-5, "{name}: {got:?} vs {want:?}");
            }
        }
    }
}

#[test]
fn lamb_steps_each_group_with_its_rate_and_weight_decay() {
    // The parameters' steps are independent: each is LAMB alone at its group's settings.
    let start = [(vec![1.0, -2.0, 0.5], 1.0), (vec![3.0, 0.25], 0.5)];
    let expected = [
        lamb_by_hand(&start[..1], 0.05, 0.01, 3).remove(0),
        lamb_by_hand(&start[1..], 0.05 * 0.5, 0.0, 3).remove(0),
    ];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let params: Vec<Tensor> = (start.iter().enumerate())
            .map(|(i, (w, _))| {
                (graph.param(&format!("w{i}")).shape(&w.len().to_string()))
                    .init(Init::Values(w.clone()))
                    .build()
            })
            .collect();
        let terms: Vec<Tensor> = (params.iter().zip(&start))
            .map(|(w, (_, c))| rcannl_nn::loss::sum(&w.pmul(w)) * *c)
            .collect();
        let loss = &terms[0] + &terms[1];
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let groups = [
            Group::new(&params[..1]),
            Group::new(&params[1..]).lr_scale(0.5).weight_decay(0.0),
        ];
        let mut lamb = Lamb::with_groups(&graph, &groups, 0.05).weight_decay(0.01);
        let step = lamb.compile_step(&mut ctx, &loss).unwrap();
        for _ in 0..3 {
            ctx.run(&step).unwrap();
        }
        for (w, want) in params.iter().zip(&expected) {
            let got = ctx.values(w).unwrap();
            for (g, e) in got.iter().zip(want) {
                assert!((g - e).abs() < 2e-5, "{name}: {got:?} vs {want:?}");
            }
        }
    }
}

#[test]
fn lamb_and_clipping_refuse_bad_settings() {
    let (graph, w, mut ctx) = setup();
    let mut lamb = Lamb::new(&graph, std::slice::from_ref(&w), 0.1);
    lamb.beta2 = 1.0;
    refused(lamb.compile(&mut ctx), &["Lamb: beta2 is 1"]);
    let mut clipped = Adam::new(&graph, &[w], 0.1).clip_grad_norm(0.0);
    refused(
        clipped.compile(&mut ctx),
        &["Adam: the gradient clipping norm is 0", "above 0"],
    );
}

/// Adam computed directly in f64: `steps` steps from `w` on `loss = Σ c·w² + Σ x·w` (gradient
/// `2c·w + x`), with the usual betas and epsilon and decoupled weight decay `decay`.
fn adam_by_hand(w: &[f64], (c, x): (&[f64], &[f64]), lr: f64, decay: f64, steps: i32) -> Vec<f64> {
    let (beta1, beta2, epsilon) = (0.9f64, 0.999f64, 1e-8);
    let mut w = w.to_vec();
    let (mut m, mut v) = (vec![0.0; w.len()], vec![0.0; w.len()]);
    for t in 1..=steps {
        for i in 0..w.len() {
            let g = 2.0 * c[i] * w[i] + x[i];
            m[i] = beta1 * m[i] + (1.0 - beta1) * g;
            v[i] = beta2 * v[i] + (1.0 - beta2) * (g * g);
            let m_hat = m[i] / (1.0 - beta1.powi(t));
            let v_hat = v[i] / (1.0 - beta2.powi(t));
            w[i] -= lr * (m_hat / (v_hat.sqrt() + epsilon) + decay * w[i]);
        }
    }
    w
}

/// A graph with the f64 parameter `w` (3 cells) and the loss `Σ c·w² + Σ x·w`, in f64.
fn f64_model(w: &[f64], (c, x): (&[f64], &[f64])) -> (Graph, Tensor, Tensor) {
    let graph = Graph::new();
    let data = |label: &str, values: &[f64]| {
        (graph.data(label).shape("3").precision(Precision::F64))
            .values(values.to_vec())
            .build()
    };
    let param = (graph.param("w").shape("3").precision(Precision::F64))
        .init(Init::Values(w.to_vec()))
        .build();
    let (c, x) = (data("c", c), data("x", x));
    let loss = &rcannl_nn::loss::sum(&c.pmul(&param.pmul(&param)))
        + &rcannl_nn::loss::sum(&x.pmul(&param));
    (graph, param, loss)
}

#[test]
fn adam_on_f64_parameters_matches_adam_in_f64() {
    let start = [0.3, -1.7, 2.9];
    let (c, x) = ([1.0, 0.5, 2.0], [0.25, -3.0, 0.125]);
    let expected = adam_by_hand(&start, (&c, &x), 0.01, 0.001, 10);
    for backend in backends() {
        let name = backend.name();
        let (graph, w, loss) = f64_model(&start, (&c, &x));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let mut adam = Adam::new(&graph, std::slice::from_ref(&w), 0.01).weight_decay(0.001);
        let step = adam.compile_step(&mut ctx, &loss).unwrap();
        for _ in 0..10 {
            ctx.run(&step).unwrap();
        }
        let got = ctx.values(&w).unwrap();
        for (g, e) in got.iter().zip(&expected) {
            assert!(
                (g - e).abs() <= 1e-12 * e.abs(),
                "{name}: {got:?} vs {expected:?}"
            );
        }
        for state in adam.state().iter().chain([&adam.lr]) {
            assert_eq!(
                state.precision(),
                Precision::F64,
                "{name}: '{}'",
                state.label()
            );
        }
        // 1 − βᵗ at t = 10 for the f64 nearest 0.9 and 0.999, computed exactly (in rationals)
        // and rounded once. `1.0 - 0.999f64.powi(10)` is 3.4e-15 off: the subtraction cancels
        // two of its digits.
        let exact = [0.6513215599, 0.009955119790251798];
        for (correction, exact) in adam.bias_corrections().iter().zip(exact) {
            assert_eq!(correction.precision(), Precision::F64);
            let used = ctx.values(correction).unwrap()[0];
            assert!(
                (used - exact).abs() <= 1e-15 * exact,
                "{name}: {used} vs {exact}"
            );
        }
    }
}

#[test]
fn a_learning_rate_is_refused_only_beyond_the_parameters_precision() {
    // f32 parameters: 1e200 is beyond f32, which the message says, naming the rate as given.
    let (graph, w, mut ctx) = setup();
    let mut adam = Adam::new(&graph, &[w], 1e200);
    refused(
        adam.compile(&mut ctx),
        &[
            "Adam: the learning rate is 1e200",
            "beyond the range of f32",
            "'w'",
        ],
    );
    // f64 parameters take it.
    let (c, x) = ([1.0, 0.5, 2.0], [0.25, -3.0, 0.125]);
    let (graph, w, _) = f64_model(&[0.3, -1.7, 2.9], (&c, &x));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    Adam::new(&graph, &[w], 1e200)
        .compile(&mut ctx)
        .expect("1e200 is an f64");
}

#[test]
fn optimizer_state_follows_each_parameters_precision() {
    let (c, x) = ([1.0, 0.5, 2.0], [0.25, -3.0, 0.125]);
    let (graph, wide, loss) = f64_model(&[0.3, -1.7, 2.9], (&c, &x));
    let narrow = graph.param("narrow").shape("2").build();
    let loss = &loss + &rcannl_nn::loss::sum(&narrow.pmul(&narrow));
    let params = [wide, narrow];
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let mut sgd = Sgd::new(&graph, &params, 0.1, 0.9).clip_grad_norm(1.0);
    sgd.compile_step(&mut ctx, &loss).unwrap();
    let mut lamb = Lamb::new(&graph, &params, 0.1);
    lamb.compile_step(&mut ctx, &loss).unwrap();
    let precisions =
        |state: &[Tensor]| -> Vec<Precision> { state.iter().map(Tensor::precision).collect() };
    use Precision::{F32, F64};
    assert_eq!(precisions(sgd.state()), [F64, F32]);
    assert_eq!(sgd.grad_norm().unwrap().precision(), F64);
    // The step count, then per parameter both moments and two squared norms.
    assert_eq!(
        precisions(&lamb.state()),
        [F64, F64, F64, F64, F64, F32, F32, F32, F32]
    );
    // A model of f32 parameters keeps its f32 state.
    let (graph, w, mut ctx) = setup();
    let mut adam = Adam::new(&graph, &[w], 0.1);
    adam.compile(&mut ctx).unwrap();
    assert!(adam.state().iter().all(|t| t.precision() == F32));
}

#[test]
fn bias_corrections_of_an_f32_model_are_exact_to_f32() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("2")
            .init(Init::Values(vec![1.0, -1.0]))
            .build();
        let loss = rcannl_nn::loss::sum(&w.pmul(&w));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let mut adam = Adam::new(&graph, &[w], 0.01);
        let step = adam.compile_step(&mut ctx, &loss).unwrap();
        for _ in 0..10 {
            ctx.run(&step).unwrap();
        }
        // As in f64 (see above); `1 − βᵗ` computed in f32 was 1.3e-5 off at β = 0.999.
        for (correction, exact) in adam
            .bias_corrections()
            .iter()
            .zip([0.6513215599, 0.009955119790251798])
        {
            assert_eq!(correction.precision(), Precision::F32);
            let used = ctx.values(correction).unwrap()[0];
            // A few units in f32's last place (2⁻²⁴ relative each).
            assert!(
                (used - exact).abs() <= 4.0 * exact * 2f64.powi(-24),
                "{name}: {used} vs {exact}"
            );
        }
    }
}
