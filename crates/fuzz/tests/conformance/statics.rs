//! Static indices on every backend: one without a range, embedded as a number (`!@step`), gives
//! a rate falling with the step, read when each run starts; batches sliced by one feed matrix
//! products that read the data set where it lies.

use rcannl_backends::{Backend, Interpreter};
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

/// A batch sliced from a data set by a static index feeds two matrix products (the layer's and
/// its weight gradient's) and the step gives the interpreter's values batch after batch; the
/// compiled step reads the data set where it lies, with no copy of the batch (the slice is
/// virtual). A slice the routine hands back is still computed.
fn batches_sliced_from_a_data_set_feed_products_in_place(target: &Target) {
    let train = |backend: Box<dyn Backend>| {
        let graph = Graph::new();
        graph.set_default_precision(target.float());
        let cells: Vec<f64> = (0..4 * 8 * 16)
            .map(|i| ((i * 7 % 13) as f64 - 6.0) / 8.0)
            .collect();
        let xs = graph.data("xs").shape("4|8->16").values(cells).build();
        let batch = graph.static_index();
        let x = xs.slice(&batch);
        let start: Vec<f64> = (0..32 * 16)
            .map(|i| ((i % 5) as f64 - 2.0) / 16.0)
            .collect();
        let w = graph.param("w").shape("|16->32").values(start).build();
        let y = &w * &x;
        let loss = rcannl_nn::loss::sum(&y.pmul(&y));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx
            .train_step(&loss, &[Update::subtract(&w, 1e-3 * Formula::grad(&w))])
            .unwrap();
        let mut seen = Vec::new();
        for k in [2i64, 0, 3, 1] {
            ctx.run_with(&step, &[(batch, k)]).unwrap();
            seen.extend(ctx.values(&loss).unwrap());
            seen.extend(ctx.values(&w).unwrap());
        }
        let slice_line = step
            .describe()
            .lines()
            .find(|line| line.contains(&format!("'{}'", x.label())))
            .map(str::to_owned);
        let handed_back = ctx.forward(&[&x]).unwrap();
        ctx.run_with(&handed_back, &[(batch, 3)]).unwrap();
        (
            seen,
            slice_line,
            ctx.values(&x).unwrap(),
            ctx.values(&xs).unwrap(),
        )
    };
    let (got, slice_line, row, cells) = train(target.backend());
    let (want, ..) = train(Box::new(Interpreter));
    for (g, w) in got.iter().zip(&want) {
        assert!(
            rcannl_fuzz::close(*g, *w, 1e-4),
            "{g} against {w} on {}",
            target.name()
        );
    }
    assert_eq!(row, cells[3 * 128..4 * 128], "{}", target.name());
    let slice_line = slice_line.expect("the slice among the step's nodes");
    assert!(slice_line.ends_with("virtual"), "{slice_line}");
}
conformance!(batches_sliced_from_a_data_set_feed_products_in_place: cc, gpu);
