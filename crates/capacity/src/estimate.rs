//! The hybrid formula as pure functions, and its output [`Estimate`].

use std::time::Duration;

use crate::CapacityConfig;

/// Utilisation below this counts as zero: the backend's own cost is then undefined and the
/// prior cost is used instead (a cost measured from a near-zero reading would promise an
/// absurd capacity).
pub const MIN_MEASURABLE_UTILISATION: f64 = 1e-6;

/// Upper bound on headroom, in sessions, so no input can produce an infinite capacity.
pub const MAX_HEADROOM: f64 = 1e15;

/// How fresh the report behind an [`Estimate`] is.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::{BackendModel, CapacityConfig, Freshness};
///
/// let config = CapacityConfig::builder().build()?; // TTL 30 s
/// let mut backend = BackendModel::new(Duration::ZERO);
/// backend.report(&config, Duration::ZERO, 10, 0.5);
/// let at = |s| backend.estimate(&config, Duration::from_secs(s), None).freshness;
/// assert_eq!((at(30), at(31)), (Freshness::Fresh, Freshness::Stale));
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The report is no older than the stale TTL.
    Fresh,
    /// The report is older than the TTL: its headroom has been decayed.
    Stale,
    /// No report has arrived: no headroom, weight zero.
    NoReport,
}

/// Output of the model for one backend: effective capacity, headroom and routing weight.
///
/// All three are finite and ≥ 0 for every input.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::{CapacityConfig, Estimate};
///
/// let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
/// let e = Estimate::compute(&config, 80, 0.40, None);
/// assert!((e.effective_capacity - 120.0).abs() < 1e-9);
/// assert!((e.headroom - 40.0).abs() < 1e-9);
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// n + additional_session_rate × r: sessions the backend can hold by the next report.
    pub effective_capacity: f64,
    /// effective_capacity − n: sessions that may still be sent there.
    pub headroom: f64,
    /// Routing weight: headroom, scaled down during a backend's slow start.
    pub weight: f64,
    /// Whether the report behind this estimate was fresh.
    pub freshness: Freshness,
}

impl Estimate {
    /// The estimate for a backend that has never reported: nothing may be sent to it.
    ///
    /// ```
    /// use livecount_capacity::{Estimate, Freshness};
    ///
    /// let e = Estimate::no_report();
    /// assert_eq!((e.weight, e.freshness), (0.0, Freshness::NoReport));
    /// ```
    pub fn no_report() -> Self {
        Self {
            effective_capacity: 0.0,
            headroom: 0.0,
            weight: 0.0,
            freshness: Freshness::NoReport,
        }
    }

    /// The fresh estimate for `active` sessions at `utilisation`, with no slow start.
    ///
    /// `prior_cost` is the fleet's mean cost per session, used when this backend's own cost
    /// is undefined (`active == 0` or utilisation below [`MIN_MEASURABLE_UTILISATION`]);
    /// `None`, or a non-finite or non-positive value, falls back to the config's prior.
    /// Utilisation is read through [`sanitize_utilisation`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_capacity::{CapacityConfig, Estimate};
    ///
    /// let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
    /// // Above target: no new sessions, capacity stays at the 10 already there.
    /// let e = Estimate::compute(&config, 10, 0.90, None);
    /// assert_eq!((e.effective_capacity, e.headroom), (10.0, 0.0));
    /// # Ok::<(), livecount_capacity::ConfigError>(())
    /// ```
    pub fn compute(
        config: &CapacityConfig,
        active: u64,
        utilisation: f64,
        prior_cost: Option<f64>,
    ) -> Self {
        Self::compute_above_idle(config, active, utilisation, 0.0, prior_cost)
    }

    /// Like [`compute`](Self::compute), but the utilisation the backend shows with no
    /// sessions at all (`idle_utilisation`: runtime, health checks) is not charged to its
    /// sessions: `cost = (u − idle) / pretend_qps`. The spare capacity is still `t − u`.
    ///
    /// Without this, a backend's fixed load inflates the cost of its first few sessions,
    /// so a backend with *more* sessions looks cheaper per session and is offered more
    /// headroom (the simulator's `silent_then_speaking` scenario shows the effect).
    /// `idle_utilisation` is clamped into `[0, u]`; a non-finite value reads as 0.
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_capacity::{CapacityConfig, Estimate};
    ///
    /// let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
    /// // 10 sessions at u = 0.30 of which 0.20 is the idle baseline: each session costs
    /// // 0.1 / (10 / 10 s) = 0.1, so (0.8 − 0.3) / 0.1 / 2 × 10 s = 25 more.
    /// let e = Estimate::compute_above_idle(&config, 10, 0.30, 0.20, None);
    /// assert!((e.headroom - 25.0).abs() < 1e-9);
    /// // Charging the baseline to the sessions would offer 25 × 1/3 ≈ 8.3.
    /// assert!(Estimate::compute(&config, 10, 0.30, None).headroom < 8.4);
    /// # Ok::<(), livecount_capacity::ConfigError>(())
    /// ```
    pub fn compute_above_idle(
        config: &CapacityConfig,
        active: u64,
        utilisation: f64,
        idle_utilisation: f64,
        prior_cost: Option<f64>,
    ) -> Self {
        let u = sanitize_utilisation(utilisation);
        let cost = cost_above_idle(active, u, idle_utilisation, config.window());
        Self::compute_with_cost(config, active, u, cost, prior_cost)
    }

    /// The fresh estimate for `active` sessions at `utilisation` with a cost per session
    /// learned elsewhere (`cost`; `None` or not positive and finite: the prior, as in
    /// [`compute`](Self::compute)).
    pub(crate) fn compute_with_cost(
        config: &CapacityConfig,
        active: u64,
        utilisation: f64,
        cost: Option<f64>,
        prior_cost: Option<f64>,
    ) -> Self {
        let u = sanitize_utilisation(utilisation);
        let cost = cost
            .filter(|c| c.is_finite() && *c > 0.0)
            .unwrap_or_else(|| effective_prior(config, prior_cost));
        let rate = additional_session_rate(config, u, cost);
        let headroom = clamp_headroom(rate * config.report_interval().as_secs_f64());
        Self::from_headroom(active, headroom, Freshness::Fresh)
    }

    pub(crate) fn from_headroom(active: u64, headroom: f64, freshness: Freshness) -> Self {
        let headroom = clamp_headroom(headroom);
        Self {
            effective_capacity: active as f64 + headroom,
            headroom,
            weight: headroom,
            freshness,
        }
    }
}

/// The documented rule for out-of-range utilisation: clamp into [0, 1]; NaN reads as 1
/// (saturated, so no capacity is offered on a garbled report); ±∞ clamp to 1 and 0.
///
/// ```
/// use livecount_capacity::sanitize_utilisation;
///
/// assert_eq!(sanitize_utilisation(-0.5), 0.0);
/// assert_eq!(sanitize_utilisation(1.7), 1.0);
/// assert_eq!(sanitize_utilisation(f64::NAN), 1.0);
/// ```
pub fn sanitize_utilisation(u: f64) -> f64 {
    if u.is_nan() { 1.0 } else { u.clamp(0.0, 1.0) }
}

/// pretend_qps = n / w: active sessions read as a request rate over the window.
///
/// The workspace's one definition: `livecount-report`'s `LoadReport::pretend_qps` (served
/// on `/load` and `/metrics`) is this, and `livecount-session`'s `Window` carries none of
/// its own.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(livecount_capacity::pretend_qps(90, Duration::from_secs(10)), 9.0);
/// ```
pub fn pretend_qps(active: u64, window: Duration) -> f64 {
    let w = window.as_secs_f64();
    if w > 0.0 { active as f64 / w } else { 0.0 }
}

/// cost_per_session = u / pretend_qps, or `None` when undefined (no sessions, utilisation
/// below [`MIN_MEASURABLE_UTILISATION`], or a zero window). `u` is sanitised first.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::cost_per_session;
///
/// let w = Duration::from_secs(10);
/// assert_eq!(cost_per_session(80, 0.40, w), Some(0.05));
/// assert_eq!(cost_per_session(0, 0.40, w), None);
/// ```
pub fn cost_per_session(active: u64, utilisation: f64, window: Duration) -> Option<f64> {
    let u = sanitize_utilisation(utilisation);
    let qps = pretend_qps(active, window);
    let cost = u / qps;
    (u >= MIN_MEASURABLE_UTILISATION && qps > 0.0 && cost.is_finite() && cost > 0.0).then_some(cost)
}

/// [`cost_per_session`] of the utilisation above the idle baseline: `(u − idle) /
/// pretend_qps`, with `idle` clamped into `[0, u]` (non-finite reads as 0).
pub(crate) fn cost_above_idle(active: u64, u: f64, idle: f64, window: Duration) -> Option<f64> {
    cost_of(active as f64, u, idle, window)
}

/// [`cost_above_idle`] for a fractional (averaged) session count `sessions`.
pub(crate) fn cost_of(sessions: f64, u: f64, idle: f64, window: Duration) -> Option<f64> {
    let u = sanitize_utilisation(u);
    let idle = if idle.is_finite() {
        idle.clamp(0.0, u)
    } else {
        0.0
    };
    let busy = u - idle;
    let w = window.as_secs_f64();
    let cost = busy * w / sessions;
    (busy >= MIN_MEASURABLE_UTILISATION
        && sessions > 0.0
        && w > 0.0
        && cost.is_finite()
        && cost > 0.0)
        .then_some(cost)
}

/// additional_session_rate = max(0, t − u) / cost / k, in sessions per second.
///
/// Returns 0 for a non-finite or non-positive cost, so it never invents capacity.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::{additional_session_rate, CapacityConfig};
///
/// let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
/// assert!((additional_session_rate(&config, 0.40, 0.05) - 4.0).abs() < 1e-12);
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
pub fn additional_session_rate(config: &CapacityConfig, utilisation: f64, cost: f64) -> f64 {
    if !(cost.is_finite() && cost > 0.0) {
        return 0.0;
    }
    let spare = (config.target_utilisation() - sanitize_utilisation(utilisation)).max(0.0);
    let rate = spare / cost / config.safety_scaler();
    if rate.is_finite() { rate } else { MAX_HEADROOM }
}

fn effective_prior(config: &CapacityConfig, prior_cost: Option<f64>) -> f64 {
    match prior_cost {
        Some(c) if c.is_finite() && c > 0.0 => c.clamp(1e-9, 1e9),
        _ => config.prior_cost(),
    }
}

/// NaN → 0, then into [0, MAX_HEADROOM].
fn clamp_headroom(h: f64) -> f64 {
    if h.is_nan() {
        0.0
    } else {
        h.clamp(0.0, MAX_HEADROOM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn article(k: f64) -> CapacityConfig {
        let s = Duration::from_secs(10);
        CapacityConfig::new(0.80, k, s, s).unwrap()
    }

    #[test]
    fn above_target_admits_no_new_sessions() {
        let e = Estimate::compute(&article(2.0), 10, 0.90, None);
        assert_eq!(e.effective_capacity, 10.0);
        assert_eq!(e.headroom, 0.0);
        assert_eq!(e.weight, 0.0);
    }

    #[test]
    fn half_loaded_backend_gets_120_with_k2_and_160_with_k1() {
        let e2 = Estimate::compute(&article(2.0), 80, 0.40, None);
        assert!((e2.effective_capacity - 120.0).abs() < 1e-9, "{e2:?}");
        let e1 = Estimate::compute(&article(1.0), 80, 0.40, None);
        assert!((e1.effective_capacity - 160.0).abs() < 1e-9, "{e1:?}");
    }

    #[test]
    fn pretend_qps_matches_the_article() {
        assert_eq!(pretend_qps(90, Duration::from_secs(10)), 9.0);
    }

    #[test]
    fn idle_or_empty_backend_uses_the_prior_not_infinity() {
        let c = article(2.0);
        // (0.8 - 0) / 0.05 / 2 * 10 s = 80 sessions.
        let empty = Estimate::compute(&c, 0, 0.0, Some(0.05));
        assert!((empty.headroom - 80.0).abs() < 1e-9, "{empty:?}");
        let idle = Estimate::compute(&c, 50, 0.0, Some(0.05));
        assert!((idle.effective_capacity - 130.0).abs() < 1e-9, "{idle:?}");
        // No fleet mean: the documented default, 0.8 / 0.1 / 2 * 10 = 40.
        let default = Estimate::compute(&c, 0, 0.0, None);
        assert!((default.headroom - 40.0).abs() < 1e-9, "{default:?}");
        let garbage = Estimate::compute(&c, 0, 0.0, Some(f64::NAN));
        assert_eq!(garbage, default);
    }

    #[test]
    fn out_of_range_utilisation_follows_the_rule() {
        let c = article(2.0);
        assert_eq!(Estimate::compute(&c, 10, f64::NAN, None).headroom, 0.0);
        assert_eq!(Estimate::compute(&c, 10, 3.0, None).headroom, 0.0);
        assert_eq!(Estimate::compute(&c, 10, f64::INFINITY, None).headroom, 0.0);
        assert_eq!(
            Estimate::compute(&c, 10, -1.0, Some(0.1)),
            Estimate::compute(&c, 10, 0.0, Some(0.1))
        );
    }

    #[test]
    fn tiny_utilisation_with_many_sessions_stays_finite() {
        let c = article(1.0);
        let e = Estimate::compute(&c, u64::MAX, MIN_MEASURABLE_UTILISATION, None);
        assert!(e.effective_capacity.is_finite() && e.headroom <= MAX_HEADROOM);
    }
}
