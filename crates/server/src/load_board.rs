//! The one coherent load report every exporter serves: `/load`, `/metrics`, agent-check
//! and ORCA all read the same `Arc<LoadReport>`, taken from one tracker snapshot.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use livecount_capacity::{BackendModel, CapacityConfig, Estimate, pretend_qps};
use livecount_session::Snapshot;
use serde::Serialize;

/// One load report: the tracker's snapshot, utilisation and the capacity model's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadReport {
    /// The backend's name.
    pub name: String,
    /// The snapshot's sequence number (increases with every report).
    pub sequence: u64,
    /// Wall-clock time of the snapshot, milliseconds since the Unix epoch.
    pub taken_at_unix_ms: u64,
    /// Open sessions.
    pub active: u64,
    /// Open sessions listening.
    pub listening: u64,
    /// Open sessions generating a response.
    pub generating: u64,
    /// Sessions started since the process began.
    pub started: u64,
    /// Sessions ended (the sum of `ended_by_reason`).
    pub ended: u64,
    /// Ended sessions per reason.
    pub ended_by_reason: BTreeMap<String, u64>,
    /// Sessions refused before they started (at `max_sessions`, or while draining).
    pub rejected: u64,
    /// active ÷ window: the session count as a request rate, for ORCA `rps_fractional`.
    pub pretend_qps: f64,
    /// Process CPU over the last interval ÷ cores, EWMA-smoothed, in [0, 1].
    pub utilisation: f64,
    /// The same before smoothing.
    pub raw_utilisation: f64,
    /// Sessions the backend can hold by the next report (hybrid model).
    pub effective_capacity: f64,
    /// effective_capacity − active.
    pub headroom: f64,
    /// The agent-check weight: 100 × headroom ÷ the headroom of an idle backend (the
    /// model with no sessions and no load), clamped to 1..=100; 0 while draining.
    pub weight_percent: u32,
    /// Shutting down: the agent says `drain`.
    pub draining: bool,
}

impl LoadReport {
    /// Milliseconds since the report was taken, by the wall clock.
    pub fn age_ms(&self) -> u64 {
        unix_ms().saturating_sub(self.taken_at_unix_ms)
    }

    /// The HAProxy agent-check reply: `drain` while shutting down, else `up N%`.
    ///
    /// ```
    /// # use livecount_server::LoadReport;
    /// # fn report(weight_percent: u32, draining: bool) -> LoadReport {
    /// #     LoadReport { name: "b".into(), sequence: 1, taken_at_unix_ms: 0, active: 0, listening: 0,
    /// #         generating: 0, started: 0, ended: 0, ended_by_reason: Default::default(), rejected: 0,
    /// #         pretend_qps: 0.0, utilisation: 0.0, raw_utilisation: 0.0, effective_capacity: 0.0,
    /// #         headroom: 0.0, weight_percent, draining }
    /// # }
    /// assert_eq!(report(40, false).agent_reply(), "up 40%\n");
    /// assert_eq!(report(0, true).agent_reply(), "drain\n");
    /// ```
    pub fn agent_reply(&self) -> String {
        if self.draining {
            "drain\n".into()
        } else {
            format!("up {}%\n", self.weight_percent)
        }
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Process CPU seconds (user + system, all threads), from `/proc/self/stat`.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the `(comm)`, which may contain spaces: state is field 3, utime 14.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<f64>().ok();
    // USER_HZ is 100 on every Linux ABI (sysconf(_SC_CLK_TCK)).
    Some((ticks(14)? + ticks(15)?) / 100.0)
}

/// Utilisation of this process since the previous sample, against `cores`.
#[derive(Debug)]
struct CpuMeter {
    cores: f64,
    last: Option<(Instant, f64)>,
}

impl CpuMeter {
    fn sample(&mut self) -> f64 {
        let now = Instant::now();
        let Some(cpu) = process_cpu_seconds() else {
            return 0.0;
        };
        let u = match self.last {
            Some((t, c)) if now > t => (cpu - c) / (now - t).as_secs_f64() / self.cores,
            _ => 0.0,
        };
        self.last = Some((now, cpu));
        u.clamp(0.0, 1.0)
    }
}

/// Publishes load reports; exporters read the latest.
#[derive(Debug)]
pub struct LoadBoard {
    name: String,
    config: CapacityConfig,
    latest: Mutex<Arc<LoadReport>>,
    model: Mutex<(BackendModel, CpuMeter)>,
    started: Instant,
    /// Headroom that earns the full weight: the model's verdict for an idle backend.
    full_weight_headroom: f64,
    rejected: AtomicU64,
    draining: AtomicBool,
}

impl LoadBoard {
    /// A board for backend `name`, measuring utilisation against `cores`.
    pub fn new(name: &str, config: CapacityConfig, cores: f64) -> Self {
        let empty = LoadReport {
            name: name.to_owned(),
            sequence: 0,
            taken_at_unix_ms: unix_ms(),
            active: 0,
            listening: 0,
            generating: 0,
            started: 0,
            ended: 0,
            ended_by_reason: BTreeMap::new(),
            rejected: 0,
            pretend_qps: 0.0,
            utilisation: 0.0,
            raw_utilisation: 0.0,
            effective_capacity: 0.0,
            headroom: 0.0,
            weight_percent: 100,
            draining: false,
        };
        let mut meter = CpuMeter { cores, last: None };
        meter.sample();
        Self {
            name: name.to_owned(),
            config,
            latest: Mutex::new(Arc::new(empty)),
            model: Mutex::new((BackendModel::new(Duration::ZERO), meter)),
            started: Instant::now(),
            full_weight_headroom: Estimate::compute(&config, 0, 0.0, None).headroom.max(1.0),
            rejected: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        }
    }

    /// The latest report (one `Arc`: never fields of two moments).
    pub fn latest(&self) -> Arc<LoadReport> {
        Arc::clone(&self.latest.lock().expect("load board lock poisoned"))
    }

    /// Counts a refused session.
    pub fn note_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks the backend as draining and publishes at once.
    pub fn set_draining(&self, snapshot: Snapshot) {
        self.draining.store(true, Ordering::SeqCst);
        self.publish(snapshot);
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Takes utilisation, runs the capacity model on `snapshot` and publishes the report.
    pub fn publish(&self, snapshot: Snapshot) -> Arc<LoadReport> {
        let at = self.started.elapsed();
        let mut guard = self.model.lock().expect("load model lock poisoned");
        let (model, meter) = &mut *guard;
        let raw = meter.sample();
        model.report(&self.config, at, snapshot.active, raw);
        let estimate = model.estimate(&self.config, at, None);
        let draining = self.is_draining();
        let weight_percent = if draining {
            0
        } else {
            // Absolute headroom, not headroom ÷ capacity: an empty backend at 78% CPU has
            // capacity = headroom = 0.1 session, which is no room at all, not 100%.
            (100.0 * estimate.headroom / self.full_weight_headroom)
                .round()
                .clamp(1.0, 100.0) as u32
        };
        let report = Arc::new(LoadReport {
            name: self.name.clone(),
            sequence: snapshot.sequence,
            taken_at_unix_ms: unix_ms(),
            active: snapshot.active,
            listening: snapshot.listening,
            generating: snapshot.generating,
            started: snapshot.started,
            ended: snapshot.ended,
            ended_by_reason: snapshot
                .ended_by_reason
                .iter()
                .map(|(r, n)| (r.as_str().to_owned(), n))
                .collect(),
            rejected: self.rejected.load(Ordering::Relaxed),
            pretend_qps: pretend_qps(snapshot.active, self.config.window()),
            utilisation: model.smoothed_utilisation().unwrap_or(raw),
            raw_utilisation: raw,
            effective_capacity: estimate.effective_capacity,
            headroom: estimate.headroom,
            weight_percent,
            draining,
        });
        // Stored under the model lock: two publishers cannot leave an older report last.
        *self.latest.lock().expect("load board lock poisoned") = Arc::clone(&report);
        report
    }
}
