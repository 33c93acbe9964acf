//! Per-backend state: EWMA-smoothed reports, stale-report decay and slow start.

use std::time::Duration;

use crate::estimate::cost_of;
use crate::{CapacityConfig, Estimate, Freshness, sanitize_utilisation};

/// The last accepted report of a backend.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Snapshot {
    at: Duration,
    active: u64,
    utilisation: f64,
}

/// The cost per session being learned: EWMAs (α = `cost_alpha`) of the raw utilisation
/// and of the session count over the reports that had sessions.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CostAverage {
    at: Duration,
    utilisation: f64,
    sessions: f64,
}

/// What the balancer remembers about one backend.
///
/// Time is passed in explicitly as a [`Duration`] since any epoch the caller picks (a
/// simulator's clock, or `Instant::now() - start`), so nothing here sleeps or reads a
/// clock. Times that run backwards are read as "no time passed".
///
/// * **Smoothing**: utilisation reports are combined by an EWMA whose α is per report
///   interval and scaled to the actual gap (`1 − (1 − α)^(gap / r)`), so lost or late
///   reports do not slow the average down; a report arriving after the previous one went
///   stale restarts it.
/// * **Stale reports**: past the TTL the last snapshot's headroom halves every
///   `stale_half_life`; its capacity never exceeds what the snapshot gave while fresh.
/// * **Slow start**: the weight (not the capacity) ramps linearly from 0 to full over
///   `slow_start` after `first_seen`, so a new backend is not flooded on its first report.
/// * **Learned cost**: the cost per session is `(ū − idle) ÷ (n̄ / w)`, where ū and n̄ are
///   EWMAs with α = [`cost_alpha`](CapacityConfig::cost_alpha) of the raw utilisation and
///   the session count over the reports that had sessions. A few sessions' bursts (a
///   report in which three of ten happened to speak) then do not swing the headroom, and
///   the utilisation and the count it is divided by are averaged over the same reports.
///   The spare capacity `t − u` still uses the fast-smoothed utilisation.
/// * **When the cost above idle is undefined** (ū no higher than the idle baseline: sessions
///   too cheap to tell from an idle report's noise), the model keeps the last defined one;
///   before there was one, it charges the sessions the whole of ū (an upper bound on
///   their cost). Only a backend with no measurable work at all falls back to the prior,
///   so a backend's weight does not jump between its own cost and the fleet's prior as
///   its busy share crosses its idle noise.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::{BackendModel, CapacityConfig, Freshness};
///
/// let secs = Duration::from_secs;
/// let config = CapacityConfig::new(0.8, 2.0, secs(10), secs(10))?;
/// let mut backend = BackendModel::new(secs(0));
/// backend.report(&config, secs(20), 80, 0.40);
///
/// let fresh = backend.estimate(&config, secs(25), None);
/// assert!((fresh.effective_capacity - 120.0).abs() < 1e-9);
///
/// let stale = backend.estimate(&config, secs(60), None); // 40 s old, TTL 30 s, half-life 10 s
/// assert_eq!(stale.freshness, Freshness::Stale);
/// assert!((stale.headroom - 20.0).abs() < 1e-9);
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct BackendModel {
    first_seen: Duration,
    last: Option<Snapshot>,
    idle: Option<f64>,
    cost: Option<CostAverage>,
    /// The last defined cost above idle.
    last_cost: Option<f64>,
}

impl BackendModel {
    /// A backend first seen at `first_seen`, with no report yet.
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_capacity::{BackendModel, CapacityConfig, Freshness};
    ///
    /// let config = CapacityConfig::builder().build()?;
    /// let backend = BackendModel::new(Duration::ZERO);
    /// let e = backend.estimate(&config, Duration::from_secs(1), None);
    /// assert_eq!(e.freshness, Freshness::NoReport);
    /// # Ok::<(), livecount_capacity::ConfigError>(())
    /// ```
    pub fn new(first_seen: Duration) -> Self {
        Self {
            first_seen,
            last: None,
            idle: None,
            cost: None,
            last_cost: None,
        }
    }

    /// Records a report taken at `at`: `active` sessions and raw `utilisation`
    /// (sanitised by [`sanitize_utilisation`], then smoothed).
    ///
    /// A report with no active sessions also teaches the model the backend's idle
    /// utilisation (the lowest such report), which is then not charged to sessions; see
    /// [`Estimate::compute_above_idle`].
    pub fn report(&mut self, config: &CapacityConfig, at: Duration, active: u64, utilisation: f64) {
        let u = sanitize_utilisation(utilisation);
        if active == 0 {
            self.idle = Some(self.idle.map_or(u, |idle| idle.min(u)));
        } else {
            let n = active as f64;
            self.cost = Some(match self.cost {
                Some(prev) => {
                    let a = ewma_weight(config, config.cost_alpha(), prev.at, at);
                    CostAverage {
                        at: at.max(prev.at),
                        utilisation: a * u + (1.0 - a) * prev.utilisation,
                        sessions: a * n + (1.0 - a) * prev.sessions,
                    }
                }
                None => CostAverage {
                    at,
                    utilisation: u,
                    sessions: n,
                },
            });
        }
        let utilisation = match self.last {
            Some(prev) if at.saturating_sub(prev.at) <= config.stale_ttl() => {
                let a = ewma_weight(config, config.ewma_alpha(), prev.at, at);
                a * u + (1.0 - a) * prev.utilisation
            }
            _ => u,
        };
        self.last = Some(Snapshot {
            at,
            active,
            utilisation,
        });
        if let Some(cost) = self.cost_above_idle(config) {
            self.last_cost = Some(cost);
        }
    }

    /// The idle utilisation learned from reports with no sessions, if any.
    pub fn idle_utilisation(&self) -> Option<f64> {
        self.idle
    }

    /// The learned cost per session (what a fleet-mean prior averages): above the idle
    /// baseline; when that is undefined, the last one that was defined, else ū charged
    /// whole to the sessions. `None` before a report with sessions, or while no report
    /// with sessions had measurable utilisation.
    pub fn cost_per_session(&self, config: &CapacityConfig) -> Option<f64> {
        let learned = self.cost?;
        self.cost_above_idle(config)
            .or(self.last_cost)
            .or_else(|| cost_of(learned.sessions, learned.utilisation, 0.0, config.window()))
    }

    /// `(ū − idle) ÷ (n̄ / w)`, if defined now.
    fn cost_above_idle(&self, config: &CapacityConfig) -> Option<f64> {
        let learned = self.cost?;
        let idle = self.idle.unwrap_or(0.0);
        cost_of(learned.sessions, learned.utilisation, idle, config.window())
    }

    /// The smoothed utilisation of the last report, if any.
    pub fn smoothed_utilisation(&self) -> Option<f64> {
        self.last.map(|s| s.utilisation)
    }

    /// The estimate at `now`; `prior_cost` as in [`Estimate::compute`].
    pub fn estimate(
        &self,
        config: &CapacityConfig,
        now: Duration,
        prior_cost: Option<f64>,
    ) -> Estimate {
        let Some(snap) = self.last else {
            return Estimate::no_report();
        };
        let cost = self.cost_per_session(config);
        let fresh =
            Estimate::compute_with_cost(config, snap.active, snap.utilisation, cost, prior_cost);
        let age = now.saturating_sub(snap.at);
        let mut estimate = if age <= config.stale_ttl() {
            fresh
        } else {
            let over = (age - config.stale_ttl()).as_secs_f64();
            let halvings = over / config.stale_half_life().as_secs_f64();
            // exp2 of a large negative number is 0, never NaN: `halvings` is finite and ≥ 0.
            let headroom = fresh.headroom * (-halvings).exp2();
            Estimate::from_headroom(snap.active, headroom.min(fresh.headroom), Freshness::Stale)
        };
        estimate.weight = estimate.headroom * self.ramp(config, now);
        estimate
    }

    /// Slow-start factor in [0, 1].
    fn ramp(&self, config: &CapacityConfig, now: Duration) -> f64 {
        let period = config.slow_start().as_secs_f64();
        if period <= 0.0 {
            return 1.0;
        }
        (now.saturating_sub(self.first_seen).as_secs_f64() / period).clamp(0.0, 1.0)
    }
}

/// The weight of a new report in an EWMA with factor `alpha` per report interval, scaled
/// to the real gap from `prev` to `at`: after a lost report the new one weighs as much as
/// two on time would, 1 − (1 − α)².
fn ewma_weight(config: &CapacityConfig, alpha: f64, prev: Duration, at: Duration) -> f64 {
    let gap = at.saturating_sub(prev).as_secs_f64();
    let intervals = gap / config.report_interval().as_secs_f64();
    1.0 - (1.0 - alpha).powf(intervals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn config() -> CapacityConfig {
        CapacityConfig::new(0.8, 2.0, secs(10), secs(10)).unwrap()
    }

    #[test]
    fn slow_start_ramps_weight_not_capacity() {
        let c = config();
        let mut b = BackendModel::new(secs(100));
        b.report(&c, secs(100), 80, 0.4);
        let at_start = b.estimate(&c, secs(100), None);
        assert_eq!(at_start.weight, 0.0);
        assert!((at_start.headroom - 40.0).abs() < 1e-9);
        let halfway = b.estimate(&c, secs(105), None);
        assert!((halfway.weight - 20.0).abs() < 1e-9);
        assert!((b.estimate(&c, secs(110), None).weight - 40.0).abs() < 1e-9);
    }

    #[test]
    fn ewma_smooths_and_restarts_after_staleness() {
        let c = config();
        let mut b = BackendModel::new(secs(0));
        b.report(&c, secs(0), 10, 0.2);
        b.report(&c, secs(10), 10, 0.6);
        assert!((b.smoothed_utilisation().unwrap() - 0.4).abs() < 1e-12);
        b.report(&c, secs(30), 10, 0.8); // one report lost: weight 1 - 0.5² = 0.75
        assert!((b.smoothed_utilisation().unwrap() - 0.7).abs() < 1e-12);
        b.report(&c, secs(100), 10, 0.9);
        assert_eq!(b.smoothed_utilisation(), Some(0.9));
    }

    #[test]
    fn idle_utilisation_is_learned_from_empty_reports_and_not_charged() {
        let c = config();
        let mut b = BackendModel::new(secs(0));
        b.report(&c, secs(0), 0, 0.25);
        b.report(&c, secs(100), 0, 0.20);
        assert_eq!(b.idle_utilisation(), Some(0.20));
        b.report(&c, secs(200), 10, 0.30); // after a stale gap: no smoothing
        let e = b.estimate(&c, secs(200), None);
        // (0.8 - 0.3) / ((0.3 - 0.2) * 10 / 10) / 2 * 10 = 25
        assert!((e.headroom - 25.0).abs() < 1e-9, "{e:?}");
        let cost = b.cost_per_session(&c).unwrap();
        assert!(
            (cost - 0.1).abs() < 1e-12,
            "(0.3 - 0.2) / (10 / 10 s) = 0.1, got {cost}"
        );
    }

    #[test]
    fn stale_report_decays_towards_active_sessions() {
        let c = config();
        let mut b = BackendModel::new(secs(0));
        b.report(&c, secs(0), 80, 0.4);
        let long_ago = b.estimate(&c, secs(100_000), None);
        assert_eq!(long_ago.freshness, Freshness::Stale);
        assert_eq!(long_ago.headroom, 0.0);
        assert_eq!(long_ago.effective_capacity, 80.0);
    }
}
