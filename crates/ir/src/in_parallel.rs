//! Work spread over the machine's cores for the time of one call (transforming a routine's
//! chunks, writing its kernels, drawing parameters' initial values): scoped threads take
//! items a batch at a time, and the results come back in the items' order, so that what is made
//! from them does not depend on how the work was split. No thread outlives the call. Callers ask
//! for [`threads`]: as many as compiled routines run on.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The variable that asks for a number of threads (rayon's name for it, which users know).
pub const THREADS_VARIABLE: &str = "RAYON_NUM_THREADS";

/// How many threads work is split across, by the compiler and by compiled routines alike:
/// `$RAYON_NUM_THREADS` when it is a whole number from 1 up, but at most what this machine runs
/// at once (its available parallelism, so that an absurd request cannot spawn absurd numbers of
/// threads); that many when it is unset, empty or `0`; and that many, after one warning, when it
/// is anything else.
pub fn threads() -> usize {
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

/// The most items a thread takes at a time: enough that taking them costs little. Fewer where
/// there are few items, so that a handful of costly ones (the distinct chunks of a routine)
/// still spread over the threads.
const BATCH: usize = 16;

/// `f` of every item of `items`, in order, computed on up to `threads` threads.
pub fn map_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    // At least four batches a thread.
    let batch = (items.len() / (4 * threads)).clamp(1, BATCH);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let start = next.fetch_add(batch, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + batch).min(items.len());
            done.extend((start..end).map(|i| (i, f(&items[i]))));
        }
    };
    let parts: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut parts = vec![work()];
        for helper in helpers {
            // A panic in `f` is the caller's, as it would be without threads.
            parts.push(
                helper
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
            );
        }
        parts
    });
    let mut slots: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    for (i, result) in parts.into_iter().flatten() {
        slots[i] = Some(result);
    }
    slots
        .into_iter()
        .map(|slot| slot.expect("every item is taken by one thread"))
        .collect()
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

    #[test]
    fn results_come_back_in_order_whatever_the_threads() {
        // Few items (a batch of one each), and many (batches of several).
        for count in [1, 2, 5, 9, 1000] {
            let items: Vec<u64> = (0..count).collect();
            let expected: Vec<u64> = items.iter().map(|x| x * x + 1).collect();
            for threads in [1, 2, 3, 8] {
                assert_eq!(map_in_order(&items, threads, |x| x * x + 1), expected);
            }
        }
        assert!(map_in_order(&[] as &[u64], 4, |x| *x).is_empty());
    }

    #[test]
    #[should_panic(expected = "item 500")]
    fn a_panic_in_a_helper_is_the_callers() {
        let items: Vec<u64> = (0..1000).collect();
        map_in_order(&items, 4, |&x| {
            assert!(x != 500, "item {x}");
            x
        });
    }
}
