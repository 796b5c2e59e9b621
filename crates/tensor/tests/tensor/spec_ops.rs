//! Operations that follow a spec, on both backends: their values against a naive evaluator written
//! here (every assignment of values to the spec's labels, the operands read where their labels
//! point, the results accumulated with `+`). Their gradients are checked on every backend by the
//! conformance suite (`rcannl-fuzz`'s `tests/conformance/gradients.rs`).

use std::collections::BTreeMap;

use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::Precision;
use rcannl_tensor::{BinaryOp, Context, Graph, Tensor, UnaryOp};

use crate::cpu::assert_close;

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// `spec` (single-character labels, output axes only) evaluated naively: for every assignment of
/// values to its labels, `f` of the operands' cells there, added into the result's cell there
/// (which starts at 0).
fn naive(
    spec: &str,
    sizes: &[(char, usize)],
    operands: &[&[f64]],
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let spec: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (slots, result) = spec.split_once("=>").expect("a spec with a result");
    let slots: Vec<Vec<char>> = slots.split(';').map(|s| s.chars().collect()).collect();
    let result: Vec<char> = result.chars().collect();
    assert_eq!(slots.len(), operands.len(), "{spec}: one slice per operand");
    let sizes: BTreeMap<char, usize> = sizes.iter().copied().collect();
    let labels: Vec<char> = sizes.keys().copied().collect();
    let flat = |slot: &[char], at: &BTreeMap<char, usize>| {
        slot.iter().fold(0, |flat, l| flat * sizes[l] + at[l])
    };
    let mut out = vec![0.0; result.iter().map(|l| sizes[l]).product()];
    let total: usize = labels.iter().map(|l| sizes[l]).product();
    for mut point in 0..total {
        let mut at = BTreeMap::new();
        for l in labels.iter().rev() {
            at.insert(*l, point % sizes[l]);
            point /= sizes[l];
        }
        let cells: Vec<f64> = slots
            .iter()
            .zip(operands)
            .map(|(slot, values)| values[flat(slot, &at)])
            .collect();
        out[flat(&result, &at)] += f(&cells);
    }
    out
}

/// A data tensor (f64) of these output dims holding `values`.
fn data(graph: &Graph, label: &str, dims: &[usize], values: &[f64]) -> Tensor {
    graph
        .data(label)
        .output(dims.iter().copied())
        .precision(Precision::F64)
        .values(values.to_vec())
        .build()
}

/// `0, 1, …, n − 1`, shifted and scaled so that the values are distinct and not all positive.
fn values(n: usize, scale: f64, shift: f64) -> Vec<f64> {
    (0..n).map(|i| i as f64 * scale + shift).collect()
}

/// Runs `out`'s forward routine on `backend` and returns its cells.
fn forward(graph: &Graph, backend: Box<dyn Backend>, out: &Tensor) -> Vec<f64> {
    let mut ctx = Context::with_backend(graph, backend);
    let routine = ctx.forward(&[out]).unwrap();
    ctx.run(&routine).unwrap();
    ctx.values(out).unwrap()
}

#[test]
fn a_reducing_outer_sum_adds_over_what_the_result_leaves_out() {
    let (x, y) = (values(4, 1.0, 0.0), values(6, 1.0, 0.0));
    // result[a, c] = Σ_b x[a, b] + y[b, c].
    let expected = naive(
        "ab;bc=>ac",
        &[('a', 2), ('b', 2), ('c', 3)],
        &[&x, &y],
        |v| v[0] + v[1],
    );
    assert_eq!(expected, vec![4.0, 6.0, 8.0, 8.0, 10.0, 12.0]);
    for backend in backends() {
        let graph = Graph::new();
        let a = data(&graph, "a", &[2, 2], &x);
        let b = data(&graph, "b", &[2, 3], &y);
        let out = a.outer_sum("a,b; b,c => a,c", &b);
        assert_close(&forward(&graph, backend, &out), &expected, "outer sum");
    }
}

#[test]
fn a_concatenation_adds_over_what_the_result_leaves_out() {
    let (x, y) = (values(6, 1.0, 0.0), values(2, 1.0, 0.0));
    // result[a] = Σ_c x[a, c] for the first stretch, then y[b].
    let mut expected: Vec<f64> = (0..2).map(|a| (0..3).map(|c| x[a * 3 + c]).sum()).collect();
    expected.extend(&y);
    assert_eq!(expected, vec![3.0, 12.0, 0.0, 1.0]);
    for backend in backends() {
        let graph = Graph::new();
        let a = data(&graph, "a", &[2, 3], &x);
        let b = data(&graph, "b", &[2], &y);
        let out = Tensor::concat("a, c; b => a^b", &[&a, &b]);
        assert_close(&forward(&graph, backend, &out), &expected, "concat");
    }
}

/// A scalar operation of one operand, and of two.
type Unary = fn(f64) -> f64;
type Binary = fn(f64, f64) -> f64;

/// The sizes of a spec's labels.
type Sizes = &'static [(char, usize)];

/// Each unary operation, computed here, and whether it needs positive operands.
fn unary_ops() -> Vec<(UnaryOp, Unary, bool)> {
    vec![
        (UnaryOp::Neg, |x| -x, false),
        (UnaryOp::Relu, |x| x.max(0.0), false),
        (UnaryOp::Sat01, |x| x.clamp(0.0, 1.0), false),
        (UnaryOp::Exp, f64::exp, false),
        (UnaryOp::Log, f64::ln, true),
        (UnaryOp::Exp2, f64::exp2, false),
        (UnaryOp::Log2, f64::log2, true),
        (UnaryOp::Sin, f64::sin, false),
        (UnaryOp::Cos, f64::cos, false),
        (UnaryOp::Sqrt, f64::sqrt, true),
        (UnaryOp::Recip, |x| 1.0 / x, true),
        (UnaryOp::RecipSqrt, |x| 1.0 / x.sqrt(), true),
        (UnaryOp::Tanh, f64::tanh, false),
        (UnaryOp::Not, |x| truth(x == 0.0), false),
        (UnaryOp::Trunc, f64::trunc, false),
        (UnaryOp::StopGradient, |x| x, false),
    ]
}

/// 1 for true, 0 for false.
fn truth(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// Each binary operation, computed here, and whether its operands must be positive.
fn binary_ops() -> Vec<(BinaryOp, Binary, bool)> {
    vec![
        (BinaryOp::Add, |x, y| x + y, false),
        (BinaryOp::Sub, |x, y| x - y, false),
        (BinaryOp::Mul, |x, y| x * y, false),
        (BinaryOp::Div, |x, y| x / y, true),
        (BinaryOp::Pow, f64::powf, true),
        (BinaryOp::Max, f64::max, false),
        (BinaryOp::Min, f64::min, false),
        (BinaryOp::Lt, |x, y| truth(x < y), false),
        (BinaryOp::Eq, |x, y| truth(x == y), false),
        (BinaryOp::Ne, |x, y| truth(x != y), false),
    ]
}

/// Unary specs that permute, reduce, take a diagonal, and reduce the other way round.
const UNARY_SPECS: [(&str, Sizes); 4] = [
    ("ij=>ji", &[('i', 3), ('j', 3)]),
    ("ij=>i", &[('i', 3), ('j', 3)]),
    ("ii=>i", &[('i', 3)]),
    ("ij=>j", &[('i', 3), ('j', 3)]),
];

/// `-1, -0.5, 0, 0.5, …` (with a 0, for `not`), or positive values.
fn cells(n: usize, positive: bool) -> Vec<f64> {
    if positive {
        values(n, 0.5, 0.25)
    } else {
        values(n, 0.5, -1.0)
    }
}

#[test]
fn every_unary_operation_follows_a_spec() {
    for (op, f, positive) in unary_ops() {
        let x = cells(9, positive);
        for (spec, sizes) in UNARY_SPECS {
            let expected = naive(spec, sizes, &[&x], |v| f(v[0]));
            for backend in backends() {
                let backend_name = backend.name();
                let graph = Graph::new();
                let t = data(&graph, "x", &[3, 3], &x);
                let out = t.unary_spec(op, spec);
                let what = format!("{} {spec:?} on {backend_name}", op.name());
                assert_close(&forward(&graph, backend, &out), &expected, &what);
            }
        }
    }
}

#[test]
fn every_binary_operation_follows_a_spec() {
    // Contracting, an outer product laid out transposed, and one that reduces both ways.
    let specs: [(&str, Sizes, [&[usize]; 2]); 3] = [
        (
            "ij;jk=>ik",
            &[('i', 2), ('j', 3), ('k', 2)],
            [&[2, 3], &[3, 2]],
        ),
        ("i;j=>ji", &[('i', 2), ('j', 3)], [&[2], &[3]]),
        ("ij;j=>i", &[('i', 2), ('j', 3)], [&[2, 3], &[3]]),
    ];
    for (op, f, positive) in binary_ops() {
        for (spec, sizes, [dims_x, dims_y]) in specs {
            let x = cells(dims_x.iter().product(), positive);
            // Some cells equal to x's, so that comparisons find both answers.
            let y: Vec<f64> = cells(dims_y.iter().product(), positive)
                .iter()
                .rev()
                .copied()
                .collect();
            let expected = naive(spec, sizes, &[&x, &y], |v| f(v[0], v[1]));
            for backend in backends() {
                let backend_name = backend.name();
                let graph = Graph::new();
                let a = data(&graph, "x", dims_x, &x);
                let b = data(&graph, "y", dims_y, &y);
                let out = a.binary_spec(op, spec, &b);
                let what = format!("{} {spec:?} on {backend_name}", op.name());
                assert_close(&forward(&graph, backend, &out), &expected, &what);
            }
        }
    }
}

#[test]
fn where_and_fma_follow_three_operand_specs() {
    type Ternary = fn(f64, f64, f64) -> f64;
    let choose: Ternary = |c, a, b| if c != 0.0 { a } else { b };
    let fma: Ternary = |a, b, c| a * b + c;
    // Pointwise-like, reducing (a branch or addend without the reduced label counts once per
    // position of it), and permuting.
    let specs: [(&str, Sizes, [&[usize]; 3]); 3] = [
        ("i;i;i=>i", &[('i', 4)], [&[4], &[4], &[4]]),
        ("i;ij;j=>i", &[('i', 2), ('j', 3)], [&[2], &[2, 3], &[3]]),
        (
            "ij;ij;ij=>ji",
            &[('i', 2), ('j', 3)],
            [&[2, 3], &[2, 3], &[2, 3]],
        ),
    ];
    for (spec, sizes, dims) in specs {
        let n = |k: usize| dims[k].iter().product::<usize>();
        // The condition is 0 at every other cell.
        let c: Vec<f64> = (0..n(0)).map(|i| (i % 2) as f64 * 0.5).collect();
        let a = values(n(1), 0.75, -1.5);
        let b = values(n(2), -0.5, 2.0);
        for (name, f) in [("where", choose), ("fma", fma)] {
            let operands: [&[f64]; 3] = match name {
                "where" => [&c, &a, &b],
                _ => [&a, &b, &c],
            };
            let dims = match name {
                "where" => dims,
                // fma's operands in the slots of where's: a, b, then the addend.
                _ => [dims[1], dims[2], dims[0]],
            };
            let spec = match name {
                "where" => spec.to_owned(),
                _ => {
                    let (slots, result) = spec.split_once("=>").unwrap();
                    let slots: Vec<&str> = slots.split(';').collect();
                    format!("{};{};{}=>{result}", slots[1], slots[2], slots[0])
                }
            };
            let expected = naive(&spec, sizes, &operands, |v| f(v[0], v[1], v[2]));
            for backend in backends() {
                let backend_name = backend.name();
                let graph = Graph::new();
                let t: Vec<Tensor> = operands
                    .iter()
                    .zip(dims)
                    .enumerate()
                    .map(|(k, (v, d))| data(&graph, &format!("t{k}"), d, v))
                    .collect();
                let out = match name {
                    "where" => Tensor::where_spec(&spec, &t[0], &t[1], &t[2]),
                    _ => Tensor::fma_spec(&spec, &t[0], &t[1], &t[2]),
                };
                let what = format!("{name} {spec:?} on {backend_name}");
                assert_close(&forward(&graph, backend, &out), &expected, &what);
            }
        }
    }
}

#[test]
fn operations_without_gradient_stay_without_one_under_a_spec() {
    let graph = Graph::new();
    let x = graph.param("x").output([3]).build();
    let y = graph.param("y").output([3]).build();
    for op in [UnaryOp::Not, UnaryOp::Trunc, UnaryOp::StopGradient] {
        assert!(
            !x.unary_spec(op, "i=>i").is_differentiable(),
            "{}",
            op.name()
        );
    }
    for op in [BinaryOp::Lt, BinaryOp::Eq, BinaryOp::Ne] {
        assert!(
            !x.binary_spec(op, "i;j=>ij", &y).is_differentiable(),
            "{}",
            op.name()
        );
    }
    assert!(x.relu_spec("i=>i").is_differentiable());
}

#[test]
fn a_spec_that_does_not_fit_the_operation_is_an_error_naming_it() {
    let graph = Graph::new();
    let x = data(&graph, "x", &[3], &[1.0, 2.0, 3.0]);
    let cases = [
        ("relu", x.relu_spec("i;j=>ij")),
        ("-", x.sub_spec("i=>i", &x)),
        ("relu", x.relu_spec("i=>(")),
        ("where", Tensor::where_spec("i;i=>i", &x, &x, &x)),
        ("fma", Tensor::fma_spec("i=>i", &x, &x, &x)),
    ];
    for (name, t) in cases {
        let e = t.error().unwrap_or_else(|| panic!("{name}: no error"));
        assert!(e.message.contains(name), "{name}: {}", e.message);
    }
}
