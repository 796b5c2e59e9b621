//! Inputs with the claim-free unit `1*` in their shape: it broadcasts in pointwise operations as
//! numpy's axes of size 1 do (an explicit `1` does not), on both backends; a malformed `1*` is a
//! parse error at its column.

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

/// The successful output on both backends, which must agree.
fn run(args: &[&str]) -> Value {
    let (status, interpreted) = run_on("interp", args);
    assert_eq!(status, Some(0), "{args:?}: {interpreted}");
    let (status, compiled) = run_on("cc", args);
    assert_eq!(status, Some(0), "{args:?}: {compiled}");
    assert_eq!(interpreted, compiled, "{args:?}: the backends disagree");
    compiled
}

/// The error object of a run that must fail with status 1.
fn run_error(args: &[&str]) -> Value {
    let (status, value) = run_on("interp", args);
    assert_eq!(status, Some(1), "{args:?}: {value}");
    value["error"].clone()
}

#[test]
fn a_claim_free_unit_broadcasts_over_the_other_operands_rows() {
    // x = [[10, 20, 30]] (shape 1*,3), y = np.arange(12).reshape(4, 3): x + y as numpy
    // broadcasts it, and d Σ(x + y)/d x = 4 per cell (each is used by 4 rows).
    let x = [10.0, 20.0, 30.0];
    let sums: Vec<f64> = (0..12).map(|cell| x[cell % 3] + cell as f64).collect();
    assert_eq!(
        run(&[
            "-",
            "--op",
            "pointwise-add",
            "values:10,20,30:1*,3",
            "range:4,3",
            "--grads"
        ]),
        json!({
            "dtype": "float64",
            "shape": {"batch": [], "input": [], "output": [4, 3]},
            "values": sums,
            "grads": [[4.0, 4.0, 4.0], vec![1.0; 12]],
        })
    );
    // Over an empty axis: np.ones((1, 3)) * np.zeros((0, 3)) has shape (0, 3).
    assert_eq!(
        run(&[
            "-",
            "--op",
            "pointwise-mul",
            "values:10,20,30:1*,3",
            "range:0,3"
        ]),
        json!({"dtype": "float64", "shape": {"batch": [], "input": [], "output": [0, 3]}, "values": []})
    );
    // A scalar of one claim-free axis scales every cell: 5 * np.arange(6).reshape(2, 3).
    let scaled: Vec<f64> = (0..6).map(|cell| 5.0 * cell as f64).collect();
    assert_eq!(
        run(&["-", "--op", "pointwise-mul", "values:5:1*", "range:2,3"]),
        json!({"dtype": "float64", "shape": {"batch": [], "input": [], "output": [2, 3]}, "values": scaled})
    );
}

#[test]
fn an_explicit_one_claims_its_size_and_does_not_broadcast() {
    let error = run_error(&[
        "-",
        "--op",
        "pointwise-add",
        "values:10,20,30:1,3",
        "range:4,3",
    ]);
    assert_eq!(error["kind"], "shape", "{error}");
    let message = error["message"].as_str().expect("a message");
    assert!(
        message.starts_with(
            "pointwise binary: output axis 0 of the first operand 'x1' has size 1 and output \
             axis 0 of the second operand 'x2' has size 4: they do not broadcast to one size"
        ) && message.contains("|->1,3"),
        "{message}"
    );
}

#[test]
fn a_malformed_claim_free_unit_is_a_parse_error_at_its_column() {
    for (shape, column, problem) in [
        ("2*", 1, "only 1 can be the claim-free unit"),
        ("3,1*@rgb", 5, "has no basis"),
    ] {
        let error = run_error(&[
            "-",
            "--op",
            "pointwise-add",
            &format!("range:{shape}"),
            "range:2",
        ]);
        assert_eq!(error["kind"], "parse", "{error}");
        let message = error["message"].as_str().expect("a message");
        assert!(
            message.contains(&format!("column {column}")) && message.contains(problem),
            "{shape}: {message}"
        );
    }
}
