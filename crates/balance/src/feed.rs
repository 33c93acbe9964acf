//! [`LoadFeed`]: the latest reading of one backend's [`LoadSignal`], kept fresh by a
//! background task reading a [`LoadSource`]; [`LoadReading`]: what it reads as.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use tokio::task::JoinHandle;

use crate::backend_load::{BackendLoad, LoadSignal};
use crate::source::LoadSource;

/// How long the feed's task waits after a source error before asking again.
const RETRY_AFTER_ERROR: Duration = Duration::from_millis(100);

/// A reading of a backend's [`LoadSignal`] as of now: the tower [`Load`](tower::load::Load)
/// metric of a [`SessionLoad`](crate::SessionLoad), lower is less loaded.
/// A backend with no fresh report reads as [`LoadReading::UNKNOWN`], above every known load,
/// so that a balancer never takes silence for free capacity.
///
/// ```
/// use livecount_balance::LoadReading;
///
/// assert!(LoadReading::new(0.2) < LoadReading::new(0.9));
/// assert!(LoadReading::new(1e9) < LoadReading::UNKNOWN);
/// assert!(!LoadReading::UNKNOWN.is_known());
/// assert_eq!(LoadReading::new(f64::NAN), LoadReading::UNKNOWN); // never NaN
/// ```
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct LoadReading(f64);

impl LoadReading {
    /// No fresh report: the most loaded value there is.
    pub const UNKNOWN: LoadReading = LoadReading(f64::INFINITY);

    /// `value`, or [`UNKNOWN`](LoadReading::UNKNOWN) if it is not a finite number.
    pub fn new(value: f64) -> Self {
        if value.is_finite() {
            LoadReading(value)
        } else {
            LoadReading::UNKNOWN
        }
    }

    /// The value (`f64::INFINITY` when unknown).
    pub fn value(self) -> f64 {
        self.0
    }

    /// Whether a fresh report stands behind it.
    pub fn is_known(self) -> bool {
        self.0.is_finite()
    }
}

/// One backend's latest load, published by a background task that reads a [`LoadSource`].
/// A cheap handle (clones share the task); the task stops when the last clone is dropped.
///
/// The freshness rule: a report counts until `max_age` after it was *taken* (its receipt
/// minus the `age_ms` it carried); a report repeating the last sequence number refreshes
/// nothing (the backend's reporter is stuck); a lower sequence is a restarted backend and
/// counts. Without a fresh report, [`load`](LoadFeed::load) is [`LoadReading::UNKNOWN`].
/// Source errors keep the last report until it goes stale.
///
/// [`load`](LoadFeed::load) is two atomic loads and a clock read: no lock, no allocation.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_balance::{BackendLoad, LoadFeed, LoadReading, LoadSignal};
/// use std::time::Duration;
///
/// let (reports, source) = tokio::sync::mpsc::channel(1);
/// let feed = LoadFeed::spawn(source, LoadSignal::Active, Duration::from_secs(3));
/// assert_eq!(feed.load(), LoadReading::UNKNOWN); // nothing heard yet
/// reports.send(BackendLoad::new(1, 7, 20.0)).await.unwrap();
/// while !feed.load().is_known() {
///     tokio::task::yield_now().await;
/// }
/// assert_eq!(feed.load(), LoadReading::new(7.0));
/// # }
/// ```
#[derive(Clone)]
pub struct LoadFeed {
    cell: Arc<Cell>,
    _task: Arc<AbortOnDrop>,
}

impl LoadFeed {
    /// Starts a task on the current tokio runtime that reads `source` and publishes
    /// `signal` of each report, fresh for `max_age` from when the report was taken.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn<S: LoadSource>(source: S, signal: LoadSignal, max_age: Duration) -> Self {
        let cell = Arc::new(Cell::new());
        let task = tokio::spawn(drive(source, Arc::clone(&cell), signal, max_age));
        LoadFeed {
            cell,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The backend's load now.
    pub fn load(&self) -> LoadReading {
        self.load_at(Instant::now())
    }

    /// The backend's load as of `now`: the latest reading if its report is fresh at `now`,
    /// else [`LoadReading::UNKNOWN`].
    pub fn load_at(&self, now: Instant) -> LoadReading {
        self.cell.read(now)
    }

    /// The backend's latest report if it is fresh now (the same rule as
    /// [`load`](LoadFeed::load)), whole: for a balancer that compares more than one figure
    /// (an endpoint picker reads the sessions, the capacity, the limit and the sequence).
    /// Lock-free too (an [`arc_swap`] load), and a copy of the report.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_balance::{BackendLoad, LoadFeed, LoadSignal};
    /// use std::time::Duration;
    /// let (reports, source) = tokio::sync::mpsc::channel(1);
    /// let feed = LoadFeed::spawn(source, LoadSignal::Active, Duration::from_secs(3));
    /// assert_eq!(feed.report(), None); // nothing heard yet
    /// reports.send(BackendLoad::new(1, 7, 20.0).with_max_sessions(50)).await.unwrap();
    /// while feed.report().is_none() {
    ///     tokio::task::yield_now().await;
    /// }
    /// assert_eq!(feed.report().unwrap().max_sessions, Some(50));
    /// # }
    /// ```
    pub fn report(&self) -> Option<BackendLoad> {
        self.report_at(Instant::now())
    }

    /// The backend's latest report if it is fresh at `now`.
    pub fn report_at(&self, now: Instant) -> Option<BackendLoad> {
        self.cell.report(now)
    }

    /// How many reports have been published (repeats not counted).
    pub fn reports(&self) -> u64 {
        // Relaxed: a statistic; it orders nothing.
        self.cell.reports.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for LoadFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadFeed")
            .field("load", &self.load())
            .field("reports", &self.reports())
            .finish()
    }
}

/// The feed's task: reads reports and publishes them until the source is finished.
async fn drive<S: LoadSource>(
    mut source: S,
    cell: Arc<Cell>,
    signal: LoadSignal,
    max_age: Duration,
) {
    let mut last_sequence = None;
    while let Some(next) = source.next_report().await {
        match next {
            Ok(report) => {
                if last_sequence.replace(report.sequence) != Some(report.sequence) {
                    cell.publish(&report, signal, max_age, Instant::now());
                }
            }
            Err(_) => tokio::time::sleep(RETRY_AFTER_ERROR).await,
        }
    }
}

/// Aborts the feed's task when the last `LoadFeed` clone goes.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The published reading and until when it is fresh.
struct Cell {
    anchor: Instant,
    /// `f64` bits of the latest reading.
    reading: AtomicU64,
    /// Nanoseconds after `anchor` until which `reading` is fresh; 0 before the first report.
    fresh_until: AtomicU64,
    reports: AtomicU64,
    /// The latest report and its `fresh_until`, for [`LoadFeed::report`]; written before
    /// the atomics above; neither the write nor a read waits on the other.
    latest: ArcSwapOption<(BackendLoad, u64)>,
}

impl Cell {
    fn new() -> Self {
        Cell {
            anchor: Instant::now(),
            reading: AtomicU64::new(f64::INFINITY.to_bits()),
            fresh_until: AtomicU64::new(0),
            reports: AtomicU64::new(0),
            latest: ArcSwapOption::empty(),
        }
    }

    fn nanos_since_anchor(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.anchor).as_nanos()).unwrap_or(u64::MAX)
    }

    fn publish(
        &self,
        report: &BackendLoad,
        signal: LoadSignal,
        max_age: Duration,
        received: Instant,
    ) {
        let age = Duration::from_millis(report.age_ms);
        let taken = received.checked_sub(age).unwrap_or(self.anchor);
        let until = taken
            .checked_add(max_age)
            .map_or(u64::MAX, |t| self.nanos_since_anchor(t));
        // One allocation per report, none per read.
        self.latest.store(Some(Arc::new((report.clone(), until))));
        // Relaxed: published by the Release store below.
        self.reading
            .store(signal.of(report).to_bits(), Ordering::Relaxed);
        // Release: pairs with the Acquire in `read`, so a reader that sees this deadline sees
        // this report's reading (or a later one), never an older one.
        self.fresh_until.store(until, Ordering::Release);
        self.reports.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self, now: Instant) -> LoadReading {
        // Acquire: pairs with the Release in `publish`.
        let until = self.fresh_until.load(Ordering::Acquire);
        if self.nanos_since_anchor(now) >= until {
            return LoadReading::UNKNOWN;
        }
        // Relaxed: ordered after the deadline by the Acquire above. Racing a publish, this
        // may read the newer reading with the older deadline: a report that is seconds old.
        LoadReading::new(f64::from_bits(self.reading.load(Ordering::Relaxed)))
    }

    fn report(&self, now: Instant) -> Option<BackendLoad> {
        let latest = self.latest.load();
        let (report, until) = latest.as_deref()?;
        (self.nanos_since_anchor(now) < *until).then(|| report.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_AGE: Duration = Duration::from_secs(3);

    #[test]
    fn a_report_is_fresh_until_max_age_after_it_was_taken() {
        let cell = Cell::new();
        let now = Instant::now();
        assert_eq!(cell.read(now), LoadReading::UNKNOWN, "nothing heard");
        let report = BackendLoad::new(1, 5, 10.0).with_age_ms(1_000);
        cell.publish(&report, LoadSignal::Active, MAX_AGE, now);
        assert_eq!(cell.read(now), LoadReading::new(5.0));
        assert_eq!(
            cell.read(now + Duration::from_millis(1_999)),
            LoadReading::new(5.0)
        );
        assert_eq!(
            cell.read(now + Duration::from_millis(2_000)),
            LoadReading::UNKNOWN
        );
        // The whole report follows the same rule.
        assert_eq!(
            cell.report(now + Duration::from_millis(1_999)),
            Some(report.clone())
        );
        assert_eq!(cell.report(now + Duration::from_millis(2_000)), None);
    }

    #[test]
    fn a_report_older_than_max_age_is_never_fresh() {
        let cell = Cell::new();
        let now = Instant::now() + Duration::from_secs(10);
        let stale = BackendLoad::new(1, 0, 10.0).with_age_ms(4_000);
        cell.publish(&stale, LoadSignal::Occupancy, MAX_AGE, now);
        assert_eq!(
            cell.read(now),
            LoadReading::UNKNOWN,
            "idle but stale is not free"
        );
        assert_eq!(cell.report(now), None);
    }

    #[tokio::test]
    async fn a_repeated_sequence_refreshes_nothing_and_a_restart_counts() {
        let (reports, source) = tokio::sync::mpsc::channel(8);
        let feed = LoadFeed::spawn(source, LoadSignal::Active, MAX_AGE);
        for report in [
            BackendLoad::new(5, 1, 10.0),
            BackendLoad::new(5, 2, 10.0), // same sequence: ignored
            BackendLoad::new(1, 3, 10.0), // restarted backend
        ] {
            reports.send(report).await.unwrap();
        }
        drop(reports);
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while feed.reports() < 2 {
                tokio::task::yield_now().await;
            }
        });
        waited.await.expect("two reports published in time");
        assert_eq!(feed.load(), LoadReading::new(3.0));
        assert_eq!(feed.report(), Some(BackendLoad::new(1, 3, 10.0)));
        tokio::task::yield_now().await;
        assert_eq!(feed.reports(), 2);
    }

    #[tokio::test]
    async fn the_task_stops_with_the_last_feed() {
        let (reports, source) = tokio::sync::mpsc::channel::<BackendLoad>(1);
        let feed = LoadFeed::spawn(source, LoadSignal::Active, MAX_AGE);
        let other = feed.clone();
        drop(feed);
        assert!(!reports.is_closed(), "a clone keeps it running");
        drop(other);
        let closed = tokio::time::timeout(Duration::from_secs(10), reports.closed());
        closed.await.expect("the aborted task dropped its receiver");
    }
}
