//! Means and the hinge loss count the cells they average from the shapes, on both backends;
//! cross-entropy takes probabilities of the logits' shape or class ids, never one for the other.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_nn::loss::{cross_entropy, cross_entropy_ids, hinge, mean};
use rcannl_tensor::{Context, Graph};

use crate::support;

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

#[test]
fn class_ids_given_as_probabilities_are_an_error_naming_the_loss_to_use() {
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let ids = graph
        .data("ids")
        .shape("2|->4")
        .values(vec![1.0; 8])
        .build();
    let e = cross_entropy(&logits, &ids).error().expect("an error");
    assert!(
        e.message.contains("cross_entropy(logits 'logits'")
            && e.message.contains("use loss::cross_entropy_ids"),
        "{}",
        e.message
    );
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let probabilities = graph
        .data("p")
        .shape("2|->4,4")
        .values(vec![0.25; 32])
        .build();
    let loss = cross_entropy_ids(&logits, &probabilities);
    let e = loss.error().expect("an error");
    assert!(
        e.message.contains("cross_entropy_ids(logits 'logits'")
            && e.message.contains("use loss::cross_entropy "),
        "{}",
        e.message
    );
    // The graph's first error is the same: a context compiling anything reports it.
    let e = Context::new(&graph).forward(&[&loss]).unwrap_err();
    assert!(e.message.contains("cross_entropy_ids("), "{}", e.message);
    // Ids of fewer axes are not broadcast either.
    let graph = Graph::new();
    let logits = graph
        .data("logits")
        .shape("2|->4,4")
        .values(vec![0.0; 32])
        .build();
    let ids = graph.data("ids").shape("2|->").values(vec![1.0; 2]).build();
    let e = cross_entropy_ids(&logits, &ids).error().expect("an error");
    assert!(e.message.contains("cross_entropy_ids("), "{}", e.message);
}

#[test]
fn cross_entropy_of_class_ids_is_log_sum_exp_minus_the_picked_logit() {
    let logits_values = rcannl_tensor::gradcheck::test_values(2 * 3 * 4, 7);
    let ids_values = vec![0.0, 3.0, 1.0, 2.0, 2.0, 0.0];
    let expected: Vec<f64> = logits_values
        .chunks(4)
        .zip(&ids_values)
        .map(|(row, id)| {
            let largest = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|x| (x - largest).exp()).sum();
            largest + sum.ln() - row[*id as usize]
        })
        .collect();
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let logits = support::data(&graph, "logits", "2|->3,4", logits_values.clone());
        let ids = graph
            .data("ids")
            .shape("2|->3")
            .values(ids_values.clone())
            .build();
        let loss = cross_entropy_ids(&logits, &ids);
        let equal_logits = graph
            .data("flat")
            .shape("2|->4,4")
            .values(vec![0.5; 32])
            .build();
        let flat_ids = graph
            .data("flat ids")
            .shape("2|->4")
            .values(vec![1.0; 8])
            .build();
        let uniform = mean(&cross_entropy_ids(&equal_logits, &flat_ids));
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&loss, &uniform]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&loss).unwrap(), vec![2, 3], "{name}");
        for (got, want) in ctx.values(&loss).unwrap().iter().zip(&expected) {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{name}: {got} vs {want}"
            );
        }
        let ln4 = ctx.values(&uniform).unwrap()[0];
        assert!((ln4 - 4f64.ln()).abs() < 1e-6, "{name}: {ln4}");
    }
    support::check("cross_entropy_ids", &["2|->3,4"], |graph, inputs| {
        let ids = graph
            .data("ids")
            .shape("2|->3")
            .precision(Precision::F64)
            .values(ids_values.clone())
            .build();
        cross_entropy_ids(&inputs[0], &ids).pmul(&support::weights(graph, "2|->3", 6))
    });
}
