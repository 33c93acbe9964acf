//! [`Striped`]: LongAdder-style striping — a base cell, then lazily grown cache-padded stripes.

use std::cell::Cell;

use crossbeam_utils::CachePadded;

use crate::cell_table::CellTable;
use crate::counter::Issuer;
use crate::pair::{self, Half, Pair};
use crate::sync::{AtomicUsize, Ordering};
use crate::{Totals, thread_id};

/// Java's `LongAdder` design, for a gauge: updates go to one cache-padded base pair while it
/// is uncontended; the first failed compare-and-swap on the base opens two cache-padded
/// stripes, and every later collision on a stripe rehashes the thread's probe and doubles the
/// stripe count, up to a cap near the CPU count. Stripes are never moved or freed while the
/// counter lives (no lost update when the table grows).
///
/// Every cell is a monotone [`started`, `ended`] pair and a read sums all `ended` before all
/// `started`, so the gauge read guarantee of [`Counter`](crate::Counter) holds even though a session's start
/// and end usually land on different stripes.
///
/// # Performance characteristics
///
/// Uncontended: a load and one `lock cmpxchg` on the base, no extra memory. Contended: a load
/// and a `lock cmpxchg` on the thread's stripe; a failure rehashes the thread's probe, doubles
/// the stripes below the cap, and costs one `lock xadd` on the new stripe. Memory grows
/// only under contention: 128 bytes for the base, 128 per stripe, and 512 bytes of stripe
/// table. Reads load the base and every stripe twice.
///
/// Against [`Sharded`](crate::Sharded), which it cannot match for throughput: contention is
/// detected by a failed compare-and-swap, so every update is a load and a `lock cmpxchg`
/// (once striped, after a probe and a cell-table lookup), where `Sharded` does one
/// `lock xadd` on the line its thread index picks. In the committed picker run on a 2-core VM
/// (`results/intel-r-xeon-r-processor-2c/REPORT.md`, ballpark), `Striped` did 52 / 102 / 104
/// / 105 M start+end pairs/s at 1 / 2 / 4 / 8 threads against `Sharded`'s 70 / 143 / 141 /
/// 136 M: 0.71–0.77× at every count, and flat past the core count since a collision at the
/// cap rehashes the thread's probe as LongAdder does (with the old `lock xadd` at the cap and no rehash, two threads sharing a
/// stripe kept bouncing its line: 50 / 82 / 78 / 57 M against 64 / 121 / 127 / 107 M). What
/// it buys is memory: 128 bytes until the first contention, and stripes only as far as
/// contention was seen, where `Sharded` holds `2 × CPUs` lines from the start.
///
/// # Examples
///
/// ```
/// use livecount::{Counter, Striped};
/// use std::sync::Arc;
///
/// let sessions = Arc::new(Striped::new());
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             for _ in 0..10_000 {
///                 let t = sessions.increment();
///                 sessions.decrement(t);
///             }
///         });
///     }
/// });
/// assert_eq!(sessions.load(), 0);
/// assert_eq!(sessions.totals().unwrap().started, 40_000);
/// ```
#[derive(Debug)]
pub struct Striped {
    base: CachePadded<Pair>,
    /// Stripes in use: 0 until the base is first contended, then a power of two ≤ `cap`.
    stripes: AtomicUsize,
    cap: usize,
    cells: CellTable,
    /// This counter's identity, carried by its tokens (debug builds).
    issuer: Issuer,
}

impl Striped {
    /// A counter whose stripes stop growing at the available parallelism, rounded up to a
    /// power of two (LongAdder's cap).
    ///
    /// ```
    /// use livecount::{Counter, Striped};
    /// let sessions = Striped::new();
    /// assert_eq!(sessions.stripes(), 0); // nothing contended yet
    /// assert!(sessions.max_stripes() >= 2);
    /// ```
    pub fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        Striped::with_max_stripes(cpus)
    }

    /// A counter whose stripes stop growing at `max`, rounded up to a power of two (at least 2).
    ///
    /// ```
    /// use livecount::Striped;
    /// assert_eq!(Striped::with_max_stripes(3).max_stripes(), 4);
    /// ```
    pub fn with_max_stripes(max: usize) -> Self {
        Striped {
            base: CachePadded::new(Pair::new()),
            stripes: AtomicUsize::new(0),
            cap: max.max(2).next_power_of_two(),
            cells: CellTable::new(),
            issuer: Issuer::new(),
        }
    }

    /// Stripes currently in use (0 while the base has never been contended).
    ///
    /// ```
    /// use livecount::{Counter, Striped};
    ///
    /// let sessions = Striped::with_max_stripes(8);
    /// let token = sessions.increment(); // one thread: the base CAS never fails
    /// assert_eq!(sessions.stripes(), 0);
    /// sessions.decrement(token);
    /// assert!(sessions.stripes() <= sessions.max_stripes());
    /// ```
    pub fn stripes(&self) -> usize {
        // Relaxed: an informational snapshot of a monotone value.
        self.stripes.load(Ordering::Relaxed)
    }

    /// The cap on stripes.
    ///
    /// ```
    /// use livecount::Striped;
    /// assert_eq!(Striped::with_max_stripes(16).max_stripes(), 16);
    /// assert_eq!(Striped::with_max_stripes(0).max_stripes(), 2);
    /// ```
    pub fn max_stripes(&self) -> usize {
        self.cap
    }

    #[inline]
    fn bump(&self, half: Half) {
        // Relaxed: `stripes` only picks a mask; the cells themselves are published by the
        // cell table's own Acquire/Release, whatever value is read here.
        if self.stripes.load(Ordering::Relaxed) == 0 {
            if try_bump(&self.base, half) {
                return;
            }
            // The base is contended: open the stripes (losing this race is fine).
            let _ = self
                .stripes
                .compare_exchange(0, 2, Ordering::Relaxed, Ordering::Relaxed);
        }
        if thread_id::with_probe(|probe| self.bump_stripe(probe, half)).is_none() {
            // Thread teardown: no probe left. A locked add on the base is always correct.
            self.base.add(half);
        }
    }

    #[inline]
    fn bump_stripe(&self, probe: &Cell<u32>, half: Half) {
        let stripes = self.stripes.load(Ordering::Relaxed);
        let cell = self
            .cells
            .get_or_alloc(probe.get() as usize & (stripes - 1));
        if try_bump(cell, half) {
            return;
        }
        // Collision: another thread updated this stripe between our load and our CAS. Move
        // this thread's probe elsewhere, and grow the table unless it is at the cap. At the
        // cap the rehash still matters (LongAdder keeps rehashing there too): with more
        // threads than stripes, two threads running at once that share a stripe would
        // otherwise bounce its line for as long as both live; rehashing on each collision
        // moves them apart, as the scheduler moves threads on and off the cores.
        probe.set(thread_id::rehash(probe.get()));
        if stripes < self.cap {
            let _ = self.stripes.compare_exchange(
                stripes,
                stripes * 2,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        let stripes = self.stripes.load(Ordering::Relaxed);
        self.cells
            .get_or_alloc(probe.get() as usize & (stripes - 1))
            .add(half);
    }

    fn read(&self) -> Totals {
        pair::read(|f| {
            f(&self.base);
            self.cells.for_each(f);
        })
    }
}

/// One compare-and-swap attempt to bump `half` of `cell`; `false` means it was contended.
#[inline]
fn try_bump(cell: &Pair, half: Half) -> bool {
    let atomic = cell.half(half);
    // Relaxed load: the CAS below validates it.
    let now = atomic.load(Ordering::Relaxed);
    atomic
        .compare_exchange(now, now + 1, half.order(), Ordering::Relaxed)
        .is_ok()
}

impl Default for Striped {
    fn default() -> Self {
        Striped::new()
    }
}

pair::counter!(Striped);

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Counter;

    /// Contended at its cap of 2 stripes, a `Striped` only ever touches cells 0 and 1: the
    /// first two buckets of its table, never a third (a wrong mask would map probes past the
    /// stripes and allocate cells no read needs).
    #[test]
    fn stripes_stay_within_their_cells() {
        let counter = Striped::with_max_stripes(2);
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_secs(20);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        let t = counter.increment();
                        counter.decrement(t);
                    }
                });
            }
            while counter.stripes() < 2 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Collisions at the cap rehash probes all over the u32 range meanwhile.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(counter.stripes(), 2);
        assert!(
            counter.cells.buckets_in_use() <= 2,
            "{}",
            counter.cells.buckets_in_use()
        );
        assert_eq!(counter.load(), 0);
    }
}
