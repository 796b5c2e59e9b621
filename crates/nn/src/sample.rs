//! Choosing tokens from a model's logits, as generation does: greedily, or drawn from the softmax
//! of the logits divided by a temperature, among the `k` most likely — PyTorch's
//! `torch.multinomial(torch.softmax(logits / t, -1), 1)` after a top-k filter, and
//! `argmax` at temperature 0.
//!
//! ```
//! use rcannl_nn::data::Rng;
//! use rcannl_nn::sample::{Sampling, sample};
//!
//! let logits = [0.5, 2.0, -1.0, 1.9];
//! let mut rng = Rng::new(7);
//! assert_eq!(sample(&logits, &Sampling::greedy(), &mut rng).unwrap(), 1);
//! let two_best = Sampling::default().temperature(0.8).top_k(2);
//! assert!([1, 3].contains(&sample(&logits, &two_best, &mut rng).unwrap()));
//! ```

use rcannl_tensor::TensorError;

use crate::data::Rng;

/// How a token is chosen from logits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// The logits are divided by it before the softmax: below 1 sharpens the distribution, above
    /// 1 flattens it; 0 chooses the largest logit (the first, where several are equal).
    pub temperature: f64,
    /// Where set, only the logits at least the `k`-th largest may be chosen (all of those equal
    /// to it too, so that the choice does not depend on the order of ties).
    pub top_k: Option<usize>,
}

impl Default for Sampling {
    /// Drawn from the softmax of the logits themselves, among all of them.
    fn default() -> Sampling {
        Sampling {
            temperature: 1.0,
            top_k: None,
        }
    }
}

impl Sampling {
    /// The largest logit, always.
    pub fn greedy() -> Sampling {
        Sampling::default().temperature(0.0)
    }

    /// The same at temperature `temperature`.
    pub fn temperature(mut self, temperature: f64) -> Sampling {
        self.temperature = temperature;
        self
    }

    /// The same among the `k` most likely.
    pub fn top_k(mut self, k: usize) -> Sampling {
        self.top_k = Some(k);
        self
    }
}

/// The index chosen from `logits` (one distribution: a model's last output axis at one
/// position) as `sampling` says, drawing from `rng`. An error for no logits, a logit that is NaN,
/// a temperature that is negative or not a number, or a `top_k` of 0.
pub fn sample(logits: &[f64], sampling: &Sampling, rng: &mut Rng) -> Result<usize, TensorError> {
    let error = |what: String| Err(TensorError::new(format!("sample: {what}")));
    let t = sampling.temperature;
    if t.is_nan() || t < 0.0 {
        return error(format!("the temperature is {t}; it must be 0 or more"));
    }
    if sampling.top_k == Some(0) {
        return error("top_k is 0: no logit could be chosen".to_owned());
    }
    if logits.is_empty() {
        return error("there are no logits to choose from".to_owned());
    }
    if let Some(i) = logits.iter().position(|l| l.is_nan()) {
        return error(format!("logit {i} is NaN"));
    }
    // The first of the largest: torch.argmax's choice.
    let best = logits
        .iter()
        .enumerate()
        .fold(0, |b, (i, l)| if *l > logits[b] { i } else { b });
    if t == 0.0 || logits[best] == f64::INFINITY {
        return Ok(best);
    }
    let floor = match sampling.top_k {
        Some(k) if k < logits.len() => {
            let mut sorted = logits.to_vec();
            sorted.sort_by(|a, b| b.total_cmp(a));
            sorted[k - 1]
        }
        _ => f64::NEG_INFINITY,
    };
    let weights: Vec<f64> = logits
        .iter()
        .map(|l| {
            if *l >= floor {
                ((l - logits[best]) / t).exp()
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut left = rng.uniform() * total;
    for (i, w) in weights.iter().enumerate() {
        if *w > 0.0 {
            if left < *w {
                return Ok(i);
            }
            left -= w;
        }
    }
    // Rounding left a sliver past the last weight: the last that could be chosen.
    Ok(weights.iter().rposition(|w| *w > 0.0).unwrap_or(best))
}

/// [`sample`] on each row of `logits`, `classes` logits a row (a model's logits read back, the
/// classes its last output axis): one index per row.
pub fn sample_rows(
    logits: &[f64],
    classes: usize,
    sampling: &Sampling,
    rng: &mut Rng,
) -> Result<Vec<usize>, TensorError> {
    if classes == 0 || !logits.len().is_multiple_of(classes) {
        return Err(TensorError::new(format!(
            "sample_rows: {} logits are no whole number of rows of {classes}",
            logits.len()
        )));
    }
    logits
        .chunks(classes)
        .map(|row| sample(row, sampling, rng))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How often each index is drawn in `n` draws.
    fn counts(logits: &[f64], sampling: &Sampling, n: usize) -> Vec<f64> {
        let mut rng = Rng::new(11);
        let mut counts = vec![0.0; logits.len()];
        for _ in 0..n {
            counts[sample(logits, sampling, &mut rng).unwrap()] += 1.0;
        }
        counts.iter().map(|c| c / n as f64).collect()
    }

    fn softmax(logits: &[f64]) -> Vec<f64> {
        let e: Vec<f64> = logits.iter().map(|l| l.exp()).collect();
        let total: f64 = e.iter().sum();
        e.iter().map(|x| x / total).collect()
    }

    #[test]
    fn draws_follow_the_softmax_at_the_temperature() {
        let logits = [1.0, 0.0, -1.0, 2.0];
        for t in [1.0, 0.5, 2.0] {
            let want = softmax(&logits.map(|l| l / t));
            let got = counts(&logits, &Sampling::default().temperature(t), 200_000);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 0.005, "t={t}: {got:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn top_k_draws_only_among_the_k_largest_renormalized() {
        let logits = [1.0, 0.0, -1.0, 2.0];
        let got = counts(&logits, &Sampling::default().top_k(2), 200_000);
        let kept = softmax(&[1.0, 2.0]);
        assert_eq!((got[1], got[2]), (0.0, 0.0));
        assert!((got[0] - kept[0]).abs() < 0.005 && (got[3] - kept[1]).abs() < 0.005);
        // Ties with the k-th largest stay in.
        let tied = counts(&[3.0, 1.0, 1.0, 0.0], &Sampling::default().top_k(2), 10_000);
        assert!(tied[1] > 0.0 && tied[2] > 0.0 && tied[3] == 0.0, "{tied:?}");
        // k beyond the logits keeps them all.
        let all = counts(&logits, &Sampling::default().top_k(9), 10_000);
        assert!(all.iter().all(|c| *c > 0.0), "{all:?}");
    }

    #[test]
    fn greedy_and_top_one_take_the_first_largest() {
        let mut rng = Rng::new(3);
        let logits = [0.5, 2.0, -1.0, 2.0];
        assert_eq!(sample(&logits, &Sampling::greedy(), &mut rng).unwrap(), 1);
        for _ in 0..100 {
            let one = sample(
                &[0.5, 2.0, -1.0, 1.0],
                &Sampling::default().top_k(1),
                &mut rng,
            );
            assert_eq!(one.unwrap(), 1);
        }
        // An infinite logit wins at any temperature; -inf is never drawn.
        let sure = [0.0, f64::INFINITY, 1.0];
        assert_eq!(sample(&sure, &Sampling::default(), &mut rng).unwrap(), 1);
        let never = counts(&[f64::NEG_INFINITY, 0.0, 0.0], &Sampling::default(), 1000);
        assert_eq!(never[0], 0.0);
    }

    #[test]
    fn rows_are_drawn_each_on_its_own() {
        let mut rng = Rng::new(5);
        let logits = [9.0, -9.0, -9.0, 9.0, 0.0, 0.0];
        assert_eq!(
            sample_rows(&logits[..4], 2, &Sampling::greedy(), &mut rng).unwrap(),
            [0, 1]
        );
        let error = sample_rows(&logits, 4, &Sampling::greedy(), &mut rng).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("6 logits are no whole number of rows of 4")
        );
    }

    #[test]
    fn what_cannot_be_sampled_is_an_error_saying_why() {
        let mut rng = Rng::new(1);
        let cases: [(&[f64], Sampling, &str); 5] = [
            (&[], Sampling::default(), "no logits"),
            (&[0.0, f64::NAN], Sampling::default(), "logit 1 is NaN"),
            (
                &[0.0],
                Sampling::default().temperature(-1.0),
                "temperature is -1",
            ),
            (
                &[0.0],
                Sampling::default().temperature(f64::NAN),
                "temperature is NaN",
            ),
            (&[0.0], Sampling::default().top_k(0), "top_k is 0"),
        ];
        for (logits, sampling, says) in cases {
            let error = sample(logits, &sampling, &mut rng).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
    }
}
