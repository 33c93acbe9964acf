//! Least request, as request balancers count it: arrivals in the recent window.

use super::index::MinIndex;
use super::{BackendView, Policy};
use crate::SimRng;

/// The backend with the fewest arrivals in the last window (reported, plus the sessions
/// sent since the report): QPS balancing. A 20-minute session counts as much as a 50 ms
/// request, which is the article's point. Ties are broken uniformly at random; an index
/// kept from the views makes a pick O(log n).
#[derive(Debug)]
pub struct LeastRequest {
    index: MinIndex,
}

impl LeastRequest {
    /// A policy for `backends` backends.
    pub fn new(backends: usize) -> Self {
        Self {
            index: MinIndex::new(backends),
        }
    }
}

impl Policy for LeastRequest {
    fn name(&self) -> &'static str {
        "least_request"
    }

    fn on_view(&mut self, backend: usize, v: &BackendView, _now: f64, rng: &mut SimRng) {
        let score = v
            .alive
            .then(|| (v.report.map_or(0, |r| r.arrivals_in_window) + v.sent_since_report) as f64);
        self.index.set(backend, score, rng);
    }

    fn pick(&mut self, _now: f64, _backends: &[BackendView], _rng: &mut SimRng) -> Option<usize> {
        self.index.min()
    }
}
