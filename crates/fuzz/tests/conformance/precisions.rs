//! What compiled backends hold and compute in: integers exactly as the interpreter (u8, i8, u16,
//! and i64 and u64 beyond 32 bits, on a GPU too where it offers them), f16 cells rounded as f16,
//! bf16 and fp8 cells as the interpreter rounds them, a bf16 network trained as on the
//! interpreter, and, on a GPU, a precision it lacks refused naming the tensor; host writes
//! between runs reach the backend's buffers and its results reach the host, on every backend.

use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Precision, Value};
use rcannl_nn::blocks::Mlp;
use rcannl_nn::loss::hinge;
use rcannl_nn::optim::Sgd;
use rcannl_tensor::{BinaryOp, Context, Graph, UnaryOp};

use crate::target::Target;

/// `a op b` for every binary op of `ops`, with operands of `precision`.
fn binary_results(
    backend: Box<dyn Backend>,
    precision: Precision,
    ops: &[BinaryOp],
    a: &[f64],
    b: &[f64],
) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    let shape = a.len().to_string();
    let x = graph.data("a").shape(&shape).precision(precision).build();
    let y = graph.data("b").shape(&shape).precision(precision).build();
    let outs: Vec<_> = ops.iter().map(|op| x.binary(*op, &y)).collect();
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&outs.iter().collect::<Vec<_>>()).unwrap();
    ctx.set_values(&x, a).unwrap();
    ctx.set_values(&y, b).unwrap();
    ctx.run(&forward).unwrap();
    outs.iter().map(|t| ctx.values(t).unwrap()).collect()
}

fn integers_compute_exactly(target: &Target) {
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Lt,
        BinaryOp::Eq,
    ];
    let a: [f64; 7] = [-7.0, 5.0, 0.0, 9.0, -3.0, 100.0, 46_000.0];
    let b: [f64; 7] = [2.0, -3.0, 1.0, 4.0, 5.0, -7.0, 46_000.0];
    for precision in [Precision::I32, Precision::U32] {
        let (a, b): (Vec<f64>, Vec<f64>) = if precision == Precision::U32 {
            (
                a.iter().map(|x| x.abs()).collect(),
                b.iter().map(|x| x.abs()).collect(),
            )
        } else {
            (a.to_vec(), b.to_vec())
        };
        let ops: Vec<BinaryOp> = ops
            .iter()
            .copied()
            .filter(|op| precision == Precision::I32 || *op != BinaryOp::Sub)
            .collect();
        assert_eq!(
            binary_results(target.backend(), precision, &ops, &a, &b),
            binary_results(Box::new(Interpreter), precision, &ops, &a, &b),
            "{precision} on {}",
            target.name()
        );
    }
}
conformance!(integers_compute_exactly: cc, gpu);

/// An integer quotient by zero is 0 on every backend, the interpreter included: compiled code
/// cannot trap, and the backends agree rather than one stopping where the others go on.
fn integer_quotients_by_zero_are_zero(target: &Target) {
    let (a, b) = ([7.0, -7.0, 0.0, 9.0], [0.0, 0.0, 0.0, 2.0]);
    let precisions = [
        Precision::I32,
        Precision::U16,
        Precision::U64,
        Precision::I64,
    ];
    for precision in precisions {
        if let Some(gpu) = target.gpu()
            && !rcannl_gpu::wgsl::holds(precision, gpu.0.device().features())
        {
            eprintln!("this GPU has no shader-int64: {precision} quotients did not run");
            continue;
        }
        let (a, b) = match precision {
            Precision::I32 | Precision::I64 => (a.to_vec(), b.to_vec()),
            _ => (a.map(f64::abs).to_vec(), b.to_vec()),
        };
        let got = binary_results(target.backend(), precision, &[BinaryOp::Div], &a, &b);
        let expected: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| if *y == 0.0 { 0.0 } else { (x / y).trunc() })
            .collect();
        assert_eq!(got, [expected], "{precision} on {}", target.name());
    }
}
conformance!(integer_quotients_by_zero_are_zero);

/// `binary_results` with `a` and `b` given as cells, compared as cells (a u64's bits, an fp8's
/// value): bit for bit.
fn binary_cells(
    backend: Box<dyn Backend>,
    precision: Precision,
    ops: &[BinaryOp],
    a: &[Value],
    b: &[Value],
) -> Result<Vec<Vec<Value>>, String> {
    let graph = Graph::new();
    let shape = a.len().to_string();
    let x = graph.data("a").shape(&shape).precision(precision).build();
    let y = graph.data("b").shape(&shape).precision(precision).build();
    let mut outs: Vec<_> = ops.iter().map(|op| x.binary(*op, &y)).collect();
    outs.push(x.einsum("i;i=>", &y));
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx
        .forward(&outs.iter().collect::<Vec<_>>())
        .map_err(|e| e.message)?;
    ctx.set_cells(&x, a).unwrap();
    ctx.set_cells(&y, b).unwrap();
    ctx.run(&forward).unwrap();
    Ok(outs.iter().map(|t| ctx.cells(t).unwrap()).collect())
}

/// The precisions C has a type for and WGSL has not (u8, i8, u16, bf16, fp8; u64 on a device
/// without `shader-int64`) compute as the interpreter computes them, bit for bit: wrapping,
/// rounding and ties to even included. A GPU
/// computes in those it says it holds (`rcannl_gpu::wgsl::holds`, asked of the device); a
/// routine over one it does not hold is refused naming the tensor and the precision.
fn narrow_and_64_bit_precisions_compute_as_the_interpreter(target: &Target) {
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Max,
        BinaryOp::Lt,
    ];
    let ints = |v: &[i64]| -> Vec<Value> { v.iter().map(|&i| Value::Int(i)).collect() };
    let floats = |v: &[f64]| -> Vec<Value> { v.iter().map(|&x| Value::Float(x)).collect() };
    let cases = [
        (
            Precision::U8,
            ints(&[255, 200, 7, 0, 128]),
            ints(&[2, 100, 9, 1, 128]),
        ),
        (
            Precision::I8,
            ints(&[127, -128, -56, 5, 100]),
            ints(&[1, -1, 3, -7, 100]),
        ),
        (
            Precision::Bf16,
            // 1 + 2⁻⁷ + 1.5 lies halfway between two bf16 values: ties to even.
            floats(&[1.0078125, 3.0, -0.75, 3.3895313892515355e38, 1.5e-30]),
            floats(&[1.5, 0.875, 0.625, 3.3895313892515355e38, -2.5e-30]),
        ),
        (
            Precision::U16,
            ints(&[65535, 300, 7, 0, 40000]),
            ints(&[2, 300, 9, 1, 40000]),
        ),
        (
            Precision::U64,
            ints(&[-1, i64::MIN + 5, 1 << 62, 3, 12]),
            ints(&[1, i64::MIN, 2, 4, -7]),
        ),
        (
            Precision::Fp8,
            floats(&[1.25, 3.0, -0.75, 57344.0, 2f64.powi(-16)]),
            floats(&[1.5, 0.875, 0.625, 8192.0, 2f64.powi(-16)]),
        ),
    ];
    for (precision, a, b) in cases {
        let held = match target.gpu() {
            Some(gpu) => rcannl_gpu::wgsl::holds(precision, gpu.0.device().features()),
            None => true,
        };
        let got = binary_cells(target.backend(), precision, &ops, &a, &b);
        if !held {
            let e = got.expect_err("a precision the device does not hold");
            assert!(e.contains("'a'") || e.contains("'b'"), "{e}");
            assert!(e.contains(&precision.to_string()), "{e}");
            continue;
        }
        assert_eq!(
            got.unwrap(),
            binary_cells(Box::new(Interpreter), precision, &ops, &a, &b).unwrap(),
            "{precision} on {}",
            target.name()
        );
    }
}
conformance!(narrow_and_64_bit_precisions_compute_as_the_interpreter: cc, gpu);

/// i64 and u64 compute in 64 bits as the interpreter computes them, on values beyond 32 bits:
/// wrapping arithmetic, quotients, powers, comparisons, a reduction, and the
/// conversions out of and into them (f32 rounding, saturating from floats, wrapping into 32 and 8
/// bits, u32 read as unsigned, 128-bit words). On a GPU, where the device offers `shader-int64`,
/// a routine holding them computes all its integers in `i64`.
fn sixty_four_bit_integers_compute_as_the_interpreter(target: &Target) {
    if let Some(gpu) = target.gpu()
        && !gpu.0.device().features().int64
    {
        eprintln!("this GPU has no shader-int64: the 64-bit check did not run");
        return;
    }
    let ints = |v: &[i64]| -> Vec<Value> { v.iter().map(|&i| Value::Int(i)).collect() };
    let a = ints(&[
        3_000_000_000,
        -5_000_000_007,
        i64::MAX,
        i64::MIN + 3,
        7,
        -1,
        1 << 40,
        0,
    ]);
    let b = ints(&[2, 3, 2, -1, 40, 0, (1 << 23) + 5, -9]);
    let exponents = ints(&[2, 3, 0, 1, 21, 63, 1, 4]);
    let floats: Vec<Value> = [1e19, -1e19, f64::NAN, 3.7e9, -2.5, 2.0e18, 4e9, -0.5]
        .map(Value::Float)
        .to_vec();
    let words: Vec<Value> = (0..8u32)
        .map(|i| Value::Word([0x8000_0000 | i, 0xDEAD_BEEF, i, 7]))
        .collect();
    let cells = |backend: Box<dyn Backend>, precision: Precision| -> Vec<Vec<Value>> {
        let graph = Graph::new();
        let data = |label: &str, p: Precision| graph.data(label).shape("8").precision(p).build();
        let (x, y, e) = (
            data("a", precision),
            data("b", precision),
            data("e", precision),
        );
        let f = data("f", Precision::F32);
        let w = data("w", Precision::Uint4x32);
        let mut outs: Vec<_> = [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Max,
            BinaryOp::Min,
            BinaryOp::Lt,
            BinaryOp::Eq,
            BinaryOp::Ne,
        ]
        .iter()
        .map(|op| x.binary(*op, &y))
        .collect();
        outs.push(x.binary(BinaryOp::Pow, &e));
        outs.push(x.einsum("i;i=>", &y));
        outs.extend([UnaryOp::Neg, UnaryOp::Relu, UnaryOp::Not].map(|op| x.unary(op)));
        outs.extend(
            [
                Precision::F32,
                Precision::I32,
                Precision::U32,
                Precision::U8,
                Precision::Uint4x32,
            ]
            .map(|p| x.cast(p)),
        );
        // Into the 64-bit precision: from floats, saturating; from a u32, unsigned; from words.
        outs.push(f.cast(precision));
        outs.push(x.cast(Precision::U32).cast(precision));
        outs.push(w.cast(precision));
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&outs.iter().collect::<Vec<_>>()).unwrap();
        for (tensor, values) in [
            (&x, &a),
            (&y, &b),
            (&e, &exponents),
            (&f, &floats),
            (&w, &words),
        ] {
            ctx.set_cells(tensor, values).unwrap();
        }
        ctx.run(&forward).unwrap();
        outs.iter().map(|t| ctx.cells(t).unwrap()).collect()
    };
    for precision in [Precision::I64, Precision::U64] {
        let got = cells(target.backend(), precision);
        let want = cells(Box::new(Interpreter), precision);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{precision}, output {i}, on {}", target.name());
        }
    }
}
conformance!(sixty_four_bit_integers_compute_as_the_interpreter: cc, gpu);

fn f16_cells_round_as_f16(target: &Target) {
    if let Some(gpu) = target.gpu()
        && !gpu.0.device().has_f16()
    {
        eprintln!("this GPU has no shader-f16: the f16 check did not run");
        return;
    }
    let ops = [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Div];
    let a: Vec<f64> = (0..50).map(|i| 0.37 * i as f64 - 4.1).collect();
    let b: Vec<f64> = (0..50).map(|i| 1.3 + 0.011 * i as f64).collect();
    let got = binary_results(target.backend(), Precision::F16, &ops, &a, &b);
    let want = binary_results(Box::new(Interpreter), Precision::F16, &ops, &a, &b);
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        // Within one f16 step of the interpreter's correctly rounded result: WGSL lets a
        // conversion to f16 round either way.
        let step = half::f16::from_f64(*w).to_f64().abs().max(6.1e-5) * 2f64.powi(-10);
        assert!((g - w).abs() <= step, "{g} vs {w}");
        assert_eq!(half::f16::from_f64(*g).to_f64(), *g, "{g} is an f16 value");
    }
}
conformance!(f16_cells_round_as_f16: cc, gpu);

/// Asked of the GPU itself, not of [`crate::target::OnDevice`], which refuses such a routine
/// before the backend sees it: a kept tensor (data) in a precision the device offers only with
/// a feature (f16, i64, u64, f64) computes as on the interpreter where the device offers it, and
/// is an error naming the tensor and the precision where it does not.
fn a_precision_the_device_lacks_is_an_error_naming_the_tensor(target: &Target) {
    let gpu = target.gpu().expect("a GPU case").0.clone();
    let features = gpu.device().features();
    let squares = |backend: Box<dyn Backend>, precision: Precision| {
        let graph = Graph::new();
        let x = graph
            .data("wide input")
            .shape("4")
            .precision(precision)
            .build();
        let y = x.binary(BinaryOp::Mul, &x);
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&y]).map_err(|e| e.message)?;
        ctx.set_values(&x, &[1.5, -2.0, 3.0, 0.25]).unwrap();
        ctx.run(&forward).unwrap();
        Ok::<_, String>(ctx.cells(&y).unwrap())
    };
    for precision in [
        Precision::F16,
        Precision::I64,
        Precision::U64,
        Precision::F64,
    ] {
        let got = squares(Box::new(gpu.clone()), precision);
        if rcannl_gpu::wgsl::holds(precision, features) {
            let want = squares(Box::new(Interpreter), precision).unwrap();
            assert_eq!(got.unwrap(), want, "{precision}");
        } else {
            let e = got.expect_err("a precision the device lacks");
            assert!(e.contains("'wide input'"), "{e}");
            assert!(e.contains(&precision.to_string()), "{e}");
        }
    }
}
conformance!(a_precision_the_device_lacks_is_an_error_naming_the_tensor: gpu);

fn host_writes_between_runs_reach_the_backend_and_results_reach_the_host(target: &Target) {
    let graph = Graph::new();
    let x = graph.data("x").shape("5").build();
    let two = graph.data("two").shape("5").build();
    let y = x.binary(BinaryOp::Mul, &two);
    let z = y.binary(BinaryOp::Add, &x);
    let mut ctx = Context::with_backend(&graph, target.backend());
    let first = ctx.forward(&[&y]).unwrap();
    let second = ctx.forward(&[&z]).unwrap();
    ctx.set_values(&two, &[2.0; 5]).unwrap();
    for round in 0..3 {
        let xs: Vec<f64> = (0..5).map(|i| (i + 10 * round) as f64).collect();
        ctx.set_values(&x, &xs).unwrap();
        ctx.run(&first).unwrap();
        let doubled: Vec<f64> = xs.iter().map(|v| 2.0 * v).collect();
        assert_eq!(ctx.values(&y).unwrap(), doubled);
        ctx.run(&second).unwrap();
        let tripled: Vec<f64> = xs.iter().map(|v| 3.0 * v).collect();
        assert_eq!(ctx.values(&z).unwrap(), tripled);
    }
}
conformance!(host_writes_between_runs_reach_the_backend_and_results_reach_the_host);

/// Each parameter's cells, then the loss, after `steps` SGD steps of a small MLP held in bf16
/// (the graph's default precision) on `backend`.
fn bf16_training(backend: Box<dyn Backend>, steps: usize) -> Vec<Vec<f64>> {
    let graph = Graph::new();
    graph.set_default_precision(Precision::Bf16);
    let points: Vec<f64> = (0..16).map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0).collect();
    let labels: Vec<f64> = points
        .chunks(2)
        .map(|p| if p[0] * p[1] > 0.0 { 1.0 } else { -1.0 })
        .collect();
    let x = graph.data("x").shape("8|->2").values(points).build();
    let y = graph.data("y").shape("8|->1").values(labels).build();
    let model = Mlp::new(&graph, "mlp", &[8, 1]);
    let loss = hinge(&model.apply(&x), &y);
    let mut sgd = Sgd::new(&graph, &model.params(), 0.1, 0.9);
    let mut ctx = Context::with_backend(&graph, backend);
    ctx.init_params().unwrap();
    let backprop = ctx.backprop(&loss).unwrap();
    let step = sgd.compile(&mut ctx).unwrap();
    for _ in 0..steps {
        ctx.run(&backprop).unwrap();
        ctx.run(&step).unwrap();
    }
    let params = model.params();
    assert!(params.iter().all(|p| p.precision() == Precision::Bf16));
    params
        .iter()
        .chain([&loss])
        .map(|t| ctx.values(t).unwrap())
        .collect()
}

/// A network held in bf16 trains as on the interpreter: its parameters and loss after a few
/// steps within a few of bf16's roundings (0.4% each), which a backend computing in another
/// order may take the other way.
fn a_bf16_network_trains_as_on_the_interpreter(target: &Target) {
    let got = bf16_training(target.backend(), 5);
    let want = bf16_training(Box::new(Interpreter), 5);
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        assert!(
            rcannl_fuzz::close(*g, *w, 2e-2),
            "{g} against the interpreter's {w} on {}",
            target.name()
        );
    }
}
conformance!(a_bf16_network_trains_as_on_the_interpreter: cc, gpu);
