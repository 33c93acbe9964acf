//! [`SessionTracker`]: starts sessions, counts them, finds and reaps ghosts, takes snapshots.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering as StdOrdering;
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread};

use crate::cap::Cap;
use crate::reason::EndReason;
use crate::session::{Session, SessionInfo};
use crate::session_id::SessionId;
use crate::slots::{Shared, Slot};
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
    /// Counted in `Header::handles`; sessions keep the state alive on their own.
    shared: NonNull<Shared<C, M>>,
    _owns: PhantomData<Shared<C, M>>,
}

// SAFETY:
// - A handle is a counted reference to the tracker state (`Shared::add_handle` /
//   `drop_handle`), valid wherever it goes; everything reached through it is atomics, the
//   counters, and slots handled by the ending protocol. `M` crosses threads inside sessions
//   (see `Session`'s impls), hence `M: Send + Sync`.
#[allow(unsafe_code)]
unsafe impl<C: Counter, M: Send + Sync> Send for SessionTracker<C, M> {}
// SAFETY: as for `Send`: every method takes `&self` and is safe to call concurrently.
#[allow(unsafe_code)]
unsafe impl<C: Counter, M: Send + Sync> Sync for SessionTracker<C, M> {}

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

    /// A tracker that never has more than `max` live sessions: past it,
    /// [`try_start`](SessionTracker::try_start) refuses with [`StartError::AtCapacity`]
    /// (and counts the refusal in [`Snapshot::refused`]), so a service answers "try
    /// elsewhere" before it accepts the client. The cap is exact, under any number of
    /// threads starting at once: a start takes its place by one compare-and-swap on a count
    /// that the winning end gives back. That count is one cache line every start and end of
    /// this tracker writes, the price of exactness; an uncapped tracker has none.
    ///
    /// Over other counters: [`with_counters_and_max`](SessionTracker::with_counters_and_max).
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker, StartError};
    ///
    /// let tracker = SessionTracker::with_max_sessions(2);
    /// let (a, _b) = (tracker.try_start().unwrap(), tracker.try_start().unwrap());
    /// assert_eq!(tracker.try_start().unwrap_err(), StartError::AtCapacity { max: 2 });
    /// a.end(EndReason::Completed); // its end gives its place back
    /// let _c = tracker.try_start().expect("a's place");
    /// let s = tracker.snapshot();
    /// assert_eq!((s.active, s.refused, tracker.admitted()), (2, 1, Some(2)));
    /// ```
    pub fn with_max_sessions(max: u64) -> Self {
        SessionTracker::with_counters_and_max(PerThread::new(), PerThread::new(), max)
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
        SessionTracker {
            shared: Shared::new(Tally::new(total, generating, None)),
            _owns: PhantomData,
        }
    }

    /// [`with_counters`](SessionTracker::with_counters), capped at `max` live sessions as
    /// [`with_max_sessions`](SessionTracker::with_max_sessions) describes.
    ///
    /// ```
    /// use livecount::Sharded;
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker: SessionTracker<Sharded> =
    ///     SessionTracker::with_counters_and_max(Sharded::default(), Sharded::default(), 100);
    /// assert_eq!(tracker.max_sessions(), Some(100));
    /// ```
    pub fn with_counters_and_max(total: C, generating: C, max: u64) -> Self {
        SessionTracker {
            shared: Shared::new(Tally::new(total, generating, Some(Cap::new(max)))),
            _owns: PhantomData,
        }
    }

    /// The cap on live sessions, if the tracker has one.
    pub fn max_sessions(&self) -> Option<u64> {
        self.shared().tally.cap.as_ref().map(Cap::max)
    }

    /// A capped tracker's live sessions, exactly: the admissions taken and not yet given back
    /// by an end. Never above [`max_sessions`](SessionTracker::max_sessions). `None` for an
    /// uncapped tracker (use [`active`](SessionTracker::active)).
    ///
    /// [`active`](SessionTracker::active) and a snapshot's `active` keep the counter's read
    /// guarantee, which allows a reading to overestimate by the sessions that start and end
    /// while it reads: one of them may read the cap plus the starts that raced it, although
    /// no more than `max` sessions were ever live at once.
    pub fn admitted(&self) -> Option<u64> {
        self.shared().tally.cap.as_ref().map(Cap::admitted)
    }

    /// Counts a session the service refused before it started (while draining, say), so the
    /// refusals a tracker made at its cap and the service's own add up in
    /// [`Snapshot::refused`].
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// let tracker = SessionTracker::new();
    /// tracker.note_refused();
    /// assert_eq!((tracker.snapshot().refused, tracker.snapshot().started), (1, 0));
    /// ```
    pub fn note_refused(&self) {
        self.shared().tally.note_refused();
    }

    /// Starts the drain: from now on every start is refused with [`StartError::Draining`]
    /// (counted in [`Snapshot::refused`], never as a session), while the sessions already
    /// open go on until they end; `true` if this call started it (a second call changes
    /// nothing). A drain is not undone: a tracker that drains belongs to a process on its
    /// way out. At the drain's deadline, [`end_all`](SessionTracker::end_all) ends the
    /// sessions still open ([`EndReason::Shutdown`]).
    ///
    /// A start that races the call may still be admitted (it read the flag just before);
    /// a start that happens after it returns (through a socket, a channel, a lock) is
    /// refused. The flag has a cache line of its own that only this call writes, so the
    /// check costs every start one read of a line all threads share unmodified.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker, StartError};
    ///
    /// let tracker = SessionTracker::new();
    /// let open = tracker.start();
    /// assert!(tracker.begin_drain() && tracker.is_draining());
    /// assert_eq!(tracker.try_start().unwrap_err(), StartError::Draining);
    /// assert!(!tracker.begin_drain(), "already draining");
    /// assert!(open.end(EndReason::Completed), "open sessions go on and end their own way");
    /// let s = tracker.snapshot();
    /// assert_eq!((s.started, s.ended, s.refused), (1, 1, 1));
    /// ```
    pub fn begin_drain(&self) -> bool {
        let began = self.shared().tally.begin_drain();
        #[cfg(feature = "tracing")]
        if began && self.is_traced() {
            Shared::for_each(self.shared, |slot| crate::trace::drain(slot.span()));
        }
        began
    }

    /// Traces every session started from now on (feature `tracing`): a span
    /// [`livecount.session`](crate::trace::SPAN) in the caller's context, carrying its id and
    /// `backend` (the backend's name), with events at each phase change, interrupt, first
    /// chunk and drain, and the end's reason and duration recorded exactly once; a refused
    /// start leaves a zero-length span [`livecount.session.refused`](crate::trace::REFUSED_SPAN).
    /// See [`trace`](crate::trace). `false` if the tracker was already traced (the first
    /// name stays). Spans reach whatever `tracing` subscriber is installed; none costs a
    /// start one check of `tracing`'s cached interest.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::new();
    /// assert!(tracker.trace_sessions("backend-1"));
    /// assert!(!tracker.trace_sessions("another name"));
    /// assert!(tracker.is_traced());
    /// ```
    #[cfg(feature = "tracing")]
    pub fn trace_sessions(&self, backend: &str) -> bool {
        self.shared().traced.set(backend.into()).is_ok()
    }

    /// Whether [`trace_sessions`](SessionTracker::trace_sessions) was called.
    #[cfg(feature = "tracing")]
    pub fn is_traced(&self) -> bool {
        self.shared().traced.get().is_some()
    }

    /// Whether [`begin_drain`](SessionTracker::begin_drain) was called.
    pub fn is_draining(&self) -> bool {
        self.shared().tally.is_draining()
    }

    #[allow(unsafe_code)]
    fn shared(&self) -> &Shared<C, M> {
        // SAFETY: this handle keeps the tracker state alive.
        unsafe { self.shared.as_ref() }
    }

    /// Starts a session (in [`Phase::Listening`](crate::Phase::Listening)).
    ///
    /// # Panics
    ///
    /// Where [`try_start`](SessionTracker::try_start) fails: when the session table is full
    /// (over two billion live sessions); nothing is counted then.
    #[inline]
    pub fn start(&self) -> Session<C, M> {
        self.try_start_inner(None, None)
            .unwrap_or_else(|e| panic!("livecount-session: {e}"))
    }

    /// Starts a session, or says why it cannot: [`StartError::Full`] when the session table
    /// has no free slot left (over two billion live sessions). Nothing is counted on an
    /// error. There is no limit on threads.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.try_start().expect("far below two billion sessions");
    /// assert_eq!(tracker.active(), 1);
    /// # drop(session);
    /// ```
    pub fn try_start(&self) -> Result<Session<C, M>, StartError> {
        self.try_start_inner(None, None)
    }

    /// [`try_start`](SessionTracker::try_start) with `metadata`.
    pub fn try_start_with(&self, metadata: M) -> Result<Session<C, M>, StartError> {
        self.try_start_inner(Some(metadata), None)
    }

    /// [`try_start`](SessionTracker::try_start) as if the time were `at` (a virtual clock,
    /// in tests and simulations): the session's start and last activity are `at`, exactly,
    /// and its duration (in [`Snapshot::durations`]) runs from there.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    /// use std::time::{Duration, Instant};
    ///
    /// let tracker = SessionTracker::new();
    /// let t = Instant::now() + Duration::from_secs(100);
    /// let session = tracker.try_start_at(t).unwrap();
    /// assert_eq!(tracker.sessions()[0].started_at, t);
    /// session.end_at(EndReason::Completed, t + Duration::from_secs(2));
    /// let completed = tracker.snapshot().durations.get(EndReason::Completed).sum();
    /// assert_eq!(completed, Duration::from_secs(2));
    /// ```
    pub fn try_start_at(&self, at: Instant) -> Result<Session<C, M>, StartError> {
        let at = self.shared().clock.nanos_of(at);
        self.try_start_inner(None, Some(at))
    }

    #[inline]
    fn try_start_inner(
        &self,
        metadata: Option<M>,
        at: Option<u64>,
    ) -> Result<Session<C, M>, StartError> {
        Shared::start(self.shared, metadata, at).map(|slot| Session::new(slot, self.shared))
    }

    /// Runs `f` on the live session `id`'s slot, holding a reference to it meanwhile.
    #[allow(unsafe_code)]
    fn with_live<R>(&self, id: SessionId, f: impl FnOnce(&Slot<C, M>) -> R) -> Option<R> {
        let slot = self.shared().acquire(id.0)?;
        let result = f(slot);
        if let Some(state) = slot.life.release() {
            // SAFETY: we dropped the slot's last reference; this handle keeps the state alive.
            unsafe { Shared::free(self.shared, NonNull::from(slot), state) };
        }
        Some(result)
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
        self.try_start_inner(Some(metadata), None)
            .unwrap_or_else(|e| panic!("livecount-session: {e}"))
    }

    /// The number of live sessions: one read of the total counter, with its read guarantee.
    pub fn active(&self) -> u64 {
        self.shared().tally.total.load()
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
        let (tally, clock) = (&self.shared().tally, &self.shared().clock);
        self.with_live(id, |slot| slot.end(reason, tally, clock, None))
            .unwrap_or(false)
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
        let (tally, clock) = (&self.shared().tally, &self.shared().clock);
        Shared::for_each(self.shared, |slot| {
            ended += usize::from(slot.end(reason, tally, clock, None));
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
        let sequence = self.shared().sequence.fetch_add(1, StdOrdering::Relaxed);
        Snapshot::from_reading(sequence, taken_at, self.shared().tally.read())
    }
}

impl<C: Counter, M: Clone + Send + Sync + 'static> SessionTracker<C, M> {
    /// Every live session the registry walk finds (sessions starting during the walk may be
    /// missed). Never blocks `start` or `end`.
    pub fn sessions(&self) -> Vec<SessionInfo<M>> {
        let mut infos = Vec::new();
        let clock = &self.shared().clock;
        Shared::for_each(self.shared, |slot| {
            infos.extend(SessionInfo::read(slot, clock));
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

    /// [`reap`](SessionTracker::reap) as if the time were `now` (a virtual clock): a reaped
    /// session's duration runs to `now`.
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
        let (tally, clock) = (&self.shared().tally, &self.shared().clock);
        let at = clock.nanos_of(now);
        Shared::for_each(self.shared, |slot| {
            let last = clock.instant(slot.last_activity());
            if now.saturating_duration_since(last) <= idle_longer_than {
                return;
            }
            // Read before ending: afterwards the phase is gone.
            let info = SessionInfo::read(slot, clock);
            if slot.end(EndReason::Reaped, tally, clock, Some(at)) {
                reaped.extend(info);
            }
        });
        reaped
    }
}

// === the sweeper's side ===

impl<C: Counter, M> SessionTracker<C, M> {
    /// A handle on the tracker of `shared`, unless every handle is gone.
    #[cfg(feature = "tokio")]
    #[allow(unsafe_code)]
    pub(crate) fn from_session_shared(shared: NonNull<Shared<C, M>>) -> Option<Self> {
        // SAFETY: the caller holds a session of this tracker, which keeps its state alive.
        unsafe { shared.as_ref() }
            .try_add_handle()
            .then_some(SessionTracker {
                shared,
                _owns: PhantomData,
            })
    }

    /// The tracker state, whatever `M` is (this handle keeps it alive).
    #[allow(unsafe_code)]
    fn state(&self) -> &Shared<C, M> {
        // SAFETY: this handle keeps the tracker state alive.
        unsafe { self.shared.as_ref() }
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn sweeper(&self) -> &crate::sweeper::Sweeper {
        &self.state().sweeper
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn is_last_handle(&self) -> bool {
        self.state().is_last_handle()
    }

    /// One sweep at sweeper time `now`: ends every armed session past a limit (claiming
    /// the end for the limit first) and, with `reap` (the time, and the reaping limit), every
    /// session untouched for longer, [`Reaped`](EndReason::Reaped); returns how many armed
    /// sessions it found.
    #[cfg(feature = "tokio")]
    pub(crate) fn sweep(&self, now: u64, reap: Option<(Instant, Duration)>) -> usize {
        let (tally, clock) = (&self.state().tally, &self.state().clock);
        let reap = reap.map(|(at, idle)| (at, clock.nanos_of(at), idle));
        let mut armed = 0;
        Shared::for_each(self.shared, |slot| {
            if let Some((at, at_nanos, idle)) = reap {
                let last = clock.instant(slot.last_activity());
                if at.saturating_duration_since(last) > idle
                    && slot.end(EndReason::Reaped, tally, clock, Some(at_nanos))
                {
                    return;
                }
            }
            if !slot.limits.is_armed() {
                return;
            }
            armed += 1;
            if let Some(limit) = slot.limits.sweep(now)
                && slot.claim_end(limit)
            {
                slot.end(limit.reason(), tally, clock, None);
            }
        });
        armed
    }
}

impl<C: Counter, M> Clone for SessionTracker<C, M> {
    fn clone(&self) -> Self {
        // SAFETY: this handle keeps the tracker state alive.
        #[allow(unsafe_code)]
        unsafe { self.shared.as_ref() }.add_handle();
        SessionTracker {
            shared: self.shared,
            _owns: PhantomData,
        }
    }
}

impl<C: Counter, M> Drop for SessionTracker<C, M> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: this handle, given up; not used afterwards.
        unsafe { Shared::drop_handle(self.shared) };
    }
}

impl<C: Counter, M> fmt::Debug for SessionTracker<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: this handle keeps the tracker state alive.
        #[allow(unsafe_code)]
        let shared = unsafe { self.shared.as_ref() };
        f.debug_struct("SessionTracker")
            .field("active", &shared.tally.total.load())
            .finish_non_exhaustive()
    }
}
