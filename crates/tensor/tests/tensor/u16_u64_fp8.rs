//! u16, u64 and fp8 tensors compute on the interpreter and the C backend alike, cell for cell:
//! u16 wrapping at 16 bits, u64 keeping all 64 bits, fp8 rounding to nearest even at every
//! store; and a constant too large for fp8 or f16 is an error naming the tensor.

use rcannl_backends::Backend;
use rcannl_ir::{Binop, Precision, Value};
use rcannl_tensor::{BinaryOp, Context, Formula, Graph, Tensor, TensorErrorKind, UnaryOp, Update};

use crate::cpu::backends;

/// The cells of `a op b` for each of `ops`, a contraction `a·b` over the one axis, and the
/// random values of a counter, in `precision`, with `a` and `b` holding `cells`.
fn computed(
    backend: Box<dyn Backend>,
    precision: Precision,
    a: &[Value],
    b: &[Value],
    ops: &[BinaryOp],
) -> Vec<Vec<Value>> {
    let graph = Graph::new();
    let n = a.len().to_string();
    let x = graph.data("x").shape(&n).precision(precision).build();
    let y = graph.data("y").shape(&n).precision(precision).build();
    let mut outs: Vec<Tensor> = ops.iter().map(|op| x.binary(*op, &y)).collect();
    outs.push(x.einsum("i;i=>", &y));
    outs.push(x.unary(UnaryOp::Relu).binary(BinaryOp::Add, &y));
    let counters = graph
        .data("counters")
        .shape("2")
        .precision(Precision::U32)
        .values(vec![0.0, 1.0])
        .build();
    let drawn = graph.seed().threefry(&counters).to_uniform(precision);
    // As many cells as two words make in `precision`.
    let cells = 32 / precision.size_in_bytes();
    let zeros = graph
        .data("zeros")
        .shape(&cells.to_string())
        .precision(precision)
        .values(vec![0.0; cells])
        .build();
    outs.push(drawn.binary(BinaryOp::Add, &zeros));
    let mut ctx = Context::with_backend(&graph, backend);
    let routine = ctx
        .forward(&outs.iter().collect::<Vec<_>>())
        .expect("the routine compiles");
    ctx.set_cells(&x, a).unwrap();
    ctx.set_cells(&y, b).unwrap();
    ctx.run(&routine).expect("the routine runs");
    for out in &outs {
        assert_eq!(out.precision(), precision);
    }
    outs.iter().map(|t| ctx.cells(t).unwrap()).collect()
}

fn ints(values: &[i64]) -> Vec<Value> {
    values.iter().map(|&i| Value::Int(i)).collect()
}

fn floats(values: &[f64]) -> Vec<Value> {
    values.iter().map(|&x| Value::Float(x)).collect()
}

/// The results on each CPU backend, which must agree cell for cell.
fn on_both(precision: Precision, a: &[Value], b: &[Value], ops: &[BinaryOp]) -> Vec<Vec<Value>> {
    let mut results = backends()
        .into_iter()
        .map(|backend| computed(backend, precision, a, b, ops));
    let interpreted = results.next().expect("the interpreter");
    let compiled = results.next().expect("the C backend");
    assert_eq!(
        interpreted, compiled,
        "{precision}: the interpreter, then C"
    );
    interpreted
}

const INTEGER_OPS: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Lt,
];

#[test]
fn u16_wraps_at_sixteen_bits_on_both_backends() {
    let a = ints(&[65535, 300, 7, 0]);
    let b = ints(&[2, 300, 9, 1]);
    let results = on_both(Precision::U16, &a, &b, &INTEGER_OPS);
    assert_eq!(results[0], ints(&[1, 600, 16, 1]), "sums wrap");
    assert_eq!(
        results[1],
        ints(&[65533, 0, 65534, 65535]),
        "differences wrap"
    );
    assert_eq!(results[2], ints(&[65534, 24464, 63, 0]), "products wrap");
    assert_eq!(results[3], ints(&[65535, 300, 9, 1]));
    assert_eq!(results[4], ints(&[0, 0, 1, 1]));
    // 65535·2 + 300·300 + 7·9 = 221133, modulo 2^16.
    assert_eq!(results[5], ints(&[221_133 % 65536]));
    assert!(
        results[7]
            .iter()
            .all(|v| matches!(v, Value::Int(i) if (0..65536).contains(i)))
    );
}

#[test]
fn u64_keeps_all_sixty_four_bits_on_both_backends() {
    let top = 1i64 << 62;
    // u64::MAX, 2^63 + 5 and 2^62, as their bits.
    let a = ints(&[-1, i64::MIN + 5, top, 3]);
    let b = ints(&[1, i64::MIN, 2, 4]);
    let ops = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul];
    let results = on_both(Precision::U64, &a, &b, &ops);
    assert_eq!(results[0], ints(&[0, 5, top + 2, 7]), "sums wrap at 2^64");
    assert_eq!(results[1], ints(&[-2, 5, top - 2, -1]));
    assert_eq!(results[2], ints(&[-1, i64::MIN, i64::MIN, 12]));
    // Read as numbers, the bits are unsigned on both backends.
    for backend in backends() {
        let graph = Graph::new();
        let x = graph.data("x").shape("2").precision(Precision::U64).build();
        let wide = x.binary(BinaryOp::Add, &graph.number_in(0.0, Precision::U64));
        let as_float = graph.data("f").shape("2").precision(Precision::F64).build();
        let converted = wide.binary(BinaryOp::Add, &as_float);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.forward(&[&converted]).unwrap();
        ctx.set_cells(&x, &ints(&[-1, i64::MIN])).unwrap();
        ctx.set_values(&as_float, &[0.0, 0.0]).unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(
            ctx.values(&converted).unwrap(),
            vec![u64::MAX as f64, 2f64.powi(63)]
        );
        assert_eq!(
            ctx.values(&x).unwrap(),
            vec![u64::MAX as f64, 2f64.powi(63)]
        );
    }
}

#[test]
fn u64_reads_its_bits_as_unsigned_where_a_sign_matters_on_both_backends() {
    let a: [u64; 4] = [(1 << 63) + 5, u64::MAX, 7, 1 << 63];
    let b: [u64; 4] = [3, (1 << 63) + 1, 1 << 63, 2];
    let bits = |values: &[u64]| {
        values
            .iter()
            .map(|&u| Value::Int(u as i64))
            .collect::<Vec<_>>()
    };
    let each = |f: &dyn Fn(u64, u64) -> u64| -> Vec<Value> {
        bits(&a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect::<Vec<_>>())
    };
    let ops = [
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Lt,
        BinaryOp::Pow,
    ];
    let results = on_both(Precision::U64, &bits(&a), &bits(&b), &ops);
    // x^y wrapping at 2⁶⁴: the product of x^(2^i) over the bits i of y.
    let power = |x: u64, y: u64| {
        (0..64).filter(|i| y >> i & 1 == 1).fold(1u64, |r, i| {
            r.wrapping_mul((0..i).fold(x, |p: u64, _| p.wrapping_mul(p)))
        })
    };
    assert_eq!(results[0], each(&|x, y| x / y), "quotients");
    assert_eq!(results[1], each(&|x, y| x.max(y)), "maxima");
    assert_eq!(results[2], each(&|x, y| x.min(y)), "minima");
    assert_eq!(results[3], each(&|x, y| u64::from(x < y)), "comparisons");
    assert_eq!(results[4], each(&power), "powers");
    // The remainder and relu's gate, which updates reach.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let [x, y, rem, gate] = ["x", "y", "rem", "gate"].map(|label| {
            graph
                .data(label)
                .shape("4")
                .precision(Precision::U64)
                .build()
        });
        let formula = |op| Formula::value(&x).binop(op, Formula::value(&y));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.set_cells(&x, &bits(&a)).unwrap();
        ctx.set_cells(&y, &bits(&b)).unwrap();
        let routine = ctx
            .update(&[
                Update::set(&rem, formula(Binop::Mod)),
                Update::set(&gate, formula(Binop::ReluGate)),
            ])
            .unwrap();
        ctx.run(&routine).unwrap();
        assert_eq!(
            ctx.cells(&rem).unwrap(),
            each(&|x, y| x % y),
            "remainders on {name}"
        );
        let gated = each(&|x, y| if x > 0 { y } else { 0 });
        assert_eq!(ctx.cells(&gate).unwrap(), gated, "relu gates on {name}");
    }
    // One operand: every value is its own relu; a function of reals saturates into the range.
    for backend in backends() {
        let name = backend.name();
        let graph = Graph::new();
        let x = graph.data("x").shape("3").precision(Precision::U64).build();
        let outs = [UnaryOp::Relu, UnaryOp::Sat01, UnaryOp::Sqrt].map(|op| x.unary(op));
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.forward(&outs.iter().collect::<Vec<_>>()).unwrap();
        ctx.set_cells(&x, &bits(&[(1 << 63) + 5, 0, u64::MAX]))
            .unwrap();
        ctx.run(&routine).unwrap();
        let cells: Vec<Vec<Value>> = outs.iter().map(|t| ctx.cells(t).unwrap()).collect();
        assert_eq!(
            cells[0],
            bits(&[(1 << 63) + 5, 0, u64::MAX]),
            "relu on {name}"
        );
        assert_eq!(cells[1], bits(&[1, 0, 1]), "sat01 on {name}");
        assert_eq!(
            cells[2],
            bits(&[3_037_000_499, 0, 1 << 32]),
            "sqrt on {name}"
        );
    }
}

#[test]
fn integer_powers_of_any_exponent_wrap_alike_on_both_backends() {
    // Exponents of 2³² and more: past what a u32 holds, still a wrapping integer power.
    let a = [3i64, -5, 7];
    let b = [1i64 << 32, (1 << 33) + 1, 2];
    let results = on_both(Precision::I64, &ints(&a), &ints(&b), &[BinaryOp::Pow]);
    let power = |x: i64, y: i64| (0..y).fold(1i64, |p, _| p.wrapping_mul(x));
    // 3^(2³²) and (−5)^(2³³ + 1) by squaring: x^(2^k) is x squared k times.
    let squared = |x: i64, k: u32| (0..k).fold(x, |p, _| p.wrapping_mul(p));
    let want = [
        squared(3, 32),
        squared(-5, 33).wrapping_mul(-5),
        power(7, 2),
    ];
    assert_eq!(results[0], ints(&want));
}

#[test]
fn wide_integers_convert_to_f32_rounded_once_on_both_backends() {
    // 2⁶⁰ + 2³⁶ + 1 lies just above the midpoint of two f32s; through f64 it would round to the
    // midpoint and then to the even one below it.
    let just_above = (1i64 << 60) + (1 << 36) + 1;
    let up = 2f64.powi(60) + 2f64.powi(37);
    for (precision, cells, want) in [
        (Precision::I64, [just_above, -just_above], [up, -up]),
        // u64: 2⁶³ + 2³⁹ + 1 as its bits, above the midpoint of 2⁶³ and 2⁶³ + 2⁴⁰.
        (
            Precision::U64,
            [i64::MIN + (1 << 39) + 1, just_above],
            [2f64.powi(63) + 2f64.powi(40), up],
        ),
    ] {
        for backend in backends() {
            let name = backend.name();
            let graph = Graph::new();
            let x = graph.data("x").shape("2").precision(precision).build();
            let converted = x.cast(Precision::F32);
            let mut ctx = Context::with_backend(&graph, backend);
            let routine = ctx.forward(&[&converted]).unwrap();
            ctx.set_cells(&x, &ints(&cells)).unwrap();
            ctx.run(&routine).unwrap();
            assert_eq!(
                ctx.values(&converted).unwrap(),
                want,
                "{precision} on {name}"
            );
        }
    }
}

#[test]
fn fp8_rounds_every_store_to_nearest_even_on_both_backends() {
    let a = floats(&[1.25, 3.0, -0.75, 57344.0, 2f64.powi(-16), 0.1]);
    let b = floats(&[1.5, 0.875, 0.625, 8192.0, 2f64.powi(-16), -0.3]);
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
    ];
    let results = on_both(Precision::Fp8, &a, &b, &ops);
    let values = |cells: &[Value]| -> Vec<f64> { cells.iter().map(|v| v.as_f64()).collect() };
    // 0.1 is stored as 0.09375 and -0.3 as -0.3125 (nearest fp8 values).
    // 1.25 + 1.5 = 2.75 → 3 (tie between 2.5 and 3, to even); 3 + 0.875 = 3.875 → 4;
    // 57344 + 8192 = 65536 → infinity; 2^-16 + 2^-16 is the subnormal 2^-15.
    assert_eq!(
        values(&results[0]),
        [3.0, 4.0, -0.125, f64::INFINITY, 2f64.powi(-15), -0.21875]
    );
    // 1.25 · 1.5 = 1.875 → 2 and 0.75 · 0.625 = 0.46875 → 0.5 (ties between 1.75 and 2, 0.4375
    // and 0.5, to even); 3 · 0.875 = 2.625 → 2.5 (nearest); 2^-32 → 0.
    assert_eq!(values(&results[2])[..3], [2.0, 2.5, -0.5]);
    assert_eq!(values(&results[2])[4], 0.0);
    for cells in &results {
        for cell in cells {
            let x = cell.as_f64();
            assert!(
                x.is_nan() || Precision::Fp8.round(x) == x,
                "{x} is an fp8 value"
            );
        }
    }
    let drawn = values(&results[ops.len() + 2]);
    assert_eq!(drawn.len(), 32, "16 values a word");
    assert!(drawn.iter().any(|x| *x > 0.0), "{drawn:?}");
    assert!(drawn.iter().all(|x| (0.0..1.0).contains(x)), "{drawn:?}");
}

#[test]
fn a_constant_too_large_for_half_precision_is_an_error_naming_the_tensor() {
    for precision in [Precision::F16, Precision::Fp8] {
        for backend in backends() {
            let graph = Graph::new();
            let x = graph.data("x").shape("3").precision(precision).build();
            let scaled = x.binary(BinaryOp::Mul, &graph.number_in(20000.0, precision));
            let mut ctx = Context::with_backend(&graph, backend);
            let e = ctx.forward(&[&scaled]).unwrap_err();
            assert_eq!(e.kind, TensorErrorKind::Compile, "{}", e.message);
            assert!(
                e.message.contains("check_half_prec_constants_cutoff"),
                "{}",
                e.message
            );
            assert!(e.message.contains("tensor '"), "{}", e.message);
            assert!(
                e.message.contains(&format!("precision {precision}")),
                "{}",
                e.message
            );
        }
        // Below the cut-off, and in bf16 (f32's range) whatever its size, it computes.
        for (c, p) in [(12000.0, precision), (1e6, Precision::Bf16)] {
            let graph = Graph::new();
            let x = graph
                .data("x")
                .shape("1")
                .precision(p)
                .values(vec![1.0])
                .build();
            let scaled = x.binary(BinaryOp::Mul, &graph.number_in(c, p));
            let mut ctx = Context::with_backend(&graph, backends().remove(0));
            let routine = ctx
                .forward(&[&scaled])
                .expect("no constant beyond the cut-off");
            ctx.run(&routine).unwrap();
            assert_eq!(ctx.values(&scaled).unwrap(), vec![p.round(c)], "{c} in {p}");
        }
    }
}

#[test]
fn f32_values_cast_to_fp8_alike_on_both_backends() {
    // Every fp8 value, the midpoints between neighbours and a hair to either side of them (as
    // f32), and f32 values spread over its whole range of exponents, of either sign.
    let mut values: Vec<f64> = Vec::new();
    let finite: Vec<f64> = (0u8..0x7C).map(rcannl_ir::fp8_value).collect();
    for pair in finite.windows(2) {
        let middle = (pair[0] + pair[1]) / 2.0;
        let hair = (pair[1] - pair[0]) / 4096.0;
        values.extend([pair[0], middle, middle - hair, middle + hair]);
    }
    values.extend([61439.0, 61440.0, 1e30, f64::INFINITY, 1e-40, 2f64.powi(-17)]);
    let mut bits = 0x1234_5678u32;
    for _ in 0..4000 {
        // A xorshift's f32 bit patterns, NaNs left out (their payloads are not compared).
        bits ^= bits << 13;
        bits ^= bits >> 17;
        bits ^= bits << 5;
        let x = f32::from_bits(bits);
        if !x.is_nan() {
            values.push(f64::from(x));
        }
    }
    let negated: Vec<f64> = values.iter().map(|x| -x).collect();
    values.extend(negated);
    let values: Vec<f64> = values.iter().map(|x| f64::from(*x as f32)).collect();
    let mut results = Vec::new();
    for backend in backends() {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape(&values.len().to_string())
            .precision(Precision::F32)
            .build();
        let cast = x.cast(Precision::Fp8);
        let mut ctx = Context::with_backend(&graph, backend);
        let routine = ctx.forward(&[&cast]).unwrap();
        ctx.set_values(&x, &values).unwrap();
        ctx.run(&routine).unwrap();
        let cells = ctx.values(&cast).unwrap();
        for (x, cell) in values.iter().zip(&cells) {
            assert_eq!(
                cell.to_bits(),
                Precision::Fp8.round(*x).to_bits(),
                "{x} as fp8"
            );
        }
        results.push(cells);
    }
    assert_eq!(results[0].len(), values.len());
}
