//! Least CPU: the lowest reported utilisation.

use super::{BackendView, Policy, argmin_by};
use crate::SimRng;

/// The backend with the lowest reported utilisation (0 before its first report).
///
/// Utilisation only moves when a report arrives, so every session between two reports
/// lands on the same backend; silent sessions look free until they speak.
#[derive(Debug, Default)]
pub struct LeastCpu;

impl Policy for LeastCpu {
    fn name(&self) -> &'static str {
        "least_cpu"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        argmin_by(backends, rng, |b| b.report.map_or(0.0, |r| r.utilisation))
    }
}
