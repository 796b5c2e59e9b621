//! Choices drawn from the seeded generator the data sets use (SplitMix64, whose whole state is
//! one seed), so that every case the fuzzers make is a function of the number it was made from.

pub use rcannl_nn::data::Rng;

/// Drawing numbers in ranges and items from lists.
pub trait Draw {
    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize;

    /// A number in `low..=high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    /// True with probability `1/n`.
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items`.
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

impl Draw for Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = Rng::new(7);
        assert!((0..1000).all(|_| (2..=4).contains(&rng.between(2, 4))));
        assert!((0..1000).all(|_| rng.below(3) < 3));
        let picked: std::collections::HashSet<u8> = (0..100).map(|_| *rng.pick(&[1, 2])).collect();
        assert_eq!(picked.len(), 2);
    }
}
