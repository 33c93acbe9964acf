//! One point of the sweep, one metric: the best session-aware policy against the best plain
//! one, as a per-seed paired difference (every policy replays the same workload on a seed),
//! and where along the sweep that difference starts to clear its 95 % interval.
//!
//! The interval is the report's: each difference is handed to [`report::combine`] as the
//! value of a one-policy run, so the sweep has no interval calculation of its own.

use livecount_sim::report;
use livecount_sim::{MetricStats, PolicyResult, ScenarioResult, Summary};
use serde::{Deserialize, Serialize};

/// Policies that place by a session count (reported, or their own slots), alone or with
/// utilisation in the hybrid capacity model.
pub(crate) const SESSION_AWARE: [&str; 4] = [
    "hybrid_p2c",
    "hybrid_weighted",
    "p2c_sessions",
    "static_slots",
];

/// Policies that do not count sessions: arrivals (QPS), CPU, and gRPC WRR fed
/// `qps / utilisation`.
pub(crate) const PLAIN: [&str; 3] = ["least_request", "least_cpu", "grpc_wrr"];

/// Envoy's least request: the proxy's own count of its open streams, the baseline a proxy
/// gives for free; compared on its own.
pub(crate) const PROXY_COUNTED: &str = "least_request_bias";

/// The headline metrics the sweep compares; lower is better for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    /// Share of assignments to a backend above target utilisation.
    Overloaded,
    /// 99th percentile of the time to first stream, milliseconds.
    FirstStreamP99,
}

impl Metric {
    /// Both, in report order.
    pub(crate) const ALL: [Self; 2] = [Self::Overloaded, Self::FirstStreamP99];

    /// The report column's short name, under which `report::combine` files its statistics.
    pub(crate) fn short(self) -> &'static str {
        match self {
            Self::Overloaded => "ovl-asg%",
            Self::FirstStreamP99 => "first99",
        }
    }

    /// A header for tables and plots.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Self::Overloaded => "overloaded assignments (%)",
            Self::FirstStreamP99 => "first stream p99 (ms)",
        }
    }

    /// The metric named `short`, if the sweep compares it.
    pub(crate) fn from_short(short: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.short() == short)
    }

    /// One run's value, read where the report's column reads it (a test checks they agree).
    fn value(self, s: &Summary) -> f64 {
        match self {
            Self::Overloaded => s.overloaded_rate,
            Self::FirstStreamP99 => s.first_stream_ms.p99,
        }
    }

    /// A summary whose column for this metric reads `v`.
    fn summary_with(self, v: f64) -> Summary {
        let mut s = Summary::default();
        match self {
            Self::Overloaded => s.overloaded_rate = v,
            Self::FirstStreamP99 => s.first_stream_ms.p99 = v,
        }
        s
    }

    /// A value (or a difference) as the tables print it: percent with two decimals,
    /// milliseconds whole.
    pub(crate) fn format(self, v: f64) -> String {
        match self {
            Self::Overloaded => format!("{:.2}", v * 100.0),
            Self::FirstStreamP99 => format!("{v:.0}"),
        }
    }

    /// `mean ± half-width`, formatted.
    pub(crate) fn format_stats(self, m: &MetricStats) -> String {
        format!("{} ± {}", self.format(m.mean), self.format(m.half_width))
    }
}

/// One metric at one point: the best (lowest mean) session-aware policy against the best
/// baseline, and the per-seed difference `baseline − session-aware` (positive: the
/// session-aware policy is better).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Contrast {
    /// The metric's short name (`ovl-asg%`, `first99`).
    pub(crate) metric: String,
    /// The session-aware policy with the lowest mean.
    pub(crate) aware: String,
    /// Its statistics over the seeds.
    pub(crate) aware_stats: MetricStats,
    /// The baseline policy with the lowest mean.
    pub(crate) baseline: String,
    /// Its statistics over the seeds.
    pub(crate) baseline_stats: MetricStats,
    /// Mean and 95 % interval of `baseline − aware`, paired seed by seed.
    pub(crate) difference: MetricStats,
}

impl Contrast {
    /// The contrast on `metric` between the best of `aware` and the best of `baseline`,
    /// from one result per seed (the same policies in the same order in each) and their
    /// combination (`report::combine`), whose means pick the best of each camp.
    ///
    /// # Panics
    ///
    /// When a camp has no policy in the runs, or `runs` is empty.
    pub(crate) fn between(
        runs: &[ScenarioResult],
        combined: &ScenarioResult,
        metric: Metric,
        aware: &[&str],
        baseline: &[&str],
    ) -> Self {
        let (aware, aware_stats) = best(combined, metric, aware);
        let (baseline, baseline_stats) = best(combined, metric, baseline);
        let differences: Vec<f64> = runs
            .iter()
            .map(|r| metric.value(summary(r, &baseline)) - metric.value(summary(r, &aware)))
            .collect();
        Self {
            metric: metric.short().to_owned(),
            aware,
            aware_stats,
            baseline,
            baseline_stats,
            difference: interval(metric, &differences),
        }
    }

    /// The session-aware policy is better: the difference's interval lies above zero.
    pub(crate) fn pays(&self) -> bool {
        self.difference.interval().0 > 0.0
    }

    /// The baseline is better: the difference's interval lies below zero.
    pub(crate) fn costs(&self) -> bool {
        self.difference.interval().1 < 0.0
    }

    /// A word for the table: `aware`, `baseline` or `≈` (the interval holds zero).
    pub(crate) fn verdict(&self) -> &'static str {
        if self.pays() {
            "aware"
        } else if self.costs() {
            "baseline"
        } else {
            "≈"
        }
    }
}

/// The smallest point from which session-awareness pays at every larger point too, given
/// `(concurrency, pays)` for each point; `None` when it does not pay at the largest.
pub(crate) fn crossover(points: &[(u32, bool)]) -> Option<u32> {
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.0);
    let mut from = None;
    for &(concurrency, pays) in sorted.iter().rev() {
        if !pays {
            break;
        }
        from = Some(concurrency);
    }
    from
}

/// The policy of `camp` with the lowest mean on `metric`, and its statistics.
fn best(combined: &ScenarioResult, metric: Metric, camp: &[&str]) -> (String, MetricStats) {
    let stats = combined
        .across_seeds
        .as_ref()
        .expect("a combination of several seeds");
    stats
        .policies
        .iter()
        .filter(|p| camp.contains(&p.policy.as_str()))
        .filter_map(|p| {
            let m = p.metrics.iter().find(|m| m.metric == metric.short())?;
            Some((p.policy.clone(), m.clone()))
        })
        .min_by(|a, b| a.1.mean.total_cmp(&b.1.mean))
        .unwrap_or_else(|| panic!("no policy of {camp:?} in the runs"))
}

/// The summary of the policy called `name` in one run.
fn summary<'a>(run: &'a ScenarioResult, name: &str) -> &'a Summary {
    &run.policies
        .iter()
        .find(|p| p.policy == name)
        .unwrap_or_else(|| panic!("{name} did not run"))
        .summary
}

/// Mean and 95 % interval of `values` by the report's own statistics: each value becomes
/// one seed's run of a single pseudo-policy, and `report::combine` does the rest.
fn interval(metric: Metric, values: &[f64]) -> MetricStats {
    let runs: Vec<ScenarioResult> = values
        .iter()
        .zip(0..)
        .map(|(&v, seed)| ScenarioResult {
            scenario: "difference".to_owned(),
            description: String::new(),
            seed,
            backends: 0,
            duration_s: 0.0,
            target_utilisation: 0.0,
            policies: vec![PolicyResult {
                policy: "difference".to_owned(),
                summary: metric.summary_with(v),
                spread: Vec::new(),
                startup_cdf: Vec::new(),
                first_stream_cdf: Vec::new(),
                events: 0,
                wall_s: 0.0,
            }],
            across_seeds: None,
        })
        .collect();
    let combined = report::combine(runs);
    combined
        .across_seeds
        .and_then(|a| a.policies.into_iter().next())
        .and_then(|p| p.metrics.into_iter().find(|m| m.metric == metric.short()))
        .expect("combine keeps every column")
}

#[cfg(test)]
mod tests {
    use livecount_sim::{Scenario, run};

    use super::*;

    /// One seed's run: each (policy, overloaded share, first-stream p99).
    fn seed_run(seed: u64, values: &[(&str, f64, f64)]) -> ScenarioResult {
        ScenarioResult {
            scenario: "hand".to_owned(),
            description: String::new(),
            seed,
            backends: 1,
            duration_s: 1.0,
            target_utilisation: 0.8,
            policies: values
                .iter()
                .map(|&(name, ovl, p99)| {
                    let mut summary = Metric::Overloaded.summary_with(ovl);
                    summary.first_stream_ms.p99 = p99;
                    PolicyResult {
                        policy: name.to_owned(),
                        summary,
                        spread: Vec::new(),
                        startup_cdf: Vec::new(),
                        first_stream_cdf: Vec::new(),
                        events: 0,
                        wall_s: 0.0,
                    }
                })
                .collect(),
            across_seeds: None,
        }
    }

    /// The overloaded-share contrast of a point whose seeds give the session-aware pair
    /// (hybrid_p2c, static_slots) and the plain pair (least_cpu, grpc_wrr) these shares.
    fn point(seeds: &[[f64; 4]]) -> Contrast {
        let runs: Vec<ScenarioResult> = seeds
            .iter()
            .zip(0..)
            .map(|(v, seed)| {
                seed_run(
                    seed,
                    &[
                        ("hybrid_p2c", v[0], 0.0),
                        ("static_slots", v[1], 0.0),
                        ("least_cpu", v[2], 0.0),
                        ("grpc_wrr", v[3], 0.0),
                    ],
                )
            })
            .collect();
        let combined = report::combine(runs.clone());
        Contrast::between(&runs, &combined, Metric::Overloaded, &SESSION_AWARE, &PLAIN)
    }

    #[test]
    fn the_difference_is_paired_signed_and_judged_by_its_interval() {
        // 100: the plain policy is clearly better (difference about −0.02).
        let small = point(&[
            [0.05, 0.06, 0.03, 0.09],
            [0.04, 0.05, 0.02, 0.08],
            [0.06, 0.07, 0.04, 0.09],
        ]);
        assert_eq!(
            (small.aware.as_str(), small.baseline.as_str()),
            ("hybrid_p2c", "least_cpu")
        );
        assert!((small.difference.mean + 0.02).abs() < 1e-12, "{small:?}");
        assert!(small.costs() && !small.pays(), "{small:?}");
        assert_eq!(small.verdict(), "baseline");
        // 300: a positive mean (+0.01) whose interval holds zero.
        let middle = point(&[
            [0.05, 0.09, 0.09, 0.09],
            [0.05, 0.09, 0.02, 0.09],
            [0.05, 0.09, 0.07, 0.09],
        ]);
        assert!(middle.difference.mean > 0.0, "{middle:?}");
        assert!(!middle.pays() && !middle.costs(), "{middle:?}");
        assert_eq!(middle.verdict(), "≈");
        // 1 000: the seeds disagree wildly on the level (0.01 … 0.30) but every one has
        // static slots 0.01 below least CPU: unpaired intervals overlap, the paired one is
        // exactly 0.01 ± 0.
        let large = point(&[
            [0.50, 0.01, 0.02, 0.60],
            [0.50, 0.15, 0.16, 0.60],
            [0.50, 0.29, 0.30, 0.60],
        ]);
        assert_eq!(
            (large.aware.as_str(), large.baseline.as_str()),
            ("static_slots", "least_cpu")
        );
        let (lo, hi) = large.aware_stats.interval();
        assert!(lo <= large.baseline_stats.mean && large.baseline_stats.mean <= hi);
        assert!((large.difference.mean - 0.01).abs() < 1e-12, "{large:?}");
        assert!(large.difference.half_width < 1e-12, "{large:?}");
        assert!(large.pays(), "{large:?}");
        let sweep = [
            (1_000, large.pays()),
            (100, small.pays()),
            (300, middle.pays()),
            (3_000, true),
        ];
        assert_eq!(crossover(&sweep), Some(1_000));
        // Paying below a point where it does not is no crossover from there.
        assert_eq!(
            crossover(&[(100, true), (300, false), (1_000, true)]),
            Some(1_000)
        );
        assert_eq!(crossover(&[(100, true), (300, true)]), Some(100));
        assert_eq!(crossover(&[(100, true), (300, false)]), None);
        assert_eq!(crossover(&[]), None);
    }

    #[test]
    fn the_interval_is_the_reports() {
        // 1, 2, 3, 4, 5: mean 3, half-width t(0.975, 4) × √(2.5 / 5) = 2.776 × 0.707.
        let m = interval(Metric::FirstStreamP99, &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((m.mean, m.n), (3.0, 5));
        assert!(
            (m.half_width - 2.776 * 0.5f64.sqrt()).abs() < 1e-12,
            "{m:?}"
        );
    }

    #[test]
    fn values_are_read_where_the_report_reads_them() {
        let s = Scenario::from_toml_str(
            "description = 'x'\nduration_s = 120\n[arrivals]\ntarget_concurrent = 60\n\
             [sessions]\nduration = 'exponential'\nmean_s = 30\nspeaking_cost = 0.07\n\
             [[backends]]\ncount = 2",
            "inline.toml",
        )
        .expect("valid");
        let r = run(&s, &["random".to_owned()], &mut |_, _| {});
        let one = report::combine(vec![r.clone(), r.clone()]);
        let stats = &one.across_seeds.as_ref().unwrap().policies[0].metrics;
        for metric in Metric::ALL {
            let m = stats.iter().find(|m| m.metric == metric.short()).unwrap();
            assert_eq!(m.mean, metric.value(&r.policies[0].summary), "{metric:?}");
            assert_eq!(Metric::from_short(metric.short()), Some(metric));
        }
        assert!(r.policies[0].summary.overloaded_rate > 0.0, "a loaded case");
    }
}
