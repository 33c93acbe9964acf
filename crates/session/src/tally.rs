//! `Tally`: the tracker's counters — active total, sessions generating, ends by reason — and
//! the coherent read a [`Snapshot`](crate::Snapshot) is built from.

use livecount::Counter;

use crate::cap::Cap;
use crate::durations_by_reason::DurationsByReason;
use crate::end_cells::EndCells;
use crate::end_signal::EndSignal;
use crate::reason::ByReason;
use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// Everything the tracker counts.
#[derive(Debug)]
pub(crate) struct Tally<C> {
    /// One token per live session: started on `start`, ended by the winning `end`.
    pub(crate) total: C,
    /// One token per live session in [`Phase::Generating`](crate::Phase::Generating).
    /// `Listening` is the rest of the active total, so the phases always sum to it.
    pub(crate) generating: C,
    /// Ends by reason and duration bucket: the ends by reason are their sums.
    pub(crate) ends: EndCells,
    /// The exact limit on live sessions, for a capped tracker.
    pub(crate) cap: Option<Cap>,
    /// Sessions refused before they started: at the cap, or by the service
    /// ([`note_refused`](crate::SessionTracker::note_refused)). Bumped only on a refusal.
    pub(crate) refused: AtomicU64,
    /// Set once by [`begin_drain`](crate::SessionTracker::begin_drain), never cleared: every
    /// start reads it, so it has a line of its own that nothing else writes.
    pub(crate) draining: CachePadded<AtomicBool>,
    /// The tasks waiting for the drain to begin ([`DrainStarted`](crate::DrainStarted)):
    /// woken once, by the `begin_drain` that sets the flag.
    pub(crate) drain_waiters: EndSignal,
}

/// One coherent read of a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) started: u64,
    pub(crate) ended_by_reason: ByReason,
    /// The same ends with their durations: `durations.counts() == ended_by_reason`.
    pub(crate) durations: DurationsByReason,
    pub(crate) generating: u64,
    /// `started - ended`.
    pub(crate) active: u64,
    pub(crate) refused: u64,
    pub(crate) draining: bool,
}

impl<C: Counter> Tally<C> {
    pub(crate) fn new(total: C, generating: C, cap: Option<Cap>) -> Self {
        Tally {
            total,
            generating,
            ends: EndCells::new(),
            cap,
            refused: AtomicU64::new(0),
            draining: CachePadded::new(AtomicBool::new(false)),
            drain_waiters: EndSignal::new(),
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

    /// Sets the draining flag and wakes the tasks waiting for it; `true` if this call set
    /// it.
    pub(crate) fn begin_drain(&self) -> bool {
        // Relaxed: see `is_draining`. A waiter that registers after the wake below takes the
        // waiters' lock after it, so its re-check reads the flag set (`DrainStarted::poll`).
        let first = !self.draining.swap(true, Ordering::Relaxed);
        if first {
            self.drain_waiters.wake(false, true);
        }
        first
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
    /// gauge read guarantee of [`Counter`]). `ended` is *defined* as the sum over reasons, and
    /// each reason's count as the sum of its duration buckets, so the reasons always add up
    /// and each reason's histogram counts exactly its ends. `generating` is clamped to `active` and `listening` is the
    /// rest, so the phases always add up to `active`.
    ///
    /// A counter without totals (`livecount::Single`) gives `active` from its linearizable
    /// `load` and `started = ended + active`, which may lag by the sessions that ended during
    /// the read.
    pub(crate) fn read(&self) -> Reading {
        let durations = self.ends.read();
        let ended_by_reason = durations.counts();
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
            durations,
            generating: generating.min(active),
            active,
            // Relaxed: see `note_refused`.
            refused: self.refused.load(Ordering::Relaxed),
            draining: self.is_draining(),
        }
    }
}
