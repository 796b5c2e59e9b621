//! A CI-sized budget of checkpoint fuzzing: every truncation and every one-bit flip of a small
//! checkpoint is refused, and so is every one-bit flip of its header with the header checksum
//! recomputed; 500 random corruptions are refused or load exactly the saved values; none
//! panics. `rcannl-fuzz checkpoints` runs the same at any budget.

use std::fs;
use std::path::Path;

use rcannl_fuzz::checkpoints::{Subject, Tally};

/// The small checkpoint, in a fresh folder of the test's own.
fn subject(test: &str) -> Subject {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-checkpoints-{test}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a test folder");
    Subject::new(&dir).expect("the checkpoint")
}

/// Asserts that every load of `tally` was refused, with a message listing the cases that were
/// not.
fn all_refused(tally: &Tally, expected: u64) {
    assert_eq!(tally.cases(), expected, "{tally}");
    assert_eq!(tally.refused, expected, "{tally}; {:#?}", tally.failures);
}

#[test]
fn every_truncation_is_refused() {
    let subject = subject("truncations");
    let tally = subject.truncations().expect("the loads run");
    all_refused(&tally, subject.bytes().len() as u64);
}

#[test]
fn every_one_bit_flip_is_refused() {
    let subject = subject("flips");
    let tally = subject.one_bit_flips().expect("the loads run");
    all_refused(&tally, 8 * subject.bytes().len() as u64);
}

#[test]
fn every_one_bit_flip_of_the_header_is_refused_behind_a_recomputed_header_checksum() {
    let subject = subject("resealed");
    let tally = subject.resealed_header_flips().expect("the loads run");
    let n = u64::from_le_bytes(subject.bytes()[..8].try_into().expect("8 bytes"));
    all_refused(&tally, 8 * (n - 16));
}

#[test]
fn random_corruptions_are_refused_or_load_exactly() {
    let subject = subject("random");
    let tally = subject.random(0..500).expect("the loads run");
    assert_eq!(tally.cases(), 500, "{tally}");
    assert_eq!(tally.failed(), 0, "{tally}; {:#?}", tally.failures);
}
