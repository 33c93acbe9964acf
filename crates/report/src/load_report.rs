//! [`LoadReport`]: one coherent reading of a backend's load, the value every encoder serves.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use livecount_session::DurationHistogram;

use crate::PrequalProbe;

/// One load report: a tracker snapshot, the process's utilisation and the capacity model's
/// verdict, all of one moment. `/load`, `/metrics`, agent-check and ORCA serve the same
/// `Arc<LoadReport>`, so no two of them can disagree about a sequence number. `/load` serves
/// it as a [`ServedReport`](crate::ServedReport) (its fields plus `age_ms`), whose docs say
/// which fields a reader may find missing.
///
/// "Active" means what [`livecount_session::Snapshot::active`] means: sessions started and
/// not yet ended, by the tracker's exactly-once ending. "Pretend QPS" is
/// [`livecount_capacity::pretend_qps`]: active ÷ the report window.
///
/// ```
/// let report = livecount_report::LoadReport::empty("b1");
/// assert_eq!((report.sequence, report.active, report.weight_percent), (0, 0, 100));
/// let json = serde_json::to_string(&report).unwrap();
/// let back: livecount_report::LoadReport = serde_json::from_str(&json).unwrap();
/// assert_eq!(back, report);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The backend's name.
    pub name: String,
    /// The snapshot's sequence number (increases with every report; 0 before the first).
    pub sequence: u64,
    /// Wall-clock time of the snapshot, milliseconds since the Unix epoch.
    pub taken_at_unix_ms: u64,
    /// Open sessions.
    pub active: u64,
    /// Open sessions listening.
    pub listening: u64,
    /// Open sessions generating a response.
    pub generating: u64,
    /// Sessions started since the tracker began.
    pub started: u64,
    /// Sessions ended (the sum of `ended_by_reason`).
    pub ended: u64,
    /// Ended sessions per reason (`EndReason::as_str` names).
    pub ended_by_reason: BTreeMap<String, u64>,
    /// How long the ended sessions lasted, per reason (the same names): the snapshot's
    /// [`durations`](livecount_session::Snapshot::durations), each histogram counting
    /// exactly its reason's `ended_by_reason`. Empty (and so absent from `/metrics`) in a
    /// report from an agent that predates it.
    #[serde(default)]
    pub durations: BTreeMap<String, DurationHistogram>,
    /// Sessions refused before they started (at capacity, while draining, or noted by the
    /// service): the snapshot's [`refused`](livecount_session::Snapshot::refused). Read
    /// from `rejected` too, its name in `/load` bodies of agents that predate the rename.
    #[serde(alias = "rejected")]
    pub refused: u64,
    /// The most sessions the backend admits, if it has a hard limit.
    pub max_sessions: Option<u64>,
    /// active ÷ window: the session count as a request rate (ORCA reports its own,
    /// always positive qps: see `orca`).
    pub pretend_qps: f64,
    /// Utilisation over the last interval in [0, 1], EWMA-smoothed.
    pub utilisation: f64,
    /// The same before smoothing.
    pub raw_utilisation: f64,
    /// Whether utilisation was measured. `false` where the platform gives no process CPU
    /// time and no utilisation source was supplied: the figures above are then 0 and
    /// mean "unknown", and the capacity fields come from the model's prior alone.
    pub utilisation_measured: bool,
    /// Sessions the backend can hold by the next report (hybrid model), never above
    /// `max_sessions`.
    pub effective_capacity: f64,
    /// effective_capacity − active, never negative.
    pub headroom: f64,
    /// The agent-check weight: 100 × headroom ÷ the headroom of an idle backend, clamped
    /// to 1..=100; 0 while draining.
    pub weight_percent: u32,
    /// Shutting down: agent-check says `drain`, ORCA streams end.
    pub draining: bool,
    /// The Prequal probe reply at `active` from the board's
    /// [`PrequalEstimator`](crate::PrequalEstimator), taken with the rest of the report;
    /// `None` (and absent from the JSON) when the board has none
    /// ([`LoadBoardBuilder::prequal`](crate::LoadBoardBuilder::prequal)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prequal: Option<PrequalProbe>,
}

impl LoadReport {
    /// The report of a backend that has not published yet: sequence 0, nothing open, full
    /// weight.
    pub fn empty(name: &str) -> Self {
        LoadReport {
            name: name.to_owned(),
            sequence: 0,
            taken_at_unix_ms: unix_ms(),
            active: 0,
            listening: 0,
            generating: 0,
            started: 0,
            ended: 0,
            ended_by_reason: BTreeMap::new(),
            durations: BTreeMap::new(),
            refused: 0,
            max_sessions: None,
            pretend_qps: 0.0,
            utilisation: 0.0,
            raw_utilisation: 0.0,
            utilisation_measured: false,
            effective_capacity: 0.0,
            headroom: 0.0,
            weight_percent: 100,
            draining: false,
            prequal: None,
        }
    }

    /// Milliseconds since the report was taken, by the wall clock (0 if the clock went
    /// back).
    ///
    /// ```
    /// let report = livecount_report::LoadReport::empty("b1");
    /// assert!(report.age_ms() < 60_000);
    /// ```
    pub fn age_ms(&self) -> u64 {
        unix_ms().saturating_sub(self.taken_at_unix_ms)
    }

    /// The HAProxy agent-check reply: `drain` while shutting down, else `up ready N%`.
    ///
    /// `ready` matters after a restart: HAProxy keeps a server in the `DRAIN` state an
    /// agent asked for until an agent reply says `ready` (a bare `up N%` only sets the
    /// operational state and the weight), so without it a backend restarted on the same
    /// address would never get a new session again. It also ends a `drain` or `maint` an
    /// operator set on the stats socket: the agent's word is the last one.
    ///
    /// ```
    /// let mut report = livecount_report::LoadReport::empty("b1");
    /// report.weight_percent = 40;
    /// assert_eq!(report.agent_reply(), "up ready 40%\n");
    /// report.draining = true;
    /// assert_eq!(report.agent_reply(), "drain\n");
    /// ```
    pub fn agent_reply(&self) -> String {
        if self.draining {
            "drain\n".into()
        } else {
            format!("up ready {}%\n", self.weight_percent)
        }
    }
}

/// Milliseconds since the Unix epoch by the wall clock (0 before it).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
