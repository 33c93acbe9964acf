//! [`Session`]: the guard `start` returns; [`EndHandle`]: a cheap clone that can end it;
//! [`SessionInfo`]: what the registry knows about a session.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::task::{Context, Poll};
use std::time::Instant;

use livecount::{Counter, PerThread};

use crate::clock::CoarseClock;
use crate::drain_started::DrainStarted;
use crate::ended::Ended;
use crate::limits::{EndCause, Limits};
use crate::phase::Phase;
use crate::reason::EndReason;
use crate::session_id::SessionId;
use crate::slots::{Shared, Slot};

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
    held: Held<C, M>,
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
    held: Held<C, M>,
}

/// A reference to a session's slot (counted in the slot's state word), and the tracker state
/// the slot belongs to (alive while the slot has references: see `slots.rs`).
struct Held<C: Counter, M> {
    slot: NonNull<Slot<C, M>>,
    shared: NonNull<Shared<C, M>>,
    _owns: PhantomData<Shared<C, M>>,
}

// SAFETY:
// - A `Held` is a counted reference: the slot cannot be freed or reused, nor the tracker state
//   freed, until it is released, so the pointers stay valid wherever the holder goes.
// - Everything reached through them is safe to use from any thread: the state word and the
//   counters are atomics, the token cells follow the ending protocol (`lifecycle.rs`), and
//   the slot's data is written only while no reference exists. `M` is shared by reference
//   between threads (`metadata()`) and dropped on whichever thread frees the slot, hence
//   `M: Send + Sync`.
#[allow(unsafe_code)]
unsafe impl<C: Counter, M: Send + Sync> Send for Held<C, M> {}
// SAFETY: as for `Send`: every method takes `&self` and is safe to call concurrently.
#[allow(unsafe_code)]
unsafe impl<C: Counter, M: Send + Sync> Sync for Held<C, M> {}

impl<C: Counter, M> Held<C, M> {
    #[allow(unsafe_code)]
    fn slot(&self) -> &Slot<C, M> {
        // SAFETY: we hold a reference to the slot (see the `Send` impl).
        unsafe { self.slot.as_ref() }
    }

    #[allow(unsafe_code)]
    fn shared(&self) -> &Shared<C, M> {
        // SAFETY: the slot we hold keeps the tracker state alive.
        unsafe { self.shared.as_ref() }
    }

    fn id(&self) -> SessionId {
        SessionId(self.slot().id())
    }

    fn is_draining(&self) -> bool {
        self.shared().tally.is_draining()
    }

    fn tally(&self) -> &crate::tally::Tally<C> {
        &self.shared().tally
    }

    fn limits(&self) -> &crate::limits::SlotLimits {
        &self.slot().limits
    }

    /// Ends the session for `limit`, if no other limit claimed it and it had not ended.
    fn end_for(&self, limit: EndCause) -> bool {
        self.slot().claim_end(limit) && self.end(limit.reason())
    }

    /// The limit that ended the session: its claim, confirmed by the reason the session
    /// ended with (a claim whose end lost to another ending is no limit's ending).
    fn ended_by(&self) -> Option<EndCause> {
        let reason = self.slot().life.reason()?;
        self.limits()
            .cause()
            .filter(|limit| limit.reason() == reason)
    }

    fn end(&self, reason: EndReason) -> bool {
        let shared = self.shared();
        self.slot().end(reason, &shared.tally, &shared.clock, None)
    }

    fn end_at(&self, reason: EndReason, at: Instant) -> bool {
        let shared = self.shared();
        let at = shared.clock.nanos_of(at);
        self.slot()
            .end(reason, &shared.tally, &shared.clock, Some(at))
    }

    fn touch(&self) {
        self.slot().touch(self.shared().clock.now_nanos());
    }

    fn touch_at(&self, now: Instant) {
        self.slot().touch(self.shared().clock.nanos_of(now));
    }

    fn set_phase(&self, phase: Phase) -> bool {
        self.touch();
        let change = self.slot().life.change_phase(phase, &self.shared().tally);
        #[cfg(feature = "tracing")]
        if change == crate::lifecycle::PhaseChange::Changed {
            crate::trace::phase(self.slot().span(), phase);
        }
        change != crate::lifecycle::PhaseChange::Ended
    }

    fn note_interrupt(&self) {
        #[cfg(feature = "tracing")]
        crate::trace::interrupt(self.slot().span());
    }

    fn note_first_chunk(&self) {
        #[cfg(feature = "tracing")]
        {
            let shared = self.shared();
            let after = shared
                .clock
                .now_nanos()
                .saturating_sub(self.slot().started());
            crate::trace::first_chunk(self.slot().span(), std::time::Duration::from_nanos(after));
        }
    }

    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    fn trace_tag(&self, tag: &str) {
        #[cfg(feature = "tracing")]
        self.slot().span().record(crate::trace::attr::TAG, tag);
    }

    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    fn trace_transport(&self, transport: &str) {
        #[cfg(feature = "tracing")]
        self.slot()
            .span()
            .record(crate::trace::attr::TRANSPORT, transport);
    }

    /// Another reference to the same slot.
    fn add(&self) -> Self {
        self.slot().life.add_ref();
        Held { ..*self }
    }

    /// Gives the reference up; `state` is `Some` (the slot's final word) if it was the last.
    #[inline]
    #[allow(unsafe_code)]
    fn free_if_last(&self, state: Option<u64>) {
        if let Some(state) = state {
            // SAFETY: we dropped the slot's last reference and touch nothing afterwards.
            unsafe { Shared::free(self.shared, self.slot, state) };
        }
    }
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
    /// The guard of the session just started in `slot` (holding the reference `activate`
    /// counted for it).
    pub(crate) fn new(slot: NonNull<Slot<C, M>>, shared: NonNull<Shared<C, M>>) -> Self {
        Session {
            held: Held {
                slot,
                shared,
                _owns: PhantomData,
            },
        }
    }

    /// This session's id.
    pub fn id(&self) -> SessionId {
        self.held.id()
    }

    /// Whether its tracker drains ([`SessionTracker::begin_drain`](crate::SessionTracker::begin_drain)):
    /// this session goes on, but the drain's deadline will end it, so a handler that reads
    /// this wraps up (finishes its sentence, says goodbye). One read of a flag.
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// assert!(!session.is_draining());
    /// tracker.begin_drain();
    /// assert!(session.is_draining() && session.handle().is_draining());
    /// ```
    pub fn is_draining(&self) -> bool {
        self.held.is_draining()
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
            held: self.held.add(),
        }
    }

    /// Holds the session to `limits`: its tracker's one sweeper (spawned on the current
    /// tokio runtime with the first armed session, a task per tracker, not per session)
    /// ends it at a limit with [`EndCause::reason`], and [`EndHandle::ended_by`] tells which.
    /// The edge reports the session's traffic through its handle
    /// ([`EndHandle::note_frame`], [`note_heard`](EndHandle::note_heard),
    /// [`note_reading`](EndHandle::note_reading), [`note_read`](EndHandle::note_read),
    /// [`note_writing`](EndHandle::note_writing), [`note_written`](EndHandle::note_written)).
    /// Returns `false`, holding it to nothing, outside a tokio runtime, when `limits` has
    /// no limit, or when every handle of its tracker is gone; call it once, right after the
    /// start.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use livecount_session::{EndReason, EndCause, Limits, SessionTracker};
    ///
    /// let tracker = SessionTracker::new();
    /// let silent = tracker.start();
    /// let first_frame = Some(Duration::from_secs(10));
    /// assert!(silent.hold_to(Limits { first_frame, ..Limits::default() }));
    /// assert_eq!(silent.handle().ended().await, EndReason::Disconnected);
    /// assert_eq!(silent.handle().ended_by(), Some(EndCause::FirstFrame));
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub fn hold_to(&self, limits: Limits) -> bool
    where
        C: Send + Sync + 'static,
        M: Send + Sync + 'static,
    {
        if tokio::runtime::Handle::try_current().is_err() || !self.held.slot().arm_limits(&limits) {
            return false;
        }
        let sweeper = &self.held.shared().sweeper;
        sweeper.fit(&limits);
        if sweeper.is_running() {
            return true; // a read of a line every start shares, unmodified: no contention
        }
        // Rare (the first armed session, or after a runtime went away): a tracker handle
        // for the sweeper to hold, unless every handle is gone.
        match crate::SessionTracker::from_session_shared(self.held.shared) {
            Some(tracker) => crate::sweeper::ensure(&tracker),
            None => false,
        }
    }

    /// A frame passed (the tokio adaptors' items): see [`EndHandle::note_frame`].
    #[cfg(feature = "tokio")]
    pub(crate) fn note_frame(&self) {
        self.held.limits().frame();
    }

    /// The limit that ended the session, if one did: see [`EndHandle::ended_by`].
    #[cfg(feature = "tokio")]
    pub(crate) fn ended_by(&self) -> Option<EndCause> {
        self.held.ended_by()
    }

    /// Ends the session for `reason`: `true` if this call ended it, `false` if something
    /// already had (then nothing changes).
    pub fn end(&self, reason: EndReason) -> bool {
        self.held.end(reason)
    }

    /// [`end`](Session::end) as if the time were `at` (a virtual clock, in tests and
    /// simulations): the session's duration in [`Snapshot::durations`](crate::Snapshot::durations)
    /// runs to `at` (zero if `at` is before the start).
    ///
    /// ```
    /// use livecount_session::{EndReason, SessionTracker};
    /// use std::time::{Duration, Instant};
    ///
    /// let tracker = SessionTracker::new();
    /// let t0 = Instant::now();
    /// let session = tracker.try_start_at(t0).unwrap();
    /// assert!(session.end_at(EndReason::TimedOut, t0 + Duration::from_secs(90)));
    /// let timed_out = tracker.snapshot().durations.get(EndReason::TimedOut).sum();
    /// assert_eq!(timed_out, Duration::from_secs(90));
    /// ```
    pub fn end_at(&self, reason: EndReason, at: Instant) -> bool {
        self.held.end_at(reason, at)
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
        self.held.set_phase(phase)
    }

    /// The session's phase, or `None` once it has ended.
    pub fn phase(&self) -> Option<Phase> {
        self.held.slot().life.phase()
    }

    /// Reports an interrupt (a barge-in: the client cut a response short). With the
    /// `tracing` feature and a traced tracker, an event `livecount.session.interrupt` on the
    /// session's span; otherwise nothing.
    pub fn note_interrupt(&self) {
        self.held.note_interrupt();
    }

    /// Reports the first chunk of the session's first response sent: with the `tracing`
    /// feature and a traced tracker, an event `livecount.session.first_chunk` carrying the
    /// time since the start (time to first stream); otherwise nothing. Call it once.
    pub fn note_first_chunk(&self) {
        self.held.note_first_chunk();
    }

    /// Labels the session's span (`livecount.session.tag`: a tenant, a model, a route).
    /// Nothing without the `tracing` feature or on an untraced tracker.
    pub fn trace_tag(&self, tag: &str) {
        self.held.trace_tag(tag);
    }

    /// Records the session's transport on its span (`livecount.session.transport`:
    /// `websocket`, `grpc`, `http`); the layers that start sessions do. Nothing without the
    /// `tracing` feature or on an untraced tracker.
    pub fn trace_transport(&self, transport: &str) {
        self.held.trace_transport(transport);
    }

    /// The session's span: empty ([`Span::is_disabled`](tracing::Span::is_disabled)) unless
    /// its tracker [traces sessions](crate::SessionTracker::trace_sessions) and a subscriber
    /// wants it. Feature `tracing`; see [`trace`](crate::trace).
    #[cfg(feature = "tracing")]
    pub fn span(&self) -> &tracing::Span {
        self.held.slot().span()
    }

    /// Records activity now (at tick precision, a few ms), so the reaper leaves the session
    /// alone.
    pub fn touch(&self) {
        self.held.touch();
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
        self.held.touch_at(now);
    }

    /// Why the session ended, or `None` while it is live.
    pub fn reason(&self) -> Option<EndReason> {
        self.held.slot().life.reason()
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
        self.held.slot().life.poll_end_owner(cx)
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
        self.held.slot().metadata()
    }
}

impl<C: Counter, M> Drop for Session<C, M> {
    #[inline]
    fn drop(&mut self) {
        self.held.end(EndReason::Dropped);
        // Ended now, by us or before: when the guard holds the only reference this is a load
        // and a store, no read-modify-write (see `Lifecycle::release_ended`).
        self.held
            .free_if_last(self.held.slot().life.release_ended());
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
        self.held.id()
    }

    /// Whether its tracker drains; see [`Session::is_draining`]. A gRPC or HTTP handler
    /// under `livecount_tower::SessionLayer` finds the handle in its request's extensions.
    pub fn is_draining(&self) -> bool {
        self.held.is_draining()
    }

    /// Resolves when its tracker begins to drain, at once if it has: a handler selects on it
    /// to wrap up (finish its sentence, tell its client to reconnect elsewhere) before the
    /// drain's deadline ends the session.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use livecount_session::SessionTracker;
    ///
    /// let tracker = SessionTracker::new();
    /// let session = tracker.start();
    /// let wrap_up = session.handle().drain_started();
    /// tracker.begin_drain();
    /// wrap_up.await; // the drain began
    /// # }
    /// ```
    pub fn drain_started(&self) -> DrainStarted<C, M> {
        DrainStarted::new(self.clone())
    }

    pub(crate) fn tally(&self) -> &crate::tally::Tally<C> {
        self.held.tally()
    }

    /// A frame passed, either way: the idle limit starts over. A relaxed add on the
    /// session's own slot; nothing on a session not held to [`Limits`].
    #[inline]
    pub fn note_frame(&self) {
        self.held.limits().frame();
    }

    /// The client sent something (a request frame, or the end of its request): the
    /// first-frame limit no longer applies.
    #[inline]
    pub fn note_heard(&self) {
        self.held.limits().heard();
    }

    /// The service waits to read from the client: the [`read_idle`](Limits::read_idle)
    /// clock runs until [`note_read`](EndHandle::note_read). Only the task that reads calls
    /// it.
    #[inline]
    pub fn note_reading(&self) {
        self.held.limits().reading();
    }

    /// The read is over (something arrived, or the reader gave the wait up): the read-idle
    /// clock stops. What arrived is [`note_heard`](EndHandle::note_heard)'s to say.
    #[inline]
    pub fn note_read(&self) {
        self.held.limits().read();
    }

    /// A frame waits for the transport to take it: the [`write`](Limits::write) limit's
    /// clock runs until [`note_written`](EndHandle::note_written). Only the task that writes
    /// calls it.
    #[inline]
    pub fn note_writing(&self) {
        self.held.limits().writing();
    }

    /// The transport took the frame: the write limit's clock stops.
    #[inline]
    pub fn note_written(&self) {
        self.held.limits().written();
    }

    /// Ends the session for `limit` (a limit the edge found itself, such as a message above
    /// its size): `true` if this call ended it. The first limit to claim a session's end is
    /// the one [`ended_by`](EndHandle::ended_by) reports.
    pub fn end_for(&self, limit: EndCause) -> bool {
        self.held.end_for(limit)
    }

    /// The limit that ended the session, if one did (a sweeper's, or [`end_for`]'s).
    ///
    /// [`end_for`]: EndHandle::end_for
    pub fn ended_by(&self) -> Option<EndCause> {
        self.held.ended_by()
    }

    /// Ends the session for `reason`: `true` if this call ended it, `false` if something
    /// already had (then nothing changes).
    pub fn end(&self, reason: EndReason) -> bool {
        self.held.end(reason)
    }

    /// [`end`](EndHandle::end) as if the time were `at`; see [`Session::end_at`].
    pub fn end_at(&self, reason: EndReason, at: Instant) -> bool {
        self.held.end_at(reason, at)
    }

    /// Records activity now (a heartbeat, a frame received), so the reaper leaves it alone.
    pub fn touch(&self) {
        self.held.touch();
    }

    /// Records activity at `now`; see [`Session::touch_at`].
    pub fn touch_at(&self, now: Instant) {
        self.held.touch_at(now);
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
        self.held.set_phase(phase)
    }

    /// The session's phase, or `None` once it has ended.
    pub fn phase(&self) -> Option<Phase> {
        self.held.slot().life.phase()
    }

    /// Reports an interrupt (a barge-in: the client cut a response short). With the
    /// `tracing` feature and a traced tracker, an event `livecount.session.interrupt` on the
    /// session's span; otherwise nothing.
    pub fn note_interrupt(&self) {
        self.held.note_interrupt();
    }

    /// Reports the first chunk of the session's first response sent: with the `tracing`
    /// feature and a traced tracker, an event `livecount.session.first_chunk` carrying the
    /// time since the start (time to first stream); otherwise nothing. Call it once.
    pub fn note_first_chunk(&self) {
        self.held.note_first_chunk();
    }

    /// Labels the session's span (`livecount.session.tag`: a tenant, a model, a route).
    /// Nothing without the `tracing` feature or on an untraced tracker.
    pub fn trace_tag(&self, tag: &str) {
        self.held.trace_tag(tag);
    }

    /// Records the session's transport on its span (`livecount.session.transport`:
    /// `websocket`, `grpc`, `http`); the layers that start sessions do. Nothing without the
    /// `tracing` feature or on an untraced tracker.
    pub fn trace_transport(&self, transport: &str) {
        self.held.trace_transport(transport);
    }

    /// The session's span: empty ([`Span::is_disabled`](tracing::Span::is_disabled)) unless
    /// its tracker [traces sessions](crate::SessionTracker::trace_sessions) and a subscriber
    /// wants it. Feature `tracing`; see [`trace`](crate::trace).
    #[cfg(feature = "tracing")]
    pub fn span(&self) -> &tracing::Span {
        self.held.slot().span()
    }

    /// Whether the session has ended.
    pub fn is_ended(&self) -> bool {
        self.held.slot().life.phase().is_none()
    }

    /// Why the session ended, or `None` while it is live.
    pub fn reason(&self) -> Option<EndReason> {
        self.held.slot().life.reason()
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
        Ended::new(self.held.slot())
    }
}

impl<C: Counter, M> Clone for EndHandle<C, M> {
    fn clone(&self) -> Self {
        EndHandle {
            held: self.held.add(),
        }
    }
}

impl<C: Counter, M> Drop for EndHandle<C, M> {
    fn drop(&mut self) {
        self.held.free_if_last(self.held.slot().life.release());
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
    /// Reads a held `slot`; `None` if its session has ended.
    pub(crate) fn read<C: Counter>(slot: &Slot<C, M>, clock: &CoarseClock) -> Option<Self> {
        Some(SessionInfo {
            id: SessionId(slot.id()),
            started_at: clock.instant(slot.started()),
            last_activity: clock.instant(slot.last_activity()),
            phase: slot.life.phase()?,
            metadata: slot.metadata().cloned(),
        })
    }
}
