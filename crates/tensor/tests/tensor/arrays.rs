//! Shaped results: [`Context::array`] on both backends gives the tensor's values with its dims
//! in memory order (batch, output, input) and how many are of each kind.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::{Axes, Context, Graph};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

#[test]
fn arrays_carry_the_dims_by_kind() {
    for backend in backends() {
        let graph = Graph::new();
        // Cell (b, o, i) holds 100b + 10o + i.
        let values: Vec<f64> = (0..2)
            .flat_map(|b| {
                (0..4).flat_map(move |o| (0..3).map(move |i| f64::from(100 * b + 10 * o + i)))
            })
            .collect();
        let x = graph
            .data("x")
            .shape("2|3->4")
            .values(values.clone())
            .build();
        let doubled = &x * 2.0;
        let row_sums = x.sum_over(Axes::input());
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&doubled, &row_sums]).unwrap();
        ctx.run(&forward).unwrap();

        let a = ctx.array(&doubled).unwrap();
        assert_eq!(a.shape(), ctx.dims(&doubled).unwrap().as_slice());
        assert_eq!(a.shape(), &[2, 4, 3]);
        assert_eq!(
            (a.batch_dims(), a.output_dims(), a.input_dims()),
            (&[2][..], &[4][..], &[3][..])
        );
        assert_eq!(a[[1, 3, 2]], 2.0 * 132.0);
        assert_eq!(a[&[0, 2, 1][..]], 2.0 * 21.0);
        assert_eq!(a.rows().count(), 8);
        assert_eq!(a.rows().next(), Some(&[0.0, 2.0, 4.0][..]));
        let doubled_values: Vec<f64> = values.iter().map(|v| 2.0 * v).collect();
        assert_eq!(a.values(), doubled_values.as_slice());
        assert_eq!(a.clone().into_vec(), doubled_values);
        // The largest output position of every (b, i): always the last, o = 3.
        assert_eq!(a.argmax(1).unwrap(), vec![3; 6]);

        let sums = ctx.array(&row_sums).unwrap();
        assert_eq!(sums.shape(), &[2, 4]);
        assert_eq!(sums.input_dims(), &[] as &[usize]);
        assert_eq!(sums[[1, 2]], 3.0 * 120.0 + 3.0);
        assert_eq!(sums.argmax(-1).unwrap(), vec![3, 3]);
        assert!(
            sums.to_string()
                .starts_with("[[  3,  33,  63,  93],\n [303,"),
            "{sums}"
        );
    }
}
