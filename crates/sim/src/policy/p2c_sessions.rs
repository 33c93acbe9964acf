//! Power of two choices on active sessions.

use super::{BackendView, Policy, two_choices};
use crate::SimRng;

/// Two random alive backends; the one with fewer estimated active sessions (reported plus
/// sent since the report) wins, ties to the first. Mitzenmacher's P2C: O(1) per pick and
/// exponentially better balance than one random choice.
#[derive(Debug, Default)]
pub struct P2cSessions;

impl Policy for P2cSessions {
    fn name(&self) -> &'static str {
        "p2c_sessions"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let (a, b) = two_choices(backends, rng)?;
        let better = backends[b].estimated_active() < backends[a].estimated_active();
        Some(if better { b } else { a })
    }
}
