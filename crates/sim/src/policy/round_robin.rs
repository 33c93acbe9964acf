//! Round robin over the backends believed alive.

use super::{BackendView, Policy};
use crate::SimRng;

/// Each new session goes to the next alive backend in index order.
///
/// What DNS round robin and many L4 balancers do: blind to load and to session length.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl Policy for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], _rng: &mut SimRng) -> Option<usize> {
        let n = backends.len();
        let found = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| backends[i].alive)?;
        self.next = (found + 1) % n;
        Some(found)
    }
}
