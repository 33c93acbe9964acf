//! Every backend's `/load`, polled a few times a second for the whole run: what each held
//! and how busy it was, over time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use livecount_report::LoadReport;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::fleet::load_report;

/// How often the backends are polled.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// What one backend reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Open sessions.
    pub active: u64,
    /// Sessions started so far.
    pub started: u64,
    /// Sessions ended so far.
    pub ended: u64,
    /// CPU over its last report interval ÷ its cores, unsmoothed (the agent's `getrusage`).
    pub utilisation: f64,
    /// Its agent-check weight (the hybrid headroom as a percentage).
    pub weight_percent: u32,
}

impl From<&LoadReport> for Point {
    fn from(r: &LoadReport) -> Self {
        Point {
            active: r.active,
            started: r.started,
            ended: r.ended,
            utilisation: r.raw_utilisation,
            weight_percent: r.weight_percent,
        }
    }
}

/// Every backend at one moment (`None`: it did not answer).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the replay started (negative: before it).
    pub t: f64,
    /// One per backend, in fleet order.
    pub backends: Vec<Option<Point>>,
}

/// The samples so far, shared with the poller.
pub type Samples = Arc<Mutex<Vec<Sample>>>;

/// Polls `addrs` (`host:port` of each agent's HTTP listener) every [`POLL_EVERY`], times
/// measured from `zero`, until the returned task is aborted.
pub fn record(addrs: Vec<String>, zero: Instant) -> (Samples, JoinHandle<()>) {
    let samples: Samples = Arc::default();
    let sink = Arc::clone(&samples);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let t = now_since(zero);
            let mut backends = Vec::with_capacity(addrs.len());
            for a in &addrs {
                backends.push(load_report(a).await.as_ref().map(Point::from));
            }
            sink.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Sample { t, backends });
        }
    });
    (samples, task)
}

/// Seconds from `zero` to now, negative before it.
fn now_since(zero: Instant) -> f64 {
    let now = Instant::now();
    if now >= zero {
        (now - zero).as_secs_f64()
    } else {
        -(zero - now).as_secs_f64()
    }
}
