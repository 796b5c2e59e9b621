//! End-to-end tests of `rcannl einsum --op` for operations that accumulate over a spec: outer
//! sums and concatenations that sum over labels the result leaves out. Expected values are
//! computed here, by hand loops, and both backends must print them.

use crate::common::{output_shape, range, rcannl, run, run_error, stdout};

use serde_json::{Value, json};

#[test]
fn a_reducing_outer_sum_adds_over_the_labels_the_result_leaves_out() {
    let (x, y) = (range(4), range(6));
    // result[a, c] = Σ_b x[a, b] + y[b, c].
    let mut expected = vec![0.0; 6];
    for a in 0..2 {
        for c in 0..3 {
            for b in 0..2 {
                expected[a * 3 + c] += x[a * 2 + b] + y[b * 3 + c];
            }
        }
    }
    // The gradient of the sum of the result: each x cell is added once per c, each y cell once
    // per a.
    let grads = vec![vec![3.0; 4], vec![2.0; 6]];
    assert_eq!(
        run(&[
            "a,b; b,c => a,c",
            "range:2,2",
            "range:2,3",
            "--op",
            "outer-sum",
            "--grads"
        ]),
        json!({"dtype": "float64", "shape": output_shape(&[2, 3]), "values": expected, "grads": grads})
    );
}

#[test]
fn a_concatenation_adds_over_the_labels_the_result_leaves_out() {
    let (x, y) = (range(6), range(2));
    // The row sums of x, then y.
    let mut expected: Vec<f64> = (0..2).map(|a| (0..3).map(|c| x[a * 3 + c]).sum()).collect();
    expected.extend(&y);
    assert_eq!(
        run(&[
            "a, c; b => a^b",
            "range:2,3",
            "range:2",
            "--op",
            "concat",
            "--grads"
        ]),
        json!({
            "dtype": "float64",
            "shape": output_shape(&[4]),
            "values": expected,
            "grads": [vec![1.0; 6], vec![1.0; 2]],
        })
    );
}

/// The printed values, as numbers (`null` for what JSON cannot hold).
fn printed(value: &Value) -> Vec<f64> {
    value["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect()
}

/// Equal within a relative 1e-12 (libm's transcendental functions may round differently from
/// Rust's in the last place).
fn assert_close(got: &[f64], expected: &[f64], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: {got:?} vs {expected:?}");
    for (g, e) in got.iter().zip(expected) {
        assert!(
            g == e || (g - e).abs() <= 1e-12 * e.abs().max(1.0),
            "{what}: got {got:?}, expected {expected:?}"
        );
    }
}

/// `v1,v2,…` as a `values:` input of this shape.
fn values_input(values: &[f64], shape: &str) -> String {
    let cells: Vec<String> = values.iter().map(f64::to_string).collect();
    format!("values:{}:{shape}", cells.join(","))
}

#[test]
fn every_unary_operation_takes_a_spec_or_a_dash() {
    type Unary = fn(f64) -> f64;
    let ops: [(&str, Unary, bool); 16] = [
        ("neg", |x| -x, false),
        ("relu", |x| x.max(0.0), false),
        ("sat01", |x| x.clamp(0.0, 1.0), false),
        ("exp", f64::exp, false),
        ("log", f64::ln, true),
        ("exp2", f64::exp2, false),
        ("log2", f64::log2, true),
        ("sin", f64::sin, false),
        ("cos", f64::cos, false),
        ("sqrt", f64::sqrt, true),
        ("recip", |x| 1.0 / x, true),
        ("recip-sqrt", |x| 1.0 / x.sqrt(), true),
        ("tanh", f64::tanh, false),
        ("not", |x| f64::from(u8::from(x == 0.0)), false),
        ("trunc", f64::trunc, false),
        ("stop-gradient", |x| x, false),
    ];
    for (name, f, positive) in ops {
        // A 2×3 matrix, with a 0 and values beyond [0, 1] unless they must be positive.
        let x: Vec<f64> = (0..6)
            .map(|i| {
                if positive {
                    0.5 + i as f64
                } else {
                    i as f64 * 0.75 - 1.5
                }
            })
            .collect();
        let input = values_input(&x, "2,3");
        let pointwise: Vec<f64> = x.iter().map(|&v| f(v)).collect();
        let got = run(&["-", &input, "--op", name]);
        assert_eq!(got["shape"], output_shape(&[2, 3]), "{name}");
        assert_close(&printed(&got), &pointwise, &format!("{name} -"));
        // Summed over the rows: result[j] = Σ_i f(x[i, j]).
        let column_sums: Vec<f64> = (0..3).map(|j| pointwise[j] + pointwise[3 + j]).collect();
        let got = run(&["ij=>j", &input, "--op", name]);
        assert_eq!(got["shape"], output_shape(&[3]), "{name}");
        assert_close(&printed(&got), &column_sums, &format!("{name} ij=>j"));
    }
}

#[test]
fn every_binary_operation_takes_a_spec_or_a_dash() {
    type Binary = fn(f64, f64) -> f64;
    let ops: [(&str, Binary, bool); 10] = [
        ("add", |x, y| x + y, false),
        ("sub", |x, y| x - y, false),
        ("mul", |x, y| x * y, false),
        ("div", |x, y| x / y, true),
        ("pow", f64::powf, true),
        ("max", f64::max, false),
        ("min", f64::min, false),
        ("lt", |x, y| f64::from(u8::from(x < y)), false),
        ("eq", |x, y| f64::from(u8::from(x == y)), false),
        ("ne", |x, y| f64::from(u8::from(x != y)), false),
    ];
    for (name, f, positive) in ops {
        let shift = if positive { 1.0 } else { -1.0 };
        let x: Vec<f64> = (0..4).map(|i| i as f64 + shift).collect();
        let y: Vec<f64> = [2.0, 0.5].iter().map(|v| v + shift).collect();
        let (x_input, y_input) = (values_input(&x, "2,2"), values_input(&y, "2"));
        // Pointwise, y broadcast over the rows of x.
        let pointwise: Vec<f64> = (0..4).map(|c| f(x[c], y[c % 2])).collect();
        let got = run(&["-", &x_input, &y_input, "--op", name]);
        assert_close(&printed(&got), &pointwise, &format!("{name} -"));
        // result[j] = Σ_i f(x[i, j], y[i]): y read along the rows, the rows summed.
        let spec_form: Vec<f64> = (0..2)
            .map(|j| (0..2).map(|i| f(x[i * 2 + j], y[i])).sum())
            .collect();
        let got = run(&["ij;i=>j", &x_input, &y_input, "--op", name]);
        assert_eq!(got["shape"], output_shape(&[2]), "{name}");
        assert_close(&printed(&got), &spec_form, &format!("{name} ij;i=>j"));
    }
}

#[test]
fn where_and_fma_take_a_spec_or_a_dash() {
    let (c, a, b) = ([1.0, 0.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [7.0, 8.0]);
    // result[i] = Σ_j (c[i] ≠ 0 ? a[i, j] : b[j]).
    let chosen: Vec<f64> = (0..3)
        .map(|i| {
            (0..2)
                .map(|j| if c[i] != 0.0 { a[i * 2 + j] } else { b[j] })
                .sum()
        })
        .collect();
    // Each branch cell's gradient: how often it is chosen.
    let a_grad: Vec<f64> = (0..6)
        .map(|k| if c[k / 2] != 0.0 { 1.0 } else { 0.0 })
        .collect();
    let b_grad = vec![1.0, 1.0];
    let (c_input, a_input, b_input) = (
        values_input(&c, "3"),
        values_input(&a, "3,2"),
        values_input(&b, "2"),
    );
    assert_eq!(
        run(&[
            "i;ij;j=>i",
            &c_input,
            &a_input,
            &b_input,
            "--op",
            "where",
            "--grads"
        ]),
        json!({
            "dtype": "float64",
            "shape": output_shape(&[3]),
            "values": chosen,
            "grads": [vec![0.0; 3], a_grad, b_grad],
        })
    );
    // result[i] = Σ_j a[i, j]·b[j] + c[i]: the addend once per j.
    let fused: Vec<f64> = (0..3)
        .map(|i| (0..2).map(|j| a[i * 2 + j] * b[j] + c[i]).sum())
        .collect();
    assert_eq!(
        run(&["ij;j;i=>i", &a_input, &b_input, &c_input, "--op", "fma"]),
        json!({"dtype": "float64", "shape": output_shape(&[3]), "values": fused})
    );
    let pointwise: Vec<f64> = (0..3).map(|i| a[i] * c[i] + c[i]).collect();
    assert_eq!(
        run(&[
            "-",
            &values_input(&a[..3], "3"),
            &c_input,
            &c_input,
            "--op",
            "fma"
        ]),
        json!({"dtype": "float64", "shape": output_shape(&[3]), "values": pointwise})
    );
}

#[test]
fn a_spec_that_does_not_fit_the_operation_is_refused() {
    assert_eq!(
        run_error(&["i;j=>ij", "range:3", "--op", "relu"]),
        json!({"error": {
            "kind": "arity",
            "message": "relu takes 1 operand, but the spec \"i;j=>ij\" has 2",
        }})
    );
    assert_eq!(
        run_error(&["i;i=>i", "range:3", "range:3", "--op", "where"]),
        json!({"error": {
            "kind": "arity",
            "message": "where takes 3 operands, but the spec \"i;i=>i\" has 2",
        }})
    );
    assert_eq!(
        run_error(&["-", "range:3", "--op", "sub"]),
        json!({"error": {
            "kind": "arity",
            "message": "sub takes 2 inputs, but 1 was given",
        }})
    );
    assert_eq!(
        run_error(&["-", "range:3", "range:3", "--op", "neg"]),
        json!({"error": {
            "kind": "arity",
            "message": "neg takes 1 input, but 2 were given",
        }})
    );
    let shape = run_error(&["ij=>i", "range:3", "--op", "exp"]);
    assert_eq!(shape["error"]["kind"], "shape", "{shape}");
}

#[test]
fn the_help_names_every_operation_and_the_dash() {
    let output = rcannl(&["einsum", "--help"]);
    assert!(output.status.success());
    let help = stdout(&output);
    for name in [
        "where",
        "fma",
        "neg",
        "relu",
        "sat01",
        "exp",
        "log",
        "exp2",
        "log2",
        "sin",
        "cos",
        "sqrt",
        "recip",
        "recip-sqrt",
        "tanh",
        "not",
        "trunc",
        "stop-gradient",
        "add",
        "sub",
        "mul",
        "div",
        "pow",
        "max",
        "min",
        "lt",
        "eq",
        "ne",
    ] {
        assert!(help.contains(&format!("- {name}:")), "{name} in\n{help}");
    }
    assert!(help.contains("or - for the pointwise form"), "{help}");
}
