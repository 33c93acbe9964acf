//! [`Session`]: the guard `start` returns; [`EndHandle`]: a cheap clone that can end it;
//! [`SessionId`] and [`SessionInfo`]: what the registry knows about a session.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use livecount::{Counter, PerThread};

use crate::ended::Ended;
use crate::phase::Phase;
use crate::reason::EndReason;
use crate::registry::Core;

/// A session's registry key: unique among live sessions, generation-tagged so that an id kept
/// after its session ended never finds a newer session in the same slot.
///
/// ```
/// use livecount_session::SessionTracker;
///
/// let tracker = SessionTracker::new();
/// let a = tracker.start();
/// let b = tracker.start();
/// assert_ne!(a.id(), b.id());
/// println!("session {}", a.id()); // Display: the raw key
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub(crate) usize);

impl SessionId {
    /// The raw registry key.
    ///
    /// ```
    /// # let tracker = livecount_session::SessionTracker::new();
    /// let session = tracker.start();
    /// let raw: usize = session.id().as_usize();
    /// # let _ = raw;
    /// ```
    pub fn as_usize(self) -> usize {
        self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// One open session, counted from [`SessionTracker::start`](crate::SessionTracker::start)
/// until the first [`end`](Session::end) from it or any of its [`EndHandle`]s. Dropping the
/// guard ends the session with [`EndReason::Dropped`] if nothing ended it first.
///
/// `Send` (and `Sync`): it may move between threads and tokio worker threads freely.
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let session = tracker.start();
/// assert_eq!(tracker.active(), 1);
/// std::thread::spawn(move || {
///     // ... serve the stream on another thread ...
///     session.end(EndReason::Completed);
/// })
/// .join()
/// .unwrap();
/// assert_eq!(tracker.active(), 0);
/// ```
#[must_use = "dropping a Session ends it at once (reason `Dropped`)"]
pub struct Session<C: Counter = PerThread, M = ()> {
    core: Arc<Core<C, M>>,
}

/// A cheap, cloneable handle that can end a session from anywhere: the timeout task, the
/// cancel path, the disconnect detector, the server's shutdown. Holding one does not keep
/// the session open, and dropping one does nothing.
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let session = tracker.start();
/// let on_disconnect = session.handle();
/// let on_timeout = on_disconnect.clone();
/// assert!(on_disconnect.end(EndReason::Disconnected));
/// assert!(!on_timeout.end(EndReason::TimedOut));
/// assert_eq!(session.reason(), Some(EndReason::Disconnected));
/// ```
pub struct EndHandle<C: Counter = PerThread, M = ()> {
    core: Arc<Core<C, M>>,
}

/// What the registry knows about a session: returned by
/// [`SessionTracker::sessions`](crate::SessionTracker::sessions) and
/// [`SessionTracker::reap`](crate::SessionTracker::reap).
///
/// ```
/// use livecount_session::{Phase, SessionTracker};
///
/// let tracker = SessionTracker::<livecount::PerThread, &str>::default();
/// let session = tracker.start_with("tenant-a");
/// let infos = tracker.sessions();
/// assert_eq!(infos.len(), 1);
/// assert_eq!(infos[0].id, session.id());
/// assert_eq!(infos[0].metadata, Some("tenant-a"));
/// assert_eq!(infos[0].phase, Phase::Listening);
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo<M = ()> {
    /// The session's id.
    pub id: SessionId,
    /// When it started, at the tracker clock's tick precision: never later than the true
    /// start, at most a couple of scheduler ticks (a few ms) earlier (see the crate docs).
    pub started_at: Instant,
    /// Its last recorded activity: the start, a `touch`, or a phase change (the same
    /// precision; `touch_at` records exactly the instant given).
    pub last_activity: Instant,
    /// Its phase when read (for a reaped session: just before it was ended).
    pub phase: Phase,
    /// What the caller attached with `start_with`.
    pub metadata: Option<M>,
}

// === impl Session ===

impl<C: Counter, M> Session<C, M> {
    pub(crate) fn new(core: Arc<Core<C, M>>) -> Self {
        Session { core }
    }

    /// This session's id.
    pub fn id(&self) -> SessionId {
        SessionId(self.core.key)
    }

    /// A handle that can end this session from elsewhere.
    ///
    /// ```
    /// # let tracker = livecount_session::SessionTracker::new();
    /// let session = tracker.start();
    /// let handle = session.handle();
    /// assert_eq!(handle.id(), session.id());
    /// ```
    pub fn handle(&self) -> EndHandle<C, M> {
        EndHandle {
            core: Arc::clone(&self.core),
        }
    }

    /// Ends the session for `reason`: `true` if this call ended it, `false` if something
    /// already had (then nothing changes).
    pub fn end(&self, reason: EndReason) -> bool {
        self.core.end(reason)
    }

    /// Moves the session to `phase` (and records activity). `false` if it has ended.
    ///
    /// ```
    /// use livecount_session::{EndReason, Phase, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let mut session = tracker.start();
    /// assert!(session.set_phase(Phase::Generating));
    /// assert_eq!(tracker.snapshot().generating, 1);
    /// session.end(EndReason::Completed);
    /// assert!(!session.set_phase(Phase::Listening));
    /// assert_eq!(tracker.snapshot().generating, 0);
    /// ```
    pub fn set_phase(&mut self, phase: Phase) -> bool {
        // `&mut self` keeps the owner's own transitions sequential; a handle's may still race
        // it, and the protocol linearises them (see `EndHandle::set_phase`).
        self.core.touch_at(self.core.tracker.clock.now());
        self.core.life.set_phase(phase, &self.core.tracker.tally)
    }

    /// The session's phase, or `None` once it has ended.
    pub fn phase(&self) -> Option<Phase> {
        self.core.life.phase()
    }

    /// Records activity now (at tick precision, a few ms), so the reaper leaves the session
    /// alone.
    pub fn touch(&self) {
        self.core.touch_at(self.core.tracker.clock.now());
    }

    /// Records activity at `now` (a frame's timestamp, a virtual clock). Activity never moves
    /// backwards: an earlier `now` than the last recorded one changes nothing.
    ///
    /// ```
    /// use livecount_session::SessionTracker;
    /// use std::time::{Duration, Instant};
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let t = Instant::now() + Duration::from_secs(100);
    /// session.touch_at(t);
    /// assert!(tracker.reap_at(t + Duration::from_secs(59), Duration::from_secs(60)).is_empty());
    /// assert_eq!(tracker.reap_at(t + Duration::from_secs(61), Duration::from_secs(60)).len(), 1);
    /// ```
    pub fn touch_at(&self, now: Instant) {
        self.core.touch_at(now);
    }

    /// Why the session ended, or `None` while it is live.
    pub fn reason(&self) -> Option<EndReason> {
        self.core.life.reason()
    }

    /// Polls for the end, from any ender (a handle, `tracker.end`, the reaper, a shutdown):
    /// `Ready(reason)` once the session has ended, else `Pending`, with `cx`'s waker
    /// registered to be woken by the end. This is what [`Tracked`](crate::Tracked) and
    /// [`TrackedStream`](crate::TrackedStream) call at every `Pending`, for a hand-written
    /// future or stream that owns its session to do the same.
    ///
    /// The guard has **one** waker slot: the last task to poll is the one woken, so poll from
    /// the task that owns the guard. Any number of tasks can wait through
    /// [`EndHandle::ended`] instead.
    ///
    /// Cost: one atomic load once ended; otherwise a waker registration and one `fetch_or`
    /// on the session's state word. An end wakes the slot only if it was registered.
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert_eq!(session.poll_ended(&mut cx), Poll::Pending);
    /// tracker.end(session.id(), EndReason::Shutdown); // wakes the registered waker
    /// assert_eq!(session.poll_ended(&mut cx), Poll::Ready(EndReason::Shutdown));
    /// ```
    pub fn poll_ended(&self, cx: &mut Context<'_>) -> Poll<EndReason> {
        self.core.life.poll_end_owner(cx)
    }

    /// The metadata given to `start_with`, if any.
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// let tracker = SessionTracker::<livecount::Sharded, u32>::default();
    /// assert_eq!(tracker.start_with(7).metadata(), Some(&7));
    /// assert_eq!(tracker.start().metadata(), None);
    /// ```
    pub fn metadata(&self) -> Option<&M> {
        self.core.metadata.as_ref()
    }
}

impl<C: Counter, M> Drop for Session<C, M> {
    fn drop(&mut self) {
        self.core.end(EndReason::Dropped);
    }
}

impl<C: Counter, M> fmt::Debug for Session<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id())
            .field("phase", &self.phase())
            .field("reason", &self.reason())
            .finish()
    }
}

// === impl EndHandle ===

impl<C: Counter, M> EndHandle<C, M> {
    /// The id of the session this handle ends.
    pub fn id(&self) -> SessionId {
        SessionId(self.core.key)
    }

    /// Ends the session for `reason`: `true` if this call ended it, `false` if something
    /// already had (then nothing changes).
    pub fn end(&self, reason: EndReason) -> bool {
        self.core.end(reason)
    }

    /// Records activity now (a heartbeat, a frame received), so the reaper leaves it alone.
    pub fn touch(&self) {
        self.core.touch_at(self.core.tracker.clock.now());
    }

    /// Records activity at `now`; see [`Session::touch_at`].
    pub fn touch_at(&self, now: Instant) {
        self.core.touch_at(now);
    }

    /// Moves the session to `phase` (and records activity), from a task other than the
    /// guard's owner: a generator task marking the session
    /// [`Generating`](Phase::Generating) while the reader task holds the guard. `false` if
    /// the session has ended.
    ///
    /// The same exactly-once protocol as [`Session::set_phase`]: the `generating` count
    /// changes once per real transition, and an end racing the change leaves it exact.
    /// Transitions racing each other (the owner and a handle, or two handles) are
    /// linearised: one that finds another in flight returns `true` without changing anything,
    /// as if it had run just before the other, whose phase is the one that stays.
    ///
    /// ```
    /// use livecount_session::{EndReason, Phase, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let generator = session.handle();
    /// std::thread::spawn(move || assert!(generator.set_phase(Phase::Generating)))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(session.phase(), Some(Phase::Generating));
    /// assert_eq!(tracker.snapshot().generating, 1);
    /// session.end(EndReason::Completed);
    /// assert!(!session.handle().set_phase(Phase::Listening));
    /// assert_eq!(tracker.snapshot().generating, 0);
    /// ```
    pub fn set_phase(&self, phase: Phase) -> bool {
        self.core.touch_at(self.core.tracker.clock.now());
        self.core.life.set_phase(phase, &self.core.tracker.tally)
    }

    /// The session's phase, or `None` once it has ended.
    pub fn phase(&self) -> Option<Phase> {
        self.core.life.phase()
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.core.life.phase().is_none()
    }

    /// Why the session ended, or `None` while it is live.
    pub fn reason(&self) -> Option<EndReason> {
        self.core.life.reason()
    }

    /// Waits for the end, from any ender, and returns its reason (at once if it has ended
    /// already). Any number of tasks may wait, each on its own handle clone or on one shared
    /// handle: the end wakes them all.
    ///
    /// Costs nothing until polled: a session nobody waits on allocates nothing, and its end
    /// takes no lock. A pending `Ended` holds a place in the session's waiter list (one
    /// `Waker`); the end takes the list's lock once to wake the waiters.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::{EndReason, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let handle = session.handle();
    /// let waiter = tokio::spawn(async move { handle.ended().await });
    /// tokio::task::yield_now().await; // let it wait
    /// session.end(EndReason::Disconnected);
    /// assert_eq!(waiter.await.unwrap(), EndReason::Disconnected);
    /// # }
    /// ```
    pub fn ended(&self) -> Ended<'_, C, M> {
        Ended::new(&self.core)
    }
}

impl<C: Counter, M> Clone for EndHandle<C, M> {
    fn clone(&self) -> Self {
        EndHandle {
            core: Arc::clone(&self.core),
        }
    }
}

impl<C: Counter, M> fmt::Debug for EndHandle<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndHandle")
            .field("id", &self.id())
            .field("reason", &self.reason())
            .finish()
    }
}

// === impl SessionInfo ===

impl<M: Clone> SessionInfo<M> {
    /// Reads `core`; `None` if it has ended.
    pub(crate) fn read<C: Counter>(core: &Core<C, M>) -> Option<Self> {
        Some(SessionInfo {
            id: SessionId(core.key),
            started_at: core.started_at,
            last_activity: core.last_activity(),
            phase: core.life.phase()?,
            metadata: core.metadata.clone(),
        })
    }
}
