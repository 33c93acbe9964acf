//! Least CPU: the lowest reported utilisation.

use super::index::MinIndex;
use super::{BackendView, Policy};
use crate::SimRng;

/// The backend with the lowest reported utilisation (0 before its first report).
///
/// Utilisation only moves when a report arrives, so every session between two reports
/// lands on the same backend; silent sessions look free until they speak. Ties are broken
/// uniformly at random; an index kept from the views makes a pick O(log n).
#[derive(Debug)]
pub struct LeastCpu {
    index: MinIndex,
}

impl LeastCpu {
    /// A policy for `backends` backends.
    pub fn new(backends: usize) -> Self {
        Self {
            index: MinIndex::new(backends),
        }
    }
}

impl Policy for LeastCpu {
    fn name(&self) -> &'static str {
        "least_cpu"
    }

    fn on_view(&mut self, backend: usize, v: &BackendView, _now: f64, rng: &mut SimRng) {
        let score = v.alive.then(|| v.report.map_or(0.0, |r| r.utilisation));
        self.index.set(backend, score, rng);
    }

    fn pick(&mut self, _now: f64, _backends: &[BackendView], _rng: &mut SimRng) -> Option<usize> {
        self.index.min()
    }
}
