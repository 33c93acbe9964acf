//! [`SessionTracker`]: starts sessions, counts them, finds and reaps ghosts, takes snapshots.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread};

use crate::clock::CoarseClock;
use crate::reason::EndReason;
use crate::registry::{Registry, Shared};
use crate::session::{Session, SessionId, SessionInfo};
use crate::snapshot::Snapshot;
use crate::start_error::StartError;
use crate::tally::Tally;

/// Counts live sessions over any `livecount` counter `C`, keeps a registry of them, and hands
/// out [`Session`] guards whose ending is exactly once.
///
/// A cheap handle: clones share one tracker. `M` is optional caller metadata stored with each
/// session (a tenant, a model name, a peer address) and returned by the registry walks.
///
/// The default counter is [`PerThread`]: a session start and end each update the counter
/// with a plain store on a line only the calling thread writes, which is the cheapest update
/// `livecount` has, and a tracker is read only once per reporting interval, where
/// `PerThread`'s longer read (every thread's cell) does not matter.
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let session = tracker.start();
/// assert_eq!(tracker.active(), 1);
/// assert!(session.end(EndReason::Completed));
/// assert_eq!(tracker.active(), 0);
/// ```
///
/// Across threads, any counter:
///
/// ```
/// use livecount::Striped;
/// use livecount_session::SessionTracker;
///
/// let tracker = SessionTracker::<Striped>::default();
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let tracker = tracker.clone();
///         std::thread::spawn(move || {
///             for _ in 0..100 {
///                 let _session = tracker.start(); // ends (Dropped) at the end of the scope
///             }
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// let s = tracker.snapshot();
/// assert_eq!((s.started, s.ended, s.active), (400, 400, 0));
/// ```
pub struct SessionTracker<C: Counter = PerThread, M = ()> {
    shared: Arc<Shared<C, M>>,
}

impl SessionTracker {
    /// A tracker with no sessions over the default counter ([`PerThread`]) and no metadata,
    /// so a plain `SessionTracker::new()` needs no annotation.
    ///
    /// Another counter or metadata type: [`SessionTracker::default`] with the types named
    /// (`SessionTracker::<Sharded>::default()`, `SessionTracker::<PerThread, String>::default()`),
    /// or [`with_counters`](SessionTracker::with_counters) for counters built by hand.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::new();
    /// let _session = tracker.start();
    /// assert_eq!(tracker.active(), 1);
    ///
    /// let sharded = SessionTracker::<livecount::Sharded>::default();
    /// let tagged = SessionTracker::<livecount::PerThread, &str>::default();
    /// # let _ = (sharded.start(), tagged.start_with("tenant"));
    /// ```
    pub fn new() -> Self {
        SessionTracker::default()
    }
}

impl<C: Counter + Default, M: Send + Sync + 'static> Default for SessionTracker<C, M> {
    /// A tracker with no sessions, over default-constructed counters.
    fn default() -> Self {
        SessionTracker::with_counters(C::default(), C::default())
    }
}

impl<C: Counter, M: Send + Sync + 'static> SessionTracker<C, M> {
    /// A tracker over the given counters: `total` counts live sessions, `generating` those in
    /// [`Phase::Generating`](crate::Phase::Generating). Both must be fresh (unused).
    ///
    /// ```
    /// use livecount::Sharded;
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker: SessionTracker<Sharded> =
    ///     SessionTracker::with_counters(Sharded::with_shards(16), Sharded::with_shards(16));
    /// assert_eq!(tracker.active(), 0);
    /// ```
    pub fn with_counters(total: C, generating: C) -> Self {
        let shared = Arc::new(Shared {
            tally: Tally::new(total, generating),
            registry: Registry::new(),
            sequence: StdAtomicU64::new(1),
            clock: CoarseClock::new(),
        });
        SessionTracker { shared }
    }

    /// Starts a session (in [`Phase::Listening`](crate::Phase::Listening)).
    ///
    /// # Panics
    ///
    /// Where [`try_start`](SessionTracker::try_start) fails: on a thread past the registry's
    /// limit of [`StartError::MAX_THREADS`] (4096) threads alive at once that use it; nothing
    /// is counted then.
    pub fn start(&self) -> Session<C, M> {
        self.try_start_inner(None)
            .unwrap_or_else(|e| panic!("livecount-session: {e}"))
    }

    /// Starts a session, or says why it cannot: [`StartError::ThreadLimit`] on a thread past
    /// the registry's limit of [`StartError::MAX_THREADS`] threads alive at once (the limit of
    /// `sharded-slab`, which the registry is). Nothing is counted on an error.
    ///
    /// `sharded-slab` reports that limit by panicking; `try_start` catches the panic (after
    /// the panic hook has printed it) and returns the error, so a build with
    /// `panic = "abort"` aborts there instead.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.try_start().expect("far below 4096 threads");
    /// assert_eq!(tracker.active(), 1);
    /// # drop(session);
    /// ```
    pub fn try_start(&self) -> Result<Session<C, M>, StartError> {
        self.try_start_inner(None)
    }

    /// [`try_start`](SessionTracker::try_start) with `metadata`.
    pub fn try_start_with(&self, metadata: M) -> Result<Session<C, M>, StartError> {
        self.try_start_inner(Some(metadata))
    }

    fn try_start_inner(&self, metadata: Option<M>) -> Result<Session<C, M>, StartError> {
        Registry::start(&self.shared, metadata, self.shared.clock.now()).map(Session::new)
    }

    /// Starts a session carrying `metadata`.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::<livecount::PerThread, String>::default();
    /// let session = tracker.start_with("voice/tenant-42".to_owned());
    /// assert_eq!(session.metadata().map(String::as_str), Some("voice/tenant-42"));
    /// ```
    ///
    /// # Panics
    ///
    /// As [`start`](SessionTracker::start) does.
    pub fn start_with(&self, metadata: M) -> Session<C, M> {
        self.try_start_inner(Some(metadata))
            .unwrap_or_else(|e| panic!("livecount-session: {e}"))
    }

    /// The number of live sessions: one read of the total counter, with its read guarantee.
    pub fn active(&self) -> u64 {
        self.shared.tally.total.load()
    }

    /// Ends the live session `id` for `reason` (an admin kill, a shutdown by id). `false` if
    /// it is not live or something else ended it first.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// assert!(tracker.end(session.id(), EndReason::Shutdown));
    /// assert_eq!(session.reason(), Some(EndReason::Shutdown));
    /// assert!(!tracker.end(session.id(), EndReason::Shutdown));
    /// ```
    pub fn end(&self, id: SessionId, reason: EndReason) -> bool {
        self.shared
            .registry
            .get(id.0)
            .is_some_and(|core| core.end(reason))
    }

    /// Ends every live session for `reason` (e.g. [`EndReason::Shutdown`]); returns how many
    /// this call ended.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let sessions = [tracker.start(), tracker.start()];
    /// assert_eq!(tracker.end_all(EndReason::Shutdown), 2);
    /// assert_eq!(tracker.active(), 0);
    /// # drop(sessions);
    /// ```
    pub fn end_all(&self, reason: EndReason) -> usize {
        let mut ended = 0;
        self.shared.registry.for_each(|core| {
            ended += usize::from(core.end(reason));
        });
        ended
    }

    /// Takes a coherent [`Snapshot`] now.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_at(Instant::now())
    }

    /// Takes a coherent [`Snapshot`] stamped `taken_at` (a virtual clock, in tests and
    /// simulations). The counts are read now either way.
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// # use std::time::{Duration, Instant};
    /// # let tracker = SessionTracker::new();
    /// let t = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(tracker.snapshot_at(t).taken_at, t);
    /// ```
    pub fn snapshot_at(&self, taken_at: Instant) -> Snapshot {
        // Relaxed: the sequence only orders snapshots of this tracker among themselves.
        let sequence = self.shared.sequence.fetch_add(1, StdOrdering::Relaxed);
        Snapshot::from_reading(sequence, taken_at, self.shared.tally.read())
    }
}

impl<C: Counter, M: Clone + Send + Sync + 'static> SessionTracker<C, M> {
    /// Every live session the registry walk finds (sessions starting during the walk may be
    /// missed). Never blocks `start` or `end`.
    pub fn sessions(&self) -> Vec<SessionInfo<M>> {
        let mut infos = Vec::new();
        self.shared.registry.for_each(|core| {
            infos.extend(SessionInfo::read(core));
        });
        infos
    }

    /// Force-ends, with [`EndReason::Reaped`], every live session whose last activity is
    /// older than `idle_longer_than`, through the same exactly-once path as any other end;
    /// returns what it ended (a session that something else ended first is not included).
    ///
    /// Finds leaked guards (`std::mem::forget`) and peers that vanished without a FIN.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    /// use std::time::Duration;
    ///
    /// let tracker = SessionTracker::new();
    /// std::mem::forget(tracker.start()); // a ghost: its guard will never drop
    /// assert_eq!(tracker.active(), 1);
    /// let reaped = tracker.reap(Duration::ZERO);
    /// assert_eq!(reaped.len(), 1);
    /// assert_eq!(tracker.active(), 0);
    /// assert_eq!(tracker.snapshot().ended_by(EndReason::Reaped), 1);
    /// ```
    pub fn reap(&self, idle_longer_than: Duration) -> Vec<SessionInfo<M>> {
        self.reap_at(Instant::now(), idle_longer_than)
    }

    /// [`reap`](SessionTracker::reap) as if the time were `now` (a virtual clock).
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// # use std::time::{Duration, Instant};
    /// # let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let limit = Duration::from_secs(60);
    /// assert!(tracker.reap_at(Instant::now(), limit).is_empty()); // active recently
    /// let later = Instant::now() + Duration::from_secs(61);
    /// assert_eq!(tracker.reap_at(later, limit)[0].id, session.id());
    /// ```
    pub fn reap_at(&self, now: Instant, idle_longer_than: Duration) -> Vec<SessionInfo<M>> {
        let mut reaped = Vec::new();
        self.shared.registry.for_each(|core| {
            if now.saturating_duration_since(core.last_activity()) <= idle_longer_than {
                return;
            }
            // Read before ending: afterwards the phase is gone.
            let info = SessionInfo::read(core);
            if core.end(EndReason::Reaped) {
                reaped.extend(info);
            }
        });
        reaped
    }
}

impl<C: Counter, M> Clone for SessionTracker<C, M> {
    fn clone(&self) -> Self {
        SessionTracker {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: Counter, M> fmt::Debug for SessionTracker<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionTracker")
            .field("active", &self.shared.tally.total.load())
            .finish_non_exhaustive()
    }
}
