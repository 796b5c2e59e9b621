//! Routines composed of pieces (`cd!`'s `t.forward`, `t.zero_grads`, `t.backprop`, seeds,
//! updates and `~~` block comments; `Context::compose`), on the interpreter and the C backend:
//! a training step written by hand is `train_step`'s bit for bit, each piece computes what its
//! routine computes where it stands, comments show in the printed code, and misuse is an error
//! naming the user's tensor.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{
    Axes, Context, Formula, Graph, Piece, Tensor, TensorError, TensorErrorKind, Update, cd,
};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// A two-layer network on a batch of 4 (f32, as models are), its loss the sum of squared
/// errors, and its parameters.
fn regression(graph: &Graph) -> (Tensor, Vec<Tensor>) {
    let x = graph
        .data("x")
        .shape("4|->2")
        .values(vec![0.5, -1.0, 1.5, 0.25, -0.75, 2.0, 1.0, 1.0])
        .build();
    let target = graph
        .data("target")
        .shape("4|->1")
        .values(vec![1.0, -0.5, 0.25, 2.0])
        .build();
    let w1 = graph.param("w1").output([8]).build();
    let b1 = graph.param("b1").build();
    let w2 = graph.param("w2").output([1]).build();
    let b2 = graph.param("b2").build();
    let hidden = (&(&w1 * &x) + &b1).relu();
    let error = &(&(&w2 * &hidden) + &b2) - &target;
    let loss = error.pmul(&error).sum_over(Axes::all());
    (loss, vec![w1, b1, w2, b2])
}

/// SGD with weight decay, for every parameter.
fn sgd(params: &[Tensor]) -> Vec<Update> {
    params
        .iter()
        .flat_map(|w| cd! { w =- 0.05 * (w.grad + 0.01 * w) })
        .collect()
}

#[test]
fn a_step_composed_by_hand_is_train_steps_bit_for_bit() -> Result<(), TensorError> {
    for (backend, same) in backends().into_iter().zip(backends()) {
        let name = backend.name();
        let graph = Graph::new();
        let (loss, params) = regression(&graph);
        let mut library = Context::with_backend(&graph, backend);
        let mut by_hand = Context::with_backend(&graph, same);
        library.init_params()?;
        by_hand.init_params()?;
        let step = library.train_step(&loss, &sgd(&params))?;
        let updates = sgd(&params);
        let composed = by_hand.compose(&cd! {
            ~~("train on" loss;
                ~~(loss "forward"; loss.forward);
                ~~(loss "zero grads and backprop";
                    loss.zero_grads;
                    loss.backprop;
                );
                updates;
            );
        })?;
        let mut losses = Vec::new();
        for n in 0..3 {
            library.run(&step)?;
            by_hand.run(&composed)?;
            let what = format!("{name}: step {n}");
            assert_eq!(
                by_hand.cells(&loss)?,
                library.cells(&loss)?,
                "{what}'s loss"
            );
            for p in &params {
                let what = format!("{what}, {}", p.label());
                assert_eq!(by_hand.cells(p)?, library.cells(p)?, "{what}");
                assert_eq!(by_hand.grad(p)?, library.grad(p)?, "{what}'s gradient");
            }
            losses.push(by_hand.values(&loss)?[0]);
        }
        assert!(losses[2] < losses[0], "{name}: the steps train: {losses:?}");
    }
    Ok(())
}

#[test]
fn backprop_alone_is_the_backprop_routines_and_starts_from_zero() -> Result<(), TensorError> {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let (loss, params) = regression(&graph);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        let backprop = ctx.backprop(&loss)?;
        ctx.run(&backprop)?;
        let want: Vec<Vec<f64>> = params
            .iter()
            .map(|p| ctx.grad(p))
            .collect::<Result<_, _>>()?;
        // Its forward is computed first; a second backprop gives the same gradients, not twice
        // them.
        let twice = ctx.compose(&cd! { loss.backprop; loss.backprop })?;
        ctx.run(&twice)?;
        for (p, want) in params.iter().zip(&want) {
            assert_eq!(&ctx.grad(p)?, want, "{name}: {}", p.label());
        }
        // Gradients summed by hand: an accumulator updated after each backprop.
        let w2 = &params[2];
        let sum = graph.data("sum").output([1]).input([8]).build();
        ctx.set_values(&sum, &[0.0; 8])?;
        let accumulate = ctx.compose(&cd! {
            loss.backprop; sum =+ w2.grad;
            loss.backprop; sum =+ w2.grad;
        })?;
        ctx.run(&accumulate)?;
        let doubled: Vec<f64> = want[2].iter().map(|g| 2.0 * g).collect();
        assert_eq!(ctx.values(&sum)?, doubled, "{name}");
        let zeroed = ctx.compose(&cd! { loss.zero_grads })?;
        ctx.run(&zeroed)?;
        for p in &params {
            assert!(
                ctx.grad(p)?.iter().all(|&g| g == 0.0),
                "{name}: {}",
                p.label()
            );
        }
    }
    Ok(())
}

#[test]
fn a_forward_is_computed_again_only_after_what_it_reads_changed() -> Result<(), TensorError> {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph.param("w").output([2]).values(vec![1.0, 2.0]).build();
        let double = &w * 2.0;
        let total = double.sum_over(Axes::all());
        let before = graph.data("before").output([1]).build();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        // `double` is computed once for both forwards; after `w` changes, `total` again.
        let routine = ctx.compose(&cd! {
            double.forward;
            total.forward;
            before =: total;
            w =+ 1;
            total.forward;
        })?;
        let code = routine.code();
        let computing = |t: &Tensor| {
            code.lines()
                .filter(|line| line.starts_with(&format!("{} ", t.label())))
                .count()
        };
        assert_eq!(computing(&double), 2, "{name}: {code}");
        assert_eq!(computing(&total), 2, "{name}: {code}");
        ctx.run(&routine)?;
        assert_eq!(ctx.values(&before)?, vec![6.0], "{name}");
        assert_eq!(ctx.values(&total)?, vec![10.0], "{name}");
        assert_eq!(ctx.values(&w)?, vec![2.0, 3.0], "{name}");
        let once = ctx.compose(&cd! { double.forward; total.forward })?;
        assert_eq!(
            once.code()
                .lines()
                .filter(|line| line.starts_with(&format!("{} ", double.label())))
                .count(),
            1,
            "{name}: {}",
            once.code()
        );
    }
    Ok(())
}

#[test]
fn a_seed_weights_the_cells_of_a_tensor_backpropagated() -> Result<(), TensorError> {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph
            .param("w")
            .output([3])
            .values(vec![1.0, -2.0, 0.5])
            .build();
        let y = w.pmul(&w);
        let weights = graph
            .data("weights")
            .output([3])
            .values(vec![1.0, 10.0, 100.0])
            .build();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        // ∂(Σ weightsᵢ·wᵢ²)/∂w = 2·weights·w.
        let weighted = ctx.compose(&cd! { y.grad =: weights; y.backprop })?;
        ctx.run(&weighted)?;
        assert_eq!(ctx.grad(&w)?, vec![2.0, -40.0, 100.0], "{name}");
        // Seeded with 1 it is Context::backprop: the gradient of the sum of the cells.
        let ones = ctx.compose(&cd! { y.grad =: 1; y.backprop })?;
        ctx.run(&ones)?;
        let summed = ctx.grad(&w)?;
        let backprop = ctx.backprop(&y)?;
        ctx.run(&backprop)?;
        assert_eq!(summed, ctx.grad(&w)?, "{name}");
        assert_eq!(summed, vec![2.0, -4.0, 1.0], "{name}");
    }
    Ok(())
}

#[test]
fn block_comments_show_in_the_printed_code() -> Result<(), TensorError> {
    let graph = Graph::new();
    let w = graph.param("w").output([2]).values(vec![1.0, 2.0]).build();
    let x = graph.data("x").output([2]).values(vec![0.5, -1.0]).build();
    let product = w.pmul(&x);
    let loss = product.sum_over(Axes::all());
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params()?;
    let routine = ctx.compose(&cd! {
        ~~("step of" loss "from" w.grad;
            ~~(loss "forward"; loss.forward);
            ~~("backprop"; loss.backprop);
            w =- 0.5 * w.grad;
        );
        ~~("done");
    })?;
    let (p, l) = (product.label(), loss.label());
    let spec = "... | ... -> ... =>";
    assert_eq!(
        routine.code(),
        format!(
            "~~(\"step of {l} from w.grad\";\n\
             \x20 ~~(\"{l} forward\";\n\
             \x20   {p} =:+ w * x;\n\
             \x20   {l} =:+ {p} ~logic:\"{spec}\";\n\
             \x20 );\n\
             \x20 ~~(\"backprop\";\n\
             \x20   w.grad =: 0.0;\n\
             \x20   {p}.grad =: 0.0;\n\
             \x20   {l}.grad =: 1.0;\n\
             \x20   {p}.grad =+ {l}.grad ~logic:\"{spec}\";\n\
             \x20   w.grad =+ {p}.grad * x;\n\
             \x20 );\n\
             \x20 w =- 0.5 * w.grad;\n\
             );\n\
             ~~(\"done\");\n"
        )
    );
    ctx.run(&routine)?;
    assert_eq!(ctx.values(&w)?, vec![0.75, 2.5]);
    Ok(())
}

#[test]
fn a_routine_is_named_after_its_comments_and_reads_nothing_unheld() {
    let graph = Graph::new();
    let w = graph.param("w").output([2]).values(vec![1.0, 2.0]).build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    // w's gradient holds nothing before a backprop: no zeros stand in for it.
    let routine = ctx
        .compose(&cd! { ~~("descend along" w.grad; w =- w.grad) })
        .unwrap();
    let e = ctx.run(&routine).unwrap_err();
    assert_eq!(e.kind, TensorErrorKind::NoValues, "{e}");
    assert!(
        e.message
            .contains("routine descend_along_w_grad reads the gradient of 'w'"),
        "{e}"
    );
}

#[test]
fn the_blocks_state_updates_run_with_the_backprop_while_the_loss_is_finite()
-> Result<(), TensorError> {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let w = graph.param("w").output([2]).values(vec![1.0, 2.0]).build();
        let x = graph.data("x").output([2]).values(vec![3.0, 4.0]).build();
        let product = w.pmul(&x);
        let loss = product.sum_over(Axes::all());
        let steps = graph.data("steps").output([1]).values(vec![0.0]).build();
        graph.update_in_steps(&product, &cd! { steps =+ 1 });
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params()?;
        let routine = ctx.compose(&cd! { loss.backprop; loss.backprop })?;
        ctx.run(&routine)?;
        assert_eq!(ctx.values(&steps)?, vec![2.0], "{name}");
        ctx.set_values(&x, &[f64::NAN, 4.0])?;
        ctx.run(&routine)?;
        assert_eq!(ctx.values(&steps)?, vec![2.0], "{name}");
    }
    Ok(())
}

/// `result`'s error, which must contain `part`.
fn refused(result: Result<impl std::fmt::Debug, TensorError>, part: &str) {
    match result {
        Ok(v) => panic!("expected an error containing {part:?}, got Ok({v:?})"),
        Err(e) => assert!(e.message.contains(part), "{:?} lacks {part:?}", e.message),
    }
}

#[test]
fn misuse_is_an_error_naming_the_tensor() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .output([3])
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let x = graph
        .data("x")
        .output([3])
        .values(vec![1.0, 0.0, -1.0])
        .build();
    let y = w.pmul(&x);
    let data_only = &x + 1.0;
    let other = Graph::new();
    let z = other.param("z").output([3]).build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    refused(
        ctx.compose(&cd! { y.forward; z.forward }),
        "`z.forward`: tensor 'z' belongs to another graph",
    );
    refused(
        ctx.compose(&cd! { ~~("nested"; z.backprop) }),
        "`z.backprop`: tensor 'z' belongs to another graph",
    );
    refused(
        ctx.compose(&cd! { z.zero_grads }),
        "`z.zero_grads`: tensor 'z'",
    );
    refused(
        ctx.compose(&cd! { y.grad =: z; y.backprop }),
        &format!(
            "seed `{}.grad =: …`: tensor 'z' belongs to another graph",
            y.label()
        ),
    );
    let y_label = y.label();
    refused(
        ctx.compose(&cd! { y.backprop }),
        &format!(
            "`{y_label}.backprop`: '{y_label}' has 3 cells (dims [3]) and nothing seeds its \
             gradient: write the seed before the backprop, `{y_label}.grad =: 1`"
        ),
    );
    // A seed wiped by zero_grads seeds nothing.
    refused(
        ctx.compose(&cd! { y.grad =: 1; y.zero_grads; y.backprop }),
        "nothing seeds its gradient",
    );
    let d = data_only.label();
    refused(
        ctx.compose(&[Piece::backprop(&data_only)]),
        &format!("`{d}.backprop`: '{d}' does not depend on any parameter"),
    );
    refused(
        ctx.compose(&cd! { data_only.zero_grads }),
        &format!("`{d}.zero_grads`: '{d}' does not depend on any parameter"),
    );
    refused(
        ctx.compose(&cd! { data_only.grad =: 1 }),
        &format!("'{d}' takes no gradient"),
    );
    // A computed tensor's gradient no piece before the update computed.
    refused(
        ctx.compose(&cd! { w =- y.grad }),
        &format!(
            "reads the gradient of '{}', which no backprop computes",
            y.label()
        ),
    );
    refused(
        ctx.compose(&[Piece::seed(&y, Formula::value(&w) * Formula::value(&z))]),
        "belongs to another graph",
    );
    // Last: an update's relation that cannot be made is recorded in the graph, as a failed
    // operation is, and every routine compiled after it fails with it.
    refused(
        ctx.compose(&cd! { y.forward; w =- z }),
        "update of 'w': tensor 'z' belongs to another graph",
    );
}
