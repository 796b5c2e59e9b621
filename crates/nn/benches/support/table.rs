//! What the benchmarks against the references share: the thread count every side runs on, the
//! timing of our steps (the best of several medians) and the table of figures and ratios.

use std::time::{Duration, Instant};

use rcannl_tensor::TensorError;

use crate::peers::Figures;

/// Sets `$RAYON_NUM_THREADS` to `threads` where it is unset or empty, so that ours and the
/// references' (told by the variable) run on as many.
pub fn default_threads(threads: &str) {
    if std::env::var_os("RAYON_NUM_THREADS").is_none_or(|v| v.is_empty()) {
        // SAFETY: called first in `main`: no other thread can be reading the environment.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", threads) };
    }
}

/// The environment's `tiered` setting, then sets it off where it was unset: the rows time
/// steady-state steps, which would run the optimized build anyway (the quick tier computes the
/// same values), and building it before the first step keeps a row from timing quick steps.
/// Called first in `main`; what it returns is for the processes that time first steps.
pub fn optimized_from_the_start() -> Option<std::ffi::OsString> {
    let tiered = std::env::var_os("RCANNL_TIERED");
    if tiered.is_none() {
        // SAFETY: called first in `main`: no other thread can be reading the environment.
        unsafe { std::env::set_var("RCANNL_TIERED", "false") };
    }
    tiered
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The best of `rounds` medians of `repeats` steps, in seconds, each round after warm-up steps.
pub fn best_median(
    step: &mut dyn FnMut() -> Result<(), TensorError>,
    repeats: usize,
    rounds: usize,
) -> Result<f64, TensorError> {
    let warmup = (repeats / 10).max(2);
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        for _ in 0..warmup {
            step()?;
        }
        let mut times = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            let start = Instant::now();
            step()?;
            times.push(start.elapsed());
        }
        best = best.min(median(times).as_secs_f64());
    }
    Ok(best)
}

/// The lines above a table: the threads, the rounds, what the ratios mean and the target.
pub fn preamble(threads: usize, rounds: usize) {
    println!(
        "{threads} threads on every side; best of {rounds} medians; x: peer time / ours (above \
         1: rcannl is faster)"
    );
    if let Ok(compiler) = rcannl_backends::cc::Compiler::from_environment()
        && let Ok(target) = compiler.target()
    {
        println!("target: {target}");
    }
}

/// A duration for the table.
fn shown(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".to_owned(),
        Some(s) if s < 1e-3 => format!("{:.1} us", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.2} ms", s * 1e3),
        Some(s) => format!("{s:.2} s"),
    }
}

/// A peer's time over ours.
fn ratio(theirs: Option<f64>, ours: Option<f64>) -> String {
    match (theirs, ours) {
        (Some(t), Some(o)) => format!("{:.2}", t / o),
        _ => "-".to_owned(),
    }
}

/// A table whose first column, `width` wide, names a row, then our time and each of `columns`
/// (the peers') with its ratio.
pub struct Table {
    pub width: usize,
    pub columns: &'static [&'static str],
}

impl Table {
    /// Prints the columns' names, the first one `first`.
    pub fn header(&self, first: &str) {
        let width = self.width;
        let mut line = format!("{first:<width$} {:>10}", "ours");
        for library in self.columns {
            line.push_str(&format!(" {library:>10} {:>6}", "x"));
        }
        println!("{line}");
    }

    /// Prints a row: our figure, then each peer's (its first number) with its ratio.
    pub fn row(&self, label: &str, ours: Option<f64>, theirs: &Figures) {
        let width = self.width;
        let mut line = format!("{label:<width$} {:>10}", shown(ours));
        for library in self.columns {
            let t = theirs.get(*library).and_then(|t| t.first().copied());
            line.push_str(&format!(" {:>10} {:>6}", shown(t), ratio(t, ours)));
        }
        println!("{line}");
    }
}
