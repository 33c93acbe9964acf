//! `Tally`: the tracker's counters — active total, sessions generating, ends by reason — and
//! the coherent read a [`Snapshot`](crate::Snapshot) is built from.

use livecount::Counter;
#[cfg(not(livecount_loom))]
use livecount::PerThread;

use crate::cap::Cap;
use crate::reason::{ByReason, EndReason};
use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64, Ordering, fence};

/// Monotone end counts: one [`PerThread`] counter per reason, never decremented.
///
/// A bump is a plain store on a line only the calling thread writes (`PerThread`'s cell), after
/// a **Release fence**; a read takes the counts, then an **Acquire fence**. A `livecount`
/// increment is Relaxed, and the fences are what make a reader that counts an end also see
/// the session's start (which happened before the end's fence): that is what makes
/// `started >= ended` in every snapshot.
///
/// Under `livecount_loom` each reason is one atomic bumped with a Relaxed `fetch_add` after
/// the same fence: the synchronisation the models check is the fence pair, whatever the cell;
/// `PerThread` itself is model-checked in `livecount`'s own loom suite, and its thread-index
/// machinery would multiply these models' state space a hundredfold.
#[derive(Debug)]
pub(crate) struct ReasonTally {
    #[cfg(not(livecount_loom))]
    counts: [PerThread; EndReason::COUNT],
    #[cfg(livecount_loom)]
    counts: [crate::sync::AtomicU64; EndReason::COUNT],
}

impl ReasonTally {
    pub(crate) fn new() -> Self {
        ReasonTally {
            #[cfg(not(livecount_loom))]
            counts: std::array::from_fn(|_| PerThread::new()),
            #[cfg(livecount_loom)]
            counts: std::array::from_fn(|_| crate::sync::AtomicU64::new(0)),
        }
    }

    /// Counts one end for `reason`.
    #[inline]
    pub(crate) fn bump(&self, reason: EndReason) {
        // Release: a reader whose loads see this increment and then fences with Acquire (in
        // `read`) sees the start of the same session, which happened before this fence.
        fence(Ordering::Release);
        let count = &self.counts[reason.index()];
        // Never decremented: a monotone count, so the token is never redeemed.
        #[cfg(not(livecount_loom))]
        std::mem::forget(count.increment());
        #[cfg(livecount_loom)]
        count.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends per reason so far.
    pub(crate) fn read(&self) -> ByReason {
        #[cfg(not(livecount_loom))]
        let counts = std::array::from_fn(|i| self.counts[i].load());
        #[cfg(livecount_loom)]
        let counts = std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed));
        // Acquire: pairs with the Release fences in `bump` (see there).
        fence(Ordering::Acquire);
        ByReason::from_counts(counts)
    }
}

/// Everything the tracker counts.
#[derive(Debug)]
pub(crate) struct Tally<C> {
    /// One token per live session: started on `start`, ended by the winning `end`.
    pub(crate) total: C,
    /// One token per live session in [`Phase::Generating`](crate::Phase::Generating).
    /// `Listening` is the rest of the active total, so the phases always sum to it.
    pub(crate) generating: C,
    pub(crate) reasons: ReasonTally,
    /// The exact limit on live sessions, for a capped tracker.
    pub(crate) cap: Option<Cap>,
    /// Sessions refused before they started: at the cap, or by the service
    /// ([`note_refused`](crate::SessionTracker::note_refused)). Bumped only on a refusal.
    pub(crate) refused: AtomicU64,
    /// Set once by [`begin_drain`](crate::SessionTracker::begin_drain), never cleared: every
    /// start reads it, so it has a line of its own that nothing else writes.
    pub(crate) draining: CachePadded<AtomicBool>,
}

/// One coherent read of a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) started: u64,
    pub(crate) ended_by_reason: ByReason,
    pub(crate) generating: u64,
    /// `started - ended`.
    pub(crate) active: u64,
    pub(crate) refused: u64,
}

impl<C: Counter> Tally<C> {
    pub(crate) fn new(total: C, generating: C, cap: Option<Cap>) -> Self {
        Tally {
            total,
            generating,
            reasons: ReasonTally::new(),
            cap,
            refused: AtomicU64::new(0),
            draining: CachePadded::new(AtomicBool::new(false)),
        }
    }

    /// Whether the tracker refuses new sessions because it drains.
    #[inline]
    pub(crate) fn is_draining(&self) -> bool {
        // Relaxed: a flag set once. A start that happens after `begin_drain` (through any
        // synchronisation: a socket, a channel) reads it set, by coherence; a start racing
        // it may be admitted, and is then a session like any other, ended by its owner or
        // by the `end_all` at the end of the drain.
        self.draining.load(Ordering::Relaxed)
    }

    /// Sets the draining flag; `true` if this call set it.
    pub(crate) fn begin_drain(&self) -> bool {
        // Relaxed: see `is_draining`.
        !self.draining.swap(true, Ordering::Relaxed)
    }

    /// Counts one refusal.
    pub(crate) fn note_refused(&self) {
        // Relaxed: a statistic; it orders nothing else.
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads the ends first, the phase next and the starts last.
    ///
    /// Ends are Release-bumped after their start, and read with Acquire before the starts, so
    /// every end read has its start read too: `started >= ended`, and `active = started -
    /// ended` is never negative and never misses a session open during the whole read (the
    /// gauge read guarantee of [`Counter`]). `ended` is *defined* as the sum over reasons, so
    /// the reasons always add up. `generating` is clamped to `active` and `listening` is the
    /// rest, so the phases always add up to `active`.
    ///
    /// A counter without totals (`livecount::Single`) gives `active` from its linearizable
    /// `load` and `started = ended + active`, which may lag by the sessions that ended during
    /// the read.
    pub(crate) fn read(&self) -> Reading {
        let ended_by_reason = self.reasons.read();
        let ended = ended_by_reason.total();
        let generating = self.generating.load();
        let (started, active) = match self.total.totals() {
            Some(totals) => (totals.started, totals.started.saturating_sub(ended)),
            None => {
                let active = self.total.load();
                (ended + active, active)
            }
        };
        Reading {
            started,
            ended_by_reason,
            generating: generating.min(active),
            active,
            // Relaxed: see `note_refused`.
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}
