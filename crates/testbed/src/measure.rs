//! The simulator's metrics, computed from what actually happened: the replayer's
//! timestamps and every backend's `/load` timeline.

use livecount_sim::Percentiles;
use livecount_sim::workload::PlannedEnd;
use serde::Serialize;

use crate::replay::{End, Outcome};
use crate::timeline::Sample;

/// One run's measurements, named as `lbsim`'s summary names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// Sessions the workload sent.
    pub arrivals: u64,
    /// Sessions that opened.
    pub assigned: u64,
    /// Sessions started on a backend whose utilisation was above target at the poll
    /// before they started.
    pub overloaded_assignments: u64,
    /// `overloaded_assignments ÷` the sessions the polls attributed.
    pub overloaded_rate: f64,
    /// Mean over polls of the coefficient of variation of active sessions per unit of size.
    pub spread_cv_mean: f64,
    /// Share of backend-polls above target utilisation.
    pub overloaded_time_share: f64,
    /// Arrival to set-up, milliseconds.
    pub startup_ms: Percentiles,
    /// Arrival to the first streamed chunk, milliseconds.
    pub first_stream_ms: Percentiles,
    /// Refused before opening.
    pub rejected: u64,
    /// Opened, then ended other than as planned.
    pub dropped: u64,
    /// Sessions by their planned end, those that ended so.
    pub ended_as_planned: u64,
    /// After the run: each backend's (active, started, ended).
    pub final_counts: Vec<(u64, u64, u64)>,
    /// Whether every backend ended at active 0 with started = ended.
    pub settled: bool,
    /// Mean CPU of the whole fleet over the run, in cores (each agent's own, from /proc).
    pub fleet_cpu_cores: f64,
    /// Peak utilisation any backend reported.
    pub peak_utilisation: f64,
}

/// Computes the metrics of one run.
///
/// `sizes` are the backends' scenario sizes (the spread is per unit of size, as the
/// simulator's), `target` the utilisation above which an assignment is overloaded,
/// `horizon` the arrivals' end: the fleet is sampled up to it, as the simulator samples.
pub fn measure(
    outcomes: &[Outcome],
    samples: &[Sample],
    sizes: &[f64],
    target: f64,
    horizon: f64,
    final_counts: Vec<(u64, u64, u64)>,
    fleet_cpu_cores: f64,
) -> Measured {
    let (over, attributed) = overloaded(samples, target);
    let startup: Vec<f64> = outcomes.iter().filter_map(|o| o.startup_ms).collect();
    let first: Vec<f64> = outcomes.iter().filter_map(|o| o.first_stream_ms).collect();
    let count = |f: &dyn Fn(&End) -> bool| outcomes.iter().filter(|o| f(&o.end)).count() as u64;
    let rejected = count(&|e| matches!(e, End::Refused(_)));
    let settled = final_counts.iter().all(|&(a, s, e)| a == 0 && s == e);
    let (cv, over_time, peak) = spread(samples, sizes, target, horizon);
    Measured {
        arrivals: outcomes.len() as u64,
        assigned: outcomes.len() as u64 - rejected,
        overloaded_assignments: over,
        overloaded_rate: ratio(over, attributed),
        spread_cv_mean: cv,
        overloaded_time_share: over_time,
        startup_ms: Percentiles::of(&startup),
        first_stream_ms: Percentiles::of(&first),
        rejected,
        dropped: count(&|e| matches!(e, End::Dropped(_))),
        ended_as_planned: count(&|e| matches!(e, End::Planned(_))),
        final_counts,
        settled,
        fleet_cpu_cores,
        peak_utilisation: peak,
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Sessions started between two polls go to the backend whose `started` grew, and count
/// as overloaded when that backend's utilisation at the earlier poll was above `target`.
/// Returns (overloaded, attributed).
pub fn overloaded(samples: &[Sample], target: f64) -> (u64, u64) {
    let (mut over, mut all) = (0, 0);
    for pair in samples.windows(2) {
        for (before, after) in pair[0].backends.iter().zip(&pair[1].backends) {
            if let (Some(b), Some(a)) = (before, after) {
                let new = a.started.saturating_sub(b.started);
                all += new;
                if b.utilisation > target {
                    over += new;
                }
            }
        }
    }
    (over, all)
}

/// (mean CV of active ÷ size over polls, share of backend-polls above target, peak
/// utilisation), over the polls in `[0, horizon]` where every backend answered (the CV:
/// and something was open).
fn spread(samples: &[Sample], sizes: &[f64], target: f64, horizon: f64) -> (f64, f64, f64) {
    let (mut cv_sum, mut polls, mut over, mut backend_polls) = (0.0, 0u64, 0u64, 0u64);
    let mut peak = 0.0f64;
    for s in samples.iter().filter(|s| (0.0..=horizon).contains(&s.t)) {
        let Some(points) = s.backends.iter().copied().collect::<Option<Vec<_>>>() else {
            continue;
        };
        for p in &points {
            backend_polls += 1;
            over += u64::from(p.utilisation > target);
            peak = peak.max(p.utilisation);
        }
        let per_size: Vec<f64> = points
            .iter()
            .zip(sizes)
            .map(|(p, size)| p.active as f64 / size)
            .collect();
        let n = per_size.len() as f64;
        let mean = per_size.iter().sum::<f64>() / n;
        if mean > 0.0 {
            let var = per_size.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
            cv_sum += var.sqrt() / mean;
            polls += 1;
        }
    }
    let cv = if polls == 0 {
        0.0
    } else {
        cv_sum / polls as f64
    };
    (cv, ratio(over, backend_polls), peak)
}

/// Whether an outcome ended as its plan said (for the per-reason table).
pub fn planned(outcomes: &[Outcome], end: PlannedEnd) -> u64 {
    outcomes
        .iter()
        .filter(|o| o.end == End::Planned(end))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Point;

    fn point(started: u64, utilisation: f64, active: u64) -> Option<Point> {
        Some(Point {
            active,
            started,
            ended: 0,
            utilisation,
            weight_percent: 100,
        })
    }

    #[test]
    fn sessions_are_overloaded_by_the_poll_before_they_started() {
        let samples = vec![
            Sample {
                t: 0.0,
                backends: vec![point(0, 0.9, 0), point(0, 0.1, 0)],
            },
            Sample {
                t: 0.25,
                backends: vec![point(3, 0.5, 3), point(1, 0.95, 1)],
            },
            Sample {
                t: 0.5,
                backends: vec![point(4, 0.5, 4), point(3, 0.95, 3)],
            },
            // A backend that did not answer: its sessions wait for the next pair.
            Sample {
                t: 0.75,
                backends: vec![None, point(3, 0.2, 3)],
            },
        ];
        // 3 on b1 while it read 0.9, 1 on b2 at 0.1; then 1 on b1 at 0.5, 2 on b2 at 0.95.
        assert_eq!(overloaded(&samples, 0.8), (5, 7));
        let (cv, over_time, peak) = spread(&samples, &[1.0, 1.0], 0.8, 0.5);
        // Polls past the horizon do not count.
        assert_eq!(spread(&samples, &[1.0, 1.0], 0.8, 0.25).0, 0.5);
        // Polls with sessions open and every backend answering: 3/1 and 4/3.
        let cv1 = 0.5; // mean 2, deviation 1
        let cv2 = 0.5 / 3.5;
        assert!((cv - (cv1 + cv2) / 2.0).abs() < 1e-12, "{cv}");
        assert!((over_time - 3.0 / 6.0).abs() < 1e-12, "{over_time}");
        assert_eq!(peak, 0.95);
    }
}
