//! Linkerd's and tower's peak-EWMA power of two choices.

use super::{BackendView, Policy, two_choices};
use crate::{Scenario, SimRng};

/// tower's `PeakEwma` load behind `p2c` (Linkerd's balancer): each backend's cost is a
/// peak-sensitive EWMA of the response latency this proxy observed (here each session's
/// time to first stream) × (its streams in flight there + 1); two random backends, the
/// cheaper wins (the first on a tie).
///
/// The estimate jumps to a latency above it at once and decays towards a lower one with
/// weight `exp(−Δt ÷ τ)`, τ = 10 s; reading it also decays it towards 0, as tower's does,
/// so a backend nobody hears from looks cheaper as time passes. A new backend starts at the
/// default RTT, the scenario's mean time to first stream on an idle backend.
#[derive(Debug)]
pub struct PeakEwmaP2c {
    /// (estimate in ms, when it was last updated) per backend.
    estimates: Vec<(f64, f64)>,
    default_ms: f64,
}

/// The decay window, seconds (Linkerd's and tower's default).
const DECAY_S: f64 = 10.0;

impl PeakEwmaP2c {
    /// The policy for `scenario`'s fleet.
    pub fn new(scenario: &Scenario) -> Self {
        let default_ms = scenario.latency.startup_ms + scenario.latency.first_stream_ms;
        Self {
            estimates: vec![(default_ms, 0.0); scenario.backend_count()],
            default_ms,
        }
    }

    /// Folds `ms` observed at `now` into backend `i`'s estimate and returns it.
    fn update(&mut self, i: usize, ms: f64, now: f64) -> f64 {
        let (est, at) = &mut self.estimates[i];
        if ms > *est {
            *est = ms;
        } else {
            let decay = (-(now - *at).max(0.0) / DECAY_S).exp();
            *est = *est * decay + ms * (1.0 - decay);
        }
        *at = now;
        *est
    }

    fn cost(&mut self, i: usize, view: &BackendView, now: f64) -> f64 {
        self.update(i, 0.0, now) * (view.open as f64 + 1.0)
    }
}

impl Policy for PeakEwmaP2c {
    fn name(&self) -> &'static str {
        "peak_ewma_p2c"
    }

    fn on_backend_up(&mut self, backend: usize, now: f64) {
        self.estimates[backend] = (self.default_ms, now);
    }

    fn observes_latency(&self) -> bool {
        true
    }

    fn on_latency(&mut self, backend: usize, ms: f64, now: f64) {
        self.update(backend, ms, now);
    }

    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let (a, b) = two_choices(backends, rng)?;
        let (ca, cb) = (
            self.cost(a, &backends[a], now),
            self.cost(b, &backends[b], now),
        );
        Some(if cb < ca { b } else { a })
    }
}
