//! [`DurationHistogram`]: how long sessions lasted, in fixed buckets from 100 ms to an hour.

use std::fmt;
use std::time::Duration;

/// Session durations in fixed buckets: a count per bucket, the sum, the count. One per
/// [`EndReason`](crate::EndReason) in [`Snapshot::durations`](crate::Snapshot::durations).
///
/// The buckets suit long-lived sessions (a voice call, an agent's stream): their upper
/// bounds are [`BOUNDS`](DurationHistogram::BOUNDS), 100 ms to one hour, then one for
/// everything longer (Prometheus' `+Inf`). A duration falls in the first bucket whose bound
/// it does not exceed (`le`, as Prometheus has it). The sum is kept in whole microseconds.
///
/// A session's duration runs from its start to its one end, both read from the tracker's
/// coarse clock (a scheduler tick, a few ms, of precision), or from the instants given to
/// [`try_start_at`](crate::SessionTracker::try_start_at), [`Session::end_at`](crate::Session::end_at)
/// and [`reap_at`](crate::SessionTracker::reap_at) on a virtual clock. An end before its
/// start (only possible with virtual instants) lasted zero.
///
/// ```
/// use livecount_session::{DurationHistogram, EndReason, SessionTracker};
/// use std::time::{Duration, Instant};
///
/// let tracker = SessionTracker::new();
/// let t0 = Instant::now();
/// let call = tracker.try_start_at(t0).unwrap();
/// call.end_at(EndReason::Completed, t0 + Duration::from_secs(42));
///
/// let h = tracker.snapshot().durations.get(EndReason::Completed);
/// assert_eq!((h.count(), h.sum()), (1, Duration::from_secs(42)));
/// // 42 s is in the bucket up to 60 s (the 8th of 14).
/// assert_eq!(h.buckets()[DurationHistogram::bucket_of(Duration::from_secs(42))], 1);
/// assert_eq!(DurationHistogram::BOUNDS[7], Duration::from_secs(60));
/// ```
///
/// With the `serde` feature, `Serialize` / `Deserialize` as `{"buckets": [14 counts, not
/// cumulative], "sum_micros": n}`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DurationHistogram {
    buckets: [u64; DurationHistogram::BUCKETS],
    sum_micros: u64,
}

/// The bounds in microseconds, as the hot path compares them.
pub(crate) const BOUNDS_MICROS: [u64; DurationHistogram::BUCKETS - 1] = [
    100_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    30_000_000,
    60_000_000,
    120_000_000,
    300_000_000,
    600_000_000,
    1_800_000_000,
    3_600_000_000,
];

impl DurationHistogram {
    /// How many buckets there are: one per bound and the last, unbounded one.
    pub const BUCKETS: usize = 14;

    /// The buckets' upper bounds (inclusive), shortest first; the last bucket has none.
    pub const BOUNDS: [Duration; DurationHistogram::BUCKETS - 1] = {
        let mut bounds = [Duration::ZERO; DurationHistogram::BUCKETS - 1];
        let mut i = 0;
        while i < bounds.len() {
            bounds[i] = Duration::from_micros(BOUNDS_MICROS[i]);
            i += 1;
        }
        bounds
    };

    /// The bucket a duration of `micros` microseconds falls in.
    #[inline]
    pub(crate) fn bucket_of_micros(micros: u64) -> usize {
        // The first bound not below the duration; past them all, the unbounded bucket.
        BOUNDS_MICROS.partition_point(|&bound| bound < micros)
    }

    /// The bucket `duration` falls in: the first whose bound it does not exceed
    /// (`BUCKETS - 1` above the last bound). Durations count in whole microseconds.
    ///
    /// ```
    /// use livecount_session::DurationHistogram;
    /// use std::time::Duration;
    /// assert_eq!(DurationHistogram::bucket_of(Duration::ZERO), 0);
    /// assert_eq!(DurationHistogram::bucket_of(Duration::from_millis(100)), 0);
    /// assert_eq!(DurationHistogram::bucket_of(Duration::from_millis(101)), 1);
    /// assert_eq!(DurationHistogram::bucket_of(Duration::from_secs(7200)), 13);
    /// ```
    pub fn bucket_of(duration: Duration) -> usize {
        DurationHistogram::bucket_of_micros(micros(duration))
    }

    pub(crate) fn from_parts(buckets: [u64; DurationHistogram::BUCKETS], sum_micros: u64) -> Self {
        DurationHistogram {
            buckets,
            sum_micros,
        }
    }

    /// Counts one session that lasted `duration` (for reference models and tests; a tracker
    /// records its own).
    ///
    /// ```
    /// use livecount_session::DurationHistogram;
    /// use std::time::Duration;
    ///
    /// let mut h = DurationHistogram::default();
    /// h.record(Duration::from_millis(1500));
    /// h.record(Duration::from_secs(4000));
    /// assert_eq!((h.count(), h.sum()), (2, Duration::from_millis(4_001_500)));
    /// assert_eq!(h.buckets()[3], 1); // up to 2.5 s
    /// assert_eq!(h.buckets()[13], 1); // above an hour
    /// ```
    pub fn record(&mut self, duration: Duration) {
        let micros = micros(duration);
        self.buckets[DurationHistogram::bucket_of_micros(micros)] += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
    }

    /// Sessions counted in each bucket (not cumulative), in [`BOUNDS`](Self::BOUNDS) order,
    /// the unbounded bucket last.
    pub fn buckets(&self) -> &[u64; DurationHistogram::BUCKETS] {
        &self.buckets
    }

    /// Every bucket as (upper bound, sessions at or below it): Prometheus' cumulative
    /// `_bucket{le=…}` series, the bound `None` for `+Inf`, whose count is
    /// [`count`](Self::count).
    ///
    /// ```
    /// use livecount_session::DurationHistogram;
    /// use std::time::Duration;
    ///
    /// let mut h = DurationHistogram::default();
    /// h.record(Duration::from_secs(3));
    /// let cumulative: Vec<_> = h.cumulative().collect();
    /// assert_eq!(cumulative[4], (Some(Duration::from_secs(5)), 1));
    /// assert_eq!(cumulative[3], (Some(Duration::from_millis(2500)), 0));
    /// assert_eq!(cumulative.last(), Some(&(None, 1)));
    /// ```
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        let bounds = DurationHistogram::BOUNDS.iter().map(|&b| Some(b));
        bounds
            .chain(std::iter::once(None))
            .zip(self.buckets.iter().scan(0u64, |total, &n| {
                *total += n;
                Some(*total)
            }))
    }

    /// Sessions counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their total duration, in whole microseconds.
    pub fn sum_micros(&self) -> u64 {
        self.sum_micros
    }

    /// Their total duration in seconds, as every exposition writes it (Prometheus `_sum`,
    /// OTLP's histogram sum): the microseconds divided by 10⁶ in one correctly rounded step.
    /// (`sum().as_secs_f64()` adds whole seconds and a fraction, and can differ in the last
    /// bit: 1.210692 s reads 1.2106919999999999.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_session::DurationHistogram;
    ///
    /// let mut h = DurationHistogram::default();
    /// h.record(Duration::from_micros(1_210_692));
    /// assert_eq!(h.sum_secs(), 1.210692);
    /// ```
    pub fn sum_secs(&self) -> f64 {
        self.sum_micros as f64 / 1e6
    }

    /// Their total duration.
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_micros)
    }

    /// Adds `other`'s sessions to these (a fleet's, or every reason's).
    pub fn merge(&mut self, other: &DurationHistogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *mine += theirs;
        }
        self.sum_micros = self.sum_micros.saturating_add(other.sum_micros);
    }
}

/// `duration` in whole microseconds, saturating.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

impl fmt::Debug for DurationHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurationHistogram")
            .field("count", &self.count())
            .field("sum", &self.sum())
            .field("buckets", &self.buckets)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_on_a_bound_is_in_that_bounds_bucket() {
        for (i, bound) in DurationHistogram::BOUNDS.iter().enumerate() {
            assert_eq!(DurationHistogram::bucket_of(*bound), i, "{bound:?}");
            let above = *bound + Duration::from_micros(1);
            assert_eq!(DurationHistogram::bucket_of(above), i + 1, "{above:?}");
        }
        assert_eq!(DurationHistogram::bucket_of(Duration::MAX), 13);
    }

    #[test]
    fn bounds_increase_and_end_at_an_hour() {
        assert!(DurationHistogram::BOUNDS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(DurationHistogram::BOUNDS[0], Duration::from_millis(100));
        assert_eq!(DurationHistogram::BOUNDS[12], Duration::from_secs(3600));
    }

    #[test]
    fn merge_adds_buckets_and_sums() {
        let mut a = DurationHistogram::default();
        a.record(Duration::from_secs(1));
        let mut b = a;
        b.record(Duration::from_secs(700));
        a.merge(&b);
        assert_eq!((a.count(), a.sum()), (3, Duration::from_secs(702)));
        assert_eq!((a.buckets()[2], a.buckets()[11]), (2, 1));
    }
}
