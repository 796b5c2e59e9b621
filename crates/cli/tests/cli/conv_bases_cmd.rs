//! `rcannl einsum` on convolutions whose inputs carry bases: a kernel in another named unit than
//! the axis it slides over is a shape error (exit status 1) naming the operation, both tensors and
//! both bases; bases that agree, or a default one, convolve as before.

use crate::common::{rcannl, stderr, stdout};

use serde_json::{Value, json};

/// Runs `rcannl einsum ARGS --json --backend BACKEND`, returning its exit status and JSON.
fn run_on(backend: &str, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["einsum"];
    all.extend(args);
    all.extend(["--json", "--backend", backend]);
    let output = rcannl(&all);
    assert!(output.stderr.is_empty(), "{args:?}: {}", stderr(&output));
    let value = serde_json::from_str(&stdout(&output)).expect("stdout is one JSON value");
    (output.status.code(), value)
}

#[test]
fn a_kernel_in_another_basis_than_its_input_is_a_shape_error() {
    for spec in ["o<+k; k => o", "o=+k; k => o", "2*o=+k; k => o"] {
        for (input, kernel) in [("range:6@x", "range:3@y"), ("range:6@y", "range:3@x")] {
            let (status, value) = run_on("interp", &[spec, input, kernel]);
            assert_eq!(status, Some(1), "{spec} {input} {kernel}: {value}");
            let error = &value["error"];
            assert_eq!(error["kind"], "shape", "{error}");
            let message = error["message"].as_str().expect("a message");
            let (input_basis, kernel_basis) = (&input["range:".len()..], &kernel["range:".len()..]);
            assert!(
                message.starts_with(
                    "convolution: conflicting dimension bases between stride and kernel"
                ),
                "{spec}: {message}"
            );
            assert!(
                message.contains(&format!("the kernel {kernel_basis}"))
                    && message.contains(input_basis),
                "{spec}: {message}"
            );
            assert!(
                message.contains(&format!("in operation: einsum#2 = einsum \"{spec}\""))
                    && message.contains(&format!("operand 1 'x1': |->{input_basis}"))
                    && message.contains(&format!("operand 2 'x2': |->{kernel_basis}")),
                "{spec}: {message}"
            );
        }
    }
}

#[test]
fn bases_that_agree_or_are_default_convolve_on_both_backends() {
    // x = arange(6), k = arange(3): the valid convolution Σ_t x[o+t]·k[t] = [5, 8, 11, 14].
    let expected = json!({
        "dtype": "float64",
        "shape": {"batch": [], "input": [], "output": [4]},
        "values": [5.0, 8.0, 11.0, 14.0],
    });
    for (input, kernel) in [
        ("range:6@x", "range:3@x"),
        ("range:6@x", "range:3"),
        ("range:6", "range:3@y"),
    ] {
        for backend in ["interp", "cc"] {
            let (status, value) = run_on(backend, &["o<+k; k => o", input, kernel]);
            assert_eq!(status, Some(0), "{input} {kernel}: {value}");
            assert_eq!(value, expected, "{input} {kernel} on {backend}");
        }
    }
}
