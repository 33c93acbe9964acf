//! [`Window`]: the figures between two snapshots.

use std::time::Duration;

use crate::reason::ByReason;
use crate::snapshot::Snapshot;

/// Rates and means over the window between two snapshots. A pure function of the two, so it
/// can be tested (and recomputed) without a clock.
///
/// The crate publishes nothing itself: a service keeps the snapshots it wants to compare
/// (`livecount-report`'s `LoadBoard` is the one publisher of the latest report). The
/// "pretend QPS" (active ÷ window) is not a field here: it has one definition,
/// `livecount_capacity::pretend_qps(later.active, window.length)`, which the load report
/// carries as `pretend_qps`.
///
/// ```
/// use livecount_session::{SessionTracker, Window};
/// use std::time::{Duration, Instant};
///
/// let tracker = SessionTracker::new();
/// let t0 = Instant::now();
/// let before = tracker.snapshot_at(t0);
/// let sessions: Vec<_> = (0..90).map(|_| tracker.start()).collect();
/// let after = tracker.snapshot_at(t0 + Duration::from_secs(10));
///
/// let w = Window::between(&before, &after).unwrap();
/// assert_eq!(w.arrivals_per_sec, 9.0); // the article's 90 sessions over 10 s
/// assert_eq!(w.mean_active, 45.0); // from 0 to 90: the trapezoid's mean
/// # drop(sessions);
/// ```
///
/// With the `serde` feature, `Serialize` and `Deserialize` (`length` as `{secs, nanos}`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Window {
    /// Time between the two snapshots.
    pub length: Duration,
    /// Sessions started per second over the window.
    pub arrivals_per_sec: f64,
    /// Sessions ended per second over the window.
    pub ends_per_sec: f64,
    /// Mean of the active count over the window, estimated as the mean of its two ends.
    pub mean_active: f64,
    /// Ends during the window, per reason.
    pub ended_by_reason: ByReason,
}

impl Window {
    /// The window from `earlier` to `later`; `None` unless `later` was taken after `earlier`.
    pub fn between(earlier: &Snapshot, later: &Snapshot) -> Option<Window> {
        let length = later.taken_at.checked_duration_since(earlier.taken_at)?;
        let secs = length.as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs;
        Some(Window {
            length,
            arrivals_per_sec: rate(later.started, earlier.started),
            ends_per_sec: rate(later.ended, earlier.ended),
            mean_active: (earlier.active as f64 + later.active as f64) / 2.0,
            ended_by_reason: later.ended_by_reason.since(&earlier.ended_by_reason),
        })
    }
}
