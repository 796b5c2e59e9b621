//! Routines in which a tensor is written and then read, checked against hand computation on both
//! CPU backends: the optimizer may fuse, inline and share what it likes, but never across a
//! dependency. A forward writing an intermediate that a later loop of the same routine reads
//! (OCANNL's `test_nofuse_dependency`), two outputs sharing one reduction
//! (`test_cross_stmt_cse`, `test_cse`), updates reading a tensor before and after another update
//! of the same routine changes it in place, and slices read with their parent, at the position of
//! each run, and before their parent changes (the reading half of OCANNL's `test_slice_alias`).
//! Each intermediate is tried under every memory mode; a virtual one that would be recomputed
//! after what it reads has changed is refused, naming it.
use crate::cpu::{backends, data};
use rcannl_ir::{Binop, MemoryMode, Precision};
use rcannl_tensor::{Axes, Context, Formula, Graph, Init, Tensor, Update};

/// The memory modes a computed intermediate is tried under: the optimizer's choice, and each
/// one a user can ask for.
const MODES: [Option<MemoryMode>; 4] = [
    None,
    Some(MemoryMode::Virtual),
    Some(MemoryMode::Local),
    Some(MemoryMode::Materialized),
];

#[test]
fn a_loop_reading_what_an_earlier_loop_wrote_runs_after_it() {
    // a = b = [0, 1, 2, 3]; e = a + b = [0, 2, 4, 6]; g = a + e = [0, 3, 6, 9].
    for mode in MODES {
        for backend in backends() {
            let what = format!("{} {mode:?}", backend.name());
            let graph = Graph::new();
            let a = graph.range_of_shape("a").output([4]).build();
            let b = graph.range_of_shape("b").output([4]).build();
            let e = &a + &b;
            let g = &a + &e;
            if let Some(mode) = mode {
                e.set_memory_mode(mode);
            }
            let mut ctx = Context::with_backend(&graph, backend);
            let forward = ctx.forward(&[&g]).unwrap();
            ctx.run(&forward).unwrap();
            assert_eq!(ctx.values(&g).unwrap(), [0.0, 3.0, 6.0, 9.0], "{what}");
            if mode == Some(MemoryMode::Materialized) {
                assert_eq!(ctx.values(&e).unwrap(), [0.0, 2.0, 4.0, 6.0], "{what}");
            }
        }
    }
    // Both kept by one forward, in either order.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let a = graph.range_of_shape("a").output([4]).build();
        let b = graph.range_of_shape("b").output([4]).build();
        let e = &a + &b;
        let g = &a + &e;
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&g, &e]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&e).unwrap(), [0.0, 2.0, 4.0, 6.0], "{name}");
        assert_eq!(ctx.values(&g).unwrap(), [0.0, 3.0, 6.0, 9.0], "{name}");
    }
}

/// `a` of `|4->3` and `b` of `4`, counting their cells (`a[o][i] = 4o + i`, `b[i] = i`), and
/// `c = a * b`: `c[o] = Σᵢ (4o + i)·i = 24o + 14`.
fn shared_reduction(graph: &Graph) -> Tensor {
    let a = graph.range_of_shape("a").shape("|4->3").build();
    let b = graph.range_of_shape("b").output([4]).build();
    &a * &b
}

#[test]
fn two_outputs_sharing_one_reduction_each_get_it() {
    for mode in MODES {
        for backend in backends() {
            let what = format!("{} {mode:?}", backend.name());
            let graph = Graph::new();
            let c = shared_reduction(&graph);
            if let Some(mode) = mode {
                c.set_memory_mode(mode);
            }
            let e = &c + 1.0;
            let f = &c - 1.0;
            // The same reduction read twice in one expression.
            let d = c.pmul(&c);
            let mut ctx = Context::with_backend(&graph, backend);
            let forward = ctx.forward(&[&e, &f, &d]).unwrap();
            ctx.run(&forward).unwrap();
            assert_eq!(ctx.values(&e).unwrap(), [15.0, 39.0, 63.0], "{what}");
            assert_eq!(ctx.values(&f).unwrap(), [13.0, 37.0, 61.0], "{what}");
            assert_eq!(ctx.values(&d).unwrap(), [196.0, 1444.0, 3844.0], "{what}");
        }
    }
}

#[test]
fn updates_read_a_tensor_before_and_after_an_update_changes_it() {
    let x0 = [1.0, 2.0, 3.0, 4.0];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = data(&graph, "x", "4", &x0);
        let before = data(&graph, "before", "4", &[0.0; 4]);
        let after = data(&graph, "after", "4", &[0.0; 4]);
        let total_before = data(&graph, "total before", "1", &[0.0]);
        let total_after = data(&graph, "total after", "1", &[0.0]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::set(&before, 2.0 * Formula::value(&x)),
                Update::reduce(&total_before, Binop::Add, Formula::value(&x)),
                Update::add(&x, Formula::value(&before) + 10.0),
                Update::set(&after, 2.0 * Formula::value(&x)),
                Update::reduce(&total_after, Binop::Add, Formula::value(&x)),
            ])
            .unwrap();
        let mut x_now = x0.to_vec();
        for run in 0..2 {
            let what = format!("{name}, run {run}");
            ctx.run(&routine).unwrap();
            let doubled: Vec<f64> = x_now.iter().map(|x| 2.0 * x).collect();
            let next: Vec<f64> = x_now.iter().map(|x| 3.0 * x + 10.0).collect();
            assert_eq!(ctx.values(&before).unwrap(), doubled, "{what}");
            assert_eq!(
                ctx.values(&total_before).unwrap(),
                [x_now.iter().sum::<f64>()],
                "{what}"
            );
            assert_eq!(ctx.values(&x).unwrap(), next, "{what}");
            let twice_next: Vec<f64> = next.iter().map(|x| 2.0 * x).collect();
            assert_eq!(ctx.values(&after).unwrap(), twice_next, "{what}");
            assert_eq!(
                ctx.values(&total_after).unwrap(),
                [next.iter().sum::<f64>()],
                "{what}"
            );
            x_now = next;
        }
    }
}

#[test]
fn updates_that_swap_their_reads_and_writes_run_in_order() {
    // y := x + 1; x := 2y; y := x + y, from x = [1, 2], y = [0, 0]:
    // y = [2, 3], then x = [4, 6], then y = [6, 9].
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = data(&graph, "x", "2", &[1.0, 2.0]);
        let y = data(&graph, "y", "2", &[0.0, 0.0]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::set(&y, Formula::value(&x) + 1.0),
                Update::set(&x, 2.0 * Formula::value(&y)),
                Update::set(&y, Formula::value(&x) + Formula::value(&y)),
            ])
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&x).unwrap(), [4.0, 6.0], "{name}");
        assert_eq!(ctx.values(&y).unwrap(), [6.0, 9.0], "{name}");
    }
}

#[test]
fn a_sum_taken_then_its_tensor_scaled_by_it_then_summed_again() {
    // s := Σx = 10; x := x / s; t := Σx = 1 (as a gradient norm, then the gradients it scales).
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = data(&graph, "x", "2,2", &[1.0, 2.0, 3.0, 4.0]);
        let s = data(&graph, "s", "1", &[0.0]);
        let t = data(&graph, "t", "1", &[0.0]);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx
            .update(&[
                Update::reduce(&s, Binop::Add, Formula::value(&x)),
                Update::set(&x, Formula::value(&x) / Formula::value(&s)),
                Update::reduce(&t, Binop::Add, Formula::value(&x)),
            ])
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(ctx.values(&s).unwrap(), [10.0], "{name}");
        assert_eq!(ctx.values(&x).unwrap(), [0.1, 0.2, 0.3, 0.4], "{name}");
        assert_eq!(ctx.values(&t).unwrap(), [1.0], "{name}");
    }
}

#[test]
fn a_computed_tensor_an_update_reads_holds_what_it_read_before_the_updates() {
    // e = 3x is computed before the updates, from x as it was: x += 10 does not reach it.
    let x0 = [1.0, -2.0, 0.5];
    for mode in MODES {
        for backend in backends() {
            let what = format!("{} {mode:?}", backend.name());
            let graph = Graph::new();
            let x = data(&graph, "x", "3", &x0);
            let out = data(&graph, "out", "3", &[0.0; 3]);
            let e = 3.0 * &x;
            if let Some(mode) = mode {
                e.set_memory_mode(mode);
            }
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.update(&[
                Update::add(&x, Formula::value(&x) * 0.0 + 10.0),
                Update::set(&out, Formula::value(&e) + Formula::value(&x)),
            ]);
            if mode == Some(MemoryMode::Virtual) {
                // Recomputed where the second update reads it, e would see x moved: refused.
                let message = routine.map(|_| ()).unwrap_err().message;
                assert!(message.contains(&format!("'{}'", e.label())), "{message}");
                assert!(message.contains("cannot be inlined"), "{message}");
                continue;
            }
            let routine = routine.unwrap();
            ctx.run(&routine).unwrap();
            let want: Vec<f64> = x0.iter().map(|x| 3.0 * x + (x + 10.0)).collect();
            assert_eq!(ctx.values(&out).unwrap(), want, "{what}");
            let moved: Vec<f64> = x0.iter().map(|x| x + 10.0).collect();
            assert_eq!(ctx.values(&x).unwrap(), moved, "{what}");
        }
    }
}

const ROWS: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

#[test]
fn a_slice_reads_its_parent_at_the_position_of_each_run() {
    for mode in MODES {
        for backend in backends() {
            let what = format!("{} {mode:?}", backend.name());
            let graph = Graph::new();
            let images = data(&graph, "images", "2|->3", &ROWS);
            let at = graph.static_index();
            let row = images.slice(&at);
            if let Some(mode) = mode {
                row.set_memory_mode(mode);
            }
            let out = 2.0 * &row;
            // The slice with its parent in one expression: the row added to every row.
            let both = &images + &row;
            let mut ctx = Context::with_backend(&graph, backend);
            let forward = ctx.forward(&[&out, &both]).unwrap();
            ctx.run_with(&forward, &[(at, 0)]).unwrap();
            assert_eq!(ctx.values(&out).unwrap(), [2.0, 4.0, 6.0], "{what}");
            assert_eq!(
                ctx.values(&both).unwrap(),
                [2.0, 4.0, 6.0, 5.0, 7.0, 9.0],
                "{what}"
            );
            ctx.run_with(&forward, &[(at, 1)]).unwrap();
            assert_eq!(ctx.values(&out).unwrap(), [8.0, 10.0, 12.0], "{what}");
            assert_eq!(
                ctx.values(&both).unwrap(),
                [5.0, 7.0, 9.0, 8.0, 10.0, 12.0],
                "{what}"
            );
        }
    }
}

#[test]
fn a_slice_an_update_reads_is_taken_before_its_parent_changes() {
    let moved: Vec<f64> = ROWS.iter().map(|x| x + 100.0).collect();
    for mode in MODES {
        for backend in backends() {
            let what = format!("{} {mode:?}", backend.name());
            let graph = Graph::new();
            let images = data(&graph, "images", "2|->3", &ROWS);
            let at = graph.static_index();
            let row = images.slice(&at);
            if let Some(mode) = mode {
                row.set_memory_mode(mode);
            }
            let copy = data(&graph, "copy", "3", &[0.0; 3]);
            let fresh = data(&graph, "fresh", "2|->3", &[0.0; 6]);
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.update(&[
                Update::set(&images, 100.0 + Formula::value(&images)),
                Update::set(&copy, Formula::value(&row)),
                Update::set(&fresh, Formula::value(&images)),
            ]);
            if mode == Some(MemoryMode::Virtual) {
                // Recomputed where `copy` reads it, the slice would see its parent moved.
                let message = routine.map(|_| ()).unwrap_err().message;
                assert!(message.contains(&format!("'{}'", row.label())), "{message}");
                assert!(message.contains("cannot be inlined"), "{message}");
                continue;
            }
            let routine = routine.unwrap();
            ctx.run_with(&routine, &[(at, 1)]).unwrap();
            assert_eq!(ctx.values(&copy).unwrap(), [4.0, 5.0, 6.0], "{what}");
            assert_eq!(ctx.values(&images).unwrap(), moved, "{what}");
            assert_eq!(ctx.values(&fresh).unwrap(), moved, "{what}");
        }
    }
}

#[test]
fn a_slice_and_its_parent_both_add_into_the_parents_gradient() {
    // loss = Σ 2·w[at] + Σ w: the gradient is 1 everywhere and 3 on the chosen row.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("3|->2")
            .precision(Precision::F64)
            .init(Init::Values((0..6).map(f64::from).collect()))
            .build();
        let at = graph.static_index();
        let row = w.slice(&at);
        let loss = &(2.0 * &row).sum_over(Axes::all()) + &w.sum_over(Axes::all());
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        ctx.run_with(&backprop, &[(at, 1)]).unwrap();
        assert_eq!(ctx.values(&loss).unwrap(), [2.0 * 5.0 + 15.0], "{name}");
        assert_eq!(
            ctx.grad(&w).unwrap(),
            [1.0, 1.0, 3.0, 3.0, 1.0, 1.0],
            "{name}"
        );
        ctx.run_with(&backprop, &[(at, 2)]).unwrap();
        assert_eq!(
            ctx.grad(&w).unwrap(),
            [1.0, 1.0, 1.0, 1.0, 3.0, 3.0],
            "{name}"
        );
    }
}

#[test]
fn a_training_step_on_a_slice_changes_only_its_row() {
    // loss = Σ w[at]², so grad w = 2·w on the chosen row and 0 elsewhere; w -= 0.25·grad halves
    // that row. The step's forward reads w, its backward writes w's gradient, and its update
    // writes w, all in one routine.
    let w0: Vec<f64> = (1..=6).map(f64::from).collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("3|->2")
            .precision(Precision::F64)
            .init(Init::Values(w0.clone()))
            .build();
        let at = graph.static_index();
        let row = w.slice(&at);
        let loss = row.pmul(&row).sum_over(Axes::all());
        // The row as the step's forward took it, read after w has moved.
        let seen = data(&graph, "seen", "2", &[0.0; 2]);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx
            .train_step(
                &loss,
                &[
                    Update::subtract(&w, 0.25 * Formula::grad(&w)),
                    Update::set(&seen, Formula::value(&row)),
                ],
            )
            .unwrap();
        ctx.run_with(&step, &[(at, 1)]).unwrap();
        assert_eq!(ctx.values(&loss).unwrap(), [9.0 + 16.0], "{name}");
        assert_eq!(ctx.values(&seen).unwrap(), [3.0, 4.0], "{name}");
        assert_eq!(
            ctx.values(&w).unwrap(),
            [1.0, 2.0, 1.5, 2.0, 5.0, 6.0],
            "{name}"
        );
        ctx.run_with(&step, &[(at, 1)]).unwrap();
        assert_eq!(ctx.values(&loss).unwrap(), [1.5 * 1.5 + 4.0], "{name}");
        assert_eq!(ctx.values(&seen).unwrap(), [1.5, 2.0], "{name}");
        assert_eq!(
            ctx.values(&w).unwrap(),
            [1.0, 2.0, 0.75, 1.0, 5.0, 6.0],
            "{name}"
        );
        // Another position moves another row.
        ctx.run_with(&step, &[(at, 0)]).unwrap();
        assert_eq!(ctx.values(&seen).unwrap(), [1.0, 2.0], "{name}");
        assert_eq!(
            ctx.values(&w).unwrap(),
            [0.5, 1.0, 0.75, 1.0, 5.0, 6.0],
            "{name}"
        );
    }
}
