//! Envoy's least request with `active_request_bias`, one copy per proxy.

use super::{BackendView, Policy, two_choices};
use crate::SimRng;

/// Envoy's `LEAST_REQUEST`: two random hosts (`choice_count` 2); the one with the larger
/// `weight ÷ (active + 1)^bias` wins (the first on a tie), where `active` is the requests
/// *this proxy* has in flight there — for long streams, its own open sessions — and
/// `weight` the host's configured weight (here its slot count, what an operator would set
/// for unequal hosts; with equal weights it is plain P2C on this proxy's active requests).
///
/// Envoy keeps that count per proxy (per worker thread, even): with several proxies
/// (`balancer.proxies`) each sees only a share of every backend's sessions, and nothing of
/// their cost.
#[derive(Debug)]
pub struct LeastRequestBias {
    bias: f64,
}

impl LeastRequestBias {
    /// A policy with `active_request_bias` = `bias` (Envoy's default is 1.0).
    pub fn new(bias: f64) -> Self {
        Self { bias }
    }

    fn weight(&self, v: &BackendView) -> f64 {
        f64::from(v.max_sessions) / (v.open as f64 + 1.0).powf(self.bias)
    }
}

impl Policy for LeastRequestBias {
    fn name(&self) -> &'static str {
        "least_request_bias"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let (a, b) = two_choices(backends, rng)?;
        let better = self.weight(&backends[b]) > self.weight(&backends[a]);
        Some(if better { b } else { a })
    }
}
