//! The training loop: losses per epoch, and a clear stop when the loss is not a number.

use rcannl_nn::optim::{Adam, Sgd};
use rcannl_nn::train::{Plan, fit, fit_step};
use rcannl_tensor::{Context, Graph, Init, Tensor};

#[test]
fn a_loss_that_stops_being_a_number_stops_training() {
    let graph = Graph::new();
    let p = graph
        .param("p")
        .shape("1")
        .init(Init::Values(vec![0.5]))
        .build();
    // log(p) with a step that drives p below zero: the second step's loss is NaN.
    let loss = p.log();
    let mut sgd = Sgd::new(&graph, std::slice::from_ref(&p), 1.0, 0.0);
    let batch = graph.static_index();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = sgd.compile(&mut ctx).unwrap();
    let plan = Plan {
        epochs: 3,
        batches: 2,
        batch_size: 1,
        progress: false,
    };
    let error = fit(
        &mut ctx,
        &backprop,
        &step,
        &loss,
        batch,
        plan,
        |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(
        error
            .message
            .contains("training stopped: the loss is NaN at epoch 1, batch 1"),
        "{error}"
    );
}

#[test]
fn optimizers_descend_a_quadratic() {
    for adam in [false, true] {
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("3")
            .init(Init::Values(vec![3.0, -2.0, 1.0]))
            .build();
        let loss = rcannl_nn::loss::sum(&w.pmul(&w));
        let batch = graph.static_index();
        let mut ctx = Context::new(&graph);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        let params = std::slice::from_ref(&w);
        let step = if adam {
            Adam::new(&graph, params, 0.1).compile(&mut ctx).unwrap()
        } else {
            Sgd::new(&graph, params, 0.05, 0.9)
                .nesterov()
                .weight_decay(0.01)
                .compile(&mut ctx)
                .unwrap()
        };
        let plan = Plan {
            epochs: 100,
            batches: 1,
            batch_size: 1,
            progress: false,
        };
        let history = fit(
            &mut ctx,
            &backprop,
            &step,
            &loss,
            batch,
            plan,
            |_, _| Ok(()),
        )
        .unwrap();
        assert_eq!(history.losses.len(), 100);
        let last = history.losses[99];
        assert!(
            last < 0.05 * history.losses[0],
            "adam {adam}: {:?}",
            &history.losses[..5]
        );
    }
}

#[test]
fn a_parameter_that_stops_being_a_number_stops_training_while_the_loss_is_finite() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(Init::Values(vec![1.0, -1.0]))
        .build();
    // A parameter the loss does not read: whatever it holds, the loss stays finite.
    let frozen = graph
        .param("frozen")
        .shape("3")
        .init(Init::Values(vec![0.5; 3]))
        .build();
    let loss = rcannl_nn::loss::sum(&w.pmul(&w));
    let batch = graph.static_index();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = Sgd::new(&graph, std::slice::from_ref(&w), 0.1, 0.0)
        .compile(&mut ctx)
        .unwrap();
    let plan = Plan {
        epochs: 4,
        batches: 3,
        batch_size: 1,
        progress: false,
    };
    // Before the second batch of the second epoch (step 4), one cell becomes NaN.
    let error = fit(
        &mut ctx,
        &backprop,
        &step,
        &loss,
        batch,
        plan,
        |ctx, step| {
            if step == 4 {
                ctx.set_values(&frozen, &[0.5, f64::NAN, 0.5])?;
            }
            Ok(())
        },
    )
    .unwrap_err();
    assert!(
        error.message.contains(
            "training stopped: parameter 'frozen' holds NaN (cell 1) after epoch 2, batch 2"
        ),
        "{error}"
    );
}

#[test]
fn a_diverging_step_stops_training_even_where_the_loss_ignores_what_diverged() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(Init::Values(vec![1.0, -1.0]))
        .build();
    let limit = graph.data("limit").shape("2").values(vec![1e6; 2]).build();
    let zero = graph.data("zero").shape("2").values(vec![0.0; 2]).build();
    // w² where it is below 10⁶, else 0: a cell that overflows (or becomes NaN) counts 0, so the
    // loss stays finite while the cell does not.
    let square = w.pmul(&w);
    let loss = rcannl_nn::loss::sum(&Tensor::where_(&square.lt(&limit), &square, &zero));
    let batch = graph.static_index();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    // The first step takes w to -∞ (2·3·10³⁸ overflows f32); the loss is 0 from then on.
    let step = Sgd::new(&graph, std::slice::from_ref(&w), 3e38, 0.0)
        .compile(&mut ctx)
        .unwrap();
    let plan = Plan {
        epochs: 3,
        batches: 2,
        batch_size: 1,
        progress: false,
    };
    let error = fit(
        &mut ctx,
        &backprop,
        &step,
        &loss,
        batch,
        plan,
        |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(
        error
            .message
            .contains("training stopped: parameter 'w' holds"),
        "{error}"
    );
    assert!(error.message.contains("after epoch 1, batch 1"), "{error}");
}

#[test]
fn a_parameter_nothing_has_set_does_not_stop_training() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(Init::Values(vec![1.0, -1.0]))
        .build();
    let loss = rcannl_nn::loss::sum(&w.pmul(&w));
    let batch = graph.static_index();
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = Sgd::new(&graph, std::slice::from_ref(&w), 0.1, 0.0)
        .compile(&mut ctx)
        .unwrap();
    // Made after init_params, and read by neither routine: it holds no values.
    let later = graph.param("later").shape("3").build();
    let plan = Plan {
        epochs: 2,
        batches: 1,
        batch_size: 1,
        progress: false,
    };
    let history = fit(
        &mut ctx,
        &backprop,
        &step,
        &loss,
        batch,
        plan,
        |_, _| Ok(()),
    )
    .unwrap();
    assert_eq!(history.losses.len(), 2);
    assert!(!ctx.holds_values(&later));
}

#[test]
fn a_step_compiled_as_one_routine_trains_as_backprop_then_update() {
    // A two-layer MLP on 8 points, 6 batches of 2 picked by the static index, each optimizer
    // both ways; both ways run the same operations on the interpreter.
    let run = |adam: bool, fused: bool| {
        let graph = Graph::new();
        let xs = graph
            .data("xs")
            .shape("4,2|->2")
            .values((0..16).map(|i| f64::from(i % 5) * 0.3 - 0.6).collect())
            .build();
        let ys = graph
            .data("ys")
            .shape("4,2|->1")
            .values((0..8).map(|i| f64::from(i % 2) * 2.0 - 1.0).collect())
            .build();
        let batch = graph.static_index();
        let model = rcannl_nn::blocks::Mlp::new(&graph, "mlp", &[4, 1]);
        let loss = rcannl_nn::loss::hinge(&model.apply(&xs.slice(&batch)), &ys.slice(&batch));
        let mut ctx = Context::with_backend(&graph, Box::new(rcannl_backends::Interpreter));
        ctx.set_seed(3);
        ctx.init_params().unwrap();
        let params = model.params();
        let plan = Plan {
            epochs: 3,
            batches: 4,
            batch_size: 2,
            progress: false,
        };
        let history = if fused {
            let step = if adam {
                Adam::new(&graph, &params, 0.05).compile_step(&mut ctx, &loss)
            } else {
                Sgd::new(&graph, &params, 0.1, 0.9).compile_step(&mut ctx, &loss)
            }
            .unwrap();
            fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(())).unwrap()
        } else {
            let backprop = ctx.backprop(&loss).unwrap();
            let step = if adam {
                Adam::new(&graph, &params, 0.05).compile(&mut ctx)
            } else {
                Sgd::new(&graph, &params, 0.1, 0.9).compile(&mut ctx)
            }
            .unwrap();
            fit(
                &mut ctx,
                &backprop,
                &step,
                &loss,
                batch,
                plan,
                |_, _| Ok(()),
            )
            .unwrap()
        };
        let trained: Vec<Vec<f64>> = params.iter().map(|p| ctx.values(p).unwrap()).collect();
        (history.losses, trained)
    };
    for adam in [false, true] {
        let (losses, trained) = run(adam, false);
        let (fused_losses, fused_trained) = run(adam, true);
        assert_eq!(fused_losses, losses, "adam {adam}");
        assert_eq!(fused_trained, trained, "adam {adam}");
        assert!(losses[2] < losses[0], "adam {adam}: {losses:?}");
    }
}

/// An MLP trained by one fused Adam step per batch over `batches` batches of 2 points, the third
/// batch holding a point whose loss is NaN: the parameters (and Adam's moments, which the next
/// steps read) where training stopped, or after the last batch.
fn trained_until(batches: usize) -> (Result<Vec<f64>, String>, Vec<Vec<f64>>) {
    let graph = Graph::new();
    let mut xs: Vec<f64> = (0..16).map(|i| f64::from(i % 5) * 0.3 - 0.6).collect();
    xs[9] = f64::NAN;
    let xs = graph.data("xs").shape("4,2|->2").values(xs).build();
    let ys = graph
        .data("ys")
        .shape("4,2|->1")
        .values((0..8).map(|i| f64::from(i % 2) * 2.0 - 1.0).collect())
        .build();
    let batch = graph.static_index();
    let model = rcannl_nn::blocks::Mlp::new(&graph, "mlp", &[4, 1]);
    let loss = rcannl_nn::loss::mse(&model.apply(&xs.slice(&batch)), &ys.slice(&batch));
    let mut ctx = Context::new(&graph);
    ctx.set_seed(3);
    ctx.init_params().unwrap();
    let params = model.params();
    let step = Adam::new(&graph, &params, 0.05)
        .compile_step(&mut ctx, &loss)
        .unwrap();
    let plan = Plan {
        epochs: 1,
        batches,
        batch_size: 2,
        progress: false,
    };
    let history = fit_step(&mut ctx, &step, &loss, batch, plan, |_, _| Ok(()))
        .map(|h| h.losses)
        .map_err(|e| e.message);
    let mut state: Vec<Vec<f64>> = params.iter().map(|p| ctx.values(p).unwrap()).collect();
    // One more step on the first batch shows Adam's moments were kept too.
    ctx.run_with(&step, &[(batch, 0)]).unwrap();
    state.extend(params.iter().map(|p| ctx.values(p).unwrap()));
    (history, state)
}

#[test]
fn training_stopped_on_a_non_finite_loss_keeps_the_last_good_step() {
    let (stopped, state) = trained_until(3);
    let message = stopped.unwrap_err();
    assert!(
        message.contains("the loss is NaN at epoch 1, batch 2")
            && message.contains("the model is as the last good step left it"),
        "{message}"
    );
    let (finished, good) = trained_until(2);
    assert_eq!(finished.unwrap().len(), 1);
    assert_eq!(state, good, "parameters and moments after the refused step");
    assert!(state.iter().flatten().all(|v| v.is_finite()));
}

#[test]
fn a_plan_without_batches_is_an_error() {
    let (result, _) = trained_until(0);
    let message = result.unwrap_err();
    assert!(message.contains("no batches"), "{message}");
}
