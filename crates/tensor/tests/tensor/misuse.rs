//! Misuse of the library gives errors naming what was wrong, never a silent stand-in: tensors,
//! static indices and captures of another graph.

use rcannl_backends::Interpreter;
use std::error::Error as _;

use rcannl_tensor::{Context, Formula, Graph, TensorErrorKind, Update};

fn contains(result: Result<impl std::fmt::Debug, rcannl_tensor::TensorError>, part: &str) {
    match result {
        Ok(v) => panic!("expected an error containing {part:?}, got Ok({v:?})"),
        Err(e) => assert!(e.message.contains(part), "{:?} lacks {part:?}", e.message),
    }
}

#[test]
fn a_context_refuses_the_tensors_of_another_graph() {
    let first = Graph::new();
    let x = first
        .data("x")
        .shape("3")
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let y = &x + 1.0;
    let second = Graph::new();
    let z = second
        .data("z")
        .shape("3")
        .values(vec![7.0, 8.0, 9.0])
        .build();
    let mut ctx = Context::with_backend(&first, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.run(&forward).unwrap();
    // `z` is the first tensor of its graph, as `x` is of this one: it must not read `x`.
    contains(ctx.values(&z), "'z' belongs to another graph");
    contains(ctx.cells(&z), "another graph");
    contains(ctx.set_values(&z, &[0.0, 0.0, 0.0]), "another graph");
    contains(ctx.dims(&z), "another graph");
    contains(ctx.grad(&z), "another graph");
    assert_eq!(ctx.values(&x).unwrap(), vec![1.0, 2.0, 3.0]);
    contains(
        ctx.forward(&[&z]),
        "forward: tensor 'z' belongs to another graph",
    );
    contains(ctx.backprop(&z), "another graph");
    contains(ctx.zero_grads(&[&z]), "another graph");
    contains(
        ctx.update(&[Update::set(&x, Formula::value(&z))]),
        "update of 'x': tensor 'z' belongs to another graph",
    );
    contains(
        ctx.update(&[Update::set(&z, Formula::value(&x))]),
        "another graph",
    );
}

#[test]
fn an_operation_over_two_graphs_fails() {
    let first = Graph::new();
    let a = first.data("a").shape("2").values(vec![1.0, 2.0]).build();
    let second = Graph::new();
    let b = second.data("b").shape("2").values(vec![10.0, 20.0]).build();
    let sum = &a + &b;
    let message = sum.error().expect("a failed tensor").message;
    assert!(
        message.contains("tensor 'b' belongs to another graph"),
        "{message}"
    );
    contains(first.check(), "another graph");
    let mut ctx = Context::with_backend(&first, Box::new(Interpreter));
    contains(ctx.forward(&[&sum]), "another graph");
    // Einsum, composition and concatenation go through the same check.
    assert!(a.einsum("i;i=>i", &b).error().is_some());
    assert!(rcannl_tensor::Tensor::stack(&[&a, &b]).error().is_some());
}

#[test]
fn static_indices_and_captures_belong_to_their_graph() {
    let first = Graph::new();
    let batch = first
        .data("batch")
        .shape("4|2")
        .values(vec![0.0; 8])
        .build();
    let second = Graph::new();
    let other = second
        .data("other")
        .shape("4|2")
        .values(vec![0.0; 8])
        .build();
    let at = second.static_index();
    let sliced = batch.slice(&at);
    contains(first.check(), "static index belongs to another graph");
    assert!(sliced.error().is_some());

    let summed = other.einsum1("i|j=>j");
    let capture = summed.capture("i").unwrap();
    contains(
        first.set_dim(&capture, 4),
        "set_dim: the capture 'i' belongs to another graph",
    );
    assert_eq!(first.capture_value(&capture), None);
    assert!(first.dim(&capture).error().is_some());

    let fresh = Graph::new();
    let w = fresh.data("w").shape("4|2").values(vec![1.0; 8]).build();
    let own = fresh.static_index();
    let row = w.slice(&own);
    let mut ctx = Context::with_backend(&fresh, Box::new(Interpreter));
    let forward = ctx.forward(&[&row]).unwrap();
    contains(ctx.run_with(&forward, &[(at, 0)]), "another graph");
    ctx.run_with(&forward, &[(own, 1)]).unwrap();
    assert_eq!(ctx.values(&row).unwrap(), vec![1.0, 1.0]);
}

#[test]
fn a_product_into_a_concatenation_is_refused_not_zero() {
    let graph = Graph::new();
    let a = graph.data("a").shape("2").values(vec![1.0, 2.0]).build();
    let b = graph
        .data("b")
        .shape("3")
        .values(vec![10.0, 20.0, 30.0])
        .build();
    // Where the result's `a` component is written, `b` has no cell to multiply by.
    let product = a.einsum("a;b=>a^b", &b);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    contains(ctx.forward(&[&product]), "operand 2 is not read");
    // Concatenation is the operation that joins them.
    let joined = rcannl_tensor::Tensor::concat("a;b=>a^b", &[&a, &b]);
    let forward = ctx.forward(&[&joined]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(
        ctx.values(&joined).unwrap(),
        vec![1.0, 2.0, 10.0, 20.0, 30.0]
    );
}

#[test]
fn a_routine_reading_an_uninitialized_parameter_refuses_to_run() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(rcannl_tensor::Init::Constant(3.0))
        .build();
    let y = &w + 1.0;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    contains(
        ctx.run(&forward),
        "reads parameter 'w', which holds no values yet",
    );
    ctx.init_params().unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&y).unwrap(), vec![4.0, 4.0]);

    // A parameter added after init_params needs another call.
    let v = graph
        .param("v")
        .shape("2")
        .init(rcannl_tensor::Init::Constant(5.0))
        .build();
    let z = &y + &v;
    let forward = ctx.forward(&[&z]).unwrap();
    contains(ctx.run(&forward), "parameter 'v'");
    ctx.init_params().unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&z).unwrap(), vec![9.0, 9.0]);

    // Values set from the host count, and init_params leaves them.
    let u = graph.param("u").shape("2").build();
    let sum = &z + &u;
    let forward = ctx.forward(&[&sum]).unwrap();
    ctx.set_values(&u, &[0.5, 0.25]).unwrap();
    ctx.init_params().unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&sum).unwrap(), vec![9.5, 9.25]);
}

#[test]
fn a_routine_runs_only_in_its_own_context() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2").values(vec![1.0, 2.0]).build();
    let y = &x + 1.0;
    let mut first = Context::with_backend(&graph, Box::new(Interpreter));
    let mut second = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = first.forward(&[&y]).unwrap();
    second.forward(&[&y]).unwrap();
    contains(second.run(&forward), "compiled by another context");
}

#[test]
fn meaningless_inits_are_refused() {
    use rcannl_tensor::Init;
    for (init, problem) in [
        (Init::Uniform(1.0, -1.0), "needs low < high"),
        (Init::Uniform(0.0, f64::INFINITY), "finite bounds"),
        (Init::Uniform(f64::NAN, 1.0), "finite bounds"),
        (Init::Normal(0.0, -1.0), "deviation of at least 0"),
        (Init::Normal(f64::NAN, 1.0), "finite mean"),
        (Init::Constant(f64::NAN), "finite value"),
    ] {
        let graph = Graph::new();
        let w = graph.param("w").shape("2").init(init.clone()).build();
        let y = &w + 1.0;
        contains(graph.check(), problem);
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        contains(ctx.forward(&[&y]), "parameter 'w'");
    }
}

#[test]
fn a_tensor_too_large_for_memory_is_an_error_naming_it() {
    for literal in ["1000000,1000000", "4294967296,4294967296,16"] {
        let graph = Graph::new();
        let x = graph.data("x").shape(literal).build();
        let y = x.relu();
        let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
        contains(ctx.forward(&[&y]), "tensor 'x'");
    }
}

#[test]
fn an_uninitialized_parameter_has_no_values_to_read() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(rcannl_tensor::Init::Constant(3.0))
        .build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&w]).unwrap();
    contains(ctx.run(&forward), "reads parameter 'w'");
    contains(ctx.values(&w), "parameter 'w' holds no values yet");
    contains(ctx.cells(&w), "holds no values yet");
    ctx.init_params().unwrap();
    assert_eq!(ctx.values(&w).unwrap(), vec![3.0, 3.0]);
}

#[test]
fn an_einsum_of_many_operands_refuses_two_graphs() {
    let first = Graph::new();
    let a = first.data("a").shape("2,2").values(vec![1.0; 4]).build();
    let b = first.data("b").shape("2,2").values(vec![1.0; 4]).build();
    let second = Graph::new();
    let c = second.data("c").shape("2,2").values(vec![1.0; 4]).build();
    let product = rcannl_tensor::Tensor::einsum_n("i,j;j,k;k,l=>i,l", &[&a, &b, &c]);
    let message = product.error().expect("a failed tensor").message;
    assert!(
        message.contains("tensor 'c' belongs to another graph"),
        "{message}"
    );
    contains(
        rcannl_tensor::Tensor::einsum_path("i,j;j,k;k,l=>i,l", &[&a, &b, &c]),
        "another graph",
    );
}

#[test]
fn an_einsum_of_no_operands_reports_its_own_error() {
    // With no operand there is no graph to hold the error: the tensor standing for it belongs
    // to none, and using it must still say what went wrong, not only that it is foreign.
    let empty = rcannl_tensor::Tensor::einsum_np("", &[]);
    let graph = Graph::new();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    contains(ctx.forward(&[&empty]), "numpy einsum");
    let also = rcannl_tensor::Tensor::einsum_n("=>", &[]);
    contains(ctx.forward(&[&also]), "einsum");
}

#[test]
fn a_computed_tensor_no_routine_computed_has_no_values_to_read() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("4")
        .values(vec![0.0, 1.0, 2.0, 3.0])
        .build();
    let y = x.exp();
    let other = &x + 1.0;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&other]).unwrap();
    ctx.run(&forward).unwrap();
    contains(ctx.values(&y), "holds no values yet");
    contains(ctx.values(&y), &format!("'{}'", y.label()));
    contains(ctx.cells(&y), "forward(&[&");
    contains(ctx.array(&y), "holds no values yet");
    // Once a routine computing it has run, it reads.
    let exp = ctx.forward(&[&y]).unwrap();
    ctx.run(&exp).unwrap();
    let expected: Vec<f64> = (0..4).map(|i| (i as f32).exp() as f64).collect();
    assert_eq!(ctx.values(&y).unwrap(), expected);
}

#[test]
fn an_update_reading_a_computed_tensor_computes_it() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("3")
        .values(vec![0.0, 1.0, 2.0])
        .build();
    let p = graph.data("p").shape("3").values(vec![9.0; 3]).build();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let update = ctx
        .update(&[Update::set(&p, Formula::value(&x.exp()) + 1.0)])
        .unwrap();
    ctx.run(&update).unwrap();
    let expected: Vec<f64> = (0..3).map(|i| ((i as f32).exp() + 1.0) as f64).collect();
    assert_eq!(ctx.values(&p).unwrap(), expected);
}

#[test]
fn a_data_tensor_never_given_values_is_an_error_not_zeros() {
    let graph = Graph::new();
    let x = graph.data("inputs").shape("3").build();
    let y = &x + 1.0;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    contains(
        ctx.run(&forward),
        "reads data tensor 'inputs', which holds no values yet",
    );
    contains(ctx.values(&x), "data tensor 'inputs' holds no values yet");
    // An update accumulating into it reads it too.
    let update = ctx.update(&[Update::add(&x, Formula::Const(1.0))]).unwrap();
    contains(ctx.run(&update), "data tensor 'inputs'");
    // Once set, everything runs.
    ctx.set_values(&x, &[1.0, 2.0, 3.0]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&y).unwrap(), vec![2.0, 3.0, 4.0]);
}

#[test]
fn a_gradient_no_backprop_has_computed_is_an_error_not_zeros() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(rcannl_tensor::Init::Constant(3.0))
        .build();
    let loss = rcannl_tensor::Tensor::einsum1(&w.pmul(&w), "i => ");
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    contains(ctx.grad(&w), "the gradient of 'w' holds no values yet");
    // An update reading it in a routine of its own refuses to run before a backprop has.
    let step = ctx
        .update(&[Update::subtract(&w, 0.1 * Formula::grad(&w))])
        .unwrap();
    contains(ctx.run(&step), "reads the gradient of 'w'");
    ctx.run(&backprop).unwrap();
    assert_eq!(ctx.grad(&w).unwrap(), vec![6.0, 6.0]);
    ctx.run(&step).unwrap();
    assert_eq!(ctx.values(&w).unwrap(), vec![f64::from(2.4f32); 2]);
}

#[test]
fn tensors_of_more_than_64_axes_are_refused_before_code_generation() {
    for (axes, accepted) in [(64, true), (65, false), (1000, false)] {
        let graph = Graph::new();
        let x = graph.data("x").shape(&vec!["1"; axes].join(",")).build();
        let y = &x + 1.0;
        // The C compiler is where thousands of nested indices would fail.
        let compiler = rcannl_backends::cc::Compiler::find().expect("a C compiler (cc or $CC)");
        let mut ctx = Context::with_backend(&graph, Box::new(compiler));
        let started = std::time::Instant::now();
        match ctx.forward(&[&y]) {
            Ok(_) => assert!(accepted, "{axes} axes compiled"),
            Err(e) => {
                let expected = format!("'x' has {axes} axes, more than the 64 supported");
                assert!(
                    !accepted && e.message.contains(&expected),
                    "{axes}: {}",
                    &e.message[..e.message.len().min(300)]
                );
            }
        }
        assert!(
            started.elapsed().as_secs() < 10,
            "{axes}: {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_static_index_is_named_by_what_it_slices_not_by_its_symbol() {
    let compiler = || rcannl_backends::cc::Compiler::find().expect("a C compiler (cc or $CC)");
    let backends: [Box<dyn rcannl_backends::Backend>; 2] =
        [Box::new(Interpreter), Box::new(compiler())];
    for backend in backends {
        let graph = Graph::new();
        let batches = graph
            .data("batches")
            .shape("4|->3")
            .values((0..12).map(f64::from).collect())
            .build();
        let at = graph.static_index();
        let doubled = 2.0 * &batches.slice(&at);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&doubled]).unwrap();
        for (given, part) in [(None, "no value given"), (Some(4), "is 4, outside 0..4")] {
            let statics: Vec<_> = given.map(|value| (at, value)).into_iter().collect();
            let e = ctx.run_with(&forward, &statics).unwrap_err().message;
            assert!(e.contains(part), "{e}");
            assert!(e.contains("the static index slicing 'batches'"), "{e}");
            assert!(!e.contains("s1073741824"), "{e}");
        }
    }
}

#[test]
fn errors_say_what_kind_of_problem_they_are() {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("2")
        .init(rcannl_tensor::Init::Constant(3.0))
        .build();
    let y = &w + 1.0;
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y]).unwrap();
    // Values not set yet: running the routine, or reading them.
    assert_eq!(
        ctx.run(&forward).unwrap_err().kind,
        TensorErrorKind::NoValues
    );
    assert_eq!(ctx.values(&y).unwrap_err().kind, TensorErrorKind::NoValues);
    assert_eq!(ctx.grad(&w).unwrap_err().kind, TensorErrorKind::NoValues);

    // Shapes that cannot agree: the shape error is the source.
    let shapes = Graph::new();
    let a = shapes.data("a").shape("2").build();
    let b = shapes.data("b").shape("3").build();
    let error = (&a + &b).error().expect("2 and 3 cannot broadcast");
    assert_eq!(error.kind, TensorErrorKind::Shape);
    let source = error.source().expect("the shape error is the source");
    assert_eq!(source.to_string(), error.message);

    // A tensor of another graph is misuse.
    let other = Graph::new().data("z").shape("2").build();
    assert_eq!(
        ctx.values(&other).unwrap_err().kind,
        TensorErrorKind::Misuse
    );

    // A file that cannot be read: the `.npy` error is the source, the io error its own.
    let missing = std::env::temp_dir().join("rcannl-no-such-file.npy");
    let error = ctx.load_npy(&w, &missing).unwrap_err();
    assert_eq!(error.kind, TensorErrorKind::Io);
    let npy = error.source().expect("the .npy error is the source");
    assert!(npy.source().is_some(), "the file system's error is kept");
}
