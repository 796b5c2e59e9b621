//! Shapes from use: a two-layer network whose parameters get every size from the data and one
//! given width; the error when a hidden width is left out; errors recorded by operator sugar;
//! captured dimensions.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Init};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn a_network_infers_its_parameters_from_use() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("5|->3")
            .values((0..15).map(f64::from).collect())
            .build();
        let w1 = graph.param("w1").output([16]).build();
        let b1 = graph.param("b1").build();
        let w2 = graph.param("w2").output([2]).build();
        let b2 = graph.param("b2").build();
        let y = ((&w2 * &(&w1 * &x + &b1).relu()) + &b2).relu();
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        assert_eq!(w1.shape(), "|3->16");
        assert_eq!(b1.shape(), "|->16");
        assert_eq!(w2.shape(), "|16->2");
        assert_eq!(b2.shape(), "|->2");
        assert_eq!(y.shape(), "5|->2");
        let forward = ctx.forward(&[&y]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&y).unwrap().len(), 10);
        assert!(ctx.describe(&y).unwrap().starts_with("relu#"));
    }
}

#[test]
fn a_hidden_width_nobody_gives_is_an_error() {
    let graph = Graph::new();
    let x = graph.data("x").shape("5|->3").build();
    let w1 = graph.param("w1").build();
    let w2 = graph.param("w2").output([2]).build();
    let y = &w2 * &(&w1 * &x).relu();
    let mut ctx = Context::new(&graph);
    let error = ctx.forward(&[&y]).unwrap_err();
    assert!(
        error
            .message
            .contains("You forgot to specify the hidden dimension"),
        "{error}"
    );
}

#[test]
fn operator_sugar_records_shape_errors_for_compile_time() {
    let graph = Graph::new();
    let a = graph.data("a").shape("3").build();
    let b = graph.data("b").shape("4").build();
    let sum = &a + &b;
    let later = sum.relu();
    assert!(sum.error().is_some());
    assert!(
        later.error().is_some(),
        "what uses a failed tensor fails too"
    );
    let message = graph.check().unwrap_err().message;
    assert!(
        message.contains("'a'") && message.contains("'b'"),
        "{message}"
    );
    assert!(message.contains("3") && message.contains("4"), "{message}");
    let mut ctx = Context::new(&graph);
    assert_eq!(ctx.forward(&[&later]).unwrap_err().message, message);
}

#[test]
fn captured_dimensions_constrain_and_report_sizes() {
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .param("x")
            .shape("12")
            .init(Init::Values((0..12).map(f64::from).collect()))
            .build();
        // A max-pool of window 3, stride 3: four windows.
        let pooled = x.einmax1("3*o<+k=>o");
        let window = pooled.capture("k").unwrap();
        graph.set_dim(&window, 3).unwrap();
        let size = graph.dim(&window);
        let scaled = pooled.pmul(&size);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let forward = ctx.forward(&[&scaled]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(graph.capture_value(&window), Some(3));
        assert_eq!(ctx.values(&scaled).unwrap(), vec![6.0, 15.0, 24.0, 33.0]);
        assert!(pooled.capture("nope").is_err());
    }
}
