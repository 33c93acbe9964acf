//! The hybrid session + utilisation capacity model (livecount-capacity), as P2C or weighted.

use std::time::Duration;

use livecount_capacity::{BackendModel, CapacityConfig, cost_per_session};

use super::{BackendView, Policy, Report, two_choices, weighted};
use crate::{Scenario, SimRng};

/// How the hybrid policy turns remaining headroom into a choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HybridMode {
    /// Two random backends, the one with more remaining headroom wins.
    PowerOfTwo,
    /// Weighted random, weight = remaining headroom; P2C when every weight is 0.
    Weighted,
}

/// Remaining headroom = the model's weight (headroom, slow-start ramped, decayed when the
/// report is stale) minus the sessions sent since the report. The fleet's mean cost per
/// session is the prior for a backend whose own cost is undefined.
#[derive(Debug)]
pub struct Hybrid {
    mode: HybridMode,
    config: CapacityConfig,
    models: Vec<BackendModel>,
    costs: Vec<Option<f64>>,
    /// Sum and count of the known costs, kept as reports arrive (the prior is O(1)).
    cost_sum: f64,
    cost_n: u32,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

impl Hybrid {
    /// The policy with the scenario's capacity parameters.
    pub fn new(scenario: &Scenario, mode: HybridMode) -> Self {
        let k = &scenario.capacity;
        let config = CapacityConfig::builder()
            .target_utilisation(k.target)
            .safety_scaler(k.safety_scaler)
            .window(secs(scenario.reports.window_s))
            .report_interval(secs(scenario.reports.interval_s))
            .slow_start(secs(k.slow_start_s))
            .build()
            .expect("scenario validation admits only valid capacity parameters");
        let n = scenario.backend_count();
        Self {
            mode,
            config,
            models: vec![BackendModel::new(Duration::ZERO); n],
            costs: vec![None; n],
            cost_sum: 0.0,
            cost_n: 0,
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

    fn remaining(&self, i: usize, now: f64, prior: Option<f64>, view: &BackendView) -> f64 {
        let e = self.models[i].estimate(&self.config, secs(now), prior);
        e.weight - view.sent_since_report as f64
    }
}

impl Policy for Hybrid {
    fn name(&self) -> &'static str {
        match self.mode {
            HybridMode::PowerOfTwo => "hybrid_p2c",
            HybridMode::Weighted => "hybrid_weighted",
        }
    }

    fn on_report(&mut self, backend: usize, report: &Report, _now: f64) {
        let model = &mut self.models[backend];
        model.report(
            &self.config,
            secs(report.taken_at),
            report.active,
            report.utilisation,
        );
        let u = model.smoothed_utilisation().unwrap_or(report.utilisation);
        let cost = cost_per_session(report.active, u, self.config.window());
        self.set_cost(backend, cost);
    }

    fn on_backend_up(&mut self, backend: usize, now: f64) {
        self.models[backend] = BackendModel::new(secs(now));
        self.set_cost(backend, None);
    }

    fn pick(&mut self, now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let prior = self.prior();
        if self.mode == HybridMode::Weighted {
            let choice = weighted(backends, rng, |i| {
                self.remaining(i, now, prior, &backends[i]).max(0.0)
            });
            if choice.is_some() {
                return choice;
            }
        }
        let (a, b) = two_choices(backends, rng)?;
        let ra = self.remaining(a, now, prior, &backends[a]);
        let rb = self.remaining(b, now, prior, &backends[b]);
        Some(if rb > ra { b } else { a })
    }
}
