//! Every gradient check of the project, on the GPU in f32.
//!
//! The finite-difference checks (`rcannl-tensor`'s `gradients.rs`, `spec_ops.rs`,
//! `einsum_n.rs`, `numpy_einsum.rs`, `activations.rs`, `reductions.rs` and `reshape.rs`,
//! `rcannl-nn`'s `blocks.rs` and `metrics.rs`) run in f64, which the GPU
//! lacks, and f32 is too coarse for finite differences. Here the same graphs, over f32
//! parameters holding the same values, are backpropagated on the interpreter and on the GPU
//! (`gradcheck::compare_gradients`): the result's cells and every gradient cell must agree within
//! [`TOLERANCE`]. Operations come from the library's own lists (`UnaryOp::ALL`,
//! `BinaryOp::ALL`), so a new differentiable operation is checked here too.

mod common;

use common::OnDevice;

use rcannl_backends::Interpreter;
use rcannl_ir::Precision;
use rcannl_nn::attention::{Rotary, TransformerBlock, attend};
use rcannl_nn::conv::{avg_pool2d, global_avg_pool, max_pool2d};
use rcannl_nn::dropout::dropout;
use rcannl_nn::embedding::one_hot;
use rcannl_nn::loss::{cross_entropy, mse};
use rcannl_nn::norm::{LayerNorm, log_softmax, softmax};
use rcannl_tensor::gradcheck::{Inputs, compare_gradients, test_values};
use rcannl_tensor::{
    Activation, Axes, Axis, AxisKind, BinaryOp, Context, Graph, Init, StackAxis, Tensor, UnaryOp,
};

/// How far the GPU's f32 results and gradients may be from the interpreter's f32 ones: relative,
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
const TOLERANCE: f64 = 1e-3;

/// The GPU and the comparison of one graph on it with the interpreter.
struct Checks {
    gpu: OnDevice,
}

impl Checks {
    /// The checks, or `None` (after saying so) without a GPU.
    fn new() -> Option<Checks> {
        common::gpu().map(|gpu| Checks { gpu: OnDevice(gpu) })
    }

    /// Compares `build`'s result and gradients with respect to f32 parameters of the given
    /// shapes (literals) and values (`positive` makes them all positive) on the GPU with the
    /// interpreter's.
    fn check(
        &self,
        name: &str,
        shapes: &[&str],
        positive: bool,
        build: impl Fn(&Graph, &[Tensor]) -> Tensor,
    ) {
        let inputs = Inputs { shapes, positive };
        let gpu = Box::new(self.gpu.clone());
        if let Err(e) = compare_gradients(
            Box::new(Interpreter),
            gpu,
            &inputs,
            Precision::F32,
            TOLERANCE,
            build,
        ) {
            panic!("{name}: {e}");
        }
    }

    /// [`Checks::check`] of `build`'s result squared, so that the result's gradient differs
    /// from cell to cell (as the spec operations' checks do).
    fn check_squared(
        &self,
        name: &str,
        shapes: &[&str],
        positive: bool,
        build: impl Fn(&Graph, &[Tensor]) -> Tensor,
    ) {
        self.check(name, shapes, positive, |graph, p| {
            let out = build(graph, p);
            out.pmul(&out)
        });
    }
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

#[test]
fn unary_pointwise_operations() {
    let Some(checks) = Checks::new() else { return };
    for op in differentiable_unary() {
        checks.check(op.name(), &["2,3"], unary_needs_positive(op), |_, p| {
            apply_unary(op, &p[0], None)
        });
    }
}

#[test]
fn binary_pointwise_operations_with_broadcasting() {
    let Some(checks) = Checks::new() else { return };
    // The second operand (one axis) broadcasts over the first's rows.
    for op in differentiable_binary() {
        checks.check(
            op.name(),
            &["2,3", "3"],
            binary_needs_positive(op),
            |_, p| p[0].binary(op, &p[1]),
        );
    }
    checks.check("number", &["4"], false, |_, p| 3.0 * &p[0] - 1.5);
}

#[test]
fn ternary_operations() {
    let Some(checks) = Checks::new() else { return };
    checks.check("where", &["4", "4", "4"], false, |_, p| {
        Tensor::where_(&p[0].relu(), &p[1], &p[2])
    });
    checks.check("fma", &["2,3", "3", "2,3"], false, |_, p| {
        Tensor::fma(&p[0], &p[1], &p[2])
    });
}

#[test]
fn contractions() {
    let Some(checks) = Checks::new() else { return };
    checks.check("compose", &["3->2", "4|3"], false, |_, p| &p[0] * &p[1]);
    checks.check("einsum", &["2,3", "3,4"], false, |_, p| {
        p[0].einsum("ij;jk=>ik", &p[1])
    });
    checks.check("einsum3", &["2", "2,3", "3"], false, |_, p| {
        p[0].einsum3("i;ij;j=>i", &p[1], &p[2])
    });
    checks.check("transpose", &["2,3"], false, |_, p| p[0].einsum1("ij=>ji"));
    checks.check("row sums", &["2,3"], false, |_, p| p[0].einsum1("ij=>i"));
    checks.check("diagonal", &["3,3"], false, |_, p| p[0].einsum1("ii=>i"));
    checks.check("outer sum", &["2", "3"], false, |_, p| {
        p[0].outer_sum("i;j=>ij", &p[1])
    });
}

#[test]
fn convolutions() {
    let Some(checks) = Checks::new() else { return };
    checks.check("convolution", &["6", "3"], false, |_, p| {
        p[0].einsum("o<+k;k=>o", &p[1])
    });
    checks.check("strided convolution", &["9", "2"], false, |_, p| {
        p[0].einsum("2*o<+2*k;k=>o", &p[1])
    });
}

#[test]
fn maxima() {
    let Some(checks) = Checks::new() else { return };
    checks.check("tropical", &["2,3", "3,2"], false, |_, p| {
        p[0].tropical("ij;jk=>ik", &p[1])
    });
    checks.check("row maxima", &["3,4"], false, |_, p| p[0].einmax1("ij=>i"));
    checks.check("max-pool", &["8"], false, |graph, p| {
        let pooled = p[0].einmax1("2*o<+k=>o");
        graph.set_dim(&pooled.capture("k").unwrap(), 2).unwrap();
        pooled
    });
}

#[test]
fn interleaving_and_stacking() {
    let Some(checks) = Checks::new() else { return };
    checks.check("interleave", &["2,3", "2,3"], false, |_, p| {
        Tensor::interleave(&p[0], &p[1]).pmul(&Tensor::interleave(&p[0], &p[1]))
    });
    checks.check("deinterleave", &["6"], false, |_, p| {
        p[0].deinterleave(true).pmul(&p[0].deinterleave(false))
    });
    checks.check("stack", &["3", "3"], false, |_, p| {
        let s = Tensor::stack(&[&p[0], &p[1]]);
        s.pmul(&s)
    });
    for axis in [StackAxis::Output, StackAxis::Input, StackAxis::Batch] {
        checks.check(
            &format!("stack along {axis:?}"),
            &["3", "3"],
            false,
            |_, p| {
                let s = Tensor::stack_along(axis, &[&p[0], &p[1]]);
                s.pmul(&s).pmul(&Tensor::stack_along(axis, &[&p[0], &p[0]]))
            },
        );
    }
}

#[test]
fn concatenation() {
    let Some(checks) = Checks::new() else { return };
    checks.check("concat", &["2", "3"], false, |_, p| {
        Tensor::concat("a; b => a^b", &[&p[0], &p[1]])
            .pmul(&Tensor::concat("a; b => a^b", &[&p[0], &p[1]]))
    });
}

#[test]
fn concatenations_and_outer_sums_reducing_what_the_result_leaves_out() {
    let Some(checks) = Checks::new() else { return };
    checks.check_squared("reducing outer sum", &["2,2", "2,3"], false, |_, p| {
        p[0].outer_sum("a,b; b,c => a,c", &p[1])
    });
    checks.check_squared("reducing concatenation", &["2,3", "2"], false, |_, p| {
        Tensor::concat("a, c; b => a^b", &[&p[0], &p[1]])
    });
}

/// The gradient of `x^p` for a constant integer `p` at 0 and below it, where `p·v/x` would
/// divide by 0 or be NaN: the GPU's equals the interpreter's.
#[test]
fn pow_with_an_integer_exponent_at_zero_and_negative_bases() {
    let Some(checks) = Checks::new() else { return };
    let xs = [0.0, -2.0, 3.0, -1.5];
    let gradient = |backend: Box<dyn rcannl_backends::Backend>, p: i32| {
        let graph = Graph::new();
        let x = graph
            .param("x")
            .output([xs.len()])
            .precision(Precision::F32)
            .init(Init::Values(xs.to_vec()))
            .build();
        let y = x.pow(&graph.number(f64::from(p)));
        let mut ctx = Context::with_backend(&graph, backend);
        ctx.init_params().unwrap();
        let backprop = ctx.backprop(&y).unwrap();
        ctx.run(&backprop).unwrap();
        ctx.grad(&x).unwrap()
    };
    for p in [0, 1, 2, 3, -2] {
        let want = gradient(Box::new(Interpreter), p);
        let got = gradient(Box::new(checks.gpu.clone()), p);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g == w || (g - w).abs() <= TOLERANCE * w.abs().max(1.0),
                "x^{p}: GPU gradient {got:?}, interpreter {want:?}"
            );
        }
    }
}

/// Unary specs that permute, reduce, take a diagonal, and reduce the other way round.
const UNARY_SPECS: [&str; 4] = ["ij=>ji", "ij=>i", "ii=>i", "ij=>j"];

#[test]
fn the_unary_spec_forms_have_gradients() {
    let Some(checks) = Checks::new() else { return };
    for op in differentiable_unary() {
        for spec in UNARY_SPECS {
            let name = format!("{} {spec:?}", op.name());
            checks.check_squared(&name, &["3,3"], unary_needs_positive(op), |_, p| {
                apply_unary(op, &p[0], Some(spec))
            });
        }
    }
}

#[test]
fn the_binary_spec_forms_have_gradients() {
    let Some(checks) = Checks::new() else { return };
    let specs: [(&str, [&str; 2]); 3] = [
        ("ij;jk=>ik", ["2,3", "3,2"]),
        ("i;j=>ji", ["2", "3"]),
        ("ij;j=>i", ["2,3", "3"]),
    ];
    for op in differentiable_binary() {
        for (spec, shapes) in specs {
            let name = format!("{} {spec:?}", op.name());
            checks.check_squared(&name, &shapes, binary_needs_positive(op), |_, p| {
                p[0].binary_spec(op, spec, &p[1])
            });
        }
    }
}

#[test]
fn where_and_fma_spec_forms_have_gradients() {
    let Some(checks) = Checks::new() else { return };
    let specs: [(&str, [&str; 3]); 3] = [
        ("i;i;i=>i", ["4", "4", "4"]),
        ("i;ij;j=>i", ["2", "2,3", "3"]),
        ("ij;ij;ij=>ji", ["2,3", "2,3", "2,3"]),
    ];
    for (spec, shapes) in specs {
        checks.check_squared(&format!("where {spec:?}"), &shapes, false, |_, p| {
            Tensor::where_spec(spec, &p[0].relu(), &p[1], &p[2])
        });
        checks.check_squared(&format!("fma {spec:?}"), &shapes, false, |_, p| {
            Tensor::fma_spec(spec, &p[0], &p[1], &p[2])
        });
    }
}

#[test]
fn gradients_flow_through_contraction_paths() {
    let Some(checks) = Checks::new() else { return };
    checks.check("numpy path", &["2,3", "3,4", "4,2", "2"], false, |_, p| {
        Tensor::einsum_np("ij,jk,kl,l->i", &[&p[0], &p[1], &p[2], &p[3]])
    });
    checks.check(
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
        checks.check(&format!("{spec} over {shapes:?}"), shapes, false, |_, p| {
            Tensor::einsum_np(spec, &p.iter().collect::<Vec<_>>())
        });
    }
}

/// A fixed f32 data tensor of the given shape, to weight outputs (so that gradients are not
/// trivially zero, as they are for the plain sum of a softmax).
fn weights(graph: &Graph, shape: &str, n: usize) -> Tensor {
    graph
        .data("weights")
        .shape(shape)
        .precision(Precision::F32)
        .values(test_values(n, 99))
        .build()
}

#[test]
fn softmax_norms_and_dense_layers() {
    let Some(checks) = Checks::new() else { return };
    checks.check("softmax", &["3|->4"], false, |g, p| {
        softmax(&p[0]).pmul(&weights(g, "3|->4", 12))
    });
    checks.check("log_softmax", &["3|->4"], false, |g, p| {
        log_softmax(&p[0]).pmul(&weights(g, "3|->4", 12))
    });
    checks.check("cross_entropy", &["3|->4"], false, |g, p| {
        let targets = g
            .data("targets")
            .shape("3|->4")
            .precision(Precision::F32)
            .values(vec![0., 1., 0., 0., 0., 0., 0., 1., 1., 0., 0., 0.])
            .build();
        cross_entropy(&p[0], &targets)
    });
    checks.check("layer_norm", &["3|->5"], false, |g, p| {
        LayerNorm::with_precision(g, "norm", Precision::F32)
            .apply(&p[0])
            .pmul(&weights(g, "3|->5", 15))
    });
    checks.check("mlp", &["2|->3", "3->4", "4->2"], false, |_, p| {
        (&p[2] * &(&p[1] * &p[0]).relu()).tanh()
    });
}

#[test]
fn convolutions_and_pooling_blocks() {
    let Some(checks) = Checks::new() else { return };
    checks.check("conv2d valid", &["1|->5,5,2", "3,3,2->2"], false, |g, p| {
        let spec = "...|...->h<+kh, w<+kw, c; kh, kw, c -> d => ...|...->h, w, d";
        p[0].einsum(spec, &p[1]).pmul(&weights(g, "1|->3,3,2", 18))
    });
    checks.check(
        "conv2d padded strided",
        &["1|->4,4,1", "3,3,1->2"],
        false,
        |g, p| {
            let spec = "...|...->2*h=+kh, 2*w=+kw, c; kh, kw, c -> d => ...|...->h, w, d";
            p[0].einsum(spec, &p[1]).pmul(&weights(g, "1|->2,2,2", 8))
        },
    );
    checks.check("max_pool2d", &["1|->4,4,2"], false, |g, p| {
        max_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2", 8))
    });
    checks.check("avg_pool2d", &["1|->4,4,2"], false, |g, p| {
        avg_pool2d(&p[0], 2).pmul(&weights(g, "1|->2,2,2", 8))
    });
    checks.check("global_avg_pool", &["2|->3,3,2"], false, |g, p| {
        global_avg_pool(&p[0]).pmul(&weights(g, "2|->2", 4))
    });
}

#[test]
fn embeddings_and_dropout() {
    let Some(checks) = Checks::new() else { return };
    checks.check("embedding", &["4->3"], false, |g, p| {
        let ids = g
            .data("ids")
            .shape("5|->")
            .precision(Precision::F32)
            .values(vec![0.0, 3.0, 1.0, 3.0, 2.0])
            .build();
        (&p[0] * &one_hot(&ids, 4)).pmul(&weights(g, "5|->3", 15))
    });
    checks.check("dropout", &["4|->8"], false, |g, p| {
        let step = g
            .data("step")
            .shape("")
            .precision(Precision::U32)
            .values(vec![3.0])
            .build();
        dropout(&p[0], 0.5, &step)
    });
}

#[test]
fn attention_and_transformer_blocks() {
    let Some(checks) = Checks::new() else { return };
    // x: 2 sequences of 3 positions, width 4; 2 heads of 2.
    let shapes = ["2|->3,4", "4->2,2", "4->2,2", "4->2,2", "2,2->4"];
    for causal in [None, Some(3)] {
        checks.check(&format!("attention {causal:?}"), &shapes, false, |g, p| {
            let out = attend(&p[0], [&p[1], &p[2], &p[3], &p[4]], 2, causal, None);
            out.pmul(&weights(g, "2|->3,4", 24))
        });
    }
    checks.check("rotary attention", &shapes, false, |g, p| {
        let rotary = Rotary::new(g, 3, 2);
        let out = attend(
            &p[0],
            [&p[1], &p[2], &p[3], &p[4]],
            2,
            Some(3),
            Some(&rotary),
        );
        out.pmul(&weights(g, "2|->3,4", 24))
    });
    checks.check("transformer block", &["2|->3,4"], false, |g, p| {
        let block = TransformerBlock::new(g, "block", 4, 2, 8, true);
        block.apply(&p[0], 3, None).pmul(&weights(g, "2|->3,4", 24))
    });
}

#[test]
fn activations_reductions_and_reshapes() {
    let Some(checks) = Checks::new() else { return };
    for activation in Activation::ALL {
        checks.check_squared(activation.name(), &["2,3"], false, |_, p| {
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
        checks.check_squared(&format!("sum_over {name}"), &["2|3->4"], false, |_, p| {
            p[0].sum_over(axes.clone())
        });
        checks.check_squared(&format!("mean_over {name}"), &["2|3->4"], false, |_, p| {
            p[0].mean_over(axes.clone())
        });
        checks.check_squared(&format!("max_over {name}"), &["2|3->4"], false, |_, p| {
            p[0].max_over(axes.clone())
        });
    }
    checks.check("reshape", &["2,3,4"], false, |g, p| {
        p[0].reshape(AxisKind::Output, &[4, -1])
            .pmul(&weights(g, "4,6", 24))
    });
    checks.check("squeeze and unsqueeze", &["2,1,3"], false, |g, p| {
        p[0].squeeze(Axis::output(1))
            .unsqueeze(Axis::output(0))
            .pmul(&weights(g, "1,2,3", 6))
    });
    checks.check("mse", &["3|->2", "3|->2"], false, |_, p| mse(&p[0], &p[1]));
}
