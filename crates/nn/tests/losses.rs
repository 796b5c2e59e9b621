//! Means and the hinge loss count the cells they average from the shapes, on both backends.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_nn::loss::{hinge, mean};
use rcannl_tensor::{Context, Graph};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn the_mean_of_eight_cells_divides_by_eight() {
    for backend in backends() {
        let graph = Graph::new();
        let d = graph
            .data("d")
            .shape("2|->4")
            .values((1..=8).map(f64::from).collect())
            .build();
        let m = mean(&d);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&m]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&m).unwrap(), vec![4.5]);
    }
}

#[test]
fn the_hinge_loss_averages_over_the_examples() {
    for backend in backends() {
        let graph = Graph::new();
        let scores = graph
            .data("scores")
            .shape("4|->1")
            .values(vec![2.0, 0.5, -1.0, -3.0])
            .build();
        let labels = graph
            .data("labels")
            .shape("4|->1")
            .values(vec![1.0, 1.0, 1.0, -1.0])
            .build();
        let loss = hinge(&scores, &labels);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&loss]).unwrap();
        ctx.run(&forward).unwrap();
        // max(0, 1 − y·f): 0, 0.5, 2, 0.
        assert_eq!(ctx.values(&loss).unwrap(), vec![2.5 / 4.0]);
    }
}
