//! The threads compiled kernels and matrix products run on: a rayon pool of our own (rayon's
//! global pool is never started), with as many threads as `$RAYON_NUM_THREADS` asks for but never
//! more than this machine runs at once, so that an absurd request cannot spawn absurd numbers of
//! threads.

use std::sync::OnceLock;

/// The variable that asks for a number of threads (rayon's own).
const THREADS_VARIABLE: &str = "RAYON_NUM_THREADS";

/// How many threads compiled routines split their work across: `$RAYON_NUM_THREADS` when it is a
/// whole number from 1 up, but at most what this machine runs at once (its available
/// parallelism); that many when it is unset, empty or `0`; and that many, after one warning,
/// when it is anything else.
pub fn kernel_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        let requested = std::env::var(THREADS_VARIABLE).unwrap_or_default();
        threads_for(&requested, available).unwrap_or_else(|warning| {
            eprintln!("rcannl: {warning}");
            available
        })
    })
}

/// The threads to use when `requested` (the variable's value) asks for them on a machine that
/// runs `available` at once: an error (a warning to show) when `requested` is no number.
fn threads_for(requested: &str, available: usize) -> Result<usize, String> {
    match requested.trim() {
        "" => Ok(available),
        requested => match requested.parse::<u128>() {
            Ok(0) => Ok(available),
            Ok(asked) => Ok(usize::try_from(asked).map_or(available, |n| n.min(available))),
            Err(_) => Err(format!(
                "{THREADS_VARIABLE} is {requested:?}, not a number of threads; using {available}"
            )),
        },
    }
}

/// The pool of [`kernel_threads`] threads, started on first use; `None` if the system refused
/// to start its threads (work then runs on the calling thread, after one warning).
pub(crate) fn kernel_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(kernel_threads())
            .thread_name(|i| format!("rcannl-kernels-{i}"))
            .build()
            .inspect_err(|e| {
                eprintln!("rcannl: cannot start threads for kernels ({e}); running on one")
            })
            .ok()
    })
    .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_capped_at_what_the_machine_runs() {
        assert_eq!(threads_for("", 8), Ok(8));
        assert_eq!(threads_for("0", 8), Ok(8));
        assert_eq!(threads_for("3", 8), Ok(3));
        assert_eq!(threads_for(" 3\n", 8), Ok(3));
        assert_eq!(threads_for("100000", 8), Ok(8));
        assert_eq!(
            threads_for("340282366920938463463374607431768211455", 8),
            Ok(8)
        );
    }

    #[test]
    fn requests_that_are_no_number_are_warned_about() {
        for requested in [
            "many",
            "-3",
            "2.5",
            "1e9",
            "999999999999999999999999999999999999999",
        ] {
            let warning = threads_for(requested, 4).unwrap_err();
            assert!(warning.contains(THREADS_VARIABLE), "{warning}");
            assert!(warning.contains(&format!("{requested:?}")), "{warning}");
            assert!(warning.contains("using 4"), "{warning}");
        }
    }
}
