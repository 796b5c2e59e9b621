//! Layout operations' values: interleaving, deinterleaving, stacking, concatenation, slicing a
//! batch at a position chosen when the routine runs (with its gradient), ranges.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Context, Graph, Init, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn interleave_stack_and_concatenate() {
    for backend in backends() {
        let graph = Graph::new();
        let a = graph
            .data("a")
            .shape("2,2")
            .values(vec![1.0, 2.0, 3.0, 4.0])
            .build();
        let b = graph
            .data("b")
            .shape("2,2")
            .values(vec![5.0, 6.0, 7.0, 8.0])
            .build();
        let woven = Tensor::interleave(&a, &b);
        let odd = woven.deinterleave(true);
        let stacked = Tensor::stack(&[&a, &b]);
        let joined = Tensor::concat("a, ...; b, ... => a^b, ...", &[&a, &b]);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&woven, &odd, &stacked, &joined]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.dims(&woven).unwrap(), vec![2, 4]);
        assert_eq!(
            ctx.values(&woven).unwrap(),
            vec![1.0, 5.0, 2.0, 6.0, 3.0, 7.0, 4.0, 8.0]
        );
        assert_eq!(ctx.values(&odd).unwrap(), vec![5.0, 6.0, 7.0, 8.0]);
        assert_eq!(ctx.dims(&stacked).unwrap(), vec![2, 2, 2]);
        assert_eq!(
            ctx.values(&stacked).unwrap(),
            (1..=8).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(ctx.dims(&joined).unwrap(), vec![4, 2]);
        assert_eq!(
            ctx.values(&joined).unwrap(),
            (1..=8).map(f64::from).collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_batch_slice_reads_and_writes_back_at_the_chosen_position() {
    for backend in backends() {
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("4|->3")
            .init(Init::Values((0..12).map(f64::from).collect()))
            .build();
        let at = graph.static_index();
        let row = w.slice(&at);
        let doubled = 2.0 * &row;
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&doubled).unwrap();
        ctx.run_with(&backprop, &[(at, 2)]).unwrap();
        assert_eq!(ctx.values(&doubled).unwrap(), vec![12.0, 14.0, 16.0]);
        let mut expected = vec![0.0; 12];
        expected[6..9].fill(2.0);
        assert_eq!(ctx.grad(&w).unwrap(), expected);
        // Without the position, or outside the axis, the run is refused.
        assert!(ctx.run(&backprop).is_err());
        assert!(ctx.run_with(&backprop, &[(at, 4)]).is_err());
    }
}

#[test]
fn ranges_count_their_cells() {
    for backend in backends() {
        let graph = Graph::new();
        let r = graph.range(5);
        let shaped = graph.range_of_shape("r").shape("2|->3").build();
        let sum = &shaped + &r.einsum1("i => 0");
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&r, &sum]).unwrap();
        ctx.run(&forward).unwrap();
        assert_eq!(ctx.values(&r).unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            ctx.values(&sum).unwrap(),
            vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
        );
    }
}

#[test]
fn stacking_along_an_output_an_input_or_a_batch_axis() {
    use rcannl_tensor::StackAxis;
    let (x, y) = ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]);
    // Cells in memory order (batch, output, input), by hand: stacked[s][o] or [o][s].
    let by_position: Vec<f64> = x.iter().chain(&y).copied().collect();
    let by_cell: Vec<f64> = (0..3).flat_map(|o| [x[o], y[o]]).collect();
    let cases = [
        (
            StackAxis::Output,
            [vec![], vec![], vec![2, 3]],
            &by_position,
        ),
        (StackAxis::Input, [vec![], vec![2], vec![3]], &by_cell),
        (StackAxis::Batch, [vec![2], vec![], vec![3]], &by_position),
    ];
    for (axis, rows, expected) in cases {
        for backend in backends() {
            let graph = Graph::new();
            let a = graph.data("a").shape("3").values(x.to_vec()).build();
            let b = graph.data("b").shape("3").values(y.to_vec()).build();
            let stacked = Tensor::stack_along(axis, &[&a, &b]);
            let mut ctx = Context::with_backend(&graph, backend);
            let forward = ctx.forward(&[&stacked]).unwrap();
            ctx.run(&forward).unwrap();
            assert_eq!(ctx.rows(&stacked).unwrap(), rows, "{axis:?}");
            assert_eq!(&ctx.values(&stacked).unwrap(), expected, "{axis:?}");
        }
    }
}

#[test]
fn a_static_index_with_a_range_gives_the_sliced_axis_its_size() {
    for backend in backends() {
        let graph = Graph::new();
        // No batch size given: the slice's range gives it.
        let x = graph.range_of_shape("x").output([3]).build();
        let at = graph.static_index_with_range(5);
        let row = x.slice(&at);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&row]).unwrap();
        assert_eq!(ctx.dims(&x).unwrap(), vec![5, 3]);
        ctx.run_with(&forward, &[(at, 4)]).unwrap();
        assert_eq!(ctx.values(&row).unwrap(), vec![12.0, 13.0, 14.0]);
        // Beyond the range, the run is refused.
        assert!(ctx.run_with(&forward, &[(at, 5)]).is_err());
    }
    // A batch axis of another size clashes with the range.
    let graph = Graph::new();
    let x = graph.data("x").shape("4|->3").build();
    let row = x.slice(&graph.static_index_with_range(5));
    let e = row
        .error()
        .expect("a batch of 4 sliced over 5 positions is an error");
    assert!(e.message.contains("slice"), "{}", e.message);
    // A range of no position is refused.
    let graph = Graph::new();
    graph.static_index_with_range(0);
    let e = graph
        .check()
        .expect_err("a range of 0 positions is an error");
    assert!(e.message.contains("range of 0"), "{}", e.message);
}
