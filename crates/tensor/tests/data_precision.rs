//! Einsums in numpy's notation over host data of one precision compute in that precision and
//! give it, on both backends: along a contraction path, in single-operand sums and in a lone
//! operand's einsum alike.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Precision, Value};
use rcannl_tensor::{Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// The cells of `np.einsum(spec, *operands)` over data tensors of `precision` holding
/// `operands` (one output axis each), with the result's precision.
fn einsum_np(
    backend: Box<dyn Backend>,
    precision: Precision,
    spec: &str,
    operands: &[&[f64]],
) -> (Precision, Vec<Value>) {
    let graph = Graph::new();
    let tensors: Vec<Tensor> = (operands.iter().enumerate())
        .map(|(i, values)| {
            graph
                .data(&format!("x{i}"))
                .shape(&values.len().to_string())
                .precision(precision)
                .values(values.to_vec())
                .build()
        })
        .collect();
    let result = Tensor::einsum_np(spec, &tensors.iter().collect::<Vec<_>>());
    let mut ctx = Context::with_backend(&graph, backend);
    let routine = ctx.forward(&[&result]).expect("the einsum compiles");
    ctx.run(&routine).expect("the einsum runs");
    (
        result.precision(),
        ctx.cells(&result).expect("the result's cells"),
    )
}

/// A spec, its operands' values and the result's.
type Case<'a> = (&'a str, &'a [&'a [f64]], &'a [f64]);

#[test]
fn every_precision_is_kept() {
    let precisions = [
        Precision::U8,
        Precision::I8,
        Precision::I32,
        Precision::U32,
        Precision::I64,
        Precision::F16,
        Precision::Bf16,
        Precision::F32,
        Precision::F64,
    ];
    // Small integers, exact in every precision: 1·3 + 2·4; (1, 2) times 3·5 + 4·6; 1 + 2.
    let cases: [Case; 3] = [
        ("i,i->", &[&[1.0, 2.0], &[3.0, 4.0]], &[11.0]),
        (
            "i,j,j->i",
            &[&[1.0, 2.0], &[3.0, 4.0], &[5.0, 6.0]],
            &[39.0, 78.0],
        ),
        ("i->", &[&[1.0, 2.0]], &[3.0]),
    ];
    for precision in precisions {
        for (spec, operands, expected) in cases {
            for backend in backends() {
                let (kept, cells) = einsum_np(backend, precision, spec, operands);
                assert_eq!(kept, precision, "{spec} in {precision}");
                let values: Vec<f64> = cells.iter().map(|v| v.as_f64()).collect();
                assert_eq!(values, expected, "{spec} in {precision}");
            }
        }
    }
}

#[test]
fn f32_data_is_summed_in_f32_and_i32_data_wraps() {
    for backend in backends() {
        let tiny = 2f32.powi(-24);
        let (_, cells) = einsum_np(backend, Precision::F32, "i->", &[&[1.0, f64::from(tiny)]]);
        // 1 + 2^-24 is a tie in f32, which rounds to 1; f64 would keep it.
        assert_eq!(cells, [Value::Float(f64::from(1f32 + tiny))]);
        assert_eq!(f64::from(1f32 + tiny), 1.0);
    }
    for backend in backends() {
        let operands: [&[f64]; 2] = [&[f64::from(i32::MAX), 1.0], &[1.0, 1.0]];
        let (_, cells) = einsum_np(backend, Precision::I32, "i,i->", &operands);
        assert_eq!(cells, [Value::Int(i64::from(i32::MAX.wrapping_add(1)))]);
    }
}

#[test]
fn i64_gradients_are_read_exactly() {
    // 2^60 + 1 has no f64: only the cells keep it.
    let big = (1i64 << 60) + 1;
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .param("x")
            .shape("1")
            .precision(Precision::I64)
            .build();
        let y = graph.data("y").shape("1").precision(Precision::I64).build();
        let product = Tensor::einsum_np("i,i->", &[&x, &y]);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_cells(&x, &[Value::Int(3)]).expect("x is set");
        ctx.set_cells(&y, &[Value::Int(big)]).expect("y is set");
        let routine = ctx.backprop(&product).expect("the gradient compiles");
        ctx.run(&routine).expect("the gradient runs");
        assert_eq!(ctx.grad_cells(&x).expect("x's gradient"), [Value::Int(big)]);
        assert_ne!(ctx.grad(&x).expect("x's gradient")[0] as i64, big);
        assert!(ctx.grad_cells(&y).is_err(), "data has no gradient");
    }
}
