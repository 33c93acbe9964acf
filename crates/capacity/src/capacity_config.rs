//! Validated parameters of the hybrid capacity model.

use std::time::Duration;

use crate::ConfigError;

/// Default prior cost per session (utilisation per session/second of pretend QPS), used when
/// a backend's own cost is undefined and the caller passes no fleet mean.
///
/// 0.1 means "ten sessions held over a 10 s window use 10 % of a backend": deliberately
/// pessimistic, so an unmeasured backend is offered a modest number of sessions, not the
/// whole fleet's load.
pub const DEFAULT_PRIOR_COST: f64 = 0.1;

/// Validated parameters of the hybrid capacity model (the formula in the crate docs).
///
/// Build one with [`CapacityConfig::new`] or [`CapacityConfig::builder`]; every field is
/// checked there, so a `CapacityConfig` value is always usable.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::CapacityConfig;
///
/// let config = CapacityConfig::new(0.80, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
/// assert_eq!(config.stale_ttl(), Duration::from_secs(30)); // 3 reporting intervals
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacityConfig {
    target: f64,
    safety_scaler: f64,
    window: Duration,
    report_interval: Duration,
    stale_ttl: Duration,
    stale_half_life: Duration,
    slow_start: Duration,
    ewma_alpha: f64,
    cost_alpha: f64,
    prior_cost: f64,
}

/// Default [`CapacityConfigBuilder::cost_alpha`]: the cost per session is learned over
/// about ten reports (a time constant of ~10 report intervals), because it is a property
/// of the workload, while the utilisation it is charged against moves report by report.
pub const DEFAULT_COST_ALPHA: f64 = 0.1;

impl CapacityConfig {
    /// A configuration with the four core parameters and defaults for the rest: stale TTL
    /// 3 × `report_interval`, stale half-life 1 × `report_interval`, slow start 1 ×
    /// `report_interval`, EWMA α 0.5, cost α [`DEFAULT_COST_ALPHA`], prior cost
    /// [`DEFAULT_PRIOR_COST`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_capacity::CapacityConfig;
    ///
    /// let secs = Duration::from_secs;
    /// assert!(CapacityConfig::new(0.8, 2.0, secs(10), secs(10)).is_ok());
    /// assert!(CapacityConfig::new(0.8, 0.5, secs(10), secs(10)).is_err()); // k < 1
    /// ```
    pub fn new(
        target: f64,
        safety_scaler: f64,
        window: Duration,
        report_interval: Duration,
    ) -> Result<Self, ConfigError> {
        Self::builder()
            .target_utilisation(target)
            .safety_scaler(safety_scaler)
            .window(window)
            .report_interval(report_interval)
            .build()
    }

    /// A builder starting from t = 0.8, k = 2, w = r = 10 s and the defaults of [`new`](Self::new).
    ///
    /// ```
    /// use std::time::Duration;
    /// use livecount_capacity::CapacityConfig;
    ///
    /// let config = CapacityConfig::builder()
    ///     .target_utilisation(0.7)
    ///     .stale_ttl(Duration::from_secs(5))
    ///     .build()?;
    /// assert_eq!(config.target_utilisation(), 0.7);
    /// # Ok::<(), livecount_capacity::ConfigError>(())
    /// ```
    pub fn builder() -> CapacityConfigBuilder {
        CapacityConfigBuilder::default()
    }

    /// Target utilisation t, in (0, 1].
    pub fn target_utilisation(&self) -> f64 {
        self.target
    }

    /// Safety scaler k ≥ 1: divides the additional session rate.
    pub fn safety_scaler(&self) -> f64 {
        self.safety_scaler
    }

    /// Reporting window w over which sessions and utilisation are measured.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Reporting interval r: how far ahead the additional session rate is extrapolated.
    pub fn report_interval(&self) -> Duration {
        self.report_interval
    }

    /// Age after which a report is stale.
    pub fn stale_ttl(&self) -> Duration {
        self.stale_ttl
    }

    /// Half-life of a stale report's headroom, counted from the TTL.
    pub fn stale_half_life(&self) -> Duration {
        self.stale_half_life
    }

    /// Slow-start period of a newly seen backend: its weight ramps linearly from 0.
    pub fn slow_start(&self) -> Duration {
        self.slow_start
    }

    /// EWMA smoothing factor α in (0, 1] per report interval (1 = no smoothing); a gap of
    /// g intervals weighs the new report `1 − (1 − α)^g`.
    pub fn ewma_alpha(&self) -> f64 {
        self.ewma_alpha
    }

    /// EWMA factor α per report interval of the learned cost per session (see
    /// [`BackendModel`](crate::BackendModel)): the cost is the smoothed busy utilisation
    /// over the smoothed session count, both averaged with this α over the reports that
    /// had sessions.
    pub fn cost_alpha(&self) -> f64 {
        self.cost_alpha
    }

    /// Prior cost per session used when none is passed in and a backend's own is undefined.
    pub fn prior_cost(&self) -> f64 {
        self.prior_cost
    }
}

/// Builder for [`CapacityConfig`]; [`build`](Self::build) validates every field.
///
/// ```
/// use std::time::Duration;
/// use livecount_capacity::CapacityConfigBuilder;
///
/// let err = CapacityConfigBuilder::default().window(Duration::ZERO).build().unwrap_err();
/// assert_eq!(err.field(), "window");
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct CapacityConfigBuilder {
    target: f64,
    safety_scaler: f64,
    window: Duration,
    report_interval: Duration,
    stale_ttl: Option<Duration>,
    stale_half_life: Option<Duration>,
    slow_start: Option<Duration>,
    ewma_alpha: f64,
    cost_alpha: f64,
    prior_cost: f64,
}

impl Default for CapacityConfigBuilder {
    fn default() -> Self {
        Self {
            target: 0.8,
            safety_scaler: 2.0,
            window: Duration::from_secs(10),
            report_interval: Duration::from_secs(10),
            stale_ttl: None,
            stale_half_life: None,
            slow_start: None,
            ewma_alpha: 0.5,
            cost_alpha: DEFAULT_COST_ALPHA,
            prior_cost: DEFAULT_PRIOR_COST,
        }
    }
}

impl CapacityConfigBuilder {
    /// Sets target utilisation t; allowed (0, 1].
    pub fn target_utilisation(mut self, t: f64) -> Self {
        self.target = t;
        self
    }

    /// Sets safety scaler k; allowed [1, ∞).
    pub fn safety_scaler(mut self, k: f64) -> Self {
        self.safety_scaler = k;
        self
    }

    /// Sets window w; allowed > 0.
    pub fn window(mut self, w: Duration) -> Self {
        self.window = w;
        self
    }

    /// Sets reporting interval r; allowed > 0.
    pub fn report_interval(mut self, r: Duration) -> Self {
        self.report_interval = r;
        self
    }

    /// Sets the stale TTL; allowed > 0; default 3 × r.
    pub fn stale_ttl(mut self, ttl: Duration) -> Self {
        self.stale_ttl = Some(ttl);
        self
    }

    /// Sets the stale half-life; allowed > 0; default r.
    pub fn stale_half_life(mut self, half_life: Duration) -> Self {
        self.stale_half_life = Some(half_life);
        self
    }

    /// Sets the slow-start period; zero disables it; default r.
    pub fn slow_start(mut self, period: Duration) -> Self {
        self.slow_start = Some(period);
        self
    }

    /// Sets the EWMA factor α per report interval; allowed (0, 1].
    pub fn ewma_alpha(mut self, alpha: f64) -> Self {
        self.ewma_alpha = alpha;
        self
    }

    /// Sets the EWMA factor α per report interval of the learned cost per session;
    /// allowed (0, 1]; default [`DEFAULT_COST_ALPHA`]. 1 charges each report's busy
    /// utilisation to its own session count (no averaging); smaller values average the
    /// cost over more reports, so the burstiness of a few sessions does not swing the
    /// headroom (and the weight a balancer reads) report by report.
    pub fn cost_alpha(mut self, alpha: f64) -> Self {
        self.cost_alpha = alpha;
        self
    }

    /// Sets the default prior cost; allowed [1e-9, 1e9].
    pub fn prior_cost(mut self, cost: f64) -> Self {
        self.prior_cost = cost;
        self
    }

    /// Validates and returns the configuration, or the first field out of range.
    pub fn build(self) -> Result<CapacityConfig, ConfigError> {
        // `!(a && b)` rather than `a || b` on the negations so NaN is rejected too.
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err(ConfigError::new(
                "target_utilisation",
                self.target,
                "(0, 1]",
            ));
        }
        if !(self.safety_scaler >= 1.0 && self.safety_scaler <= 1e9) {
            return Err(ConfigError::new(
                "safety_scaler",
                self.safety_scaler,
                "[1, 1e9]",
            ));
        }
        if self.window.is_zero() {
            return Err(ConfigError::new("window", self.window, "> 0"));
        }
        if self.report_interval.is_zero() {
            return Err(ConfigError::new(
                "report_interval",
                self.report_interval,
                "> 0",
            ));
        }
        let r = self.report_interval;
        let stale_ttl = self.stale_ttl.unwrap_or(r.saturating_mul(3));
        if stale_ttl.is_zero() {
            return Err(ConfigError::new("stale_ttl", stale_ttl, "> 0"));
        }
        let stale_half_life = self.stale_half_life.unwrap_or(r);
        if stale_half_life.is_zero() {
            return Err(ConfigError::new("stale_half_life", stale_half_life, "> 0"));
        }
        if !(self.ewma_alpha > 0.0 && self.ewma_alpha <= 1.0) {
            return Err(ConfigError::new("ewma_alpha", self.ewma_alpha, "(0, 1]"));
        }
        if !(self.cost_alpha > 0.0 && self.cost_alpha <= 1.0) {
            return Err(ConfigError::new("cost_alpha", self.cost_alpha, "(0, 1]"));
        }
        if !(self.prior_cost >= 1e-9 && self.prior_cost <= 1e9) {
            return Err(ConfigError::new(
                "prior_cost",
                self.prior_cost,
                "[1e-9, 1e9]",
            ));
        }
        Ok(CapacityConfig {
            target: self.target,
            safety_scaler: self.safety_scaler,
            window: self.window,
            report_interval: r,
            stale_ttl,
            stale_half_life,
            slow_start: self.slow_start.unwrap_or(r),
            ewma_alpha: self.ewma_alpha,
            cost_alpha: self.cost_alpha,
            prior_cost: self.prior_cost,
        })
    }
}
