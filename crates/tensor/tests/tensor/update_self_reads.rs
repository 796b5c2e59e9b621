//! Updates reading their own target, checked against hand computation on both CPU backends: an
//! update reads the target as it was before the update (NumPy's `t[:] = t.T`, `x = a @ x`)
//! wherever it would otherwise read cells it has already written or reset: through another
//! index map (a transposition, a product, a slice of the target), a reduction into a cell it
//! reads, a sum over an axis of the target stored back into it. A pointwise update reading only
//! the cell it writes (an optimizer's) takes no copy. Constants an update reads are filled, in a
//! routine of updates, a training step and a composed routine alike.
use crate::cpu::{backends, data};
use rcannl_backends::Interpreter;
use rcannl_ir::{Binop, Precision};
use rcannl_tensor::{Axes, Context, Formula, Graph, Init, OpLogic, Tensor, Update};

fn spec(spec: &str) -> OpLogic {
    OpLogic::Spec(spec.to_owned())
}

/// The values `update` leaves in its target after each of `runs.len()` runs, from `values`
/// under `shape`, on every backend: `runs[k]` after run `k`.
fn check(
    shape: &str,
    values: &[f64],
    update: impl Fn(&Graph, &Tensor) -> Vec<Update>,
    runs: &[&[f64]],
) {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let t = data(&graph, "t", shape, values);
        let updates = update(&graph, &t);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&updates).unwrap();
        for (run, want) in runs.iter().enumerate() {
            ctx.run(&routine).unwrap();
            assert_eq!(ctx.values(&t).unwrap(), *want, "{name}, run {run}");
        }
    }
}

#[test]
fn a_transposition_of_the_target_reads_it_as_it_was() {
    // t = [[1, 2], [3, 4]]: t := tᵀ = [[1, 3], [2, 4]], and back.
    check(
        "|2->2",
        &[1.0, 2.0, 3.0, 4.0],
        |_, t| vec![Update::set(t, Formula::value(t)).with_logic(OpLogic::Transpose)],
        &[&[1.0, 3.0, 2.0, 4.0], &[1.0, 2.0, 3.0, 4.0]],
    );
    // t += tᵀ = [[2, 5], [5, 8]], then [[4, 10], [10, 16]].
    check(
        "|2->2",
        &[1.0, 2.0, 3.0, 4.0],
        |_, t| vec![Update::add(t, Formula::value(t)).with_logic(OpLogic::Transpose)],
        &[&[2.0, 5.0, 5.0, 8.0], &[4.0, 10.0, 10.0, 16.0]],
    );
    // Two in one routine, each reading what the one before left: t := tᵀ = [[1, 3], [2, 4]],
    // then t += tᵀ = [[2, 5], [5, 8]].
    check(
        "|2->2",
        &[1.0, 2.0, 3.0, 4.0],
        |_, t| {
            vec![
                Update::set(t, Formula::value(t)).with_logic(OpLogic::Transpose),
                Update::add(t, Formula::value(t)).with_logic(OpLogic::Transpose),
            ]
        },
        &[&[2.0, 5.0, 5.0, 8.0]],
    );
}

#[test]
fn a_product_with_the_target_reads_it_as_it_was() {
    // x =:+ a · x from x = [1, 1], a = [[1, 2], [3, 4]]: [3, 7], then [17, 37].
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let a = data(&graph, "a", "|2->2", &[1.0, 2.0, 3.0, 4.0]);
        let x = data(&graph, "x", "2", &[1.0, 1.0]);
        let product = Update::reduce(&x, Binop::Add, Formula::value(&a) * Formula::value(&x))
            .with_logic(OpLogic::Compose);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&[product]).unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&x).unwrap(), [3.0, 7.0], "{name}");
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&x).unwrap(), [17.0, 37.0], "{name}");
    }
}

#[test]
fn a_slice_of_the_target_added_into_it_is_the_slice_as_it_was() {
    // t = [[1, 2], [3, 4]]; t[i, j] += t[i, 0]: [[2, 3], [6, 7]].
    check(
        "2,2",
        &[1.0, 2.0, 3.0, 4.0],
        |_, t| vec![Update::add(t, Formula::value(t)).with_logic(spec("i0=>ij"))],
        &[&[2.0, 3.0, 6.0, 7.0]],
    );
    // t[i, j] := 2 · t[0, j]: row 0 is written before row 1 reads it, [[2, 4], [2, 4]].
    check(
        "2,2",
        &[1.0, 2.0, 3.0, 4.0],
        |_, t| vec![Update::set(t, 2.0 * Formula::value(t)).with_logic(spec("0j=>ij"))],
        &[&[2.0, 4.0, 2.0, 4.0]],
    );
}

#[test]
fn a_reduction_of_the_target_into_one_cell_reads_it_as_it_was() {
    // t =:+ Σᵢ t[i] into t[0]: the reset clears every cell, then t[0] takes the old sum.
    check(
        "3",
        &[1.0, 2.0, 3.0],
        |_, t| vec![Update::reduce(t, Binop::Add, Formula::value(t)).with_logic(spec("i=>0"))],
        &[&[6.0, 0.0, 0.0], &[6.0, 0.0, 0.0]],
    );
    // A one-cell target without a logic: n += Σₖ n · g[k] = 2 + 2 · 6 = 14, then 14 + 14 · 6.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let n = data(&graph, "n", "1", &[2.0]);
        let g = data(&graph, "g", "3", &[1.0, 2.0, 3.0]);
        let m = data(&graph, "m", "1", &[2.0]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::add(&n, Formula::value(&n) * Formula::value(&g)),
                // Reset first: m =:+ Σₖ m · g[k] = 2 · 6.
                Update::reduce(&m, Binop::Add, Formula::value(&m) * Formula::value(&g)),
            ])
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&n).unwrap(), [14.0], "{name}");
        assert_eq!(ctx.values(&m).unwrap(), [12.0], "{name}");
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&n).unwrap(), [14.0 + 14.0 * 6.0], "{name}");
        assert_eq!(ctx.values(&m).unwrap(), [72.0], "{name}");
    }
}

#[test]
fn a_sum_over_an_axis_of_the_target_stored_back_into_it_is_the_old_sum() {
    // t = [[1, 2, 3], [4, 5, 6]]; t =:+ Σⱼ t[i, j] into t[i, 0]: [[6, 0, 0], [15, 0, 0]].
    check(
        "2,3",
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        |_, t| vec![Update::reduce(t, Binop::Add, Formula::value(t)).with_logic(spec("ij=>i0"))],
        &[&[6.0, 0.0, 0.0, 15.0, 0.0, 0.0]],
    );
    // t[i, j] += Σₖ t[i, k]: every cell gains its row's sum, [[7, 8, 9], [19, 20, 21]].
    check(
        "2,3",
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        |_, t| vec![Update::add(t, Formula::value(t)).with_logic(spec("ik=>ij"))],
        &[&[7.0, 8.0, 9.0, 19.0, 20.0, 21.0]],
    );
    // The row's maximum, from scratch: t =:max t[i, k] broadcast over j.
    check(
        "2,3",
        &[1.0, 5.0, 3.0, -4.0, -6.0, -5.0],
        |_, t| vec![Update::reduce(t, Binop::Max, Formula::value(t)).with_logic(spec("ik=>ij"))],
        &[&[5.0, 5.0, 5.0, -4.0, -4.0, -4.0]],
    );
}

#[test]
fn an_update_reading_only_the_cell_it_writes_takes_no_copy() {
    // An optimizer's updates: w =- 0.5 · g, m =: 0.5 · m + 0.25 · g, w =- m · w (pointwise
    // over the target's own cells, with a broadcast one-cell rate).
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = data(&graph, "w", "2,2", &[1.0, 2.0, 3.0, 4.0]);
        let m = data(&graph, "m", "2,2", &[4.0, 4.0, 8.0, 8.0]);
        let g = data(&graph, "g", "2,2", &[2.0, 4.0, 6.0, 8.0]);
        let rate = data(&graph, "rate", "1", &[0.5]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::subtract(&w, Formula::value(&rate) * Formula::value(&g)),
                Update::set(&m, 0.5 * Formula::value(&m) + 0.25 * Formula::value(&g)),
                Update::subtract(&w, Formula::value(&m) * Formula::value(&w)),
            ])
            .unwrap();
        // One assignment an update, and no node but the tensors' own.
        assert_eq!(
            routine.code().lines().count(),
            3,
            "{name}: {}",
            routine.code()
        );
        let described = routine.describe();
        assert!(
            !described.contains("before the update"),
            "{name}: {described}"
        );
        let nodes = described.lines().filter(|l| l.starts_with("  n")).count();
        assert_eq!(nodes, 4, "{name}: {described}");
        ctx.run(&routine).unwrap();
        // w = [0, 0, 0, 0] after the first; m = [2.5, 3, 5.5, 6].
        assert_eq!(ctx.values(&m).unwrap(), [2.5, 3.0, 5.5, 6.0], "{name}");
        assert_eq!(ctx.values(&w).unwrap(), [0.0; 4], "{name}");
    }
}

#[test]
fn an_update_read_through_another_map_copies_its_target_once_before_it() {
    let graph = Graph::new();
    let t = data(&graph, "t", "|2->2", &[1.0, 2.0, 3.0, 4.0]);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let routine = ctx
        .update(&[Update::set(&t, Formula::value(&t)).with_logic(OpLogic::Transpose)])
        .unwrap();
    assert_eq!(
        routine.code(),
        "t before the update =: t;\nt =: t before the update ~logic:\"T\";\n"
    );
}

#[test]
fn a_training_step_reads_the_target_as_it_was_and_keeps_it_when_the_loss_is_not_finite() {
    // loss = Σ (w · x); the step adds wᵀ into w: [[1, 2], [3, 4]] becomes [[2, 5], [5, 8]].
    for (x0, want) in [
        ([1.0, 1.0], [2.0, 5.0, 5.0, 8.0]),
        ([f64::NAN, 1.0], [1.0, 2.0, 3.0, 4.0]),
    ] {
        for backend in backends() {
            let name = format!("{}, x = {x0:?}", backend.name());
            let graph = Graph::new();
            let w = graph
                .param("w")
                .shape("|2->2")
                .precision(Precision::F64)
                .init(Init::Values(vec![1.0, 2.0, 3.0, 4.0]))
                .build();
            let x = data(&graph, "x", "2", &x0);
            let loss = (&w * &x).sum_over(Axes::all());
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let step = ctx
                .train_step(
                    &loss,
                    &[Update::add(&w, Formula::value(&w)).with_logic(OpLogic::Transpose)],
                )
                .unwrap();
            ctx.run(&step).unwrap();
            assert_eq!(ctx.values(&w).unwrap(), want, "{name}");
        }
    }
}

#[test]
fn a_constant_an_update_reads_is_filled() {
    // w -= 0.5 · w, with the rate a constant tensor: in an update routine, a training step and
    // a composed routine.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("2")
            .precision(Precision::F64)
            .init(Init::Values(vec![2.0, -4.0]))
            .build();
        let rate = graph.number(0.5);
        let loss = w.sum_over(Axes::all());
        let decay = Update::subtract(&w, Formula::value(&rate) * Formula::value(&w));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let update = ctx.update(std::slice::from_ref(&decay)).unwrap();
        ctx.run(&update).unwrap();
        assert_eq!(ctx.values(&w).unwrap(), [1.0, -2.0], "{name}: update");
        let step = ctx.train_step(&loss, std::slice::from_ref(&decay)).unwrap();
        ctx.run(&step).unwrap();
        assert_eq!(ctx.values(&w).unwrap(), [0.5, -1.0], "{name}: train_step");
        let composed = ctx.compose(&decay).unwrap();
        ctx.run(&composed).unwrap();
        assert_eq!(ctx.values(&w).unwrap(), [0.25, -0.5], "{name}: compose");
    }
}
