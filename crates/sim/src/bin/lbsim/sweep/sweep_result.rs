//! What a sweep produces (`sweep.json`): per family, one [`Point`] per concurrency with the
//! contenders' statistics and the contrasts, and per metric and baseline where
//! session-awareness starts to pay.

use livecount_sim::{PolicyStats, Scenario, ScenarioResult, report};
use serde::{Deserialize, Serialize};

use super::contrast::{Contrast, Metric, PLAIN, PROXY_COUNTED, SESSION_AWARE, crossover};
use super::family::{Family, cores};

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SweepResult {
    /// The command that reproduces it.
    pub(crate) command: String,
    /// The commit `lbsim` was built from.
    pub(crate) commit: String,
    /// CPU model and cores.
    pub(crate) machine: String,
    /// The machine's label (`amd-epyc-2c`).
    pub(crate) label: String,
    /// `rustc -V`.
    pub(crate) rust: String,
    /// Seeds per point.
    pub(crate) seeds: u32,
    /// Seeds run at once.
    pub(crate) jobs: usize,
    /// Wall-clock seconds of the whole sweep.
    pub(crate) wall_s: f64,
    /// One entry per scenario family, in the order given.
    pub(crate) families: Vec<FamilyResult>,
}

/// One scenario family over every concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FamilyResult {
    /// The scenario scaled.
    pub(crate) scenario: String,
    /// Its file.
    pub(crate) file: String,
    /// Its description.
    pub(crate) description: String,
    /// Concurrent sessions per core at every point.
    pub(crate) per_core: f64,
    /// Proxies in front of the fleet (the same at every point).
    pub(crate) proxies: u32,
    /// One per concurrency, smallest first.
    pub(crate) points: Vec<Point>,
    /// Per metric and baseline, from which concurrency session-awareness pays.
    pub(crate) answers: Vec<Answer>,
}

/// One concurrency of one family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Point {
    /// The concurrency asked for.
    pub(crate) concurrency: u32,
    /// `arrivals.target_concurrent` run (the fleet's cores × sessions per core; the peak
    /// of a diurnal pattern).
    pub(crate) target_concurrent: f64,
    /// Backends in the fleet.
    pub(crate) backends: usize,
    /// Their cores (Σ size).
    pub(crate) cores: f64,
    /// The arrival window, seconds.
    pub(crate) duration_s: f64,
    /// Mean arrivals per run.
    pub(crate) arrivals: f64,
    /// Wall-clock seconds of the point's runs (every seed and policy).
    pub(crate) wall_s: f64,
    /// Every contender's statistics on the compared metrics, as `report::combine` gives them.
    pub(crate) policies: Vec<PolicyStats>,
    /// Per metric: the best session-aware policy against the best plain one, then against
    /// Envoy's least request.
    pub(crate) contrasts: Vec<Contrast>,
}

/// Where session-awareness starts to pay on one metric against one baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// The metric's short name.
    pub(crate) metric: String,
    /// `plain` (the best of least request, least CPU, gRPC WRR) or `least_request_bias`.
    pub(crate) baseline: String,
    /// The smallest concurrency from which the difference clears its interval at every
    /// larger point too; `None`: not even at the largest.
    pub(crate) from: Option<u32>,
    /// Concurrencies where the baseline is better (the interval below zero).
    pub(crate) baseline_better_at: Vec<u32>,
}

/// The baselines: a label and the policies of its camp.
pub(crate) const BASELINES: [(&str, &[&str]); 2] =
    [("plain", &PLAIN), ("least_request_bias", &[PROXY_COUNTED])];

/// Every policy a point runs.
pub(crate) fn policies() -> Vec<String> {
    SESSION_AWARE
        .iter()
        .chain(&PLAIN)
        .chain(&[PROXY_COUNTED])
        .map(|&p| p.to_owned())
        .collect()
}

impl Point {
    /// The point from one run per seed of `scenario` at `concurrency`.
    pub(crate) fn new(
        concurrency: u32,
        scenario: &Scenario,
        runs: &[ScenarioResult],
        wall_s: f64,
    ) -> Self {
        let combined = report::combine(runs.to_vec());
        let mut contrasts = Vec::new();
        for metric in Metric::ALL {
            for (_, camp) in BASELINES {
                contrasts.push(Contrast::between(
                    runs,
                    &combined,
                    metric,
                    &SESSION_AWARE,
                    camp,
                ));
            }
        }
        let mut policies = combined
            .across_seeds
            .map(|a| a.policies)
            .unwrap_or_default();
        for p in &mut policies {
            p.metrics
                .retain(|m| Metric::from_short(&m.metric).is_some());
        }
        let arrivals = runs
            .iter()
            .map(|r| r.policies.first().map_or(0, |p| p.summary.arrivals) as f64)
            .sum::<f64>()
            / runs.len().max(1) as f64;
        Self {
            concurrency,
            target_concurrent: scenario.arrivals.target_concurrent.unwrap_or_default(),
            backends: scenario.backend_count(),
            cores: cores(scenario),
            duration_s: scenario.duration_s,
            arrivals,
            wall_s,
            policies,
            contrasts,
        }
    }

    /// The contrast on `metric` against the baseline labelled `baseline`.
    pub(crate) fn contrast(&self, metric: Metric, baseline: &str) -> Option<&Contrast> {
        let camp = BASELINES.iter().find(|(label, _)| *label == baseline)?.1;
        self.contrasts
            .iter()
            .find(|c| c.metric == metric.short() && camp.contains(&c.baseline.as_str()))
    }
}

impl FamilyResult {
    /// The family's points (any order) and the answers they give.
    pub(crate) fn new(family: &Family, description: String, mut points: Vec<Point>) -> Self {
        points.sort_by_key(|p| p.concurrency);
        let mut answers = Vec::new();
        for metric in Metric::ALL {
            for (baseline, _) in BASELINES {
                let verdicts: Vec<(u32, &Contrast)> = points
                    .iter()
                    .filter_map(|p| Some((p.concurrency, p.contrast(metric, baseline)?)))
                    .collect();
                let pays: Vec<(u32, bool)> = verdicts.iter().map(|(c, k)| (*c, k.pays())).collect();
                answers.push(Answer {
                    metric: metric.short().to_owned(),
                    baseline: baseline.to_owned(),
                    from: crossover(&pays),
                    baseline_better_at: verdicts
                        .iter()
                        .filter(|(_, k)| k.costs())
                        .map(|(c, _)| *c)
                        .collect(),
                });
            }
        }
        Self {
            scenario: family.name.clone(),
            file: family.file.clone(),
            description,
            per_core: family.per_core(),
            proxies: family.proxies(),
            points,
            answers,
        }
    }

    /// The answer on `metric` against `baseline`.
    pub(crate) fn answer(&self, metric: Metric, baseline: &str) -> Option<&Answer> {
        self.answers
            .iter()
            .find(|a| a.metric == metric.short() && a.baseline == baseline)
    }
}

impl Answer {
    /// One phrase: "from 3 000", "at every size from 100", "never within 100–20 000".
    pub(crate) fn phrase(&self, smallest: u32, largest: u32) -> String {
        match self.from {
            Some(c) if c == smallest => format!("at every size from {}", thousands(c)),
            Some(c) => format!("from {}", thousands(c)),
            None => format!(
                "never within {}–{}",
                thousands(smallest),
                thousands(largest)
            ),
        }
    }
}

/// `20000` → `20 000` (the docs' thin grouping).
pub(crate) fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_phrases() {
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1_000), "1 000");
        assert_eq!(thousands(20_000), "20 000");
        let a = |from| Answer {
            metric: "ovl-asg%".into(),
            baseline: "plain".into(),
            from,
            baseline_better_at: vec![],
        };
        assert_eq!(a(Some(100)).phrase(100, 20_000), "at every size from 100");
        assert_eq!(a(Some(3_000)).phrase(100, 20_000), "from 3 000");
        assert_eq!(a(None).phrase(100, 20_000), "never within 100–20 000");
    }
}
