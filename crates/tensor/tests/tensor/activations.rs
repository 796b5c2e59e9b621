//! The activation functions on tensors, on both backends: values against references computed
//! offline (Python's `math` module), the extremes ±1000 without infinities or NaN in f32 and
//! f64, the spec form, and finite-difference checks of every gradient.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Activation, Context, Graph, Tensor, op};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// The activation's cells of `xs` (one output axis) in `precision`, on `backend`.
fn activate(
    backend: Box<dyn Backend>,
    op: Activation,
    xs: &[f64],
    precision: Precision,
) -> Vec<f64> {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .output([xs.len()])
        .precision(precision)
        .values(xs.to_vec())
        .build();
    let y = x.activation(op).cast(Precision::F64);
    let mut ctx = Context::with_backend(&graph, backend);
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.run(&forward).unwrap();
    ctx.values(&y).unwrap()
}

const XS: [f64; 7] = [-1000.0, -6.0, -1.5, 0.0, 0.3, 2.5, 1000.0];

/// `f(XS)` per activation, computed offline with Python's `math` module in double precision
/// (`gelu` as `0.5*x*erfc(-x/sqrt(2))`, `gelu_tanh` as
/// `x/(1+exp(-2*sqrt(2/pi)*(x+0.044715*x**3)))`, `softplus` as `max(x,0)+log1p(exp(-abs(x)))`),
/// with the relative tolerance in f64.
fn references() -> Vec<(Activation, [f64; 7], f64)> {
    vec![
        (
            Activation::Sigmoid,
            [
                0.0,
                0.0024726231566347748,
                0.18242552380635632,
                0.5,
                0.574442516811659,
                0.9241418199787566,
                1.0,
            ],
            1e-14,
        ),
        (
            Activation::Abs,
            [1000.0, 6.0, 1.5, 0.0, 0.3, 2.5, 1000.0],
            0.0,
        ),
        (
            Activation::Gelu,
            [
                -0.0,
                -5.919525870226207e-09,
                -0.10021080190328713,
                0.0,
                0.18537342665668577,
                2.4844758366855597,
                1000.0,
            ],
            1.2e-7,
        ),
        (
            Activation::GeluTanh,
            [
                -0.0,
                -8.43964670076231e-11,
                -0.10042842301976705,
                0.0,
                0.18537092354275925,
                2.484915733910001,
                1000.0,
            ],
            1e-13,
        ),
        (
            Activation::Silu,
            [
                -0.0,
                -0.014835738939808649,
                -0.27363828570953447,
                0.0,
                0.1723327550434977,
                2.3103545499468914,
                1000.0,
            ],
            1e-14,
        ),
        (
            Activation::Softplus,
            [
                0.0,
                0.0024756851377304495,
                0.2014132779827524,
                std::f64::consts::LN_2,
                0.8543552444685272,
                2.5788897342925496,
                1000.0,
            ],
            1e-14,
        ),
    ]
}

#[test]
fn values_match_references_in_f64_and_f32() {
    for precision in [Precision::F64, Precision::F32] {
        for (op, expected, tolerance) in references() {
            for backend in backends() {
                let backend_name = backend.name();
                let got = activate(backend, op, &XS, precision);
                for ((x, g), e) in XS.iter().zip(&got).zip(&expected) {
                    // f32 keeps about 7 digits, fewer in the far tails, where the functions are
                    // steep in relative terms: at −6, gelu multiplies a relative error of its
                    // intermediate values by x² = 36.
                    let tolerance = match precision {
                        Precision::F64 => tolerance,
                        _ => 5e-6,
                    } * e.abs();
                    assert!(
                        g.is_finite() && (g - e).abs() <= tolerance,
                        "{}({x}) in {precision:?} on {backend_name}: {g:e}, expected {e:e}",
                        op.name()
                    );
                }
            }
        }
    }
}

/// The spec form sums what the spec leaves out: `"ij=>i"` gives each row's sum of activations.
#[test]
fn the_spec_form_sums_over_what_the_result_leaves_out() {
    for backend in backends() {
        let backend_name = backend.name();
        let graph = Graph::new();
        let xs = [-1.5, 0.3, 2.5, -6.0];
        let x = graph
            .data("x")
            .shape("2,2")
            .precision(Precision::F64)
            .values(xs.to_vec())
            .build();
        let y = x.activation_spec(Activation::Softplus, "ij=>i");
        let mut ctx = Context::with_backend(&graph, backend);
        let forward = ctx.forward(&[&y]).unwrap();
        ctx.run(&forward).unwrap();
        let got = ctx.values(&y).unwrap();
        // Python: softplus(-1.5) + softplus(0.3), softplus(2.5) + softplus(-6).
        let expected = [
            0.2014132779827524 + 0.8543552444685272,
            2.5788897342925496 + 0.0024756851377304495,
        ];
        for (g, e) in got.iter().zip(expected) {
            assert!(
                (g - e).abs() <= 1e-14 * e,
                "softplus \"ij=>i\" on {backend_name}: {got:?}, expected {expected:?}"
            );
        }
    }
}

/// The gradients at ±1000 are the limits (0 or 1, sign for abs), not NaN.
#[test]
fn gradients_at_the_extremes_are_the_limits() {
    let limits = [
        (Activation::Sigmoid, [0.0, 0.0]),
        (Activation::Abs, [-1.0, 1.0]),
        (Activation::Gelu, [0.0, 1.0]),
        (Activation::GeluTanh, [0.0, 1.0]),
        (Activation::Silu, [0.0, 1.0]),
        (Activation::Softplus, [0.0, 1.0]),
    ];
    for (op, expected) in limits {
        for precision in [Precision::F64, Precision::F32] {
            for backend in backends() {
                let backend_name = backend.name();
                let graph = Graph::new();
                let x = graph
                    .param("x")
                    .output([2])
                    .precision(precision)
                    .init(rcannl_tensor::Init::Values(vec![-1000.0, 1000.0]))
                    .build();
                let y = x.activation(op);
                let mut ctx = Context::with_backend(&graph, backend);
                ctx.init_params().unwrap();
                let backprop = ctx.backprop(&y).unwrap();
                ctx.run(&backprop).unwrap();
                let got = ctx.grad(&x).unwrap();
                assert_eq!(
                    got,
                    expected,
                    "{}' at ±1000 in {precision:?} on {backend_name}",
                    op.name()
                );
            }
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    for op in Activation::ALL {
        for backend in backends() {
            let backend_name = backend.name();
            let inputs = Inputs {
                shapes: &["2,3"],
                positive: false,
            };
            let build = |_: &Graph, p: &[Tensor]| p[0].activation(op);
            if let Err(e) = check_gradients(backend, &inputs, 1e-5, build) {
                panic!("{} on {backend_name}: {e}", op.name());
            }
        }
    }
}

#[test]
fn the_spec_form_has_gradients_too() {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs {
            shapes: &["2,3"],
            positive: false,
        };
        let build = |_: &Graph, p: &[Tensor]| p[0].activation_spec(Activation::Gelu, "ij=>j");
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, build) {
            panic!("gelu \"ij=>j\" on {backend_name}: {e}");
        }
    }
}

/// `op!` calls the activations by name, with a spec first or not, and folds them on numbers.
#[test]
fn op_calls_activations_by_name() {
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("2,2")
        .precision(Precision::F64)
        .values(vec![-1.5, 0.3, 2.5, -6.0])
        .build();
    let rows = op! { softplus("ij=>i", x) };
    let scaled = op! { sigmoid(0.0) * gelu(x) + abs(silu(x)) - gelu_tanh(x) };
    let mut ctx = Context::with_backend(&graph, Box::new(Interpreter));
    let forward = ctx.forward(&[&rows, &scaled]).unwrap();
    ctx.run(&forward).unwrap();
    let x_values = [-1.5, 0.3, 2.5, -6.0];
    let expected: Vec<f64> = x_values
        .iter()
        .map(|&x| {
            0.5 * Activation::Gelu.apply(x) + Activation::Silu.apply(x).abs()
                - Activation::GeluTanh.apply(x)
        })
        .collect();
    assert_eq!(ctx.values(&scaled).unwrap(), expected);
    let row_sums = [
        Activation::Softplus.apply(-1.5) + Activation::Softplus.apply(0.3),
        Activation::Softplus.apply(2.5) + Activation::Softplus.apply(-6.0),
    ];
    assert_eq!(ctx.values(&rows).unwrap(), row_sums);
}
