//! [`PrequalEstimator`]: the latency half of a Prequal probe — the median latency of
//! fresh samples taken at about the current RIF — recorded without a lock or an
//! allocation.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use livecount_capacity::{PrequalLatency, PrequalSample};

use crate::PrequalProbe;
use crate::prequal_sample::{self, MAX_LATENCY_US, STAMP_MASK, Sample};

/// Records `(RIF at start, latency)` samples, one per session start, from any number of
/// threads without a lock or an allocation, and answers the latency half of a Prequal
/// probe: the median latency of fresh samples taken at about a given RIF.
///
/// # Which samples answer
///
/// The estimator holds the last [`CAPACITY`](Self::CAPACITY) samples recorded. A probe at
/// RIF `r` ([`probe`](Self::probe)):
///
/// 1. takes the **fresh** samples: recorded at most [`max_age`](Self::max_age) ago
///    (default [`DEFAULT_MAX_AGE`](Self::DEFAULT_MAX_AGE), counted in whole seconds);
/// 2. keeps those **near** `r`: `|rif − r| ≤ max(1, r / 4)` (integer division: within
///    25 %, and always ±1);
/// 3. of those, the [`NEAREST`](Self::NEAREST) closest in RIF, plus every other sample as
///    close as the last of them (ties are all in, so the answer depends only on which
///    samples the ring holds, not on where they sit in it);
/// 4. answers their **median** latency (the mean of the two middle ones for an even
///    count) in [`PrequalProbe::latency_ms`], or `None` when no sample is near.
///
/// Steps 1–4 are [`livecount_capacity::PrequalLatency::estimate`], the one selection the
/// simulator's backends answer their probes with too (`lbsim`'s Prequal policies).
///
/// RIFs above [`MAX_RIF`](Self::MAX_RIF) and latencies above
/// [`MAX_LATENCY`](Self::MAX_LATENCY) are recorded as those maxima, and a probe above
/// `MAX_RIF` looks for samples near `MAX_RIF` (its reply still says the RIF asked).
/// Latencies are kept in whole microseconds (truncated).
///
/// ```
/// use std::time::Duration;
/// use livecount_report::PrequalEstimator;
///
/// let estimator = PrequalEstimator::new();
/// assert_eq!(estimator.probe(3).latency_ms, None); // nothing recorded yet
/// for (rif, ms) in [(2, 30), (3, 40), (3, 44), (4, 50), (40, 900)] {
///     estimator.record(rif, Duration::from_millis(ms));
/// }
/// let probe = estimator.probe(3);
/// // RIF 3 looks at RIFs 2..=4; the sample at RIF 40 is too far to count.
/// assert_eq!(probe.latency_ms, Some(42.0)); // the median of 30, 40, 44 and 50 ms
/// assert_eq!((probe.rif, probe.samples, probe.samples_used), (3, 5, 4));
/// ```
///
/// Shared by every session's task:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use livecount_report::PrequalEstimator;
///
/// let estimator = Arc::new(PrequalEstimator::new());
/// let threads: Vec<_> = (0..4u64)
///     .map(|t| {
///         let estimator = Arc::clone(&estimator);
///         std::thread::spawn(move || {
///             for _ in 0..100 {
///                 estimator.record(10, Duration::from_micros(1000 + t));
///             }
///         })
///     })
///     .collect();
/// threads.into_iter().for_each(|t| t.join().unwrap());
/// let probe = estimator.probe(10);
/// assert_eq!(probe.samples, 128); // the last 128 of the 400
/// let ms = probe.latency_ms.unwrap();
/// assert!((1.0..=1.003).contains(&ms), "{ms}");
/// ```
///
/// # Correctness
///
/// A sample is one `AtomicU64` word (presence, RIF, latency, a time stamp), so a reader
/// sees each slot's old sample or its new one, never half of each: no sample can be torn.
/// What a concurrent probe may see is a ring a few samples behind or ahead of the
/// writers — an answer over a window shifted by the samples in flight, each of them one
/// that was really recorded. Two writers land in the same slot only if
/// [`CAPACITY`](Self::CAPACITY) other samples are recorded between one's claim and its
/// store; one of the two is then lost, which the median does not notice. The unit tests
/// check every answer against a `Vec`-based model (proptest) and a reader racing four
/// writers never decoding a sample nobody recorded; `tests/prequal_record.rs` checks that
/// recording allocates nothing.
///
/// Time stamps are seconds since the estimator was made, modulo 2¹⁶ (about 18 hours). A
/// probe clears the samples it finds expired, so a sample can only come back as fresh
/// if nothing probes for about 9 hours (2¹⁵ s less `max_age`); a
/// [`LoadBoard`](crate::LoadBoard) probes at every report, at least hourly.
///
/// # Performance characteristics
///
/// [`record`](Self::record): one `fetch_add` on the cursor, one store into a slot, one
/// clock read; no lock, no allocation, no loop. The cursor is one word every recorder
/// updates: fine at session-start rates (it is not padded to a cache line of its own for
/// that reason). [`probe`](Self::probe): reads the 128 slots into one small `Vec` and
/// selects from it in linear time (no sort) — a few microseconds, once per report.
pub struct PrequalEstimator {
    slots: [AtomicU64; PrequalEstimator::CAPACITY],
    /// Tickets handed out: the next sample goes to slot `cursor % CAPACITY`.
    cursor: AtomicU64,
    /// Stamps count seconds from here.
    origin: Instant,
    /// A sample older than this many whole seconds is stale, 1..=3600.
    max_age_secs: u16,
}

impl PrequalEstimator {
    /// Samples held: the last this many recorded.
    pub const CAPACITY: usize = PrequalLatency::SAMPLES;
    /// Samples nearest in RIF that the median is taken over (more on ties).
    pub const NEAREST: usize = PrequalLatency::NEAREST;
    /// The largest RIF kept (2²⁰ − 1); larger ones are recorded as this.
    pub const MAX_RIF: u64 = prequal_sample::MAX_RIF;
    /// The longest latency kept (2²⁷ − 1 µs, about 134 s); longer ones are recorded as this.
    pub const MAX_LATENCY: Duration = Duration::from_micros(MAX_LATENCY_US);
    /// How long a sample stays fresh unless [`with_max_age`](Self::with_max_age) says.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(PrequalLatency::DEFAULT_MAX_AGE_S);
    /// The longest `max_age` (an hour): stamps wrap after about 18 hours.
    pub const LONGEST_MAX_AGE: Duration = Duration::from_secs(3600);

    /// An empty estimator whose samples stay fresh for
    /// [`DEFAULT_MAX_AGE`](Self::DEFAULT_MAX_AGE).
    ///
    /// ```
    /// let estimator = livecount_report::PrequalEstimator::new();
    /// assert_eq!(estimator.max_age().as_secs(), 120);
    /// assert_eq!(estimator.probe(0).samples, 0);
    /// ```
    pub fn new() -> Self {
        PrequalEstimator {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
            cursor: AtomicU64::new(0),
            origin: Instant::now(),
            max_age_secs: secs_u16(Self::DEFAULT_MAX_AGE),
        }
    }

    /// The same with samples fresh for `max_age`, in whole seconds, clamped to 1 s ..=
    /// [`LONGEST_MAX_AGE`](Self::LONGEST_MAX_AGE).
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_report::PrequalEstimator;
    ///
    /// let estimator = PrequalEstimator::new().with_max_age(Duration::from_secs(30));
    /// assert_eq!(estimator.max_age(), Duration::from_secs(30));
    /// let clamped = PrequalEstimator::new().with_max_age(Duration::ZERO);
    /// assert_eq!(clamped.max_age(), Duration::from_secs(1));
    /// ```
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age_secs = secs_u16(max_age);
        self
    }

    /// How long a sample stays fresh.
    pub fn max_age(&self) -> Duration {
        Duration::from_secs(u64::from(self.max_age_secs))
    }

    /// Records a session that started with `rif` sessions open (itself included) and
    /// took `latency` (the agent: to its first response chunk), now. Wait-free.
    pub fn record(&self, rif: u64, latency: Duration) {
        self.record_at(rif, latency, Instant::now());
    }

    /// Records a sample as if at `at` (an instant before the estimator was made counts
    /// as its first second).
    pub fn record_at(&self, rif: u64, latency: Duration, at: Instant) {
        let sample = Sample {
            rif: rif.min(Self::MAX_RIF),
            latency_us: u64::try_from(latency.as_micros())
                .unwrap_or(u64::MAX)
                .min(MAX_LATENCY_US),
            stamp: self.stamp(at),
        };
        // Relaxed: the ticket only picks a slot; `fetch_add` makes every ticket unique,
        // and nothing else is published through the cursor.
        let ticket = self.cursor.fetch_add(1, Ordering::Relaxed);
        let slot = &self.slots[(ticket % Self::CAPACITY as u64) as usize];
        // Relaxed: the whole sample is in this one word; a reader needs nothing written
        // before it, so there is nothing to order it after.
        slot.store(sample.pack(), Ordering::Relaxed);
    }

    /// The probe reply at `rif` now: see [which samples answer](Self#which-samples-answer).
    /// Clears the expired samples it finds.
    pub fn probe(&self, rif: u64) -> PrequalProbe {
        self.probe_at(rif, Instant::now())
    }

    /// The probe reply at `rif` as if at `now`.
    pub fn probe_at(&self, rif: u64, now: Instant) -> PrequalProbe {
        let now = self.stamp(now);
        let mut fresh = Vec::with_capacity(Self::CAPACITY);
        for slot in &self.slots {
            // Relaxed: see `record_at`; each slot is read on its own.
            let word = slot.load(Ordering::Relaxed);
            let Some(sample) = Sample::unpack(word) else {
                continue;
            };
            if sample.expired(now, self.max_age_secs) {
                // Relaxed: clears the slot only if it still holds this very sample; a
                // writer that stored a new one first keeps it.
                let _ = slot.compare_exchange(word, 0, Ordering::Relaxed, Ordering::Relaxed);
                continue;
            }
            // Not expired, so a wrapped difference beyond `max_age` is a stamp ahead of
            // this reader's clock (its writer read the clock later): age 0.
            let age = now.wrapping_sub(sample.stamp);
            fresh.push(PrequalSample {
                rif: sample.rif,
                latency_us: sample.latency_us,
                age_s: u64::from(if age <= self.max_age_secs { age } else { 0 }),
            });
        }
        // A probe above `MAX_RIF` looks near `MAX_RIF`, where such samples were recorded.
        let target = rif.min(Self::MAX_RIF);
        let estimate = PrequalLatency::estimate(target, &mut fresh, u64::from(self.max_age_secs));
        PrequalProbe {
            rif,
            latency_ms: estimate.median_us.map(|us| us / 1000.0),
            samples: estimate.fresh as u32,
            samples_used: estimate.used as u32,
        }
    }

    /// Seconds from the origin to `at`, modulo 2¹⁶.
    fn stamp(&self, at: Instant) -> u16 {
        let secs = at.saturating_duration_since(self.origin).as_secs();
        (secs & STAMP_MASK) as u16
    }
}

/// `d` in whole seconds, clamped to 1 ..= the longest max age.
fn secs_u16(d: Duration) -> u16 {
    let longest = PrequalEstimator::LONGEST_MAX_AGE.as_secs();
    d.as_secs().clamp(1, longest) as u16
}

impl Default for PrequalEstimator {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PrequalEstimator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrequalEstimator")
            // Relaxed: a statistic for the eye.
            .field("recorded", &self.cursor.load(Ordering::Relaxed))
            .field("max_age", &self.max_age())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX_RIF: u64 = PrequalEstimator::MAX_RIF;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The instant `secs` after `e`'s origin.
    fn at(e: &PrequalEstimator, secs: u64) -> Instant {
        e.origin + Duration::from_secs(secs)
    }

    fn latency(e: &PrequalEstimator, rif: u64) -> Option<f64> {
        e.probe(rif).latency_ms
    }

    #[test]
    fn no_samples_means_no_latency() {
        let e = PrequalEstimator::new();
        for rif in [0, 1, 12, MAX_RIF, u64::MAX] {
            assert_eq!(e.probe(rif), PrequalProbe::unknown_latency(rif));
        }
    }

    #[test]
    fn samples_only_at_other_rifs_mean_no_latency() {
        let e = PrequalEstimator::new();
        for rif in [0, 20, 30] {
            e.record(rif, ms(5));
        }
        // 10 looks at 8..=12; 2 looks at 1..=3; 100 at 75..=125.
        for rif in [10, 2, 100] {
            let probe = e.probe(rif);
            assert_eq!(
                (probe.latency_ms, probe.samples, probe.samples_used),
                (None, 3, 0)
            );
        }
    }

    #[test]
    fn near_is_within_a_quarter_and_always_one() {
        let e = PrequalEstimator::new();
        e.record(6, ms(6));
        e.record(10, ms(10));
        e.record(5, ms(500));
        e.record(11, ms(1100));
        assert_eq!(latency(&e, 8), Some(8.0), "6 and 10 are within 2 of 8");
        let e = PrequalEstimator::new();
        e.record(1, ms(1));
        e.record(2, ms(2));
        assert_eq!(latency(&e, 0), Some(1.0), "0 looks at 0..=1");
        assert_eq!(latency(&e, 3), Some(2.0), "3 looks at 2..=4");
        let e = PrequalEstimator::new();
        e.record(75, ms(75));
        e.record(74, ms(74));
        e.record(126, ms(126));
        assert_eq!(latency(&e, 100), Some(75.0), "100 looks at 75..=125");
    }

    #[test]
    fn the_nearest_sixteen_answer_with_every_tie() {
        let e = PrequalEstimator::new();
        for _ in 0..10 {
            e.record(40, ms(1));
            e.record(41, ms(100));
        }
        // 10 at distance 0, then 6 more at 1: all 10 at distance 1 tie with the 16th.
        let probe = e.probe(40);
        assert_eq!((probe.samples, probe.samples_used), (20, 20));
        assert_eq!(probe.latency_ms, Some(50.5));
        let e = PrequalEstimator::new();
        for _ in 0..16 {
            e.record(40, ms(5));
        }
        for _ in 0..10 {
            e.record(39, ms(500));
        }
        let probe = e.probe(40);
        assert_eq!((probe.samples_used, probe.latency_ms), (16, Some(5.0)));
        // From 39 (±9) the 16th nearest is at distance 1, so all 26 count.
        let probe = e.probe(39);
        assert_eq!((probe.samples_used, probe.latency_ms), (26, Some(5.0)));
    }

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_one() {
        let e = PrequalEstimator::new();
        for l in [9, 1, 5] {
            e.record(4, ms(l));
        }
        assert_eq!(latency(&e, 4), Some(5.0));
        e.record(4, ms(7));
        assert_eq!(latency(&e, 4), Some(6.0));
    }

    #[test]
    fn huge_values_saturate() {
        let e = PrequalEstimator::new();
        e.record(u64::MAX, Duration::MAX);
        let top = PrequalEstimator::MAX_LATENCY.as_micros() as f64 / 1000.0;
        assert_eq!(top, 134_217.727);
        // 838 860 is the lowest RIF whose quarter (209 715) reaches MAX_RIF.
        for rif in [u64::MAX, MAX_RIF + 1, MAX_RIF, 838_860] {
            let probe = e.probe(rif);
            assert_eq!((probe.rif, probe.latency_ms), (rif, Some(top)), "{rif}");
        }
        assert_eq!(latency(&e, 838_859), None);
        // A latency just under the limit is kept exactly, to the microsecond.
        e.record(3, PrequalEstimator::MAX_LATENCY - Duration::from_micros(1));
        assert_eq!(latency(&e, 3), Some(134_217.726));
        e.record(3, Duration::from_nanos(999)); // truncated to 0 µs
        e.record(3, Duration::from_nanos(999));
        assert_eq!(latency(&e, 3), Some(0.0));
    }

    #[test]
    fn the_ring_holds_the_last_128() {
        let e = PrequalEstimator::new();
        for _ in 0..72 {
            e.record(5, ms(1));
        }
        for _ in 0..128 {
            e.record(5, ms(2));
        }
        let probe = e.probe(5);
        assert_eq!((probe.samples, probe.latency_ms), (128, Some(2.0)));
        e.record(5, ms(1));
        assert_eq!(e.probe(5).samples, 128);
    }

    #[test]
    fn samples_expire_after_max_age_and_are_cleared() {
        let e = PrequalEstimator::new().with_max_age(Duration::from_secs(60));
        e.record_at(5, ms(7), at(&e, 10));
        assert_eq!(e.probe_at(5, at(&e, 70)).latency_ms, Some(7.0), "60 s old");
        // A stamp ahead of the reader's clock is fresh, not 18 hours old.
        assert_eq!(e.probe_at(5, at(&e, 9)).latency_ms, Some(7.0));
        assert_eq!(e.probe_at(5, at(&e, 71)), PrequalProbe::unknown_latency(5));
        // Cleared: even a probe back in its minute finds nothing.
        assert_eq!(e.probe_at(5, at(&e, 20)).samples, 0);
        // Uncleared, a sample comes back once the stamps wrap (the documented limit).
        e.record_at(5, ms(8), at(&e, 100));
        assert_eq!(e.probe_at(5, at(&e, 100 + 65_536)).latency_ms, Some(8.0));
    }

    #[test]
    fn max_age_is_whole_seconds_clamped() {
        let age = |d| PrequalEstimator::new().with_max_age(d).max_age();
        assert_eq!(age(Duration::from_millis(2_900)), Duration::from_secs(2));
        assert_eq!(age(Duration::from_secs(3_601)), Duration::from_secs(3_600));
        assert_eq!(age(Duration::MAX), Duration::from_secs(3_600));
        assert_eq!(age(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            PrequalEstimator::default().max_age(),
            Duration::from_secs(120)
        );
        let debug = format!("{:?}", PrequalEstimator::new());
        assert!(debug.contains("recorded: 0"), "{debug}");
    }

    /// A reader racing four writers decodes only samples that were recorded: each writer
    /// records latency = 7 × RIF + 3, so a sample mixing two words would break it.
    #[test]
    fn a_racing_reader_never_sees_a_sample_nobody_recorded() {
        let e = PrequalEstimator::new();
        let (writers, each) = (4u64, 20_000u64);
        std::thread::scope(|s| {
            for t in 0..writers {
                let e = &e;
                s.spawn(move || {
                    for i in 0..each {
                        let rif = (t * each + i) % (MAX_RIF + 1);
                        e.record(rif, Duration::from_micros(7 * rif + 3));
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..2_000 {
                    for slot in &e.slots {
                        if let Some(s) = Sample::unpack(slot.load(Ordering::Relaxed)) {
                            assert_eq!(s.latency_us, 7 * s.rif + 3, "{s:?}");
                        }
                    }
                }
            });
        });
        assert_eq!(e.cursor.load(Ordering::Relaxed), writers * each);
        assert_eq!(e.probe(0).samples, 128, "every slot written");
    }

    #[test]
    fn the_estimator_is_send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<PrequalEstimator>();
    }

    // === the model ===

    #[derive(Debug, Clone)]
    enum Op {
        Record { rif: u64, latency_us: u64 },
        Wait { secs: u64 },
        Probe { rif: u64 },
    }

    fn rif() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 0..48u64,
            1 => MAX_RIF - 3..=MAX_RIF + 3,
            1 => Just(u64::MAX),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        let latency = prop_oneof![9 => 0..5_000u64, 1 => Just(u64::MAX)];
        prop_oneof![
            8 => (rif(), latency).prop_map(|(rif, latency_us)| Op::Record { rif, latency_us }),
            1 => (0..40u64).prop_map(|secs| Op::Wait { secs }),
            3 => rif().prop_map(|rif| Op::Probe { rif }),
        ]
    }

    /// The estimator's definition, over every sample ever recorded as `(rif, latency µs,
    /// second)`: the last [`CAPACITY`](PrequalEstimator::CAPACITY), at their ages `now`,
    /// answered at the RIF clamped to `MAX_RIF` by the one selection,
    /// [`PrequalLatency::estimate`] (checked against its own step-by-step reference in
    /// `livecount-capacity`). What this model checks is the estimator's own part: the ring,
    /// the stamps and their expiry, the clamps, and the probe's units.
    fn model(history: &[(u64, u64, u64)], now: u64, max_age: u64, rif: u64) -> PrequalProbe {
        let last = &history[history.len().saturating_sub(PrequalEstimator::CAPACITY)..];
        let mut samples: Vec<PrequalSample> = last
            .iter()
            .map(|&(rif, latency_us, at)| PrequalSample {
                rif,
                latency_us,
                age_s: now - at,
            })
            .collect();
        let estimate = PrequalLatency::estimate(rif.min(MAX_RIF), &mut samples, max_age);
        PrequalProbe {
            rif,
            latency_ms: estimate.median_us.map(|us| us / 1e3),
            samples: u32::try_from(estimate.fresh).unwrap(),
            samples_used: u32::try_from(estimate.used).unwrap(),
        }
    }

    proptest! {
        #[test]
        fn every_probe_answers_as_the_model_does(ops in prop::collection::vec(op(), 1..400)) {
            let e = PrequalEstimator::new().with_max_age(Duration::from_secs(60));
            let (mut history, mut now) = (Vec::new(), 0u64);
            for op in ops {
                match op {
                    Op::Record { rif, latency_us } => {
                        e.record_at(rif, Duration::from_micros(latency_us), at(&e, now));
                        history.push((rif.min(MAX_RIF), latency_us.min(MAX_LATENCY_US), now));
                    }
                    Op::Wait { secs } => now += secs,
                    Op::Probe { rif } => {
                        prop_assert_eq!(e.probe_at(rif, at(&e, now)), model(&history, now, 60, rif));
                    }
                }
            }
            for rif in [0, 1, 5, 20, 47, MAX_RIF] {
                prop_assert_eq!(e.probe_at(rif, at(&e, now)), model(&history, now, 60, rif));
            }
        }
    }
}
