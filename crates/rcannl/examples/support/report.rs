//! How the data-parallel example reports its run: counts with their nouns, and the share of the
//! training time spent merging gradients. Plain functions, so that `tests/example_report.rs`
//! checks them where MPI is missing.

/// `n` and `noun`, plural unless `n` is 1: "1 rank", "4 ranks".
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The percentage of the training time spent merging gradients, from the ranks' mean merging
/// time and mean training time (seconds). Each rank measures both on one monotonic clock, its
/// merges inside its training loop, so the share is at most 100%; it is capped there only
/// against the rounding of the sums. (Over one rank's training time instead, it could pass 100%:
/// a rank that waits in its first merge for the others to start counts time that they spent
/// before their loop.) 0 for a run too short to time.
pub fn merging_percent(merging: f64, training: f64) -> f64 {
    if training > 0.0 {
        100.0 * (merging / training).min(1.0)
    } else {
        0.0
    }
}
