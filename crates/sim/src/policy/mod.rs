//! Routing policies: one trait, one small file per policy.
//!
//! A policy sees only what a real balancer could know ([`BackendView`]): its belief about
//! which backends are alive, their configured slot counts, the last load report each one
//! sent (possibly old, possibly lost), and how many sessions it has itself sent there since
//! that report arrived. It never sees the simulator's truth.
//!
//! Adding a policy: write a file with a type implementing [`Policy`], add it to [`NAMES`]
//! and [`by_name`].

use crate::{Scenario, SimRng};

mod grpc_wrr;
mod hybrid;
mod least_cpu;
mod least_request;
mod p2c_sessions;
mod random;
mod round_robin;
mod static_slots;

pub use grpc_wrr::GrpcWrr;
pub use hybrid::{Hybrid, HybridMode};
pub use least_cpu::LeastCpu;
pub use least_request::LeastRequest;
pub use p2c_sessions::P2cSessions;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use static_slots::StaticSlots;

/// Every policy name [`by_name`] accepts, in the order reports list them.
pub const NAMES: [&str; 9] = [
    "round_robin",
    "random",
    "least_request",
    "least_cpu",
    "static_slots",
    "p2c_sessions",
    "grpc_wrr",
    "hybrid_p2c",
    "hybrid_weighted",
];

/// A load report as the balancer received it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Simulated seconds when the backend took it.
    pub taken_at: f64,
    /// Active sessions by the backend's own counter.
    pub active: u64,
    /// Utilisation averaged since the backend's previous report, in [0, 1].
    pub utilisation: f64,
    /// Sessions that arrived at the backend in the last `window_s`.
    pub arrivals_in_window: u64,
    /// The window `arrivals_in_window` and pretend QPS refer to, seconds.
    pub window_s: f64,
}

/// What the balancer knows about one backend.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendView {
    /// Whether the balancer believes it is alive (health checks lag the truth).
    pub alive: bool,
    /// Configured maximum sessions (operators know it; static slots uses it).
    pub max_sessions: u32,
    /// The last report received, if any since the backend (re)appeared.
    pub report: Option<Report>,
    /// Sessions this balancer sent there since that report arrived.
    pub sent_since_report: u64,
}

impl BackendView {
    /// Reported active sessions plus the ones sent since: the balancer's best count.
    pub fn estimated_active(&self) -> u64 {
        self.report.map_or(0, |r| r.active) + self.sent_since_report
    }
}

/// A routing policy.
pub trait Policy: std::fmt::Debug {
    /// The name used on the command line and in reports.
    fn name(&self) -> &'static str;

    /// A report from `backend` arrived at `now`.
    fn on_report(&mut self, _backend: usize, _report: &Report, _now: f64) {}

    /// `backend` was (re)discovered at `now` (start of the run, or after it came back).
    fn on_backend_up(&mut self, _backend: usize, _now: f64) {}

    /// Chooses a backend for a new session, among those with `alive` set; `None` when
    /// there is none. The engine checks the choice.
    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize>;
}

/// Builds the policy called `name` for `scenario`, or `None` for an unknown name.
///
/// ```
/// use livecount_sim::{Scenario, policy};
///
/// let scenario = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 1\n[arrivals]\nrate_per_s = 1\n\
///      [sessions]\nduration = 'fixed'\nmean_s = 1\n[[backends]]\ncount = 1",
///     "inline.toml",
/// )?;
/// for name in policy::NAMES {
///     assert_eq!(policy::by_name(name, &scenario).unwrap().name(), name);
/// }
/// assert!(policy::by_name("fastest", &scenario).is_none());
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
pub fn by_name(name: &str, scenario: &Scenario) -> Option<Box<dyn Policy>> {
    Some(match name {
        "round_robin" => Box::new(RoundRobin::default()),
        "random" => Box::new(Random),
        "least_request" => Box::new(LeastRequest),
        "least_cpu" => Box::new(LeastCpu),
        "static_slots" => Box::new(StaticSlots),
        "p2c_sessions" => Box::new(P2cSessions),
        "grpc_wrr" => Box::new(GrpcWrr::new(scenario.backend_count())),
        "hybrid_p2c" => Box::new(Hybrid::new(scenario, HybridMode::PowerOfTwo)),
        "hybrid_weighted" => Box::new(Hybrid::new(scenario, HybridMode::Weighted)),
        _ => return None,
    })
}

/// Indices of backends believed alive.
pub(crate) fn alive(backends: &[BackendView]) -> impl Iterator<Item = usize> + '_ {
    backends
        .iter()
        .enumerate()
        .filter(|(_, b)| b.alive)
        .map(|(i, _)| i)
}

/// The alive backend with the lowest `score`; ties broken uniformly at random (reservoir
/// sampling), so a tie never favours low indices.
pub(crate) fn argmin_by(
    backends: &[BackendView],
    rng: &mut SimRng,
    mut score: impl FnMut(&BackendView) -> f64,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    let mut ties = 0usize;
    for i in alive(backends) {
        let s = score(&backends[i]);
        match best {
            Some((b, _)) if s > b => {}
            Some((b, _)) if s == b => {
                ties += 1;
                if rng.below(ties + 1) == 0 {
                    best = Some((s, i));
                }
            }
            _ => {
                best = Some((s, i));
                ties = 0;
            }
        }
    }
    best.map(|(_, i)| i)
}

/// Two distinct alive backends chosen uniformly (one if only one is alive).
pub(crate) fn two_choices(backends: &[BackendView], rng: &mut SimRng) -> Option<(usize, usize)> {
    let n = backends.len();
    // Rejection sampling is fast while most backends are alive; fall back to a scan.
    for _ in 0..16 {
        let a = rng.below(n);
        let b = rng.below(n);
        if a != b && backends[a].alive && backends[b].alive {
            return Some((a, b));
        }
    }
    let up: Vec<usize> = alive(backends).collect();
    match up.len() {
        0 => None,
        1 => Some((up[0], up[0])),
        m => {
            let a = rng.below(m);
            let b = (a + 1 + rng.below(m - 1)) % m;
            Some((up[a], up[b]))
        }
    }
}

/// Weighted random choice among alive backends (`weight` ≥ 0, finite); `None` when every
/// weight is 0. Two passes and one random draw; `weight` is called twice per backend.
pub(crate) fn weighted(
    backends: &[BackendView],
    rng: &mut SimRng,
    mut weight: impl FnMut(usize) -> f64,
) -> Option<usize> {
    let total: f64 = alive(backends).map(&mut weight).filter(|w| *w > 0.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mut left = rng.uniform() * total;
    let mut last = None;
    for i in alive(backends) {
        let w = weight(i);
        if w > 0.0 {
            last = Some(i);
            if left < w {
                return last;
            }
            left -= w;
        }
    }
    last // rounding left a sliver past the end: the last positive weight
}
