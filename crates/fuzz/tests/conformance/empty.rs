//! Results with an axis of size 0 on every backend, as on the interpreter: empty results, sums
//! over no terms 0, and a parameter's gradient through an empty batch 0.

use rcannl_tensor::{Context, Graph};

use crate::target::Target;

fn an_empty_batch_gives_empty_results_zero_sums_and_zero_gradients(target: &Target) {
    let graph = Graph::new();
    let x = graph.data("x").shape("0|->3").values(Vec::new()).build();
    let w = graph.param("w").shape("3->2").values(vec![0.5; 6]).build();
    let y = w.compose(&x);
    let loss = y.einsum1("...|...->... => ");
    let per_column = y.einsum1("...|...->o => o");
    let mut ctx = Context::with_backend(&graph, target.backend());
    ctx.init_params().unwrap();
    let forward = ctx.forward(&[&y, &per_column]).unwrap();
    ctx.run(&forward).unwrap();
    assert_eq!(ctx.values(&y).unwrap(), Vec::<f64>::new());
    assert_eq!(ctx.values(&per_column).unwrap(), [0.0, 0.0]);
    let backprop = ctx.backprop(&loss).unwrap();
    ctx.run(&backprop).unwrap();
    assert_eq!(ctx.values(&loss).unwrap(), [0.0]);
    assert_eq!(ctx.grad(&w).unwrap(), vec![0.0; 6]);
}
conformance!(an_empty_batch_gives_empty_results_zero_sums_and_zero_gradients);
