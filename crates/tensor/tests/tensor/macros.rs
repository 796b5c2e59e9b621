//! The `op!` and `cd!` macros: every form, checked against the builder API and hand
//! computations, and the operations `cd!` defines checked against finite differences on both
//! backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::print::PrintOptions;
use rcannl_tensor::{Context, Graph, Init, Tensor, cd, op};

use crate::cpu::data;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// Asserts `got` equals `want` cell by cell within a relative 1e-9.
pub(crate) fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 1e-9 * w.abs().max(1.0),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

fn forward(graph: &Graph, t: &Tensor) -> Vec<f64> {
    let mut ctx = Context::with_backend(graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let f = ctx.forward(&[t]).unwrap();
    ctx.run(&f).unwrap();
    ctx.values(t).unwrap()
}

/// Closes the graph's shapes (as any context does), so that `Tensor::shape` shows them whole.
fn settle(graph: &Graph) {
    Context::with_backend(graph, Box::new(Interpreter))
        .init_params()
        .unwrap();
}

#[test]
fn op_declares_parameters_inline_sized_by_use() {
    let graph = Graph::new();
    let x = data(&graph, "x", "2|->3", &[1.0, -2.0, 0.5, 3.0, 0.0, -1.0]);
    let y = op! { relu({ w; o = [4] } * x + { b = 0.25 }) };
    settle(&graph);
    let params = graph.params();
    let labels: Vec<String> = params.iter().map(Tensor::label).collect();
    assert_eq!(labels, ["w", "b"]);
    assert_eq!(params[0].shape(), "|3->4");
    assert_eq!(params[1].shape(), "|->4");
    assert_eq!(y.shape(), "2|->4");

    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let f = ctx.forward(&[&y]).unwrap();
    ctx.run(&f).unwrap();
    // w is stored output-major: w[o][i].
    let w = &ctx.values(&params[0]).unwrap();
    assert_eq!(ctx.values(&params[1]).unwrap(), [0.25; 4]);
    let xs = [[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]];
    let want: Vec<f64> = xs
        .iter()
        .flat_map(|x| {
            (0..4).map(move |o| {
                let sum: f64 = (0..3).map(|i| w[o * 3 + i] * x[i]).sum();
                (sum + 0.25).max(0.0)
            })
        })
        .collect();
    close(&ctx.values(&y).unwrap(), &want, "relu(w x + b)");
}

#[test]
fn inline_parameters_take_values_inits_and_axes() {
    let graph = Graph::new();
    let x = data(&graph, "x", "|->2", &[1.0, 2.0]);
    let y = op! { { m = [(1.0, 2.0), (3.0, 4.0)] } * x + { k = Init::Constant(0.5); o = [2] } };
    let z = op! { { n = 2; i = [2]; o = [3]; precision = Precision::F64 } * x };
    settle(&graph);
    let [m, k, n] = [0, 1, 2].map(|i| graph.params()[i].clone());
    assert_eq!(m.shape(), "|2->2");
    assert_eq!(k.shape(), "|->2");
    assert_eq!(n.shape(), "|2->3");
    assert_eq!(n.precision(), Precision::F64);
    close(&forward(&graph, &y), &[5.5, 11.5], "m x + k");
    close(&forward(&graph, &z), &[6.0; 3], "n x");
}

#[test]
fn array_literals_give_axes_by_bracket_kind() {
    let graph = Graph::new();
    let matrix = op! { in graph; [(1.0, 2.0, 3.0), (4.0, 5.0, 6.0)] };
    assert_eq!(matrix.shape(), "|3->2");
    let batch = op! { in graph; vec![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]] };
    assert_eq!(batch.shape(), "3|->2");
    let column = op! { in graph; [[1.5], [-2.5]] };
    assert_eq!(column.shape(), "|->2,1");
    let applied = op! { matrix * [1.0, 0.0, -1.0] };
    close(
        &forward(&graph, &applied),
        &[-2.0, -2.0],
        "matrix times vector",
    );
    close(
        &forward(&graph, &batch),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "cells in memory order",
    );
}

#[test]
fn annotated_literals_name_the_bases_of_their_axes() {
    let graph = Graph::new();
    let rgb = op! { in graph; ([1.0, 2.0, 3.0] : rgb) };
    assert_eq!(rgb.shape(), "|->3@rgb");
    let features = op! { in graph; ((1.0, 2.0) : feat) };
    assert_eq!(features.shape(), "|2@feat->");
    // Annotations compose with nesting; unannotated axes keep `default`.
    let matrix = op! { in graph; [((1.0, 2.0) : feat), ((3.0, 4.0) : feat)] };
    assert_eq!(matrix.shape(), "|2@feat->2");
    let both = op! { in graph; ([((1.0, 2.0) : feat), ((3.0, 4.0) : feat)] : out) };
    assert_eq!(both.shape(), "|2@feat->2@out");
    let examples = op! { in graph; (vec![[1.0], [2.0], [3.0]] : examples) };
    assert_eq!(examples.shape(), "3@examples|->1");
    let scalar = op! { in graph; (2.0 : q) };
    assert_eq!(scalar.shape(), "|->1@q");
    let unnamed = op! { in graph; ([1.0, 2.0] : default) };
    assert_eq!(unnamed.shape(), "|->2");
    // The same rows as the shape literal spelling the bases.
    let spelled = graph
        .data("spelled")
        .shape("|2@feat->2@out")
        .values(vec![1.0, 2.0, 3.0, 4.0])
        .build();
    assert_eq!(spelled.shape(), both.shape());
    let w = op! { in graph; { w = ([0.5, -0.5] : rgb) } };
    assert_eq!(w.shape(), "|->2@rgb");
    graph.check().unwrap();
    close(
        &forward(&graph, &both),
        &[1.0, 2.0, 3.0, 4.0],
        "an annotated literal's cells",
    );
}

#[test]
fn annotated_literals_meet_tensors_of_the_same_basis() {
    let graph = Graph::new();
    let x = data(&graph, "x", "3@rgb", &[1.0, 2.0, 3.0]);
    let y = op! { pmul(([1.0, 2.0, 3.0] : rgb), x) };
    let z = op! { ([10.0, 20.0, 30.0] : rgb) + x };
    let m = data(&graph, "m", "|3@rgb->2", &[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    let applied = op! { m * ([1.0, 2.0, 3.0] : rgb) };
    settle(&graph);
    assert_eq!(y.shape(), "|->3@rgb");
    assert_eq!(applied.shape(), "|->2");
    close(&forward(&graph, &y), &[1.0, 4.0, 9.0], "rgb times rgb");
    close(&forward(&graph, &z), &[11.0, 22.0, 33.0], "rgb plus rgb");
    close(&forward(&graph, &applied), &[1.0, 5.0], "a matrix applied");
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let f = ctx.forward(&[&z]).unwrap();
    ctx.run(&f).unwrap();
    let printed = ctx.print(&z, &PrintOptions::default()).unwrap();
    assert!(printed.contains("o0@rgb"), "{printed}");
}

#[test]
fn a_literal_of_another_basis_is_a_shape_error_naming_the_tensors() {
    for (shape, other) in [("3@hsv", "hsv"), ("3", "default")] {
        let graph = Graph::new();
        let x = data(&graph, "x", shape, &[1.0, 2.0, 3.0]);
        let _ = op! { ([1.0, 2.0, 3.0] : rgb) + x };
        let message = graph.check().unwrap_err().message;
        assert!(message.contains("do not broadcast"), "{shape}: {message}");
        assert!(
            message.contains("'x'") && message.contains("'[1.0, 2.0, 3.0] : rgb'"),
            "{shape}: {message}"
        );
        assert!(
            message.contains("3@rgb") && (other == "default" || message.contains(other)),
            "{shape}: {message}"
        );
    }
}

#[test]
fn brackets_of_tensors_stack_them() {
    let graph = Graph::new();
    let a = data(&graph, "a", "|->2", &[1.0, 2.0]);
    let b = data(&graph, "b", "|->2", &[3.0, 4.0]);
    let rows = op! { [a, b] };
    let columns = op! { (a, b + 1.0) };
    let batch = op! { vec![a, b] };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let f = ctx.forward(&[&rows, &columns]).unwrap();
    ctx.run(&f).unwrap();
    assert_eq!(ctx.rows(&rows).unwrap(), [vec![], vec![], vec![2, 2]]);
    assert_eq!(ctx.rows(&columns).unwrap(), [vec![], vec![2], vec![2]]);
    assert_eq!(ctx.rows(&batch).unwrap(), [vec![2], vec![], vec![2]]);
    close(
        &ctx.values(&rows).unwrap(),
        &[1.0, 2.0, 3.0, 4.0],
        "stacked rows",
    );
    // Memory order is output, then input: column j of output row o.
    close(
        &ctx.values(&columns).unwrap(),
        &[1.0, 4.0, 2.0, 5.0],
        "stacked columns",
    );
}

#[test]
fn numbers_fold_and_powers_bind_tighter_than_products() {
    let graph = Graph::new();
    let x = data(&graph, "x", "|->3", &[1.0, -2.0, 0.5]);
    let scale = 2.0;
    let y = op! { scale ** 2 * x ** 2 - -x ** 2 / 2 + 1 };
    let want: Vec<f64> = [1.0f64, -2.0, 0.5]
        .iter()
        .map(|x| 4.0 * x * x + x * x / 2.0 + 1.0)
        .collect();
    close(&forward(&graph, &y), &want, "4x² + x²/2 + 1");
}

#[test]
fn primitives_are_called_by_name_with_optional_specs() {
    let graph = Graph::new();
    let x = data(&graph, "x", "|->3", &[1.0, -2.0, 0.5]);
    let m = data(&graph, "m", "|->2,3", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let n = data(&graph, "n", "|->3,2", &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let gated = op! { where_(x > 0.0, exp(x), max(x, -1.0)) };
    close(
        &forward(&graph, &gated),
        &[1f64.exp(), -1.0, 0.5f64.exp()],
        "where_, exp, max",
    );
    let product = op! { einsum("ij;jk=>ik", m, n) };
    close(
        &forward(&graph, &product),
        &[4.0, 5.0, 10.0, 11.0],
        "einsum",
    );
    let transposed = op! { neg("ij=>ji", m) };
    close(
        &forward(&graph, &transposed),
        &[-1.0, -4.0, -2.0, -5.0, -3.0, -6.0],
        "a unary spec",
    );
    let three = op! { einsum("i;i;i=>", x, x, x) };
    close(
        &forward(&graph, &three),
        &[1.0 - 8.0 + 0.125],
        "three operands",
    );
    let fused = op! { fma(x, x, 1.0) + pmul(x, x) == 3.0 };
    close(&forward(&graph, &fused), &[1.0, 0.0, 0.0], "fma, pmul, ==");
    let differs = op! { x != 1 };
    close(&forward(&graph, &differs), &[0.0, 1.0, 1.0], "!=");
    let method = op! { (x * 2.0).relu() };
    close(&forward(&graph, &method), &[2.0, 0.0, 1.0], "a method");
}

#[test]
fn let_bindings_and_their_parameters_land_in_the_enclosing_scope() {
    let graph = Graph::new();
    let x = data(&graph, "x", "4|->2", &[0.0; 8]);
    op! {
        let hidden = tanh({ w1; o = [5] } * x + { b1 });
        let out = { w2; o = [1] } * hidden;
    }
    settle(&graph);
    assert_eq!(w1.shape(), "|2->5");
    assert_eq!(b1.shape(), "|->5");
    assert_eq!(w2.shape(), "|5->1");
    assert_eq!(hidden.shape(), "4|->5");
    assert_eq!(out.shape(), "4|->1");
}

op! {
    /// One layer whose parameters every application on a graph shares.
    fn shared(x) { sigmoid_like({ w; o = [2] } * x) }
}

op! {
    /// A new layer per call, its parameters labelled after `label`.
    fn dense(label: &str, width: usize, x) { { w } * x + { b = 0.0; o = [width] } }
}

/// A plain Rust function called inside op!.
fn sigmoid_like(t: &Tensor) -> Tensor {
    op! { 0.5 + 0.5 * tanh(t / 2) }
}

#[test]
fn functions_share_or_make_parameters_as_ocannl_does() {
    let graph = Graph::new();
    let x = data(&graph, "x", "3|->4", &[0.0; 12]);
    let y = shared(&x);
    let z = shared(&op! { 2 * x });
    assert_eq!(graph.params().len(), 1, "one w for both applications");

    let other = Graph::new();
    let u = data(&other, "u", "|->4", &[0.0; 4]);
    shared(&u);
    assert_eq!(other.params().len(), 1, "a graph of its own gets its own w");

    let (first, second) = (dense("first", 3), dense("second", 1));
    let h = second(&first(&x));
    let again = second(&first(&x));
    settle(&graph);
    assert_eq!(y.shape(), "3|->2");
    assert_eq!(z.shape(), "3|->2");
    let labels: Vec<String> = graph.params().iter().map(Tensor::label).collect();
    assert_eq!(labels, ["w", "first.w", "first.b", "second.w", "second.b"]);
    assert_eq!(h.shape(), "3|->1");
    assert_eq!(again.shape(), "3|->1");
}

#[test]
fn shape_errors_point_at_the_operator() {
    let graph = Graph::new();
    let a = data(&graph, "a", "|->3", &[0.0; 3]);
    let b = data(&graph, "b", "|->4", &[0.0; 4]);
    let line = line!() + 1;
    let sum = op! { relu(a) + b };
    let e = sum.error().expect("3 and 4 do not broadcast");
    let at = format!("{}:{line}:", file!());
    assert!(e.message.contains(&at), "{e}");
    assert_eq!(graph.check().unwrap_err(), e);
}

#[test]
fn an_expression_without_tensors_needs_its_graph_named() {
    let y = op! { 1.0 + 2.0 };
    let e = y.error().or_else(|| y.graph().check().err()).unwrap();
    assert!(e.message.contains("op! { in graph;"), "{e}");
    let graph = Graph::new();
    let z = op! { in graph; 1.0 + 2.0 };
    assert!(graph.check().is_ok());
    close(&forward(&graph, &z), &[3.0], "a constant");
}

#[test]
fn cd_updates_accumulate_as_their_operators_say() {
    let graph = Graph::new();
    let p = data(&graph, "p", "|->3", &[1.0, -2.0, 4.0]);
    let q = data(&graph, "q", "|->3", &[2.0, 0.5, -1.0]);
    let n = data(&graph, "n", "|->1", &[0.0]);
    let step = 0.5;
    let cases: Vec<(Vec<rcannl_tensor::Update>, &Tensor, Vec<f64>)> = vec![
        (cd! { p =: q * 2 }, &p, vec![4.0, 1.0, -2.0]),
        (cd! { p =+ q }, &p, vec![3.0, -1.5, 3.0]),
        (cd! { p =- step * q }, &p, vec![0.0, -2.25, 4.5]),
        (cd! { p =* q }, &p, vec![2.0, -1.0, -4.0]),
        (cd! { p =/ q }, &p, vec![0.5, -4.0, -4.0]),
        (cd! { p =** 2 }, &p, vec![1.0, 4.0, 16.0]),
        (cd! { p =max q }, &p, vec![2.0, 0.5, 4.0]),
        (cd! { p =@^ q }, &p, vec![2.0, 0.5, 4.0]),
        (cd! { p =min q }, &p, vec![1.0, -2.0, -1.0]),
        (cd! { p =@- q }, &p, vec![1.0, -2.0, -1.0]),
        (cd! { n =:+ q * q }, &n, vec![5.25]),
        (cd! { n =:max q }, &n, vec![2.0]),
        (cd! { n =:min p }, &n, vec![-2.0]),
        (cd! { n =:* q }, &n, vec![-1.0]),
        (cd! { p =: 2 * q ~logic: "." }, &p, vec![4.0, 1.0, -2.0]),
        (cd! { p =?/ q }, &p, vec![2.0, 0.0, -1.0]),
        (cd! { p =&& q - 0.5 }, &p, vec![1.0, 0.0, 1.0]),
        (cd! { p =|| q - 0.5 }, &p, vec![1.0, 1.0, 1.0]),
        (
            cd! { p =: relu_gate(p, q) + where_(q < 0, 10, 0) },
            &p,
            vec![2.0, 0.0, 9.0],
        ),
        (cd! { p =: fma(p, q, 1) % 3 }, &p, vec![0.0, 0.0, 0.0]),
        (
            cd! { p =: max(p, 0) ** 2 - -q ** 2 },
            &p,
            vec![5.0, 0.25, 17.0],
        ),
    ];
    for (i, (updates, target, want)) in cases.into_iter().enumerate() {
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        let routine = ctx.update(&updates).unwrap();
        ctx.run(&routine).unwrap();
        close(&ctx.values(target).unwrap(), &want, &format!("case {i}"));
    }
}

#[test]
fn cd_updates_read_gradients_and_run_in_sequence() {
    for backend in backends() {
        let graph = Graph::new();
        let p = graph
            .param("p")
            .shape("2")
            .precision(Precision::F64)
            .init(Init::Values(vec![1.0, -3.0]))
            .build();
        let m = graph
            .data("m")
            .shape("2")
            .precision(Precision::F64)
            .values(vec![0.5, 0.5])
            .build();
        let loss = op! { p ** 2 };
        let updates = cd! {
            m =: 0.9 * m + p.grad;
            p =- 0.1 * m;
        };
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let step = ctx.train_step(&loss, &updates).unwrap();
        ctx.run(&step).unwrap();
        // grad = 2p = [2, −6]; m = [0.45 + 2, 0.45 − 6]; p −= 0.1 m.
        close(&ctx.values(&m).unwrap(), &[2.45, -5.55], "momentum");
        close(&ctx.values(&p).unwrap(), &[0.755, -2.445], "step");
    }
}

cd! {
    /// `log(1 + eˣ)`, its derivative the logistic function.
    fn softplus(x) {
        v =: log(1 + exp(v1));
        g1 =+ g / (1 + exp(-v1));
    }

    /// A matrix product: `a`'s input axes with `b`'s output axes, summed.
    fn product(a, b) {
        v =:+ v1 * v2 ~logic: "@";
        g1 =+ g * v2;
        g2 =+ v1 * g;
    }

    /// Every sum `a_i + b_j`, as a spec lays it out.
    fn sums(a, b) {
        v =:+ a + b ~logic: "i;j=>ij";
        g1 =+ g;
        g2 =- -g;
    }

    /// A leaky rectifier with its slope as a configuration argument.
    fn leaky(x, slope: f64) {
        v =: where_(x > 0, x, slope * x);
        g1 =+ where_(v1 > 0, g, slope * g);
    }

    /// The largest cell of each row, its gradient to where it was reached.
    fn row_max(x) {
        v =:max v1 ~logic: "ij=>i";
        g1 =+ where_(v1 == v, g, 0);
    }
}

#[test]
fn operations_defined_with_cd_pass_the_finite_difference_check() {
    type Build = fn(&Graph, &[Tensor]) -> Tensor;
    let cases: [(&str, &[&str], bool, Build); 5] = [
        ("softplus", &["2,3"], false, |_, p| softplus(&p[0])),
        ("product", &["|3->2", "|4->3"], false, |_, p| {
            product(&p[0], &p[1])
        }),
        ("sums", &["3", "4"], false, |_, p| sums(&p[0], &p[1])),
        ("leaky", &["7"], false, |_, p| leaky(&p[0], 0.1)),
        ("row_max", &["3,4"], false, |_, p| row_max(&p[0])),
    ];
    for (name, shapes, positive, build) in cases {
        for backend in backends() {
            let on = backend.name();
            let inputs = Inputs { shapes, positive };
            check_gradients(backend, &inputs, 1e-5, build)
                .unwrap_or_else(|e| panic!("{name} on {on}: {e}"));
        }
    }
}

#[test]
fn a_defined_contraction_equals_the_builder_composition() {
    let graph = Graph::new();
    let a = data(&graph, "a", "|3->2", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = data(&graph, "b", "|2->3", &[1.0, -1.0, 0.5, 2.0, 0.0, 1.0]);
    let defined = product(&a, &b);
    let composed = &a * &b;
    settle(&graph);
    assert_eq!(defined.shape(), composed.shape());
    close(
        &forward(&graph, &defined),
        &forward(&graph, &composed),
        "a·b",
    );
}

#[test]
fn cd_logic_gives_the_projections_and_shapes_intermediates() {
    for backend in backends() {
        let on = backend.name();
        let graph = Graph::new();
        let a = data(&graph, "a", "|3->2", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = data(&graph, "b", "|2->3", &[1.0, -1.0, 0.5, 2.0, 0.0, 1.0]);
        let c = graph.data("c").precision(Precision::F64).build();
        let t = graph.data("t").precision(Precision::F64).build();
        let r = graph.data("r").precision(Precision::F64).build();
        let spec = "j->i=>i";
        let updates = cd! {
            c =:+ a * b ~logic: "@";
            t =: a ~logic: "T";
            r =:max a ~logic: spec;
            { twice } =: 2 * c;
            c =+ twice;
        };
        let composed = &a * &b;
        let mut ctx = Context::with_backend(&graph, backend);
        let run = ctx.update(&updates).unwrap();
        let f = ctx.forward(&[&composed]).unwrap();
        ctx.run(&run).unwrap();
        ctx.run(&f).unwrap();
        let product = ctx.values(&composed).unwrap();
        let tripled: Vec<f64> = product.iter().map(|x| 3.0 * x).collect();
        close(&ctx.values(&c).unwrap(), &tripled, &format!("{on}: c"));
        close(
            &ctx.values(&t).unwrap(),
            &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
            &format!("{on}: transposed"),
        );
        close(
            &ctx.values(&r).unwrap(),
            &[3.0, 6.0],
            &format!("{on}: row maxima"),
        );
        assert_eq!(c.shape(), "|2->2");
        assert_eq!(t.shape(), "|2->3");
    }
}

#[test]
fn errors_found_when_shapes_close_point_at_the_expression_too() {
    let graph = Graph::new();
    let x = data(&graph, "x", "|->3", &[0.0; 3]);
    let line = line!() + 1;
    let y = op! { { w } * x };
    assert!(y.error().is_none());
    let e = Context::with_backend(&graph, Box::new(Interpreter))
        .init_params()
        .expect_err("w's output size is given by nothing");
    let at = format!("{}:{line}:", file!());
    assert!(e.message.contains(&at), "{e}");
}

#[test]
fn a_sign_after_a_spaced_set_belongs_to_the_formula() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2").values(vec![3.0, 4.0]).build();
    let y = graph.data("y").shape("2").values(vec![1.0, 1.0]).build();
    let set = graph.data("set").shape("2").values(vec![9.0; 2]).build();
    let subtracted = graph
        .data("subtracted")
        .shape("2")
        .values(vec![9.0; 2])
        .build();
    let updates = cd! { set =: -x + y; subtracted =:- x + y };
    for backend in backends() {
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.update(&updates).unwrap();
        ctx.run(&routine).unwrap();
        // `=: -x + y` sets (−x) + y; `=:- x + y` starts from 0 and subtracts x + y.
        assert_eq!(ctx.values(&set).unwrap(), vec![-2.0, -3.0]);
        assert_eq!(ctx.values(&subtracted).unwrap(), vec![-4.0, -5.0]);
    }
}
