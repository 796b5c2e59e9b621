//! Finite-difference checks (f64) of every differentiable operation's gradient, on both
//! backends: the gradient of the sum of the result's cells with respect to each input cell,
//! against `(f(x + h) − f(x − h)) / 2h`.

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{Context, Graph, Init, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// Values in `[-2, 2]` away from 0 by at least 0.15 (where relu and friends have kinks), distinct
/// (so that maxima have no ties), from a fixed sequence.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let magnitude = 0.15 + 1.85 * unit + i as f64 * 1e-3;
            if state & 1 == 0 {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

/// Checks `build`'s gradients with respect to parameters of the given shapes (literals) and
/// values (`positive` makes them all positive).
fn check(
    name: &str,
    inputs: &[(&str, usize)],
    positive: bool,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) {
    for backend in backends() {
        let backend_name = backend.name();
        let graph = Graph::new();
        let starts: Vec<Vec<f64>> = inputs
            .iter()
            .enumerate()
            .map(|(i, (_, n))| {
                let v = values(*n, 17 + i as u64);
                if positive {
                    v.iter().map(|x| x.abs()).collect()
                } else {
                    v
                }
            })
            .collect();
        let params: Vec<Tensor> = inputs
            .iter()
            .zip(&starts)
            .enumerate()
            .map(|(i, ((shape, _), start))| {
                graph
                    .param(&format!("p{i}"))
                    .shape(shape)
                    .precision(Precision::F64)
                    .init(Init::Values(start.clone()))
                    .build()
            })
            .collect();
        let out = build(&graph, &params);
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx
            .backprop(&out)
            .unwrap_or_else(|e| panic!("{name} on {backend_name}: {e}"));
        ctx.run(&backprop).unwrap();
        let analytic: Vec<Vec<f64>> = params.iter().map(|p| ctx.grad(p).unwrap()).collect();
        let forward = ctx.forward(&[&out]).unwrap();
        let h = 1e-6;
        for (i, param) in params.iter().enumerate() {
            for cell in 0..starts[i].len() {
                let mut total = |delta: f64| {
                    let mut shifted = starts[i].clone();
                    shifted[cell] += delta;
                    ctx.set_values(param, &shifted).unwrap();
                    ctx.run(&forward).unwrap();
                    let sum: f64 = ctx.values(&out).unwrap().iter().sum();
                    ctx.set_values(param, &starts[i]).unwrap();
                    sum
                };
                let numeric = (total(h) - total(-h)) / (2.0 * h);
                let got = analytic[i][cell];
                assert!(
                    (numeric - got).abs() <= 1e-5 * numeric.abs().max(1.0),
                    "{name} on {backend_name}: d/d p{i}[{cell}]: analytic {got}, numeric {numeric}"
                );
            }
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
        check(name, &[("2,3", 6)], positive, |_, p| op(&p[0]));
    }
}

#[test]
fn binary_pointwise_operations_with_broadcasting() {
    // The second operand (one axis) broadcasts over the first's rows.
    check("add", &[("2,3", 6), ("3", 3)], false, |_, p| &p[0] + &p[1]);
    check("sub", &[("2,3", 6), ("3", 3)], false, |_, p| &p[0] - &p[1]);
    check("pmul", &[("2,3", 6), ("3", 3)], false, |_, p| {
        p[0].pmul(&p[1])
    });
    check("div", &[("2,3", 6), ("3", 3)], true, |_, p| &p[0] / &p[1]);
    check("pow", &[("2,3", 6), ("3", 3)], true, |_, p| p[0].pow(&p[1]));
    check("max", &[("2,3", 6), ("3", 3)], false, |_, p| {
        p[0].max(&p[1])
    });
    check("min", &[("2,3", 6), ("3", 3)], false, |_, p| {
        p[0].min(&p[1])
    });
    check("number", &[("4", 4)], false, |_, p| 3.0 * &p[0] - 1.5);
}

#[test]
fn ternary_operations() {
    check("where", &[("4", 4), ("4", 4), ("4", 4)], false, |_, p| {
        Tensor::where_(&p[0].relu(), &p[1], &p[2])
    });
    check("fma", &[("2,3", 6), ("3", 3), ("2,3", 6)], false, |_, p| {
        Tensor::fma(&p[0], &p[1], &p[2])
    });
}

#[test]
fn contractions() {
    // w (input 3, output 2) composed with x (output 3, batch 4).
    check("compose", &[("3->2", 6), ("4|3", 12)], false, |_, p| {
        &p[0] * &p[1]
    });
    check("einsum", &[("2,3", 6), ("3,4", 12)], false, |_, p| {
        p[0].einsum("ij;jk=>ik", &p[1])
    });
    check(
        "einsum3",
        &[("2", 2), ("2,3", 6), ("3", 3)],
        false,
        |_, p| p[0].einsum3("i;ij;j=>i", &p[1], &p[2]),
    );
    check("transpose", &[("2,3", 6)], false, |_, p| {
        p[0].einsum1("ij=>ji")
    });
    check("row sums", &[("2,3", 6)], false, |_, p| {
        p[0].einsum1("ij=>i")
    });
    check("diagonal", &[("3,3", 9)], false, |_, p| {
        p[0].einsum1("ii=>i")
    });
    check("outer sum", &[("2", 2), ("3", 3)], false, |_, p| {
        p[0].outer_sum("i;j=>ij", &p[1])
    });
}

#[test]
fn convolutions() {
    // A valid 1-D convolution (affine index o + k) and a strided, dilated one.
    check("convolution", &[("6", 6), ("3", 3)], false, |_, p| {
        p[0].einsum("o<+k;k=>o", &p[1])
    });
    check(
        "strided convolution",
        &[("9", 9), ("2", 2)],
        false,
        |_, p| p[0].einsum("2*o<+2*k;k=>o", &p[1]),
    );
}

#[test]
fn maxima() {
    check("tropical", &[("2,3", 6), ("3,2", 6)], false, |_, p| {
        p[0].tropical("ij;jk=>ik", &p[1])
    });
    check("row maxima", &[("3,4", 12)], false, |_, p| {
        p[0].einmax1("ij=>i")
    });
    check("max-pool", &[("8", 8)], false, |graph, p| {
        let pooled = p[0].einmax1("2*o<+k=>o");
        graph.set_dim(&pooled.capture("k").unwrap(), 2).unwrap();
        pooled
    });
}

#[test]
fn interleaving_and_stacking() {
    check("interleave", &[("2,3", 6), ("2,3", 6)], false, |_, p| {
        Tensor::interleave(&p[0], &p[1]).pmul(&Tensor::interleave(&p[0], &p[1]))
    });
    check("deinterleave", &[("6", 6)], false, |_, p| {
        p[0].deinterleave(true).pmul(&p[0].deinterleave(false))
    });
    check("stack", &[("3", 3), ("3", 3)], false, |_, p| {
        let s = Tensor::stack(&[&p[0], &p[1]]);
        s.pmul(&s)
    });
}

#[test]
fn concatenation() {
    check("concat", &[("2", 2), ("3", 3)], false, |_, p| {
        Tensor::concat("a; b => a^b", &[&p[0], &p[1]])
            .pmul(&Tensor::concat("a; b => a^b", &[&p[0], &p[1]]))
    });
}
