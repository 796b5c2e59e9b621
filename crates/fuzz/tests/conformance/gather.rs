//! Gathers and their scatter-accumulate gradients on compiled backends against the interpreter,
//! in f32: repeated ids, ids that select no row (−1, past the vocabulary, fractions), ids of
//! several shapes, one-hot rows composed with a table, and a scatter of many positions into few
//! rows (a GPU's invocations split the width, never the positions); and the rows a gather
//! selects, on every backend.

use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, compare_gradients};
use rcannl_tensor::{Context, Graph, Tensor};

use crate::target::Target;

/// f32 on both sides, each operation rounded on a compiled backend, once on the interpreter.
const TOLERANCE: f64 = 1e-5;

fn ids(graph: &Graph, literal: &str, values: Vec<f64>) -> Tensor {
    graph.data("ids").shape(literal).values(values).build()
}

/// Weights of `n` cells in `literal`'s shape, so that every gathered cell has its own gradient.
fn weights(graph: &Graph, literal: &str, n: usize) -> Tensor {
    let values = (0..n).map(|i| 1.0 + (i as f64 * 0.37) % 1.9).collect();
    graph.data("weights").shape(literal).values(values).build()
}

fn compare(target: &Target, name: &str, table: &str, build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    let inputs = Inputs {
        shapes: &[table],
        positive: false,
    };
    if let Err(e) = compare_gradients(
        Box::new(Interpreter),
        target.backend(),
        &inputs,
        Precision::F32,
        TOLERANCE,
        build,
    ) {
        panic!("{name} on {}: {e}", target.name());
    }
}

fn gathers_and_their_gradients_match_the_oracle(target: &Target) {
    compare(target, "ids of one axis", "4->3", |g, p| {
        let ids = ids(g, "8|->", vec![0.0, 3.0, 1.0, 3.0, -1.0, 4.0, 2.5, 3.0]);
        Tensor::gather(&p[0], &ids).pmul(&weights(g, "8|->3", 24))
    });
    compare(target, "batch × time ids", "5->2", |g, p| {
        let ids = ids(g, "2|->3", vec![0.0, 4.0, -1.0, 1.0, 4.0, 0.0]);
        Tensor::gather(&p[0], &ids).pmul(&weights(g, "2|->3,2", 12))
    });
    compare(
        target,
        "one-hot rows composed with a table",
        "4->3",
        |g, p| {
            let ids = ids(g, "6|->", vec![2.0, 2.0, 0.0, 9.0, 3.0, -1.0]);
            (&p[0] * &Tensor::one_hot(&ids, 4)).pmul(&weights(g, "6|->3", 18))
        },
    );
    compare(target, "many positions into few rows", "3->64", |g, p| {
        let values = (0..4096).map(|p| ((p * 7) % 4) as f64 - 1.0).collect();
        let ids = ids(g, "4096|->", values);
        Tensor::gather(&p[0], &ids).pmul(&weights(g, "4096|->64", 4096 * 64))
    });
}

conformance!(gathers_and_their_gradients_match_the_oracle: cc, gpu);

fn gathered_values_are_the_rows_the_ids_select(target: &Target) {
    let graph = Graph::new();
    // Memory order: the width axis first, `table[w, v] = 10·w + v`.
    let table = graph
        .data("table")
        .shape("|3->2")
        .values(vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0])
        .build();
    let ids = ids(&graph, "5|->", vec![2.0, -1.0, 0.0, 3.0, 2.0]);
    let gathered = Tensor::gather(&table, &ids);
    let mut ctx = Context::with_backend(&graph, target.backend());
    let forward = ctx.forward(&[&gathered]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(
        ctx.values(&gathered).unwrap(),
        vec![2.0, 12.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 2.0, 12.0]
    );
}
conformance!(gathered_values_are_the_rows_the_ids_select);
