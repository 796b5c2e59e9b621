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
        Precision::U16,
        Precision::I32,
        Precision::U32,
        Precision::I64,
        Precision::U64,
        Precision::Fp8,
        Precision::F16,
        Precision::Bf16,
        Precision::F32,
        Precision::F64,
    ];
    // Small integers, exact in every precision but fp8: 1·3 + 2·4; (1, 2) times 3·5 + 4·6; 1 + 2.
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
                // fp8 holds none of 11, 39 and 78: its sums round 3 + 8 to 12 (a tie, to
                // even), and 3·5 + 4·6 to 16 + 24 = 40, which are the nearest fp8 values.
                let expected: Vec<f64> = expected.iter().map(|x| precision.round(*x)).collect();
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

/// Operands of one precision each, holding these values (one axis each).
type Mixed<'a> = &'a [(Precision, &'a [f64])];

/// Data tensors `x0`, `x1`, … of these precisions holding these values (one axis each).
fn mixed(graph: &Graph, operands: Mixed<'_>) -> Vec<Tensor> {
    (operands.iter().enumerate())
        .map(|(i, (precision, values))| {
            graph
                .data(&format!("x{i}"))
                .shape(&values.len().to_string())
                .precision(*precision)
                .values(values.to_vec())
                .build()
        })
        .collect()
}

#[test]
fn mixed_precisions_compute_in_numpys_result_type() {
    // np.einsum("i,i->", np.array([16777217, 1], np.int32), np.array([1, 1], np.float32)) is
    // float64 16777218.0: in float32, 16777217 would round to 16777216.
    let cases: [(Mixed<'_>, Precision, f64); 3] = [
        (
            &[
                (Precision::I32, &[16_777_217.0, 1.0]),
                (Precision::F32, &[1.0, 1.0]),
            ],
            Precision::F64,
            16_777_218.0,
        ),
        // int8 with uint8 is int16 in numpy, computed here in 32 bits: 200 · 100 = 20000.
        (
            &[(Precision::U8, &[200.0]), (Precision::I8, &[100.0])],
            Precision::I32,
            20_000.0,
        ),
        // int32 with uint32 is int64: 4000000000 · 3 does not wrap.
        (
            &[
                (Precision::U32, &[4_000_000_000.0]),
                (Precision::I32, &[3.0]),
            ],
            Precision::I64,
            12_000_000_000.0,
        ),
    ];
    for (operands, precision, value) in cases {
        for backend in backends() {
            let graph = Graph::new();
            let tensors = mixed(&graph, operands);
            let result = Tensor::einsum_np("i,i->", &tensors.iter().collect::<Vec<_>>());
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.forward(&[&result]).expect("the einsum compiles");
            ctx.run(&routine).expect("the einsum runs");
            assert_eq!(result.precision(), precision, "{operands:?}");
            assert_eq!(ctx.values(&result).unwrap(), vec![value], "{operands:?}");
        }
    }
}

#[test]
fn words_have_no_numpy_type() {
    let graph = Graph::new();
    let x = graph.data("x").shape("2").values(vec![1.0, 2.0]).build();
    let words = graph.seed().threefry(&graph.embed_self_id("w"));
    let result = Tensor::einsum_np("i,->i", &[&x, &words]);
    let message = graph.check().expect_err("a word has no numpy type").message;
    assert!(
        message.contains("operand 2") && message.contains("numpy"),
        "{message}"
    );
    drop(result);
}

#[test]
fn gradients_flow_through_the_cast_to_numpys_result_type() {
    // f32 parameters against f64 data compute in f64; the parameter's gradient comes back in
    // f32, rounded once: d/dw Σ w·y = y.
    for backend in backends() {
        let graph = Graph::new();
        let w = graph
            .param("w")
            .shape("2")
            .precision(Precision::F32)
            .build();
        let y = graph
            .data("y")
            .shape("2")
            .precision(Precision::F64)
            .values(vec![0.1, 3.0])
            .build();
        let product = Tensor::einsum_np("i,i->", &[&w, &y]);
        assert_eq!(product.precision(), Precision::F64);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_values(&w, &[1.0, 2.0]).expect("w is set");
        let routine = ctx.backprop(&product).expect("the gradient compiles");
        ctx.run(&routine).expect("the gradient runs");
        assert_eq!(ctx.values(&product).unwrap(), vec![0.1 + 6.0]);
        assert_eq!(ctx.grad(&w).unwrap(), vec![f64::from(0.1f32), 3.0]);
    }
}
