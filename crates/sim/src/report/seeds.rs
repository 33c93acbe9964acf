//! Many seeds of one scenario: each metric's mean and 95 % interval (`verdict` then says
//! which policy wins a metric only when its interval clears every other policy's).

use super::columns::columns;
use crate::sim_result::{AcrossSeeds, MetricStats, PolicyStats, ScenarioResult};

/// Merges runs of one scenario with different seeds: the first run (its time series and
/// CDFs feed the plots) with [`ScenarioResult::across_seeds`] filled in from all of them.
///
/// ```
/// use livecount_sim::{Scenario, report, run};
///
/// let mut s = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 30\n[arrivals]\nrate_per_s = 5\n\
///      [sessions]\nduration = 'exponential'\nmean_s = 10\n[[backends]]\ncount = 4",
///     "inline.toml",
/// )?;
/// let policies = ["random".to_owned(), "p2c_sessions".to_owned()];
/// let runs: Vec<_> = (1..=5)
///     .map(|seed| {
///         s.seed = seed;
///         run(&s, &policies, &mut |_, _| {})
///     })
///     .collect();
/// let merged = report::combine(runs);
/// let stats = merged.across_seeds.as_ref().unwrap();
/// assert_eq!(stats.seeds, [1, 2, 3, 4, 5]);
/// assert_eq!(stats.policies[1].policy, "p2c_sessions");
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
///
/// # Panics
///
/// When `runs` is empty or the runs do not list the same policies in the same order.
#[must_use]
pub fn combine(mut runs: Vec<ScenarioResult>) -> ScenarioResult {
    assert!(!runs.is_empty(), "no runs to combine");
    let names: Vec<&str> = runs[0].policies.iter().map(|p| p.policy.as_str()).collect();
    for r in &runs[1..] {
        let other: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
        assert_eq!(names, other, "runs of different policies");
    }
    let policies = (0..names.len())
        .map(|i| PolicyStats {
            policy: names[i].to_owned(),
            metrics: columns(&runs[0])
                .into_iter()
                .map(|c| {
                    let values: Vec<f64> = runs
                        .iter()
                        .map(|r| c.value(&r.policies[i].summary))
                        .collect();
                    stats(c.short, &values)
                })
                .collect(),
        })
        .collect();
    let seeds = runs.iter().map(|r| r.seed).collect();
    let mut first = runs.swap_remove(0);
    first.across_seeds = Some(AcrossSeeds { seeds, policies });
    first
}

/// Mean and 95 % half-width of `values` (Student's t with n − 1 degrees of freedom).
fn stats(metric: &str, values: &[f64]) -> MetricStats {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let half_width = if n < 2 {
        0.0
    } else {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t975(n - 1) * (var / n as f64).sqrt()
    };
    MetricStats {
        metric: metric.to_owned(),
        mean,
        half_width,
        n,
    }
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (the table's value for
/// the largest tabulated df not above it: never narrower than the truth).
fn t975(df: usize) -> f64 {
    const SMALL: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => SMALL[df - 1],
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        _ => 1.980,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_t_interval_match_a_hand_computation() {
        // 1, 2, 3, 4, 5: mean 3, s² = 2.5, half-width 2.776 × √(2.5 / 5) = 1.963.
        let m = stats("x", &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((m.mean, m.n), (3.0, 5));
        assert!(
            (m.half_width - 2.776 * 0.5f64.sqrt()).abs() < 1e-12,
            "{m:?}"
        );
        assert_eq!(stats("x", &[7.0]).half_width, 0.0);
        assert_eq!(t975(19), 2.093);
        assert_eq!(t975(45), 2.021);
        assert_eq!(t975(1000), 1.980);
    }
}
