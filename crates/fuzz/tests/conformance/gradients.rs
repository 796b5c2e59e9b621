//! Every differentiable operation's gradient, on every backend: the gradient of the sum of the
//! result's cells with respect to each input cell.
//!
//! Where the backend computes in f64 (the interpreter, the C backend) it is checked against
//! finite differences, `(f(x + h) − f(x − h)) / 2h` ([`check_gradients`]). A GPU lacks f64, and
//! f32 is too coarse for finite differences: there the same graph, over f32 parameters holding
//! the same values, is backpropagated on the interpreter and on the GPU ([`compare_gradients`]),
//! and the result's cells and every gradient cell must agree within [`F32_TOLERANCE`].
//! Operations come from the library's own lists (`UnaryOp::ALL`, `BinaryOp::ALL`,
//! `Activation::ALL`), so a new differentiable operation is checked here too.

use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_tensor::gradcheck::{Inputs, check_gradients, compare_gradients, test_values};
use rcannl_tensor::{
    Activation, Axes, Axis, AxisKind, BinaryOp, Context, Graph, Init, StackAxis, Tensor, UnaryOp,
};

use crate::target::Target;

/// How far an analytic gradient in f64 may be from its finite difference: relative, absolute
/// below a magnitude of 1.
const FINITE_DIFFERENCE_TOLERANCE: f64 = 1e-5;

/// How far a GPU's f32 results and gradients may be from the interpreter's f32 ones: relative,
/// absolute below a magnitude of 1.
///
/// The interpreter computes each expression in f64 and rounds it once, on the store; the GPU
/// rounds every operation to f32 (a few units in the last place, 6e-8 each), and its
/// transcendentals are not correctly rounded: WGSL allows `exp` and `exp2` 3 + 2·|x| units in
/// the last place, `log` and `log2` an absolute 2⁻²¹ near 1, `tanh` and `pow` what their
/// definitions through `exp` and `log2` inherit, and `sin` and `cos` an absolute 2⁻¹¹ (4.9e-4)
/// on [−π, π]. 1e-3 holds the sine's bound with room for the one multiplication a gradient adds
/// to it; a wrong index, operation or reduction moves these O(1) values much further. Sums run in
/// the interpreter's order (matrix products as the nests they stand for).
const F32_TOLERANCE: f64 = 1e-3;

/// Checks `build`'s gradients with respect to parameters of the given shapes (literals) and
/// values (`positive` makes them all positive) on `target`: against finite differences in f64,
/// or against the interpreter in the backend's precision where it lacks f64.
fn check(
    target: &Target,
    name: &str,
    shapes: &[&str],
    positive: bool,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) {
    let inputs = Inputs { shapes, positive };
    let outcome = match target.float() {
        Precision::F64 => check_gradients(
            target.backend(),
            &inputs,
            FINITE_DIFFERENCE_TOLERANCE,
            build,
        ),
        precision => compare_gradients(
            Box::new(Interpreter),
            target.backend(),
            &inputs,
            precision,
            F32_TOLERANCE,
            build,
        ),
    };
    if let Err(e) = outcome {
        panic!("{name} on {}: {e}", target.name());
    }
}

/// [`check`] of `build`'s result squared, so that the result's gradient differs from cell to
/// cell.
fn check_squared(
    target: &Target,
    name: &str,
    shapes: &[&str],
    positive: bool,
    build: impl Fn(&Graph, &[Tensor]) -> Tensor,
) {
    check(target, name, shapes, positive, |graph, p| {
        let out = build(graph, p);
        out.pmul(&out)
    });
}

/// Whether the checks of `op` draw positive values: its domain (logarithms, roots) or a pole at
/// 0 (reciprocals).
fn unary_needs_positive(op: UnaryOp) -> bool {
    match op {
        UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::RecipSqrt => true,
        UnaryOp::Neg
        | UnaryOp::Relu
        | UnaryOp::Sat01
        | UnaryOp::Exp
        | UnaryOp::Exp2
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Not
        | UnaryOp::Trunc
        | UnaryOp::StopGradient => false,
    }
}

/// Whether the checks of `op` draw positive values (a divisor, a base raised to any power).
fn binary_needs_positive(op: BinaryOp) -> bool {
    match op {
        BinaryOp::Div | BinaryOp::Pow => true,
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::Lt
        | BinaryOp::Eq
        | BinaryOp::Ne => false,
    }
}

/// `op` of `t`, pointwise or following `spec`; sat01's operand scaled into [0, 1] and beyond,
/// away from its kinks.
fn apply_unary(op: UnaryOp, t: &Tensor, spec: Option<&str>) -> Tensor {
    let t = match op {
        UnaryOp::Sat01 => t * 0.4,
        _ => t.clone(),
    };
    match spec {
        Some(spec) => t.unary_spec(op, spec),
        None => t.unary(op),
    }
}

fn differentiable_unary() -> impl Iterator<Item = UnaryOp> {
    UnaryOp::ALL.into_iter().filter(|op| op.is_differentiable())
}

fn differentiable_binary() -> impl Iterator<Item = BinaryOp> {
    BinaryOp::ALL
        .into_iter()
        .filter(|op| op.is_differentiable())
}

fn unary_pointwise_operations(target: &Target) {
    for op in differentiable_unary() {
        check(
            target,
            op.name(),
            &["2,3"],
            unary_needs_positive(op),
            |_, p| apply_unary(op, &p[0], None),
        );
    }
}
conformance!(unary_pointwise_operations);

fn binary_pointwise_operations_with_broadcasting(target: &Target) {
    // The second operand (one axis) broadcasts over the first's rows.
    for op in differentiable_binary() {
        check(
            target,
            op.name(),
            &["2,3", "3"],
            binary_needs_positive(op),
            |_, p| p[0].binary(op, &p[1]),
        );
    }
    check(target, "number", &["4"], false, |_, p| 3.0 * &p[0] - 1.5);
}
conformance!(binary_pointwise_operations_with_broadcasting);

fn ternary_operations(target: &Target) {
    check(target, "where", &["4", "4", "4"], false, |_, p| {
        Tensor::where_(&p[0].relu(), &p[1], &p[2])
    });
    check(target, "fma", &["2,3", "3", "2,3"], false, |_, p| {
        Tensor::fma(&p[0], &p[1], &p[2])
    });
}
conformance!(ternary_operations);

fn contractions(target: &Target) {
    // w (input 3, output 2) composed with x (output 3, batch 4).
    check(target, "compose", &["3->2", "4|3"], false, |_, p| {
        &p[0] * &p[1]
    });
    check(target, "einsum", &["2,3", "3,4"], false, |_, p| {
        p[0].einsum("ij;jk=>ik", &p[1])
    });
    check(target, "einsum3", &["2", "2,3", "3"], false, |_, p| {
        p[0].einsum3("i;ij;j=>i", &p[1], &p[2])
    });
    check(target, "transpose", &["2,3"], false, |_, p| {
        p[0].einsum1("ij=>ji")
    });
    check(target, "row sums", &["2,3"], false, |_, p| {
        p[0].einsum1("ij=>i")
    });
    check(target, "diagonal", &["3,3"], false, |_, p| {
        p[0].einsum1("ii=>i")
    });
    check(target, "outer sum", &["2", "3"], false, |_, p| {
        p[0].outer_sum("i;j=>ij", &p[1])
    });
}
conformance!(contractions);

fn convolutions(target: &Target) {
    // A valid 1-D convolution (affine index o + k) and a strided, dilated one.
    check(target, "convolution", &["6", "3"], false, |_, p| {
        p[0].einsum("o<+k;k=>o", &p[1])
    });
    check(target, "strided convolution", &["9", "2"], false, |_, p| {
        p[0].einsum("2*o<+2*k;k=>o", &p[1])
    });
}
conformance!(convolutions);

fn maxima(target: &Target) {
    check(target, "tropical", &["2,3", "3,2"], false, |_, p| {
        p[0].tropical("ij;jk=>ik", &p[1])
    });
    check(target, "row maxima", &["3,4"], false, |_, p| {
        p[0].einmax1("ij=>i")
    });
    check(target, "max-pool", &["8"], false, |graph, p| {
        let pooled = p[0].einmax1("2*o<+k=>o");
        graph.set_dim(&pooled.capture("k").unwrap(), 2).unwrap();
        pooled
    });
}
conformance!(maxima);

fn interleaving_and_stacking(target: &Target) {
    check(target, "interleave", &["2,3", "2,3"], false, |_, p| {
        Tensor::interleave(&p[0], &p[1]).pmul(&Tensor::interleave(&p[0], &p[1]))
    });
    check(target, "deinterleave", &["6"], false, |_, p| {
        p[0].deinterleave(true).pmul(&p[0].deinterleave(false))
    });
    check(target, "stack", &["3", "3"], false, |_, p| {
        let s = Tensor::stack(&[&p[0], &p[1]]);
        s.pmul(&s)
    });
    for axis in [StackAxis::Output, StackAxis::Input, StackAxis::Batch] {
        check(
            target,
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
conformance!(interleaving_and_stacking);

fn concatenation(target: &Target) {
    check(target, "concat", &["2", "3"], false, |_, p| {
        Tensor::concat("a; b => a^b", &[&p[0], &p[1]])
            .pmul(&Tensor::concat("a; b => a^b", &[&p[0], &p[1]]))
    });
}
conformance!(concatenation);

fn concatenations_and_outer_sums_reducing_what_the_result_leaves_out(target: &Target) {
    check_squared(
        target,
        "reducing outer sum",
        &["2,2", "2,3"],
        false,
        |_, p| p[0].outer_sum("a,b; b,c => a,c", &p[1]),
    );
    check_squared(
        target,
        "reducing concatenation",
        &["2,3", "2"],
        false,
        |_, p| Tensor::concat("a, c; b => a^b", &[&p[0], &p[1]]),
    );
}
conformance!(concatenations_and_outer_sums_reducing_what_the_result_leaves_out);

/// The gradient of `x^p` for a constant integer `p` is `p·x^(p−1)`, also at 0 and below it
/// (where `p·v/x` would divide by 0 or be NaN); `x^0` is constant, its gradient 0 everywhere.
/// Exact in f64 up to rounding; within [`F32_TOLERANCE`] where the backend computes in f32.
fn pow_with_an_integer_exponent_at_zero_and_negative_bases(target: &Target) {
    let xs = [0.0, -2.0, 3.0, -1.5];
    let tolerance = match target.float() {
        Precision::F64 => 1e-12,
        _ => F32_TOLERANCE,
    };
    for p in [0, 1, 2, 3, -2] {
        let graph = Graph::new();
        let x = graph
            .param("x")
            .output([xs.len()])
            .precision(target.float())
            .init(Init::Values(xs.to_vec()))
            .build();
        let y = x.pow(&graph.number(f64::from(p)));
        let mut ctx = Context::with_backend(&graph, target.backend());
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
                g == e || (g - e).abs() <= tolerance * e.abs(),
                "x^{p} on {}: gradient {got:?}, expected {expected:?}",
                target.name()
            );
        }
    }
}
conformance!(pow_with_an_integer_exponent_at_zero_and_negative_bases);

/// Unary specs that permute, reduce, take a diagonal, and reduce the other way round.
const UNARY_SPECS: [&str; 4] = ["ij=>ji", "ij=>i", "ii=>i", "ij=>j"];

fn the_unary_spec_forms_have_gradients(target: &Target) {
    for op in differentiable_unary() {
        for spec in UNARY_SPECS {
            let name = format!("{} {spec:?}", op.name());
            check_squared(target, &name, &["3,3"], unary_needs_positive(op), |_, p| {
                apply_unary(op, &p[0], Some(spec))
            });
        }
    }
}
conformance!(the_unary_spec_forms_have_gradients);

fn the_binary_spec_forms_have_gradients(target: &Target) {
    let specs: [(&str, [&str; 2]); 3] = [
        ("ij;jk=>ik", ["2,3", "3,2"]),
        ("i;j=>ji", ["2", "3"]),
        ("ij;j=>i", ["2,3", "3"]),
    ];
    for op in differentiable_binary() {
        for (spec, shapes) in specs {
            let name = format!("{} {spec:?}", op.name());
            check_squared(target, &name, &shapes, binary_needs_positive(op), |_, p| {
                p[0].binary_spec(op, spec, &p[1])
            });
        }
    }
}
conformance!(the_binary_spec_forms_have_gradients);

fn where_and_fma_spec_forms_have_gradients(target: &Target) {
    let specs: [(&str, [&str; 3]); 3] = [
        ("i;i;i=>i", ["4", "4", "4"]),
        ("i;ij;j=>i", ["2", "2,3", "3"]),
        ("ij;ij;ij=>ji", ["2,3", "2,3", "2,3"]),
    ];
    for (spec, shapes) in specs {
        check_squared(
            target,
            &format!("where {spec:?}"),
            &shapes,
            false,
            |_, p| Tensor::where_spec(spec, &p[0].relu(), &p[1], &p[2]),
        );
        check_squared(target, &format!("fma {spec:?}"), &shapes, false, |_, p| {
            Tensor::fma_spec(spec, &p[0], &p[1], &p[2])
        });
    }
}
conformance!(where_and_fma_spec_forms_have_gradients);

fn gradients_flow_through_contraction_paths(target: &Target) {
    check(
        target,
        "numpy path",
        &["2,3", "3,4", "4,2", "2"],
        false,
        |_, p| Tensor::einsum_np("ij,jk,kl,l->i", &[&p[0], &p[1], &p[2], &p[3]]),
    );
    check(
        target,
        "path with row variables",
        &["2|3->2", "2|2->3", "2|2"],
        false,
        |_, p| {
            Tensor::einsum_n(
                "... | j -> i; ... | k -> j; ... | k => ... | i",
                &[&p[0], &p[1], &p[2]],
            )
        },
    );
    let broadcast: &[(&str, &[&str])] = &[
        ("ab,ab->b", &["4,3", "1,3"]),
        ("ab,ab->ab", &["4,3", "4,1"]),
        ("cij,cjk->cik", &["2,3,2", "2,1,2"]),
        ("ij,jk,kl->il", &["2,1", "3,4", "1,2"]),
        ("aab,ab->b", &["1,1,3", "4,3"]),
        ("ab,ba", &["2,1", "3,2"]),
        ("i->", &["3"]),
    ];
    for &(spec, shapes) in broadcast {
        check(
            target,
            &format!("{spec} over {shapes:?}"),
            shapes,
            false,
            |_, p| Tensor::einsum_np(spec, &p.iter().collect::<Vec<_>>()),
        );
    }
}
conformance!(gradients_flow_through_contraction_paths);

/// A fixed data tensor of the given shape, to weight outputs (so that gradients differ from cell
/// to cell).
fn weights(graph: &Graph, shape: &str, n: usize, precision: Precision) -> Tensor {
    graph
        .data("weights")
        .shape(shape)
        .precision(precision)
        .values(test_values(n, 99))
        .build()
}

fn activations_reductions_and_reshapes(target: &Target) {
    for activation in Activation::ALL {
        check_squared(target, activation.name(), &["2,3"], false, |_, p| {
            p[0].activation(activation)
        });
    }
    let reductions = [
        ("batch", Axes::batch()),
        ("last output", Axes::output_axis(-1)),
        ("first input, kept", Axes::input_axis(0).keep_dims()),
        ("all", Axes::all()),
    ];
    for (name, axes) in reductions {
        check_squared(
            target,
            &format!("sum_over {name}"),
            &["2|3->4"],
            false,
            |_, p| p[0].sum_over(axes.clone()),
        );
        check_squared(
            target,
            &format!("mean_over {name}"),
            &["2|3->4"],
            false,
            |_, p| p[0].mean_over(axes.clone()),
        );
        check_squared(
            target,
            &format!("max_over {name}"),
            &["2|3->4"],
            false,
            |_, p| p[0].max_over(axes.clone()),
        );
    }
    check(target, "reshape", &["2,3,4"], false, |g, p| {
        p[0].reshape(AxisKind::Output, &[4, -1])
            .pmul(&weights(g, "4,6", 24, target.float()))
    });
    check(
        target,
        "squeeze and unsqueeze",
        &["2,1,3"],
        false,
        |g, p| {
            p[0].squeeze(Axis::output(1))
                .unsqueeze(Axis::output(0))
                .pmul(&weights(g, "1,2,3", 6, target.float()))
        },
    );
}
conformance!(activations_reductions_and_reshapes);
