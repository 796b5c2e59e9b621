//! The reference cases the unit tests compare the searches with: einsums of 11 to 60 operands
//! and opt_einsum's paths for them, as `scripts/einsum_path_reference.py` writes them to
//! `tests/data/einsum_path_reference.txt` (its docs give the format).

use std::collections::{BTreeSet, HashMap};

/// One einsum and opt_einsum's paths for it.
pub(super) struct Case {
    pub(super) name: String,
    pub(super) operands: Vec<BTreeSet<String>>,
    pub(super) result: BTreeSet<String>,
    pub(super) sizes: HashMap<String, f64>,
    /// The FLOPs of opt_einsum's `greedy` path.
    pub(super) greedy_flops: f64,
    /// The steps of opt_einsum's `greedy` path, each pair ascending.
    pub(super) greedy_steps: Vec<(usize, usize)>,
}

/// The cases of the reference file.
pub(super) fn cases() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/einsum_path_reference.txt"
    );
    let text = std::fs::read_to_string(path).expect("the reference file is readable");
    let words = |s: &str| -> BTreeSet<String> { s.split_whitespace().map(str::to_owned).collect() };
    (text.lines())
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            assert_eq!(fields.len(), 7, "{line}");
            let pair = |s: &str| {
                let (a, b) = s.split_once('-').expect("a step is i-j");
                (a.parse().unwrap(), b.parse().unwrap())
            };
            Case {
                name: fields[0].to_owned(),
                operands: fields[1].split(',').map(words).collect(),
                result: words(fields[2]),
                sizes: (fields[3].split(','))
                    .map(|s| {
                        let (label, size) = s.split_once('=').expect("a size is label=size");
                        (label.to_owned(), size.parse().unwrap())
                    })
                    .collect(),
                greedy_flops: fields[4].parse().unwrap(),
                greedy_steps: fields[5].split(',').map(pair).collect(),
            }
        })
        .collect()
}
