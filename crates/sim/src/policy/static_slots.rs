//! Static slots: `max_sessions − active`, the most free slots wins.

use super::{BackendView, Policy, argmin_by};
use crate::SimRng;

/// The backend with the most free slots, `max_sessions − (reported active + sent since)`.
///
/// Session-aware but blind to cost: a slot is a slot whether its session speaks or not.
#[derive(Debug, Default)]
pub struct StaticSlots;

impl Policy for StaticSlots {
    fn name(&self) -> &'static str {
        "static_slots"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        argmin_by(backends, rng, |b| {
            b.estimated_active() as f64 - f64::from(b.max_sessions)
        })
    }
}
