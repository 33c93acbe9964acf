//! [`Reporter`]: samples a tracker on an interval and publishes the latest [`Report`]
//! atomically; [`Window`]: the figures between two snapshots.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread};

use crate::reason::ByReason;
use crate::snapshot::Snapshot;
use crate::sync::{Mutex, lock};
use crate::tracker::SessionTracker;

/// The default reporting interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Rates and means over the window between two snapshots. A pure function of the two, so it
/// can be tested (and recomputed) without a clock.
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
/// assert_eq!(w.pretend_qps, 9.0); // the article's 90 sessions over 10 s
/// assert_eq!(w.arrivals_per_sec, 9.0);
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
    /// Active sessions at the window's end divided by its length in seconds: the "pretend
    /// QPS" a QPS-based balancer can consume (90 sessions / 10 s = 9).
    pub pretend_qps: f64,
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
            pretend_qps: later.active as f64 / secs,
            ended_by_reason: later.ended_by_reason.since(&earlier.ended_by_reason),
        })
    }
}

/// What a [`Reporter`] publishes: the latest snapshot and the window since the previous one.
///
/// ```
/// use livecount_session::{Reporter, SessionTracker};
///
/// let reporter = Reporter::new(SessionTracker::<livecount::Sharded>::default());
/// let first = reporter.sample();
/// assert!(first.window.is_none()); // nothing to compare with yet
/// assert!(reporter.sample().window.is_some());
/// ```
///
/// With the `serde` feature, `Serialize` and `Deserialize`; see [`Snapshot`] for how its
/// time of reading travels.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Report {
    /// The snapshot this report was built from.
    pub snapshot: Snapshot,
    /// The window since the previously published snapshot, if there was one.
    pub window: Option<Window>,
}

impl Report {
    /// How old the report's snapshot is at `now`.
    pub fn age(&self, now: Instant) -> Duration {
        self.snapshot.age(now)
    }

    /// Whether the report is older than `ttl` at `now` (e.g. three reporting intervals): a
    /// consumer should then fall back and never read it as free capacity.
    ///
    /// ```
    /// # use livecount_session::{Reporter, SessionTracker};
    /// # use std::time::Duration;
    /// # let reporter = Reporter::new(SessionTracker::<livecount::Sharded>::default());
    /// let report = reporter.sample();
    /// let later = report.snapshot.taken_at + Duration::from_secs(31);
    /// assert!(report.is_stale(later, 3 * reporter.interval()));
    /// ```
    pub fn is_stale(&self, now: Instant, ttl: Duration) -> bool {
        self.age(now) > ttl
    }
}

/// Samples a tracker every [`interval`](Reporter::interval) and publishes the latest
/// [`Report`] atomically: a poller gets one `Arc<Report>`, never fields of two samples.
///
/// Publication is a `Mutex<Option<Arc<Report>>>` held only to swap or clone the `Arc`. It is
/// off the session hot path (start / end never touch it), taken once per interval by the
/// sampler and once per poll by readers, and it is loom-checkable, which an `arc-swap` would
/// not be under our cfg.
///
/// ```
/// use livecount_session::{Reporter, SessionTracker};
/// use std::time::Duration;
///
/// let tracker = SessionTracker::new();
/// let reporter = Reporter::new(tracker.clone()).with_interval(Duration::from_secs(5));
/// let _session = tracker.start();
/// reporter.sample();
/// let latest = reporter.latest().unwrap();
/// assert_eq!(latest.snapshot.active, 1);
/// ```
pub struct Reporter<C: Counter = PerThread, M = ()> {
    tracker: SessionTracker<C, M>,
    interval: Duration,
    latest: Mutex<Option<Arc<Report>>>,
}

impl<C: Counter, M: Send + Sync + 'static> Reporter<C, M> {
    /// A reporter over `tracker`, sampling every [`DEFAULT_INTERVAL`] (10 s) once spawned.
    pub fn new(tracker: SessionTracker<C, M>) -> Self {
        Reporter {
            tracker,
            interval: DEFAULT_INTERVAL,
            latest: Mutex::new(None),
        }
    }

    /// Sets the sampling interval.
    ///
    /// # Panics
    ///
    /// If `interval` is zero: a reporter must sample at some rate, and the spawned task
    /// would otherwise panic later, inside the runtime.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        assert!(
            !interval.is_zero(),
            "Reporter::with_interval: the interval must be non-zero"
        );
        self.interval = interval;
        self
    }

    /// The sampling interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The tracker being sampled.
    pub fn tracker(&self) -> &SessionTracker<C, M> {
        &self.tracker
    }

    /// The latest published report, if any sample was taken.
    pub fn latest(&self) -> Option<Arc<Report>> {
        lock(&self.latest).clone()
    }

    /// Takes a snapshot now and publishes it.
    pub fn sample(&self) -> Arc<Report> {
        self.sample_at(Instant::now())
    }

    /// Takes a snapshot stamped `now` (a virtual clock in tests) and publishes it, with the
    /// window since the previous one. A sample older than the published one (two samplers
    /// racing) is returned but not published.
    pub fn sample_at(&self, now: Instant) -> Arc<Report> {
        let snapshot = self.tracker.snapshot_at(now);
        let mut latest = lock(&self.latest);
        let window = match latest.as_deref() {
            Some(previous) if previous.snapshot.sequence > snapshot.sequence => {
                let stale = Report {
                    snapshot,
                    window: Window::between(&previous.snapshot, &snapshot),
                };
                return Arc::new(stale);
            }
            Some(previous) => Window::between(&previous.snapshot, &snapshot),
            None => None,
        };
        let report = Arc::new(Report { snapshot, window });
        *latest = Some(Arc::clone(&report));
        report
    }
}

impl<C: Counter, M> fmt::Debug for Reporter<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}
