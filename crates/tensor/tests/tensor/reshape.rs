//! The reshape family on both backends: shapes and cells against hand computation (a reshape
//! keeps row-major order, so the cells read in memory order are the operand's, only the axes
//! change; a transposition after it checks the index mapping cell by cell), gradients against
//! finite differences, and the errors of impossible reshapes.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Axis, AxisKind, Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `0, 1, 2, …` in a data tensor of the shape literal.
fn counting(graph: &Graph, literal: &str, cells: usize) -> Tensor {
    graph
        .data("x")
        .shape(literal)
        .precision(Precision::F64)
        .values((0..cells).map(|i| i as f64).collect())
        .build()
}

/// The rows `[batch, input, output]` and the cells of `build`'s result over a counting tensor,
/// on every backend (which must agree).
fn run(
    literal: &str,
    cells: usize,
    build: impl Fn(&Tensor) -> Tensor,
) -> ([Vec<usize>; 3], Vec<f64>) {
    let mut seen = None;
    for backend in backends() {
        let backend_name = backend.name();
        let graph = Graph::new();
        let x = counting(&graph, literal, cells);
        let y = build(&x);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx
            .forward(&[&y])
            .unwrap_or_else(|e| panic!("on {backend_name}: {e}"));
        ctx.run(&forward).unwrap();
        let got = (ctx.rows(&y).unwrap(), ctx.values(&y).unwrap());
        match &seen {
            None => seen = Some(got),
            Some(first) => assert_eq!(&got, first, "{backend_name} differs"),
        }
    }
    seen.expect("a backend")
}

fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn rows(batch: &[usize], input: &[usize], output: &[usize]) -> [Vec<usize>; 3] {
    [batch.to_vec(), input.to_vec(), output.to_vec()]
}

#[test]
fn flatten_merges_axes_in_row_major_order() {
    let (shape, cells) = run("2,3", 6, |x| x.flatten(AxisKind::Output));
    assert_eq!((shape, cells), (rows(&[], &[], &[6]), iota(6)));
    // Batch and input axes stay; memory order is batch, output, input.
    let (shape, cells) = run("2|5->3,4", 120, |x| x.flatten(AxisKind::Output));
    assert_eq!((shape, cells), (rows(&[2], &[5], &[12]), iota(120)));
    let (shape, _) = run("2,3,4", 24, |x| x.flatten_axes(AxisKind::Output, 0, 1));
    assert_eq!(shape, rows(&[], &[], &[6, 4]));
    let (shape, _) = run("2,3,4", 24, |x| x.flatten_axes(AxisKind::Output, -2, -1));
    assert_eq!(shape, rows(&[], &[], &[2, 12]));
    let (shape, _) = run("2,3,4,5", 120, |x| x.flatten_axes(AxisKind::Output, 1, -2));
    assert_eq!(shape, rows(&[], &[], &[2, 12, 5]));
    let (shape, _) = run("2,3|4->5", 120, |x| x.flatten(AxisKind::Batch));
    assert_eq!(shape, rows(&[6], &[4], &[5]));
}

/// `"ij=>ji"` after flattening `2,3,4` to `6,4` reads cell `(i, j)` of the result at `(j, i)`:
/// cell `(a, b, c)` of the operand, with `i = 3a + b`, holds `12a + 4b + c = 4i + c`.
#[test]
fn a_transposition_after_flatten_sees_the_row_major_index() {
    let (shape, cells) = run("2,3,4", 24, |x| {
        x.flatten_axes(AxisKind::Output, 0, 1).einsum1("ij=>ji")
    });
    assert_eq!(shape, rows(&[], &[], &[4, 6]));
    let expected: Vec<f64> = (0..4)
        .flat_map(|c| (0..6).map(move |i| (4 * i + c) as f64))
        .collect();
    assert_eq!(cells, expected);
}

#[test]
fn unflatten_splits_an_axis() {
    let (shape, cells) = run("6", 6, |x| x.unflatten(Axis::output(0), &[2, 3]));
    assert_eq!((shape, cells), (rows(&[], &[], &[2, 3]), iota(6)));
    let (shape, _) = run("24", 24, |x| x.unflatten(Axis::output(-1), &[-1, 3, 4]));
    assert_eq!(shape, rows(&[], &[], &[2, 3, 4]));
    // −1 elsewhere than first, the axis's size being known.
    let (shape, _) = run("5,24", 120, |x| x.unflatten(Axis::output(1), &[2, -1, 3]));
    assert_eq!(shape, rows(&[], &[], &[5, 2, 4, 3]));
    let (shape, _) = run("|12->2", 24, |x| x.unflatten(Axis::input(0), &[4, 3]));
    assert_eq!(shape, rows(&[], &[4, 3], &[2]));
    // Split then transposed: cell (i, j) of the 2×3 split of 0..6 holds 3i + j.
    let (_, cells) = run("6", 6, |x| {
        x.unflatten(Axis::output(0), &[2, 3]).einsum1("ij=>ji")
    });
    assert_eq!(cells, vec![0., 3., 1., 4., 2., 5.]);
}

#[test]
fn reshape_is_flatten_then_unflatten() {
    let (shape, cells) = run("2|3,4->1", 24, |x| x.reshape(AxisKind::Input, &[6, 2]));
    assert_eq!((shape, cells), (rows(&[2], &[6, 2], &[1]), iota(24)));
    let (shape, cells) = run("4,6", 24, |x| x.reshape(AxisKind::Output, &[-1, 4]));
    assert_eq!((shape, cells), (rows(&[], &[], &[6, 4]), iota(24)));
    // (4, 6) → (6, 4) then transposed: cell (i, j) holds 4i + j.
    let (_, cells) = run("4,6", 24, |x| {
        x.reshape(AxisKind::Output, &[6, 4]).einsum1("ij=>ji")
    });
    let expected: Vec<f64> = (0..4)
        .flat_map(|j| (0..6).map(move |i| (4 * i + j) as f64))
        .collect();
    assert_eq!(cells, expected);
    let (shape, _) = run("2,3", 6, |x| x.reshape(AxisKind::Output, &[6]));
    assert_eq!(shape, rows(&[], &[], &[6]));
}

#[test]
fn squeeze_and_unsqueeze() {
    let (shape, cells) = run("2,3", 6, |x| x.unsqueeze(Axis::output(0)));
    assert_eq!((shape, cells), (rows(&[], &[], &[1, 2, 3]), iota(6)));
    let (shape, _) = run("2,3", 6, |x| x.unsqueeze(Axis::output(-1)));
    assert_eq!(shape, rows(&[], &[], &[2, 3, 1]));
    let (shape, _) = run("2,3", 6, |x| x.unsqueeze(Axis::output(1)));
    assert_eq!(shape, rows(&[], &[], &[2, 1, 3]));
    let (shape, _) = run("2,3", 6, |x| x.unsqueeze(Axis::output(-2)));
    assert_eq!(shape, rows(&[], &[], &[2, 1, 3]));
    let (shape, _) = run("2,3", 6, |x| x.unsqueeze(Axis::batch(0)));
    assert_eq!(shape, rows(&[1], &[], &[2, 3]));
    let (shape, cells) = run("2,1,3", 6, |x| x.squeeze(Axis::output(1)));
    assert_eq!((shape, cells), (rows(&[], &[], &[2, 3]), iota(6)));
    let (shape, _) = run("2,3,1", 6, |x| x.squeeze(Axis::output(-1)));
    assert_eq!(shape, rows(&[], &[], &[2, 3]));
    let (shape, _) = run("1|2", 2, |x| x.squeeze(Axis::batch(0)));
    assert_eq!(shape, rows(&[], &[], &[2]));
}

fn check(name: &str, shapes: &[&str], build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs {
            shapes,
            positive: false,
        };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, &build) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

/// Each result is multiplied by a second parameter of the result's shape, so that every cell's
/// gradient differs and a misplaced one shows.
#[test]
fn gradients_match_finite_differences() {
    check("flatten", &["2,3,4", "6,4"], |_, p| {
        p[0].flatten_axes(AxisKind::Output, 0, 1).pmul(&p[1])
    });
    check("unflatten", &["12", "3,4"], |_, p| {
        p[0].unflatten(Axis::output(0), &[3, -1]).pmul(&p[1])
    });
    check("reshape", &["4,6", "3,8"], |_, p| {
        p[0].reshape(AxisKind::Output, &[3, 8]).pmul(&p[1])
    });
    check("unsqueeze", &["2,3", "2,1,3"], |_, p| {
        p[0].unsqueeze(Axis::output(1)).pmul(&p[1])
    });
    check("squeeze", &["2,1,3", "2,3"], |_, p| {
        p[0].squeeze(Axis::output(1)).pmul(&p[1])
    });
}

/// The error a graph building `build` over a `literal` tensor reports when compiled.
fn error_of(literal: &str, build: impl Fn(&Tensor) -> Tensor) -> String {
    let graph = Graph::new();
    let x = graph.data("x").shape(literal).build();
    let y = build(&x);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    match ctx.forward(&[&y]) {
        Ok(_) => panic!("no error for {literal}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn impossible_reshapes_are_errors_naming_the_tensor_and_shapes() {
    let e = error_of("2,3", |x| x.reshape(AxisKind::Output, &[4, 2]));
    assert!(
        e.contains("reshape of 'x'") && e.contains("[2, 3] hold 6 cells") && e.contains("[4, 2]"),
        "{e}"
    );
    let e = error_of("2,3", |x| x.reshape(AxisKind::Output, &[-1, 4]));
    assert!(e.contains("6 cells") && e.contains("[-1, 4]"), "{e}");
    let e = error_of("2,3", |x| x.reshape(AxisKind::Output, &[-1, -1]));
    assert!(e.contains("only one size can be inferred"), "{e}");
    let e = error_of("6", |x| x.unflatten(Axis::output(0), &[4, 2]));
    assert!(
        e.contains("unflatten of 'x'") && e.contains("6 cells"),
        "{e}"
    );
    let e = error_of("2,3", |x| x.squeeze(Axis::output(0)));
    assert!(
        e.contains("squeeze of 'x' at output axis 0") && e.contains("size 2, not 1"),
        "{e}"
    );
    let e = error_of("2,3", |x| x.squeeze(Axis::output(-3)));
    assert!(e.contains("squeeze of 'x'") && e.contains("2 axes"), "{e}");
    let e = error_of("2,3", |x| x.unsqueeze(Axis::output(3)));
    assert!(
        e.contains("unsqueeze of 'x'") && e.contains("2 axes"),
        "{e}"
    );
    let e = error_of("2,3", |x| x.unflatten(Axis::input(0), &[1]));
    assert!(e.contains("the input row has 0 axes"), "{e}");
    let e = error_of("2,3", |x| x.flatten_axes(AxisKind::Output, 0, 2));
    assert!(e.contains("flatten of 'x'") && e.contains("2 axes"), "{e}");
}

/// A size known only once inference finishes: a parameter's hidden width.
#[test]
fn flatten_needs_the_inner_sizes_when_built() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2|->3").build();
    let w = graph.param("w").build();
    let hidden = (&w * &x).unsqueeze(Axis::output(-1));
    let flat = hidden.flatten(AxisKind::Output);
    let message = flat.error().expect("an error").to_string();
    assert!(message.contains("not known"), "{message}");
}

/// Squeezing an axis whose size is found later still checks it is 1 (the error is then the
/// solver's, which names the sizes but not the tensor).
#[test]
fn squeeze_checks_sizes_inference_finds_later() {
    let graph = Graph::new();
    let w = graph.param("w").shape("|3->2").build();
    let x = graph.data("x").build();
    let squeezed = (&w * &x).squeeze(Axis::output(0));
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let e = ctx.forward(&[&squeezed]).map(|_| ()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("an axis must be both of size 1 and of size 2"),
        "{e}"
    );
}

/// An axis whose size inference finds later is split with the first size inferred; a size the
/// other sizes do not divide is then an error.
#[test]
fn unflatten_infers_the_first_size_from_a_size_found_later() {
    for backend in backends() {
        let backend_name = backend.name();
        let graph = Graph::new();
        let x = graph.data("x").precision(Precision::F64).build();
        let split = x.unflatten(Axis::output(0), &[-1, 4]);
        let offsets = counting(&graph, "3,4", 12);
        let y = &split + &offsets;
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&y]).unwrap();
        assert_eq!(
            ctx.rows(&x).unwrap(),
            rows(&[], &[], &[12]),
            "{backend_name}"
        );
        ctx.set_values(&x, &iota(12)).unwrap();
        ctx.run(&forward).unwrap();
        let doubled: Vec<f64> = (0..12).map(|i| 2.0 * i as f64).collect();
        assert_eq!(ctx.values(&y).unwrap(), doubled, "{backend_name}");
    }
    let graph = Graph::new();
    let x = graph.data("x").build();
    let split = x.unflatten(Axis::output(0), &[-1, 4]);
    let ten = graph.data("ten").shape("10").build();
    let y = &x + &ten;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    // The solver's message, which names the sizes but neither the tensor nor the operation.
    let e = ctx.forward(&[&y, &split]).map(|_| ()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("an axis of size 4 does not broadcast to size 10"),
        "{e}"
    );
}

#[test]
fn flatten_of_three_axes_counted_from_the_last() {
    let (shape, cells) = run("2,3,4", 24, |x| x.flatten_axes(AxisKind::Output, -3, -1));
    assert_eq!((shape, cells), (rows(&[], &[], &[24]), iota(24)));
    let (shape, cells) = run("2|3,4,5->6", 720, |x| {
        x.flatten_axes(AxisKind::Input, -3, -2)
    });
    assert_eq!((shape, cells), (rows(&[2], &[12, 5], &[6]), iota(720)));
}
