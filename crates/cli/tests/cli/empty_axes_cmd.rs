//! `rcannl einsum` on inputs with an axis of size 0 (`range:0,3`, `.npy` files of shape (0, 3)),
//! on both backends: sums over an empty axis give zeros, maxima −∞, results with an empty axis
//! have no values, gradients of empty inputs are empty. Expected values are numpy's, written
//! beside each case with the expression that gives them.

use crate::common::{fresh_dir, output_shape, rcannl, run, run_on, stderr, stdout};

use serde_json::json;

#[test]
fn a_sum_over_an_empty_axis_is_zero() {
    // np.einsum('ij->j', np.zeros((0, 3))) == [0., 0., 0.]
    assert_eq!(
        run(&["i,j=>j", "range:0,3", "--grads"]),
        json!({"dtype": "float64", "shape": output_shape(&[3]), "values": [0.0, 0.0, 0.0], "grads": [[]]})
    );
    // np.einsum('ij->', np.zeros((0, 3))) == 0.
    assert_eq!(
        run(&["i,j=>", "range:0,3"]),
        json!({"dtype": "float64", "shape": output_shape(&[]), "values": [0.0]})
    );
}

#[test]
fn results_with_an_empty_axis_have_no_values() {
    // np.einsum('ij->ij', np.zeros((0, 3))).shape == (0, 3)
    assert_eq!(
        run(&["i,j=>i,j", "range:0,3", "--grads"]),
        json!({"dtype": "float64", "shape": output_shape(&[0, 3]), "values": [], "grads": [[]]})
    );
    // np.einsum('ij->ji', np.zeros((0, 3))).shape == (3, 0)
    assert_eq!(
        run(&["i,j=>j,i", "range:0,3"]),
        json!({"dtype": "float64", "shape": output_shape(&[3, 0]), "values": []})
    );
}

#[test]
fn gradients_through_a_sum_over_an_empty_axis() {
    // loss = Σ_ij x[i,j]·w[j] with x of shape (0, 3): d loss/d w = x.sum(axis=0) = zeros(3).
    assert_eq!(
        run(&["i,j;j=>", "range:0,3", "values:1,2,3:3", "--grads"]),
        json!({
            "dtype": "float64",
            "shape": output_shape(&[]),
            "values": [0.0],
            "grads": [[], [0.0, 0.0, 0.0]],
        })
    );
}

#[test]
fn the_numpy_notation_and_matrix_products_with_an_empty_dimension() {
    // np.einsum('ij,jk->ik', np.zeros((2, 0)), np.zeros((0, 3))) == np.zeros((2, 3))
    assert_eq!(
        run(&["--numpy", "ij,jk->ik", "range:2,0", "range:0,3", "--grads"]),
        json!({"dtype": "float64", "shape": output_shape(&[2, 3]), "values": vec![0.0; 6], "grads": [[], []]})
    );
    // Sizes the tuned product takes when nothing is empty: (64, 0) @ (0, 48) == zeros((64, 48)).
    let product = run(&["i,j;j,k=>i,k", "range:64,0", "range:0,48"]);
    assert_eq!(product["shape"], output_shape(&[64, 48]));
    assert_eq!(product["values"], json!(vec![0.0; 64 * 48]));
    // (0, 64) @ (64, 48) has shape (0, 48); d Σ/d b = a.sum(axis=0)[:, None] = zeros((64, 48)).
    let rows = run(&["i,j;j,k=>i,k", "range:0,64", "range:64,48", "--grads"]);
    assert_eq!(rows["values"], json!([]));
    assert_eq!(rows["grads"], json!([[], vec![0.0; 64 * 48]]));
    // A batch of no products: (0, 64, 64) @ (0, 64, 64) has shape (0, 64, 64).
    let batched = run(&["b|i,j;b|j,k=>b|i,k", "range:0|64,64", "range:0|64,64"]);
    assert_eq!(
        batched["shape"],
        json!({"batch": [0], "input": [], "output": [64, 64]})
    );
    assert_eq!(batched["values"], json!([]));
}

#[test]
fn a_maximum_over_an_empty_axis_is_minus_infinity() {
    // np.max(np.zeros((0, 3)), axis=0, initial=-np.inf) == [-inf, -inf, -inf] (without
    // `initial`, numpy refuses: here the accumulator's neutral element stands, as it does for
    // every cell a maximum does not reach). JSON has no infinities: they print as null.
    assert_eq!(
        run(&["--op", "einmax", "i,j=>j", "range:0,3"]),
        json!({"dtype": "float64", "shape": output_shape(&[3]), "values": [null, null, null]})
    );
    for backend in ["interp", "cc"] {
        let output = rcannl(&[
            "einsum",
            "--op",
            "einmax",
            "i,j=>j",
            "range:0,3",
            "--backend",
            backend,
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stdout(&output).contains("values: [-inf, -inf, -inf]"),
            "{}",
            stdout(&output)
        );
    }
}

/// A version 1.0 `.npy` file of little-endian f64 `values` and the given `shape` (as numpy
/// writes a Python tuple).
fn npy_f64(shape: &str, values: &[f64]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}").into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend(
        u16::try_from(header.len())
            .expect("a short header")
            .to_le_bytes(),
    );
    file.extend(header);
    file.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    file
}

#[test]
fn npy_files_with_an_empty_axis_in_and_out() {
    let dir = fresh_dir("empty-axes");
    let input = dir.join("empty.npy");
    std::fs::write(&input, npy_f64("(0, 3)", &[])).expect("the input is written");
    let input = input.to_str().expect("a UTF-8 path");
    // np.load('empty.npy').sum(axis=0) == [0., 0., 0.]
    assert_eq!(
        run(&["i,j=>j", input, "--grads"]),
        json!({"dtype": "float64", "shape": output_shape(&[3]), "values": [0.0, 0.0, 0.0], "grads": [[]]})
    );
    // Written back transposed: a (3, 0) array.
    let output = dir.join("out.npy");
    let output_text = output.to_str().expect("a UTF-8 path");
    for backend in ["interp", "cc"] {
        let written = run_on(backend, &["i,j=>j,i", input, "-o", output_text]);
        assert_eq!(
            written,
            json!({"dtype": "float64", "shape": output_shape(&[3, 0])})
        );
        let file = std::fs::File::open(&output).expect("the output exists");
        let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).expect("a .npy file");
        assert_eq!(npy.shape(), &[3, 0]);
        let values: Vec<f64> = npy.into_vec().expect("f64 values");
        assert!(values.is_empty());
    }
    std::fs::remove_dir_all(&dir).expect("the test folder is removed");
}
