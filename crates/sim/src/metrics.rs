//! Collects a run's metrics: assignments, latencies, fleet samples, counter accuracy.

use std::collections::BTreeMap;

use crate::backend::Backend;
use crate::session_plan::EndReason;
use crate::sim_result::{CdfPoint, CounterAccuracy, Percentiles, SpreadSample, Summary};

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
}

impl Collector {
    /// Sessions assigned and not yet ended.
    pub(crate) fn open(&self) -> u64 {
        self.summary.assigned - self.ended.iter().sum::<u64>()
    }

    pub(crate) fn assigned(&mut self, overloaded: bool, startup_ms: f64, first_ms: f64) {
        self.summary.assigned += 1;
        self.summary.overloaded_assignments += u64::from(overloaded);
        self.startup.push(startup_ms as f32);
        self.first_stream.push(first_ms as f32);
    }

    pub(crate) fn ended(&mut self, reason: EndReason) {
        self.ended[reason as usize] += 1;
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
        s.overloaded_time_share = ratio(self.over_samples, self.backend_samples);
        let samples = self.spread.len().max(1) as f64;
        s.spread_cv_mean = self.cv_sum / samples;
        s.spread_range_mean = self.range_sum / samples;
        s.spread_peak_ratio_mean = self.peak_ratio_sum / samples;
        self.startup.sort_unstable_by(f32::total_cmp);
        self.first_stream.sort_unstable_by(f32::total_cmp);
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

/// Nearest-rank percentile of sorted values.
pub(crate) fn quantile(sorted: &[f32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1])
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

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f32> = (1..=100).map(|x| x as f32).collect();
        let p = percentiles(&v);
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        assert_eq!(quantile(&[7.0], 0.5), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
