//! Updates related to the tensors they read by a logic (`Update::with_logic`, OCANNL's
//! `c =:+ a * b ~logic:"@"`): composition, transposition, specs (reducing too), pointwise over
//! any number of tensors, and an intermediate shaped by its relation, each against hand
//! computation on both CPU backends; relations that cannot hold, a reduction that would only
//! overwrite, and a formula changed after its relation are refused with errors naming the update.

use crate::cpu::{assert_close, backends, data, unshaped};
use rcannl_backends::Interpreter;
use rcannl_ir::{Binop, Precision};
use rcannl_tensor::{Context, Formula, Graph, Init, OpLogic, Tensor, Update};

/// `a · b` for row-major `a` (n×m) and `b` (m×p).
fn matmul(a: &[f64], b: &[f64], n: usize, m: usize, p: usize) -> Vec<f64> {
    (0..n * p)
        .map(|ik| (0..m).map(|j| a[ik / p * m + j] * b[j * p + ik % p]).sum())
        .collect()
}

const A: [f64; 6] = [1.5, -2.0, 0.25, 3.0, 0.5, -1.25];
const B: [f64; 12] = [
    2.0, -1.0, 0.5, 4.0, //
    -3.0, 1.75, 2.5, -0.5, //
    0.125, 6.0, -2.25, 1.0,
];

#[test]
fn composition_is_a_matrix_product_and_add_accumulates() {
    let product = matmul(&A, &B, 2, 3, 4);
    let start = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0, 7.0, -8.0];
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        // `a * b`: a's 3 input axes contract with b's 3 output axes.
        let a = data(&graph, "a", "|3->2", &A);
        let b = data(&graph, "b", "|4->3", &B);
        let c = unshaped(&graph, "c");
        let d = data(&graph, "d", "|4->2", &start);
        let ab = || Formula::value(&a) * Formula::value(&b);
        let reduce = Update::reduce(&c, Binop::Add, ab()).with_logic(OpLogic::Compose);
        let add = Update::add(&d, ab()).with_logic(OpLogic::Compose);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&[reduce, add]).unwrap();
        assert_eq!(ctx.rows(&c).unwrap(), [vec![], vec![4], vec![2]], "{name}");
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&c).unwrap(), &product, name);
        let once: Vec<f64> = start.iter().zip(&product).map(|(s, p)| s + p).collect();
        assert_close(&ctx.values(&d).unwrap(), &once, name);
        ctx.run(&routine).unwrap();
        // `=:+` starts from zero on every run; `=+` adds into what the target holds.
        assert_close(&ctx.values(&c).unwrap(), &product, name);
        let twice: Vec<f64> = once.iter().zip(&product).map(|(s, p)| s + p).collect();
        assert_close(&ctx.values(&d).unwrap(), &twice, name);
    }
}

#[test]
fn transposition_and_specs_relate_and_reduce() {
    let product = matmul(&A, &B, 2, 3, 4);
    // A as 2×3: its transpose, scaled and shifted, is 3×2.
    let transposed: Vec<f64> = (0..6)
        .map(|ji| 2.0 * A[ji % 2 * 3 + ji / 2] - 1.0)
        .collect();
    let row_maxima: Vec<f64> = B
        .chunks(4)
        .map(|row| row.iter().copied().fold(f64::NEG_INFINITY, f64::max))
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let a = data(&graph, "a", "|3->2", &A);
        let t = unshaped(&graph, "t");
        let transpose =
            Update::set(&t, 2.0 * Formula::value(&a) - 1.0).with_logic(OpLogic::Transpose);

        let x = data(&graph, "x", "2,3", &A);
        let y = data(&graph, "y", "3,4", &B);
        let xy = unshaped(&graph, "xy");
        let spec = Update::reduce(&xy, Binop::Add, Formula::value(&x) * Formula::value(&y))
            .with_logic(OpLogic::Spec("ij;jk=>ik".to_owned()));

        // Held values that the reduction must not keep.
        let m = data(&graph, "m", "3", &[100.0, 100.0, 100.0]);
        let maxima = Update::reduce(&m, Binop::Max, Formula::value(&y))
            .with_logic(OpLogic::Spec("ij=>i".to_owned()));

        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&[transpose, spec, maxima]).unwrap();
        assert_eq!(ctx.rows(&t).unwrap(), [vec![], vec![2], vec![3]], "{name}");
        assert_eq!(ctx.dims(&xy).unwrap(), vec![2, 4], "{name}");
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&t).unwrap(), &transposed, name);
        assert_close(&ctx.values(&xy).unwrap(), &product, name);
        assert_close(&ctx.values(&m).unwrap(), &row_maxima, name);
    }
}

/// `p`, `x`, and the loss `sum_i (p · x)_i²`, whose gradient is `2 (p · x)_i x_j`.
fn quadratic(graph: &Graph, p0: &[f64], x0: &[f64]) -> (Tensor, Tensor) {
    let p = graph
        .param("p")
        .shape("|3->2")
        .precision(Precision::F64)
        .init(Init::Values(p0.to_vec()))
        .build();
    let x = data(graph, "x", "3", x0);
    let y = &p * &x;
    (p.clone(), y.pmul(&y))
}

/// One step of `delta := grad p + 0.5 p; p -= 0.1 delta` by hand, with the loss of
/// [`quadratic`].
fn hand_step(p: &[f64], x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let y = matmul(p, x, 2, 3, 1);
    let delta: Vec<f64> = (0..6)
        .map(|ij| 2.0 * y[ij / 3] * x[ij % 3] + 0.5 * p[ij])
        .collect();
    let next = p.iter().zip(&delta).map(|(p, d)| p - 0.1 * d).collect();
    (delta, next)
}

/// The updates of [`hand_step`]: `delta` an intermediate shaped by its relation.
fn step_updates(p: &Tensor, delta: &Tensor) -> [Update; 2] {
    [
        Update::set(delta, Formula::grad(p) + 0.5 * Formula::value(p))
            .with_logic(OpLogic::Pointwise),
        Update::subtract(p, 0.1 * Formula::value(delta)),
    ]
}

const P0: [f64; 6] = [0.5, -1.0, 2.0, 1.5, 0.25, -0.75];
const X0: [f64; 3] = [1.0, -2.0, 0.5];

#[test]
fn an_intermediate_takes_its_shape_from_its_relation() {
    let (delta0, p1) = hand_step(&P0, &X0);
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let (p, loss) = quadratic(&graph, &P0, &X0);
        let delta = graph.data("delta").precision(Precision::F64).build();
        let updates = step_updates(&p, &delta);
        // Related while the graph is built: before any context closes the shapes, `delta` has
        // p's axes (and may still broadcast wider, as an operation's result may).
        let known = delta.shape();
        assert!(
            known.contains(",3->") && known.ends_with(",2"),
            "{name}: {known}"
        );
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&loss).unwrap();
        let update = ctx.update(&updates).unwrap();
        assert_eq!(ctx.rows(&delta).unwrap(), ctx.rows(&p).unwrap(), "{name}");
        ctx.run(&backprop).unwrap();
        ctx.run(&update).unwrap();
        assert_close(&ctx.values(&delta).unwrap(), &delta0, name);
        assert_close(&ctx.values(&p).unwrap(), &p1, name);
    }
}

#[test]
fn a_training_step_runs_updates_with_a_logic() {
    let (_, p1) = hand_step(&P0, &X0);
    let (delta1, p2) = hand_step(&p1, &X0);
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let (p, loss) = quadratic(&graph, &P0, &X0);
        let delta = unshaped(&graph, "delta");
        // The squared gradient's row sums, `=:+` over a spec reading the gradient.
        let row_sums = unshaped(&graph, "row sums");
        let [set_delta, step] = step_updates(&p, &delta);
        let squares = Update::reduce(&row_sums, Binop::Add, Formula::grad(&p) * Formula::grad(&p))
            .with_logic(OpLogic::Spec("i->o => o".to_owned()));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let train = ctx.train_step(&loss, &[squares, set_delta, step]).unwrap();
        ctx.run(&train).unwrap();
        ctx.run(&train).unwrap();
        // The second step's gradient: at p1.
        let y1 = matmul(&p1, &X0, 2, 3, 1);
        let grad1: Vec<f64> = (0..6).map(|ij| 2.0 * y1[ij / 3] * X0[ij % 3]).collect();
        let sums: Vec<f64> = grad1
            .chunks(3)
            .map(|r| r.iter().map(|g| g * g).sum())
            .collect();
        assert_close(&ctx.grad(&p).unwrap(), &grad1, name);
        assert_close(&ctx.values(&row_sums).unwrap(), &sums, name);
        assert_close(&ctx.values(&delta).unwrap(), &delta1, name);
        assert_close(&ctx.values(&p).unwrap(), &p2, name);
    }
}

#[test]
fn pointwise_relates_any_number_of_tensors() {
    let a = [1.0, -2.0, 3.5, 0.5, -1.5, 2.0];
    let b = [0.5, 4.0, -1.0, 2.0, 3.0, -0.25];
    let c = [2.0, 1.0, 0.5, -3.0, 0.75, 1.5];
    let d = [-1.0, 0.25, 2.0, 4.0, -2.0, 0.5];
    let want: Vec<f64> = (0..6)
        .map(|i| a[i] * b[i] - c[i] / d[i] + a[i] * d[i])
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let [ta, tb, tc, td] = [("a", a), ("b", b), ("c", c), ("d", d)]
            .map(|(label, values)| data(&graph, label, "2|3->", &values));
        let e = unshaped(&graph, "e");
        let v = Formula::value;
        let update = Update::set(&e, v(&ta) * v(&tb) - v(&tc) / v(&td) + v(&ta) * v(&td))
            .with_logic(OpLogic::Pointwise);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&[update]).unwrap();
        assert_eq!(ctx.rows(&e).unwrap(), [vec![2], vec![3], vec![]], "{name}");
        ctx.run(&routine).unwrap();
        assert_close(&ctx.values(&e).unwrap(), &want, name);
    }
}

/// The error compiling `update` gives, which the graph has recorded too.
fn refused(graph: &Graph, update: Update) -> String {
    let recorded = graph.check().unwrap_err().message;
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    let message = ctx.update(&[update]).unwrap_err().message;
    assert_eq!(message, recorded);
    message
}

#[test]
fn relations_that_cannot_hold_are_refused() {
    let graph = Graph::new();
    let a = data(&graph, "a", "|3->2", &A);
    let b = data(&graph, "b", "|4->3", &B);
    let c = unshaped(&graph, "c");
    let three = Update::reduce(
        &c,
        Binop::Add,
        Formula::value(&a) * Formula::value(&b) * Formula::grad(&a),
    )
    .with_logic(OpLogic::Compose);
    let message = refused(&graph, three);
    assert!(message.contains("update of 'c'"), "{message}");
    assert!(message.contains("composition"), "{message}");
    assert!(
        message.contains("'a', 'b', the gradient of 'a'"),
        "{message}"
    );

    let graph = Graph::new();
    let c = unshaped(&graph, "c");
    let constant = Update::set(&c, Formula::Const(1.0)).with_logic(OpLogic::Transpose);
    let message = refused(&graph, constant);
    assert!(message.contains("update of 'c'"), "{message}");
    assert!(message.contains("reads 0"), "{message}");

    let graph = Graph::new();
    let x = data(&graph, "x", "2,3", &A);
    let y = data(&graph, "y", "4,3", &B);
    let z = unshaped(&graph, "z");
    let clash = Update::reduce(&z, Binop::Add, Formula::value(&x) * Formula::value(&y))
        .with_logic(OpLogic::Spec("ij;jk=>ik".to_owned()));
    let message = refused(&graph, clash);
    assert!(message.contains("update of 'z'"), "{message}");
    assert!(message.contains("'x': |->2,3"), "{message}");
    assert!(message.contains("'y': |->4,3"), "{message}");
    // Everything built on the target fails with it.
    assert!(z.error().is_some());

    let graph = Graph::new();
    let y = data(&graph, "y", "3,4", &B);
    let m = unshaped(&graph, "m");
    let overwrite =
        Update::set(&m, Formula::value(&y)).with_logic(OpLogic::Spec("ij=>i".to_owned()));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let message = ctx.update(&[overwrite]).unwrap_err().message;
    assert!(message.contains("update of 'm'"), "{message}");
    assert!(message.contains("reducing accumulator"), "{message}");
    assert!(message.contains("[3, 4]"), "{message}");

    // A formula changed after the relation was made no longer matches its projections.
    let graph = Graph::new();
    let a = data(&graph, "a", "|3->2", &A);
    let b = data(&graph, "b", "|4->3", &B);
    let c = unshaped(&graph, "c");
    let mut changed = Update::reduce(&c, Binop::Add, Formula::value(&a) * Formula::value(&b))
        .with_logic(OpLogic::Compose);
    changed.formula = Formula::value(&b) * Formula::value(&a);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let message = ctx.update(&[changed]).unwrap_err().message;
    assert!(message.contains("update of 'c'"), "{message}");
    assert!(message.contains("with_logic"), "{message}");
}
