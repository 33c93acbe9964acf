//! The testbed beside the simulator: the same metrics side by side, and whether they
//! agree — on the ranking of the balancers, and on each figure within a tolerance derived
//! from the run-to-run spread of both.

use livecount_sim::Summary;
use serde::Serialize;

use crate::measure::Measured;

/// A metric both sides report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Metric {
    /// Overloaded assignments ÷ assignments.
    OverloadedRate,
    /// Share of backend-time above target.
    OverloadedTime,
    /// Mean coefficient of variation of active ÷ size.
    SpreadCv,
    /// Arrival to set-up, p95, ms.
    StartupP95,
    /// Arrival to the first chunk, p95, ms.
    FirstStreamP95,
    /// Arrival to the first chunk, p99, ms.
    FirstStreamP99,
    /// Refused + dropped ÷ arrivals.
    LostRate,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 7] = [
        Metric::OverloadedRate,
        Metric::OverloadedTime,
        Metric::SpreadCv,
        Metric::StartupP95,
        Metric::FirstStreamP95,
        Metric::FirstStreamP99,
        Metric::LostRate,
    ];

    /// The ones the balancers are ranked on: what the sessions suffer (overload, the slow
    /// tail) and how evenly the sessions lie (what a session-counting balancer is for).
    pub const RANKED: [Metric; 3] = [
        Metric::OverloadedRate,
        Metric::FirstStreamP99,
        Metric::SpreadCv,
    ];

    /// Its column name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::OverloadedRate => "overloaded assignments",
            Metric::OverloadedTime => "time above target",
            Metric::SpreadCv => "spread CV",
            Metric::StartupP95 => "startup p95 ms",
            Metric::FirstStreamP95 => "first stream p95 ms",
            Metric::FirstStreamP99 => "first stream p99 ms",
            Metric::LostRate => "rejected + dropped",
        }
    }

    /// Whether it is a share (printed as %).
    fn is_share(self) -> bool {
        matches!(
            self,
            Metric::OverloadedRate | Metric::OverloadedTime | Metric::LostRate
        )
    }

    /// The smallest difference that means anything: a share's resolution is one session
    /// in the run, a latency's one millisecond (the testbed's timer and the scheduler's
    /// granularity), a CV's 0.01.
    fn resolution(self, sessions: u64) -> f64 {
        match self {
            m if m.is_share() => 1.0 / sessions.max(1) as f64,
            Metric::SpreadCv => 0.01,
            _ => 1.0,
        }
    }

    /// The testbed's value.
    pub fn measured(self, m: &Measured) -> f64 {
        match self {
            Metric::OverloadedRate => m.overloaded_rate,
            Metric::OverloadedTime => m.overloaded_time_share,
            Metric::SpreadCv => m.spread_cv_mean,
            Metric::StartupP95 => m.startup_ms.p95,
            Metric::FirstStreamP95 => m.first_stream_ms.p95,
            Metric::FirstStreamP99 => m.first_stream_ms.p99,
            Metric::LostRate => (m.rejected + m.dropped) as f64 / m.arrivals.max(1) as f64,
        }
    }

    /// The simulator's value.
    pub fn simulated(self, s: &Summary) -> f64 {
        match self {
            Metric::OverloadedRate => s.overloaded_rate,
            Metric::OverloadedTime => s.overloaded_time_share,
            Metric::SpreadCv => s.spread_cv_mean,
            Metric::StartupP95 => s.startup_ms.p95,
            Metric::FirstStreamP95 => s.first_stream_ms.p95,
            Metric::FirstStreamP99 => s.first_stream_ms.p99,
            Metric::LostRate => (s.rejected + s.dropped) as f64 / s.arrivals.max(1) as f64,
        }
    }

    /// `v` for a table.
    pub fn show(self, v: f64) -> String {
        if self.is_share() {
            format!("{:.1} %", v * 100.0)
        } else if self == Metric::SpreadCv {
            format!("{v:.3}")
        } else {
            format!("{v:.1}")
        }
    }
}

/// Mean and range of one metric over repeats (or seeds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Over `values` (at least one).
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len().max(1) as f64;
        Spread {
            mean: values.iter().sum::<f64>() / n,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    fn width(&self) -> f64 {
        self.max - self.min
    }

    fn show(&self, m: Metric) -> String {
        if self.width() <= 0.0 {
            m.show(self.mean)
        } else {
            format!(
                "{} ({}–{})",
                m.show(self.mean),
                m.show(self.min),
                m.show(self.max)
            )
        }
    }
}

/// One balancer on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The balancer.
    pub balancer: String,
    /// The simulator's policy for it.
    pub policy: String,
    /// The testbed's runs.
    pub measured: Vec<Measured>,
    /// The simulator's runs (one per seed).
    pub simulated: Vec<Summary>,
    /// The simulator's inputs measured on the testbed: (speaking cost, idle utilisation).
    pub calibration: Option<(f64, f64)>,
}

impl Side {
    /// The testbed's spread of `m`.
    pub fn testbed(&self, m: Metric) -> Spread {
        Spread::of(
            &self
                .measured
                .iter()
                .map(|x| m.measured(x))
                .collect::<Vec<_>>(),
        )
    }

    /// The simulator's spread of `m`.
    pub fn sim(&self, m: Metric) -> Spread {
        Spread::of(
            &self
                .simulated
                .iter()
                .map(|x| m.simulated(x))
                .collect::<Vec<_>>(),
        )
    }

    fn sessions(&self) -> u64 {
        self.measured.first().map_or(1, |m| m.arrivals)
    }
}

/// One finding of the agreement check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Whether it holds.
    pub agrees: bool,
    /// What was compared, in words.
    pub what: String,
}

/// The tolerance of metric `m` for one balancer: the two sides' run-to-run ranges added
/// (each side's figure may be anywhere in its own range), plus the metric's resolution
/// twice (one per side). Nothing here is fitted to the answer: it is how far apart two
/// honest measurements of the same thing can be, given how much each moves between runs.
pub fn tolerance(side: &Side, m: Metric) -> f64 {
    side.testbed(m).width() + side.sim(m).width() + 2.0 * m.resolution(side.sessions())
}

/// Whether each figure of `sides` agrees within its tolerance, for `metrics`.
pub fn figures(sides: &[Side], metrics: &[Metric]) -> Vec<Finding> {
    let mut out = Vec::new();
    for side in sides {
        for &m in metrics {
            let (t, s) = (side.testbed(m).mean, side.sim(m).mean);
            let tol = tolerance(side, m);
            out.push(Finding {
                agrees: (t - s).abs() <= tol,
                what: format!(
                    "{} {}: testbed {} vs simulator {} (tolerance ±{})",
                    side.balancer,
                    m.name(),
                    m.show(t),
                    m.show(s),
                    m.show(tol)
                ),
            });
        }
    }
    out
}

/// For every pair of balancers the simulator separates on `m` (their ranges over seeds
/// do not overlap), the testbed must order them the same way, beyond its own noise
/// (the means differ by more than the metric's resolution, in the same direction).
/// Pairs the simulator calls a tie make no claim and are listed as such.
pub fn ranking(sides: &[Side], m: Metric) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, a) in sides.iter().enumerate() {
        for b in &sides[i + 1..] {
            let (sa, sb) = (a.sim(m), b.sim(m));
            let (ta, tb) = (a.testbed(m), b.testbed(m));
            let pair = format!("{} vs {}", a.balancer, b.balancer);
            let sim_order = if sa.max < sb.min {
                Some(true) // a lower
            } else if sb.max < sa.min {
                Some(false)
            } else {
                None
            };
            let Some(a_lower) = sim_order else {
                out.push(Finding {
                    agrees: true,
                    what: format!(
                        "{pair} on {}: the simulator does not separate them ({} vs {}); testbed {} vs {}",
                        m.name(),
                        sa.show(m),
                        sb.show(m),
                        ta.show(m),
                        tb.show(m)
                    ),
                });
                continue;
            };
            let diff = if a_lower {
                tb.mean - ta.mean
            } else {
                ta.mean - tb.mean
            };
            let agrees = diff > m.resolution(a.sessions());
            let (lo, hi) = if a_lower { (a, b) } else { (b, a) };
            out.push(Finding {
                agrees,
                what: format!(
                    "{pair} on {}: simulator puts {} below {} ({} vs {}); testbed {} vs {}",
                    m.name(),
                    lo.balancer,
                    hi.balancer,
                    lo.sim(m).show(m),
                    hi.sim(m).show(m),
                    lo.testbed(m).show(m),
                    hi.testbed(m).show(m)
                ),
            });
        }
    }
    out
}

/// The side-by-side table (markdown): one row per balancer, testbed | simulator per metric.
pub fn table(sides: &[Side]) -> String {
    let mut out = String::from("| balancer (model) |");
    for m in Metric::ALL {
        out += &format!(" {} testbed | simulator |", m.name());
    }
    out += "\n|---|";
    out += &"---:|---:|".repeat(Metric::ALL.len());
    out += "\n";
    for s in sides {
        out += &format!("| {} ({}) |", s.balancer, s.policy);
        for m in Metric::ALL {
            out += &format!(" {} | {} |", s.testbed(m).show(m), s.sim(m).show(m));
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use livecount_sim::Percentiles;

    fn measured(overloaded_rate: f64, p99: f64) -> Measured {
        Measured {
            arrivals: 100,
            assigned: 100,
            overloaded_assignments: 0,
            overloaded_rate,
            spread_cv_mean: 0.1,
            overloaded_time_share: 0.0,
            startup_ms: Percentiles::default(),
            first_stream_ms: Percentiles {
                p99,
                ..Percentiles::default()
            },
            rejected: 0,
            dropped: 0,
            ended_as_planned: 100,
            final_counts: vec![],
            settled: true,
            fleet_cpu_cores: 0.1,
            peak_utilisation: 0.5,
        }
    }

    fn summary(overloaded_rate: f64, p99: f64) -> Summary {
        Summary {
            arrivals: 100,
            overloaded_rate,
            first_stream_ms: Percentiles {
                p99,
                ..Percentiles::default()
            },
            ..Summary::default()
        }
    }

    fn side(name: &str, tb: &[f64], sim: &[f64]) -> Side {
        Side {
            balancer: name.into(),
            policy: "p".into(),
            measured: tb.iter().map(|&r| measured(r, 10.0)).collect(),
            simulated: sim.iter().map(|&r| summary(r, 10.0)).collect(),
            calibration: None,
        }
    }

    #[test]
    fn a_separated_pair_must_keep_its_order() {
        let good = [
            side("a", &[0.10, 0.12], &[0.05, 0.06]),
            side("b", &[0.30, 0.20], &[0.40, 0.45]),
        ];
        let f = ranking(&good, Metric::OverloadedRate);
        assert!(f.iter().all(|f| f.agrees), "{f:?}");
        let swapped = [
            side("a", &[0.30, 0.32], &[0.05, 0.06]),
            side("b", &[0.10, 0.12], &[0.40, 0.45]),
        ];
        assert!(!ranking(&swapped, Metric::OverloadedRate)[0].agrees);
        // Equal on the testbed (within one session in 100): not an agreement either.
        let tied = [
            side("a", &[0.20], &[0.05, 0.06]),
            side("b", &[0.205], &[0.40, 0.45]),
        ];
        assert!(!ranking(&tied, Metric::OverloadedRate)[0].agrees);
        // The simulator's ranges overlap: no claim.
        let tie = [
            side("a", &[0.30], &[0.05, 0.5]),
            side("b", &[0.10], &[0.40, 0.45]),
        ];
        assert!(ranking(&tie, Metric::OverloadedRate)[0].agrees);
    }

    #[test]
    fn tolerance_is_both_ranges_and_the_resolution() {
        let s = side("a", &[0.10, 0.14], &[0.20, 0.21]);
        let tol = tolerance(&s, Metric::OverloadedRate);
        assert!((tol - (0.04 + 0.01 + 0.02)).abs() < 1e-12, "{tol}");
        let f = figures(&[s], &[Metric::OverloadedRate]);
        // |0.12 − 0.205| = 0.085 > 0.07.
        assert!(!f[0].agrees, "{f:?}");
    }
}
