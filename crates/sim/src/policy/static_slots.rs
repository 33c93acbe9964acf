//! Static slots: `max_sessions − active`, the most free slots wins.

use super::index::MinIndex;
use super::{BackendView, Policy};
use crate::SimRng;

/// The backend with the most free slots, `max_sessions − (reported active + sent since)`.
///
/// Session-aware but blind to cost: a slot is a slot whether its session speaks or not.
/// Ties are broken uniformly at random; an index kept from the views makes a pick O(log n).
#[derive(Debug)]
pub struct StaticSlots {
    index: MinIndex,
}

impl StaticSlots {
    /// A policy for `backends` backends.
    pub fn new(backends: usize) -> Self {
        Self {
            index: MinIndex::new(backends),
        }
    }
}

impl Policy for StaticSlots {
    fn name(&self) -> &'static str {
        "static_slots"
    }

    fn on_view(&mut self, backend: usize, v: &BackendView, _now: f64, rng: &mut SimRng) {
        let score = v
            .alive
            .then(|| v.estimated_active() as f64 - f64::from(v.max_sessions));
        self.index.set(backend, score, rng);
    }

    fn pick(&mut self, _now: f64, _backends: &[BackendView], _rng: &mut SimRng) -> Option<usize> {
        self.index.min()
    }
}
