//! `rcannl-fuzz routines|graphs [--count N] [--seed S] [--batch B]`: differential fuzzing of the
//! C backend against the interpreter at any budget, for the compiler and flags `$CC` and
//! `$RCANNL_CFLAGS` choose. Prints the target, progress, and the count of cases that agreed;
//! the first mismatch ends the run with status 1 and the seed that reproduces it.

use std::process::ExitCode;
use std::time::Instant;

use rcannl_backends::cc::Compiler;
use rcannl_fuzz::{graphs, routines};

const USAGE: &str = "usage: rcannl-fuzz routines|graphs [--count N] [--seed S] [--batch B]";

struct Options {
    graphs: bool,
    count: u64,
    seed: u64,
    batch: u64,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let graphs = match args.next().as_deref() {
        Some("routines") => false,
        Some("graphs") => true,
        _ => return Err(USAGE.to_owned()),
    };
    let mut options = Options {
        graphs,
        count: 1000,
        seed: 0,
        batch: 100,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a count\n{USAGE}"))?;
        match flag.as_str() {
            "--count" => options.count = number,
            "--seed" => options.seed = number,
            "--batch" if number > 0 => options.batch = number,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(compiler) = Compiler::find() else {
        eprintln!("rcannl-fuzz: no C compiler runs here (tried $CC, then cc)");
        return ExitCode::FAILURE;
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
