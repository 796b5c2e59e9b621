//! Finite-difference checks (f64) of every differentiable operation's gradient, on both
//! backends: the gradient of the sum of the result's cells with respect to each input cell,
//! against `(f(x + h) − f(x − h)) / 2h`.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_tensor::gradcheck::{Inputs, check_gradients};
use rcannl_tensor::{Graph, StackAxis, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// Checks `build`'s gradients with respect to parameters of the given shapes (literals) and
/// values (`positive` makes them all positive), on both backends.
fn check(name: &str, shapes: &[&str], positive: bool, build: impl Fn(&Graph, &[Tensor]) -> Tensor) {
    for backend in backends() {
        let backend_name = backend.name();
        let inputs = Inputs { shapes, positive };
        if let Err(e) = check_gradients(backend, &inputs, 1e-5, &build) {
            panic!("{name} on {backend_name}: {e}");
        }
    }
}

#[test]
fn unary_pointwise_operations() {
    type Unary = fn(&Tensor) -> Tensor;
    let ops: [(&str, Unary, bool); 13] = [
        ("neg", Tensor::neg, false),
        ("relu", Tensor::relu, false),
        ("sat01", |t| (t * 0.4).sat01(), false),
        ("exp", Tensor::exp, false),
        ("log", Tensor::log, true),
        ("exp2", Tensor::exp2, false),
        ("log2", Tensor::log2, true),
        ("sin", Tensor::sin, false),
        ("cos", Tensor::cos, false),
        ("sqrt", Tensor::sqrt, true),
        ("recip", Tensor::recip, true),
        ("recip_sqrt", Tensor::recip_sqrt, true),
        ("tanh", Tensor::tanh, false),
    ];
    for (name, op, positive) in ops {
        check(name, &["2,3"], positive, |_, p| op(&p[0]));
    }
}

#[test]
fn binary_pointwise_operations_with_broadcasting() {
    // The second operand (one axis) broadcasts over the first's rows.
    check("add", &["2,3", "3"], false, |_, p| &p[0] + &p[1]);
    check("sub", &["2,3", "3"], false, |_, p| &p[0] - &p[1]);
    check("pmul", &["2,3", "3"], false, |_, p| p[0].pmul(&p[1]));
    check("div", &["2,3", "3"], true, |_, p| &p[0] / &p[1]);
    check("pow", &["2,3", "3"], true, |_, p| p[0].pow(&p[1]));
    check("max", &["2,3", "3"], false, |_, p| p[0].max(&p[1]));
    check("min", &["2,3", "3"], false, |_, p| p[0].min(&p[1]));
    check("number", &["4"], false, |_, p| 3.0 * &p[0] - 1.5);
}

#[test]
fn ternary_operations() {
    check("where", &["4", "4", "4"], false, |_, p| {
        Tensor::where_(&p[0].relu(), &p[1], &p[2])
    });
    check("fma", &["2,3", "3", "2,3"], false, |_, p| {
        Tensor::fma(&p[0], &p[1], &p[2])
    });
}

#[test]
fn contractions() {
    // w (input 3, output 2) composed with x (output 3, batch 4).
    check("compose", &["3->2", "4|3"], false, |_, p| &p[0] * &p[1]);
    check("einsum", &["2,3", "3,4"], false, |_, p| {
        p[0].einsum("ij;jk=>ik", &p[1])
    });
    check("einsum3", &["2", "2,3", "3"], false, |_, p| {
        p[0].einsum3("i;ij;j=>i", &p[1], &p[2])
    });
    check("transpose", &["2,3"], false, |_, p| p[0].einsum1("ij=>ji"));
    check("row sums", &["2,3"], false, |_, p| p[0].einsum1("ij=>i"));
    check("diagonal", &["3,3"], false, |_, p| p[0].einsum1("ii=>i"));
    check("outer sum", &["2", "3"], false, |_, p| {
        p[0].outer_sum("i;j=>ij", &p[1])
    });
}

#[test]
fn convolutions() {
    // A valid 1-D convolution (affine index o + k) and a strided, dilated one.
    check("convolution", &["6", "3"], false, |_, p| {
        p[0].einsum("o<+k;k=>o", &p[1])
    });
    check("strided convolution", &["9", "2"], false, |_, p| {
        p[0].einsum("2*o<+2*k;k=>o", &p[1])
    });
}

#[test]
fn maxima() {
    check("tropical", &["2,3", "3,2"], false, |_, p| {
        p[0].tropical("ij;jk=>ik", &p[1])
    });
    check("row maxima", &["3,4"], false, |_, p| p[0].einmax1("ij=>i"));
    check("max-pool", &["8"], false, |graph, p| {
        let pooled = p[0].einmax1("2*o<+k=>o");
        graph.set_dim(&pooled.capture("k").unwrap(), 2).unwrap();
        pooled
    });
}

#[test]
fn interleaving_and_stacking() {
    check("interleave", &["2,3", "2,3"], false, |_, p| {
        Tensor::interleave(&p[0], &p[1]).pmul(&Tensor::interleave(&p[0], &p[1]))
    });
    check("deinterleave", &["6"], false, |_, p| {
        p[0].deinterleave(true).pmul(&p[0].deinterleave(false))
    });
    check("stack", &["3", "3"], false, |_, p| {
        let s = Tensor::stack(&[&p[0], &p[1]]);
        s.pmul(&s)
    });
    for axis in [StackAxis::Output, StackAxis::Input, StackAxis::Batch] {
        check(
            &format!("stack along {axis:?}"),
            &["3", "3"],
            false,
            |_, p| {
                let s = Tensor::stack_along(axis, &[&p[0], &p[1]]);
                // A weight per stacked position, so that each tensor's gradient differs.
                s.pmul(&s).pmul(&Tensor::stack_along(axis, &[&p[0], &p[0]]))
            },
        );
    }
}

#[test]
fn concatenation() {
    check("concat", &["2", "3"], false, |_, p| {
        Tensor::concat("a; b => a^b", &[&p[0], &p[1]])
            .pmul(&Tensor::concat("a; b => a^b", &[&p[0], &p[1]]))
    });
}

/// The gradient of `x^p` for a constant integer `p` is `p·x^(p−1)`, also at 0 and below it
/// (where `p·v/x` would divide by 0 or be NaN); `x^0` is constant, its gradient 0 everywhere.
#[test]
fn pow_with_an_integer_exponent_at_zero_and_negative_bases() {
    use rcannl_ir::Precision;
    use rcannl_tensor::{Context, Init};
    let xs = [0.0, -2.0, 3.0, -1.5];
    for p in [0, 1, 2, 3, -2] {
        for backend in backends() {
            let backend_name = backend.name();
            let graph = Graph::new();
            let x = graph
                .param("x")
                .output([xs.len()])
                .precision(Precision::F64)
                .init(Init::Values(xs.to_vec()))
                .build();
            let y = x.pow(&graph.number(f64::from(p)));
            let mut ctx = Context::with_backend(&graph, backend);
            ctx.init_params().unwrap();
            let backprop = ctx.backprop(&y).unwrap();
            ctx.run(&backprop).unwrap();
            let expected: Vec<f64> = xs
                .iter()
                .map(|&x| match p {
                    0 => 0.0,
                    _ => f64::from(p) * x.powi(p - 1),
                })
                .collect();
            let got = ctx.grad(&x).unwrap();
            for (g, e) in got.iter().zip(&expected) {
                assert!(
                    g == e || (g - e).abs() <= 1e-12 * e.abs(),
                    "x^{p} on {backend_name}: gradient {got:?}, expected {expected:?}"
                );
            }
        }
    }
}
