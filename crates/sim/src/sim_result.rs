//! What a run produces: per-policy summaries and time series, serialisable to JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One scenario run through several policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub scenario: String,
    /// Its one-line description.
    pub description: String,
    /// The seed used.
    pub seed: u64,
    /// Number of backends.
    pub backends: usize,
    /// Arrivals happen in `[0, duration_s)`.
    pub duration_s: f64,
    /// Target utilisation (the "overloaded" threshold).
    pub target_utilisation: f64,
    /// One entry per policy, in the order run (for several seeds: the first seed's run,
    /// which the plots show).
    pub policies: Vec<PolicyResult>,
    /// With several seeds: every metric's mean and 95 % interval over them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_seeds: Option<AcrossSeeds>,
}

/// The same scenario run with several seeds: each metric's spread over the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcrossSeeds {
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// One entry per policy, in the order run.
    pub policies: Vec<PolicyStats>,
}

/// One policy's metrics over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyStats {
    /// Policy name.
    pub policy: String,
    /// One entry per metric column of the report, in its order.
    pub metrics: Vec<MetricStats>,
}

/// One metric over n runs: mean and a 95 % confidence interval by Student's t.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricStats {
    /// The metric's short name (the terminal table's header).
    pub metric: String,
    /// Mean over the runs.
    pub mean: f64,
    /// Half-width of the 95 % interval: t(0.975, n − 1) × s ÷ √n (0 for one run).
    pub half_width: f64,
    /// Runs.
    pub n: usize,
}

impl MetricStats {
    /// The interval's ends, `mean ∓ half_width`.
    pub fn interval(&self) -> (f64, f64) {
        (self.mean - self.half_width, self.mean + self.half_width)
    }
}

/// One policy's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Headline numbers.
    pub summary: Summary,
    /// The fleet sampled over time (truth, not what the balancer believed).
    pub spread: Vec<SpreadSample>,
    /// Startup latency distribution (milliseconds against quantile).
    pub startup_cdf: Vec<CdfPoint>,
    /// Time-to-first-stream distribution.
    pub first_stream_cdf: Vec<CdfPoint>,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds the run took (informational; not deterministic).
    pub wall_s: f64,
}

/// Headline numbers of one policy's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Sessions that arrived: the workload, the same for every policy. A client
    /// reconnecting after a rolling restart cut it is not a new arrival (see
    /// [`RestartSummary::reconnects`]).
    pub arrivals: u64,
    /// Accepted by a backend: arrivals and reconnects placed, so `arrivals + reconnects =
    /// assigned + rejected + dropped`, and a session cut and reconnected is assigned twice
    /// (and ends twice: `shutdown`, then as planned).
    pub assigned: u64,
    /// Refused by a backend at its hard limit, or sent to a dead or draining one
    /// (arrivals and reconnects).
    pub rejected: u64,
    /// No backend to send to (every backend known dead; arrivals and reconnects).
    pub dropped: u64,
    /// Assigned sessions by how they ended (completed, timed_out, cancelled,
    /// disconnected, backend_lost, shutdown); sums to `assigned` after the drain.
    pub ended: BTreeMap<String, u64>,
    /// Assignments to a backend whose utilisation was above target at that moment.
    pub overloaded_assignments: u64,
    /// `overloaded_assignments / assigned`.
    pub overloaded_rate: f64,
    /// Share of backend-time spent above target utilisation (alive backends, sampled).
    pub overloaded_time_share: f64,
    /// Mean over samples of (max − min) active sessions across alive backends.
    pub spread_range_mean: f64,
    /// Largest (max − min) seen in any sample.
    pub spread_range_max: u64,
    /// Mean over samples of the coefficient of variation of active sessions (by size).
    pub spread_cv_mean: f64,
    /// Mean over samples of max ÷ mean active sessions per unit of size.
    pub spread_peak_ratio_mean: f64,
    /// Highest utilisation any backend reached at a sample.
    pub peak_utilisation: f64,
    /// Startup latency percentiles.
    pub startup_ms: Percentiles,
    /// Time-to-first-stream percentiles.
    pub first_stream_ms: Percentiles,
    /// Counter accuracy after forced disconnects and deaths.
    pub counter: CounterAccuracy,
    /// What a rolling restart cost, when the scenario has one (absent from older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartSummary>,
    /// What the autoscaler did and cost, when the scenario has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<AutoscaleSummary>,
}

/// What an autoscaled run did and cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct AutoscaleSummary {
    /// Open sessions a scale-in ended (`shutdown`): all of a backend's at once (`random`,
    /// `emptiest`), those still open at the drain deadline (`drain`). Equal to
    /// `ended.shutdown`; a reconnected session cut again counts again.
    pub cut: u64,
    /// Cut sessions whose client came back through the balancer
    /// (`autoscaler.reconnect_share` of them); each is placed like an arrival.
    pub reconnects: u64,
    /// The cost: Σ over backends of the seconds each was provisioned (from its scale-up
    /// decision, starting included, to its exit, draining included), over the arrival
    /// window `[0, duration_s)`.
    pub backend_seconds: f64,
    /// `backend_seconds ÷ duration_s`: the mean provisioned fleet.
    pub mean_backends: f64,
    /// Most backends provisioned at once.
    pub peak_backends: u32,
    /// Syncs that raised the replica count.
    pub scale_ups: u32,
    /// Syncs that lowered the replica count.
    pub scale_downs: u32,
    /// Shortest time from a drain's start to a session it cut (`None` when no drain cut
    /// one): never below `drain_deadline_s`.
    #[serde(default)]
    pub shortest_drain_before_cut_s: Option<f64>,
}

/// The cost of a rolling restart. Its window runs from the first backend's restart to
/// the last one being back (ready, whether or not the balancer has seen it yet).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct RestartSummary {
    /// Open sessions the restart ended (`shutdown`): all of a backend's at once in `cut`
    /// mode, those still open at the drain deadline in `drain` mode. Equal to
    /// `ended.shutdown`; a reconnected session cut again counts again.
    pub cut: u64,
    /// Cut sessions whose client came back through the balancer for the rest of its
    /// conversation (`rolling_restart.reconnect_share` of them, `reconnect_after_s`
    /// later). Each is placed like an arrival, so it is counted once in `assigned`,
    /// `rejected` or `dropped`, but not in `arrivals` (absent, read as 0, in older results).
    #[serde(default)]
    pub reconnects: u64,
    /// Arrivals refused by a backend being restarted (draining, or away), sent there
    /// before the balancer knew (also counted in `rejected`).
    pub refused: u64,
    /// Seconds from the first restart to the last backend back.
    pub window_s: f64,
    /// Assignments in the window.
    pub window_assigned: u64,
    /// Of those, to a backend above target utilisation: the backends taking the load.
    pub window_overloaded: u64,
    /// `window_overloaded / window_assigned`.
    pub window_overloaded_rate: f64,
}

/// p50 / p95 / p99 / max.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Backends' own counts compared with the truth (sum over backends of |count − truth|).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CounterAccuracy {
    /// Tracked counter (exactly-once ending): error at the end of the drain.
    pub tracked_final_error: u64,
    /// Tracked counter: largest error at any sample.
    pub tracked_max_error: u64,
    /// Naive counter (clean closes only): ghosts left at the end.
    pub naive_final_error: u64,
    /// Naive counter: largest error at any sample.
    pub naive_max_error: u64,
}

/// The fleet at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadSample {
    /// Simulated seconds.
    pub t: f64,
    /// Most active sessions on an alive backend.
    pub max: u64,
    /// Fewest.
    pub min: u64,
    /// Mean per alive backend.
    pub mean: f64,
    /// Coefficient of variation of active ÷ size.
    pub cv: f64,
    /// Highest utilisation.
    pub max_utilisation: f64,
    /// Mean utilisation.
    pub mean_utilisation: f64,
    /// Alive backends (serving, or draining): the fleet an autoscaler sized (absent, read
    /// as 0, in older results).
    #[serde(default)]
    pub backends: u32,
}

/// One point of a latency CDF.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// Latency, milliseconds.
    pub ms: f64,
    /// Share of sessions at or below it.
    pub q: f64,
}
