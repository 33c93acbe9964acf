//! [`PerThread`]: per-thread aggregation — every thread owns its cell and is its only writer.

use crossbeam_utils::CachePadded;

use crate::cell_table::CellTable;
use crate::counter::Issuer;
use crate::pair::{self, Half, Pair};
use crate::{Totals, thread_id};

/// Each thread owns one cache-padded [`started`, `ended`] pair, found by its reusable thread
/// index, and is that cell's **only writer**, so an update is a plain load and store — no
/// `lock`-prefixed read-modify-write at all. Readers sum every cell ever created.
///
/// Cells outlive their threads: when a thread exits its index goes back to a pool and the next
/// thread that takes the index inherits its cells (in every `PerThread` counter), carrying on
/// from the counts left there. The hand-over goes through the pool's mutex, so the new owner
/// sees the last owner's final stores. Updates made while a thread tears down its
/// thread-locals (after it gave its index back) go to a shared overflow cell with a locked add.
///
/// A session may end on another thread than it started on: the end is counted in the ending
/// thread's cell, and the read sums all `ended` before all `started`, so the gauge read
/// guarantee of [`Counter`](crate::Counter) holds.
///
/// # Performance characteristics
///
/// An update is a thread-local lookup, a load and a store to a line no other thread writes:
/// the physical floor for a shared counter. Memory grows with the peak number of live threads
/// (128 bytes per thread index ever used, allocated in power-of-two buckets) and is kept until
/// the counter drops. Reads walk every allocated cell twice, so they cost more than
/// [`Sharded`](crate::Sharded)'s when many threads have ever counted.
///
/// # Examples
///
/// ```
/// use livecount::{Counter, PerThread};
///
/// let sessions = PerThread::new();
/// let tokens: Vec<_> = std::thread::scope(|s| {
///     let handles: Vec<_> = (0..4).map(|_| s.spawn(|| sessions.increment())).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// // The starting threads have exited; their cells (and counts) remain.
/// assert_eq!(sessions.load(), 4);
/// for token in tokens {
///     sessions.decrement(token);
/// }
/// assert_eq!(sessions.load(), 0);
/// ```
#[derive(Debug)]
pub struct PerThread {
    cells: CellTable,
    /// Updates from threads that no longer have an index (thread-local teardown).
    overflow: CachePadded<Pair>,
    /// This counter's identity, carried by its tokens (debug builds).
    issuer: Issuer,
}

impl PerThread {
    /// A counter with no cells yet; each thread's cell is created on its first update.
    ///
    /// ```
    /// use livecount::{Counter, PerThread};
    /// assert_eq!(PerThread::new().load(), 0);
    /// ```
    pub fn new() -> Self {
        PerThread {
            cells: CellTable::new(),
            overflow: CachePadded::new(Pair::new()),
            issuer: Issuer::new(),
        }
    }

    #[inline]
    fn bump(&self, half: Half) {
        match thread_id::current_location() {
            // This thread holds its index (whose cell this is) exclusively until it exits: it
            // is the cell's only writer.
            Some(at) => self.cells.at(at).add_owned(half),
            None => self.overflow.add(half),
        }
    }

    fn read(&self) -> Totals {
        pair::read(|f| {
            f(&self.overflow);
            self.cells.for_each(f);
        })
    }
}

impl Default for PerThread {
    fn default() -> Self {
        PerThread::new()
    }
}

pair::counter!(PerThread);
