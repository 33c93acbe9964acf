//! [`Limits`]: how long a session may last, stay silent or keep a frame waiting, held by its
//! tracker's one sweeper over the session table; [`EndCause`]: which limit (or which verdict
//! of the transport) ended it; and the per-slot record (`SlotLimits`) the edge bumps and the
//! sweeper reads.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
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
    /// The longest the service may wait to read with nothing arriving
    /// ([`EndHandle::note_reading`], [`EndHandle::note_read`]): [`EndCause::Idle`]. Unlike
    /// `idle`, time the service spends elsewhere (sending, thinking) is not the client's
    /// silence: a WebSocket's idle timeout.
    ///
    /// [`EndHandle::note_reading`]: crate::EndHandle::note_reading
    /// [`EndHandle::note_read`]: crate::EndHandle::note_read
    pub read_idle: Option<Duration>,
    /// The longest a frame may wait for the transport to take it
    /// ([`EndHandle::note_writing`], [`EndHandle::note_written`]): [`EndCause::Stall`].
    ///
    /// [`EndHandle::note_writing`]: crate::EndHandle::note_writing
    /// [`EndHandle::note_written`]: crate::EndHandle::note_written
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
            self.read_idle,
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
    /// [`Limits::idle`] or [`Limits::read_idle`] passed:
    /// [`Disconnected`](crate::EndReason::Disconnected).
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

/// A limit as its slot keeps it: whole milliseconds plus one (0: none; a limit rounds down
/// to the millisecond, far below the sweeper's 10 ms at the finest), [`NEVER`] for one of
/// 49 days or more. Four bytes, not eight: a larger slot moves the words a start and an
/// end touch across cache lines (eight-byte limits measured 3 % slower on the tracked
/// start+end pair, `benches/benches/session_layer.rs`).
fn encode(limit: Option<Duration>) -> u32 {
    limit.map_or(0, |d| {
        u32::try_from(d.as_millis())
            .ok()
            .and_then(|ms| ms.checked_add(1))
            .filter(|&encoded| encoded != NEVER)
            .unwrap_or(NEVER)
    })
}

/// The encoded limit that never passes.
const NEVER: u32 = u32::MAX;

/// The nanoseconds an encoded limit stands for, `None` if it never passes.
fn limit_nanos(encoded: u32) -> Option<u64> {
    match encoded {
        0 | NEVER => None,
        ms => Some(u64::from(ms - 1) * 1_000_000),
    }
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
    max_session: AtomicU32,
    deadline: AtomicU32,
    idle: AtomicU32,
    first_frame: AtomicU32,
    read_idle: AtomicU32,
    write: AtomicU32,
    /// Frames seen either way.
    activity: AtomicU64,
    /// `writes << 1 | holding`: a frame handed to the transport and not taken yet.
    response: AtomicU64,
    /// `reads << 1 | waiting`: the service waits to read and nothing has arrived.
    reading: AtomicU64,
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
    /// Sweeper-only: the reading word last seen, and since when a wait has been seen
    /// (0: none).
    seen_reading: AtomicU64,
    wait_at: AtomicU64,
}

impl SlotLimits {
    /// Arms the limits (the owner, holding a reference); `false` if none is set.
    pub(crate) fn arm(&self, limits: &Limits) -> bool {
        if limits.shortest().is_none() {
            return false;
        }
        // Relaxed: published by `armed`'s Release store below.
        self.max_session
            .store(encode(limits.max_session), Ordering::Relaxed);
        self.deadline
            .store(encode(limits.deadline), Ordering::Relaxed);
        self.idle.store(encode(limits.idle), Ordering::Relaxed);
        self.first_frame
            .store(encode(limits.first_frame), Ordering::Relaxed);
        self.read_idle
            .store(encode(limits.read_idle), Ordering::Relaxed);
        self.write.store(encode(limits.write), Ordering::Relaxed);
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

    /// A frame waits for the transport to take it: the write limit's clock runs (from the
    /// sweep that first sees the wait) until [`written`](SlotLimits::written).
    #[inline]
    pub(crate) fn writing(&self) {
        hold(&self.armed, &self.response);
    }

    /// The transport took the frame: the write limit's clock stops.
    #[inline]
    pub(crate) fn written(&self) {
        release(&self.armed, &self.response);
    }

    /// The service waits to read: the read-idle clock runs until [`read`](SlotLimits::read).
    #[inline]
    pub(crate) fn reading(&self) {
        hold(&self.armed, &self.reading);
    }

    /// The read is over: the read-idle clock stops.
    #[inline]
    pub(crate) fn read(&self) {
        release(&self.armed, &self.reading);
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
        let limits = [
            &self.max_session,
            &self.deadline,
            &self.idle,
            &self.first_frame,
            &self.read_idle,
            &self.write,
        ];
        for limit in limits {
            limit.store(0, Ordering::Relaxed);
        }
        let words = [
            &self.activity,
            &self.response,
            &self.reading,
            &self.seen_reading,
            &self.wait_at,
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
        let hold_at = held_since(&self.response, &self.seen_response, &self.hold_at, stamp);
        let wait_at = held_since(&self.reading, &self.seen_reading, &self.wait_at, stamp);
        let past = |since: u64, limit: &AtomicU32| {
            limit_nanos(limit.load(Ordering::Relaxed))
                .is_some_and(|limit| since != 0 && stamp.saturating_sub(since) >= limit)
        };
        let (max_session, deadline) = (
            self.max_session.load(Ordering::Relaxed),
            self.deadline.load(Ordering::Relaxed),
        );
        if past(seen_at, &self.deadline) && (max_session == 0 || deadline < max_session) {
            Some(EndCause::Deadline)
        } else if past(seen_at, &self.max_session) {
            Some(EndCause::MaxSession)
        } else if past(hold_at, &self.write) {
            Some(EndCause::Stall)
        } else if past(self.activity_at.load(Ordering::Relaxed), &self.idle)
            || past(wait_at, &self.read_idle)
        {
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

/// Marks a hold in `word` (`count << 1 | held`) as going on: its one writer at a time (the
/// task that polls the transport that way) sets the low bit. Only on an armed session.
#[inline]
fn hold(armed: &AtomicBool, word: &AtomicU64) {
    // Relaxed: a word the sweeper compares with its last reading; a late view only delays.
    if armed.load(Ordering::Relaxed) {
        let held = word.load(Ordering::Relaxed);
        if held & 1 == 0 {
            word.store(held | 1, Ordering::Relaxed);
        }
    }
}

/// Marks the hold in `word` as over: the count goes up, the bit clears, so the sweeper
/// sees a change even if a new hold began before it looked.
#[inline]
fn release(armed: &AtomicBool, word: &AtomicU64) {
    // Relaxed: as in `hold`.
    if armed.load(Ordering::Relaxed) {
        let count = word.load(Ordering::Relaxed) >> 1;
        word.store((count + 1) << 1, Ordering::Relaxed);
    }
}

/// Sweeper-only: since when (sweeper stamp) the hold in `word` has been seen unchanged, 0 if
/// none is held; `seen` and `since` remember the last reading.
fn held_since(word: &AtomicU64, seen: &AtomicU64, since: &AtomicU64, stamp: u64) -> u64 {
    // Relaxed: the sweeper is `seen`'s and `since`'s only writer; see `hold` for `word`.
    let now = word.load(Ordering::Relaxed);
    let held = now & 1 == 1;
    if now != seen.load(Ordering::Relaxed) || !held {
        seen.store(now, Ordering::Relaxed);
        since.store(if held { stamp } else { 0 }, Ordering::Relaxed);
    }
    since.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn armed(limits: Limits) -> SlotLimits {
        let slot = SlotLimits::default();
        assert!(slot.arm(&limits));
        slot
    }

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn an_unarmed_slot_passes_no_limit_and_notes_nothing() {
        let slot = SlotLimits::default();
        assert!(!slot.arm(&Limits::default()));
        slot.frame();
        slot.reading();
        slot.writing();
        assert_eq!(slot.sweep(0), None);
        assert_eq!(slot.sweep(u64::MAX / 2), None);
        assert_eq!(slot.activity.load(Ordering::Relaxed), 0);
        assert_eq!(slot.reading.load(Ordering::Relaxed), 0);
        assert_eq!(slot.response.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn first_frame_counts_from_the_first_sweep_and_a_heard_client_is_exempt() {
        let slot = armed(Limits {
            first_frame: secs(10),
            ..Limits::default()
        });
        assert_eq!(slot.sweep(5 * S), None); // first sighting
        assert_eq!(slot.sweep(15 * S - 1), None); // a nanosecond short
        assert_eq!(slot.sweep(15 * S), Some(EndCause::FirstFrame));
        let heard = armed(Limits {
            first_frame: secs(10),
            ..Limits::default()
        });
        assert_eq!(heard.sweep(0), None);
        heard.heard();
        assert_eq!(heard.sweep(60 * S), None);
    }

    #[test]
    fn idle_counts_from_the_sweep_that_saw_the_last_frame() {
        let slot = armed(Limits {
            idle: secs(10),
            ..Limits::default()
        });
        assert_eq!(slot.sweep(0), None);
        slot.frame();
        assert_eq!(slot.sweep(8 * S), None); // the frame seen at 8 s
        assert_eq!(slot.sweep(17 * S), None);
        assert_eq!(slot.sweep(18 * S), Some(EndCause::Idle));
    }

    #[test]
    fn read_idle_counts_only_a_wait_to_read() {
        let slot = armed(Limits {
            read_idle: secs(10),
            ..Limits::default()
        });
        // Never waiting to read (the service busy elsewhere): never idle.
        assert_eq!(slot.sweep(0), None);
        assert_eq!(slot.sweep(100 * S), None);
        // A wait seen at 100 s, unchanged: idle at 110 s.
        slot.reading();
        assert_eq!(slot.sweep(100 * S), None);
        assert_eq!(slot.sweep(109 * S), None);
        // A message, then a new wait before the next sweep: the clock starts over.
        slot.read();
        slot.reading();
        assert_eq!(slot.sweep(109 * S + 1), None);
        assert_eq!(slot.sweep(119 * S), None);
        assert_eq!(slot.sweep(119 * S + 1), Some(EndCause::Idle));
        // Frames either way do not count for it.
        let busy = armed(Limits {
            read_idle: secs(10),
            ..Limits::default()
        });
        busy.reading();
        assert_eq!(busy.sweep(0), None);
        busy.frame();
        assert_eq!(busy.sweep(10 * S), Some(EndCause::Idle));
    }

    #[test]
    fn a_write_held_for_the_limit_is_a_stall_and_a_written_frame_stops_the_clock() {
        let slot = armed(Limits {
            write: secs(5),
            ..Limits::default()
        });
        slot.writing();
        assert_eq!(slot.sweep(0), None);
        slot.written();
        assert_eq!(slot.sweep(5 * S), None, "the frame was taken");
        slot.writing();
        assert_eq!(slot.sweep(6 * S), None);
        slot.writing(); // still the same hold
        assert_eq!(slot.sweep(11 * S), Some(EndCause::Stall));
    }

    #[test]
    fn the_earlier_of_deadline_and_max_session_names_the_end() {
        let deadline_first = armed(Limits {
            max_session: secs(60),
            deadline: secs(5),
            ..Limits::default()
        });
        assert_eq!(deadline_first.sweep(0), None);
        assert_eq!(deadline_first.sweep(60 * S), Some(EndCause::Deadline));
        let max_first = armed(Limits {
            max_session: secs(5),
            deadline: secs(60),
            ..Limits::default()
        });
        assert_eq!(max_first.sweep(0), None);
        assert_eq!(max_first.sweep(60 * S), Some(EndCause::MaxSession));
    }

    #[test]
    fn reset_forgets_everything() {
        let slot = armed(Limits {
            read_idle: secs(1),
            write: secs(1),
            ..Limits::default()
        });
        slot.reading();
        slot.writing();
        slot.heard();
        assert!(slot.claim(EndCause::Idle));
        slot.reset();
        assert!(!slot.is_armed());
        assert_eq!(slot.cause(), None);
        assert_eq!(slot.sweep(10 * S), None);
        assert!(slot.claim(EndCause::Stall), "the claim is free again");
        slot.reset();
        let fresh = SlotLimits::default();
        for (a, b) in [
            (&slot.reading, &fresh.reading),
            (&slot.response, &fresh.response),
            (&slot.wait_at, &fresh.wait_at),
            (&slot.seen_reading, &fresh.seen_reading),
        ] {
            assert_eq!(a.load(Ordering::Relaxed), b.load(Ordering::Relaxed));
        }
        assert_eq!(slot.read_idle.load(Ordering::Relaxed), 0);
        assert!(!slot.heard.load(Ordering::Relaxed));
    }

    #[test]
    fn limits_keep_milliseconds_and_the_longest_never_pass() {
        assert_eq!(encode(None), 0);
        assert_eq!(limit_nanos(encode(Some(Duration::ZERO))), Some(0));
        assert_eq!(
            limit_nanos(encode(Some(Duration::from_micros(10_999)))),
            Some(10_000_000)
        );
        assert_eq!(
            limit_nanos(encode(Some(Duration::from_secs(3600)))),
            Some(3_600_000_000_000)
        );
        for never in [
            Duration::from_millis(u64::from(u32::MAX) - 1),
            Duration::MAX,
        ] {
            assert_eq!(encode(Some(never)), NEVER);
            assert_eq!(limit_nanos(encode(Some(never))), None);
        }
        let longest = Duration::from_millis(u64::from(u32::MAX) - 2);
        assert_eq!(
            limit_nanos(encode(Some(longest))),
            Some((u64::from(u32::MAX) - 2) * 1_000_000)
        );
        // A limit that never passes does not pass, however long the session.
        let slot = armed(Limits {
            max_session: Some(Duration::MAX),
            ..Limits::default()
        });
        assert_eq!(slot.sweep(0), None);
        assert_eq!(slot.sweep(u64::MAX / 2), None);
    }
}
