//! Judging a run: how it ended (status 0 or 1 by itself, never a panic, a signal or a hang),
//! and, where the case knows the answer, whether a success printed it.

use std::ffi::OsString;
use std::io::BufReader;
use std::path::Path;

use serde_json::Value;

use super::cases::{Answer, Case, Expect};
use super::run::{Ended, Outcome};

/// The judgement of one run.
pub enum Verdict {
    /// Status 0, with `verified` when the answer was checked.
    Succeeded {
        verified: bool,
    },
    /// Status 1.
    Failed,
    /// A valid problem was refused (status 1 where the case must succeed).
    Refused(String),
    Panicked(String),
    /// Ended by a signal.
    Aborted(i32),
    Hung,
    /// A status other than 0, 1 or a panic's 101.
    OddStatus(i32),
    /// A success with a wrong answer, or a success where the case must fail.
    Wrong(String),
}

/// Judges `outcome` against `case`; `rerun` runs another command (to read a canonical form back).
pub fn judge(case: &Case, outcome: &Outcome, rerun: &dyn Fn(Vec<OsString>) -> Outcome) -> Verdict {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let code = match outcome.ended {
        Ended::TimedOut => return Verdict::Hung,
        Ended::Signal(signal) => return Verdict::Aborted(signal),
        Ended::Code(code) => code,
    };
    if code == 101 || stderr.contains("panicked") {
        return Verdict::Panicked(stderr.lines().take(3).collect::<Vec<_>>().join(" / "));
    }
    if code != 0 && code != 1 {
        return Verdict::OddStatus(code);
    }
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    if code == 1 {
        let error = if stderr.is_empty() { &stdout } else { &stderr };
        return match &case.expect {
            Expect::Answer(answer) if answer.must_succeed => {
                Verdict::Refused(error.trim().to_owned())
            }
            Expect::Explanation => Verdict::Refused(error.trim().to_owned()),
            _ => Verdict::Failed,
        };
    }
    let checked = match &case.expect {
        Expect::Anything => return Verdict::Succeeded { verified: false },
        Expect::Failure(why) => Err(format!("succeeded, but {why} must be refused")),
        Expect::Answer(answer) => check_answer(answer, &stdout),
        Expect::HumanAnswer => {
            if stdout.starts_with("shape:") {
                Ok(())
            } else {
                Err(format!(
                    "the human form does not start with the shape: {stdout}"
                ))
            }
        }
        Expect::Canonical => check_canonical(&stdout, rerun),
        Expect::Explanation => {
            let sections = ["== shapes ==", "== loop nest", "== generated C"];
            match sections.iter().find(|section| !stdout.contains(*section)) {
                Some(missing) => Err(format!("the explanation lacks {missing:?}")),
                None => Ok(()),
            }
        }
    };
    match checked {
        Ok(()) => Verdict::Succeeded { verified: true },
        Err(why) => Verdict::Wrong(why),
    }
}

/// The canonical form of a spec that parsed: it parses again, to itself.
fn check_canonical(stdout: &str, rerun: &dyn Fn(Vec<OsString>) -> Outcome) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(stdout).map_err(|err| format!("not JSON ({err}): {stdout}"))?;
    let canonical = value["canonical"]
        .as_str()
        .ok_or_else(|| format!("no canonical text: {stdout}"))?;
    let again = rerun(vec!["parse".into(), canonical.into(), "--json".into()]);
    if again.ended != Ended::Code(0) {
        return Err(format!(
            "the canonical text {canonical:?} does not parse: {}{}",
            String::from_utf8_lossy(&again.stdout),
            String::from_utf8_lossy(&again.stderr)
        ));
    }
    let reparsed: Value = serde_json::from_slice(&again.stdout)
        .map_err(|err| format!("not JSON when parsed again ({err})"))?;
    if reparsed["canonical"] != value["canonical"] || reparsed["slots"] != value["slots"] {
        return Err(format!(
            "the canonical text {canonical:?} parses to {}",
            reparsed["canonical"]
        ));
    }
    Ok(())
}

/// The JSON of `einsum --json` against the answer.
fn check_answer(answer: &Answer, stdout: &str) -> Result<(), String> {
    let value: Value =
        serde_json::from_str(stdout).map_err(|err| format!("not JSON ({err}): {stdout}"))?;
    let [batch, input, output] = &answer.shape;
    let shape = serde_json::json!({"batch": batch, "input": input, "output": output});
    if value["shape"] != shape {
        return Err(format!("shape {}, expected {shape}", value["shape"]));
    }
    if value["dtype"] != answer.dtype {
        return Err(format!(
            "dtype {}, expected {}",
            value["dtype"], answer.dtype
        ));
    }
    match &answer.written {
        Some((path, dims)) => {
            if value.get("values").is_some() {
                return Err("values printed although written to a file".to_owned());
            }
            let (file_dims, values) = read_npy(path)?;
            if file_dims != *dims {
                return Err(format!("the file's dims {file_dims:?}, expected {dims:?}"));
            }
            same_numbers("the file's values", &values, &answer.values)?;
        }
        None => same_json_numbers("values", &value["values"], &answer.values)?,
    }
    match &answer.grads {
        Some(grads) => {
            let printed = value["grads"]
                .as_array()
                .ok_or_else(|| format!("no grads: {stdout}"))?;
            if printed.len() != grads.len() {
                return Err(format!("{} grads, expected {}", printed.len(), grads.len()));
            }
            for (i, (printed, grad)) in printed.iter().zip(grads).enumerate() {
                same_json_numbers(&format!("grad x{}", i + 1), printed, grad)?;
            }
        }
        None if value.get("grads").is_some() => return Err("grads not asked for".to_owned()),
        None => {}
    }
    match &answer.captures {
        // Checked in the text: a parsed object would not keep the order of its keys.
        Some(captures) => {
            let shown: Vec<String> = captures
                .iter()
                .map(|(name, size)| format!("\"{name}\":{size}"))
                .collect();
            let expected = format!("\"captures\":{{{}}}", shown.join(","));
            if !stdout.contains(&expected) {
                return Err(format!("captures: expected {expected} in {stdout}"));
            }
        }
        None if value.get("captures").is_some() => {
            return Err("captures not asked for".to_owned());
        }
        None => {}
    }
    let median = value.get("median_ms");
    if answer.timed != median.is_some_and(|m| m.as_f64().is_some_and(|m| m >= 0.0)) {
        return Err(format!("median_ms {median:?} (timed: {})", answer.timed));
    }
    Ok(())
}

/// Printed numbers against expected ones: equal as numbers (so −0 is 0; a bool is 0 or 1), and
/// `null` exactly where the expected value is not finite (JSON has no NaN or infinities).
fn same_json_numbers(what: &str, printed: &Value, expected: &[f64]) -> Result<(), String> {
    let printed = printed
        .as_array()
        .ok_or_else(|| format!("{what}: not an array: {printed}"))?;
    let number = |p: &Value| p.as_f64().or_else(|| p.as_bool().map(f64::from));
    let agrees = printed.len() == expected.len()
        && printed.iter().zip(expected).all(|(p, e)| match number(p) {
            Some(p) => e.is_finite() && p == *e,
            None => p.is_null() && !e.is_finite(),
        });
    if agrees {
        Ok(())
    } else {
        Err(format!(
            "{what}: printed {}, expected {expected:?}",
            Value::from(printed.clone())
        ))
    }
}

/// Values read from a file against expected ones: equal, or both NaN.
fn same_numbers(what: &str, got: &[f64], expected: &[f64]) -> Result<(), String> {
    let agrees = got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(g, e)| g == e || (g.is_nan() && e.is_nan()));
    if agrees {
        Ok(())
    } else {
        Err(format!("{what}: {got:?}, expected {expected:?}"))
    }
}

/// The dims and f64 values of the array in `path`, read by an independent reader.
fn read_npy(path: &Path) -> Result<(Vec<usize>, Vec<f64>), String> {
    let file = std::fs::File::open(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|err| err.to_string())?;
    let dims = npy.shape().iter().map(|&d| d as usize).collect();
    let values = npy.into_vec().map_err(|err| err.to_string())?;
    Ok((dims, values))
}
