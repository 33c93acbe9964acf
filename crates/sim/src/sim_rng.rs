//! The simulator's random numbers: xoshiro256++ seeded through SplitMix64, and the few
//! distributions the workload needs.
//!
//! Written out here (40 lines) rather than taken from `rand` so that a seed means the same
//! run forever: no dependency upgrade can change a committed result.

/// A small, fast, seedable generator (xoshiro256++, Blackman & Vigna 2019).
///
/// ```
/// use livecount_sim::SimRng;
///
/// let mut a = SimRng::new(7);
/// let mut b = SimRng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let x = a.uniform();
/// assert!((0.0..1.0).contains(&x));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

/// SplitMix64 step: spreads any seed (0 included) over the whole state.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SimRng {
    /// A generator for `seed`; equal seeds give equal streams.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Self {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// An independent stream derived from `seed` and a `stream` number (a session id, a
    /// policy's name hash): the same pair always gives the same stream.
    pub fn derive(seed: u64, stream: u64) -> Self {
        let mut x = seed ^ stream.wrapping_mul(0xD605_BBB5_8C8A_BBB9);
        Self::new(splitmix64(&mut x))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe to take the logarithm of.
    fn open_uniform(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Uniform index in `0..n` (`n > 0`), by Lemire's multiply-shift (bias < n / 2⁶⁴).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.uniform() < p
    }

    /// Exponential with the given mean (0 for a mean of 0).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -self.open_uniform().ln() * mean
    }

    /// Standard normal, by Box–Muller (one of the pair is discarded: simpler state).
    pub fn normal(&mut self) -> f64 {
        let r = (-2.0 * self.open_uniform().ln()).sqrt();
        r * (std::f64::consts::TAU * self.uniform()).cos()
    }

    /// Log-normal with the given *mean* and shape σ (of the underlying normal).
    pub fn lognormal(&mut self, mean: f64, sigma: f64) -> f64 {
        let mu = mean.ln() - sigma * sigma / 2.0;
        (mu + sigma * self.normal()).exp()
    }

    /// Pareto with the given mean and tail index α > 1 (heavier tail as α → 1).
    pub fn pareto(&mut self, mean: f64, alpha: f64) -> f64 {
        let scale = mean * (alpha - 1.0) / alpha;
        scale / self.open_uniform().powf(1.0 / alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(n: usize, mut f: impl FnMut() -> f64) -> f64 {
        (0..n).map(|_| f()).sum::<f64>() / n as f64
    }

    #[test]
    fn distributions_have_their_means() {
        let mut r = SimRng::new(1);
        let n = 400_000;
        let checks = [
            ("uniform", mean_of(n, || r.uniform()), 0.5, 0.01),
            ("exponential", mean_of(n, || r.exponential(3.0)), 3.0, 0.05),
            ("lognormal", mean_of(n, || r.lognormal(3.0, 1.0)), 3.0, 0.1),
            ("pareto", mean_of(n, || r.pareto(3.0, 2.5)), 3.0, 0.2),
            ("normal", mean_of(n, || r.normal()), 0.0, 0.01),
        ];
        for (name, got, want, tol) in checks {
            assert!((got - want).abs() < tol, "{name}: mean {got}, want {want}");
        }
    }

    #[test]
    fn below_covers_the_range_evenly() {
        let mut r = SimRng::new(2);
        let mut hist = [0u32; 5];
        for _ in 0..50_000 {
            hist[r.below(5)] += 1;
        }
        assert!(
            hist.iter().all(|&h| (9_000..11_000).contains(&h)),
            "{hist:?}"
        );
    }

    #[test]
    fn derived_streams_differ_and_repeat() {
        let a = SimRng::derive(9, 1).next_u64();
        assert_eq!(a, SimRng::derive(9, 1).next_u64());
        assert_ne!(a, SimRng::derive(9, 2).next_u64());
        assert_ne!(a, SimRng::derive(10, 1).next_u64());
    }
}
