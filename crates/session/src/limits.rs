//! [`Limits`]: how long a session may last, stay silent or keep a frame waiting, held by its
//! tracker's one sweeper over the session table; [`EndCause`]: which limit (or which verdict
//! of the transport) ended it; and the per-slot record (`SlotLimits`) the edge bumps and the
//! sweeper reads.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

/// The limits a session is held to by its tracker's sweeper
/// ([`Session::hold_to`](crate::Session::hold_to)); `None` turns one off.
///
/// Every limit is measured from the moment the sweeper first sees the session (or the
/// activity in question), which is after it happened: a limit ends its session at the limit
/// or up to two sweeper periods later (a quarter of the shortest limit any session of the
/// tracker has, between 10 ms and 1 s), never earlier.
///
/// ```
/// use std::time::Duration;
/// use livecount_session::Limits;
///
/// let limits = Limits {
///     max_session: Some(Duration::from_secs(3600)),
///     first_frame: Some(Duration::from_secs(10)),
///     ..Limits::default()
/// };
/// assert_eq!(limits.shortest(), Some(Duration::from_secs(10)));
/// assert_eq!(Limits::default().shortest(), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// The longest the session lasts: [`EndCause::MaxSession`].
    pub max_session: Option<Duration>,
    /// A deadline the client set (a gRPC `grpc-timeout`), if earlier than `max_session`:
    /// [`EndCause::Deadline`].
    pub deadline: Option<Duration>,
    /// The longest no frame may pass either way ([`EndHandle::note_frame`]):
    /// [`EndCause::Idle`].
    ///
    /// [`EndHandle::note_frame`]: crate::EndHandle::note_frame
    pub idle: Option<Duration>,
    /// The longest the client may send nothing at all after the session opened
    /// ([`EndHandle::note_heard`]): [`EndCause::FirstFrame`].
    ///
    /// [`EndHandle::note_heard`]: crate::EndHandle::note_heard
    pub first_frame: Option<Duration>,
    /// The longest a frame may wait for the transport to take it
    /// ([`EndHandle::note_polled`], [`EndHandle::note_yielded`]): [`EndCause::Stall`].
    ///
    /// [`EndHandle::note_polled`]: crate::EndHandle::note_polled
    /// [`EndHandle::note_yielded`]: crate::EndHandle::note_yielded
    pub write: Option<Duration>,
}

impl Limits {
    /// The shortest limit set, if any.
    pub fn shortest(&self) -> Option<Duration> {
        [
            self.max_session,
            self.deadline,
            self.idle,
            self.first_frame,
            self.write,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// What ended a session at the edge, when it was not the session's own end: a limit its
/// sweeper found passed, or what the edge saw of the transport (a message above its size
/// limit, a reset, a lost connection), ended through
/// [`EndHandle::end_for`](crate::EndHandle::end_for). Read back with
/// [`EndHandle::ended_by`](crate::EndHandle::ended_by), so that the part of the edge that
/// answers the client (a response future, a body) answers for the right cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum EndCause {
    /// [`Limits::max_session`] passed: [`TimedOut`](crate::EndReason::TimedOut).
    MaxSession = 1,
    /// [`Limits::deadline`] passed: [`TimedOut`](crate::EndReason::TimedOut).
    Deadline = 2,
    /// [`Limits::idle`] passed: [`Disconnected`](crate::EndReason::Disconnected).
    Idle = 3,
    /// [`Limits::first_frame`] passed: [`Disconnected`](crate::EndReason::Disconnected).
    FirstFrame = 4,
    /// [`Limits::write`] passed: [`Disconnected`](crate::EndReason::Disconnected).
    Stall = 5,
    /// A message above the edge's size limit: [`Failed`](crate::EndReason::Failed).
    TooLarge = 6,
    /// The client reset its stream (HTTP/2 `RST_STREAM(CANCEL)`):
    /// [`Cancelled`](crate::EndReason::Cancelled).
    Reset = 7,
    /// The connection or the stream broke (an I/O error, a `GOAWAY`, another reset code):
    /// [`Disconnected`](crate::EndReason::Disconnected).
    Lost = 8,
}

impl EndCause {
    /// The reason a session ended by this limit has.
    pub fn reason(self) -> crate::EndReason {
        use crate::EndReason;
        match self {
            EndCause::MaxSession | EndCause::Deadline => EndReason::TimedOut,
            EndCause::Idle | EndCause::FirstFrame | EndCause::Stall | EndCause::Lost => {
                EndReason::Disconnected
            }
            EndCause::TooLarge => EndReason::Failed,
            EndCause::Reset => EndReason::Cancelled,
        }
    }

    pub(crate) fn from_u8(value: u8) -> Option<EndCause> {
        Some(match value {
            1 => EndCause::MaxSession,
            2 => EndCause::Deadline,
            3 => EndCause::Idle,
            4 => EndCause::FirstFrame,
            5 => EndCause::Stall,
            6 => EndCause::TooLarge,
            7 => EndCause::Reset,
            8 => EndCause::Lost,
            _ => return None,
        })
    }
}

/// A duration as nanoseconds, 0 for none (a zero limit is one nanosecond).
fn nanos(limit: Option<Duration>) -> u64 {
    limit.map_or(0, |d| {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
    })
}

/// One slot's limits, what the edge tells about the session's traffic, and what the sweeper
/// remembers of it. `std` atomics, all Relaxed but `armed`: none of it is part of the
/// ending protocol, which stays the lifecycle word's CAS (`cause` is claimed first, then
/// confirmed by the reason the end recorded).
///
/// Writers: the session's owner arms it (before `armed`'s Release store); the edge bumps
/// `activity`, `response` and `heard` (each word has one writer at a time, or is an add);
/// the sweeper alone writes the `seen_*` fields; the freer resets everything when the last
/// reference is gone (nobody else can read it then), if the slot says it was used.
#[derive(Debug, Default)]
pub(crate) struct SlotLimits {
    armed: AtomicBool,
    max_session: AtomicU64,
    deadline: AtomicU64,
    idle: AtomicU64,
    first_frame: AtomicU64,
    write: AtomicU64,
    /// Frames seen either way.
    activity: AtomicU64,
    /// `polls << 1 | holding`: a frame handed to the transport and not taken yet.
    response: AtomicU64,
    /// Whether the client has sent anything.
    heard: AtomicBool,
    /// The first limit to claim the session's end (a `EndCause` as `u8`, 0 for none).
    cause: AtomicU8,
    /// Sweeper-only: when it first saw the session (sweeper nanos + 1; 0: not yet).
    seen_at: AtomicU64,
    /// Sweeper-only: the activity count last seen, and when it was first seen.
    seen_activity: AtomicU64,
    activity_at: AtomicU64,
    /// Sweeper-only: the response word last seen, and since when a hold has been seen
    /// (0: none).
    seen_response: AtomicU64,
    hold_at: AtomicU64,
}

impl SlotLimits {
    /// Arms the limits (the owner, holding a reference); `false` if none is set.
    pub(crate) fn arm(&self, limits: &Limits) -> bool {
        if limits.shortest().is_none() {
            return false;
        }
        // Relaxed: published by `armed`'s Release store below.
        self.max_session
            .store(nanos(limits.max_session), Ordering::Relaxed);
        self.deadline
            .store(nanos(limits.deadline), Ordering::Relaxed);
        self.idle.store(nanos(limits.idle), Ordering::Relaxed);
        self.first_frame
            .store(nanos(limits.first_frame), Ordering::Relaxed);
        self.write.store(nanos(limits.write), Ordering::Relaxed);
        // Release: pairs with the sweeper's Acquire load in `sweep`.
        self.armed.store(true, Ordering::Release);
        true
    }

    /// A frame passed, either way.
    #[inline]
    pub(crate) fn frame(&self) {
        // Relaxed: a count the sweeper compares with its last reading. Only on an armed
        // session: an unarmed one has nothing to reset its counts when it is freed.
        if self.armed.load(Ordering::Relaxed) {
            self.activity.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The client sent something: the first-frame limit no longer applies.
    #[inline]
    pub(crate) fn heard(&self) {
        // Relaxed, load before store: set once, then only read; later frames do not write
        // the line again.
        if self.armed.load(Ordering::Relaxed) && !self.heard.load(Ordering::Relaxed) {
            self.heard.store(true, Ordering::Relaxed);
        }
    }

    /// The response is being polled: the transport took its last frame.
    #[inline]
    pub(crate) fn polled(&self) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        // Relaxed, load + store: the response body is this word's only writer.
        let polls = self.response.load(Ordering::Relaxed) >> 1;
        self.response.store((polls + 1) << 1, Ordering::Relaxed);
    }

    /// The response handed a frame to the transport.
    #[inline]
    pub(crate) fn yielded(&self) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        // Relaxed: as in `polled`.
        let word = self.response.load(Ordering::Relaxed);
        self.response.store(word | 1, Ordering::Relaxed);
        self.frame();
    }

    /// Claims the session's end for `limit`, if no other limit did: `true` if this claim
    /// is the first (the caller then ends the session with `limit.reason()`).
    pub(crate) fn claim(&self, limit: EndCause) -> bool {
        // Relaxed: the claim is published by the session's end (a Release CAS), which a
        // reader's `reason()` (Acquire) sees before it reads the cause.
        self.cause
            .compare_exchange(0, limit as u8, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The limit claimed, if any (confirm it with the reason the session ended with).
    pub(crate) fn cause(&self) -> Option<EndCause> {
        // Relaxed: see `claim`.
        EndCause::from_u8(self.cause.load(Ordering::Relaxed))
    }

    /// Forgets everything: the slot is being freed (no reference is left). The slot calls
    /// it only for a session that was armed or claimed (its `limits_dirty` flag, on the
    /// lifecycle's line: the common session costs its free nothing here).
    #[cold]
    pub(crate) fn reset(&self) {
        let words = [
            &self.max_session,
            &self.deadline,
            &self.idle,
            &self.first_frame,
            &self.write,
            &self.activity,
            &self.response,
            &self.seen_at,
            &self.seen_activity,
            &self.activity_at,
            &self.seen_response,
            &self.hold_at,
        ];
        for word in words {
            word.store(0, Ordering::Relaxed);
        }
        for flag in [&self.armed, &self.heard] {
            flag.store(false, Ordering::Relaxed);
        }
        self.cause.store(0, Ordering::Relaxed);
    }

    /// The limit passed at sweeper time `now` (nanoseconds since its start), if any;
    /// updates what the sweeper remembers. Called by the sweeper, holding a reference.
    pub(crate) fn sweep(&self, now: u64) -> Option<EndCause> {
        // Acquire: pairs with `arm`'s Release, so the limits read below are the armed ones.
        if !self.armed.load(Ordering::Acquire) {
            return None;
        }
        // Relaxed everywhere below: the sweeper is the only writer of `seen_*`, and the
        // edge's words are counts and flags whose late view only delays an end.
        let stamp = now + 1;
        let seen_at = match self.seen_at.load(Ordering::Relaxed) {
            0 => {
                self.seen_at.store(stamp, Ordering::Relaxed);
                self.activity_at.store(stamp, Ordering::Relaxed);
                stamp
            }
            at => at,
        };
        let activity = self.activity.load(Ordering::Relaxed);
        if activity != self.seen_activity.load(Ordering::Relaxed) {
            self.seen_activity.store(activity, Ordering::Relaxed);
            self.activity_at.store(stamp, Ordering::Relaxed);
        }
        let response = self.response.load(Ordering::Relaxed);
        let holding = response & 1 == 1;
        if response != self.seen_response.load(Ordering::Relaxed) || !holding {
            self.seen_response.store(response, Ordering::Relaxed);
            let since = if holding { stamp } else { 0 };
            self.hold_at.store(since, Ordering::Relaxed);
        }
        let past = |since: u64, limit: &AtomicU64| {
            let limit = limit.load(Ordering::Relaxed);
            since != 0 && limit != 0 && stamp.saturating_sub(since) >= limit
        };
        let (max_session, deadline) = (
            self.max_session.load(Ordering::Relaxed),
            self.deadline.load(Ordering::Relaxed),
        );
        if past(seen_at, &self.deadline) && (max_session == 0 || deadline < max_session) {
            Some(EndCause::Deadline)
        } else if past(seen_at, &self.max_session) {
            Some(EndCause::MaxSession)
        } else if past(self.hold_at.load(Ordering::Relaxed), &self.write) {
            Some(EndCause::Stall)
        } else if past(self.activity_at.load(Ordering::Relaxed), &self.idle) {
            Some(EndCause::Idle)
        } else if !self.heard.load(Ordering::Relaxed) && past(seen_at, &self.first_frame) {
            Some(EndCause::FirstFrame)
        } else {
            None
        }
    }

    /// Whether the session is armed.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }
}
