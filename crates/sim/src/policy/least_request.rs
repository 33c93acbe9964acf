//! Least request, as request balancers count it: arrivals in the recent window.

use super::{BackendView, Policy, argmin_by};
use crate::SimRng;

/// The backend with the fewest arrivals in the last window (reported, plus the sessions
/// sent since the report): QPS balancing. A 20-minute session counts as much as a 50 ms
/// request, which is the article's point.
#[derive(Debug, Default)]
pub struct LeastRequest;

impl Policy for LeastRequest {
    fn name(&self) -> &'static str {
        "least_request"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        argmin_by(backends, rng, |b| {
            (b.report.map_or(0, |r| r.arrivals_in_window) + b.sent_since_report) as f64
        })
    }
}
