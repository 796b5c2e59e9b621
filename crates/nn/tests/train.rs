//! The training loop: losses per epoch, and a clear stop when the loss is not a number.

use rcannl_nn::optim::{Adam, Sgd};
use rcannl_nn::train::{Plan, fit};
use rcannl_tensor::{Context, Graph, Init};

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
