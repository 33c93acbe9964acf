//! [`EndReason`]: why a session ended, and [`ByReason`]: a count per reason.

use std::fmt;

/// Why a session ended. Exactly one reason is recorded per session: the first `end` wins.
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// let session = tracker.start();
/// let timeout = session.handle();
/// assert!(timeout.end(EndReason::TimedOut)); // first: wins
/// assert!(!session.end(EndReason::Completed)); // too late: changes nothing
/// assert_eq!(timeout.reason(), Some(EndReason::TimedOut));
/// assert_eq!(tracker.snapshot().ended_by(EndReason::TimedOut), 1);
/// ```
///
/// With the `serde` feature, `Serialize` / `Deserialize` as its [`as_str`](EndReason::as_str)
/// name (`"timed_out"`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum EndReason {
    /// The handler finished normally (the stream closed cleanly, the future returned).
    Completed,
    /// A deadline passed first.
    TimedOut,
    /// The client or the caller cancelled it (a cancel frame, `JoinHandle::abort`, the tracked
    /// future dropped before it finished).
    Cancelled,
    /// The transport went away (a reset, a missed heartbeat, a half-open socket detected).
    Disconnected,
    /// The handler failed with an error.
    Failed,
    /// The server is shutting down and ended it.
    Shutdown,
    /// The reaper ended it after no activity for too long (a ghost: a leaked guard, a peer that
    /// vanished without a FIN).
    Reaped,
    /// The [`Session`](crate::Session) guard was dropped with nothing else having ended it.
    Dropped,
}

impl EndReason {
    /// Every reason, in the order [`ByReason`] stores them.
    pub const ALL: [EndReason; 8] = [
        EndReason::Completed,
        EndReason::TimedOut,
        EndReason::Cancelled,
        EndReason::Disconnected,
        EndReason::Failed,
        EndReason::Shutdown,
        EndReason::Reaped,
        EndReason::Dropped,
    ];

    /// How many reasons there are.
    pub const COUNT: usize = EndReason::ALL.len();

    /// The position of this reason in [`EndReason::ALL`].
    #[inline]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The reason at `index` in [`EndReason::ALL`]; `None` past the end.
    #[inline]
    pub(crate) fn from_index(index: usize) -> Option<EndReason> {
        EndReason::ALL.get(index).copied()
    }

    /// A short lower-case name, for metric labels.
    ///
    /// ```
    /// use livecount_session::EndReason;
    /// assert_eq!(EndReason::TimedOut.as_str(), "timed_out");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            EndReason::Completed => "completed",
            EndReason::TimedOut => "timed_out",
            EndReason::Cancelled => "cancelled",
            EndReason::Disconnected => "disconnected",
            EndReason::Failed => "failed",
            EndReason::Shutdown => "shutdown",
            EndReason::Reaped => "reaped",
            EndReason::Dropped => "dropped",
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A count per [`EndReason`], as a [`Snapshot`](crate::Snapshot) reports them.
///
/// ```
/// use livecount_session::{EndReason, SessionTracker};
///
/// let tracker = SessionTracker::new();
/// tracker.start().end(EndReason::Completed);
/// drop(tracker.start());
/// let by_reason = tracker.snapshot().ended_by_reason;
/// assert_eq!(by_reason.get(EndReason::Completed), 1);
/// assert_eq!(by_reason.get(EndReason::Dropped), 1);
/// assert_eq!(by_reason.total(), 2);
/// ```
///
/// With the `serde` feature, `Serialize` / `Deserialize` as a map from reason name to count
/// (`{"completed": 1, "timed_out": 0, ...}`; a reason missing on input counts 0).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(
        from = "std::collections::BTreeMap<EndReason, u64>",
        into = "std::collections::BTreeMap<EndReason, u64>"
    )
)]
pub struct ByReason {
    counts: [u64; EndReason::COUNT],
}

impl ByReason {
    pub(crate) fn from_counts(counts: [u64; EndReason::COUNT]) -> Self {
        ByReason { counts }
    }

    /// Sessions ended for `reason`.
    pub fn get(&self, reason: EndReason) -> u64 {
        self.counts[reason.index()]
    }

    /// Sessions ended for any reason.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Every reason with its count, in [`EndReason::ALL`] order.
    ///
    /// ```
    /// use livecount_session::{ByReason, EndReason};
    /// let none = ByReason::default();
    /// assert!(none.iter().all(|(_, n)| n == 0));
    /// assert_eq!(none.iter().count(), EndReason::COUNT);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (EndReason, u64)> + '_ {
        EndReason::ALL.iter().map(|&r| (r, self.get(r)))
    }

    /// The per-reason difference `self - earlier`, saturating at zero.
    pub(crate) fn since(&self, earlier: &ByReason) -> ByReason {
        let mut counts = self.counts;
        for (now, then) in counts.iter_mut().zip(earlier.counts) {
            *now = now.saturating_sub(then);
        }
        ByReason { counts }
    }
}

#[cfg(feature = "serde")]
impl From<ByReason> for std::collections::BTreeMap<EndReason, u64> {
    fn from(by_reason: ByReason) -> Self {
        by_reason.iter().collect()
    }
}

#[cfg(feature = "serde")]
impl From<std::collections::BTreeMap<EndReason, u64>> for ByReason {
    fn from(map: std::collections::BTreeMap<EndReason, u64>) -> Self {
        let mut counts = [0; EndReason::COUNT];
        for (reason, n) in map {
            counts[reason.index()] = n;
        }
        ByReason { counts }
    }
}

impl fmt::Debug for ByReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(reason, n)| (reason.as_str(), n)))
            .finish()
    }
}
