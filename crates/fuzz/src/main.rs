//! `rcannl-fuzz routines|graphs [--count N] [--seed S] [--batch B]`: differential fuzzing of the
//! C backend against the interpreter at any budget, for the compiler and flags `$CC` and
//! `$RCANNL_CFLAGS` choose. Prints the target, progress, and the count of cases that agreed;
//! the first mismatch ends the run with status 1 and the seed that reproduces it.
//!
//! `rcannl-fuzz checkpoints [--count N] [--seed S]` loads every truncation and every one-bit flip
//! of a small checkpoint, every one-bit flip of its header with the header checksum recomputed,
//! then `N` random corruptions made from seeds `S..S+N`, and prints how many loaded the saved
//! values, were refused, panicked or loaded other values; any panic or wrong load gives status 1
//! and the first cases.
//!
//! `rcannl-fuzz programs [--count N] [--seed S]` runs `N` random API programs, misuse included,
//! on the interpreter (one in eight on the C backend too) and prints how many ran and agreed
//! with a direct evaluation (and how many of those then misused state: reads of what no routine
//! computed, unset data, updates, train-mode batch norm outside the loss, gathers) and how many
//! were refused as their misuse required; the first panic,
//! accepted misuse or wrong value gives status 1 and its seed.

use std::process::ExitCode;
use std::time::Instant;

use rcannl_backends::cc::Compiler;
use rcannl_fuzz::checkpoints::{Subject, Tally};
use rcannl_fuzz::{graphs, programs, routines};

const USAGE: &str = "usage: rcannl-fuzz routines|graphs [--count N] [--seed S] [--batch B]\n       \
     rcannl-fuzz checkpoints|programs [--count N] [--seed S]";

struct Options {
    graphs: bool,
    count: u64,
    seed: u64,
    batch: u64,
}

/// The command line after the subcommand: `--count`, `--seed` and (where `batches`) `--batch`.
fn flags(batches: bool) -> Result<(u64, u64, u64), String> {
    let (mut count, mut seed, mut batch) = (1000, 0, 100);
    let mut args = std::env::args_os().skip(2).map(|arg| {
        arg.into_string()
            .map_err(|arg| format!("{arg:?} is not text\n{USAGE}"))
    });
    while let Some(flag) = args.next() {
        let flag = flag?;
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))??;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a count\n{USAGE}"))?;
        match flag.as_str() {
            "--count" => count = number,
            "--seed" => seed = number,
            "--batch" if batches && number == 0 => {
                return Err(format!("--batch must be at least 1\n{USAGE}"));
            }
            "--batch" if batches => batch = number,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    Ok((count, seed, batch))
}

fn options() -> Result<Options, String> {
    let graphs = match std::env::args_os()
        .nth(1)
        .and_then(|arg| arg.into_string().ok())
        .as_deref()
    {
        Some("routines") => false,
        Some("graphs") => true,
        _ => return Err(USAGE.to_owned()),
    };
    let (count, seed, batch) = flags(true)?;
    Ok(Options {
        graphs,
        count,
        seed,
        batch,
    })
}

fn main() -> ExitCode {
    match std::env::args_os()
        .nth(1)
        .and_then(|arg| arg.into_string().ok())
        .as_deref()
    {
        Some("checkpoints") => return checkpoints(),
        Some("programs") => return programs(),
        _ => {}
    }
    let options = match options() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let compiler = match Compiler::from_environment() {
        Ok(compiler) => compiler,
        Err(e) => {
            eprintln!("rcannl-fuzz: {e}");
            return ExitCode::FAILURE;
        }
    };
    match compiler.target() {
        Ok(target) => println!("target: {target}"),
        Err(e) => {
            eprintln!("rcannl-fuzz: {e}");
            return ExitCode::FAILURE;
        }
    }
    let kind = if options.graphs { "graphs" } else { "routines" };
    let start = Instant::now();
    let (first, end) = (options.seed, options.seed + options.count);
    let step = if options.graphs { 1 } else { options.batch };
    let mut done = 0;
    let mut reported = 0;
    let mut from = first;
    while from < end {
        let to = (from + step).min(end);
        let result = if options.graphs {
            graphs::check(&compiler, from)
        } else {
            routines::check(&compiler, &(from..to).collect::<Vec<_>>())
        };
        if let Err(mismatch) = result {
            eprintln!("rcannl-fuzz: {kind}: mismatch at {mismatch}");
            println!(
                "{kind}: {done} agreed before seed {}, 1 mismatch",
                mismatch.seed
            );
            return ExitCode::FAILURE;
        }
        done += to - from;
        from = to;
        if done * 10 / options.count.max(1) > reported {
            reported = done * 10 / options.count.max(1);
            println!(
                "{kind}: {done}/{} agree ({:.0} s)",
                options.count,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{kind}: {done} of {done} agree, seeds {first}..{end} ({:.0} s)",
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

/// The `checkpoints` and `programs` subcommands' `--count` and `--seed`.
fn count_and_seed() -> Result<(u64, u64), String> {
    flags(false).map(|(count, seed, _)| (count, seed))
}

/// Runs the `programs` subcommand (see the crate doc), in chunks so that progress shows.
fn programs() -> ExitCode {
    let (count, seed) = match count_and_seed() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let compiler = Compiler::find();
    if compiler.is_none() {
        println!("programs: no C compiler runs here: the interpreter alone");
    }
    let start = Instant::now();
    let mut total = programs::Tally::default();
    let end = seed + count;
    let mut from = seed;
    while from < end {
        let to = (from + 1000).min(end);
        match programs::check(compiler.as_ref(), from..to) {
            Ok(tally) => {
                total.agreed += tally.agreed;
                total.refused += tally.refused;
                total.state_misuses += tally.state_misuses;
            }
            Err(mismatch) => {
                eprintln!("rcannl-fuzz: programs: {mismatch}");
                return ExitCode::FAILURE;
            }
        }
        from = to;
        println!(
            "programs: {} of {count}: {} agreed ({} then misusing state), {} refused as their \
             misuse required ({:.0} s)",
            from - seed,
            total.agreed,
            total.state_misuses,
            total.refused,
            start.elapsed().as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}

/// Runs the `checkpoints` subcommand (see the crate doc) in a folder of its own under the
/// system's temporary folder, removed at the end.
fn checkpoints() -> ExitCode {
    let (count, seed) = match count_and_seed() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = std::env::temp_dir().join(format!("rcannl-fuzz-checkpoints-{}", std::process::id()));
    let result = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|()| run_checkpoints(&dir, count, seed));
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(tally) if tally.failed() == 0 => ExitCode::SUCCESS,
        Ok(tally) => {
            for failure in &tally.failures {
                eprintln!("rcannl-fuzz: checkpoints: {failure}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rcannl-fuzz: checkpoints: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every truncation and one-bit flip, then `count` random corruptions from `seed` on, each phase
/// reported as it ends; the tally of all.
fn run_checkpoints(dir: &std::path::Path, count: u64, seed: u64) -> Result<Tally, String> {
    let start = Instant::now();
    let subject = Subject::new(dir).map_err(|e| e.message)?;
    println!(
        "checkpoints: a checkpoint of {} bytes",
        subject.bytes().len()
    );
    let mut total = Tally::default();
    let mut report = |phase: &str, tally: Tally| {
        println!(
            "checkpoints: {phase}: {tally} ({:.0} s)",
            start.elapsed().as_secs_f64()
        );
        total.add(tally);
    };
    report(
        "every truncation",
        subject.truncations().map_err(|e| e.message)?,
    );
    report(
        "every one-bit flip",
        subject.one_bit_flips().map_err(|e| e.message)?,
    );
    report(
        "every one-bit flip of the header, header checksum recomputed",
        subject.resealed_header_flips().map_err(|e| e.message)?,
    );
    let mut random = Tally::default();
    let (end, step) = (seed + count, count.div_ceil(10).max(1));
    let mut from = seed;
    while from < end {
        let to = (from + step).min(end);
        random.add(subject.random(from..to).map_err(|e| e.message)?);
        println!(
            "checkpoints: random {}/{count} ({:.0} s)",
            to - seed,
            start.elapsed().as_secs_f64()
        );
        from = to;
    }
    report(&format!("random corruptions, seeds {seed}..{end}"), random);
    println!("checkpoints: in all, {total}");
    Ok(total)
}
