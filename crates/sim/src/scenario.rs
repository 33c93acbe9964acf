//! Scenario files: the workload, the fleet and the load balancer's reporting, as TOML.
//!
//! Every key is listed in `crates/sim/scenarios/README.md`; unknown keys are an error, and
//! every number is range-checked with the key and range named in the error.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ScenarioError;
use crate::autoscaler::Autoscaler;

/// One simulation setup, read from a TOML file.
///
/// ```
/// use livecount_sim::Scenario;
///
/// let s = Scenario::from_toml_str(r#"
///     description = "two backends, steady arrivals"
///     duration_s = 60
///     [arrivals]
///     rate_per_s = 2
///     [sessions]
///     duration = "exponential"
///     mean_s = 30
///     [[backends]]
///     count = 2
/// "#, "inline.toml")?;
/// assert_eq!(s.backend_count(), 2);
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; defaults to the file's stem.
    #[serde(default)]
    pub name: String,
    /// One line: what the scenario demonstrates.
    pub description: String,
    /// Seed of the workload and of the policies' random choices.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Arrivals happen in `[0, duration_s)`; the run then drains every open session.
    pub duration_s: f64,
    /// Policies to compare (names from `lbsim policies`); empty means all.
    #[serde(default)]
    pub policies: Vec<String>,
    /// How backends count their sessions: `tracked` (every ending path decrements once, as
    /// livecount-session does) or `naive` (only clean closes decrement: forced disconnects
    /// and deaths leave ghosts that the reports carry).
    #[serde(default)]
    pub counter: CounterKind,
    /// Seconds between samples of the fleet (spread over time); default the report interval.
    #[serde(default)]
    pub sample_interval_s: Option<f64>,
    /// The arrival process.
    pub arrivals: Arrivals,
    /// What a session is.
    pub sessions: Sessions,
    /// The fleet, as groups of identical backends.
    pub backends: Vec<BackendGroup>,
    /// How and when backends report load.
    #[serde(default)]
    pub reports: Reports,
    /// The CPU curve.
    #[serde(default)]
    pub cpu: Cpu,
    /// Startup latency and time to first stream.
    #[serde(default)]
    pub latency: Latency,
    /// The hybrid capacity model's parameters (also the "overloaded" threshold).
    #[serde(default)]
    pub capacity: Capacity,
    /// The balancing tier: how many independent proxies, and their probes' round trip.
    #[serde(default)]
    pub balancer: Balancer,
    /// Backends that die (and maybe come back).
    #[serde(default)]
    pub failures: Vec<Failure>,
    /// Moments when every open session speaks at once.
    #[serde(default)]
    pub waves: Vec<Wave>,
    /// Every backend restarted in turn (a deploy); absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_restart: Option<RollingRestart>,
    /// An HPA-like autoscaler resizing the fleet (the `[[backends]]` are then its pool);
    /// absent = a fixed fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<Autoscaler>,
}

fn default_seed() -> u64 {
    1
}

/// How backends count their own sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterKind {
    /// Exactly once on every ending path.
    #[default]
    Tracked,
    /// Only clean ends (completed, cancelled) decrement.
    Naive,
}

/// Arrival pattern.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Poisson arrivals at a constant rate.
    #[default]
    Poisson,
    /// Poisson background plus `burst_size` simultaneous arrivals every `burst_every_s`.
    Bursts,
    /// Rate follows a sine between `min_factor` × rate and rate, period `period_s`.
    Diurnal,
    /// Rate × `factor` during `[at_s, at_s + for_s)`.
    FlashCrowd,
}

/// The arrival process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arrivals {
    /// Pattern of the rate over time.
    #[serde(default)]
    pub pattern: Pattern,
    /// Base arrival rate (sessions per second). Give this or `target_concurrent`.
    #[serde(default)]
    pub rate_per_s: Option<f64>,
    /// Steady-state open sessions wanted; the rate is this ÷ the mean session length.
    #[serde(default)]
    pub target_concurrent: Option<f64>,
    /// `bursts`: seconds between bursts.
    #[serde(default)]
    pub burst_every_s: Option<f64>,
    /// `bursts`: sessions per burst.
    #[serde(default)]
    pub burst_size: Option<u32>,
    /// `diurnal`: period of the cycle.
    #[serde(default)]
    pub period_s: Option<f64>,
    /// `diurnal`: lowest rate as a share of the peak.
    #[serde(default)]
    pub min_factor: Option<f64>,
    /// `flash_crowd`: start of the crowd.
    #[serde(default)]
    pub at_s: Option<f64>,
    /// `flash_crowd`: its length.
    #[serde(default)]
    pub for_s: Option<f64>,
    /// `flash_crowd`: rate multiplier during it.
    #[serde(default)]
    pub factor: Option<f64>,
}

/// Session length distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurationDist {
    /// Always `mean_s`.
    Fixed,
    /// Exponential with mean `mean_s`.
    Exponential,
    /// Log-normal with mean `mean_s` and shape `sigma`.
    Lognormal,
    /// Pareto with mean `mean_s` and tail index `alpha` (heavy tail).
    Pareto,
}

/// What one session is: its length, phases, costs and how it may end early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sessions {
    /// Length distribution of long sessions.
    pub duration: DurationDist,
    /// Mean length of long sessions, seconds.
    pub mean_s: f64,
    /// Log-normal shape.
    #[serde(default = "one")]
    pub sigma: f64,
    /// Pareto tail index (> 1).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Longest session allowed (the server's maximum session length), seconds.
    #[serde(default = "default_max_s")]
    pub max_s: f64,
    /// Share of arrivals that are short, request-like sessions.
    #[serde(default)]
    pub short_share: f64,
    /// Length of a short session, seconds.
    #[serde(default = "default_short_s")]
    pub short_s: f64,
    /// Mean listening (idle) phase, seconds.
    #[serde(default = "default_idle_s")]
    pub idle_mean_s: f64,
    /// Mean speaking (generating) phase, seconds; 0 = sessions never speak.
    #[serde(default = "default_speaking_s")]
    pub speaking_mean_s: f64,
    /// CPU of one listening session, in cores of a size-1 backend.
    #[serde(default = "default_idle_cost")]
    pub idle_cost: f64,
    /// CPU of one speaking session (short sessions always cost this), in cores.
    #[serde(default = "default_speaking_cost")]
    pub speaking_cost: f64,
    /// Share of long sessions the client cancels early.
    #[serde(default)]
    pub cancel_share: f64,
    /// Share of long sessions whose connection is cut (no close frame).
    #[serde(default)]
    pub disconnect_share: f64,
    /// Spread of the work per session: each session's costs are multiplied by a log-normal
    /// factor with mean 1 and this shape (0 = every session costs the same).
    #[serde(default)]
    pub cost_sigma: f64,
}

fn one() -> f64 {
    1.0
}
fn default_alpha() -> f64 {
    1.5
}
fn default_max_s() -> f64 {
    1200.0
}
fn default_short_s() -> f64 {
    0.05
}
fn default_idle_s() -> f64 {
    8.0
}
fn default_speaking_s() -> f64 {
    4.0
}
fn default_idle_cost() -> f64 {
    0.002
}
fn default_speaking_cost() -> f64 {
    0.02
}

/// A group of identical backends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendGroup {
    /// How many.
    pub count: u32,
    /// Cores, relative to a size-1 backend (costs are divided by it).
    #[serde(default = "one")]
    pub size: f64,
    /// Hard limit: sessions past it are rejected. Also the static-slots policy's slot count.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: u32,
    /// Utilisation with no sessions at all (runtime, health checks).
    #[serde(default = "default_base_utilisation")]
    pub base_utilisation: f64,
    /// Extra share of the long sessions placed here whose connection is cut (a flaky
    /// network path to these backends), on top of `sessions.disconnect_share`.
    #[serde(default)]
    pub disconnect_share: f64,
    /// Latency multiplier of these backends that their CPU does not show (a degraded disk,
    /// a slow dependency, a noisy neighbour on the accelerator): 1 = healthy.
    #[serde(default = "one")]
    pub slowdown: f64,
}

fn default_max_sessions() -> u32 {
    100
}
fn default_base_utilisation() -> f64 {
    0.02
}

/// Load reporting from backends to the balancer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reports {
    /// Seconds between a backend's reports (r).
    pub interval_s: f64,
    /// Window utilisation and arrivals are averaged over (w).
    pub window_s: f64,
    /// Probability that a report is lost.
    pub loss: f64,
    /// Seconds a report takes to reach the balancer.
    pub delay_s: f64,
    /// Backends whose reports stop (they keep serving).
    pub stale: Vec<Stale>,
    /// Seconds until the balancer's health check notices a dead backend.
    pub health_check_s: f64,
}

impl Default for Reports {
    fn default() -> Self {
        Self {
            interval_s: 10.0,
            window_s: 10.0,
            loss: 0.0,
            delay_s: 0.0,
            stale: Vec::new(),
            health_check_s: 5.0,
        }
    }
}

/// A backend whose reports stop at `from_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stale {
    /// Backend index (0-based, in group order).
    pub backend: u32,
    /// When its reports stop.
    pub from_s: f64,
}

/// The CPU curve: u = min(1, raw + overhead · rawᵉˣᵖᵒⁿᵉⁿᵗ), raw = base + Σ costs ÷ size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cpu {
    /// Extra utilisation near saturation (contention, cache misses).
    pub overhead: f64,
    /// How sharply the overhead rises.
    pub exponent: f64,
}

impl Default for Cpu {
    fn default() -> Self {
        Self {
            overhead: 0.15,
            exponent: 4.0,
        }
    }
}

/// Queueing latency: each is exponential with mean `base ÷ (1 − min(u, 0.98))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Latency {
    /// Session setup on an idle backend, milliseconds.
    pub startup_ms: f64,
    /// First streamed response after setup on an idle backend, milliseconds.
    pub first_stream_ms: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            startup_ms: 40.0,
            first_stream_ms: 250.0,
        }
    }
}

/// The hybrid model's parameters (`livecount-capacity`'s crate docs); window and interval come from `reports`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capacity {
    /// Target utilisation t; above it an assignment counts as overloaded.
    pub target: f64,
    /// Safety scaler k ≥ 1.
    pub safety_scaler: f64,
    /// Slow start of a newly seen backend, seconds.
    pub slow_start_s: f64,
}

impl Default for Capacity {
    fn default() -> Self {
        Self {
            target: 0.8,
            safety_scaler: 2.0,
            slow_start_s: 0.0,
        }
    }
}

/// The balancing tier in front of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Balancer {
    /// Independent proxies, each running its own copy of the policy and seeing only the
    /// reports (shared), its own sends and its own open streams; arrivals are spread over
    /// them in turn, as ECMP or DNS round robin would, or by `proxy_shares`.
    pub proxies: u32,
    /// Each proxy's share of the arrivals, one per proxy (relative weights), as a DNS or
    /// anycast spread skews them; empty: equal shares, in turn. See [`Balancer::proxy_of`].
    pub proxy_shares: Vec<f64>,
    /// Proxies restarted mid-run (a HAProxy reload, an Envoy hot restart, `nginx -s
    /// reload`): see [`Reload`].
    pub reloads: Vec<Reload>,
    /// Round trip of a probe (Prequal), seconds: the reply describes the backend when the
    /// probe was sent and arrives this long after.
    pub probe_delay_s: f64,
    /// Probability that a probe or its reply is lost.
    pub probe_loss: f64,
}

impl Default for Balancer {
    fn default() -> Self {
        Self {
            proxies: 1,
            proxy_shares: Vec::new(),
            reloads: Vec::new(),
            probe_delay_s: 0.002,
            probe_loss: 0.0,
        }
    }
}

impl Balancer {
    /// The proxy the `id`th arrival (from 0, in arrival order) reaches: in turn, or, with
    /// `proxy_shares`, the proxy whose slice of the cumulative shares holds the `id`th point
    /// of the golden-ratio sequence (stateless, so a replay of the same plan sends every
    /// session to the same proxy; any run of arrivals splits close to the shares). The
    /// simulator and the testbed both route by it.
    ///
    /// ```
    /// use livecount_sim::Balancer;
    ///
    /// let even = Balancer { proxies: 3, ..Balancer::default() };
    /// assert_eq!((0..6).map(|i| even.proxy_of(i)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2]);
    ///
    /// let skewed = Balancer { proxies: 2, proxy_shares: vec![3.0, 1.0], ..Balancer::default() };
    /// let first = (0..1000).filter(|&i| skewed.proxy_of(i) == 0).count();
    /// assert!((740..=760).contains(&first), "{first}");
    /// ```
    pub fn proxy_of(&self, id: u64) -> usize {
        let proxies = self.proxies.max(1) as usize;
        if self.proxy_shares.len() != proxies {
            return (id % proxies as u64) as usize;
        }
        // frac(id × (√5 − 1) / 2) in 64-bit fixed point (exact for every id): equidistributed,
        // and well spread over any window of arrivals.
        const PHI_2_64: u64 = 0x9E37_79B9_7F4A_7C15;
        let unit = (id.wrapping_mul(PHI_2_64) >> 11) as f64 / (1u64 << 53) as f64;
        let point = unit * self.proxy_shares.iter().sum::<f64>();
        let mut edge = 0.0;
        for (p, share) in self.proxy_shares.iter().enumerate() {
            edge += share;
            if point < edge {
                return p;
            }
        }
        proxies - 1
    }
}

/// A proxy that restarts at `at_s`: its policy starts over, it knows of no report, and its
/// own count of open streams starts from zero while the streams its old process placed stay
/// open on the backends (they end unseen by the new one), as a real proxy's reload leaves
/// its old process serving them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reload {
    /// The proxy (from 0).
    pub proxy: u32,
    /// When, seconds from the start.
    pub at_s: f64,
}

/// A backend that dies at `at_s` and, with `down_for_s`, comes back empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// Backend index.
    pub backend: u32,
    /// Time of death.
    pub at_s: f64,
    /// Downtime; absent = never comes back.
    #[serde(default)]
    pub down_for_s: Option<f64>,
}

/// What a backend does with its open sessions when it is told to restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartMode {
    /// Exits at once: every open session ends `shutdown` (what a bare SIGTERM does).
    Cut,
    /// Stops admitting, lets its sessions end on their own until `drain_deadline_s`, ends
    /// the rest `shutdown`, then exits (as soon as it is empty, if that is earlier).
    Drain,
}

/// A rolling restart: backends 0, 1, … restarted one at a time. Backend i + 1 starts its
/// restart `gap_s` after backend i is back (a Kubernetes rolling update with one
/// unavailable at a time, `minReadySeconds = gap_s`).
///
/// ```
/// use livecount_sim::{RestartMode, Scenario};
///
/// let s = Scenario::from_toml_str(r#"
///     description = "a deploy"
///     duration_s = 600
///     [arrivals]
///     target_concurrent = 100
///     [sessions]
///     duration = "lognormal"
///     mean_s = 60
///     [[backends]]
///     count = 4
///     [rolling_restart]
///     start_s = 60
///     mode = "drain"
///     drain_deadline_s = 60
///     restart_s = 20
/// "#, "inline.toml")?;
/// let r = s.rolling_restart.as_ref().unwrap();
/// assert_eq!((r.mode, r.gap_s), (RestartMode::Drain, 0.0));
/// // Every session the restart ends comes back through the balancer 1 s later.
/// assert_eq!((r.reconnect_share, r.reconnect_after_s), (1.0, 1.0));
/// // Each of 4 backends: at most 60 s draining and 20 s away.
/// assert_eq!(r.latest_end(s.backend_count()), 60.0 + 4.0 * 80.0);
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollingRestart {
    /// When backend 0 is told to restart.
    pub start_s: f64,
    /// `cut` or `drain`.
    pub mode: RestartMode,
    /// `drain` only: how long a draining backend waits for its sessions before it ends
    /// the rest.
    #[serde(default)]
    pub drain_deadline_s: Option<f64>,
    /// How long a backend is away, from its exit until its replacement is ready.
    pub restart_s: f64,
    /// Pause between one backend being back and the next one's restart.
    #[serde(default)]
    pub gap_s: f64,
    /// Share of the sessions a restart ends (`shutdown`) whose client reconnects through
    /// the balancer for the rest of its conversation: 1 (every one) unless set; 0 models
    /// clients that give up.
    #[serde(default = "one")]
    pub reconnect_share: f64,
    /// How long after its cut a reconnecting client arrives again.
    #[serde(default = "default_reconnect_after_s")]
    pub reconnect_after_s: f64,
}

fn default_reconnect_after_s() -> f64 {
    1.0
}

impl RollingRestart {
    /// The latest instant the last of `backends` can be back: every drain running to its
    /// deadline.
    pub fn latest_end(&self, backends: usize) -> f64 {
        let drain = match self.mode {
            RestartMode::Cut => 0.0,
            RestartMode::Drain => self.drain_deadline_s.unwrap_or(0.0),
        };
        let each = drain + self.restart_s;
        self.start_s + backends as f64 * each + backends.saturating_sub(1) as f64 * self.gap_s
    }
}

/// Every open session speaks during `[at_s, at_s + for_s)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wave {
    /// Start.
    pub at_s: f64,
    /// Length.
    pub for_s: f64,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            file: file.clone(),
            source,
        })?;
        let mut scenario = Self::from_toml_str(&text, &file)?;
        if scenario.name.is_empty() {
            scenario.name = path
                .file_stem()
                .map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
        }
        Ok(scenario)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self, ScenarioError> {
        let scenario: Self = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        scenario.validate(file)?;
        Ok(scenario)
    }

    /// Total number of backends.
    pub fn backend_count(&self) -> usize {
        self.backends.iter().map(|g| g.count as usize).sum()
    }

    /// The group of backend `i` (0-based, in group order).
    pub fn group_of(&self, i: usize) -> &BackendGroup {
        let mut left = i;
        for g in &self.backends {
            if left < g.count as usize {
                return g;
            }
            left -= g.count as usize;
        }
        panic!("backend {i} out of range")
    }

    /// Mean session length over long and short sessions, seconds.
    pub fn mean_session_s(&self) -> f64 {
        let s = &self.sessions;
        s.short_share * s.short_s + (1.0 - s.short_share) * s.mean_s.min(s.max_s)
    }

    /// The base arrival rate, from `rate_per_s` or `target_concurrent`.
    pub fn base_rate(&self) -> f64 {
        match (self.arrivals.rate_per_s, self.arrivals.target_concurrent) {
            (Some(rate), _) => rate,
            (None, Some(n)) => n / self.mean_session_s(),
            (None, None) => 0.0,
        }
    }

    /// The hybrid capacity model's configuration: `[capacity]` with the report window and
    /// interval (one definition for the hybrid policies and the autoscaler's signal).
    pub(crate) fn capacity_config(&self) -> livecount_capacity::CapacityConfig {
        let k = &self.capacity;
        let secs = |s: f64| std::time::Duration::from_secs_f64(s.max(0.0));
        livecount_capacity::CapacityConfig::builder()
            .target_utilisation(k.target)
            .safety_scaler(k.safety_scaler)
            .window(secs(self.reports.window_s))
            .report_interval(secs(self.reports.interval_s))
            .slow_start(secs(k.slow_start_s))
            .build()
            .expect("scenario validation admits only valid capacity parameters")
    }

    /// Seconds between fleet samples.
    pub fn sample_interval(&self) -> f64 {
        self.sample_interval_s.unwrap_or(self.reports.interval_s)
    }
}
