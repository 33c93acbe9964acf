//! The `[autoscaler]` table of a scenario: what the autoscaler reads, its targets and
//! bounds, its behaviour (the HPA v2 `behavior` field, defaults included) and how a
//! scale-in picks and stops a backend. Range checks are in `validate.rs`.

use serde::{Deserialize, Serialize};

/// The metric an autoscaler scales on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Average CPU utilisation of the ready backends (a `Resource` metric with
    /// `target.averageUtilization`), against `cpu_target`.
    Cpu,
    /// Active sessions per ready backend (a `Pods` metric with `target.averageValue`),
    /// against `sessions_target`.
    Sessions,
    /// The hybrid model's share of the fleet's effective capacity in use, Σ active ÷
    /// Σ effective capacity (an `External` metric with `target.value`), against
    /// `capacity_target`.
    Capacity,
}

/// How a scale-in picks the backend to remove and what happens to its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleIn {
    /// A backend picked at random, its open sessions cut at once (`shutdown`): the
    /// ReplicaSet's choice among equally ranked pods, whose process exits on SIGTERM.
    Random,
    /// The backend with the fewest open sessions (`pod-deletion-cost` = its sessions), its
    /// sessions cut at once.
    Emptiest,
    /// The emptiest backend, drained: it admits no new session, its sessions end on their
    /// own until `drain_deadline_s`, the rest end `shutdown` then; it exits when empty.
    Drain,
}

/// One autoscaler setup the scenario compares: a signal and a scale-in.
///
/// ```
/// use livecount_sim::{ScaleIn, Signal, Variant};
///
/// let v = Variant { signal: Signal::Sessions, scale_in: ScaleIn::Drain };
/// assert_eq!(v.label(), "sessions/drain");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// What it scales on.
    pub signal: Signal,
    /// How it scales in.
    pub scale_in: ScaleIn,
}

impl Signal {
    /// The name used in scenario files and labels.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Sessions => "sessions",
            Self::Capacity => "capacity",
        }
    }
}

impl ScaleIn {
    /// The name used in scenario files and labels.
    pub fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::Emptiest => "emptiest",
            Self::Drain => "drain",
        }
    }
}

impl Variant {
    /// `signal/scale_in`, e.g. `cpu/random`: the row label in reports.
    pub fn label(self) -> String {
        format!("{}/{}", self.signal.name(), self.scale_in.name())
    }
}

/// An HPA scaling policy's kind (`behavior.scaleUp.policies[].type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// At most `value` pods added (or removed) per period.
    Pods,
    /// At most `value` % of the replicas at the period's start added (or removed).
    Percent,
}

/// One HPA scaling policy (`type`, `value`, `periodSeconds`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingPolicy {
    /// `pods` or `percent`.
    pub kind: PolicyKind,
    /// Pods, or percent.
    pub value: u32,
    /// The period the change is counted over, seconds.
    pub period_s: f64,
}

/// How the HPA picks among several policies (`selectPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectPolicy {
    /// The policy allowing the largest change (the default).
    #[default]
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// One direction's behaviour as written in the scenario (`behavior.scaleUp` or
/// `behavior.scaleDown`); every key left out takes the HPA's default for that direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRulesConfig {
    /// `stabilizationWindowSeconds`.
    #[serde(default)]
    pub stabilization_s: Option<f64>,
    /// `selectPolicy`.
    #[serde(default)]
    pub select: Option<SelectPolicy>,
    /// `policies`.
    #[serde(default)]
    pub policies: Option<Vec<ScalingPolicy>>,
}

/// One direction's behaviour with the defaults filled in: what [`Hpa`](super::Hpa) runs.
///
/// ```
/// use livecount_sim::autoscaler::ScalingRules;
///
/// // The HPA's defaults: scale up by max(100 %, 4 pods) per 15 s at once; scale down by
/// // up to 100 % per 15 s after a 300 s stabilization window.
/// let (up, down) = (ScalingRules::default_up(), ScalingRules::default_down());
/// assert_eq!((up.stabilization_s, up.policies.len()), (0.0, 2));
/// assert_eq!((down.stabilization_s, down.policies.len()), (300.0, 1));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRules {
    /// `stabilizationWindowSeconds`.
    pub stabilization_s: f64,
    /// `selectPolicy`.
    pub select: SelectPolicy,
    /// `policies`.
    pub policies: Vec<ScalingPolicy>,
}

impl ScalingRules {
    /// The HPA's default scale-up: no stabilization; 100 % or 4 pods per 15 s, whichever
    /// is more.
    pub fn default_up() -> Self {
        Self {
            stabilization_s: 0.0,
            select: SelectPolicy::Max,
            policies: vec![
                ScalingPolicy {
                    kind: PolicyKind::Percent,
                    value: 100,
                    period_s: 15.0,
                },
                ScalingPolicy {
                    kind: PolicyKind::Pods,
                    value: 4,
                    period_s: 15.0,
                },
            ],
        }
    }

    /// The HPA's default scale-down: a 300 s stabilization window; up to 100 % per 15 s.
    pub fn default_down() -> Self {
        Self {
            stabilization_s: 300.0,
            select: SelectPolicy::Max,
            policies: vec![ScalingPolicy {
                kind: PolicyKind::Percent,
                value: 100,
                period_s: 15.0,
            }],
        }
    }
}

impl ScalingRulesConfig {
    /// These rules, each key left out taken from `defaults`.
    pub fn resolve(&self, defaults: ScalingRules) -> ScalingRules {
        ScalingRules {
            stabilization_s: self.stabilization_s.unwrap_or(defaults.stabilization_s),
            select: self.select.unwrap_or(defaults.select),
            policies: self.policies.clone().unwrap_or(defaults.policies),
        }
    }
}

/// The `[autoscaler]` table: an HPA-like controller resizing the fleet. The `[[backends]]`
/// groups are then the *pool* the autoscaler starts backends from (index order); the
/// first `initial_replicas` are up at the start. Every combination of `signals` and
/// `scale_in` is run and reported as its own row (`cpu/random`, …).
///
/// ```
/// use livecount_sim::{ScaleIn, Scenario, Signal};
///
/// let s = Scenario::from_toml_str(r#"
///     description = "a fleet that follows its sessions"
///     duration_s = 600
///     [arrivals]
///     target_concurrent = 300
///     [sessions]
///     duration = "exponential"
///     mean_s = 120
///     [[backends]]
///     count = 20
///     [autoscaler]
///     signals = ["sessions"]
///     scale_in = ["drain"]
///     min_replicas = 2
///     max_replicas = 12
///     startup_s = 30
///     drain_deadline_s = 120
///     sessions_target = 60
/// "#, "inline.toml")?;
/// let a = s.autoscaler.as_ref().unwrap();
/// assert_eq!(a.initial(), 2, "min_replicas unless initial_replicas says otherwise");
/// assert_eq!((a.sync_period_s, a.tolerance), (15.0, 0.1), "the HPA's defaults");
/// assert_eq!(a.variants().len(), 1);
/// assert_eq!((a.variants()[0].signal, a.variants()[0].scale_in), (Signal::Sessions, ScaleIn::Drain));
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Autoscaler {
    /// Signals to compare (default: all three).
    #[serde(default = "all_signals")]
    pub signals: Vec<Signal>,
    /// Scale-in variants to compare (default: all three).
    #[serde(default = "all_scale_ins")]
    pub scale_in: Vec<ScaleIn>,
    /// `minReplicas`.
    pub min_replicas: u32,
    /// `maxReplicas` (at most the pool, the `[[backends]]` count).
    pub max_replicas: u32,
    /// Backends up at the start (default `min_replicas`).
    #[serde(default)]
    pub initial_replicas: Option<u32>,
    /// From a scale-up's decision until the new backend is ready (scheduling, image pull,
    /// model load, readiness probe); the balancer's health check notices it
    /// `reports.health_check_s` later.
    pub startup_s: f64,
    /// How long a draining backend waits for its sessions (required with `drain`).
    #[serde(default)]
    pub drain_deadline_s: Option<f64>,
    /// The controller's sync period (`--horizontal-pod-autoscaler-sync-period`).
    #[serde(default = "default_sync_period_s")]
    pub sync_period_s: f64,
    /// No change while |metric ÷ target − 1| ≤ this
    /// (`--horizontal-pod-autoscaler-tolerance`).
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Target mean utilisation (0–1) for `cpu`.
    #[serde(default)]
    pub cpu_target: Option<f64>,
    /// Target active sessions per backend for `sessions`.
    #[serde(default)]
    pub sessions_target: Option<f64>,
    /// Target share of effective capacity in use (0–1) for `capacity`.
    #[serde(default)]
    pub capacity_target: Option<f64>,
    /// `capacity`: whether the share's sums include draining backends (the plain query;
    /// `false`, the default: the query with `unless on(namespace, pod)
    /// (livecount_draining == 1)`, which leaves them out).
    #[serde(default)]
    pub share_includes_draining: bool,
    /// Share of the sessions a scale-in ends (`shutdown`) whose client reconnects.
    #[serde(default = "one")]
    pub reconnect_share: f64,
    /// From a session's cut to its client's reconnect.
    #[serde(default = "one")]
    pub reconnect_after_s: f64,
    /// `behavior.scaleUp` (defaults: [`ScalingRules::default_up`]).
    #[serde(default)]
    pub scale_up: ScalingRulesConfig,
    /// `behavior.scaleDown` (defaults: [`ScalingRules::default_down`]).
    #[serde(default)]
    pub scale_down: ScalingRulesConfig,
}

fn all_signals() -> Vec<Signal> {
    vec![Signal::Cpu, Signal::Sessions, Signal::Capacity]
}
fn all_scale_ins() -> Vec<ScaleIn> {
    vec![ScaleIn::Random, ScaleIn::Emptiest, ScaleIn::Drain]
}
fn default_sync_period_s() -> f64 {
    15.0
}
fn default_tolerance() -> f64 {
    0.1
}
fn one() -> f64 {
    1.0
}

impl Autoscaler {
    /// Backends up at the start.
    pub fn initial(&self) -> u32 {
        self.initial_replicas.unwrap_or(self.min_replicas)
    }

    /// Every (signal, scale-in) pair, signals outermost, in the order listed.
    pub fn variants(&self) -> Vec<Variant> {
        self.signals
            .iter()
            .flat_map(|&signal| {
                self.scale_in
                    .iter()
                    .map(move |&scale_in| Variant { signal, scale_in })
            })
            .collect()
    }

    /// The target of `signal`, if set.
    pub fn target(&self, signal: Signal) -> Option<f64> {
        match signal {
            Signal::Cpu => self.cpu_target,
            Signal::Sessions => self.sessions_target,
            Signal::Capacity => self.capacity_target,
        }
    }

    /// `behavior.scaleUp` with the defaults filled in.
    pub fn up_rules(&self) -> ScalingRules {
        self.scale_up.resolve(ScalingRules::default_up())
    }

    /// `behavior.scaleDown` with the defaults filled in.
    pub fn down_rules(&self) -> ScalingRules {
        self.scale_down.resolve(ScalingRules::default_down())
    }
}
