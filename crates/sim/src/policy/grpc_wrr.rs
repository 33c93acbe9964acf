//! gRPC weighted round robin fed by ORCA reports whose QPS is the pretend QPS.

use super::index::{DrawSet, WeightTree};
use super::{BackendView, Policy, Report};
use crate::SimRng;

/// gRPC's `weighted_round_robin` as a session backend would feed it over ORCA:
/// `weight = rps_fractional / application_utilization` with `rps_fractional` = pretend
/// QPS (active ÷ window). Backends without a usable weight get the mean weight, as gRPC
/// does. Picks are weighted-random (gRPC's EDF scheduler gives the same shares).
///
/// The weight is 1 ÷ cost per session: it says how cheap a backend's sessions are, not how
/// much room it has left, and it only changes when a report arrives.
///
/// O(log n) per pick: alive backends with a weight sit in a Fenwick tree, the others in a
/// set drawn from uniformly, each share chosen in proportion (n unweighted × the mean).
#[derive(Debug)]
pub struct GrpcWrr {
    weights: Vec<f64>,
    alive: Vec<bool>,
    known: WeightTree,
    known_n: usize,
    unknown: DrawSet,
}

impl GrpcWrr {
    /// A policy for `backends` backends, all unweighted.
    pub fn new(backends: usize) -> Self {
        Self {
            weights: vec![0.0; backends],
            alive: vec![false; backends],
            known: WeightTree::new(backends),
            known_n: 0,
            unknown: DrawSet::new(backends),
        }
    }

    fn place(&mut self, i: usize) {
        let (w, alive) = (self.weights[i], self.alive[i]);
        let was_known = self.known.weight(i) > 0.0;
        let is_known = alive && w > 0.0;
        self.known.set(i, if is_known { w } else { 0.0 });
        self.known_n = self.known_n + usize::from(is_known) - usize::from(was_known);
        self.unknown.set(i, alive && w <= 0.0);
    }
}

fn weight_of(report: &Report) -> f64 {
    let qps = report.active as f64 / report.window_s;
    if qps > 0.0 && report.utilisation > 0.0 {
        qps / report.utilisation
    } else {
        0.0
    }
}

impl Policy for GrpcWrr {
    fn name(&self) -> &'static str {
        "grpc_wrr"
    }

    fn on_report(&mut self, backend: usize, report: &Report, _now: f64) {
        self.weights[backend] = weight_of(report);
        self.place(backend);
    }

    fn on_backend_up(&mut self, backend: usize, _now: f64) {
        self.weights[backend] = 0.0;
        self.place(backend);
    }

    fn on_view(&mut self, backend: usize, v: &BackendView, _now: f64, _rng: &mut SimRng) {
        if self.alive[backend] != v.alive {
            self.alive[backend] = v.alive;
            self.place(backend);
        }
    }

    fn pick(&mut self, _now: f64, _backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let known_sum = self.known.total();
        let mean = if self.known_n == 0 {
            1.0
        } else {
            known_sum / self.known_n as f64
        };
        let total = known_sum + mean * self.unknown.len() as f64;
        if total <= 0.0 {
            return None;
        }
        let u = rng.uniform() * total;
        if u < known_sum {
            self.known.find(u).or_else(|| self.unknown.draw(rng))
        } else {
            self.unknown.draw(rng).or_else(|| self.known.find(u))
        }
    }
}
