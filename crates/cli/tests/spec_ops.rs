//! End-to-end tests of `rcannl einsum --op` for operations that accumulate over a spec: outer
//! sums and concatenations that sum over labels the result leaves out. Expected values are
//! computed here, by hand loops, and both backends must print them.

mod common;

use common::{rcannl, stderr, stdout};

use serde_json::{Value, json};

/// Runs `rcannl einsum ARGS --json --backend BACKEND`, expects success and one line of JSON.
fn run_on(backend: &str, args: &[&str]) -> Value {
    let mut all = vec!["einsum"];
    all.extend(args);
    all.extend(["--json", "--backend", backend]);
    let output = rcannl(&all);
    assert!(
        output.status.success(),
        "{args:?} on {backend}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    serde_json::from_str(&text).expect("stdout is one JSON value")
}

/// The output on both backends, checked to be the same.
fn run(args: &[&str]) -> Value {
    let interpreted = run_on("interp", args);
    let compiled = run_on("cc", args);
    assert_eq!(interpreted, compiled, "{args:?}: the backends disagree");
    compiled
}

fn output_shape(output: &[usize]) -> Value {
    json!({"batch": [], "input": [], "output": output})
}

/// `range:SHAPE`'s cells: each its flat offset.
fn range(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

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
        json!({"shape": output_shape(&[2, 3]), "values": expected, "grads": grads})
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
            "shape": output_shape(&[4]),
            "values": expected,
            "grads": [vec![1.0; 6], vec![1.0; 2]],
        })
    );
}
