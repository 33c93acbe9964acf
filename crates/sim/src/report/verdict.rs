//! Which policy wins one metric across seeds: only one whose 95 % interval clears every other
//! policy's, on the better side; otherwise no claim.

use super::columns::column;
use crate::sim_result::{MetricStats, PolicyStats, ScenarioResult};

/// Which policy wins one metric across seeds.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// This policy's interval clears every other policy's, on the better side.
    Wins(String),
    /// The best mean's interval overlaps these policies' (the best first): no claim.
    Overlap(Vec<String>),
    /// Every policy has the same mean.
    AllTied,
}

/// The verdict on `metric` (a short column name, e.g. `"ovl-asg%"`), or `None` when the
/// result has no across-seeds statistics or no such metric.
#[must_use]
pub fn verdict(result: &ScenarioResult, metric: &str) -> Option<Verdict> {
    let column = column(metric)?;
    let stats = result.across_seeds.as_ref()?;
    let of = |p: &PolicyStats| p.metrics.iter().find(|m| m.metric == metric).cloned();
    let rows: Vec<(&str, MetricStats)> = stats
        .policies
        .iter()
        .filter_map(|p| Some((p.policy.as_str(), of(p)?)))
        .collect();
    let better = |a: f64, b: f64| {
        if column.higher_is_better() {
            a > b
        } else {
            a < b
        }
    };
    let (best, best_stats) = rows
        .iter()
        .fold(None, |acc: Option<&(&str, MetricStats)>, r| match acc {
            Some(b) if !better(r.1.mean, b.1.mean) => Some(b),
            _ => Some(r),
        })?;
    if rows.iter().all(|(_, m)| m.mean == best_stats.mean) {
        return Some(Verdict::AllTied);
    }
    let (lo, hi) = best_stats.interval();
    let overlapping: Vec<String> = rows
        .iter()
        .filter(|(p, m)| {
            let (l, h) = m.interval();
            p != best && l <= hi && lo <= h
        })
        .map(|(p, _)| (*p).to_owned())
        .collect();
    if overlapping.is_empty() {
        Some(Verdict::Wins((*best).to_owned()))
    } else {
        Some(Verdict::Overlap(
            std::iter::once((*best).to_owned())
                .chain(overlapping)
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::seeds::combine;
    use crate::report::tests::fake_result;

    fn with_overloaded(values: &[(&str, &[f64])]) -> ScenarioResult {
        let runs: Vec<ScenarioResult> = (0..values[0].1.len())
            .map(|k| {
                let mut r = fake_result();
                r.seed = k as u64;
                r.policies.truncate(values.len());
                for (p, (name, v)) in r.policies.iter_mut().zip(values) {
                    p.policy = (*name).to_owned();
                    p.summary.overloaded_rate = v[k];
                }
                r
            })
            .collect();
        combine(runs)
    }

    #[test]
    fn a_win_needs_an_interval_clear_of_every_other() {
        let r = with_overloaded(&[
            ("a", &[0.10, 0.11, 0.09, 0.10]),
            ("b", &[0.01, 0.02, 0.01, 0.02]),
        ]);
        assert_eq!(r.across_seeds.as_ref().unwrap().seeds, [0, 1, 2, 3]);
        assert_eq!(verdict(&r, "ovl-asg%"), Some(Verdict::Wins("b".into())));
        let r = with_overloaded(&[
            ("a", &[0.01, 0.05, 0.02, 0.06]),
            ("b", &[0.01, 0.02, 0.01, 0.02]),
            ("c", &[0.5, 0.5, 0.5, 0.5]),
        ]);
        assert_eq!(
            verdict(&r, "ovl-asg%"),
            Some(Verdict::Overlap(vec!["b".into(), "a".into()]))
        );
        let r = with_overloaded(&[("a", &[0.2, 0.2]), ("b", &[0.2, 0.2])]);
        assert_eq!(verdict(&r, "ovl-asg%"), Some(Verdict::AllTied));
        assert_eq!(verdict(&r, "no-such-metric"), None);
        // Higher is better for assigned: the larger mean wins ("a" is the fake least-conn
        // run with 990 assigned, "b" round-robin with 985).
        assert_eq!(verdict(&r, "assigned"), Some(Verdict::Wins("a".into())));
    }
}
