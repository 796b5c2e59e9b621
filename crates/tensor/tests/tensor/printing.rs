//! Printing: layout prints by axis kind (tables, blocks, elision, bases, gradients), trees of
//! the graph with values and shared operands, and routines' assignments in `cd!` notation.

use rcannl_backends::Interpreter;
use rcannl_tensor::print::{Layout, PrintOptions, TreeOptions};
use rcannl_tensor::{Array, Axes, Context, Graph, Tensor, TensorError, cd};

/// `loss = Σ (w * x)` for `w = [[1, 2], [3, 4]]` (outputs of basis `rgb`) and `x = [0.5, -1]`,
/// on the interpreter: `w * x = [-1.5, -2.5]`, `loss = -4`, `∂loss/∂w[o][i] = x[i]`.
fn linear() -> (Context, Tensor, Tensor, Tensor) {
    let graph = Graph::new();
    let w = graph
        .param("w")
        .shape("|2->2@rgb")
        .values(vec![1.0, 2.0, 3.0, 4.0])
        .build();
    let x = graph.data("x").shape("2").values(vec![0.5, -1.0]).build();
    let loss = (&w * &x).sum_over(Axes::all());
    let ctx = Context::with_backend(&graph, Box::new(Interpreter));
    (ctx, w, x, loss)
}

#[test]
fn a_matrix_prints_outputs_down_inputs_across_then_its_gradient() -> Result<(), TensorError> {
    let (mut ctx, w, _, loss) = linear();
    ctx.init_params()?;
    let step = ctx.backprop(&loss)?;
    ctx.run(&step)?;
    let options = PrintOptions {
        grad: true,
        layout: Layout {
            precision: Some(1),
            ..Layout::default()
        },
        ..PrintOptions::default()
    };
    assert_eq!(
        ctx.print(&w, &options)?,
        "w: |i0=2->o0@rgb=2\n\
         ┌─────────────┬─────────┐\n\
         │ o0@rgb \\ i0 │   0   1 │\n\
         ├─────────────┼─────────┤\n\
         │           0 │ 1.0 2.0 │\n\
         │           1 │ 3.0 4.0 │\n\
         └─────────────┴─────────┘\n\
         w.grad: |i0=2->o0@rgb=2\n\
         ┌─────────────┬───────────┐\n\
         │ o0@rgb \\ i0 │    0    1 │\n\
         ├─────────────┼───────────┤\n\
         │           0 │  0.5 -1.0 │\n\
         │           1 │  0.5 -1.0 │\n\
         └─────────────┴───────────┘\n"
    );
    Ok(())
}

#[test]
fn a_tensor_prints_with_the_assignments_computing_it() -> Result<(), TensorError> {
    let (mut ctx, w, x, _) = linear();
    let y = &w * &x;
    ctx.init_params()?;
    let forward = ctx.forward(&[&y])?;
    ctx.run(&forward)?;
    let options = PrintOptions {
        code: true,
        ..PrintOptions::default()
    };
    // The composition contracts w's input axis with x's output axis; its gradient into w is
    // the same product space read with the slots exchanged. x, data, has no gradient.
    assert_eq!(
        ctx.print(&y, &options)?,
        format!(
            "{y}: |->o0@rgb=2\n\
             ┌────────┬───────────┐\n\
             │ o0@rgb │    0    1 │\n\
             ├────────┼───────────┤\n\
             │        │ -1.5 -2.5 │\n\
             └────────┴───────────┘\n\
             forward:\n  \
               {y} =:+ w * x ~logic:\"@\";\n\
             backprop:\n  \
               w.grad =+ {y}.grad * x ~logic:\"@\";\n",
            y = y.label()
        )
    );
    // A leaf has no assignments.
    assert!(ctx.print(&x, &options)?.ends_with("└────┴─────────┘\n"));
    Ok(())
}

#[test]
fn further_axes_split_into_blocks_and_long_axes_elide() -> Result<(), TensorError> {
    // 6 examples of a `|2->1` map: inputs across, outputs down, an example a block; with one
    // position shown at each end, examples 1 to 4 are elided. Cells are as wide as the widest
    // in every table of the print.
    let values: Vec<f64> = (0..12).map(f64::from).collect();
    let a = Array::new(vec![6], vec![1], vec![2], values)?;
    let layout = Layout {
        edge: 1,
        precision: None,
    };
    assert_eq!(
        a.to_grid("a", &layout),
        "a: b0=6|i0=2->o0=1\n\
         b0 = 0\n\
         ┌─────────┬───────┐\n\
         │ o0 \\ i0 │  0  1 │\n\
         ├─────────┼───────┤\n\
         │       0 │  0  1 │\n\
         └─────────┴───────┘\n\
         b0 = …\n\
         b0 = 5\n\
         ┌─────────┬───────┐\n\
         │ o0 \\ i0 │  0  1 │\n\
         ├─────────┼───────┤\n\
         │       0 │ 10 11 │\n\
         └─────────┴───────┘\n"
    );
    // One axis: a single row.
    let v = Array::new(vec![], vec![10], vec![], (0..10).map(f64::from).collect())?;
    assert_eq!(
        v.to_grid("v", &Layout { edge: 2, ..layout }),
        "v: |->o0=10\n\
         ┌────┬───────────┐\n\
         │ o0 │ 0 1 … 8 9 │\n\
         ├────┼───────────┤\n\
         │    │ 0 1 … 8 9 │\n\
         └────┴───────────┘\n"
    );
    // Two batch axes besides a vector: the batch axes make the blocks, the outer one outermost.
    let batched = Array::new(vec![2, 2], vec![2], vec![], (0..8).map(f64::from).collect())?;
    assert_eq!(
        batched.to_grid("t", &Layout::default()),
        "t: b0=2,b1=2|->o0=2\n\
         b0 = 0\n\
         ┌─────────┬─────┐\n\
         │ b1 \\ o0 │ 0 1 │\n\
         ├─────────┼─────┤\n\
         │       0 │ 0 1 │\n\
         │       1 │ 2 3 │\n\
         └─────────┴─────┘\n\
         b0 = 1\n\
         ┌─────────┬─────┐\n\
         │ b1 \\ o0 │ 0 1 │\n\
         ├─────────┼─────┤\n\
         │       0 │ 4 5 │\n\
         │       1 │ 6 7 │\n\
         └─────────┴─────┘\n"
    );
    let scalar = Array::new(vec![], vec![], vec![], vec![-4.0])?;
    assert_eq!(
        scalar.to_grid("loss", &Layout::default()),
        "loss: |->\n-4\n"
    );
    Ok(())
}

#[test]
fn a_tree_draws_shared_operands_once_with_the_values_held() -> Result<(), TensorError> {
    let graph = Graph::new();
    let x = graph.data("x").shape("2").values(vec![1.0, -2.0]).build();
    let y = (&x + &x).relu();
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&y])?;
    ctx.run(&forward)?;
    let options = TreeOptions {
        values: true,
        ..TreeOptions::default()
    };
    // relu(x + x) = relu([2, -4]) = [2, 0]; the sum is fused away, holding no values.
    assert_eq!(
        ctx.print_tree(&y, &options)?,
        "relu#2: |->2\n\
         │ relu#2 =:+ relu(+#1);\n\
         │ relu#2: |->o0=2\n\
         │ ┌────┬─────┐\n\
         │ │ o0 │ 0 1 │\n\
         │ ├────┼─────┤\n\
         │ │    │ 2 0 │\n\
         │ └────┴─────┘\n\
         └─ +#1: |->2\n   \
            │ +#1 =:+ x + x;\n   \
            │ (no values held)\n   \
            ├─ x: |->2 data\n   \
            │    x: |->o0=2\n   \
            │    ┌────┬───────┐\n   \
            │    │ o0 │  0  1 │\n   \
            │    ├────┼───────┤\n   \
            │    │    │  1 -2 │\n   \
            │    └────┴───────┘\n   \
            └─ x (see above)\n"
    );
    let root_only = TreeOptions {
        depth: 0,
        ..TreeOptions::default()
    };
    assert_eq!(
        ctx.print_tree(&y, &root_only)?,
        "relu#2: |->2\n│ relu#2 =:+ relu(+#1);\n└─ …\n"
    );
    Ok(())
}

#[test]
fn routines_print_their_assignments_in_cd_notation() -> Result<(), TensorError> {
    let (mut ctx, w, _, loss) = linear();
    let y = "*#2";
    let s = "sum_over#3";
    let spec = "... | ... -> ... =>";
    ctx.init_params()?;
    // Backprop: the forward, gradients reset (the loss's to 1), then the gradients in reverse.
    let backprop = ctx.backprop(&loss)?;
    assert_eq!(
        backprop.code(),
        format!(
            "{y} =:+ w * x ~logic:\"@\";\n\
             {s} =:+ {y} ~logic:\"{spec}\";\n\
             w.grad =: 0.0;\n\
             {y}.grad =: 0.0;\n\
             {s}.grad =: 1.0;\n\
             {y}.grad =+ {s}.grad ~logic:\"{spec}\";\n\
             w.grad =+ {y}.grad * x ~logic:\"@\";\n"
        )
    );
    // An update, pointwise over w's cells: no logic.
    let update = ctx.update(&cd! { w =- 0.5 * w.grad })?;
    assert_eq!(update.code(), "w =- 0.5 * w.grad;\n");
    // A training step guards its update by the loss being finite.
    let step = ctx.train_step(&loss, &cd! { w =- 0.5 * w.grad })?;
    assert!(step.code().ends_with(&format!(
        "{s} is finite =:+ {s} * 0.0;\n\
         w =- where_({s} is finite == 0.0, 0.5 * w.grad, 0.0);\n"
    )));
    Ok(())
}

#[test]
fn an_einsum_prints_its_spec_as_its_logic() -> Result<(), TensorError> {
    let graph = Graph::new();
    let a = graph
        .data("a")
        .shape("2,2")
        .values(vec![1.0, 2.0, 3.0, 4.0])
        .build();
    let product = a.einsum("ij;jk=>ik", &a);
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&product])?;
    assert_eq!(
        forward.code(),
        format!(
            "{} =:+ a * a ~logic:\"i, j; j, k => i, k\";\n",
            product.label()
        )
    );
    Ok(())
}
