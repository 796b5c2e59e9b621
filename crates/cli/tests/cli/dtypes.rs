//! End-to-end tests of dtypes: `rcannl einsum` computes in numpy's result type of its inputs (or
//! `--dtype`'s), gives numpy's values in it (integers wrapping, bools as logic, floats rounded in
//! their own precision) on both backends, reports it (`"dtype"`) and writes `-o` in it.
//!
//! `.npy` inputs are written and `-o` files read here, by hand, independently of the command.

use crate::common;

use crate::common::{fresh_dir, rcannl, run, run_on, stderr, stdout};

use std::path::{Path, PathBuf};

use half::f16;
use serde_json::{Value, json};

const BACKENDS: [&str; 2] = ["interp", "cc"];

/// The dtypes, each with its `.npy` type string.
const DTYPES: [(&str, &str); 12] = [
    ("bool", "|b1"),
    ("int8", "|i1"),
    ("int16", "<i2"),
    ("int32", "<i4"),
    ("int64", "<i8"),
    ("uint8", "|u1"),
    ("uint16", "<u2"),
    ("uint32", "<u4"),
    ("uint64", "<u8"),
    ("float16", "<f2"),
    ("float32", "<f4"),
    ("float64", "<f8"),
];

/// The type string of a dtype.
fn descr(dtype: &str) -> &'static str {
    DTYPES.iter().find(|(name, _)| *name == dtype).unwrap().1
}

/// The bytes of a `.npy` file: version 1.0, the header dict, the data.
fn npy_bytes(descr: &str, dims: &[usize], data: &[u8]) -> Vec<u8> {
    let shape: Vec<String> = dims.iter().map(usize::to_string).collect();
    let shape = match shape.len() {
        1 => format!("{},", shape[0]),
        _ => shape.join(", "),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({shape}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    bytes
}

/// Little-endian data of `dtype` holding integers (bools: nonzero is true).
fn int_data(dtype: &str, values: &[i128]) -> Vec<u8> {
    let size: usize = descr(dtype)[2..].parse().unwrap();
    let mut data = Vec::new();
    for &value in values {
        match dtype {
            "float16" => data.extend(f16::from_f64(value as f64).to_le_bytes()),
            "float32" => data.extend((value as f32).to_le_bytes()),
            "float64" => data.extend((value as f64).to_le_bytes()),
            "bool" => data.push(u8::from(value != 0)),
            _ => data.extend(&value.to_le_bytes()[..size]),
        }
    }
    data
}

/// Writes a one-axis `.npy` file of `dtype` holding integers into `dir`; returns its path.
fn ints_file(dir: &Path, name: &str, dtype: &str, values: &[i128]) -> PathBuf {
    array_file(dir, name, dtype, &[values.len()], values)
}

/// Writes a `.npy` file of `dtype` and `dims` holding integers into `dir`; returns its path.
fn array_file(dir: &Path, name: &str, dtype: &str, dims: &[usize], values: &[i128]) -> PathBuf {
    let path = dir.join(format!("{name}.npy"));
    let bytes = npy_bytes(descr(dtype), dims, &int_data(dtype, values));
    std::fs::write(&path, bytes).expect("the input file is written");
    path
}

/// Writes a one-axis float32 `.npy` file into `dir`; returns its path.
fn f32_file(dir: &Path, name: &str, values: &[f32]) -> PathBuf {
    let path = dir.join(format!("{name}.npy"));
    let data: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&path, npy_bytes("<f4", &[values.len()], &data)).expect("written");
    path
}

/// Writes a one-axis float16 `.npy` file into `dir`; returns its path.
fn f16_file(dir: &Path, name: &str, values: &[f16]) -> PathBuf {
    let path = dir.join(format!("{name}.npy"));
    let data: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&path, npy_bytes("<f2", &[values.len()], &data)).expect("written");
    path
}

/// `rcannl einsum ARGS --json`: exit status 1; the error's kind and message.
fn run_error(args: &[&str]) -> Value {
    common::run_error(args)["error"].clone()
}

/// The dtype and values printed for `args`, on both backends.
fn dtype_and_values(args: &[&str]) -> (String, Value) {
    let value = run(args);
    let dtype = value["dtype"].as_str().expect("a dtype").to_owned();
    (dtype, value["values"].clone())
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 test folder")
}

/// What numpy gives as the dtype of `np.einsum("i,i->i", a, b)` for arrays `a` and `b` of each
/// pair of dtypes, rows by `a`, columns by `b` in the order of [`DTYPES`]; made by
///
/// ```text
/// python3 -c 'import numpy as np  # numpy 2.4.6
/// names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
///          "float16", "float32", "float64"]
/// for a in names:
///     print(a, [str(np.einsum("i,i->i", np.ones(1, a), np.ones(1, b)).dtype) for b in names])'
/// ```
///
/// (the same as `np.result_type(a, b)` for every pair).
const NUMPY_RESULT_TYPES: [(&str, [&str; 12]); 12] = [
    (
        "bool",
        [
            "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64",
        ],
    ),
    (
        "int8",
        [
            "int8", "int8", "int16", "int32", "int64", "int16", "int32", "int64", "float64",
            "float16", "float32", "float64",
        ],
    ),
    (
        "int16",
        [
            "int16", "int16", "int16", "int32", "int64", "int16", "int32", "int64", "float64",
            "float32", "float32", "float64",
        ],
    ),
    (
        "int32",
        [
            "int32", "int32", "int32", "int32", "int64", "int32", "int32", "int64", "float64",
            "float64", "float64", "float64",
        ],
    ),
    (
        "int64",
        [
            "int64", "int64", "int64", "int64", "int64", "int64", "int64", "int64", "float64",
            "float64", "float64", "float64",
        ],
    ),
    (
        "uint8",
        [
            "uint8", "int16", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64",
        ],
    ),
    (
        "uint16",
        [
            "uint16", "int32", "int32", "int32", "int64", "uint16", "uint16", "uint32", "uint64",
            "float32", "float32", "float64",
        ],
    ),
    (
        "uint32",
        [
            "uint32", "int64", "int64", "int64", "int64", "uint32", "uint32", "uint32", "uint64",
            "float64", "float64", "float64",
        ],
    ),
    (
        "uint64",
        [
            "uint64", "float64", "float64", "float64", "float64", "uint64", "uint64", "uint64",
            "uint64", "float64", "float64", "float64",
        ],
    ),
    (
        "float16",
        [
            "float16", "float16", "float32", "float64", "float64", "float16", "float32", "float64",
            "float64", "float16", "float32", "float64",
        ],
    ),
    (
        "float32",
        [
            "float32", "float32", "float32", "float64", "float64", "float32", "float32", "float64",
            "float64", "float32", "float32", "float64",
        ],
    ),
    (
        "float64",
        [
            "float64", "float64", "float64", "float64", "float64", "float64", "float64", "float64",
            "float64", "float64", "float64", "float64",
        ],
    ),
];

/// `[1, 0]` as JSON in `dtype`: bools as bools, integers as integers, floats as floats.
fn one_zero(dtype: &str) -> Value {
    match dtype {
        "bool" => json!([true, false]),
        _ if dtype.starts_with("float") => json!([1.0, 0.0]),
        _ => json!([1, 0]),
    }
}

#[test]
fn each_pair_of_dtypes_computes_in_numpys_result_type() {
    let dir = fresh_dir("dtype-pairs");
    for (row, (a, results)) in NUMPY_RESULT_TYPES.iter().enumerate() {
        assert_eq!(*a, DTYPES[row].0);
        let x = ints_file(&dir, "a", a, &[1, 0]);
        for (&(b, _), &expected) in DTYPES.iter().zip(results) {
            let y = ints_file(&dir, "b", b, &[1, 1]);
            for numpy in [true, false] {
                let spec = if numpy { "i,i->i" } else { "i;i=>i" };
                let mut args = vec![spec, path(&x), path(&y)];
                if numpy {
                    args.push("--numpy");
                }
                let value = run_on("interp", &args);
                assert_eq!(value["dtype"], expected, "{a} with {b} ({spec})");
                assert_eq!(value["values"], one_zero(expected), "{a} with {b} ({spec})");
            }
        }
    }
    // Each result dtype on the C backend too.
    for (dtype, _) in DTYPES {
        let x = ints_file(&dir, "a", dtype, &[1, 0]);
        let y = ints_file(&dir, "b", dtype, &[1, 1]);
        let value = run_on("cc", &["i,i->i", path(&x), path(&y), "--numpy"]);
        assert_eq!(value["dtype"], dtype);
        assert_eq!(value["values"], one_zero(dtype), "{dtype}");
    }
}

#[test]
fn three_dtypes_meet_as_numpy_promotes_them_all_at_once() {
    // np.einsum("i,i,i->i", *(np.ones(1, t) for t in dtypes)).dtype for each of these (numpy
    // 2.4.6), which promoting pair by pair would make wider: int8 and uint8 make int16, which with
    // float16 makes float32.
    let cases = [
        (["int8", "uint8", "float16"], "float16"),
        (["int8", "uint16", "float16"], "float32"),
        (["uint16", "int16", "float32"], "float32"),
        (["int8", "uint8", "uint16"], "int32"),
    ];
    let dir = fresh_dir("dtype-triples");
    for (dtypes, expected) in cases {
        let files: Vec<PathBuf> = (dtypes.iter().enumerate())
            .map(|(i, dtype)| ints_file(&dir, &format!("x{i}"), dtype, &[2]))
            .collect();
        let mut args = vec!["i,i,i->i"];
        args.extend(files.iter().map(|file| path(file)));
        args.push("--numpy");
        assert_eq!(run_on("interp", &args)["dtype"], expected, "{dtypes:?}");
    }
}

#[test]
fn integer_einsums_wrap_around_as_numpys() {
    let dir = fresh_dir("dtype-wrap");
    // Each: the dtype, the operands, the spec, and the value computed here in that dtype's
    // wrapping arithmetic. numpy 2.4.6 gives the same, e.g.
    // np.einsum("i,i->", np.array([2**31-1, 1], np.int32), np.array([1, 1], np.int32)) is
    // -2147483648 and the uint64 one 9223372036854775813.
    let max32 = i128::from(i32::MAX);
    let cases: Vec<(&str, Vec<Vec<i128>>, &str, Value)> = vec![
        (
            "int32",
            vec![vec![max32, 1], vec![1, 1]],
            "i,i->",
            json!([i32::MAX.wrapping_add(1)]),
        ),
        (
            "int32",
            vec![vec![1 << 20, 3], vec![1 << 20, 5], vec![1 << 10, 7]],
            "i,i,i->",
            json!([(1i32 << 20)
                .wrapping_mul(1 << 20)
                .wrapping_mul(1 << 10)
                .wrapping_add(3 * 5 * 7)]),
        ),
        (
            "int8",
            vec![vec![100, 100]],
            "i->",
            json!([100i8.wrapping_add(100)]),
        ),
        (
            "int8",
            vec![vec![100, 100], vec![3, 1]],
            "i,i->",
            json!([100i8.wrapping_mul(3).wrapping_add(100)]),
        ),
        (
            "uint8",
            vec![vec![255, 1]],
            "i->",
            json!([255u8.wrapping_add(1)]),
        ),
        (
            "int16",
            vec![vec![200, 1], vec![200, 1]],
            "i,i->",
            json!([200i16.wrapping_mul(200).wrapping_add(1)]),
        ),
        (
            "uint16",
            vec![vec![65535, 2], vec![1, 2]],
            "i,i->",
            json!([65535u16.wrapping_add(4)]),
        ),
        (
            "uint32",
            vec![vec![u32::MAX.into()], vec![2]],
            "i,i->",
            json!([u32::MAX.wrapping_mul(2)]),
        ),
        (
            "int64",
            vec![vec![1 << 62, 1 << 62], vec![2, 1]],
            "i,i->",
            json!([(1i64 << 62).wrapping_mul(2).wrapping_add(1 << 62)]),
        ),
        (
            "uint64",
            vec![vec![1 << 63, 5], vec![3, 1]],
            "i,i->",
            json!([(1u64 << 63).wrapping_mul(3).wrapping_add(5)]),
        ),
    ];
    for (dtype, operands, spec, expected) in cases {
        let files: Vec<PathBuf> = (operands.iter().enumerate())
            .map(|(i, values)| ints_file(&dir, &format!("x{i}"), dtype, values))
            .collect();
        let mut args = vec![spec, "--numpy"];
        args.extend(files.iter().map(|file| path(file)));
        let (printed, values) = dtype_and_values(&args);
        assert_eq!(
            (printed.as_str(), values),
            (dtype, expected),
            "{dtype} {spec}"
        );
    }
    // A matrix product of int32 whose two-term sums overflow, each computed here.
    let a = array_file(&dir, "a", "int32", &[1, 2], &[46341, 46341]);
    let b = array_file(&dir, "b", "int32", &[2, 1], &[46341, 46341]);
    let product = 46341i32.wrapping_mul(46341);
    let (dtype, values) = dtype_and_values(&["ij,jk->ik", path(&a), path(&b), "--numpy"]);
    assert_eq!(dtype, "int32");
    assert_eq!(values, json!([product.wrapping_add(product)]));
}

#[test]
fn integer_gradients_are_integers_of_the_dtype() {
    let dir = fresh_dir("dtype-grads");
    let a = ints_file(&dir, "a", "int32", &[2, 3]);
    let b = ints_file(&dir, "b", "int32", &[5, 7]);
    let value = run(&["i,i->", path(&a), path(&b), "--numpy", "--grads"]);
    assert_eq!(value["values"], json!([2 * 5 + 3 * 7]));
    assert_eq!(value["grads"], json!([[5, 7], [2, 3]]));
}

#[test]
fn einsums_of_bools_are_logical() {
    let dir = fresh_dir("dtype-bools");
    let a = ints_file(&dir, "a", "bool", &[1, 0, 1]);
    let b = ints_file(&dir, "b", "bool", &[1, 1, 0]);
    let zeros = ints_file(&dir, "zeros", "bool", &[0, 0, 0]);
    // np.einsum("i,i->", a, b) is True, "i,i->i" [True, False, False], "i->" of zeros False.
    let cases = [
        (vec!["i,i->", path(&a), path(&b)], json!([true])),
        (
            vec!["i,i->i", path(&a), path(&b)],
            json!([true, false, false]),
        ),
        (vec!["i->", path(&zeros)], json!([false])),
    ];
    for (mut args, expected) in cases {
        args.push("--numpy");
        assert_eq!(
            dtype_and_values(&args),
            ("bool".to_owned(), expected),
            "{args:?}"
        );
    }
    // 256 true terms: a count in a byte would wrap to 0 (false).
    let ones = ints_file(&dir, "ones", "bool", &[1; 256]);
    let (dtype, values) = dtype_and_values(&["i,i->", path(&ones), path(&ones), "--numpy"]);
    assert_eq!((dtype.as_str(), values), ("bool", json!([true])));
    let wide = array_file(&dir, "wide", "bool", &[2, 256], &[1; 512]);
    let tall = array_file(&dir, "tall", "bool", &[256, 2], &[1; 512]);
    let (_, values) = dtype_and_values(&["ij,jk->ik", path(&wide), path(&tall), "--numpy"]);
    assert_eq!(values, json!([true, true, true, true]));
    // With int8, bools are 0 and 1: np.einsum("i,i->i", [True, False], int8 [-3, 4]) is [-3, 0].
    let mask = ints_file(&dir, "mask", "bool", &[1, 0]);
    let small = ints_file(&dir, "small", "int8", &[-3, 4]);
    let (dtype, values) = dtype_and_values(&["i,i->i", path(&mask), path(&small), "--numpy"]);
    assert_eq!((dtype.as_str(), values), ("int8", json!([-3, 0])));
    // Bools have no gradients.
    let error = run_error(&["i,i->", path(&a), path(&b), "--numpy", "--grads"]);
    assert_eq!(error["kind"], "dtype", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("--grads"),
        "{error}"
    );
}

#[test]
fn float32_is_computed_in_float32() {
    let dir = fresh_dir("dtype-f32");
    let tiny = 2f32.powi(-24);
    // 1 + 2^-24 is a tie in f32, rounded to 1; f64 keeps it.
    let in_f32 = f64::from(1f32 + tiny);
    assert_ne!(in_f32, 1.0 + f64::from(tiny), "the sum tells f32 from f64");
    let sum = f32_file(&dir, "sum", &[1.0, tiny]);
    assert_eq!(
        dtype_and_values(&["i->", path(&sum), "--numpy"]),
        ("float32".to_owned(), json!([in_f32]))
    );
    // A product rounded to f32.
    let x = 1f32 + 2f32.powi(-12);
    let factor = f32_file(&dir, "factor", &[x]);
    let (_, values) = dtype_and_values(&["i,i->i", path(&factor), path(&factor), "--numpy"]);
    assert_eq!(values, json!([f64::from(x * x)]));
    assert_ne!(f64::from(x * x), f64::from(x) * f64::from(x));
    // A matrix product: each cell a sum of two products, computed here in f32.
    let a = [1f32, tiny, 3.0, 0.1];
    let b = [1f32, 0.3, 1.0, 7.0];
    let write = |name: &str, values: &[f32; 4]| {
        let path = dir.join(format!("{name}.npy"));
        let data: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(&path, npy_bytes("<f4", &[2, 2], &data)).expect("written");
        path
    };
    let (fa, fb) = (write("ma", &a), write("mb", &b));
    let expected: Vec<f64> = (0..2)
        .flat_map(|i| (0..2).map(move |k| (i, k)))
        .map(|(i, k)| f64::from(a[2 * i] * b[k] + a[2 * i + 1] * b[2 + k]))
        .collect();
    let (dtype, values) = dtype_and_values(&["ij,jk->ik", path(&fa), path(&fb), "--numpy"]);
    assert_eq!((dtype.as_str(), values), ("float32", json!(expected)));
}

#[test]
fn float16_rounds_to_float16() {
    let dir = fresh_dir("dtype-f16");
    // 2048 + 1 lies halfway between float16's 2048 and 2050: it rounds to even, 2048.
    // np.einsum("i->", np.array([2048, 1], np.float16)) is 2048.0 too.
    let file = ints_file(&dir, "x", "float16", &[2048, 1]);
    let expected = f16::from_f64(2049.0).to_f64();
    assert_eq!(expected, 2048.0);
    assert_eq!(
        dtype_and_values(&["i->", path(&file), "--numpy"]),
        ("float16".to_owned(), json!([expected]))
    );
    // Sums are computed in float32 and rounded to float16 once, as numpy's einsum sums into one
    // cell and as its matrix products do: np.einsum("i->", np.ones(4096, np.float16)) and
    // (a @ a.T)[0, 0] for a = np.ones((64, 4096), np.float16) are 4096.0. Rounding every
    // partial sum to float16 would stop at 2048 (2048 + 1 rounds back to 2048).
    let ones = ints_file(&dir, "ones", "float16", &[1; 4096]);
    let sequential = (0..4096).fold(f16::ZERO, |sum, _| sum + f16::ONE).to_f64();
    assert_eq!(sequential, 2048.0);
    for backend in ["interp", "cc"] {
        let value = run_on(backend, &["i->", path(&ones), "--numpy"]);
        assert_eq!(
            (value["dtype"].as_str(), &value["values"]),
            (Some("float16"), &json!([4096.0])),
            "{backend}"
        );
    }
    // A matrix product large enough for the C backend's product kernels gives the same.
    let rows = array_file(&dir, "rows", "float16", &[64, 4096], &vec![1; 64 * 4096]);
    for backend in ["interp", "cc"] {
        let value = run_on(backend, &["ij,kj->ik", path(&rows), path(&rows), "--numpy"]);
        assert_eq!(value["values"], json!(vec![4096.0; 64 * 64]), "{backend}");
    }
    // Each product rounds once, at the end: 0.1 · 0.1 in float16 operands is their product
    // in float32 rounded to float16, not the float16 product of float16 roundings of each
    // step.
    let tenth = f16::from_f64(0.1);
    let tenths = f16_file(&dir, "tenths", &[tenth; 3]);
    let term = tenth.to_f32() * tenth.to_f32();
    let expected = f16::from_f32(term + term + term).to_f64();
    assert_eq!(
        dtype_and_values(&["i,i->", path(&tenths), path(&tenths), "--numpy"]),
        ("float16".to_owned(), json!([expected]))
    );
}

#[test]
fn literal_inputs_are_float64_and_mix_as_numpy_mixes() {
    let dir = fresh_dir("dtype-literals");
    for input in ["range:3", "fill:2:3", "values:1,2,3:3"] {
        assert_eq!(run_on("interp", &["i=>i", input])["dtype"], "float64");
    }
    // float32 with float64 is float64 (np.result_type(np.float32, np.float64)).
    let x = f32_file(&dir, "x", &[0.1, 1.0, 2.0]);
    let value = run_on("interp", &["i;i=>i", path(&x), "fill:1:3"]);
    assert_eq!(value["dtype"], "float64");
    assert_eq!(value["values"], json!([f64::from(0.1f32), 1.0, 2.0]));
    // int8 with int32 is int32.
    let a = ints_file(&dir, "a", "int8", &[-2, 3]);
    let b = ints_file(&dir, "b", "int32", &[5, 7]);
    let (dtype, values) = dtype_and_values(&["i;i=>i", path(&a), path(&b)]);
    assert_eq!((dtype.as_str(), values), ("int32", json!([-10, 21])));
}

#[test]
fn dtype_flag_casts_the_inputs_and_computes_in_it() {
    let dir = fresh_dir("dtype-flag");
    // Floats into integers truncate (np.array([1.7, -1.7]).astype(np.int32) is [1, -1]), and
    // saturate beyond the range, where numpy leaves the result undefined.
    let (dtype, values) = dtype_and_values(&["i=>i", "values:1.7,-1.7,3e10:3", "--dtype", "int32"]);
    assert_eq!(
        (dtype.as_str(), values),
        ("int32", json!([1, -1, i32::MAX]))
    );
    // Integers into narrower ones wrap: np.array([300, -1], np.int32).astype(np.int8).
    let wide = ints_file(&dir, "wide", "int32", &[300, -1]);
    let (dtype, values) = dtype_and_values(&["i=>i", path(&wide), "--dtype", "int8"]);
    assert_eq!(
        (dtype.as_str(), values),
        ("int8", json!([300i32 as i8, -1]))
    );
    // float64 literals computed in float32.
    let tiny = f64::from(2f32.powi(-24));
    let sum = format!("values:1,{tiny}:2");
    let (dtype, values) = dtype_and_values(&["i=>", &sum, "--dtype", "float32"]);
    assert_eq!((dtype.as_str(), values), ("float32", json!([1.0])));
    let (_, values) = dtype_and_values(&["i=>", &sum]);
    assert_eq!(values, json!([1.0 + tiny]));
    // An int32 sum that overflows computed in float64 instead does not wrap.
    let big = ints_file(&dir, "big", "int32", &[i32::MAX.into(), 1]);
    let (dtype, values) = dtype_and_values(&["i->", path(&big), "--numpy", "--dtype", "float64"]);
    assert_eq!((dtype.as_str(), values), ("float64", json!([2147483648.0])));
    // To bool: nonzero is true.
    let (dtype, values) = dtype_and_values(&["i=>i", "values:0.5,0,-2:3", "--dtype", "bool"]);
    assert_eq!(
        (dtype.as_str(), values),
        ("bool", json!([true, false, true]))
    );
    // A dtype numpy has and we do not is a usage error.
    let error = run_error(&["i=>i", "range:3", "--dtype", "float128"]);
    assert_eq!(error["kind"], "usage", "{error}");
}

#[test]
fn where_takes_its_dtype_from_the_values_it_chooses_between() {
    let dir = fresh_dir("dtype-where");
    let yes = ints_file(&dir, "yes", "int32", &[1, 2, 3]);
    let no = ints_file(&dir, "no", "int32", &[-1, -2, -3]);
    // A float condition: 0.5 is nonzero, also when the values are cast to int8.
    let condition = "values:0.5,0,-0.25:3";
    for flags in [&[][..], &["--dtype", "int8"]] {
        let mut args = vec!["-", condition, path(&yes), path(&no), "--op", "where"];
        args.extend(flags);
        let (dtype, values) = dtype_and_values(&args);
        let expected = if flags.is_empty() { "int32" } else { "int8" };
        assert_eq!((dtype.as_str(), values), (expected, json!([1, -2, 3])));
    }
}

#[test]
fn maxima_of_uint64_read_values_as_unsigned() {
    let dir = fresh_dir("dtype-uint64-max");
    let big = ints_file(&dir, "big", "uint64", &[1 << 63, 1]);
    for backend in ["interp", "cc"] {
        let value = run_on(backend, &["i=>", path(&big), "--op", "einmax"]);
        assert_eq!(value["values"], json!([1u64 << 63]), "{backend}");
        // Max-plus: 2^63 + 2^63 wraps to 0, below 1 + 1.
        let value = run_on(
            backend,
            &["i;i=>", path(&big), path(&big), "--op", "tropical"],
        );
        assert_eq!(value["values"], json!([2]), "{backend}");
        let pointwise = |op: &str| run_on(backend, &["-", path(&big), path(&big), "--op", op]);
        assert_eq!(
            pointwise("max")["values"],
            json!([1u64 << 63, 1]),
            "{backend}"
        );
        assert_eq!(pointwise("lt")["values"], json!([0, 0]), "{backend}");
        let relu = run_on(backend, &["-", path(&big), "--op", "relu"]);
        assert_eq!(relu["values"], json!([1u64 << 63, 1]), "{backend}");
    }
}

#[test]
fn operations_a_dtype_cannot_mean_are_refused() {
    let dir = fresh_dir("dtype-refusals");
    let ints = ints_file(&dir, "ints", "int32", &[4, 9]);
    for (args, dtype) in [
        (vec!["-", path(&ints), "--op", "sqrt"], "int32"),
        (vec!["-", path(&ints), path(&ints), "--op", "div"], "int32"),
        (
            vec!["-", "range:2", "--op", "neg", "--dtype", "bool"],
            "bool",
        ),
        (
            vec!["-", "range:2", "range:2", "--op", "sub", "--dtype", "bool"],
            "bool",
        ),
    ] {
        let error = run_error(&args);
        assert_eq!(error["kind"], "dtype", "{args:?}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(dtype) && message.contains("--op"),
            "{message}"
        );
    }
    // The same operations in a dtype that means them.
    let value = run_on(
        "interp",
        &["-", path(&ints), "--op", "sqrt", "--dtype", "float64"],
    );
    assert_eq!(value["values"], json!([2.0, 3.0]));
}

/// The header text and data of a `.npy` file, read by hand.
fn read_npy(path: &Path) -> (String, Vec<u8>) {
    let bytes = std::fs::read(path).expect("the output file is there");
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let length = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = String::from_utf8(bytes[10..10 + length].to_vec()).expect("an ASCII header");
    (header, bytes[10 + length..].to_vec())
}

#[test]
fn output_files_are_written_in_the_dtype() {
    let dir = fresh_dir("dtype-output");
    for (dtype, descr) in DTYPES {
        let a = ints_file(&dir, "a", dtype, &[3, 0]);
        let b = ints_file(&dir, "b", dtype, &[2, 5]);
        let out = dir.join(format!("{dtype}-out.npy"));
        for backend in BACKENDS {
            let args = ["i,i->i", path(&a), path(&b), "--numpy", "-o", path(&out)];
            let value = run_on(backend, &args);
            assert_eq!(value["dtype"], dtype);
            let (header, data) = read_npy(&out);
            assert_eq!(
                header.trim_end(),
                format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}"),
                "{dtype} on {backend}"
            );
            assert_eq!(data, int_data(dtype, &[6, 0]), "{dtype} on {backend}");
        }
    }
}

#[test]
fn text_output_names_the_dtype() {
    let dir = fresh_dir("dtype-text");
    let a = ints_file(&dir, "a", "uint8", &[200, 100]);
    let output = rcannl(&["einsum", "i->", path(&a), "--numpy", "--backend", "interp"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("dtype:  uint8\n"), "{text}");
    assert!(text.contains("values: [44]\n"), "{text}");
}

#[test]
fn explain_shows_the_loops_in_the_dtypes_precision() {
    let output = rcannl(&[
        "explain",
        "ij;jk=>ik",
        "range:2,3",
        "range:3,2",
        "--dtype",
        "float32",
        "--backend",
        "interp",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("f32"), "{text}");
    assert!(!text.contains("f64"), "{text}");
}
