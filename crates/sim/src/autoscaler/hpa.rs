//! The HPA controller's arithmetic, pure: no engine, no clock but the `now` passed in.
//!
//! Two halves, as in the controller (`pkg/controller/podautoscaler`):
//!
//! * the replica calculator turns a metric into a proposal — [`replicas_for_pods`] for a
//!   per-pod average (`Resource` and `Pods` metrics), [`replicas_for_value`] for one
//!   fleet-wide value (`External` with `target.value`);
//! * [`Hpa::sync`] stabilizes the proposal over the windows and limits its rate by the
//!   policies, remembering its recommendations and scale events between syncs.

use super::config::{PolicyKind, ScalingRules, SelectPolicy};

/// One pod as the metrics pipeline sees it at a sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PodMetric {
    /// Ready, with this metric value.
    Value(f64),
    /// Ready, but no metric for it yet.
    Missing,
    /// Not ready yet (starting).
    NotReady,
}

/// Desired replicas for a per-pod average metric against `target`, as the HPA docs'
/// algorithm details give it: `ceil(ready pods × mean ÷ target)`, nothing while
/// |mean ÷ target − 1| ≤ `tolerance`; with pods missing a metric the mean is recomputed
/// counting them at the target on a scale-down and at 0 on a scale-up, and on a scale-up
/// pods not yet ready count at 0 too; if that recomputation reverses the direction or
/// falls within the tolerance, nothing changes. No ready pod with a metric: `current`.
///
/// ```
/// use livecount_sim::autoscaler::{PodMetric::*, replicas_for_pods};
///
/// // Two pods at 90 sessions, target 60: ceil(2 × 90 ÷ 60) = 3.
/// assert_eq!(replicas_for_pods(2, &[Value(90.0), Value(90.0)], 60.0, 0.1), 3);
/// // At 64 the ratio is 1.067, inside the tolerance: no change.
/// assert_eq!(replicas_for_pods(2, &[Value(64.0), Value(64.0)], 60.0, 0.1), 2);
/// ```
pub fn replicas_for_pods(current: u32, pods: &[PodMetric], target: f64, tolerance: f64) -> u32 {
    let ready: Vec<f64> = pods
        .iter()
        .filter_map(|p| match p {
            PodMetric::Value(v) => Some(*v),
            _ => None,
        })
        .collect();
    if ready.is_empty() {
        return current;
    }
    let count = |m: PodMetric| pods.iter().filter(|p| **p == m).count();
    let (missing, not_ready) = (count(PodMetric::Missing), count(PodMetric::NotReady));
    let ratio = ready.iter().sum::<f64>() / ready.len() as f64 / target;
    let up_with_unready = not_ready > 0 && ratio > 1.0;
    if !up_with_unready && missing == 0 {
        if (1.0 - ratio).abs() <= tolerance {
            return current;
        }
        return ceil_replicas(ratio * ready.len() as f64);
    }
    let mut sum = ready.iter().sum::<f64>();
    let mut n = ready.len();
    if missing > 0 {
        sum += if ratio < 1.0 {
            target * missing as f64
        } else {
            0.0
        };
        n += missing;
    }
    if up_with_unready {
        n += not_ready;
    }
    let new_ratio = sum / n as f64 / target;
    if (1.0 - new_ratio).abs() <= tolerance
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return current;
    }
    let proposed = ceil_replicas(new_ratio * n as f64);
    if (new_ratio < 1.0 && proposed > current) || (new_ratio > 1.0 && proposed < current) {
        return current;
    }
    proposed
}

/// Desired replicas for one fleet-wide value against `target` (an `External` metric with
/// `target.type: Value`): `ceil(ready × value ÷ target)`, nothing while
/// |value ÷ target − 1| ≤ `tolerance`; `ceil(value ÷ target)` from zero replicas.
///
/// ```
/// use livecount_sim::autoscaler::replicas_for_value;
///
/// // 4 replicas, 3 of them ready, the fleet 0.9 full against 0.7: ceil(3 × 0.9 ÷ 0.7) = 4.
/// assert_eq!(replicas_for_value(4, 3, 0.9, 0.7, 0.1), 4);
/// assert_eq!(replicas_for_value(4, 4, 0.9, 0.7, 0.1), 6);
/// ```
pub fn replicas_for_value(
    current: u32,
    ready: u32,
    value: f64,
    target: f64,
    tolerance: f64,
) -> u32 {
    let ratio = value / target;
    if current == 0 {
        return ceil_replicas(ratio);
    }
    if (1.0 - ratio).abs() <= tolerance {
        return current;
    }
    ceil_replicas(ratio * f64::from(ready))
}

/// `ceil(x)` as a replica count (saturating; NaN reads as 0).
fn ceil_replicas(x: f64) -> u32 {
    x.ceil() as u32
}

/// The controller's state for one scale target: its bounds, behaviour, and what it
/// remembers between syncs (recommendations within the stabilization windows, scale
/// events within the policies' periods).
///
/// ```
/// use livecount_sim::autoscaler::{Hpa, ScalingRules};
///
/// let mut hpa = Hpa::new(1, 50, ScalingRules::default_up(), ScalingRules::default_down());
/// // Scale-up is limited to max(2 × 3, 3 + 4) = 7 per 15 s.
/// assert_eq!(hpa.sync(0.0, 3, 20), 7);
/// // A scale-down proposal waits for the 300 s window's highest recommendation.
/// assert_eq!(hpa.sync(15.0, 7, 2), 7);
/// ```
#[derive(Debug, Clone)]
pub struct Hpa {
    min: u32,
    max: u32,
    up: ScalingRules,
    down: ScalingRules,
    /// `None` until the first sync (then the scale-down window is seeded).
    recommendations: Option<Vec<(f64, u32)>>,
    up_events: Vec<(f64, u32)>,
    down_events: Vec<(f64, u32)>,
}

impl Hpa {
    /// A controller keeping replicas in `[min, max]` with these behaviours.
    pub fn new(min: u32, max: u32, up: ScalingRules, down: ScalingRules) -> Self {
        Self {
            min,
            max,
            up,
            down,
            recommendations: None,
            up_events: Vec::new(),
            down_events: Vec::new(),
        }
    }

    /// One sync at `now`: `current` replicas, `proposed` by the metric (the replica
    /// calculator's answer). Returns the replicas to set, and remembers the scale event.
    pub fn sync(&mut self, now: f64, current: u32, proposed: u32) -> u32 {
        let desired = if current > self.max {
            self.max
        } else if current < self.min {
            self.min
        } else {
            let stabilized = self.stabilize(now, current, proposed);
            self.limit_rate(now, current, stabilized)
        };
        self.record(now, current, desired);
        desired
    }

    /// The stabilization windows: at least the lowest recommendation of the scale-up
    /// window, at most the highest of the scale-down window (each including this one);
    /// this recommendation is remembered.
    fn stabilize(&mut self, now: f64, current: u32, proposed: u32) -> u32 {
        let (up_cut, down_cut) = (
            now - self.up.stabilization_s,
            now - self.down.stabilization_s,
        );
        let recs = self.recommendations.get_or_insert_with(|| {
            // The controller seeds the scale-down window with the current count, so a
            // freshly started HPA does not scale down at once.
            if self.down.stabilization_s > 0.0 {
                vec![(now, current)]
            } else {
                Vec::new()
            }
        });
        let (mut up_rec, mut down_rec) = (proposed, proposed);
        for &(at, rec) in recs.iter() {
            if at > up_cut {
                up_rec = up_rec.min(rec);
            }
            if at > down_cut {
                down_rec = down_rec.max(rec);
            }
        }
        recs.retain(|&(at, _)| at > up_cut || at > down_cut);
        recs.push((now, proposed));
        current.max(up_rec).min(down_rec)
    }

    /// The scale-up and scale-down policies, and `[min, max]`.
    fn limit_rate(&self, now: f64, current: u32, desired: u32) -> u32 {
        if desired > current {
            let limit = self.up_limit(now, current).max(current);
            desired.min(limit.min(self.max))
        } else if desired < current {
            let limit = self.down_limit(now, current).min(current);
            desired.max(limit.max(self.min))
        } else {
            desired
        }
    }

    /// Replicas at the start of a period of `period_s`: `current` minus the scale-ups and
    /// plus the scale-downs since.
    fn period_start(&self, now: f64, current: u32, period_s: f64) -> i64 {
        let since = |events: &[(f64, u32)]| -> i64 {
            events
                .iter()
                .filter(|(at, _)| *at > now - period_s)
                .map(|(_, n)| i64::from(*n))
                .sum()
        };
        i64::from(current) - since(&self.up_events) + since(&self.down_events)
    }

    /// The most replicas the scale-up policies allow now.
    fn up_limit(&self, now: f64, current: u32) -> u32 {
        let proposals = self.up.policies.iter().map(|p| {
            let start = self.period_start(now, current, p.period_s);
            match p.kind {
                PolicyKind::Pods => start + i64::from(p.value),
                PolicyKind::Percent => {
                    (start as f64 * (1.0 + f64::from(p.value) / 100.0)).ceil() as i64
                }
            }
        });
        let limit = match self.up.select {
            SelectPolicy::Disabled => return current,
            SelectPolicy::Max => proposals.max(),
            SelectPolicy::Min => proposals.min(),
        };
        clamp_u32(limit.unwrap_or(i64::from(current)))
    }

    /// The fewest replicas the scale-down policies allow now.
    fn down_limit(&self, now: f64, current: u32) -> u32 {
        let proposals = self.down.policies.iter().map(|p| {
            let start = self.period_start(now, current, p.period_s);
            match p.kind {
                PolicyKind::Pods => start - i64::from(p.value),
                // Truncated, as the controller's int32 conversion does.
                PolicyKind::Percent => (start as f64 * (1.0 - f64::from(p.value) / 100.0)) as i64,
            }
        });
        let limit = match self.down.select {
            SelectPolicy::Disabled => return current,
            // The largest change downwards is the lowest count.
            SelectPolicy::Max => proposals.min(),
            SelectPolicy::Min => proposals.max(),
        };
        clamp_u32(limit.unwrap_or(i64::from(current)))
    }

    /// Remembers a scale event, forgetting those older than every policy's period.
    fn record(&mut self, now: f64, from: u32, to: u32) {
        let longest = |r: &ScalingRules| r.policies.iter().map(|p| p.period_s).fold(0.0, f64::max);
        let (up_keep, down_keep) = (longest(&self.up), longest(&self.down));
        self.up_events.retain(|(at, _)| *at > now - up_keep);
        self.down_events.retain(|(at, _)| *at > now - down_keep);
        if to > from {
            self.up_events.push((now, to - from));
        } else if to < from {
            self.down_events.push((now, from - to));
        }
    }
}

fn clamp_u32(x: i64) -> u32 {
    x.clamp(0, i64::from(u32::MAX)) as u32
}

#[cfg(test)]
#[path = "hpa_tests.rs"]
mod tests;
