//! `rcannl einsum --capture` on einsums run along a contraction path, on both backends: labels
//! and row variables the path sums out of one operand first, or contracts away before its last
//! step, are reported with their sizes.

use crate::common::run_on;

use serde_json::json;

#[test]
fn names_a_path_sums_out_of_one_operand_are_captured() {
    // y and ..s.. are each on one operand: the path sums them away first.
    // out[x, r, z] = (Σ_y a[x, r, y]) · (Σ_s b[s, z]), cells their flat offsets.
    let mut expected = Vec::new();
    for x in 0..2 {
        for r in 0..3 {
            for z in 0..5 {
                let row: usize = (0..4).map(|y| (x * 3 + r) * 4 + y).sum();
                let column: usize = (0..3).map(|s| s * 5 + z).sum();
                expected.push((row * column) as f64);
            }
        }
    }
    for backend in ["interp", "cc"] {
        let got = run_on(
            backend,
            &[
                "x, ..r.., y; ..s.., z => x, ..r.., z",
                "range:2,3,4",
                "range:3,5",
                "--capture",
                "r,s,y,x,z",
            ],
        );
        assert_eq!(
            got,
            json!({
                "dtype": "float64",
                "shape": {"batch": [], "input": [], "output": [2, 3, 5]},
                "values": expected,
                "captures": {"r": 3, "s": 3, "y": 4, "x": 2, "z": 5},
            }),
            "on {backend}"
        );
    }
}

#[test]
fn labels_contracted_before_the_last_step_are_captured_in_numpys_notation() {
    for backend in ["interp", "cc"] {
        let got = run_on(
            backend,
            &[
                "ij,jk,kl->il",
                "range:2,3",
                "range:3,4",
                "range:4,2",
                "--numpy",
                "--capture",
                "j,k,l",
                "--set",
                "j=3",
            ],
        );
        assert_eq!(
            got["captures"],
            json!({"j": 3, "k": 4, "l": 2}),
            "on {backend}"
        );
    }
}
