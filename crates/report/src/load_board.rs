//! [`LoadBoard`]: builds one [`LoadReport`] per interval and publishes it lock-free.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use livecount::Counter;
use livecount_capacity::{BackendModel, CapacityConfig, Estimate, pretend_qps};
use livecount_session::{SessionTracker, Snapshot};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::PrequalEstimator;
use crate::load_report::{LoadReport, unix_ms};
use crate::utilisation_source::{ProcessCpu, UtilisationSource};

/// Builds load reports from tracker snapshots, utilisation and the hybrid capacity model,
/// and publishes the latest one for every encoder to read.
///
/// Readers ([`latest`](LoadBoard::latest)) never block and never see fields of two moments:
/// a report is built whole, then swapped in (arc-swap). Publishing is serialised by a lock
/// that only publishers take (once per interval), so an older report can never land last.
///
/// ```
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::LoadBoard;
/// use livecount_session::SessionTracker;
/// use std::time::Duration;
///
/// let tracker: SessionTracker = SessionTracker::default();
/// let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(10), Duration::from_secs(10))?;
/// let board = LoadBoard::builder("b1", config).max_sessions(100).build();
///
/// let _session = tracker.start();
/// let report = board.publish(tracker.snapshot());
/// assert_eq!((report.active, report.max_sessions), (1, Some(100)));
/// assert!(report.effective_capacity <= 100.0 && report.headroom <= 99.0);
/// assert_eq!(board.latest().sequence, report.sequence);
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
pub struct LoadBoard {
    name: String,
    config: CapacityConfig,
    max_sessions: Option<u64>,
    latest: ArcSwap<LoadReport>,
    model: Mutex<Model>,
    started: Instant,
    /// Headroom that earns the full weight: the model's verdict for an idle backend.
    full_weight_headroom: f64,
    /// Reports published so far: bumped after each store, so a reader that cached an
    /// encoding of one report can tell with one load that a newer one exists.
    generation: AtomicU64,
    draining: watch::Sender<bool>,
    prequal: Option<Arc<PrequalEstimator>>,
}

/// What only publishers touch.
#[derive(Debug)]
struct Model {
    backend: BackendModel,
    utilisation: Box<dyn UtilisationSource>,
}

/// Configures a [`LoadBoard`]: [`LoadBoard::builder`].
#[derive(Debug)]
pub struct LoadBoardBuilder {
    name: String,
    config: CapacityConfig,
    max_sessions: Option<u64>,
    utilisation: Option<Box<dyn UtilisationSource>>,
    prequal: Option<Arc<PrequalEstimator>>,
}

impl LoadBoardBuilder {
    /// The backend admits at most `max` sessions: capacity and headroom never exceed it.
    pub fn max_sessions(mut self, max: u64) -> Self {
        self.max_sessions = Some(max);
        self
    }

    /// Utilisation as this process's CPU time ÷ `cores` (the default measures against
    /// the CPUs this process may use).
    pub fn cores(self, cores: f64) -> Self {
        self.utilisation(ProcessCpu::new(cores))
    }

    /// Utilisation from `source` instead of process CPU.
    pub fn utilisation(mut self, source: impl UtilisationSource + 'static) -> Self {
        self.utilisation = Some(Box::new(source));
        self
    }

    /// Every report carries a Prequal probe from `estimator` at its active count
    /// ([`LoadReport::prequal`]), served as `/prequal` and ORCA named metrics. The service
    /// records into the same estimator (one sample per session start).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use livecount_capacity::CapacityConfig;
    /// use livecount_report::{LoadBoard, PrequalEstimator};
    /// use livecount_session::SessionTracker;
    ///
    /// let estimator = Arc::new(PrequalEstimator::new());
    /// let config = CapacityConfig::builder().build()?;
    /// let board = LoadBoard::builder("b1", config).prequal(Arc::clone(&estimator)).build();
    /// let tracker: SessionTracker = SessionTracker::default();
    /// let _session = tracker.start();
    /// estimator.record(tracker.active(), Duration::from_millis(40));
    /// let probe = board.publish(tracker.snapshot()).prequal.unwrap();
    /// assert_eq!((probe.rif, probe.latency_ms), (1, Some(40.0)));
    /// # Ok::<(), livecount_capacity::ConfigError>(())
    /// ```
    pub fn prequal(mut self, estimator: Arc<PrequalEstimator>) -> Self {
        self.prequal = Some(estimator);
        self
    }

    /// The board, with an empty report (sequence 0) published.
    pub fn build(self) -> LoadBoard {
        let utilisation = self.utilisation.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Box::new(ProcessCpu::new(cores as f64))
        });
        let idle = Estimate::compute(&self.config, 0, 0.0, None).headroom;
        let cap = self.max_sessions.map_or(f64::INFINITY, |m| m as f64);
        let mut empty = LoadReport::empty(&self.name);
        empty.max_sessions = self.max_sessions;
        empty.prequal = self.prequal.as_ref().map(|e| e.probe(0));
        LoadBoard {
            latest: ArcSwap::from_pointee(empty),
            model: Mutex::new(Model {
                backend: BackendModel::new(Duration::ZERO),
                utilisation,
            }),
            started: Instant::now(),
            full_weight_headroom: idle.min(cap).max(1.0),
            generation: AtomicU64::new(0),
            draining: watch::channel(false).0,
            prequal: self.prequal,
            name: self.name,
            config: self.config,
            max_sessions: self.max_sessions,
        }
    }
}

impl LoadBoard {
    /// A board for backend `name` with process CPU against every usable CPU and no
    /// session limit; see [`builder`](LoadBoard::builder) for the rest.
    pub fn new(name: &str, config: CapacityConfig) -> Self {
        Self::builder(name, config).build()
    }

    /// Configures a board for backend `name`.
    pub fn builder(name: &str, config: CapacityConfig) -> LoadBoardBuilder {
        LoadBoardBuilder {
            name: name.to_owned(),
            config,
            max_sessions: None,
            utilisation: None,
            prequal: None,
        }
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The capacity model's configuration (its report interval is the publishing interval).
    pub fn config(&self) -> &CapacityConfig {
        &self.config
    }

    /// The Prequal estimator the reports are probed from, if the board has one.
    pub fn prequal(&self) -> Option<&Arc<PrequalEstimator>> {
        self.prequal.as_ref()
    }

    /// The latest report: one `Arc`, never fields of two moments; wait-free.
    pub fn latest(&self) -> Arc<LoadReport> {
        self.latest.load_full()
    }

    /// How many reports have been published: a reader that cached something made from
    /// [`latest`](LoadBoard::latest) re-reads it only when this moved (in-band ORCA's
    /// encodings, per response: one load instead of arc-swap's).
    #[cfg(feature = "orca")]
    pub(crate) fn generation(&self) -> u64 {
        // Acquire: pairs with the Release bump in `publish`, so a reader that sees this
        // generation and then reads `latest` sees that report or a newer one.
        self.generation.load(Ordering::Acquire)
    }

    /// Whether the latest report says draining: a snapshot of a draining tracker
    /// ([`SessionTracker::begin_drain`]) was published. The tracker's flag is the one
    /// drain state; the board only carries it to every signal.
    pub fn is_draining(&self) -> bool {
        *self.draining.borrow()
    }

    /// A receiver that becomes `true` when a draining report is published (ORCA streams
    /// end on it, gRPC health turns `NOT_SERVING`). To drain, drain the tracker and
    /// publish: `tracker.begin_drain(); board.publish(tracker.snapshot())`.
    pub fn draining_signal(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Samples utilisation, runs the capacity model on `snapshot` and publishes the report.
    pub fn publish(&self, snapshot: Snapshot) -> Arc<LoadReport> {
        let at = self.started.elapsed();
        let mut model = self.model.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.latest.load_full();
        // A drain is never undone: a report made from an older snapshot keeps saying it.
        let draining = snapshot.draining || current.draining;
        if snapshot.sequence < current.sequence && current.draining == draining {
            // A publisher that took its snapshot earlier lost the race for the lock: the
            // newer report stays (sequence numbers only go up).
            return current;
        }
        let sample = model.utilisation.sample();
        let raw = sample.unwrap_or(0.0);
        model.backend.report(&self.config, at, snapshot.active, raw);
        let estimate = model.backend.estimate(&self.config, at, None);
        let cap = self.max_sessions.map_or(f64::INFINITY, |m| m as f64);
        let effective_capacity = estimate.effective_capacity.min(cap);
        let headroom = (effective_capacity - snapshot.active as f64)
            .min(estimate.headroom)
            .max(0.0);
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
            durations: snapshot
                .durations
                .iter()
                .map(|(r, h)| (r.as_str().to_owned(), h))
                .collect(),
            // The tracker's count, its one counting point (its cap, its drain, `note_refused`).
            refused: snapshot.refused,
            max_sessions: self.max_sessions,
            pretend_qps: pretend_qps(snapshot.active, self.config.window()),
            utilisation: model.backend.smoothed_utilisation().unwrap_or(raw),
            raw_utilisation: raw,
            utilisation_measured: sample.is_some(),
            effective_capacity,
            headroom,
            weight_percent: if draining {
                0
            } else {
                weight_percent(headroom, self.full_weight_headroom)
            },
            draining,
            prequal: self.prequal.as_ref().map(|e| e.probe(snapshot.active)),
        });
        // Stored under the model lock: two publishers cannot leave an older report last.
        self.latest.store(Arc::clone(&report));
        // Release: after the store, so a reader that sees this generation finds the report
        // it counts (see `generation`).
        self.generation.fetch_add(1, Ordering::Release);
        if draining {
            // After the store: a waiter woken here reads a draining `latest`.
            self.draining
                .send_if_modified(|was| !std::mem::replace(was, true));
        }
        report
    }

    /// Publishes a report from `tracker` now and then every report interval of the
    /// capacity configuration, until the returned task is aborted. Missed ticks are
    /// delayed, not bunched.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn_publisher<C, M>(self: &Arc<Self>, tracker: SessionTracker<C, M>) -> JoinHandle<()>
    where
        C: Counter + Send + Sync + 'static,
        M: Send + Sync + 'static,
    {
        let board = Arc::clone(self);
        let every = self.config.report_interval();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                board.publish(tracker.snapshot());
            }
        })
    }
}

/// The agent-check weight: absolute headroom against an idle backend's, 1..=100.
///
/// Absolute headroom, not headroom ÷ capacity: an empty backend at 78% CPU has
/// capacity = headroom = 0.1 session, which is no room at all, not 100%.
fn weight_percent(headroom: f64, full: f64) -> u32 {
    (100.0 * headroom / full).round().clamp(1.0, 100.0) as u32
}

impl fmt::Debug for LoadBoard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadBoard")
            .field("name", &self.name)
            .field("max_sessions", &self.max_sessions)
            .field("latest_sequence", &self.latest.load().sequence)
            .field("draining", &self.is_draining())
            .field("prequal", &self.prequal)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::utilisation_source::ManualUtilisation;

    fn config() -> CapacityConfig {
        let ten = Duration::from_secs(10);
        CapacityConfig::new(0.8, 2.0, ten, ten).unwrap()
    }

    #[test]
    fn weight_is_absolute_headroom_share_clamped() {
        assert_eq!(weight_percent(50.0, 100.0), 50);
        assert_eq!(weight_percent(0.0, 100.0), 1);
        assert_eq!(weight_percent(500.0, 100.0), 100);
        assert_eq!(weight_percent(0.4, 100.0), 1);
    }

    #[test]
    fn a_report_is_the_snapshot_with_the_models_verdict() {
        let tracker: SessionTracker = SessionTracker::default();
        let (source, cpu) = ManualUtilisation::new();
        let board = LoadBoard::builder("b", config())
            .utilisation(source)
            .build();
        assert_eq!(board.latest().sequence, 0);
        let sessions: Vec<_> = (0..80).map(|_| tracker.start()).collect();
        cpu.set(0.4);
        let snapshot = tracker.snapshot();
        let r = board.publish(snapshot);
        assert_eq!(
            (r.sequence, r.active, r.started, r.ended),
            (snapshot.sequence, 80, 80, 0)
        );
        assert!(r.utilisation_measured);
        assert_eq!((r.utilisation, r.raw_utilisation), (0.4, 0.4));
        assert_eq!(r.pretend_qps, 8.0);
        // The article's case: n = 80 at u = 0.4, t = 0.8, k = 2 → capacity 120.
        assert!(
            (r.effective_capacity - 120.0).abs() < 1e-9,
            "{}",
            r.effective_capacity
        );
        assert!((r.headroom - 40.0).abs() < 1e-9);
        assert_eq!(*board.latest(), *r);
        drop(sessions);
        let r = board.publish(tracker.snapshot());
        assert_eq!(
            (r.active, r.ended, r.ended_by_reason["dropped"]),
            (0, 80, 80)
        );
        // The snapshot's durations travel with it, each reason's counting its ends.
        assert_eq!(r.durations["dropped"].count(), 80);
        assert_eq!(r.durations.len(), r.ended_by_reason.len());
    }

    #[test]
    fn capacity_and_headroom_never_exceed_max_sessions() {
        let tracker: SessionTracker = SessionTracker::default();
        let (source, cpu) = ManualUtilisation::new();
        let board = LoadBoard::builder("b", config())
            .max_sessions(30)
            .utilisation(source)
            .build();
        let _open: Vec<_> = (0..20).map(|_| tracker.start()).collect();
        cpu.set(0.0016); // 20 sessions at 0.16 % CPU: the model alone says thousands
        let r = board.publish(tracker.snapshot());
        assert_eq!(r.effective_capacity, 30.0);
        assert_eq!(r.headroom, 10.0);
        assert_eq!(r.max_sessions, Some(30));
        // Full weight is an idle backend's headroom, itself capped at 30.
        assert_eq!(r.weight_percent, 33);
    }

    #[test]
    fn unmeasured_utilisation_is_flagged_not_silently_zero() {
        let tracker: SessionTracker = SessionTracker::default();
        let (source, _never_set) = ManualUtilisation::new();
        let board = LoadBoard::builder("b", config())
            .utilisation(source)
            .build();
        let r = board.publish(tracker.snapshot());
        assert!(!r.utilisation_measured);
        let r = LoadBoard::new("p", config()).publish(tracker.snapshot());
        assert_eq!(r.utilisation_measured, cfg!(unix));
    }

    #[test]
    fn draining_publishes_weight_zero_and_signals() {
        let tracker: SessionTracker = SessionTracker::default();
        let board = LoadBoard::new("b", config());
        let signal = board.draining_signal();
        assert!(!board.is_draining() && !*signal.borrow());
        tracker.note_refused();
        let r = {
            tracker.begin_drain();
            board.publish(tracker.snapshot())
        };
        assert!(r.draining && board.is_draining() && *signal.borrow());
        assert_eq!((r.weight_percent, r.refused), (0, 1));
        assert_eq!(r.agent_reply(), "drain\n");
    }

    /// Refusals at the tracker's cap and the ones the service noted are the report's count,
    /// each counted once.
    #[test]
    fn the_report_counts_the_trackers_refusals_once() {
        let tracker = SessionTracker::with_max_sessions(1);
        let board = LoadBoard::new("b", config());
        let _held = tracker.try_start().unwrap();
        assert!(tracker.try_start().is_err() && tracker.try_start().is_err());
        tracker.note_refused();
        assert_eq!(board.publish(tracker.snapshot()).refused, 3);
    }

    #[test]
    fn concurrent_publishers_never_leave_an_older_report_last() {
        let tracker: SessionTracker = SessionTracker::default();
        let board = Arc::new(LoadBoard::new("b", config()));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let r = board.publish(tracker.snapshot());
                        assert!(board.latest().sequence >= r.sequence);
                    }
                });
            }
        });
        assert_eq!(board.latest().sequence, tracker.snapshot().sequence - 1);
    }

    #[test]
    fn reports_carry_a_prequal_probe_at_their_active_count_only_if_configured() {
        let tracker: SessionTracker = SessionTracker::default();
        let plain = LoadBoard::new("b", config());
        assert_eq!(plain.latest().prequal, None);
        assert!(plain.prequal().is_none());
        assert_eq!(plain.publish(tracker.snapshot()).prequal, None);

        let estimator = Arc::new(PrequalEstimator::new());
        let board = LoadBoard::builder("b", config())
            .prequal(Arc::clone(&estimator))
            .build();
        assert!(Arc::ptr_eq(board.prequal().unwrap(), &estimator));
        let first = board
            .latest()
            .prequal
            .expect("configured: even the empty report");
        assert_eq!((first.rif, first.latency_ms), (0, None));
        estimator.record(3, Duration::from_millis(10));
        estimator.record(30, Duration::from_millis(900));
        let open: Vec<_> = (0..3).map(|_| tracker.start()).collect();
        let r = board.publish(tracker.snapshot());
        let probe = r.prequal.unwrap();
        assert_eq!((probe.rif, probe.latency_ms), (3, Some(10.0)));
        assert_eq!((probe.samples, probe.samples_used), (2, 1));
        assert_eq!(board.latest().prequal, Some(probe));
        drop(open);
        let probe = board.publish(tracker.snapshot()).prequal.unwrap();
        assert_eq!((probe.rif, probe.latency_ms), (0, None), "nothing near 0");
        assert!(format!("{board:?}").contains("PrequalEstimator"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_publisher_publishes_every_interval() {
        let tracker: SessionTracker = SessionTracker::default();
        let board = Arc::new(LoadBoard::new("b", config()));
        let task = board.spawn_publisher(tracker.clone());
        tokio::time::sleep(Duration::from_millis(1)).await;
        let first = board.latest().sequence;
        assert!(first > 0);
        let _s = tracker.start();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let r = board.latest();
        assert!(r.sequence > first && r.active == 1, "{r:?}");
        task.abort();
    }
}
