//! One simulated backend: its sessions, CPU, counters and latency.

use crate::SimRng;
use crate::scenario::{BackendGroup, Cpu, Latency};

/// The truth about one backend (the balancer sees only its reports).
#[derive(Debug)]
pub(crate) struct Backend {
    pub(crate) size: f64,
    pub(crate) max_sessions: u32,
    base_utilisation: f64,
    /// Extra share of long sessions cut on this backend's network path.
    pub(crate) disconnect_share: f64,
    pub(crate) alive: bool,
    /// Open sessions (ids), for counting them out when the backend dies.
    pub(crate) sessions: Vec<u32>,
    /// Sessions whose cost is the speaking cost right now (short ones included).
    pub(crate) speaking: u64,
    /// The exactly-once counter, maintained on its own ending paths (checked against
    /// `sessions.len()`).
    pub(crate) tracked: u64,
    /// The naive counter: decremented on clean closes only.
    pub(crate) naive: u64,
    /// Utilisation now, and its time integral since the last report.
    pub(crate) utilisation: f64,
    integral: f64,
    since: f64,
    last_change: f64,
    /// Arrival instants within the report window (oldest first).
    arrivals: std::collections::VecDeque<f64>,
}

impl Backend {
    pub(crate) fn new(group: &BackendGroup) -> Self {
        let mut b = Self {
            size: group.size,
            max_sessions: group.max_sessions,
            base_utilisation: group.base_utilisation,
            disconnect_share: group.disconnect_share,
            alive: true,
            sessions: Vec::new(),
            speaking: 0,
            tracked: 0,
            naive: 0,
            utilisation: 0.0,
            integral: 0.0,
            since: 0.0,
            last_change: 0.0,
            arrivals: Default::default(),
        };
        b.utilisation = b.base_utilisation;
        b
    }

    pub(crate) fn active(&self) -> u64 {
        self.sessions.len() as u64
    }

    /// Recomputes utilisation after a change at `now`, integrating the old value first.
    pub(crate) fn refresh(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64), wave: bool) {
        self.integral += self.utilisation * (now - self.last_change).max(0.0);
        self.last_change = now;
        if !self.alive {
            self.utilisation = 0.0;
            return;
        }
        let active = self.active() as f64;
        let speaking = if wave { active } else { self.speaking as f64 };
        let (idle_cost, speaking_cost) = costs;
        let load = (active - speaking) * idle_cost + speaking * speaking_cost;
        let raw = self.base_utilisation + load / self.size;
        self.utilisation = (raw + cpu.overhead * raw.powf(cpu.exponent)).min(1.0);
    }

    /// Mean utilisation since the previous report; starts the next interval.
    pub(crate) fn take_utilisation(&mut self, now: f64) -> f64 {
        self.integral += self.utilisation * (now - self.last_change).max(0.0);
        self.last_change = now;
        let span = now - self.since;
        let mean = if span > 0.0 {
            self.integral / span
        } else {
            self.utilisation
        };
        self.integral = 0.0;
        self.since = now;
        mean.clamp(0.0, 1.0)
    }

    pub(crate) fn note_arrival(&mut self, now: f64) {
        self.arrivals.push_back(now);
    }

    /// Arrivals in `(now − window, now]`.
    pub(crate) fn arrivals_in_window(&mut self, now: f64, window: f64) -> u64 {
        while self.arrivals.front().is_some_and(|&t| t <= now - window) {
            self.arrivals.pop_front();
        }
        self.arrivals.len() as u64
    }

    /// Startup latency and time to first stream (ms) for a session starting now:
    /// exponential with mean `base ÷ (1 − ρ)`, ρ = utilisation capped at 0.98 (M/M/1).
    pub(crate) fn latencies(&self, latency: &Latency, rng: &mut SimRng) -> (f64, f64) {
        let slowdown = 1.0 / (1.0 - self.utilisation.min(0.98));
        let startup = rng.exponential(latency.startup_ms * slowdown);
        let first = startup + rng.exponential(latency.first_stream_ms * slowdown);
        (startup, first)
    }

    /// The backend dies, after the engine has ended each of its sessions: the process
    /// goes, and with it any ghosts in its naive counter.
    pub(crate) fn die(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64)) {
        debug_assert!(self.sessions.is_empty() && self.tracked == 0);
        self.alive = false;
        self.speaking = 0;
        self.naive = 0;
        self.arrivals.clear();
        self.refresh(now, cpu, costs, false);
    }

    /// Back, empty, with fresh counters.
    pub(crate) fn revive(&mut self, now: f64, cpu: &Cpu, costs: (f64, f64)) {
        self.alive = true;
        self.integral = 0.0;
        self.since = now;
        self.refresh(now, cpu, costs, false);
    }
}
