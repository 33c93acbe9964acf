//! gRPC weighted round robin fed by ORCA reports whose QPS is the pretend QPS.

use super::{BackendView, Policy, Report, alive, weighted};
use crate::SimRng;

/// gRPC's `weighted_round_robin` as a session backend would feed it over ORCA:
/// `weight = rps_fractional / application_utilization` with `rps_fractional` = pretend
/// QPS (active ÷ window). Backends without a usable weight get the mean weight, as gRPC
/// does. Picks are weighted-random (gRPC's EDF scheduler gives the same shares).
///
/// The weight is 1 ÷ cost per session: it says how cheap a backend's sessions are, not how
/// much room it has left, and it only changes when a report arrives.
#[derive(Debug)]
pub struct GrpcWrr {
    weights: Vec<f64>,
}

impl GrpcWrr {
    /// A policy for `backends` backends, all unweighted.
    pub fn new(backends: usize) -> Self {
        Self {
            weights: vec![0.0; backends],
        }
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
    }

    fn on_backend_up(&mut self, backend: usize, _now: f64) {
        self.weights[backend] = 0.0;
    }

    fn pick(&mut self, _now: f64, backends: &[BackendView], rng: &mut SimRng) -> Option<usize> {
        let (sum, known) = alive(backends)
            .map(|i| self.weights[i])
            .filter(|&w| w > 0.0)
            .fold((0.0, 0usize), |(s, n), w| (s + w, n + 1));
        let mean = if known == 0 { 1.0 } else { sum / known as f64 };
        let weights = &self.weights;
        weighted(backends, rng, |i| {
            if weights[i] > 0.0 { weights[i] } else { mean }
        })
    }
}
