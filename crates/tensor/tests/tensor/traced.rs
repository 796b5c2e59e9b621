//! A model applied at any batch size through `Traced`: each input shape compiled once, the
//! parameters shared with the training graph as they are when it runs, the rows the same as
//! the training batch's.

use rcannl_tensor::{Array, Context, Graph, Tensor, Traced};

fn rows(batch: usize, values: &[f64]) -> Array {
    Array::new(vec![batch], vec![3], vec![], values.to_vec()).unwrap()
}

#[test]
fn a_model_trained_at_one_batch_size_runs_at_others_with_the_same_parameters() {
    let graph = Graph::new();
    let batch: Vec<f64> = (0..12).map(|i| (i as f64 - 5.0) / 4.0).collect();
    let x = graph.data("x").shape("4|->3").values(batch.clone()).build();
    let w = graph.param("w").shape("|3->2").build();
    let b = graph.param("b").shape("2").build();
    let model = |x: &Tensor| (&(&w * x) + &b).tanh();
    let trained = model(&x);
    let loss = trained.sum_over(rcannl_tensor::Axes::all());
    let mut ctx = Context::new(&graph);
    ctx.init_params().unwrap();
    // A step that changes the parameters: later applications must see the new values.
    let step = ctx.backprop(&loss).unwrap();
    ctx.run(&step).unwrap();
    let grad = ctx.grad(&w).unwrap();
    let moved: Vec<f64> = ctx
        .values(&w)
        .unwrap()
        .iter()
        .zip(&grad)
        .map(|(v, g)| v - 0.5 * g)
        .collect();
    ctx.set_values(&w, &moved).unwrap();
    let forward = ctx.forward(&[&trained]).unwrap();
    ctx.run(&forward).unwrap();
    let whole = ctx.values(&trained).unwrap();

    let mut traced = Traced::new(&graph, "rows", model);
    let one = traced.apply(&mut ctx, &rows(1, &batch[3..6])).unwrap();
    assert_eq!(one.shape(), &[1, 2]);
    assert_eq!(one.values(), &whole[2..4], "the second row alone");
    let three = traced.apply(&mut ctx, &rows(3, &batch[3..12])).unwrap();
    assert_eq!(three.shape(), &[3, 2]);
    assert_eq!(three.values(), &whole[2..8], "the last three rows");
    let again = traced.apply(&mut ctx, &rows(1, &batch[9..12])).unwrap();
    assert_eq!(
        again.values(),
        &whole[6..8],
        "the last row, through the cached routine"
    );
    assert_eq!(traced.shapes(), 2, "one routine per batch size");
}

#[test]
fn an_input_shape_the_model_refuses_is_an_error_naming_it() {
    let graph = Graph::new();
    let w = graph.param("w").shape("|3->2").build();
    let mut traced = Traced::new(&graph, "rows", |x: &Tensor| &w * x);
    let mut ctx = Context::new(&graph);
    let four = Array::new(vec![1], vec![4], vec![], vec![1.0; 4]).unwrap();
    let message = traced.apply(&mut ctx, &four).unwrap_err().to_string();
    assert!(message.contains("rows 1|->4"), "{message}");
}
