//! Writing results and errors: text to a stream without panicking on a closed pipe, one line of
//! JSON, aligned `name: text` lines, and the errors of the run commands (`einsum`, `explain`).
//!
//! An error has a kind for scripts and a message for people. It prints as `error: MESSAGE` on
//! stderr, or with `--json` as `{"error":{"kind":KIND,"message":MESSAGE}}` on stdout; either way
//! the exit status is 1. The kinds:
//!
//! - `parse`: the spec or a shape literal does not parse (the message has the caret line);
//! - `input`: an INPUT argument of no known form, or whose values do not fill its shape;
//! - `io`: a file could not be read or written, or is not a `.npy` array of numbers;
//! - `arity`: the number of inputs does not match the spec or the operation;
//! - `capture`: `--capture` or `--set` names nothing in the spec, or `--set` is malformed;
//! - `dtype`: the operation cannot compute in the dtype asked for or inferred (maxima in uint64,
//!   gradients of bools, bools that could count beyond float64);
//! - `shape`: shape inference failed (the message names the operation, tensors and shapes), or the
//!   result would be too large;
//! - `run`: compiling or running the routine failed;
//! - `usage`: the command line itself is wrong (an unknown flag or value, a missing argument):
//!   the message is the argument parser's, with the usage line.

use std::io::{self, Write};
use std::process::ExitCode;

use serde::Serialize;

/// What kind of thing went wrong (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    Parse,
    Input,
    Io,
    Arity,
    Capture,
    Dtype,
    Shape,
    Run,
    Usage,
}

/// An error of a run command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliError {
    pub kind: ErrorKind,
    pub message: String,
}

impl CliError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CliError {
        CliError {
            kind,
            message: message.into(),
        }
    }

    /// Prints the error (on stdout as JSON, else on stderr) and returns exit status 1.
    pub fn report(&self, json: bool) -> ExitCode {
        #[derive(Serialize)]
        struct Wrapped<'a> {
            error: &'a CliError,
        }
        if json {
            print_json(&Wrapped { error: self });
        } else {
            write_out(io::stderr(), &format!("error: {}\n", self.message));
        }
        ExitCode::from(1)
    }
}

/// Prints `value` as one line of JSON on stdout; the exit status says whether it was written.
pub fn print_json(value: &impl Serialize) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(line) => write_out(io::stdout(), &format!("{line}\n")),
        Err(err) => {
            write_out(
                io::stderr(),
                &format!("error: could not write JSON: {err}\n"),
            );
            ExitCode::from(1)
        }
    }
}

/// `name: text` lines, the texts aligned in one column.
pub fn aligned(lines: &[(String, String)]) -> String {
    let width = lines
        .iter()
        .map(|(name, _)| name.len() + 1)
        .max()
        .unwrap_or(0);
    lines
        .iter()
        .map(|(name, text)| format!("{:<width$} {text}\n", format!("{name}:")))
        .collect()
}

/// Writes `text` to `sink`. A closed pipe (`rcannl … | head -1`) is not worth a panic or a
/// message: the exit code says whether everything was written.
pub fn write_out(mut sink: impl Write, text: &str) -> ExitCode {
    match sink.write_all(text.as_bytes()).and_then(|()| sink.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}
