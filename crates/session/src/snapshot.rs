//! [`Snapshot`]: one coherent reading of a tracker.

use std::time::{Duration, Instant, SystemTime};

use crate::durations_by_reason::DurationsByReason;
use crate::phase::Phase;
use crate::reason::{ByReason, EndReason};
use crate::tally::Reading;

/// One coherent reading of a [`SessionTracker`](crate::SessionTracker): every field is from
/// the same read, and the fields agree with each other *by construction*:
///
/// * `active == started - ended` and `started >= ended`;
/// * `ended == ended_by_reason.total()`;
/// * `durations.counts() == ended_by_reason`: each reason's histogram counts its ends;
/// * `listening + generating == active`.
///
/// Under concurrent starts and ends, `active` has the gauge read guarantee of
/// [`livecount::Counter`]: never negative, never below the sessions open during the whole read,
/// never above those started before it returned. `generating` has it too (it is its own
/// counter), clamped to `active`; `listening` is the rest.
///
/// ```
/// use livecount_session::{EndReason, Phase, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let mut talking = tracker.start();
/// talking.set_phase(Phase::Generating);
/// let _silent = tracker.start();
/// tracker.start().end(EndReason::Cancelled);
///
/// let s = tracker.snapshot();
/// assert_eq!((s.started, s.ended, s.active), (3, 1, 2));
/// assert_eq!((s.listening, s.generating), (1, 1));
/// assert_eq!(s.ended_by(EndReason::Cancelled), 1);
/// assert!(tracker.snapshot().sequence > s.sequence);
/// ```
///
/// With the `serde` feature, `Serialize` and `Deserialize`. `taken_at` (an [`Instant`],
/// meaningful only inside this process) is not serialised; `taken_at_unix_ms` carries the
/// wall-clock time of the reading instead, so a consumer elsewhere can tell how stale it is.
/// A deserialised snapshot's `taken_at` is the instant it was deserialised.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot {
    /// Increases with every snapshot a tracker takes (starting at 1).
    pub sequence: u64,
    /// When it was taken (the instant given to
    /// [`snapshot_at`](crate::SessionTracker::snapshot_at), `Instant::now()` otherwise).
    #[cfg_attr(feature = "serde", serde(skip, default = "Instant::now"))]
    pub taken_at: Instant,
    /// Wall-clock time of the reading, in milliseconds since the Unix epoch (0 if the system
    /// clock is before it). The counts are always read now, so this is `SystemTime::now()`
    /// at the read even when `taken_at` is a virtual instant.
    pub taken_at_unix_ms: u64,
    /// Sessions started so far.
    pub started: u64,
    /// Sessions ended so far (the sum of `ended_by_reason`).
    pub ended: u64,
    /// Sessions open: `started - ended`.
    pub active: u64,
    /// Open sessions in [`Phase::Listening`].
    pub listening: u64,
    /// Open sessions in [`Phase::Generating`].
    pub generating: u64,
    /// Ended sessions, per reason.
    pub ended_by_reason: ByReason,
    /// How long the ended sessions lasted, per reason: each histogram counts exactly the
    /// sessions `ended_by_reason` counts for its reason (the counts are read once, as
    /// duration buckets). Its sum covers every session counted and may also cover sessions
    /// that ended while the snapshot was read (a few µs), never fewer. Missing from older
    /// serialised snapshots: then empty.
    #[cfg_attr(feature = "serde", serde(default))]
    pub durations: DurationsByReason,
    /// Sessions refused before they started: by a capped tracker at its cap
    /// ([`StartError::AtCapacity`](crate::StartError::AtCapacity)) and by the service
    /// ([`note_refused`](crate::SessionTracker::note_refused)). Not part of `started`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub refused: u64,
    /// Whether the tracker drains ([`begin_drain`](crate::SessionTracker::begin_drain)):
    /// it refuses every new session, and every load signal made from this reading says so.
    /// Missing from older serialised snapshots: then `false`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub draining: bool,
}

impl Snapshot {
    pub(crate) fn from_reading(sequence: u64, taken_at: Instant, reading: Reading) -> Self {
        let ended = reading.ended_by_reason.total();
        Snapshot {
            sequence,
            taken_at,
            taken_at_unix_ms: unix_ms(SystemTime::now()),
            started: reading.started,
            ended,
            active: reading.active,
            listening: reading.active - reading.generating,
            generating: reading.generating,
            ended_by_reason: reading.ended_by_reason,
            durations: reading.durations,
            refused: reading.refused,
            draining: reading.draining,
        }
    }

    /// Open sessions in `phase`.
    ///
    /// ```
    /// # use livecount_session::{Phase, SessionTracker};
    /// # let tracker = SessionTracker::new();
    /// let _session = tracker.start();
    /// assert_eq!(tracker.snapshot().in_phase(Phase::Listening), 1);
    /// ```
    pub fn in_phase(&self, phase: Phase) -> u64 {
        match phase {
            Phase::Listening => self.listening,
            Phase::Generating => self.generating,
        }
    }

    /// Sessions ended for `reason`.
    pub fn ended_by(&self, reason: EndReason) -> u64 {
        self.ended_by_reason.get(reason)
    }

    /// How old the snapshot is at `now` (zero if `now` is earlier).
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// # use std::time::Duration;
    /// # let tracker = SessionTracker::new();
    /// let s = tracker.snapshot();
    /// assert_eq!(s.age(s.taken_at + Duration::from_secs(30)), Duration::from_secs(30));
    /// ```
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.taken_at)
    }

    /// Whether the fields agree as documented; always `true` for a snapshot from a tracker
    /// (the tests assert it on every snapshot they take).
    ///
    /// ```
    /// # use livecount_session::SessionTracker;
    /// # let tracker = SessionTracker::new();
    /// assert!(tracker.snapshot().is_consistent());
    /// ```
    pub fn is_consistent(&self) -> bool {
        self.started >= self.ended
            && self.active == self.started - self.ended
            && self.ended == self.ended_by_reason.total()
            && self.durations.counts() == self.ended_by_reason
            && self.listening + self.generating == self.active
    }
}

/// Milliseconds from the Unix epoch to `time`, 0 before it, saturating far after.
fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
