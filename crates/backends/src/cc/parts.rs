//! Cutting a generated library's source into translation units that the compiler builds at
//! once, one per thread: a step's routine is often one long source, which one compiler process
//! would build alone while the other cores wait.

use super::codegen::{KERNEL_START, PRELUDE};

/// Below this much C after the prelude, one compiler run costs less than starting several.
pub const MIN_SPLIT_BYTES: usize = 24 * 1024;

/// `source` (the prelude, then kernel functions only, as the generator writes them) as at most
/// `parts` sources of about equal length, each the prelude and a run of whole kernels; `None`
/// when it is not such a source, is too short to be worth splitting, or `parts` is below 2.
pub fn split(source: &str, parts: usize) -> Option<Vec<String>> {
    let kernels = source.strip_prefix(PRELUDE)?;
    if parts < 2 || kernels.len() < MIN_SPLIT_BYTES {
        return None;
    }
    let starts: Vec<usize> = kernels
        .match_indices(KERNEL_START)
        .map(|(at, _)| at)
        .collect();
    // Anything before the first kernel (or a function of another kind) is not ours to cut.
    if starts.first() != Some(&0) {
        return None;
    }
    let target = kernels.len().div_ceil(parts);
    let mut cuts = vec![0];
    for &start in &starts[1..] {
        let last = *cuts.last().expect("starts at 0");
        if start - last >= target && cuts.len() < parts {
            cuts.push(start);
        }
    }
    cuts.push(kernels.len());
    if cuts.len() < 3 {
        return None;
    }
    Some(
        cuts.windows(2)
            .map(|w| format!("{PRELUDE}{}", &kernels[w[0]..w[1]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::codegen::KERNEL_PARAMETERS;

    fn kernel(i: usize, body_bytes: usize) -> String {
        format!(
            "{KERNEL_START}rc_k{i}_cells(float *restrict n0) {{\n  /*{}*/\n}}\n\
             void rc_k{i}{KERNEL_PARAMETERS} {{\n  rc_k{i}_cells((float *)buffers[0]);\n}}\n",
            "x".repeat(body_bytes)
        )
    }

    #[test]
    fn a_long_source_is_cut_between_kernels_into_balanced_parts() {
        let kernels: Vec<String> = (0..10).map(|i| kernel(i, 6000)).collect();
        let source = format!("{PRELUDE}{}", kernels.concat());
        let parts = split(&source, 2).expect("long enough to split");
        assert_eq!(parts.len(), 2);
        for part in &parts {
            assert!(part.starts_with(PRELUDE));
        }
        let rest: Vec<&str> = parts.iter().map(|p| &p[PRELUDE.len()..]).collect();
        assert_eq!(
            rest.concat(),
            kernels.concat(),
            "every kernel once, in order"
        );
        assert_eq!(rest[0], kernels[..5].concat());
        let three = split(&source, 3).expect("long enough to split");
        assert_eq!(three.len(), 3);
        let rest: String = three.iter().map(|p| &p[PRELUDE.len()..]).collect();
        assert_eq!(rest, kernels.concat());
    }

    #[test]
    fn short_sources_one_part_and_foreign_sources_stay_whole() {
        let short = format!("{PRELUDE}{}", kernel(0, 100));
        assert_eq!(split(&short, 2), None);
        let long = format!("{PRELUDE}{}{}", kernel(0, 30_000), kernel(1, 30_000));
        assert_eq!(split(&long, 1), None);
        assert_eq!(split(&long, 2).map(|p| p.len()), Some(2));
        // One kernel longer than the rest together cannot be cut.
        let lopsided = format!("{PRELUDE}{}", kernel(0, 60_000));
        assert_eq!(split(&lopsided, 2), None);
        // Something else than the prelude first, or a function that is no kernel.
        assert_eq!(split(&long[1..], 2), None);
        let foreign = format!(
            "{PRELUDE}static int helper(void) {{ return 0; }}\n{}{}",
            kernel(0, 30_000),
            kernel(1, 30_000)
        );
        assert_eq!(split(&foreign, 2), None);
    }
}
