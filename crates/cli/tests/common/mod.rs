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
