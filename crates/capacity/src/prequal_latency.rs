//! [`PrequalLatency`]: the latency half of a Prequal probe — the median latency of the
//! fresh samples taken at about a given RIF — as one pure selection over
//! [`PrequalSample`]s. `livecount-report`'s `PrequalEstimator` answers its probes with it,
//! and `lbsim`'s simulated backends answer theirs with it, so what the simulator says
//! about Prequal is about the product's estimator.

/// One sample: a session that started with `rif` requests in flight (itself included),
/// took `latency_us`, and was recorded `age_s` whole seconds ago.
///
/// The caller turns its own clock into ages (the estimator from its stamps, the simulator
/// from simulated time): nothing here reads a clock.
///
/// ```
/// use livecount_capacity::PrequalSample;
///
/// let s = PrequalSample { rif: 12, latency_us: 41_500, age_s: 3 };
/// assert_eq!(s.rif, 12);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrequalSample {
    /// Requests in flight when the session started, itself included.
    pub rif: u64,
    /// Its latency (the agent: time to first response chunk), whole microseconds.
    pub latency_us: u64,
    /// How long ago it was recorded, whole seconds.
    pub age_s: u64,
}

/// The latency estimate at one RIF, from [`PrequalLatency::estimate`].
///
/// # Which samples answer
///
/// At RIF `r`, over samples with a window of `max_age_s` seconds:
///
/// 1. the **fresh** samples: `age_s ≤ max_age_s`;
/// 2. those **near** `r`: `|rif − r| ≤ max(1, r / 4)` (integer division: within 25 %,
///    and always ±1);
/// 3. of those, the [`NEAREST`](Self::NEAREST) closest in RIF, plus every other sample as
///    close as the last of them (ties are all in, so the answer depends only on which
///    samples there are, not on their order);
/// 4. their **median** latency (the mean of the two middle ones for an even count), or
///    `None` when no fresh sample is near.
///
/// ```
/// use livecount_capacity::{PrequalLatency, PrequalSample};
///
/// let sample = |rif, ms: u64, age_s| PrequalSample { rif, latency_us: ms * 1000, age_s };
/// let mut samples = [
///     sample(2, 30, 0),
///     sample(3, 40, 5),
///     sample(3, 44, 1),
///     sample(4, 50, 0),
///     sample(40, 900, 0), // too far from 3
///     sample(3, 1, 200),  // too old
/// ];
/// let at_3 = PrequalLatency::estimate(3, &mut samples, 120);
/// assert_eq!(at_3.median_us, Some(42_000.0)); // the median of 30, 40, 44 and 50 ms
/// assert_eq!((at_3.fresh, at_3.used), (5, 4));
/// assert_eq!(PrequalLatency::estimate(20, &mut samples, 120).median_us, None);
/// ```
///
/// # Performance characteristics
///
/// Linear in the samples: it reorders the caller's slice in place (partitions and two
/// `select_nth_unstable`s), allocates nothing and never sorts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrequalLatency {
    /// The median latency of the samples used, microseconds (a half on an even count);
    /// `None` when no fresh sample is near the RIF asked.
    pub median_us: Option<f64>,
    /// Fresh samples, at any RIF.
    pub fresh: usize,
    /// Samples the median was taken over (0 with no median).
    pub used: usize,
}

// === impl PrequalLatency ===

impl PrequalLatency {
    /// Samples nearest in RIF that the median is taken over (more on ties).
    pub const NEAREST: usize = 16;
    /// Samples a Prequal estimator holds: the last this many recorded.
    pub const SAMPLES: usize = 128;
    /// How long a sample stays fresh unless its holder says otherwise, seconds.
    pub const DEFAULT_MAX_AGE_S: u64 = 120;

    /// The estimate at `rif` over `samples`: see
    /// [which samples answer](Self#which-samples-answer). Reorders `samples`.
    pub fn estimate(rif: u64, samples: &mut [PrequalSample], max_age_s: u64) -> Self {
        let fresh = partition(samples, |s| s.age_s <= max_age_s);
        let tolerance = (rif / 4).max(1);
        let distance = |s: &PrequalSample| s.rif.abs_diff(rif);
        let near = partition(&mut samples[..fresh], |s| distance(s) <= tolerance);
        let near = &mut samples[..near];
        if near.is_empty() {
            return PrequalLatency {
                median_us: None,
                fresh,
                used: 0,
            };
        }
        let used = if near.len() > Self::NEAREST {
            let (_, &mut last, _) = near.select_nth_unstable_by_key(Self::NEAREST - 1, distance);
            let cutoff = distance(&last);
            partition(near, |s| distance(s) <= cutoff)
        } else {
            near.len()
        };
        PrequalLatency {
            median_us: Some(median_us(&mut near[..used])),
            fresh,
            used,
        }
    }
}

/// Moves the elements that satisfy `keep` to the front, in place; returns how many.
fn partition<T>(v: &mut [T], keep: impl Fn(&T) -> bool) -> usize {
    let mut kept = 0;
    for i in 0..v.len() {
        if keep(&v[i]) {
            v.swap(kept, i);
            kept += 1;
        }
    }
    kept
}

/// The median latency of non-empty `used`: the mean of the middle two for an even count.
fn median_us(used: &mut [PrequalSample]) -> f64 {
    let (len, mid) = (used.len(), used.len() / 2);
    let (below, &mut upper, _) = used.select_nth_unstable_by_key(mid, |s| s.latency_us);
    if len % 2 == 1 {
        return upper.latency_us as f64;
    }
    let lower = below
        .iter()
        .map(|s| s.latency_us)
        .max()
        .expect("an even, non-empty count has a lower half");
    (lower as f64 + upper.latency_us as f64) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(rif: u64, ms: u64) -> PrequalSample {
        PrequalSample {
            rif,
            latency_us: ms * 1000,
            age_s: 0,
        }
    }

    fn median_ms(rif: u64, samples: &[PrequalSample]) -> Option<f64> {
        let mut samples = samples.to_vec();
        PrequalLatency::estimate(rif, &mut samples, 120)
            .median_us
            .map(|us| us / 1000.0)
    }

    #[test]
    fn no_near_sample_means_no_median() {
        assert_eq!(
            PrequalLatency::estimate(5, &mut [], 120),
            PrequalLatency {
                median_us: None,
                fresh: 0,
                used: 0
            }
        );
        let mut far = [at(0, 5), at(20, 5), at(30, 5)];
        for rif in [10, 2, 100] {
            let e = PrequalLatency::estimate(rif, &mut far, 120);
            assert_eq!((e.median_us, e.fresh, e.used), (None, 3, 0), "{rif}");
        }
    }

    #[test]
    fn near_is_within_a_quarter_and_always_one() {
        let samples = [at(6, 6), at(10, 10), at(5, 500), at(11, 1100)];
        assert_eq!(
            median_ms(8, &samples),
            Some(8.0),
            "6 and 10 are within 2 of 8"
        );
        let samples = [at(1, 1), at(2, 2)];
        assert_eq!(median_ms(0, &samples), Some(1.0), "0 looks at 0..=1");
        assert_eq!(median_ms(3, &samples), Some(2.0), "3 looks at 2..=4");
        let samples = [at(75, 75), at(74, 74), at(126, 126)];
        assert_eq!(
            median_ms(100, &samples),
            Some(75.0),
            "100 looks at 75..=125"
        );
    }

    #[test]
    fn the_nearest_sixteen_answer_with_every_tie() {
        let mut samples: Vec<_> = (0..10).flat_map(|_| [at(40, 1), at(41, 100)]).collect();
        let e = PrequalLatency::estimate(40, &mut samples, 120);
        assert_eq!(
            (e.used, e.median_us),
            (20, Some(50_500.0)),
            "the 16th ties 10"
        );
        let mut samples: Vec<_> = [at(40, 5); 16]
            .into_iter()
            .chain([at(39, 500); 10])
            .collect();
        let e = PrequalLatency::estimate(40, &mut samples, 120);
        assert_eq!((e.used, e.median_us), (16, Some(5_000.0)));
        let e = PrequalLatency::estimate(39, &mut samples, 120);
        assert_eq!(
            (e.used, e.median_us),
            (26, Some(5_000.0)),
            "16th at distance 1"
        );
    }

    #[test]
    fn the_median_is_the_middle_one_or_the_mean_of_two() {
        assert_eq!(median_ms(4, &[at(4, 9), at(4, 1), at(4, 5)]), Some(5.0));
        assert_eq!(
            median_ms(4, &[at(4, 9), at(4, 1), at(4, 5), at(4, 7)]),
            Some(6.0)
        );
        let us = |latency_us| PrequalSample {
            rif: 1,
            latency_us,
            age_s: 0,
        };
        let mut halves = [us(3), us(4)];
        let e = PrequalLatency::estimate(1, &mut halves, 0);
        assert_eq!(e.median_us, Some(3.5), "half a microsecond is kept");
    }

    #[test]
    fn a_sample_is_fresh_up_to_max_age_inclusive() {
        let aged = |age_s| PrequalSample {
            rif: 5,
            latency_us: 7,
            age_s,
        };
        let mut samples = [aged(60), aged(61), aged(0)];
        let e = PrequalLatency::estimate(5, &mut samples, 60);
        assert_eq!((e.fresh, e.used), (2, 2));
        let e = PrequalLatency::estimate(5, &mut samples, 59);
        assert_eq!((e.fresh, e.used), (1, 1));
    }

    #[test]
    fn huge_rifs_and_latencies_do_not_overflow() {
        let top = PrequalSample {
            rif: u64::MAX,
            latency_us: u64::MAX,
            age_s: u64::MAX,
        };
        let mut samples = [top, PrequalSample { age_s: 0, ..top }];
        let e = PrequalLatency::estimate(u64::MAX, &mut samples, u64::MAX);
        assert_eq!((e.fresh, e.used), (2, 2));
        assert_eq!(e.median_us, Some(u64::MAX as f64));
        let e = PrequalLatency::estimate(0, &mut samples, u64::MAX);
        assert_eq!(e.median_us, None);
    }

    // === the reference ===

    /// The definition, step by step and by sorting: the fresh ones, the smallest radius
    /// holding 16 near samples (or the tolerance), the median of everything inside it.
    fn reference(rif: u64, samples: &[PrequalSample], max_age_s: u64) -> PrequalLatency {
        let fresh: Vec<_> = samples.iter().filter(|s| s.age_s <= max_age_s).collect();
        let tolerance = std::cmp::max(1, rif / 4);
        let mut radii: Vec<u64> = fresh
            .iter()
            .map(|s| s.rif.abs_diff(rif))
            .filter(|&d| d <= tolerance)
            .collect();
        radii.sort();
        radii.dedup();
        let within = |r: u64| fresh.iter().filter(|s| s.rif.abs_diff(rif) <= r).count();
        let radius = radii
            .iter()
            .copied()
            .find(|&r| within(r) >= 16)
            .unwrap_or(tolerance);
        let mut used: Vec<u64> = fresh
            .iter()
            .filter(|s| s.rif.abs_diff(rif) <= radius)
            .map(|s| s.latency_us)
            .collect();
        used.sort();
        let n = used.len();
        let median_us = match n {
            0 => None,
            n if n % 2 == 1 => Some(used[n / 2] as f64),
            n => Some((used[n / 2 - 1] as f64 + used[n / 2] as f64) / 2.0),
        };
        PrequalLatency {
            median_us,
            fresh: fresh.len(),
            used: n,
        }
    }

    fn sample() -> impl Strategy<Value = PrequalSample> {
        let rif = prop_oneof![8 => 0..48u64, 1 => u64::MAX - 3..=u64::MAX];
        let latency = prop_oneof![9 => 0..5_000u64, 1 => Just(u64::MAX)];
        (rif, latency, 0..100u64).prop_map(|(rif, latency_us, age_s)| PrequalSample {
            rif,
            latency_us,
            age_s,
        })
    }

    proptest! {
        /// Any samples (ties in RIF and latency, some stale, some far), any RIF and window,
        /// in any order: the estimate is the reference's.
        #[test]
        fn the_estimate_is_the_reference(
            samples in prop::collection::vec(sample(), 0..200),
            rif in prop_oneof![8 => 0..52u64, 1 => Just(u64::MAX)],
            max_age_s in 0..110u64,
            seed in any::<u64>(),
        ) {
            let want = reference(rif, &samples, max_age_s);
            let mut reordered = samples.clone();
            let len = reordered.len();
            if len > 1 {
                reordered.rotate_left((seed % len as u64) as usize);
            }
            prop_assert_eq!(PrequalLatency::estimate(rif, &mut reordered, max_age_s), want);
            let mut reversed: Vec<_> = samples.iter().rev().copied().collect();
            prop_assert_eq!(PrequalLatency::estimate(rif, &mut reversed, max_age_s), want);
        }
    }
}
