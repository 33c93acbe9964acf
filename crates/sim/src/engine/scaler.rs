//! [`Scaler`]: the autoscaler's side of one run — which pool slots are up, starting or
//! draining, what the metrics pipeline last scraped from each backend, what the HPA
//! proposes from it, and what the fleet cost.

use livecount_capacity::{BackendModel, CapacityConfig};

use crate::autoscaler::{
    Hpa, PodMetric, ScaleIn, Signal, Variant, replicas_for_pods, replicas_for_value,
};
use crate::scenario::Scenario;
use crate::sim_result::AutoscaleSummary;
use crate::{SimRng, autoscaler::Autoscaler};

/// One slot of the pool, as the Deployment sees its pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Slot {
    /// No pod.
    Off,
    /// Created, ready at `ready_at` (counted in the replicas, and in the cost).
    Starting { ready_at: f64 },
    /// Serving.
    Ready,
    /// Terminating: draining since `since`, cut at `deadline` (not a replica; still a cost).
    Draining { since: f64, deadline: f64 },
}

/// What a scrape of one backend's `/metrics` last returned.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scraped {
    active: u64,
    utilisation: f64,
    /// `livecount_effective_capacity`: the hybrid model's, capped at the session limit.
    capacity: f64,
}

/// The autoscaler's state in one run.
#[derive(Debug)]
pub(super) struct Scaler {
    pub(super) variant: Variant,
    pub(super) hpa: Hpa,
    pub(super) slots: Vec<Slot>,
    scraped: Vec<Option<Scraped>>,
    /// Each backend's own capacity model, as its agent keeps one (fresh per process).
    models: Vec<BackendModel>,
    config: CapacityConfig,
    max_sessions: Vec<u32>,
    /// Whether the capacity share's sums include draining backends.
    share_includes_draining: bool,
    /// The random scale-in's draws.
    pub(super) rng: SimRng,
    /// The cost is integrated up to here, and never past `horizon`.
    counted_to: f64,
    horizon: f64,
    pub(super) summary: AutoscaleSummary,
}

fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(s.max(0.0))
}

impl Scaler {
    /// The pool of `sc` with the first `initial_replicas` slots ready at time 0.
    pub(super) fn new(sc: &Scenario, a: &Autoscaler, variant: Variant, rng: SimRng) -> Self {
        let n = sc.backend_count();
        let initial = a.initial() as usize;
        let mut s = Self {
            variant,
            hpa: Hpa::new(a.min_replicas, a.max_replicas, a.up_rules(), a.down_rules()),
            slots: (0..n)
                .map(|b| if b < initial { Slot::Ready } else { Slot::Off })
                .collect(),
            scraped: vec![None; n],
            models: vec![BackendModel::new(secs(0.0)); n],
            config: sc.capacity_config(),
            share_includes_draining: a.share_includes_draining,
            max_sessions: (0..n).map(|b| sc.group_of(b).max_sessions).collect(),
            rng,
            counted_to: 0.0,
            horizon: sc.duration_s,
            summary: AutoscaleSummary::default(),
        };
        s.summary.peak_backends = s.provisioned();
        s
    }

    /// Slots with a pod: starting, ready or draining (what costs).
    pub(super) fn provisioned(&self) -> u32 {
        self.slots.iter().filter(|s| **s != Slot::Off).count() as u32
    }

    /// The Deployment's replicas: starting or ready (a terminating pod is not one).
    pub(super) fn replicas(&self) -> u32 {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Starting { .. } | Slot::Ready))
            .count() as u32
    }

    /// Slot `b` becomes `slot` at `now`: the cost up to now is counted first.
    pub(super) fn set(&mut self, b: usize, slot: Slot, now: f64) {
        self.account(now);
        self.slots[b] = slot;
        self.summary.peak_backends = self.summary.peak_backends.max(self.provisioned());
    }

    fn account(&mut self, now: f64) {
        let to = now.min(self.horizon);
        if to > self.counted_to {
            self.summary.backend_seconds += f64::from(self.provisioned()) * (to - self.counted_to);
            self.counted_to = to;
        }
    }

    /// A new process on slot `b` from `now`: no scrape, a fresh model.
    pub(super) fn forget(&mut self, b: usize, now: f64) {
        self.scraped[b] = None;
        self.models[b] = BackendModel::new(secs(now));
    }

    /// Backend `b` published a report at `at` (`active` sessions, `utilisation` since its
    /// last one): its agent runs the capacity model on it, as `/metrics` would show it.
    pub(super) fn scrape(&mut self, b: usize, at: f64, active: u64, utilisation: f64) {
        let model = &mut self.models[b];
        model.report(&self.config, secs(at), active, utilisation);
        let estimate = model.estimate(&self.config, secs(at), None);
        self.scraped[b] = Some(Scraped {
            active,
            utilisation,
            capacity: estimate
                .effective_capacity
                .min(f64::from(self.max_sessions[b])),
        });
    }

    /// The replica calculator's proposal from the last scrapes: `current` replicas,
    /// against `target` with `tolerance`.
    pub(super) fn proposal(&self, current: u32, target: f64, tolerance: f64) -> u32 {
        let ready = || {
            self.slots
                .iter()
                .zip(&self.scraped)
                .filter(|(s, _)| **s == Slot::Ready)
        };
        match self.variant.signal {
            Signal::Cpu | Signal::Sessions => {
                let value = |m: &Scraped| match self.variant.signal {
                    Signal::Cpu => m.utilisation,
                    _ => m.active as f64,
                };
                let pods: Vec<PodMetric> = self
                    .slots
                    .iter()
                    .zip(&self.scraped)
                    .filter_map(|(slot, m)| match (slot, m) {
                        (Slot::Starting { .. }, _) => Some(PodMetric::NotReady),
                        (Slot::Ready, Some(m)) => Some(PodMetric::Value(value(m))),
                        (Slot::Ready, None) => Some(PodMetric::Missing),
                        _ => None,
                    })
                    .collect();
                replicas_for_pods(current, &pods, target, tolerance)
            }
            Signal::Capacity => {
                // The documented query, sum(active) / clamp_min(sum(effective capacity), 1),
                // over the ready pods, or every pod Prometheus scrapes when draining ones are
                // not left out (a starting pod has no series yet). The ready count is the
                // HPA's own.
                let counted = |s: &Slot| match s {
                    Slot::Ready => true,
                    Slot::Draining { .. } => self.share_includes_draining,
                    _ => false,
                };
                let scraped: Vec<&Scraped> = self
                    .slots
                    .iter()
                    .zip(&self.scraped)
                    .filter(|(s, _)| counted(s))
                    .filter_map(|(_, m)| m.as_ref())
                    .collect();
                if scraped.is_empty() {
                    return current;
                }
                let active: u64 = scraped.iter().map(|m| m.active).sum();
                let capacity: f64 = scraped.iter().map(|m| m.capacity).sum();
                let value = active as f64 / capacity.max(1.0);
                let n = ready().count() as u32;
                replicas_for_value(current, n, value, target, tolerance)
            }
        }
    }

    /// The ready slot a scale-in removes: at random, or the one with the fewest of `open`
    /// (the newest, i.e. highest index, on a tie).
    pub(super) fn victim(&mut self, open: &[u64]) -> Option<usize> {
        let ready: Vec<usize> = (0..self.slots.len())
            .filter(|&b| self.slots[b] == Slot::Ready)
            .collect();
        if ready.is_empty() {
            return None;
        }
        Some(match self.variant.scale_in {
            ScaleIn::Random => ready[self.rng.below(ready.len())],
            ScaleIn::Emptiest | ScaleIn::Drain => *ready
                .iter()
                .rev()
                .min_by_key(|&&b| open[b])
                .expect("not empty"),
        })
    }

    /// The last slot still starting (the most recently created), if any.
    pub(super) fn newest_starting(&self) -> Option<usize> {
        (0..self.slots.len())
            .filter(|&b| matches!(self.slots[b], Slot::Starting { .. }))
            .max_by(|&a, &b| {
                let at = |i: usize| match self.slots[i] {
                    Slot::Starting { ready_at } => ready_at,
                    _ => 0.0,
                };
                at(a).total_cmp(&at(b)).then(a.cmp(&b))
            })
    }

    /// The summary, the cost counted up to the end of the arrival window.
    pub(super) fn finish(&mut self, reconnects: u64) -> AutoscaleSummary {
        self.account(self.horizon);
        let mut s = self.summary;
        s.reconnects = reconnects;
        s.mean_backends = s.backend_seconds / self.horizon;
        s
    }
}
