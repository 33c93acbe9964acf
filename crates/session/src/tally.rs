//! `Tally`: the tracker's counters — active total, sessions generating, ends by reason — and
//! the coherent read a [`Snapshot`](crate::Snapshot) is built from.

use crossbeam_utils::CachePadded;
use livecount::Counter;

use crate::reason::{ByReason, EndReason};
use crate::sync::{AtomicU64, Ordering, shard_hint};

/// Monotone end counts, one row of [`EndReason::COUNT`] cells per cache-padded shard.
///
/// Not a `livecount` counter per reason: an end must be counted with a **Release** bump (a
/// `livecount` increment is Relaxed) so a reader that counts the end also sees the session's
/// start. That is what makes `started >= ended` in every snapshot. One row per shard also
/// keeps the eight reasons on one line instead of eight.
#[derive(Debug)]
pub(crate) struct ReasonTally {
    shards: Box<[CachePadded<[AtomicU64; EndReason::COUNT]>]>,
}

impl ReasonTally {
    pub(crate) fn new() -> Self {
        // Twice the parallelism, as `livecount::Sharded` does; one shard under loom.
        let shards = if cfg!(livecount_loom) {
            1
        } else {
            let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
            (2 * cpus).next_power_of_two()
        };
        ReasonTally {
            shards: (0..shards)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// Counts one end for `reason`.
    #[inline]
    pub(crate) fn bump(&self, reason: EndReason) {
        let shard = &self.shards[shard_hint() & (self.shards.len() - 1)];
        // Release: pairs with the Acquire in `read`, so a snapshot that counts this end also
        // sees the start of the same session (which happened-before this bump).
        shard[reason.index()].fetch_add(1, Ordering::Release);
    }

    /// Ends per reason so far.
    pub(crate) fn read(&self) -> ByReason {
        let mut counts = [0u64; EndReason::COUNT];
        for shard in self.shards.iter() {
            for (sum, cell) in counts.iter_mut().zip(shard.iter()) {
                // Acquire: pairs with the Release in `bump` (see there).
                *sum += cell.load(Ordering::Acquire);
            }
        }
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
}

/// One coherent read of a [`Tally`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) started: u64,
    pub(crate) ended_by_reason: ByReason,
    pub(crate) generating: u64,
    /// `started - ended`.
    pub(crate) active: u64,
}

impl<C: Counter> Tally<C> {
    pub(crate) fn new(total: C, generating: C) -> Self {
        Tally {
            total,
            generating,
            reasons: ReasonTally::new(),
        }
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
        }
    }
}
