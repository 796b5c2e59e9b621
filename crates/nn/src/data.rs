//! Data sets the examples train on, generated from a seed.

/// A small, fast generator (SplitMix64) for data sets: reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`: the same seed gives the same sequence.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Two interleaving half circles ("moons") with Gaussian noise of deviation `noise`: `n` points
/// as `(x, y)` pairs (row-major) and labels in {−1, 1}, shuffled.
pub fn moons(n: usize, noise: f64, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let mut points: Vec<([f64; 2], f64)> = (0..n)
        .map(|i| {
            let upper = i % 2 == 0;
            let t = rng.uniform() * std::f64::consts::PI;
            let (x, y) = if upper {
                (t.cos(), t.sin())
            } else {
                (1.0 - t.cos(), 0.5 - t.sin())
            };
            let label = if upper { 1.0 } else { -1.0 };
            ([x + noise * rng.normal(), y + noise * rng.normal()], label)
        })
        .collect();
    for i in (1..points.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        points.swap(i, j);
    }
    let xs = points.iter().flat_map(|(p, _)| *p).collect();
    let ys = points.iter().map(|(_, l)| *l).collect();
    (xs, ys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moons_are_balanced_reproducible_and_near_their_arcs() {
        let (xs, ys) = moons(1000, 0.0, 3);
        assert_eq!((xs.len(), ys.len()), (2000, 1000));
        assert_eq!(ys.iter().filter(|&&y| y > 0.0).count(), 500);
        assert_eq!(moons(1000, 0.1, 3), moons(1000, 0.1, 3));
        for (p, y) in xs.chunks(2).zip(&ys) {
            let (cx, cy) = if *y > 0.0 { (0.0, 0.0) } else { (1.0, 0.5) };
            let radius = ((p[0] - cx).powi(2) + (p[1] - cy).powi(2)).sqrt();
            assert!((radius - 1.0).abs() < 1e-12);
        }
        let mut rng = Rng::new(9);
        let draws: Vec<f64> = (0..10_000).map(|_| rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!(mean.abs() < 0.05);
    }
}
