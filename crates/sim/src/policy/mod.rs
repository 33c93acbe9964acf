//! Routing policies: one trait, one small file per policy.
//!
//! A policy sees only what a real balancer could know ([`BackendView`]): its belief about
//! which backends are alive, their configured slot counts, the last load report each one
//! sent (possibly old, possibly lost), and how many sessions it has itself sent there since
//! that report arrived, and how many of its own streams are open there. Policies that probe
//! (Prequal) get probe replies; policies that time responses (peak EWMA) get each of their
//! sessions' time to first stream when it arrives. A policy never sees the simulator's truth.
//!
//! With several proxies (`balancer.proxies`), each runs its own copy of the policy and has
//! its own views: reports reach every proxy, but sends, open streams and probes are its own.
//!
//! Adding a policy: write a file with a type implementing [`Policy`], add it to [`NAMES`]
//! and [`by_name`].

use crate::{Scenario, SimRng};

mod cpu_threshold;
mod grpc_wrr;
mod hybrid;
mod index;
mod least_cpu;
mod least_request;
mod least_request_bias;
mod p2c_sessions;
mod peak_ewma;
mod prequal;
mod random;
mod round_robin;
mod static_slots;

pub use cpu_threshold::CpuThreshold;
pub use grpc_wrr::GrpcWrr;
pub use hybrid::{Hybrid, HybridMode};
pub use least_cpu::LeastCpu;
pub use least_request::LeastRequest;
pub use least_request_bias::LeastRequestBias;
pub use p2c_sessions::P2cSessions;
pub use peak_ewma::PeakEwmaP2c;
pub use prequal::PrequalHcl;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use static_slots::StaticSlots;

/// Every policy name [`by_name`] accepts, in the order reports list them.
pub const NAMES: [&str; 14] = [
    "round_robin",
    "random",
    "least_request",
    "least_cpu",
    "static_slots",
    "p2c_sessions",
    "grpc_wrr",
    "least_request_bias",
    "cpu_threshold",
    "peak_ewma_p2c",
    "prequal_hcl",
    "prequal_hcl_q60",
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
    /// Mean of the last 5 point samples of utilisation taken every 0.5 s (LiveKit's worker
    /// load), in [0, 1].
    pub utilisation_recent: f64,
}

/// A Prequal probe's reply as the balancer received it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// Simulated seconds when the backend answered.
    pub taken_at: f64,
    /// Requests in flight: the backend's active sessions.
    pub rif: u64,
    /// The backend's latency estimate at that RIF, ms, as `livecount-report`'s
    /// `PrequalEstimator` makes it ([`livecount_capacity::PrequalLatency::estimate`]: the
    /// median time to first stream of its last 128 sessions, fresh within 120 simulated
    /// seconds, nearest that RIF within ±25 %); `None` when no fresh session is near it.
    pub latency_ms: Option<f64>,
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
    /// This balancer's own streams open there now (a proxy carries them, so it knows).
    pub open: u64,
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

    /// `backends[backend]` changed at `now` (a report, a send, a stream's end, a health
    /// check): for policies that keep an index instead of scanning. The engine calls it
    /// for every backend at the start and after every change.
    fn on_view(&mut self, _backend: usize, _view: &BackendView, _now: f64, _rng: &mut SimRng) {}

    /// Chooses a backend for a new session, among those with `alive` set; `None` when
    /// there is none. The engine checks the choice.
    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize>;

    /// After a pick: backends to probe (pushed onto `out`); their replies arrive through
    /// [`Policy::on_probe`] one probe round trip later, unless lost.
    fn probe(
        &mut self,
        _now: f64,
        _backends: &[BackendView],
        _rng: &mut SimRng,
        _out: &mut Vec<usize>,
    ) {
    }

    /// A probe reply from `backend` arrived at `now`.
    fn on_probe(&mut self, _backend: usize, _probe: &Probe, _now: f64) {}

    /// Whether the policy times its sessions' first responses ([`Policy::on_latency`]).
    fn observes_latency(&self) -> bool {
        false
    }

    /// A session this balancer sent to `backend` got its first stream at `now`, `ms` after
    /// it was sent.
    fn on_latency(&mut self, _backend: usize, _ms: f64, _now: f64) {}
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
        "least_request" => Box::new(LeastRequest::new(scenario.backend_count())),
        "least_cpu" => Box::new(LeastCpu::new(scenario.backend_count())),
        "static_slots" => Box::new(StaticSlots::new(scenario.backend_count())),
        "p2c_sessions" => Box::new(P2cSessions),
        "grpc_wrr" => Box::new(GrpcWrr::new(scenario.backend_count())),
        "least_request_bias" => Box::new(LeastRequestBias::new(1.0)),
        "cpu_threshold" => Box::new(CpuThreshold::new(scenario.backend_count(), 0.75)),
        "peak_ewma_p2c" => Box::new(PeakEwmaP2c::new(scenario)),
        "prequal_hcl" => Box::new(PrequalHcl::new("prequal_hcl", 2f64.powf(-0.25))),
        "prequal_hcl_q60" => Box::new(PrequalHcl::new("prequal_hcl_q60", 0.6)),
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
    let up: Vec<usize> = alive(backends).collect(); // most are dead: rare, and O(n)
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
