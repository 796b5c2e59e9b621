//! Fuzzing the `rcannl` binary: random and mutated command lines for `parse`, `einsum` and
//! `explain` ([`cases`]), each run as a process of its own under a time limit ([`run`]) and
//! judged ([`check`]): every run ends by itself with status 0 or 1, never a panic, a signal or a
//! hang; a case that must be refused is; and a success on a problem whose answer the fuzzer
//! computes ([`naive`]) prints that answer.
//!
//! The budget and the cases are set by environment variables:
//!
//! - `RCANNL_FUZZ_CLI_CASES`: how many cases (default 1000);
//! - `RCANNL_FUZZ_CLI_SEED`: the seed (default fixed, so that a run is reproducible);
//! - `RCANNL_FUZZ_CLI_FIRST`: the index of the first case (default 0), to replay one case;
//! - `RCANNL_FUZZ_CLI_TIMEOUT`: seconds before a run counts as hung (default 120);
//! - `RCANNL_FUZZ_CLI_JOBS`: runs at a time (default: the CPUs, at most 4).
//!
//! A failure prints the seed, the case and the command line that reproduces it; the case's files
//! are kept. The long run: `RCANNL_FUZZ_CLI_CASES=100000 cargo test --release -p rcannl-cli
//! --test cli fuzz:: -- --nocapture`.

mod cases;
mod check;
mod naive;
mod npy_files;
mod rng;
mod run;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cases::generate;
use check::{Verdict, judge};
use rng::Rng;
use run::{run, shell_line};

/// A variable's value, or `default` when it is unset; a value that does not parse is an error.
fn setting(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
        Err(_) => default,
    }
}

/// Counts of how runs ended.
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    exit0: u64,
    /// Successes whose output was checked (an answer, a canonical form, an explanation).
    verified: u64,
    exit1: u64,
    panics: u64,
    aborts: u64,
    hangs: u64,
    odd_statuses: u64,
    refused_valid: u64,
    wrong: u64,
    /// The first failures, described.
    failures: Vec<String>,
}

impl Tally {
    fn failed(&self) -> u64 {
        self.panics + self.aborts + self.hangs + self.odd_statuses + self.refused_valid + self.wrong
    }
}

/// The seed of case `index`: cases are independent, so any one replays alone.
fn case_seed(seed: u64, index: u64) -> u64 {
    Rng::new(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)).next()
}

/// Runs case `index`, keeping its folder under `root` if it fails.
fn run_case(seed: u64, index: u64, root: &Path, limit: Duration, tally: &Mutex<Tally>) {
    let dir = root.join(format!("case-{index}"));
    std::fs::create_dir_all(&dir).expect("the case's folder is made");
    let mut rng = Rng::new(case_seed(seed, index));
    let case = generate(&mut rng, &dir);
    for (path, bytes) in &case.files {
        std::fs::write(path, bytes).expect("the case's file is written");
    }
    let cache = root.join("cache");
    let outcome = run(&case.args, &dir, &cache, limit);
    let rerun = |args: Vec<OsString>| run(&args, &dir, &cache, limit);
    let verdict = judge(&case, &outcome, &rerun);
    let mut tally = tally.lock().expect("no worker panicked");
    tally.cases += 1;
    let failure = match verdict {
        Verdict::Succeeded { verified } => {
            tally.exit0 += 1;
            tally.verified += u64::from(verified);
            None
        }
        Verdict::Failed => {
            tally.exit1 += 1;
            None
        }
        Verdict::Refused(error) => {
            tally.refused_valid += 1;
            Some(format!("a valid problem was refused: {error}"))
        }
        Verdict::Panicked(message) => {
            tally.panics += 1;
            Some(format!("panicked: {message}"))
        }
        Verdict::Aborted(signal) => {
            tally.aborts += 1;
            Some(format!("ended by signal {signal}"))
        }
        Verdict::Hung => {
            tally.hangs += 1;
            Some(format!("still running after {limit:?}"))
        }
        Verdict::OddStatus(code) => {
            tally.odd_statuses += 1;
            Some(format!("exit status {code}"))
        }
        Verdict::Wrong(why) => {
            tally.wrong += 1;
            Some(format!("wrong: {why}"))
        }
    };
    match failure {
        Some(why) if tally.failures.len() < 20 => {
            let line = shell_line(&case.args);
            tally.failures.push(format!(
                "case {index}: {why}\n  command: {line}\n  replay: RCANNL_FUZZ_CLI_SEED={seed} \
                 RCANNL_FUZZ_CLI_FIRST={index} RCANNL_FUZZ_CLI_CASES=1 cargo test -p rcannl-cli \
                 --test fuzz -- --nocapture"
            ));
        }
        Some(_) => {}
        None => {
            drop(tally);
            // Only a failure's files are worth keeping.
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn the_command_line_survives_random_and_hostile_input() {
    let cases = setting("RCANNL_FUZZ_CLI_CASES", 1000);
    let seed = setting("RCANNL_FUZZ_CLI_SEED", 0x5eed_c11f_u64);
    let first = setting("RCANNL_FUZZ_CLI_FIRST", 0);
    let limit = Duration::from_secs(setting("RCANNL_FUZZ_CLI_TIMEOUT", 120));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let jobs = setting("RCANNL_FUZZ_CLI_JOBS", cpus as u64).max(1);
    let root: PathBuf =
        std::env::temp_dir().join(format!("rcannl-fuzz-cli-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("the fuzzer's folder is made");
    let next = AtomicU64::new(first);
    let tally = Mutex::new(Tally::default());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= first + cases {
                        break;
                    }
                    run_case(seed, index, &root, limit, &tally);
                }
            });
        }
    });
    let tally = tally.into_inner().expect("no worker panicked");
    println!(
        "rcannl CLI fuzz, seed {seed}: {} cases in {:.1} s ({jobs} at a time): {} exit 0 ({} \
         answers checked), {} exit 1; {} panics, {} aborts, {} hangs, {} other statuses, {} valid \
         problems refused, {} wrong answers",
        tally.cases,
        start.elapsed().as_secs_f64(),
        tally.exit0,
        tally.verified,
        tally.exit1,
        tally.panics,
        tally.aborts,
        tally.hangs,
        tally.odd_statuses,
        tally.refused_valid,
        tally.wrong,
    );
    if tally.failed() == 0 {
        let _ = std::fs::remove_dir_all(&root);
    }
    assert!(
        tally.failed() == 0,
        "{} failures (files kept under {}):\n{}",
        tally.failed(),
        root.display(),
        tally.failures.join("\n")
    );
    // A generator that drifted into errors only would check nothing.
    if tally.cases >= 100 {
        assert!(
            tally.verified * 5 >= tally.cases,
            "only {} of {} cases were successes with a checked answer",
            tally.verified,
            tally.cases
        );
    }
}
