//! Collects a run's metrics: assignments, latencies, fleet samples, counter accuracy.

use std::collections::BTreeMap;

use crate::backend::Backend;
use crate::session_plan::EndReason;
use crate::sim_result::{
    CdfPoint, CounterAccuracy, Percentiles, RestartSummary, SpreadSample, Summary,
};

/// CDF points kept per latency distribution (for plots; percentiles use every sample).
const CDF_POINTS: usize = 200;

#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub(crate) summary: Summary,
    ended: [u64; EndReason::ALL.len()],
    startup: Vec<f32>,
    first_stream: Vec<f32>,
    spread: Vec<SpreadSample>,
    over_samples: u64,
    backend_samples: u64,
    cv_sum: f64,
    range_sum: f64,
    peak_ratio_sum: f64,
    /// A rolling restart's counts, when the scenario has one.
    restart: Option<RestartSummary>,
    /// When the restart window opened, while it is open.
    window_from: Option<f64>,
    /// Cut clients that came back (a rolling restart's or a scale-in's).
    reconnects: u64,
}

impl Collector {
    /// A collector that also counts a rolling restart's costs when `restart` is set.
    pub(crate) fn new(restart: bool) -> Self {
        Self {
            restart: restart.then(RestartSummary::default),
            ..Self::default()
        }
    }

    /// Sessions assigned and not yet ended.
    pub(crate) fn open(&self) -> u64 {
        self.summary.assigned - self.ended.iter().sum::<u64>()
    }

    pub(crate) fn assigned(&mut self, overloaded: bool, startup_ms: f64, first_ms: f64) {
        self.summary.assigned += 1;
        self.summary.overloaded_assignments += u64::from(overloaded);
        if self.window_from.is_some()
            && let Some(r) = &mut self.restart
        {
            r.window_assigned += 1;
            r.window_overloaded += u64::from(overloaded);
        }
        self.startup.push(startup_ms as f32);
        self.first_stream.push(first_ms as f32);
    }

    pub(crate) fn ended(&mut self, reason: EndReason) {
        self.ended[reason as usize] += 1;
        if reason == EndReason::Shutdown
            && let Some(r) = &mut self.restart
        {
            r.cut += 1;
        }
    }

    /// A client cut by a restart or a scale-in comes back through the balancer.
    pub(crate) fn reconnect(&mut self) {
        self.reconnects += 1;
        if let Some(r) = &mut self.restart {
            r.reconnects += 1;
        }
    }

    /// Placements asked for: arrivals and reconnects (each ends assigned, rejected or
    /// dropped).
    pub(crate) fn placements(&self) -> u64 {
        self.summary.arrivals + self.reconnects
    }

    /// Cut clients that came back so far.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// An arrival refused by a backend being restarted (already counted as rejected).
    pub(crate) fn restart_refused(&mut self) {
        if let Some(r) = &mut self.restart {
            r.refused += 1;
        }
    }

    /// The rolling restart's window opens (the first restart) or closes (the last
    /// backend is back) at `now`.
    pub(crate) fn restart_window(&mut self, open: bool, now: f64) {
        if open {
            self.window_from = Some(now);
        } else if let (Some(from), Some(r)) = (self.window_from.take(), &mut self.restart) {
            r.window_s = now - from;
        }
    }

    /// Samples the fleet at `t`: spread over alive backends and counter accuracy.
    pub(crate) fn sample(&mut self, t: f64, backends: &[Backend], target: f64) {
        let alive: Vec<&Backend> = backends.iter().filter(|b| b.alive).collect();
        self.sample_counters(backends);
        if alive.is_empty() {
            return;
        }
        let n = alive.len() as f64;
        let per_size: Vec<f64> = alive.iter().map(|b| b.active() as f64 / b.size).collect();
        let mean_per_size = per_size.iter().sum::<f64>() / n;
        let var = per_size
            .iter()
            .map(|x| (x - mean_per_size).powi(2))
            .sum::<f64>()
            / n;
        let cv = if mean_per_size > 0.0 {
            var.sqrt() / mean_per_size
        } else {
            0.0
        };
        let peak = per_size.iter().copied().fold(0.0, f64::max);
        let max = alive.iter().map(|b| b.active()).max().unwrap_or(0);
        let min = alive.iter().map(|b| b.active()).min().unwrap_or(0);
        let over = alive.iter().filter(|b| b.utilisation > target).count() as u64;
        self.over_samples += over;
        self.backend_samples += alive.len() as u64;
        self.cv_sum += cv;
        self.range_sum += (max - min) as f64;
        self.summary.spread_range_max = self.summary.spread_range_max.max(max - min);
        if mean_per_size > 0.0 {
            self.peak_ratio_sum += peak / mean_per_size;
        } else {
            self.peak_ratio_sum += 1.0;
        }
        let utilisation = alive.iter().map(|b| b.utilisation);
        let max_u = utilisation.clone().fold(0.0, f64::max);
        self.summary.peak_utilisation = self.summary.peak_utilisation.max(max_u);
        self.spread.push(SpreadSample {
            t,
            max,
            min,
            mean: alive.iter().map(|b| b.active()).sum::<u64>() as f64 / n,
            cv,
            max_utilisation: max_u,
            mean_utilisation: utilisation.sum::<f64>() / n,
            backends: alive.len() as u32,
        });
    }

    fn sample_counters(&mut self, backends: &[Backend]) {
        let (tracked, naive) = counter_errors(backends);
        let c = &mut self.summary.counter;
        c.tracked_max_error = c.tracked_max_error.max(tracked);
        c.naive_max_error = c.naive_max_error.max(naive);
    }

    /// Final accounting, after the drain.
    pub(crate) fn finish(
        mut self,
        backends: &[Backend],
    ) -> (Summary, Vec<SpreadSample>, Vec<CdfPoint>, Vec<CdfPoint>) {
        self.sample_counters(backends);
        let (tracked, naive) = counter_errors(backends);
        let s = &mut self.summary;
        s.counter = CounterAccuracy {
            tracked_final_error: tracked,
            naive_final_error: naive,
            ..s.counter
        };
        s.ended = EndReason::ALL
            .iter()
            .map(|r| (r.name().to_owned(), self.ended[*r as usize]))
            .collect::<BTreeMap<_, _>>();
        s.overloaded_rate = ratio(s.overloaded_assignments, s.assigned);
        s.restart = self.restart.map(|r| RestartSummary {
            window_overloaded_rate: ratio(r.window_overloaded, r.window_assigned),
            ..r
        });
        s.overloaded_time_share = ratio(self.over_samples, self.backend_samples);
        let samples = self.spread.len().max(1) as f64;
        s.spread_cv_mean = self.cv_sum / samples;
        s.spread_range_mean = self.range_sum / samples;
        s.spread_peak_ratio_mean = self.peak_ratio_sum / samples;
        sort_latencies(&mut self.startup);
        sort_latencies(&mut self.first_stream);
        s.startup_ms = percentiles(&self.startup);
        s.first_stream_ms = percentiles(&self.first_stream);
        let (a, b) = (cdf(&self.startup), cdf(&self.first_stream));
        (self.summary, self.spread, a, b)
    }
}

/// Sum over alive backends of |counter − truth|, for the tracked and the naive counter.
pub(crate) fn counter_errors(backends: &[Backend]) -> (u64, u64) {
    backends
        .iter()
        .filter(|b| b.alive)
        .fold((0, 0), |(t, n), b| {
            (
                t + b.tracked.abs_diff(b.active()),
                n + b.naive.abs_diff(b.active()),
            )
        })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Sorts `v` in [`f32::total_cmp`] order: an LSD radix sort on the order-preserving bit
/// pattern, four passes of 8 bits, O(n) — at scale there are ten million latencies per
/// distribution, and a comparison sort of them took a second.
pub(crate) fn sort_latencies(v: &mut [f32]) {
    if v.len() < 1024 {
        v.sort_unstable_by(f32::total_cmp);
        return;
    }
    // total_cmp's key: flip every bit of a negative, only the sign bit of a positive.
    let key = |x: f32| {
        let b = x.to_bits();
        if b >> 31 == 1 { !b } else { b | 1 << 31 }
    };
    let mut from: Vec<u32> = v.iter().map(|&x| key(x)).collect();
    let mut to = vec![0u32; from.len()];
    for shift in [0, 8, 16, 24] {
        let mut count = [0usize; 257];
        for &k in &from {
            count[((k >> shift) & 0xff) as usize + 1] += 1;
        }
        if count.contains(&from.len()) {
            continue; // every key has this digit: the pass would move nothing
        }
        for d in 0..256 {
            count[d + 1] += count[d];
        }
        for &k in &from {
            let d = ((k >> shift) & 0xff) as usize;
            to[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    for (x, k) in v.iter_mut().zip(from) {
        let b = if k >> 31 == 1 { k & !(1 << 31) } else { !k };
        *x = f32::from_bits(b);
    }
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn quantile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Percentiles {
    /// The percentiles of `values` (any order), by the simulator's own nearest-rank rule,
    /// for measurements made elsewhere (the testbed's) to be summarised alike.
    ///
    /// ```
    /// use livecount_sim::Percentiles;
    ///
    /// let p = Percentiles::of(&[5.0, 1.0, 4.0, 2.0, 3.0]);
    /// assert_eq!((p.p50, p.p95, p.max), (3.0, 5.0, 5.0));
    /// assert_eq!(Percentiles::of(&[]).p99, 0.0);
    /// ```
    pub fn of(values: &[f64]) -> Percentiles {
        let mut sorted: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        sorted.sort_by(f32::total_cmp);
        percentiles(&sorted)
    }
}

fn percentiles(sorted: &[f32]) -> Percentiles {
    Percentiles {
        p50: quantile(sorted, 0.50),
        p95: quantile(sorted, 0.95),
        p99: quantile(sorted, 0.99),
        max: sorted.last().map_or(0.0, |&x| f64::from(x)),
    }
}

fn cdf(sorted: &[f32]) -> Vec<CdfPoint> {
    if sorted.is_empty() {
        return Vec::new();
    }
    (1..=CDF_POINTS)
        .map(|k| {
            let q = k as f64 / CDF_POINTS as f64;
            CdfPoint {
                ms: quantile(sorted, q),
                q,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The radix sort orders exactly as `total_cmp` (signed zeros, negatives, ties,
        /// infinities), short inputs and long.
        #[test]
        fn latencies_sort_as_total_cmp(
            mut v in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::num::f32::ANY,
                    proptest::strategy::Just(0.0f32),
                    proptest::strategy::Just(-0.0f32),
                    0.0f32..5000.0,
                ],
                0..3000,
            )
        ) {
            let mut want = v.clone();
            want.sort_by(f32::total_cmp);
            sort_latencies(&mut v);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(bits(&v), bits(&want));
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f32> = (1..=100).map(|x| x as f32).collect();
        let p = percentiles(&v);
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
