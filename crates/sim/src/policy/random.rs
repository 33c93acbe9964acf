//! Uniform random choice.

use super::{BackendView, Policy, alive};
use crate::SimRng;

/// Each new session goes to a uniformly random alive backend.
#[derive(Debug, Default)]
pub struct Random;

impl Policy for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let n = backends.len();
        let i = rng.below(n);
        if backends[i].alive {
            return Some(i);
        }
        let up: Vec<usize> = alive(backends).collect();
        (!up.is_empty()).then(|| up[rng.below(up.len())])
    }
}
