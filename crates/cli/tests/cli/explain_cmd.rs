//! End-to-end tests of `rcannl explain`: run the built binary and check the parts of its report.

use crate::common::rcannl;

/// Runs `rcannl explain ARGS`, expects success, and returns stdout.
fn explain(args: &[&str]) -> String {
    let mut all = vec!["explain"];
    all.extend(args);
    let output = rcannl(&all);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {err}");
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

fn assert_contains(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn matmul_reduces_over_j_into_a_prefilled_result() {
    let text = explain(&["ij;jk=>ik", "range:3,4", "range:4,5", "--backend", "cc"]);
    assert_contains(
        &text,
        &[
            "spec:      ij;jk=>ik\n",
            "canonical: i, j; j, k => i, k\n",
            "backend:   cc\n",
            "x1      3,4  (batch [], input [], output [3, 4])  spec: i, j\n",
            "x2      4,5  (batch [], input [], output [4, 5])  spec: j, k\n",
            "result  3,5  (batch [], input [], output [3, 5])  spec: i, k\n",
            "product space: i<3> × k<5> × j<4>\n",
            "result:        [3, 5] at [i, k]\n",
            "x1:            [3, 4] at [i, j]\n",
            "x2:            [4, 5] at [j, k]\n",
            "reductions:    j\n",
            "pre-filled:    yes, with 0 (the neutral element of +): the result map is surjective \
             (every cell is written) and not injective (cells are written more than once: it \
             reduces over j)\n",
            "== padding ==\nnone\n",
            "routine forward():",
            "== generated C (cc) ==",
            "void rc_k0(",
        ],
    );
    // The loop nest comes before the C, and the shared prelude is left out.
    // The target names the flags the C is compiled with.
    let flags = std::env::var("RCANNL_CFLAGS")
        .ok()
        .filter(|f| !f.trim().is_empty())
        .map(|f| f.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "-O3 -march=native".to_owned());
    let target = text
        .lines()
        .find(|l| l.starts_with("target:    "))
        .expect("a target line");
    assert!(target.contains(&flags), "{target}");
    let nest = text.find("== loop nest").expect("a loop nest");
    let c = text.find("== generated C").expect("generated C");
    assert!(nest < c, "{text}");
    assert!(!text.contains("rc_f16_to_f32"), "{text}");
}

#[test]
fn the_interpreter_generates_no_code() {
    let text = explain(&["ij;jk=>ik", "range:3,4", "range:4,5", "--backend", "interp"]);
    assert_contains(
        &text,
        &[
            "backend:   interpreter\n",
            "reductions:    j\n",
            "== generated C (interpreter) ==\nnone: the interpreter runs the loop nest as it is",
        ],
    );
}

#[test]
fn a_transpose_stores_each_cell_once() {
    let text = explain(&["b|i->o => o|b->i", "range:2|3->4"]);
    assert_contains(
        &text,
        &[
            "x1      2|3->4  (batch [2], input [3], output [4])  spec: b | i -> o\n",
            "result  4|2->3  (batch [4], input [2], output [3])  spec: o | b -> i\n",
            "result:        [4, 3, 2] at [o, i, b]\n",
            "x1:            [2, 4, 3] at [b, o, i]\n",
            "reductions:    none\n",
            "pre-filled:    no: the result map is surjective (every cell is written) and injective \
             (no cell is written twice), so each cell is stored once\n",
        ],
    );
}

#[test]
fn a_partial_diagonal_write_is_prefilled() {
    let text = explain(&["i=>ii", "range:3"]);
    assert_contains(
        &text,
        &[
            "result:        [3, 3] at [i, i]\n",
            "pre-filled:    yes, with 0 (the neutral element of +): the result map is not \
             surjective (some cells are never written) and injective (no cell is written twice)\n",
        ],
    );
}

#[test]
fn a_padded_convolution_shows_its_margins() {
    let text = explain(&["o=+k;k=>o", "range:5", "range:3"]);
    assert_contains(
        &text,
        &[
            "product space: o<5> × k<3>\n",
            "x1:            [5] at [o+k-1]\n",
            "reductions:    k\n",
            "== padding ==\nx1 axis 0: 1 before, 1 after\n",
        ],
    );
}

#[test]
fn a_max_pool_window_is_named_and_reduced() {
    let text = explain(&["2*o<+k=>o", "range:8", "--op", "einmax", "--set", "k=2"]);
    assert_contains(
        &text,
        &[
            "operation: einmax: at each point, the operand, accumulated with max\n",
            "product space: o<4> × k<2>\n",
            "x1:            [8] at [2*o+k]\n",
            "reductions:    k\n",
            "pre-filled:    yes, with -inf (the neutral element of max)",
        ],
    );
}

#[test]
fn errors_go_to_stderr() {
    let output = rcannl(&["explain", "ij;jk=>ik", "range:3,4", "range:5,6"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.starts_with(
            "error: einsum \"i, j; j, k => i, k\": label `j` is 4 in the first operand 'x1' \
             (output axis 1) but 5 in the second operand 'x2' (output axis 0)\n"
        ),
        "{err}"
    );
}

#[test]
fn a_path_step_keeps_the_labels_of_its_own_spec() {
    // The last step contracts `c`, of size 3; the user's `k` (size 4) stays `k`.
    let text = explain(&["ab;bc;ck=>ak", "range:2,3", "range:3,3", "range:3,4"]);
    assert_contains(
        &text,
        &[
            "== projections (einsum \"a, c; c, k => a, k\"; dims and index maps in memory order) ==\n\
             product space: a<2> × k<4> × c<3>\n",
            "reductions:    c\n",
        ],
    );
}
