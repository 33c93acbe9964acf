//! LiveKit agents' dispatch: workers above a CPU threshold are unavailable.

use super::index::DrawSet;
use super::{BackendView, Policy};
use crate::SimRng;

/// A LiveKit-style worker pool: each worker reports its load as the moving average of 5
/// CPU samples taken every 0.5 s ([`super::Report::utilisation_recent`]) and is
/// unavailable while that is at or above the threshold (LiveKit's default 0.75); a job goes
/// to a uniformly random available worker (one with no report yet counts as available).
/// When none is available the session is not placed (dropped), as a LiveKit job with no
/// available worker is not dispatched.
///
/// The load it sees is as old as the last report, and sessions sent since do not count.
/// O(1) per pick: the available backends are kept in a set as views change.
#[derive(Debug)]
pub struct CpuThreshold {
    threshold: f64,
    available: DrawSet,
}

impl CpuThreshold {
    /// A pool of `backends` workers, unavailable at `threshold` and above.
    pub fn new(backends: usize, threshold: f64) -> Self {
        Self {
            threshold,
            available: DrawSet::new(backends),
        }
    }
}

impl Policy for CpuThreshold {
    fn name(&self) -> &'static str {
        "cpu_threshold"
    }

    fn on_view(&mut self, backend: usize, v: &BackendView, _now: f64, _rng: &mut SimRng) {
        let load = v.report.map_or(0.0, |r| r.utilisation_recent);
        self.available
            .set(backend, v.alive && load < self.threshold);
    }

    fn pick(&mut self, _now: f64, _backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        self.available.draw(rng)
    }
}
