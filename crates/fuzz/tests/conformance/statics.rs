//! Static indices on every backend: one without a range, embedded as a number (`!@step`), gives
//! a rate falling with the step, read when each run starts.

use rcannl_tensor::{Context, Formula, Graph, Update};

use crate::target::Target;

fn an_unranged_step_embedded_drives_a_falling_rate(target: &Target) {
    let graph = Graph::new();
    graph.set_default_precision(target.float());
    let (start, goal) = ([2.0, -1.0], [0.5, 0.25]);
    let w = graph.param("w").shape("2").values(start.to_vec()).build();
    let target_values = graph.data("goal").shape("2").values(goal.to_vec()).build();
    let step = graph.static_index();
    let rate = 0.5 / &(1.0 + &graph.embed_static("step", &step));
    let error = &w - &target_values;
    let loss = error.pmul(&error);
    let mut ctx = Context::with_backend(&graph, target.backend());
    ctx.init_params().unwrap();
    let train = ctx
        .train_step(
            &loss,
            &[Update::subtract(
                &w,
                Formula::value(&rate) * Formula::grad(&w),
            )],
        )
        .unwrap();
    let mut want = start;
    for k in [0i64, 1, 2, 30] {
        ctx.run_with(&train, &[(step, k)]).unwrap();
        let rate_k = 0.5 / (1.0 + k as f64);
        for (w, g) in want.iter_mut().zip(goal) {
            *w -= rate_k * 2.0 * (*w - g);
        }
        let got = ctx.values(&w).unwrap();
        for (got, want) in got.iter().zip(&want) {
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{}: step {k}: {got} vs {want}",
                target.name()
            );
        }
    }
}
conformance!(an_unranged_step_embedded_drives_a_falling_rate);
