//! Work spread over the machine's cores for the time of one call (writing a routine's kernels,
//! drawing parameters' initial values): scoped threads take items a batch at a time, and the
//! results come back in the items' order, so that what is made from them does not depend on how
//! the work was split. No thread outlives the call. Callers ask for as many threads as compiled
//! routines run on ([`kernel_threads`](crate::cc::kernel_threads)).

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many items a thread takes at a time: enough that taking them costs little, few enough
/// that items of uneven cost spread evenly.
const BATCH: usize = 16;

/// `f` of every item of `items`, in order, computed on up to `threads` threads.
pub fn map_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(items.len().div_ceil(BATCH));
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let start = next.fetch_add(BATCH, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + BATCH).min(items.len());
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
    fn results_come_back_in_order_whatever_the_threads() {
        let items: Vec<u64> = (0..1000).collect();
        let expected: Vec<u64> = items.iter().map(|x| x * x + 1).collect();
        for threads in [1, 2, 3, 8] {
            assert_eq!(map_in_order(&items, threads, |x| x * x + 1), expected);
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
