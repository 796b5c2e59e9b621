//! End-to-end tests of `rcannl einsum`: run the built binary and compare its JSON output exactly
//! with values computed here, independently, on both backends.

use crate::common::{range, rcannl, run, run_error, run_on, stderr, stdout};

use std::path::PathBuf;

use serde_json::{Value, json};

fn shape(batch: &[usize], input: &[usize], output: &[usize]) -> Value {
    json!({"batch": batch, "input": input, "output": output})
}

#[test]
fn transpose_with_kinds() {
    // x: batch b=2, input i=3, output o=4; memory order b, o, i.
    let x = |b: usize, o: usize, i: usize| (b * 12 + o * 3 + i) as f64;
    // The result o|b->i: batch o, input b, output i; memory order o, i, b.
    let mut values = Vec::new();
    for o in 0..4 {
        for i in 0..3 {
            for b in 0..2 {
                values.push(x(b, o, i));
            }
        }
    }
    assert_eq!(
        run(&["b|i->o => o|b->i", "range:2|3->4"]),
        json!({"shape": shape(&[4], &[2], &[3]), "dtype": "float64", "values": values})
    );
}

#[test]
fn batched_matmul() {
    let (n, p, q, r) = (2, 3, 4, 5);
    let a: Vec<f64> = range(n * p * q);
    let b: Vec<f64> = (0..n * q * r).map(|i| (i % 7) as f64 - 3.0).collect();
    let b_text: Vec<String> = b.iter().map(f64::to_string).collect();
    let b_input = format!("values:{}:2|4,5", b_text.join(","));
    let mut values = Vec::new();
    for batch in 0..n {
        for i in 0..p {
            for k in 0..r {
                let sum: f64 = (0..q)
                    .map(|j| a[(batch * p + i) * q + j] * b[(batch * q + j) * r + k])
                    .sum();
                values.push(sum);
            }
        }
    }
    assert_eq!(
        run(&["b|ij;b|jk=>b|ik", "range:2|3,4", &b_input]),
        json!({"shape": shape(&[2], &[], &[3, 5]), "dtype": "float64", "values": values})
    );
}

#[test]
fn diagonal() {
    assert_eq!(
        run(&["ii=>i", "range:3,3"]),
        json!({"shape": shape(&[], &[], &[3]), "dtype": "float64", "values": [0.0, 4.0, 8.0]})
    );
}

#[test]
fn partial_diagonal_write() {
    assert_eq!(
        run(&["i=>ii", "values:1,2,3:3"]),
        json!({
            "shape": shape(&[], &[], &[3, 3]), "dtype": "float64",
            "values": [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0],
        })
    );
}

#[test]
fn padded_2d_convolution() {
    // x: 1 image of 4×4 pixels, 2 channels; w: a 3×3 kernel from 2 channels to 2.
    let (h, w, c, d, k) = (4usize, 4usize, 2usize, 2usize, 3usize);
    let x = range(h * w * c);
    let weights: Vec<f64> = (0..k * k * c * d)
        .map(|i| ((i * 5) % 11) as f64 - 5.0)
        .collect();
    let weights_text: Vec<String> = weights.iter().map(f64::to_string).collect();
    let weights_input = format!("values:{}:3,3,2,2", weights_text.join(","));
    // Zero padding of 1 on each side keeps the 4×4 size.
    let pixel = |i: i64, j: i64, ch: usize| {
        if (0..h as i64).contains(&i) && (0..w as i64).contains(&j) {
            x[(i as usize * w + j as usize) * c + ch]
        } else {
            0.0
        }
    };
    let mut values = Vec::new();
    for i in 0..h {
        for j in 0..w {
            for out in 0..d {
                let mut sum = 0.0;
                for ki in 0..k {
                    for kj in 0..k {
                        for ch in 0..c {
                            let p = pixel(i as i64 + ki as i64 - 1, j as i64 + kj as i64 - 1, ch);
                            sum += p * weights[((ki * k + kj) * c + ch) * d + out];
                        }
                    }
                }
                values.push(sum);
            }
        }
    }
    assert_eq!(
        run(&[
            "b,i=+ki,j=+kj,c; ki,kj,c,d => b,i,j,d",
            "range:1,4,4,2",
            &weights_input,
        ]),
        json!({"shape": shape(&[], &[], &[1, 4, 4, 2]), "dtype": "float64", "values": values})
    );
}

#[test]
fn max_pool_with_gradients() {
    assert_eq!(
        run(&[
            "2*o<+k=>o",
            "values:3,1,4,1,5,9,2,6:8",
            "--op",
            "einmax",
            "--set",
            "k=2",
            "--grads",
            "--capture",
            "k,o",
        ]),
        json!({
            "shape": shape(&[], &[], &[4]), "dtype": "float64",
            "values": [3.0, 4.0, 9.0, 6.0],
            "grads": [[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]],
            "captures": {"k": 2, "o": 4},
        })
    );
    // 2×2 windows over a 4×4 range: the maxima are the bottom-right corners.
    let mut mask = vec![0.0; 16];
    for corner in [5, 7, 13, 15] {
        mask[corner] = 1.0;
    }
    assert_eq!(
        run(&[
            "2*i<+a, 2*j<+b => i, j",
            "range:4,4",
            "--op",
            "einmax",
            "--set",
            "a=2",
            "--set",
            "b=2",
            "--grads",
        ]),
        json!({
            "shape": shape(&[], &[], &[2, 2]), "dtype": "float64",
            "values": [5.0, 7.0, 13.0, 15.0],
            "grads": [mask],
        })
    );
}

#[test]
fn three_way_concat_with_gradients() {
    assert_eq!(
        run(&[
            "a;b;c=>a^b^c",
            "range:2",
            "values:5,6,7:3",
            "fill:-1:1",
            "--op",
            "concat",
            "--grads",
        ]),
        json!({
            "shape": shape(&[], &[], &[6]), "dtype": "float64",
            "values": [0.0, 1.0, 5.0, 6.0, 7.0, -1.0],
            "grads": [[1.0, 1.0], [1.0, 1.0, 1.0], [1.0]],
        })
    );
}

#[test]
fn matmul_gradients() {
    // d/da Σ(a·b) = row sums of b (per j), d/db = column sums of a (per j).
    let a = range(12);
    let b = range(20);
    let grad_a: Vec<f64> = (0..12)
        .map(|cell| (0..5).map(|k| b[(cell % 4) * 5 + k]).sum())
        .collect();
    let grad_b: Vec<f64> = (0..20)
        .map(|cell| (0..3).map(|i| a[i * 4 + cell / 5]).sum())
        .collect();
    let value = run(&["ij;jk=>ik", "range:3,4", "range:4,5", "--grads"]);
    assert_eq!(value["grads"], json!([grad_a, grad_b]));
    assert_eq!(value["values"][0], json!(70.0));
}

#[test]
fn the_other_operations() {
    assert_eq!(
        run(&["i;j=>ij", "range:2", "values:10,20:2", "--op", "outer-sum"]),
        json!({"shape": shape(&[], &[], &[2, 2]), "dtype": "float64", "values": [10.0, 20.0, 11.0, 21.0]})
    );
    // max over j of a[i,j] + b[j,k].
    assert_eq!(
        run(&[
            "ij;jk=>ik",
            "values:0,5,1,1:2,2",
            "values:1,0,0,3:2,2",
            "--op",
            "tropical"
        ]),
        json!({"shape": shape(&[], &[], &[2, 2]), "dtype": "float64", "values": [5.0, 8.0, 2.0, 4.0]})
    );
    assert_eq!(
        run(&[
            "-",
            "values:1,0,2:3",
            "values:1,2,3:3",
            "fill:9:3",
            "--op",
            "where",
            "--grads",
        ]),
        json!({
            "shape": shape(&[], &[], &[3]), "dtype": "float64",
            "values": [1.0, 9.0, 3.0],
            "grads": [[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
        })
    );
    assert_eq!(
        run(&["-", "range:3", "fill:2:3", "--op", "pointwise-add"]),
        json!({"shape": shape(&[], &[], &[3]), "dtype": "float64", "values": [2.0, 3.0, 4.0]})
    );
    assert_eq!(
        run(&["-", "range:2,3", "values:1,-1,2:3", "--op", "pointwise-mul"]),
        json!({"shape": shape(&[], &[], &[2, 3]), "dtype": "float64", "values": [0.0, -1.0, 4.0, 3.0, -4.0, 10.0]})
    );
    // A 2×3 matrix (input 3 -> output 2) applied to a vector of 3.
    assert_eq!(
        run(&["-", "range:3->2", "values:1,1,2:3", "--op", "compose"]),
        json!({"shape": shape(&[], &[], &[2]), "dtype": "float64", "values": [5.0, 17.0]})
    );
}

#[test]
fn npy_round_trip() {
    let path = temp_path("round-trip");
    let path_text = path.to_str().expect("a UTF-8 temporary path");
    let value = run_on("cc", &["b|i->o => o|b->i", "range:2|3->4", "-o", path_text]);
    assert_eq!(
        value,
        json!({"shape": shape(&[4], &[2], &[3]), "dtype": "float64"})
    );
    // The file holds all the result's axes in memory order (o, i, b).
    let file = std::fs::File::open(&path).expect("the output file exists");
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).expect("a .npy file");
    assert_eq!(npy.shape(), &[4, 3, 2]);
    let written: Vec<f64> = npy.into_vec().expect("f64 values");
    let transposed = run(&["b|i->o => o|b->i", "range:2|3->4"]);
    assert_eq!(json!(written), transposed["values"]);
    // Read back as an input, its dims are output axes.
    assert_eq!(
        run(&["ijk=>ijk", path_text]),
        json!({"shape": shape(&[], &[], &[4, 3, 2]), "dtype": "float64", "values": written})
    );
    std::fs::remove_file(&path).expect("the temporary file is removed");
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rcannl-cli-test-{name}-{}.npy", std::process::id()))
}

#[test]
fn timing_reports_a_median() {
    let value = run_on(
        "cc",
        &["ij;jk=>ik", "range:3,4", "range:4,5", "--time", "5"],
    );
    let median = value["median_ms"].as_f64().expect("median_ms is a number");
    assert!(median >= 0.0, "{value}");
    assert_eq!(value["values"].as_array().map(Vec::len), Some(15));
}

#[test]
fn timing_in_words_gives_the_shape_and_the_median_without_the_values() {
    let output = rcannl(&[
        "einsum",
        "ij;jk=>ik",
        "range:30,40",
        "range:40,50",
        "--time",
        "3",
        "--grads",
        "--backend",
        "interp",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[0],
        "shape:  30,50  (batch [], input [], output [30, 50])"
    );
    assert_eq!(lines[1], "dtype:  float64");
    let median = lines[2]
        .strip_prefix("median: ")
        .and_then(|rest| rest.trim().strip_suffix(" ms over 3 runs"))
        .unwrap_or_else(|| panic!("a median line: {text}"));
    assert!(median.parse::<f64>().is_ok_and(|ms| ms >= 0.0), "{text}");
}

#[test]
fn human_output() {
    let output = rcannl(&[
        "einsum",
        "2*o<+k=>o",
        "values:3,1,4,1,5,9,2,6:8",
        "--op",
        "einmax",
        "--set",
        "k=2",
        "--grads",
        "--capture",
        "k",
        "--backend",
        "interp",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
shape:     4  (batch [], input [], output [4])
dtype:     float64
values:    [3, 4, 9, 6]
grad x1:   [1, 0, 1, 0, 0, 1, 0, 1]
capture k: 2
"
    );
}

#[test]
fn parse_error_with_caret() {
    assert_eq!(
        run_error(&["ij;jk=>i?k", "range:3,4", "range:4,5"]),
        json!({"error": {
            "kind": "parse",
            "message": "column 9: unexpected character '?' in single-char mode\n  ij;jk=>i?k\n          ^",
        }})
    );
    let output = rcannl(&["einsum", "ij;jk=>i?k", "range:3,4", "range:4,5"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert_eq!(
        stderr(&output),
        "error: column 9: unexpected character '?' in single-char mode\n  ij;jk=>i?k\n          ^\n"
    );
    assert_eq!(
        run_error(&["ii=>i", "range:3,3-4"]),
        json!({"error": {
            "kind": "parse",
            "message": "input 1 shape: column 4: '-' only appears in '->'\n  3,3-4\n     ^",
        }})
    );
}

#[test]
fn a_spec_in_numpys_notation_without_numpy_is_refused_with_a_hint_to_pass_it() {
    let hint = "\nhint: \"ij,jk->ik\" reads in numpy's notation: pass --numpy (in ours it is \
                \"i, j; j, k => i, k\")";
    let error = run_error(&["ij,jk->ik", "range:3,4", "range:4,5"]);
    assert_eq!(error["error"]["kind"], "parse", "{error}");
    let message = error["error"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with("column 10: an einsum spec needs '=>'") && message.ends_with(hint),
        "{message}"
    );
    let output = rcannl(&["einsum", "ij,jk->ik", "range:3,4", "range:4,5"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).ends_with(&format!("{hint}\n")),
        "{}",
        stderr(&output)
    );
    // The same spec with the flag computes the product.
    let product = run(&["ij,jk->ik", "range:3,4", "range:4,5", "--numpy"]);
    assert_eq!(product["values"][0], json!(70.0), "{product}");
    // No hint where the flag would not help: a spec neither notation reads, or an operation
    // that takes none.
    for (args, absent) in [
        (
            &["ij;jk=>i?k", "range:3,4", "range:4,5"][..],
            "single-char mode",
        ),
        (
            &["ij->ji", "range:3,4", "range:4,3", "--op", "compose"][..],
            "takes no spec",
        ),
    ] {
        let error = run_error(args);
        let message = error["error"]["message"].as_str().expect("a message");
        assert!(
            message.contains(absent) && !message.contains("--numpy"),
            "{message}"
        );
    }
}

#[test]
fn shape_clash() {
    assert_eq!(
        run_error(&["ij;jk=>ik", "range:3,4", "range:5,6"]),
        json!({"error": {
            "kind": "shape",
            "message": "einsum \"i, j; j, k => i, k\": label `j` is 4 in the first operand 'x1' \
                (output axis 1) but 5 in the second operand 'x2' (output axis 0)\n  \
                in operation: einsum#2 = einsum \"i, j; j, k => i, k\" (x1, x2)\n  \
                result 'einsum#2': ...|...->...\n  \
                operand 1 'x1': |->3,4\n  \
                operand 2 'x2': |->5,6",
        }})
    );
    // Input and output rows are named by kind.
    assert_eq!(
        run_error(&["i->j;j->k=>i->k", "range:|3->4", "range:|5->6"]),
        json!({"error": {
            "kind": "shape",
            "message": "einsum \"i -> j; j -> k => i -> k\": label `j` is 4 in the first operand \
                'x1' (output axis 0) but 5 in the second operand 'x2' (input axis 0)\n  \
                in operation: einsum#2 = einsum \"i -> j; j -> k => i -> k\" (x1, x2)\n  \
                result 'einsum#2': ...|...->...\n  \
                operand 1 'x1': |3->4\n  \
                operand 2 'x2': |5->6",
        }})
    );
}

#[test]
fn a_composition_of_too_many_axes_suggests_pmul() {
    assert_eq!(
        run_error(&["-", "--op", "compose", "range:3,4", "range:5,6"]),
        json!({"error": {
            "kind": "shape",
            "message": "an operand has more axes than the result it broadcasts to: the result's \
                (no axes) has 0 axes, the operand's 5,6 needs 2\n  \
                in operation: *#2 = compose (x1, x2)\n  \
                result '*#2': ...|...->...\n  \
                operand 1 'x1': |->3,4\n  \
                operand 2 'x2': |->5,6\n  \
                for a pointwise product use `pmul` (`*` on tensors is composition, the matrix \
                product)",
        }})
    );
}

#[test]
fn a_pooling_window_nothing_determines_is_an_error_not_a_guess() {
    assert_eq!(
        run_error(&["2*o<+k=>o", "range:6", "--op", "einmax"]),
        json!({"error": {
            "kind": "shape",
            "message": "nothing determines the window `k` of `2*o<+k`: the input fits many \
                windows, and none is guessed; give its size with --set k=SIZE",
        }})
    );
}

#[test]
fn the_help_says_einsum_takes_any_number_of_operands() {
    let output = rcannl(&["einsum", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(
        help.contains(
            "einsum:        Products summed over the labels the result leaves out (any number of \
             operands)"
        ),
        "{help}"
    );
    assert!(!help.contains("1, 2 or 3 operands"), "{help}");
}

#[test]
fn arity_mismatch() {
    assert_eq!(
        run_error(&["ij;jk=>ik", "range:3,4"]),
        json!({"error": {
            "kind": "arity",
            "message": "the spec \"ij;jk=>ik\" takes 2 operands, but 1 was given",
        }})
    );
    assert_eq!(
        run_error(&["ij=>i", "range:3,4", "--op", "tropical"]),
        json!({"error": {
            "kind": "arity",
            "message": "tropical takes 2 operands, but the spec \"ij=>i\" has 1",
        }})
    );
    assert_eq!(
        run_error(&["-", "range:3", "--op", "where"]),
        json!({"error": {
            "kind": "arity",
            "message": "where takes 3 inputs, but 1 was given",
        }})
    );
}

#[test]
fn other_errors() {
    assert_eq!(
        run_error(&["i=>i", "values:1,2:3"]),
        json!({"error": {
            "kind": "input",
            "message": "input 1: 2 values for shape 3, which has 3 cells",
        }})
    );
    assert_eq!(
        run_error(&["i=>i", "ranges:3"]),
        json!({"error": {
            "kind": "input",
            "message": "input 1: \"ranges:3\" is neither range:SHAPE, fill:V:SHAPE, \
                values:v1,v2,…:SHAPE nor a .npy file",
        }})
    );
    let missing = run_error(&["i=>i", "no/such/file.npy"]);
    assert_eq!(missing["error"]["kind"], "io");
    assert!(
        missing["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no/such/file.npy: ")),
        "{missing}"
    );
    let capture = run_error(&["2*o<+k=>o", "range:8", "--op", "einmax", "--set", "q=2"]);
    assert_eq!(capture["error"]["kind"], "capture");
    assert_eq!(
        run_error(&["i=>i", "range:3", "--set", "k"]),
        json!({"error": {
            "kind": "capture",
            "message": "--set \"k\": expected LABEL=SIZE, as in k=2",
        }})
    );
    assert_eq!(
        run_error(&["i;j=>ij", "range:100000", "range:100000"]),
        json!({"error": {
            "kind": "shape",
            "message": "the result 100000,100000 would have more than 67108864 cells",
        }})
    );
    assert_eq!(
        run_error(&["i=>i", "range:3", "--op", "compose"]),
        json!({"error": {
            "kind": "parse",
            "message": "--op compose takes no spec: write - in its place (got \"i=>i\")",
        }})
    );
}

#[test]
fn numpy_notation_and_many_operands() {
    // A·B·C·d for A 2×3, B 3×4, C 4×2 (cells their offsets) and d = (1, −1).
    let a: Vec<f64> = (0..6).map(f64::from).collect();
    let b: Vec<f64> = (0..12).map(f64::from).collect();
    let c: Vec<f64> = (0..8).map(f64::from).collect();
    let mut abc = [0.0; 4];
    for i in 0..2 {
        for l in 0..2 {
            for j in 0..3 {
                for k in 0..4 {
                    abc[i * 2 + l] += a[i * 3 + j] * b[j * 4 + k] * c[k * 2 + l];
                }
            }
        }
    }
    let expected: Vec<f64> = (0..2).map(|i| abc[i * 2] - abc[i * 2 + 1]).collect();
    let got = run(&[
        "ij,jk,kl,l->i",
        "range:2,3",
        "range:3,4",
        "range:4,2",
        "values:1,-1:2",
        "--numpy",
    ]);
    assert_eq!(
        got,
        json!({"shape": {"batch": [], "input": [], "output": [2]}, "dtype": "float64", "values": expected})
    );
    let error = run_error(&["i1,jk", "range:2", "range:2,2", "--numpy"]);
    assert_eq!(error["error"]["kind"], "parse");
}

#[test]
fn numpy_ellipses_broadcast() {
    // a 4×1×2 and b 3×2 (cells their offsets): `...` is 4×1 against 3, which broadcast to 4×3.
    let mut expected = Vec::new();
    for p in 0..4 {
        for q in 0..3 {
            expected.push(
                (0..2)
                    .map(|i| f64::from((p * 2 + i) * (q * 2 + i)))
                    .sum::<f64>(),
            );
        }
    }
    let got = run(&["...i,...i->...", "range:4,1,2", "range:3,2", "--numpy"]);
    assert_eq!(
        got,
        json!({"shape": {"batch": [], "input": [], "output": [4, 3]}, "dtype": "float64", "values": expected})
    );
    let error = run_error(&["...i,...i", "range:4,2,2", "range:3,2", "--numpy"]);
    assert_eq!(error["error"]["kind"], "shape");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("do not broadcast")),
        "{error}"
    );
}

#[test]
fn the_path_search_takes_a_memory_limit() {
    // i,j,ijk->k: the outer product i·j (150·10 cells) is cheapest; within 1,000 cells the path
    // sums i first; within 999 there is none.
    let explain = |extra: &[&str]| {
        let mut args = vec![
            "explain",
            "i,j,ijk->k",
            "range:150",
            "range:10",
            "range:150,10,100",
            "--numpy",
        ];
        args.extend_from_slice(extra);
        rcannl(&args)
    };
    for search in ["optimal", "greedy"] {
        let free = stdout(&explain(&["--path", search]));
        // The first step; the second is the same pair in either order.
        assert!(
            free.contains("path:      (0, 1) (") && free.contains(" (301500 FLOPs"),
            "{free}"
        );
        let small = stdout(&explain(&["--path", search, "--memory-limit", "1000"]));
        assert!(
            small.contains("path:      (0, 2) (") && small.contains(" (302000 FLOPs"),
            "{small}"
        );
    }
    let none = explain(&["--memory-limit", "999"]);
    assert!(!none.status.success());
    assert!(
        stderr(&none).contains("more than 999 cells"),
        "{}",
        stderr(&none)
    );
    // The einsum command takes the same limit and computes the same values.
    let within = run(&[
        "i,j,ijk->k",
        "range:3",
        "range:2",
        "range:3,2,4",
        "--numpy",
        "--memory-limit",
        "8",
    ]);
    let free = run(&["i,j,ijk->k", "range:3", "range:2", "range:3,2,4", "--numpy"]);
    assert_eq!(within, free);
}

#[test]
fn explain_shows_the_contraction_path() {
    let output = rcannl(&[
        "explain",
        "ij,jk,kl->il",
        "range:2,3",
        "range:3,4",
        "range:4,2",
        "--numpy",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("ours:      i, j; j, k; k, l => i, l\n"),
        "{text}"
    );
    assert!(
        text.contains("path:      (1, 2) (0, 1) (72 FLOPs"),
        "{text}"
    );
}

#[test]
fn a_command_line_that_does_not_parse_is_a_usage_error() {
    let error = run_error(&["ij=>ji", "range:2,3", "--op", "nope"]);
    assert_eq!(error["error"]["kind"], "usage");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid value 'nope' for '--op <OP>'"),
        "{message}"
    );
    // Without --json: the parser's message on stderr, status 1 like every other error.
    let output = rcannl(&["einsum", "ij=>ji", "range:2,3", "--frob"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).starts_with("error: unexpected argument '--frob' found"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn captures_and_sets_reach_labels_a_contraction_path_sums_away() {
    // Along the path, j and k are summed away before the last step makes the result.
    let args = ["ij;jk;kl=>il", "range:2,3", "range:3,4", "range:4,2"];
    fn with<'a>(args: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [args, extra].concat()
    }
    let product = run(&args);
    let captured = run(&with(&args, &["--capture", "k,j,i,l", "--set", "k=4"]));
    assert_eq!(captured["values"], product["values"]);
    // In the order asked (the JSON text, which a parsed object would reorder).
    let output = rcannl(
        &[
            &["einsum"][..],
            &with(
                &args,
                &["--capture", "k,j,i,l", "--json", "--backend", "interp"],
            ),
        ]
        .concat(),
    );
    assert!(
        stdout(&output).contains(r#""captures":{"k":4,"j":3,"i":2,"l":2}"#),
        "{}",
        stdout(&output)
    );
    // Refused as a label on the result is: the capture is on the step that has it.
    assert_eq!(
        run_error(&with(&args, &["--set", "k=5"])),
        json!({"error": {
            "kind": "shape",
            "message": "set_dim: the dimension 'k' is already solved to 4, not 5\n  \
                        in operation: set_dim(k, 5)",
        }})
    );
    let unknown = run_error(&with(&args, &["--capture", "q"]));
    assert_eq!(unknown["error"]["kind"], "capture");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Variable 'q' not found in the spec")),
        "{unknown}"
    );
}
