//! Running the built `rcannl` binary and reading what it wrote, for every end-to-end test.

use std::process::{Command, Output};

pub fn rcannl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .output()
        .expect("the rcannl binary runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// Runs the binary on arguments that need not be UTF-8.
pub fn rcannl_os(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rcannl"))
        .args(args)
        .output()
        .expect("the rcannl binary runs")
}

/// A fresh, empty folder for one test's files (removed first if an earlier run left it).
pub fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rcannl-cli-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old test folder is removed");
    }
    std::fs::create_dir_all(&dir).expect("the test folder is created");
    dir
}

/// Whether the process ended by itself with a status (no signal) other than a panic's 101.
pub fn exited_cleanly(output: &Output) -> bool {
    matches!(output.status.code(), Some(0 | 1))
}

/// Runs `rcannl einsum ARGS --json --backend BACKEND`, expects success and one line of JSON.
pub fn run_on(backend: &str, args: &[&str]) -> serde_json::Value {
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
pub fn run(args: &[&str]) -> serde_json::Value {
    let interpreted = run_on("interp", args);
    let compiled = run_on("cc", args);
    assert_eq!(interpreted, compiled, "{args:?}: the backends disagree");
    compiled
}

/// Runs `rcannl einsum ARGS --json`, expects exit status 1, nothing on stderr and one line of
/// JSON: the error object.
pub fn run_error(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["einsum"];
    all.extend(args);
    all.push("--json");
    let output = rcannl(&all);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?}: {}",
        stdout(&output)
    );
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 1, "one line of JSON: {text}");
    serde_json::from_str(&text).expect("stdout is one JSON value")
}

/// The JSON shape of a result with only output axes.
pub fn output_shape(dims: &[usize]) -> serde_json::Value {
    serde_json::json!({"batch": [], "input": [], "output": dims})
}

/// 0, 1, …, n − 1: the cells of `range:n`.
pub fn range(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}
