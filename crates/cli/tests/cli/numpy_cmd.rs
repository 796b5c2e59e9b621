//! `rcannl einsum --numpy` against numpy's einsum on both backends: labels of size 1 broadcast,
//! scalar results have no axes (on the command line and in the `-o` file), labels are letters of
//! any script, and equations numpy refuses exit with status 1 and a message naming what is wrong.
//! Inputs are `range:` (each cell its flat offset); expected values were computed by numpy:
//! `python3 -c "import numpy as np; r = lambda *s: np.arange(float(np.prod(s))).reshape(s);
//! print(np.einsum(SPEC, r(SHAPE1), r(SHAPE2)).ravel().tolist())"`.

use crate::common;

use crate::common::{fresh_dir, output_shape, rcannl, stderr, stdout};

use serde_json::{Value, json};

/// `rcannl einsum ARGS --numpy --json --backend BACKEND`: success and its JSON.
fn run_on(backend: &str, args: &[&str]) -> Value {
    common::run_on(backend, &[args, &["--numpy"]].concat())
}

/// The output in numpy's notation on both backends, checked to be the same.
fn run(args: &[&str]) -> Value {
    common::run(&[args, &["--numpy"]].concat())
}

/// `rcannl einsum ARGS --numpy --json`: exit status 1 and the error object.
fn run_error(args: &[&str]) -> Value {
    common::run_error(&[args, &["--numpy"]].concat())
}

#[test]
fn a_label_of_size_one_broadcasts_against_the_others() {
    assert_eq!(
        run(&["ab,ab->b", "range:4,3", "range:1,3", "--grads"]),
        json!({
            "dtype": "float64",
            "shape": output_shape(&[3]),
            "values": [0.0, 22.0, 52.0],
            // d/dx1[a,b] = x2[0,b]; d/dx2[0,b] = Σ_a x1[a,b].
            "grads": [
                [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0, 1.0, 2.0],
                [18.0, 22.0, 26.0],
            ],
        })
    );
    assert_eq!(
        run(&["cij,cjk->cik", "range:2,3,2", "range:2,1,2"]),
        json!({
            "dtype": "float64",
            "shape": output_shape(&[2, 3, 2]),
            "values": [0.0, 1.0, 0.0, 5.0, 0.0, 9.0, 26.0, 39.0, 34.0, 51.0, 42.0, 63.0],
        })
    );
}

#[test]
fn scalar_results_have_no_axes() {
    for (args, value) in [
        (&["i->", "range:3"][..], 3.0),
        (&["", "values:5:"][..], 5.0),
        (&["ij,ij->", "range:2,3", "range:2,3"][..], 55.0),
        (&["i,i", "range:3", "range:3"][..], 5.0),
    ] {
        assert_eq!(
            run(args),
            json!({"dtype": "float64", "shape": output_shape(&[]), "values": [value]}),
            "{args:?}"
        );
    }
    let dir = fresh_dir("numpy-scalar");
    let path = dir.join("out.npy");
    let path_text = path.to_str().expect("a UTF-8 temporary path");
    let written = run_on(
        "cc",
        &["ij,ij->", "range:2,3", "range:2,3", "-o", path_text],
    );
    assert_eq!(
        written,
        json!({"dtype": "float64", "shape": output_shape(&[])})
    );
    let file = std::fs::File::open(&path).expect("the output file exists");
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).expect("a .npy file");
    assert_eq!(npy.shape(), &[] as &[u64], "a 0-d array");
    assert_eq!(npy.into_vec::<f64>().expect("f64 values"), [55.0]);
    std::fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn labels_are_letters_of_any_script() {
    assert_eq!(
        run(&["αβ,βγ", "range:2,3", "range:3,2"]),
        json!({"dtype": "float64", "shape": output_shape(&[2, 2]), "values": [10.0, 13.0, 28.0, 40.0]})
    );
    let explained = rcannl(&["explain", "αβ,βγ", "range:2,3", "range:3,2", "--numpy"]);
    assert!(explained.status.success(), "{}", stderr(&explained));
    assert!(
        stdout(&explained).contains("ours:      α, β; β, γ => α, γ\n"),
        "{}",
        stdout(&explained)
    );
}

#[test]
fn equations_numpy_refuses_are_errors_naming_what_is_wrong() {
    let cases: &[(&[&str], &str, &[&str])] = &[
        (&["i->ij", "range:2"], "parse", &["the result", "'j'"]),
        (
            &["ij->jij", "range:2,3"],
            "parse",
            &["the result", "'j'", "twice"],
        ),
        (&["i->i->i", "range:2"], "parse", &["`->`"]),
        (&["i$", "range:2"], "parse", &["'$'", "operand 1"]),
        (
            &["ij", "range:2"],
            "shape",
            &["operand 1", "2 labels", "1 axis"],
        ),
        (
            &["i", "range:2,3"],
            "shape",
            &["operand 1", "2 axes", "`...`"],
        ),
        (&["ii", "range:2,3"], "shape", &["operand 1", "'i'"]),
        (
            &["ij,jk->ik", "range:2,3", "range:4,4"],
            "shape",
            &["'j'", "operand 1", "operand 2"],
        ),
        (&["i,j", "range:2"], "arity", &["2 operands"]),
    ];
    for &(args, kind, needles) in cases {
        let error = run_error(args);
        assert_eq!(error["error"]["kind"], kind, "{args:?}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(
                message.contains(needle),
                "{args:?}: {message:?} lacks {needle:?}"
            );
        }
    }
}
