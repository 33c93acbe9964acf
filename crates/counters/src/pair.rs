//! `Pair`: one cell of monotone `started` / `ended` counts, and the two-pass read over cells.
//!
//! Why two monotone counts instead of one value that goes up and down: a session may end on a
//! different cell than it started on (another thread, another stripe). A reader summing signed
//! per-cell values can then see the `-1` without its `+1` and report a negative or too-small
//! gauge. With pairs, a reader loads every `ended` first and every `started` after; each
//! `ended` bump is a Release that happens after its own `started` bump, so every end the reader
//! counts has its start counted too. The result is never negative and never misses a session
//! that was open during the whole read.

use crate::Totals;
use crate::sync::{AtomicU64, Ordering};

/// Monotone start / end counts of one cell. Callers pad it (`CachePadded<Pair>`).
#[derive(Debug, Default)]
pub(crate) struct Pair {
    started: AtomicU64,
    ended: AtomicU64,
}

/// Which half of a [`Pair`] an update bumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Half {
    Started,
    Ended,
}

impl Half {
    /// The ordering a bump of this half needs.
    #[inline]
    pub(crate) fn order(self) -> Ordering {
        match self {
            // Relaxed: nothing is read through a start; its own end's Release publishes it.
            Half::Started => Ordering::Relaxed,
            // Release: pairs with the Acquire in `Pair::ended`, so a reader that counts this end
            // also sees the start that happened before it (on this or any other cell).
            Half::Ended => Ordering::Release,
        }
    }
}

impl Pair {
    #[cfg(not(any(livecount_loom, livecount_shuttle)))]
    pub(crate) const fn new() -> Self {
        Pair {
            started: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    #[cfg(any(livecount_loom, livecount_shuttle))]
    pub(crate) fn new() -> Self {
        Pair {
            started: AtomicU64::new(0),
            ended: AtomicU64::new(0),
        }
    }

    /// The atomic behind `half`.
    #[inline]
    pub(crate) fn half(&self, half: Half) -> &AtomicU64 {
        match half {
            Half::Started => &self.started,
            Half::Ended => &self.ended,
        }
    }

    /// Bumps `half` with a locked read-modify-write: any number of threads may share the cell.
    #[inline]
    pub(crate) fn add(&self, half: Half) {
        self.half(half).fetch_add(1, half.order());
    }

    /// Bumps `half` with a plain load and store.
    ///
    /// Correct only while the calling thread is the cell's single writer: a concurrent writer's
    /// bump would be overwritten. `PerThread` guarantees that through thread ownership.
    #[inline]
    pub(crate) fn add_owned(&self, half: Half) {
        let cell = self.half(half);
        // Relaxed load: the only writer is this thread (or a previous owner whose writes
        // happened-before through the index pool's mutex), so it always reads its own latest.
        let now = cell.load(Ordering::Relaxed);
        cell.store(now + 1, half.order());
    }

    /// This cell's end count. Acquire: pairs with the Release of every end bump, so the starts
    /// of the ends seen here are visible to the `started` loads that follow.
    #[inline]
    pub(crate) fn ended(&self) -> u64 {
        self.ended.load(Ordering::Acquire)
    }

    /// This cell's start count. Relaxed: coherence alone makes every start that happened-before
    /// an end seen by `ended` visible here, because this load is sequenced after that Acquire.
    #[inline]
    pub(crate) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

/// The [`Counter`](crate::Counter) impl of a counter over monotone pairs, which has an
/// `issuer: Issuer`, a `bump(&self, Half)` that counts one start or end, and a
/// `read(&self) -> Totals` that reads them all with [`read`].
macro_rules! counter {
    ($counter:ty) => {
        impl $crate::Counter for $counter {
            type Token = $crate::Token<$counter>;

            #[inline]
            fn increment(&self) -> Self::Token {
                self.bump($crate::pair::Half::Started);
                $crate::Token::new(&self.issuer)
            }

            #[inline]
            fn decrement(&self, token: Self::Token) {
                token.redeem(&self.issuer);
                self.bump($crate::pair::Half::Ended);
            }

            #[inline]
            fn load(&self) -> u64 {
                self.read().active()
            }

            fn totals(&self) -> Option<$crate::Totals> {
                Some(self.read())
            }
        }
    };
}
pub(crate) use counter;

/// How many times a read may start over because sessions kept starting while it ran.
const READ_ATTEMPTS: usize = 3;

/// Starts that may land during one read pass without forcing another attempt: the read is
/// already tight to this many sessions (or to 1/8 of the value, whichever is larger).
const SLACK_FLOOR: u64 = 64;

/// The gauge read over a set of cells: every `ended` first, then every `started`.
///
/// `for_each` must visit every cell that exists when it is called; it is called once per pass,
/// and each call must re-discover cells (a cell created between the passes may hold the start
/// of an end seen in an earlier pass).
///
/// Each attempt is a valid gauge read on its own. It over-counts by at most the sessions that
/// started while it ran, so each attempt also sums `started` once *before* its `ended` pass:
/// the growth of `started` across the attempt bounds the over-count. A reader preempted in
/// mid-read under heavy churn can see millions of starts go by; such an attempt is retried
/// (up to [`READ_ATTEMPTS`] times) and the tightest attempt is returned.
#[inline]
pub(crate) fn read(mut for_each: impl FnMut(&mut dyn FnMut(&Pair))) -> Totals {
    let mut best: Option<(u64, Totals)> = None;
    for _ in 0..READ_ATTEMPTS {
        let before = sum(&mut for_each, Pair::started);
        let ended = sum(&mut for_each, Pair::ended);
        let started = sum(&mut for_each, Pair::started);
        let totals = Totals { started, ended };
        let slack = started.wrapping_sub(before);
        if best.is_none_or(|(tightest, _)| slack < tightest) {
            best = Some((slack, totals));
        }
        if slack <= SLACK_FLOOR.max(totals.active() / 8) {
            break;
        }
    }
    best.map_or_else(Totals::default, |(_, totals)| totals)
}

#[inline]
fn sum(for_each: &mut impl FnMut(&mut dyn FnMut(&Pair)), half: impl Fn(&Pair) -> u64) -> u64 {
    let mut total = 0u64;
    for_each(&mut |pair| total = total.wrapping_add(half(pair)));
    total
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A read over one cell into which `starts[i]` sessions start just before the read's
    /// `i`-th pass over the cells (each attempt makes three: `started`, `ended`, `started`,
    /// so attempt `k`'s slack is `starts[3k + 1] + starts[3k + 2]`). Returns the totals and
    /// how many passes the read made.
    fn scripted(starts: &[u64]) -> (Totals, usize) {
        let pair = Pair::new();
        let passes = Cell::new(0);
        let totals = read(|f| {
            for _ in 0..starts.get(passes.get()).copied().unwrap_or(0) {
                pair.add(Half::Started);
            }
            passes.set(passes.get() + 1);
            f(&pair);
        });
        (totals, passes.get())
    }

    #[test]
    fn a_quiet_read_takes_one_attempt() {
        let (totals, passes) = scripted(&[5]);
        assert_eq!((totals.started, totals.ended, passes), (5, 0, 3));
    }

    #[test]
    fn slack_within_an_eighth_of_the_value_is_tight_enough() {
        // 100 starts during the attempt, 1 000 active: 100 ≤ 1 000 / 8.
        let (totals, passes) = scripted(&[900, 100]);
        assert_eq!((totals.started, passes), (1_000, 3));
    }

    #[test]
    fn a_loose_read_is_retried_and_the_tightest_attempt_returned() {
        // Slacks 1 000, 200, 500: each above SLACK_FLOOR and an eighth of the value.
        let (totals, passes) = scripted(&[0, 1_000, 0, 0, 200, 0, 0, 500, 0]);
        assert_eq!(passes, 3 * READ_ATTEMPTS);
        assert_eq!(totals.started, 1_200, "not the tightest attempt");
    }

    #[test]
    fn among_equally_tight_attempts_the_first_is_returned() {
        let (totals, passes) = scripted(&[0, 300, 0, 0, 300, 0, 0, 300, 0]);
        assert_eq!((totals.started, passes), (300, 9));
    }
}
