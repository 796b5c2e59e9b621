//! Running the built `rcannl` binary and reading what it wrote, for every end-to-end test.

#![allow(dead_code)] // Each test file uses its own part.

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
