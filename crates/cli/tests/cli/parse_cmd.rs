//! End-to-end tests of `rcannl parse`: run the built binary and check its stdout, stderr and exit
//! status. JSON output is checked through parsed values; one snapshot pins the human layout.

use crate::common::{rcannl, stderr, stdout};

use serde_json::{Value, json};

/// Runs `rcannl parse SPEC`, expects success, and returns stdout.
fn parse_text(spec: &str) -> String {
    let output = rcannl(&["parse", spec]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(output.stderr.is_empty());
    stdout(&output)
}

/// Runs `rcannl parse SPEC --json`, expects success and exactly one JSON value on one line.
fn parse_json(spec: &str) -> Value {
    let output = rcannl(&["parse", spec, "--json"]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    serde_json::from_str(&text).expect("stdout is one JSON value")
}

#[test]
fn human_output_of_a_convolution_shape_spec() {
    let text = parse_text("2*o<+3*k, c");
    for needle in [
        "stride 2",
        "dilation 3",
        "kernel k",
        "padding valid",
        "label c",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn human_output_snapshot() {
    let expected = "\
canonical: 2*o<+3*k, c
mode:      multi-char
kind:      shape

shape: 2*o<+3*k, c
  batch:  (none)
  input:  (none)
  output: closed, 2 axes
    2*o<+3*k  affine: stride 2 over o, kernel k, dilation 3, offset 0, padding valid
    c         label c
";
    assert_eq!(parse_text("2*o<+3*k, c"), expected);
}

#[test]
fn human_output_of_open_rows_and_concatenation() {
    let text = parse_text("x, ...; y, ... => x^y, ...");
    assert!(text.contains("kind:      einsum, 2 operands\n"), "{text}");
    assert!(text.contains("rhs1: x, ...\n"), "{text}");
    assert!(text.contains("lhs: x^y, ...\n"), "{text}");
    assert!(text.contains("output: open\n"), "{text}");
    assert!(
        text.contains("row var:  ...  row variable 'output'"),
        "{text}"
    );
    assert!(text.contains("leading:  x^y  concat: x ^ y\n"), "{text}");
    assert!(text.contains("label x\n"), "{text}");
}

#[test]
fn json_of_an_einsum_with_row_variables_and_concatenation() {
    let spec = "x, ...; y, ... => x^y, ...";
    let value = parse_json(spec);
    assert_eq!(value["spec"], spec);
    assert_eq!(value["kind"], "einsum");
    assert_eq!(value["mode"], "multi-char");
    let slots = value["slots"].as_array().expect("slots is an array");
    assert_eq!(slots.len(), 3);
    let roles: Vec<&Value> = slots.iter().map(|slot| &slot["role"]).collect();
    assert_eq!(roles, [&json!("rhs1"), &json!("rhs2"), &json!("lhs")]);

    let rhs1 = &slots[0]["output"];
    assert_eq!(rhs1["closed"], false);
    assert_eq!(rhs1["leading"], json!([{"axis": "label", "name": "x"}]));
    assert_eq!(
        rhs1["row_var"],
        json!({"form": "ellipsis", "name": "output"})
    );
    assert_eq!(rhs1["trailing"], json!([]));
    assert_eq!(slots[0]["batch"]["closed"], true);
    assert_eq!(slots[0]["batch"]["row_var"], Value::Null);

    let lhs = &slots[2]["output"];
    assert_eq!(
        lhs["leading"],
        json!([{
            "axis": "concat",
            "components": [
                {"component": "label", "name": "x"},
                {"component": "label", "name": "y"},
            ],
        }])
    );
}

#[test]
fn json_of_affine_axes() {
    let value = parse_json("2*o<+3*k, c");
    assert_eq!(value["kind"], "shape");
    assert_eq!(value["canonical"], "2*o<+3*k, c");
    let slots = value["slots"].as_array().expect("slots is an array");
    assert_eq!(slots.len(), 1);
    assert_eq!(slots[0]["role"], "shape");
    assert_eq!(
        slots[0]["output"]["trailing"],
        json!([
            {
                "axis": "affine", "stride": 2, "over": "o", "offset": 0,
                "conv": {"dilation": 3, "kernel": "k", "padding": "valid"},
            },
            {"axis": "label", "name": "c"},
        ])
    );

    let value = parse_json("s*o+1, d*p=+2*q");
    assert_eq!(
        value["slots"][0]["output"]["trailing"],
        json!([
            {"axis": "affine", "stride": "s", "over": "o", "offset": 1, "conv": null},
            {
                "axis": "affine", "stride": "d", "over": "p", "offset": 0,
                "conv": {"dilation": 2, "kernel": "q", "padding": "padded"},
            },
        ])
    );
}

#[test]
fn json_key_order_is_stable() {
    let output = rcannl(&["parse", "..v.., _ -> 3^a", "--json"]);
    let text = stdout(&output);
    let keys = [
        "\"spec\"",
        "\"canonical\"",
        "\"mode\"",
        "\"kind\"",
        "\"slots\"",
    ];
    let positions: Vec<usize> = keys.iter().filter_map(|key| text.find(key)).collect();
    assert_eq!(positions.len(), keys.len(), "{text}");
    assert!(positions.is_sorted(), "{text}");
    assert!(
        text.contains(r#""input":{"closed":false,"leading":[],"row_var":{"form":"named","name":"v"},"trailing":[{"axis":"anonymous"}]}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"axis":"concat","components":[{"component":"size","size":3},{"component":"label","name":"a"}]}"#),
        "{text}"
    );
}

#[test]
fn single_char_einsum() {
    let value = parse_json("ij;jk=>ik");
    assert_eq!(value["mode"], "single-char");
    assert_eq!(value["canonical"], "i, j; j, k => i, k");
    assert_eq!(value["slots"].as_array().map(Vec::len), Some(3));

    let text = parse_text("ij;jk=>ik");
    assert!(text.contains("mode:      single-char\n"), "{text}");
    assert!(text.contains("canonical: i, j; j, k => i, k\n"), "{text}");
}

#[test]
fn digit_runs_are_one_axis() {
    let value = parse_json("b00c");
    assert_eq!(
        value["slots"][0]["output"]["trailing"],
        json!([
            {"axis": "label", "name": "b"},
            {"axis": "fixed", "index": 0},
            {"axis": "label", "name": "c"},
        ])
    );
    assert!(parse_text("b00c").contains("closed, 3 axes"));
}

/// The caret line of a rendered error: the character index of its first `^`, counted from the
/// start of the spec text (which the message indents like the caret line).
fn caret_column(message: &str) -> Option<usize> {
    let lines: Vec<&str> = message.lines().collect();
    let caret = lines
        .iter()
        .position(|line| line.trim_start().starts_with('^'))?;
    let text_line = lines.get(caret.checked_sub(1)?)?;
    let indent = text_line.len() - text_line.trim_start().len();
    Some(lines[caret].find('^')? - indent + 1)
}

#[test]
fn parse_error_in_human_mode() {
    let output = rcannl(&["parse", "ij;jk=>i?k"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let err = stderr(&output);
    assert!(err.starts_with("error: column 9: "), "{err}");
    assert!(err.contains("  ij;jk=>i?k\n"), "{err}");
    assert_eq!(caret_column(&err), Some(9), "{err}");
}

#[test]
fn parse_error_in_json_mode() {
    let output = rcannl(&["parse", "ij;jk=>i?k", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stderr.is_empty());
    let value: Value = serde_json::from_str(&stdout(&output)).expect("stdout is one JSON value");
    let error = &value["error"];
    assert_eq!(error["kind"], "parse");
    assert_eq!(error["column"], 9);
    let message = error["message"].as_str().expect("message is a string");
    assert!(message.starts_with("column 9: "), "{message}");
    assert_eq!(caret_column(message), Some(9), "{message}");
}

#[test]
fn a_spec_may_start_with_a_hyphen() {
    let value = parse_json("-> o");
    assert_eq!(value["canonical"], "o");
}
