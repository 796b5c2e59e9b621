//! Captures of an einsum made along a contraction path: every label and row variable of the
//! spec is captured on the result, also those the path sums out of one operand first or
//! contracts away before its last step, with its size read and constrained as for any capture.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Tensor};

/// The backends every einsum here runs on.
fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// An f64 data tensor of output axes `shape`, each cell its flat offset.
fn counting(graph: &Graph, label: &str, shape: &[usize]) -> Tensor {
    let cells: usize = shape.iter().product();
    let literal: Vec<String> = shape.iter().map(usize::to_string).collect();
    graph
        .data(label)
        .shape(&literal.join(","))
        .precision(Precision::F64)
        .values((0..cells).map(|v| v as f64).collect())
        .build()
}

#[test]
fn labels_and_row_variables_summed_before_the_last_step_are_captured() {
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let a = counting(&graph, "a", &[2, 3, 4]);
        let b = counting(&graph, "b", &[3, 5]);
        // `y` and `..s..` are each on one operand only: the path sums them out of it first.
        let out = Tensor::einsum_n("x, ..r.., y; ..s.., z => x, ..r.., z", &[&a, &b]);
        let names = ["x", "r", "y", "s", "z"];
        let captures: Vec<_> = names
            .iter()
            .map(|n| {
                out.capture(n)
                    .unwrap_or_else(|e| panic!("capture {n} on {name}: {e}"))
            })
            .collect();
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&out]).unwrap();
        ctx.run(&forward).unwrap();
        let sizes: Vec<Option<usize>> = captures.iter().map(|c| graph.capture_value(c)).collect();
        assert_eq!(
            sizes,
            [Some(2), Some(3), Some(4), Some(3), Some(5)],
            "{names:?} on {name}"
        );
        // out[x, r, z] = (Σ_y a[x, r, y]) · (Σ_s b[s, z]).
        let mut expected = Vec::new();
        for x in 0..2 {
            for r in 0..3 {
                for z in 0..5 {
                    let row: usize = (0..4).map(|y| (x * 3 + r) * 4 + y).sum();
                    let column: usize = (0..3).map(|s| s * 5 + z).sum();
                    expected.push((row * column) as f64);
                }
            }
        }
        assert_eq!(ctx.values(&out).unwrap(), expected, "on {name}");
    }
}

#[test]
fn labels_contracted_in_an_earlier_step_are_captured() {
    let graph = Graph::new();
    let m: Vec<Tensor> = [[2, 3], [3, 4], [4, 2]]
        .iter()
        .enumerate()
        .map(|(i, shape)| counting(&graph, &format!("m{i}"), shape))
        .collect();
    let out = Tensor::einsum_np("ij,jk,kl->il", &[&m[0], &m[1], &m[2]]);
    let j = out.capture("j").unwrap();
    let k = out.capture("k").unwrap();
    // A `...` the path sums away, by its kind's name.
    let v = counting(&graph, "v", &[2, 3, 4]);
    let w = counting(&graph, "w", &[4, 5]);
    let summed = Tensor::einsum_n("..., i; i, j => j", &[&v, &w]);
    let dots = summed.capture("output").unwrap();
    graph.check().unwrap();
    assert_eq!(graph.capture_value(&j), Some(3));
    assert_eq!(graph.capture_value(&k), Some(4));
    assert_eq!(graph.capture_value(&dots), Some(6));
}

#[test]
fn a_label_summed_before_the_last_step_can_be_set() {
    let graph = Graph::new();
    let a = counting(&graph, "a", &[2, 3]);
    // Nothing but the capture gives `k`, which only `b` has.
    let b = graph.param("b").precision(Precision::F64).build();
    let out = Tensor::einsum_n("i, j; j, k => i", &[&a, &b]);
    graph.set_dim(&out.capture("k").unwrap(), 5).unwrap();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    assert_eq!(ctx.dims(&b).unwrap(), [3, 5]);
    // Setting it again to another size is refused in the capture's terms.
    let again = graph.set_dim(&out.capture("k").unwrap(), 4).unwrap_err();
    assert!(again.message.contains("'k'"), "{}", again.message);
}

#[test]
fn a_name_no_step_has_is_refused_against_the_whole_spec() {
    let graph = Graph::new();
    let a = counting(&graph, "a", &[2, 3]);
    let b = counting(&graph, "b", &[3, 4]);
    let c = counting(&graph, "c", &[4, 2]);
    let out = Tensor::einsum_n("i, j; j, k; k, l => i, l", &[&a, &b, &c]);
    let message = out.capture("q").unwrap_err().message;
    assert!(
        message.contains("Variable 'q' not found in the spec") && message.contains("i, j, k, l"),
        "{message}"
    );
}
