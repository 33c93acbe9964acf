//! The hybrid session + utilisation capacity model (livecount-capacity), as P2C or weighted.

use std::time::Duration;

use livecount_capacity::{BackendModel, CapacityConfig, Standing};

use super::index::WeightTree;
use super::{BackendView, Policy, Report, two_choices};
use crate::{Scenario, SimRng};

/// How the hybrid policy turns remaining headroom into a choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HybridMode {
    /// Two random backends; the one using the smaller share of its effective capacity wins
    /// (fewer estimated sessions on a tie, e.g. when neither has capacity).
    PowerOfTwo,
    /// Weighted random, weight = remaining headroom; P2C when every weight is 0. The
    /// weights sit in a Fenwick tree kept current from every view change: a pick is a
    /// draw in O(log n).
    Weighted,
}

/// Capacity = reported sessions + the model's weight (headroom, slow-start ramped, decayed
/// when the report is stale), capped at the backend's `max_sessions`; remaining = capacity
/// − (reported + sent since the report); fill share = (reported + sent) ÷ capacity. The fleet's mean cost per session is the prior
/// for a backend whose own cost is undefined; each backend's idle utilisation is learned
/// from its reports with no sessions and not charged to sessions.
#[derive(Debug)]
pub struct Hybrid {
    mode: HybridMode,
    config: CapacityConfig,
    models: Vec<BackendModel>,
    costs: Vec<Option<f64>>,
    /// Sum and count of the known costs, kept as reports arrive (the prior is O(1)).
    cost_sum: f64,
    cost_n: u32,
    /// Each backend's estimate weight, refreshed on its reports and once per simulated
    /// second for all (slow start and stale decay move on that timescale), so a pick
    /// costs no model evaluation.
    weights: Vec<f64>,
    refreshed_at: f64,
    /// [`HybridMode::Weighted`]: each alive backend's remaining capacity (≥ 0), the
    /// others 0.
    remaining: WeightTree,
}

/// Simulated seconds between two refreshes of every cached weight.
const REFRESH_S: f64 = 1.0;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

impl Hybrid {
    /// The policy with the scenario's capacity parameters.
    pub fn new(scenario: &Scenario, mode: HybridMode) -> Self {
        let config = scenario.capacity_config();
        let n = scenario.backend_count();
        Self {
            mode,
            config,
            models: vec![BackendModel::new(Duration::ZERO); n],
            costs: vec![None; n],
            cost_sum: 0.0,
            cost_n: 0,
            weights: vec![0.0; n],
            refreshed_at: f64::NEG_INFINITY,
            remaining: WeightTree::new(if mode == HybridMode::Weighted { n } else { 0 }),
        }
    }

    fn prior(&self) -> Option<f64> {
        (self.cost_n > 0).then(|| self.cost_sum / f64::from(self.cost_n))
    }

    fn set_cost(&mut self, backend: usize, cost: Option<f64>) {
        if let Some(old) = std::mem::replace(&mut self.costs[backend], cost) {
            self.cost_sum -= old;
            self.cost_n -= 1;
        }
        if let Some(new) = cost {
            self.cost_sum += new;
            self.cost_n += 1;
        }
        if self.cost_n == 0 {
            self.cost_sum = 0.0; // no rounding residue once every cost is gone
        }
    }

    /// Backend `i`'s weight from its model now. (The engine tells the view change that
    /// follows a report, so the weighted tree catches up there.)
    fn refresh(&mut self, i: usize, now: f64) {
        let e = self.models[i].estimate(&self.config, secs(now), self.prior());
        self.weights[i] = e.weight;
    }

    fn refresh_all(&mut self, now: f64, backends: &[BackendView]) {
        if now - self.refreshed_at >= REFRESH_S {
            self.refreshed_at = now;
            (0..self.weights.len()).for_each(|i| self.refresh(i, now));
            if self.mode == HybridMode::Weighted {
                let mut remaining = std::mem::replace(&mut self.remaining, WeightTree::new(0));
                remaining.rebuild(|i| self.headroom(i, &backends[i]));
                self.remaining = remaining;
            }
        }
    }

    /// The weighted pick's weight: remaining capacity, 0 when negative or believed dead.
    fn headroom(&self, i: usize, view: &BackendView) -> f64 {
        if view.alive {
            self.remaining(i, view).max(0.0)
        } else {
            0.0
        }
    }

    /// The backend as this balancer sees it: capacity by the model (reported sessions +
    /// weight, capped by its configured hard limit, which a balancer knows as well as
    /// static slots does) and the estimated sessions (reported + sent since the report).
    fn standing(&self, i: usize, view: &BackendView) -> Standing {
        Standing::new(
            view.report.map_or(0, |r| r.active),
            self.weights[i],
            f64::from(view.max_sessions),
            view.sent_since_report,
        )
    }

    /// Capacity minus the estimated active sessions.
    fn remaining(&self, i: usize, view: &BackendView) -> f64 {
        self.standing(i, view).room()
    }

    /// Weighted by remaining capacity: one draw from the tree.
    fn pick_weighted(&self, rng: &mut SimRng) -> Option<usize> {
        let total = self.remaining.total();
        if total <= 0.0 {
            return None;
        }
        self.remaining.find(rng.uniform() * total)
    }
}

impl Policy for Hybrid {
    fn name(&self) -> &'static str {
        match self.mode {
            HybridMode::PowerOfTwo => "hybrid_p2c",
            HybridMode::Weighted => "hybrid_weighted",
        }
    }

    fn on_report(&mut self, backend: usize, report: &Report, now: f64) {
        let model = &mut self.models[backend];
        model.report(
            &self.config,
            secs(report.taken_at),
            report.active,
            report.utilisation,
        );
        let cost = model.cost_per_session(&self.config);
        self.set_cost(backend, cost);
        self.refresh(backend, now);
    }

    fn on_backend_up(&mut self, backend: usize, now: f64) {
        self.models[backend] = BackendModel::new(secs(now));
        self.set_cost(backend, None);
        self.refresh(backend, now);
    }

    fn on_view(&mut self, backend: usize, view: &BackendView, _now: f64, _rng: &mut SimRng) {
        if self.mode == HybridMode::Weighted {
            let w = self.headroom(backend, view);
            self.remaining.set(backend, w);
        }
    }

    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        self.refresh_all(now, backends);
        if self.mode == HybridMode::Weighted
            && let Some(choice) = self.pick_weighted(rng)
        {
            return Some(choice);
        }
        let (a, b) = two_choices(backends, rng)?;
        let better = Standing::prefer(
            &self.standing(a, &backends[a]),
            &self.standing(b, &backends[b]),
        );
        Some(if better { b } else { a })
    }
}
