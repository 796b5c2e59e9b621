//! End-to-end tests of hostile command lines and files: each gives a clear error naming what is
//! wrong (exit status 1) or the right answer; never a panic, an abort, unbounded memory or a
//! wrapped number in a message.

use crate::common::{exited_cleanly, fresh_dir, rcannl, rcannl_os, stderr, stdout};

use std::ffi::OsStr;
use std::path::Path;

use serde_json::{Value, json};

/// Runs the binary, expects exit status 1 and one line of JSON with an error, and returns it.
fn json_error(args: &[&str]) -> Value {
    let output = rcannl(args);
    json_error_of(args, &output)
}

fn json_error_of(args: &(impl std::fmt::Debug + ?Sized), output: &std::process::Output) -> Value {
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?}: {}{}",
        stdout(output),
        stderr(output)
    );
    assert!(output.stderr.is_empty(), "{args:?}: {}", stderr(output));
    let text = stdout(output);
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    serde_json::from_str(&text).expect("stdout is one JSON value")
}

fn message(error: &Value) -> &str {
    error["error"]["message"].as_str().unwrap_or_default()
}

#[cfg(unix)]
fn bytes(text: &[u8]) -> &OsStr {
    std::os::unix::ffi::OsStrExt::from_bytes(text)
}

#[cfg(unix)]
#[test]
fn arguments_that_are_not_utf8_are_usage_errors() {
    let cases: [&[&[u8]]; 6] = [
        &[b"parse", b"ij\xff"],
        &[b"parse", b"--json", b"ij\xff"],
        &[b"einsum", b"i\xff=>i", b"range:3"],
        &[b"einsum", b"i=>i", b"range:\xff3", b"--json"],
        &[b"explain", b"i=>i", b"range:3", b"--set", b"k=\xff"],
        &[
            b"einsum",
            b"i=>i",
            b"range:3",
            b"--capture",
            b"\xff",
            b"--json",
        ],
    ];
    for args in cases {
        let os: Vec<&OsStr> = args.iter().map(|arg| bytes(arg)).collect();
        let position = args
            .iter()
            .position(|arg| std::str::from_utf8(arg).is_err())
            .expect("one argument is not UTF-8");
        let shown = format!("{:?}", bytes(args[position]));
        let output = rcannl_os(&os);
        let message = if args.contains(&b"--json".as_slice()) {
            let error = json_error_of(&os, &output);
            assert_eq!(error["error"]["kind"], "usage", "{error}");
            message(&error).to_owned()
        } else {
            assert_eq!(output.status.code(), Some(1), "{os:?}: {output:?}");
            assert!(output.stdout.is_empty());
            stderr(&output)
                .strip_prefix("error: ")
                .expect("an error line")
                .to_owned()
        };
        assert!(
            message.starts_with(&format!(
                "argument {} {shown} is not valid UTF-8",
                position + 1
            )),
            "{os:?}: {message}"
        );
    }
}

/// Writes `header` (a Python dict literal) as a version 1.0 `.npy` header, then `data`.
fn npy_v1(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.as_bytes().to_vec();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend(
        u16::try_from(text.len())
            .expect("a short header")
            .to_le_bytes(),
    );
    file.extend(text);
    file.extend(data);
    file
}

/// Runs `rcannl einsum SPEC FILE --json --backend interp` on `contents` written to a file.
fn einsum_on_file(dir: &Path, name: &str, spec: &str, contents: &[u8]) -> (String, Value) {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("the test file is written");
    let path = path.to_str().expect("a UTF-8 test path").to_owned();
    let output = rcannl(&["einsum", spec, &path, "--json", "--backend", "interp"]);
    assert!(exited_cleanly(&output), "{name}: {output:?}");
    let value = serde_json::from_str(&stdout(&output)).expect("stdout is one JSON value");
    (path, value)
}

/// The error of reading `contents` as an input: its message starts with the file's path.
fn npy_error(dir: &Path, name: &str, contents: &[u8]) -> String {
    let (path, value) = einsum_on_file(dir, name, "...=>...", contents);
    assert_eq!(value["error"]["kind"], "io", "{name}: {value}");
    let message = message(&value);
    assert!(
        message.starts_with(&format!("{path}: ")),
        "{name}: {message}"
    );
    message[path.len() + 2..].to_owned()
}

#[test]
fn hostile_npy_headers_are_errors_naming_the_file() {
    let dir = fresh_dir("hostile-npy");
    // Dims whose product overflows 64 bits, in Fortran order.
    let overflow = npy_error(
        &dir,
        "fortran.npy",
        &npy_v1(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (4294967296, 4294967296, 2), }",
            &[0; 64],
        ),
    );
    assert!(
        overflow.contains("(4294967296, 4294967296, 2)") && overflow.contains("67108864 cells"),
        "{overflow}"
    );
    // An empty array whose other axes would still overflow.
    let empty = npy_error(
        &dir,
        "empty.npy",
        &npy_v1(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1000000000000000000, 1000000000000), }",
            &[],
        ),
    );
    assert!(empty.contains("67108864 cells"), "{empty}");
    // 15 bytes claiming a 4 GB header.
    let mut short = b"\x93NUMPY\x02\x00".to_vec();
    short.extend(u32::MAX.to_le_bytes());
    short.extend(b"{abc");
    assert_eq!(short.len(), 16);
    short.pop();
    let claimed = npy_error(&dir, "claims-4gb.npy", &short);
    assert!(claimed.contains("4294967295"), "{claimed}");
    // A header promising 2^26 doubles before 8 bytes of data.
    let promised = npy_error(
        &dir,
        "promises.npy",
        &npy_v1(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (67108864,), }",
            &[0; 8],
        ),
    );
    assert!(
        promised.contains("536870912 bytes") && promised.contains("8"),
        "{promised}"
    );
    // Deeply nested brackets, an unsupported dtype, a structured dtype, a bad magic string,
    // a truncated file, a missing key and data left over after the array.
    let nested = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': {}{}, }}",
        "(".repeat(30_000),
        ")".repeat(30_000)
    );
    let mut nested_file = b"\x93NUMPY\x02\x00".to_vec();
    nested_file.extend(u32::try_from(nested.len() + 1).unwrap().to_le_bytes());
    nested_file.extend(nested.as_bytes());
    nested_file.push(b'\n');
    npy_error(&dir, "nested.npy", &nested_file);
    let complex = npy_error(
        &dir,
        "complex.npy",
        &npy_v1(
            "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }",
            &[0; 16],
        ),
    );
    assert!(complex.contains("'<c16'"), "{complex}");
    npy_error(
        &dir,
        "structured.npy",
        &npy_v1(
            "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }",
            &[0; 8],
        ),
    );
    npy_error(&dir, "magic.npy", b"\x93NUMPZ\x01\x00\x00\x00");
    npy_error(&dir, "truncated.npy", b"\x93NUM");
    npy_error(
        &dir,
        "no-order.npy",
        &npy_v1("{'descr': '<f8', 'shape': (1,), }", &[0; 8]),
    );
    npy_error(
        &dir,
        "left-over.npy",
        &npy_v1(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
            &[0; 16],
        ),
    );
    std::fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn npy_byte_orders_dtypes_and_fortran_order_are_read_exactly() {
    let dir = fresh_dir("npy-forms");
    let values = |name: &str, header: &str, data: &[u8]| {
        let (_, value) = einsum_on_file(&dir, name, "...=>...", &npy_v1(header, data));
        assert!(value.get("error").is_none(), "{name}: {value}");
        (
            value["shape"]["output"].clone(),
            value["dtype"].clone(),
            value["values"].clone(),
        )
    };
    let big_endian: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    assert_eq!(
        values(
            "big.npy",
            "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }",
            &big_endian
        ),
        (json!([2]), json!("float64"), json!([1.5, -2.0]))
    );
    // [[0, 1, 2], [3, 4, 5]] stored column by column, as 16-bit integers.
    let column_major: Vec<u8> = [0i16, 3, 1, 4, 2, 5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(
        values(
            "fortran.npy",
            "{'shape': (2, 3), 'fortran_order': True, 'descr': '<i2'}",
            &column_major
        ),
        (json!([2, 3]), json!("int16"), json!([0, 1, 2, 3, 4, 5]))
    );
    assert_eq!(
        values(
            "bools.npy",
            "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
            &[1, 0, 1]
        ),
        (json!([3]), json!("bool"), json!([true, false, true]))
    );
    assert_eq!(
        values(
            "scalar.npy",
            "{'descr': '<u4', 'fortran_order': False, 'shape': (), }",
            &7u32.to_le_bytes()
        ),
        (json!([]), json!("uint32"), json!([7]))
    );
    std::fs::remove_dir_all(&dir).expect("the test folder is removed");
}

#[test]
fn huge_input_shapes_are_errors_naming_the_input() {
    for (input, message) in [
        (
            "fill:1:1000000,1000000",
            "input 2: shape 1000000,1000000 has more than 67108864 cells",
        ),
        (
            "range:0,1000000000000000000",
            "input 2: shape 0,1000000000000000000 is empty, but its other axes span more than \
             67108864 cells",
        ),
        (
            "values::0,100000,100000",
            "input 2: shape 0,100000,100000 is empty, but its other axes span more than 67108864 \
             cells",
        ),
    ] {
        let error = json_error(&["einsum", "...;...=>...", "range:2", input, "--json"]);
        assert_eq!(
            error,
            json!({"error": {"kind": "input", "message": message}}),
            "{input}"
        );
    }
}

#[test]
fn results_that_closing_makes_huge_are_refused_before_allocation() {
    // A fixed index of the result is an axis of at least index + 1 positions, known only once
    // inference closes the shape: 10^10 cells, or 2 · 2^32 + 2.
    for (args, least) in [
        (
            ["i;j=>i,j,0", "range:100000", "range:100000"],
            "100000,100000,1",
        ),
        (
            ["i;j=>i,j,65536", "range:1000", "range:1000"],
            "1000,1000,65537",
        ),
        (["i=>i,4294967296", "range:2", "range:2"], "2,4294967297"),
    ] {
        let mut all = vec!["einsum"];
        all.extend(if args[0].contains(';') {
            &args[..]
        } else {
            &args[..2]
        });
        all.push("--json");
        let error = json_error(&all);
        assert_eq!(
            error,
            json!({"error": {
                "kind": "shape",
                "message": format!("the result would be at least {least}: more than 67108864 cells"),
            }}),
            "{args:?}"
        );
    }
}

#[test]
fn a_contraction_path_keeps_intermediates_within_the_cell_limit() {
    // The ten edges of a complete graph on five labels of size 100: whatever the order, some
    // intermediate has four labels, 10^8 cells.
    let mut args = vec!["einsum", "ab;ac;ad;ae;bc;bd;be;cd;ce;de=>", "--json"];
    args.extend(["range:100,100"; 10]);
    let error = json_error(&args);
    assert_eq!(error["error"]["kind"], "shape", "{error}");
    assert!(
        message(&error).contains("more than 67108864 cells"),
        "{error}"
    );
}

#[test]
fn numeric_flags_refuse_values_that_are_not_numbers_in_range() {
    for value in ["nan", "NaN", "inf", "-inf", "-1", "1e300", "67108865", "x"] {
        let flag = format!("--memory-limit={value}");
        let error = json_error(&["einsum", "i;i=>i", "range:3", "range:3", &flag, "--json"]);
        assert_eq!(error["error"]["kind"], "usage", "{value}: {error}");
        assert!(
            message(&error).contains("--memory-limit") && message(&error).contains(value),
            "{value}: {error}"
        );
    }
    let error = json_error(&[
        "einsum",
        "i=>i",
        "range:3",
        "--time",
        "4294967295",
        "--json",
    ]);
    assert_eq!(error["error"]["kind"], "usage", "{error}");
    assert!(
        message(&error).contains("--time") && message(&error).contains("1000000"),
        "{error}"
    );
    // A window near usize::MAX once overflowed the padded buffer's size.
    let error = json_error(&[
        "einsum",
        "2*o=+k=>o",
        "range:8",
        "--op",
        "einmax",
        "--set",
        "k=18446744073709551615",
        "--json",
    ]);
    assert_eq!(
        error,
        json!({"error": {
            "kind": "capture",
            "message": "--set \"k=18446744073709551615\": a size beyond 67108864, the most \
                        cells a tensor may have",
        }})
    );
    for set in ["k=-1", "k=nan", "k=1e3", "k=18446744073709551616"] {
        let error = json_error(&[
            "einsum",
            "2*o<+k=>o",
            "range:8",
            "--op",
            "einmax",
            "--set",
            set,
            "--json",
        ]);
        assert_eq!(error["error"]["kind"], "capture", "{set}: {error}");
    }
}

#[test]
fn a_capture_named_twice_is_refused() {
    assert_eq!(
        json_error(&[
            "einsum",
            "ij=>ji",
            "range:2,3",
            "--capture",
            "i,j,i",
            "--json"
        ]),
        json!({"error": {"kind": "capture", "message": "--capture names i twice"}})
    );
}

#[test]
fn integers_beyond_the_largest_are_parse_errors_at_their_column() {
    let largest = rcannl_shape::spec::MAX_INTEGER;
    let error = json_error(&[
        "einsum",
        "o<+18446744073709551615+k;k=>o",
        "range:5",
        "range:2",
        "--json",
    ]);
    assert_eq!(error["error"]["kind"], "parse", "{error}");
    assert!(
        message(&error).starts_with(&format!(
            "column 4: integer 18446744073709551615 is too large (at most {largest})"
        )),
        "{error}"
    );
    let beyond = largest + 1;
    for spec in [
        format!("i, {beyond}"),
        format!("{beyond}*i"),
        format!("i^{beyond}"),
    ] {
        let output = rcannl(&["parse", &spec, "--json"]);
        let error = json_error_of(&spec, &output);
        assert!(
            message(&error).contains(&format!("integer {beyond} is too large")),
            "{error}"
        );
    }
    let fixed = rcannl(&["parse", &format!("i, {largest}"), "--json"]);
    assert!(fixed.status.success(), "{}", stdout(&fixed));
    // The largest offset reads out of bounds, and both backends say where, unwrapped: o < 4
    // and k < 2 reach offset + 4.
    let spec = format!("o<+{largest}+k;k=>o");
    let reached = |backend: &str| {
        message(&json_error(&[
            "einsum",
            &spec,
            "range:5",
            "range:2",
            "--backend",
            backend,
            "--json",
        ]))
        .to_owned()
    };
    let compiled = reached("cc");
    assert!(
        compiled.ends_with(&format!(
            "addressed at {largest}..={} on axis 0, outside its buffer of 5",
            largest + 4
        )),
        "{compiled}"
    );
    let interpreted = reached("interp");
    assert!(
        interpreted.ends_with(&format!(
            "position {largest} on axis 0 is outside its buffer of 5"
        )),
        "{interpreted}"
    );
}

#[test]
fn parse_output_grows_linearly() {
    // A concatenation of n sizes and, beside it, n labels: each line stays short.
    let spec = |n: usize| {
        let sizes = vec!["1"; n].join("^");
        let labels: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        format!("{sizes}, {}", labels.join(", "))
    };
    let size = |n: usize| {
        let output = rcannl(&["parse", &spec(n)]);
        assert!(output.status.success(), "{}", stderr(&output));
        output.stdout.len()
    };
    let (small, large) = (size(1_000), size(8_000));
    assert!(
        large < 10 * small,
        "8 times the components, {} times the output",
        large / small
    );
}

#[test]
fn buffers_whose_margins_make_them_huge_are_errors_naming_the_tensor() {
    for args in [
        &[
            "einsum",
            "2*o=+4611686018427387903*k=>o",
            "range:8",
            "--op",
            "einmax",
            "--set",
            "k=3",
            "--json",
        ][..],
        &[
            "einsum",
            "2*o=+67108864*k,2*p=+67108864*q=>o,p",
            "range:8,8",
            "--op",
            "einmax",
            "--set",
            "k=3",
            "--set",
            "q=3",
            "--json",
        ],
    ] {
        let error = json_error(args);
        assert!(message(&error).contains("tensor 'x1'"), "{error}");
    }
}

#[test]
fn a_product_into_a_concatenation_is_refused() {
    let error = json_error(&[
        "einsum",
        "a;b=>a^b",
        "values:1,2:2",
        "values:10,20,30:3",
        "--json",
    ]);
    assert!(message(&error).contains("operand 2 is not read"), "{error}");
}

#[test]
fn maxima_over_nan_are_nan_on_both_backends() {
    for backend in ["interp", "cc"] {
        let output = rcannl(&[
            "einsum",
            "i=>",
            "values:1,nan,3:3",
            "--op",
            "einmax",
            "--backend",
            backend,
            "--json",
        ]);
        assert!(exited_cleanly(&output), "{}", stderr(&output));
        // JSON has no NaN: the report writes it as null.
        let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert_eq!(result["values"], json!([null]), "{backend}: {result}");
    }
}

#[test]
fn inputs_of_more_than_64_axes_are_refused_quickly() {
    let dir = fresh_dir("many-axes");
    let started = std::time::Instant::now();
    // 50,000 unit dims: a header too long for version 1.0's 16-bit length.
    let mut text = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}",
        "1, ".repeat(50_000)
    )
    .into_bytes();
    while !(12 + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut file = b"\x93NUMPY\x02\x00".to_vec();
    file.extend(u32::try_from(text.len()).unwrap().to_le_bytes());
    file.extend(text);
    file.extend(1.5f64.to_le_bytes());
    let refused = npy_error(&dir, "unit-dims.npy", &file);
    assert!(
        refused.contains("more than 64 dims") && refused.len() < 200,
        "{}",
        &refused[..refused.len().min(200)]
    );
    // The same axes written as a shape, and 65 of them.
    for count in [50_000, 65] {
        let units = vec!["1"; count].join(",");
        for input in [
            format!("range:{units}"),
            format!("fill:2:{units}"),
            format!("values:1:{units}"),
        ] {
            let error = json_error(&["einsum", "...=>", &input, "--json"]);
            assert_eq!(error["error"]["kind"], "input", "{count}: {error}");
            let message = message(&error);
            assert_eq!(
                message,
                format!("input 1: its shape has {count} axes, more than the 64 supported"),
            );
        }
    }
    // 64 are accepted.
    let units = vec!["1"; 64].join(",");
    let output = rcannl(&["einsum", "...=>", &format!("fill:2:{units}"), "--json"]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    std::fs::remove_dir_all(&dir).unwrap();
}
