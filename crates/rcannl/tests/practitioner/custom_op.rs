//! New differentiable operations defined with `cd!`, used in a model, as a practitioner writes
//! them from the docs: swish (`x·σ(x)`) as the hidden activation of an MLP 3 → 5 → 2 written
//! with `op!`, and the Huber loss (δ = 1) against targets, each a forward formula with its
//! gradients written by hand. Trained with Adam.
//!
//! Checked against PyTorch (`custom_op/reference.py`: `x * torch.sigmoid(x)` and
//! `torch.nn.functional.huber_loss`, differentiated by autograd) on the interpreter and the C
//! backend, in f64 within 1e-10, from the same parameters and data: the hidden activations, the
//! predictions, the loss and the gradient of every parameter; every parameter after three Adam
//! steps, taken by `nn::optim::Adam` and by the same updates written with `cd!`; and every
//! parameter after three steps of centered RMSprop with momentum and weight decay, an optimizer
//! the library lacks, written with `cd!` over state declared with no shape.

use rcannl::nn::loss::mean;
use rcannl::nn::optim::Adam;
use rcannl::prelude::*;

use crate::support::{backends, check, set_from_reference};

const PROGRAM: &str = "custom_op";
const BATCH: usize = 8;
const INPUTS: usize = 3;
const HIDDEN: usize = 5;
const OUTPUTS: usize = 2;
const DELTA: f64 = 1.0;
const STEPS: usize = 3;
const LR: f64 = 0.05;
const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f64 = 1e-8;
const RMS_LR: f64 = 0.01;
const RMS_ALPHA: f64 = 0.99;
const RMS_EPSILON: f64 = 1e-8;
const RMS_MOMENTUM: f64 = 0.9;
const RMS_DECAY: f64 = 0.01;

cd! {
    /// Swish, `x·σ(x) = x/(1 + e⁻ˣ)`; its derivative `σ(x)·(1 + x·(1 − σ(x)))` written out as
    /// `(1 + e⁻ˣ + x·e⁻ˣ)/(1 + e⁻ˣ)²`.
    fn swish(x) {
        v =: v1 / (1 + exp(-v1));
        g1 =+ g * (1 + exp(-v1) + v1 * exp(-v1)) / ((1 + exp(-v1)) * (1 + exp(-v1)));
    }

    /// The Huber loss of each cell of `prediction` against `target`: `d²/2` where the residual
    /// `d` is within `delta`, `delta·(|d| − delta/2)` beyond; its gradient the residual clipped
    /// to `[−delta, delta]` (minus that for the target).
    fn huber(prediction, target, delta: f64) {
        v =: where_((v1 - v2) * (v1 - v2) < delta * delta,
                    0.5 * (v1 - v2) * (v1 - v2),
                    delta * (max(v1 - v2, v2 - v1) - 0.5 * delta));
        g1 =+ g * max(-delta, min(delta, v1 - v2));
        g2 =- g * max(-delta, min(delta, v1 - v2));
    }
}

/// The program on one backend: the data, the MLP, the mean Huber loss, parameters from
/// PyTorch's starting values.
struct Program {
    graph: Graph,
    hidden: Tensor,
    prediction: Tensor,
    loss: Tensor,
    ctx: Context,
}

impl Program {
    fn new(backend: Box<dyn rcannl::backends::Backend>) -> Program {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape(&format!("{BATCH}|->{INPUTS}"))
            .precision(Precision::F64)
            .build();
        let targets = graph
            .data("targets")
            .shape(&format!("{BATCH}|->{OUTPUTS}"))
            .precision(Precision::F64)
            .build();
        op! {
            let hidden = swish({ w1; o = [HIDDEN]; precision = Precision::F64 } * x
                + { b1; precision = Precision::F64 });
            let prediction = { w2; o = [OUTPUTS]; precision = Precision::F64 } * hidden
                + { b2; precision = Precision::F64 };
        }
        let loss = mean(&huber(&prediction, &targets, DELTA));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().expect("init");
        set_from_reference(&mut ctx, &x, PROGRAM, "x");
        set_from_reference(&mut ctx, &targets, PROGRAM, "targets");
        // Every parameter, with the dims (memory order) PyTorch's arrays were laid out in.
        let labels: Vec<String> = graph.params().iter().map(Tensor::label).collect();
        assert_eq!(labels, ["w1", "b1", "w2", "b2"], "the model's parameters");
        for (p, dims) in [
            (&w1, vec![HIDDEN, INPUTS]),
            (&b1, vec![HIDDEN]),
            (&w2, vec![OUTPUTS, HIDDEN]),
            (&b2, vec![OUTPUTS]),
        ] {
            assert_eq!(ctx.dims(p).expect("dims"), dims, "dims of '{}'", p.label());
            assert_eq!(p.precision(), Precision::F64);
            set_from_reference(&mut ctx, p, PROGRAM, &p.label());
        }
        Program {
            graph,
            hidden,
            prediction,
            loss,
            ctx,
        }
    }
}

#[test]
fn custom_op_forward_values_and_gradients_match_pytorch() {
    for backend in backends(Precision::F64) {
        let on = backend.name();
        let mut program = Program::new(backend);
        let outputs = [&program.hidden, &program.prediction, &program.loss];
        let forward = program.ctx.forward(&outputs).expect("forward");
        let backprop = program.ctx.backprop(&program.loss).expect("backprop");
        program.ctx.run(&forward).expect("forward runs");
        program.ctx.run(&backprop).expect("backprop runs");
        let ctx = &program.ctx;
        for (t, name) in [
            (&program.hidden, "hidden"),
            (&program.prediction, "prediction"),
            (&program.loss, "loss"),
        ] {
            let values = ctx.values(t).expect("values");
            check(
                &format!("{on}: {name}"),
                &values,
                PROGRAM,
                name,
                Precision::F64,
            );
        }
        for p in program.graph.params() {
            let label = p.label();
            let grad = ctx.grad(&p).expect("gradient");
            let what = format!("{on}: gradient of '{label}'");
            check(
                &what,
                &grad,
                PROGRAM,
                &format!("grad.{label}"),
                Precision::F64,
            );
        }
    }
}

/// A zero-filled f64 tensor of `w`'s rows, labelled after it.
fn zeros_like(program: &mut Program, w: &Tensor, name: &str) -> Tensor {
    let rows = program.ctx.rows(w).expect("rows");
    let cells = rows.iter().flatten().product();
    let [batch, input, output] = rows.map(|row| {
        row.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    });
    program
        .graph
        .data(&format!("{} {name}", w.label()))
        .shape(&format!("{batch}|{input}->{output}"))
        .precision(Precision::F64)
        .values(vec![0.0; cells])
        .build()
}

/// Runs `step` three times, then checks every parameter against PyTorch's after its three
/// steps (`{stepped}.<label>.npy`).
fn check_steps(on: &str, program: &mut Program, step: &Routine, stepped: &str) {
    for _ in 0..STEPS {
        program.ctx.run(step).expect("step runs");
    }
    for p in program.graph.params() {
        let label = p.label();
        let values = program.ctx.values(&p).expect("values");
        let what = format!("{on}: '{label}' after {STEPS} steps");
        check(
            &what,
            &values,
            PROGRAM,
            &format!("{stepped}.{label}"),
            Precision::F64,
        );
    }
}

/// `nn::optim::Adam` with PyTorch's defaults, which must step f64 parameters in f64 (its
/// moments and learning rate included) to meet f64's tolerance.
#[test]
fn custom_op_adam_steps_match_pytorch() {
    for backend in backends(Precision::F64) {
        let on = format!("{}, nn::optim::Adam", backend.name());
        let mut program = Program::new(backend);
        let params = program.graph.params();
        let mut adam = Adam::new(&program.graph, &params, LR);
        let step = adam
            .compile_step(&mut program.ctx, &program.loss)
            .expect("step");
        check_steps(&on, &mut program, &step, "trained");
    }
}

/// Adam written with `cd!` over f64 moments and step count: the same arithmetic as
/// `nn::optim::Adam`, so that a failure of the one and not the other points at the optimizer,
/// not at the operations or the model.
#[test]
fn custom_op_adam_written_with_cd_matches_pytorch() {
    for backend in backends(Precision::F64) {
        let on = format!("{}, Adam written with cd!", backend.name());
        let mut program = Program::new(backend);
        let params = program.graph.params();
        let steps = program
            .graph
            .data("steps")
            .shape("1")
            .precision(Precision::F64)
            .values(vec![0.0])
            .build();
        let mut updates = cd! { steps =: steps + 1 };
        for w in &params {
            let m = zeros_like(&mut program, w, "first moment");
            let second = zeros_like(&mut program, w, "second moment");
            updates.extend(cd! {
                m =: BETA1 * m + (1 - BETA1) * w.grad;
                second =: BETA2 * second + (1 - BETA2) * (w.grad * w.grad);
                w =- LR * (m / (1 - BETA1 ** steps)) / (sqrt(second / (1 - BETA2 ** steps)) + EPSILON);
            });
        }
        let step = program
            .ctx
            .train_step(&program.loss, &updates)
            .expect("step");
        check_steps(&on, &mut program, &step, "trained");
    }
}

/// Centered RMSprop with momentum and weight decay (`torch.optim.RMSprop(…, centered=True)`),
/// written with `cd!` as a user adds an optimizer: its state declared with no shape and no
/// precision, starting at zero, each tensor taking its parameter's shape and precision (f64) from
/// the assignment that writes it (`cd!`'s pointwise default); the decayed gradient an
/// intermediate of each step.
#[test]
fn custom_op_rmsprop_written_with_cd_over_unshaped_state_matches_pytorch() {
    for backend in backends(Precision::F64) {
        let on = format!("{}, RMSprop written with cd!", backend.name());
        let mut program = Program::new(backend);
        let graph = program.graph.clone();
        let state = |w: &Tensor, name: &str| {
            graph
                .data(&format!("{} {name}", w.label()))
                .init(Init::Constant(0.0))
                .build()
        };
        let mut updates = Vec::new();
        let mut states = Vec::new();
        for w in graph.params() {
            let square_avg = state(&w, "square average");
            let grad_avg = state(&w, "gradient average");
            let velocity = state(&w, "momentum buffer");
            states.extend([&square_avg, &grad_avg, &velocity].map(|s| (w.clone(), s.clone())));
            updates.extend(cd! {
                { decayed } =: w.grad + RMS_DECAY * w;
                square_avg =: RMS_ALPHA * square_avg + (1 - RMS_ALPHA) * decayed * decayed;
                grad_avg =: RMS_ALPHA * grad_avg + (1 - RMS_ALPHA) * decayed;
                velocity =: RMS_MOMENTUM * velocity
                    + decayed / (sqrt(square_avg - grad_avg * grad_avg) + RMS_EPSILON);
                w =- RMS_LR * velocity;
            });
        }
        let step = program
            .ctx
            .train_step(&program.loss, &updates)
            .expect("step");
        for (w, s) in &states {
            let dims = program.ctx.dims(s).expect("dims");
            assert_eq!(
                dims,
                program.ctx.dims(w).expect("dims"),
                "{on}: '{}'",
                s.label()
            );
            assert_eq!(s.precision(), Precision::F64, "{on}: '{}'", s.label());
        }
        check_steps(&on, &mut program, &step, "rmsprop");
    }
}
