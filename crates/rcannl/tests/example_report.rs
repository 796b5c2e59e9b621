//! What the data-parallel example (`moons_mpi`, which needs MPI) prints about its run, from its
//! plain functions: counts with their nouns, and the share of the time spent merging gradients.

#[path = "../examples/support/report.rs"]
mod report;

use report::{counted, merging_percent};

#[test]
fn counts_take_the_plural_unless_one() {
    assert_eq!(counted(1, "rank"), "1 rank");
    assert_eq!(counted(2, "rank"), "2 ranks");
    assert_eq!(counted(0, "rank"), "0 ranks");
}

#[test]
fn the_merging_share_is_of_the_ranks_own_training_time() {
    // Rank 0 trains for 1 s and merges for 0.1 s; rank 1, which waited 2.64 s in its first merge
    // for rank 0 to start, trains for 3 s and merges for 2.74 s. Rank 1's mean merging time over
    // rank 0's training time would be 142%; over the ranks' mean training time, it is 71%.
    let (merging, training) = ((0.1 + 2.74) / 2.0, (1.0 + 3.0) / 2.0);
    assert!((merging_percent(merging, training) - 71.0).abs() < 1e-9);
    // Every rank merging all the time is 100%, never more, even where sums round up.
    assert_eq!(merging_percent(2.5, 2.5), 100.0);
    assert_eq!(merging_percent(2.5 + 1e-15, 2.5), 100.0);
    // A run too short to time merged nothing measurable.
    assert_eq!(merging_percent(0.0, 0.0), 0.0);
}
