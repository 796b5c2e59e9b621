//! Precision inference: parameters and data tensors given no precision hold what their users
//! compute in, operations promote from their operands, a choice (made when building or later)
//! wins over both, and defaults fill the rest; gradients have a precision of their own. OCANNL's
//! `top_down_prec` and `test_where_precision` cases, and models trained in the precision of
//! their data with checked gradients, on the interpreter and the C backend.

use rcannl_backends::cc::Compiler;
use rcannl_backends::settings;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Axes, Context, Formula, Graph, Init, Tensor, Update};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// The precisions of `tensors`, in order.
fn precisions(tensors: &[&Tensor]) -> Vec<Precision> {
    tensors.iter().map(|t| t.precision()).collect()
}

/// OCANNL's `test/operations/top_down_prec.ml`: `d = ({ a = [2] } + { b = [2] }) *. { c = [2] }`
/// with `b` made half and `d` bfloat16 after they were built. The sum promotes from `b`'s chosen
/// precision, `a` takes the sum's, `c` takes `d`'s: "even when the default precision is
/// single, c is bfloat16 and a is half". `d` is 8.
#[test]
fn ocannl_top_down_prec() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let param = |label: &str| graph.param(label).values(vec![2.0]).build();
        let (a, b, c) = (param("a"), param("b"), param("c"));
        let sum = &a + &b;
        let d = sum.pmul(&c);
        b.set_precision(Precision::F16);
        d.set_precision(Precision::Bf16);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let forward = ctx.forward(&[&d]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(
            precisions(&[&a, &b, &sum, &c, &d]),
            [
                Precision::F16,
                Precision::F16,
                Precision::F16,
                Precision::Bf16,
                Precision::Bf16
            ],
            "{name}"
        );
        assert_eq!(ctx.values(&d).unwrap(), [8.0], "{name}");
    }
}

/// OCANNL's `test/operations/test_where_precision.ml`: `where` over a byte condition, a half
/// and a bfloat16 branch, its result single, every precision chosen after building. Each keeps
/// its choice, and the false condition selects the other branch's 2.
#[test]
fn ocannl_where_precision() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let cond = graph.data("cond").shape("").build();
        let then = graph.data("a").shape("").build();
        let otherwise = graph.data("b").shape("").build();
        let result = Tensor::where_(&cond, &then, &otherwise);
        cond.set_precision(Precision::U8);
        then.set_precision(Precision::F16);
        otherwise.set_precision(Precision::Bf16);
        result.set_precision(Precision::F32);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&result]).unwrap();
        ctx.set_values(&cond, &[0.0]).unwrap();
        ctx.set_values(&then, &[1.0]).unwrap();
        ctx.set_values(&otherwise, &[2.0]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(
            precisions(&[&cond, &then, &otherwise, &result]),
            [
                Precision::U8,
                Precision::F16,
                Precision::Bf16,
                Precision::F32
            ],
            "{name}"
        );
        assert_eq!(ctx.values(&result).unwrap(), [2.0], "{name}");
    }
}

/// A layer over data of `precision` (given, or `None`), with its parameters and output.
fn layer(graph: &Graph, precision: Option<Precision>) -> (Tensor, Tensor, Tensor, Tensor) {
    let mut x = graph.data("x").shape("4|->2");
    if let Some(precision) = precision {
        x = x.precision(precision);
    }
    let x = x.build();
    let w = graph.param("w").output([3]).build();
    let b = graph.param("b").build();
    let y = (&w * &x + &b).relu();
    (x, w, b, y)
}

#[test]
fn without_choices_everything_holds_the_default() {
    let graph = Graph::new();
    let (x, w, b, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.backprop(&y).unwrap();
    assert_eq!(precisions(&[&x, &w, &b, &y]), [Precision::F32; 4]);
    assert_eq!(w.grad_precision(), Precision::F32);
}

#[test]
fn parameters_take_their_users_precision_and_gradients_theirs() {
    for data in [Precision::F16, Precision::Bf16, Precision::F64] {
        let graph = Graph::new();
        let (x, w, b, y) = layer(&graph, Some(data));
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        ctx.backprop(&y).unwrap();
        assert_eq!(precisions(&[&x, &w, &b, &y]), [data; 4]);
        assert_eq!([w.grad_precision(), b.grad_precision()], [data; 2]);
    }
}

#[test]
fn the_widest_user_wins_and_a_tensor_nothing_uses_holds_the_default() {
    let graph = Graph::new();
    let half = graph
        .data("half")
        .shape("3")
        .precision(Precision::F16)
        .build();
    let double = graph
        .data("double")
        .shape("3")
        .precision(Precision::F64)
        .build();
    let w = graph.param("w").build();
    let unused = graph.param("unused").shape("3").build();
    let (narrow, wide) = (&w + &half, w.pmul(&double));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.forward(&[&narrow, &wide]).unwrap();
    assert_eq!(
        precisions(&[&w, &narrow, &wide, &unused]),
        [
            Precision::F64,
            Precision::F16,
            Precision::F64,
            Precision::F32
        ]
    );
}

/// While the graph is built, a tensor following its users answers what they compute in as it
/// stands (the widest), before any context, and what a context settled once one did.
#[test]
fn a_parameter_answers_its_users_precision_as_the_graph_is_built() {
    let graph = Graph::new();
    let w = graph.param("w").build();
    assert_eq!(w.precision(), Precision::F32, "nothing uses it yet");
    let half = graph
        .data("half")
        .shape("3")
        .precision(Precision::F16)
        .build();
    let narrow = &w + &half;
    assert_eq!(w.precision(), Precision::F16);
    let double = graph
        .data("double")
        .shape("3")
        .precision(Precision::F64)
        .build();
    let wide = w.pmul(&double);
    assert_eq!(
        precisions(&[&w, &narrow, &wide]),
        [Precision::F64, Precision::F16, Precision::F64]
    );
    // Numbers combined with it follow what it answers: held in f64 beside an f64 parameter.
    let scaled = &w * 0.1;
    assert_eq!(scaled.precision(), Precision::F64);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.forward(&[&narrow, &wide, &scaled]).unwrap();
    assert_eq!(w.precision(), Precision::F64);
}

#[test]
fn a_choice_wins_over_inference() {
    let graph = Graph::new();
    let (x, w, b, y) = layer(&graph, Some(Precision::F64));
    w.set_precision(Precision::F32);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.forward(&[&y]).unwrap();
    assert_eq!(
        precisions(&[&x, &w, &b, &y]),
        [
            Precision::F64,
            Precision::F32,
            Precision::F64,
            Precision::F64
        ]
    );
}

/// Integer users leave a parameter a float, and what its gradient flows through computes in a
/// float (never truncating the parameter's values); a cast converts whatever its operand holds:
/// it asks nothing of it.
#[test]
fn integers_and_casts_do_not_pull_their_operands() {
    let graph = Graph::new();
    let ids = graph
        .data("ids")
        .shape("3")
        .precision(Precision::I32)
        .build();
    let w = graph.param("w").build();
    let counted = &ids + &w;
    let x = graph.data("x").shape("3").build();
    let wide = x.cast(Precision::F64);
    let doubled = &ids + &ids;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&counted, &wide, &doubled]).unwrap();
    ctx.set_values(&ids, &[1.0, 2.0, 3.0]).unwrap();
    ctx.set_values(&w, &[0.25, 0.5, 0.75]).unwrap();
    ctx.set_values(&x, &[0.0; 3]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&counted).unwrap(), [1.25, 2.5, 3.75]);
    assert_eq!(
        precisions(&[&doubled, &counted, &w, &wide, &x]),
        [
            Precision::I32,
            Precision::F32,
            Precision::F32,
            Precision::F64,
            Precision::F32
        ]
    );
}

#[test]
fn the_defaults_apply_to_what_nothing_else_gives_a_precision() {
    let graph = Graph::new();
    graph.set_default_precision(Precision::F64);
    graph.set_default_grad_precision(Precision::F32);
    let (x, w, b, y) = layer(&graph, None);
    let scaled = &y * 0.5;
    b.set_grad_precision(Precision::F64);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.backprop(&scaled).unwrap();
    assert_eq!(precisions(&[&x, &w, &b, &y, &scaled]), [Precision::F64; 5]);
    assert_eq!(
        [w.grad_precision(), b.grad_precision(), y.grad_precision()],
        [Precision::F32, Precision::F64, Precision::F32]
    );
}

#[test]
fn a_choice_made_after_the_buffer_is_an_error_naming_the_tensor() {
    let graph = Graph::new();
    let (_, w, _, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.forward(&[&y]).unwrap();
    w.set_precision(Precision::F64);
    let e = ctx.forward(&[&y]).unwrap_err().message;
    assert!(
        e.contains("'w'") && e.contains("f64") && e.contains("f32"),
        "{e}"
    );

    let graph = Graph::new();
    let (_, w, _, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.backprop(&y).unwrap();
    w.set_grad_precision(Precision::F64);
    let e = ctx.backprop(&y).unwrap_err().message;
    assert!(e.contains("'w'") && e.contains("gradient"), "{e}");
}

#[test]
fn a_gradient_or_default_that_is_no_float_is_an_error() {
    let graph = Graph::new();
    let (_, w, _, y) = layer(&graph, None);
    w.set_grad_precision(Precision::I32);
    let e = Context::with_backend(&graph, Box::new(Interpreter))
        .forward(&[&y])
        .unwrap_err()
        .message;
    assert!(e.contains("'w'") && e.contains("i32"), "{e}");

    let graph = Graph::new();
    graph.set_default_precision(Precision::U8);
    let e = graph.check().unwrap_err().message;
    assert!(e.contains("u8"), "{e}");
}

/// Set in the environment of this test binary run again by the settings' tests: the test it
/// names then checks from inside.
const SETTINGS_CHILD: &str = "RCANNL_TEST_PRECISION_SETTINGS_CHILD";

/// Runs this module's test `name` alone, in a process of its own with `variables` set, and
/// checks that it ran and passed.
fn run_alone(name: &str, variables: &[(&str, &str)]) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("precision_inference::{name}")])
        .env(SETTINGS_CHILD, "1")
        .envs(variables.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name}: {stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "{name} did not run: {stdout}");
}

#[test]
fn the_precision_settings_take_the_float_precisions() {
    let floats: Vec<String> = Precision::ALL
        .into_iter()
        .filter(|p| p.is_float())
        .map(|p| p.to_string())
        .collect();
    assert_eq!(settings::FLOAT_PRECISIONS, floats);
    for key in [
        &settings::DEFAULT_PRECISION,
        &settings::DEFAULT_GRAD_PRECISION,
    ] {
        assert_eq!(key.kind, settings::Kind::Choice(settings::FLOAT_PRECISIONS));
    }
}

/// `default_precision` and `default_grad_precision` (OCANNL's `default_prec` and
/// `default_grad_prec`) give every graph made under them its defaults, and the graph's own
/// choices still win.
#[test]
fn the_precision_settings_are_a_new_graphs_defaults() {
    if std::env::var_os(SETTINGS_CHILD).is_none() {
        run_alone(
            "the_precision_settings_are_a_new_graphs_defaults",
            &[
                ("RCANNL_DEFAULT_PRECISION", "f64"),
                ("RCANNL_DEFAULT_GRAD_PRECISION", "f16"),
            ],
        );
        return;
    }
    let graph = Graph::new();
    assert_eq!(graph.default_precision(), Precision::F64);
    let (x, w, b, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.backprop(&y).unwrap();
    assert_eq!(precisions(&[&x, &w, &b, &y]), [Precision::F64; 4]);
    assert_eq!(
        [w.grad_precision(), y.grad_precision()],
        [Precision::F16; 2]
    );

    let graph = Graph::new();
    graph.set_default_precision(Precision::Bf16);
    graph.set_default_grad_precision(Precision::F32);
    let (_, w, _, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.backprop(&y).unwrap();
    assert_eq!(precisions(&[&w, &y]), [Precision::Bf16; 2]);
    assert_eq!(w.grad_precision(), Precision::F32);
}

/// A precision setting naming no float precision is an error of every graph made under it,
/// naming the variable and what it takes; without the setting, the defaults are f32 and a
/// gradient in its tensor's precision.
#[test]
fn a_precision_setting_that_names_no_float_is_an_error_of_the_graph() {
    if std::env::var_os(SETTINGS_CHILD).is_none() {
        run_alone(
            "a_precision_setting_that_names_no_float_is_an_error_of_the_graph",
            &[("RCANNL_DEFAULT_GRAD_PRECISION", "i32")],
        );
        return;
    }
    let graph = Graph::new();
    let e = graph.check().unwrap_err().message;
    assert!(
        e.contains("RCANNL_DEFAULT_GRAD_PRECISION=i32") && e.contains("f16, bf16, f32, f64"),
        "{e}"
    );
    let (_, w, _, y) = layer(&graph, None);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    assert_eq!(ctx.backprop(&y).unwrap_err().message, e);
    assert_eq!([y.precision(), w.grad_precision()], [Precision::F32; 2]);
}

/// A two-layer network over data of `precision` whose parameters are given no precision, its
/// squared error against its targets summed, on `backend`, gradients in `grad` if given: the
/// context, the parameters and the loss.
struct Model {
    ctx: Context,
    params: Vec<Tensor>,
    loss: Tensor,
}

fn model(backend: Box<dyn Backend>, precision: Precision, grad: Option<Precision>) -> Model {
    let graph = Graph::new();
    if let Some(grad) = grad {
        graph.set_default_grad_precision(grad);
    }
    let x = graph
        .data("x")
        .shape("4|->2")
        .precision(precision)
        .values(vec![0.5, -1.0, 1.5, 0.25, -0.75, 1.0, 0.1, -0.4])
        .build();
    let target = graph
        .data("target")
        .shape("4|->1")
        .precision(precision)
        .values(vec![1.0, -0.5, 0.25, 0.75])
        .build();
    let values = |n: usize, seed: f64| (0..n).map(|i| (seed * (i as f64 + 1.0)).sin()).collect();
    let w1 = graph
        .param("w1")
        .output([3])
        .init(Init::Values(values(6, 1.3)))
        .build();
    let b1 = graph.param("b1").init(Init::Values(values(3, 0.7))).build();
    let w2 = graph
        .param("w2")
        .output([1])
        .init(Init::Values(values(3, 2.1)))
        .build();
    let error = &(&w2 * &(&w1 * &x + &b1).tanh()) - &target;
    let loss = error.pmul(&error).sum_over(Axes::all());
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    Model {
        ctx,
        params: vec![w1, b1, w2],
        loss,
    }
}

/// The gradients backprop gives an f64 model whose parameters took f64 from their data agree
/// with finite differences, and gradient steps lower the loss.
#[test]
fn an_f64_model_trains_with_checked_gradients() {
    for backend in backends() {
        let name = backend.name();
        let Model {
            mut ctx,
            params,
            loss,
        } = model(backend, Precision::F64, None);
        assert!(
            params.iter().all(|p| p.precision() == Precision::F64),
            "{name}"
        );
        let backprop = ctx.backprop(&loss).unwrap();
        let forward = ctx.forward(&[&loss]).unwrap();
        ctx.run(&backprop).unwrap();
        let h = 1e-6;
        for p in &params {
            let start = ctx.values(p).unwrap();
            let analytic = ctx.grad(p).unwrap();
            for cell in 0..start.len() {
                let mut at = |delta: f64| {
                    let mut shifted = start.clone();
                    shifted[cell] += delta;
                    ctx.set_values(p, &shifted).unwrap();
                    ctx.run(&forward).unwrap();
                    ctx.values(&loss).unwrap()[0]
                };
                let numeric = (at(h) - at(-h)) / (2.0 * h);
                let got = analytic[cell];
                assert!(
                    (numeric - got).abs() <= 1e-6 * numeric.abs().max(1.0),
                    "{name}: d/d {}[{cell}]: {got} vs {numeric}",
                    p.label()
                );
            }
            ctx.set_values(p, &start).unwrap();
        }
        let losses = train(&mut ctx, &params, &loss, 0.05);
        assert!(
            losses[losses.len() - 1] < 0.5 * losses[0],
            "{name}: {losses:?}"
        );
    }
}

/// `steps` losses of plain gradient steps at `rate`.
fn train(ctx: &mut Context, params: &[Tensor], loss: &Tensor, rate: f64) -> Vec<f64> {
    let backprop = ctx.backprop(loss).unwrap();
    let updates: Vec<Update> = params
        .iter()
        .map(|p| Update::subtract(p, rate * Formula::grad(p)))
        .collect();
    let step = ctx.update(&updates).unwrap();
    (0..40)
        .map(|_| {
            ctx.run(&backprop).unwrap();
            ctx.run(&step).unwrap();
            ctx.values(loss).unwrap()[0]
        })
        .collect()
}

/// A bf16 model (its parameters took bf16 from the data) with f32 gradients computes the same
/// loss and gradients on the C backend as on the interpreter, and trains.
#[test]
fn a_bf16_model_with_f32_gradients_trains_alike_on_both_backends() {
    let mut runs = Vec::new();
    for backend in backends() {
        let name = backend.name();
        let Model {
            mut ctx,
            params,
            loss,
        } = model(backend, Precision::Bf16, Some(Precision::F32));
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run(&backprop).unwrap();
        assert!(
            params.iter().all(|p| p.precision() == Precision::Bf16),
            "{name}"
        );
        assert!(
            params.iter().all(|p| p.grad_precision() == Precision::F32),
            "{name}"
        );
        let grads: Vec<Vec<f64>> = params.iter().map(|p| ctx.grad(p).unwrap()).collect();
        let losses = train(&mut ctx, &params, &loss, 0.05);
        assert!(
            losses[losses.len() - 1] < 0.5 * losses[0],
            "{name}: {losses:?}"
        );
        runs.push((grads, losses));
    }
    let (want, got) = (&runs[0], &runs[1]);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-2 * a.abs().max(b.abs()).max(1.0);
    for (w, g) in want.0.iter().flatten().zip(got.0.iter().flatten()) {
        assert!(close(*w, *g), "gradient {w} on the interpreter, {g} on cc");
    }
    for (w, g) in want.1.iter().zip(&got.1) {
        assert!(close(*w, *g), "loss {w} on the interpreter, {g} on cc");
    }
}
