//! [`ThreadCells`]: one cache-padded cell per thread, the machinery of [`PerThread`] for any
//! cell type.
//!
//! [`PerThread`]: crate::PerThread

use crate::cell_table::CellTable;
use crate::thread_id;

/// One cache-padded `T` per thread, found by the thread's reusable index: the cells
/// [`PerThread`](crate::PerThread) counts in, for a caller whose per-thread state is more than
/// a start / end pair (a histogram, a few sums).
///
/// [`local`](ThreadCells::local) gives the calling thread **its** cell: no other thread gets
/// the same cell from `local` while this thread lives, so a caller that writes only through
/// `local`, on the thread that called it, is the cell's only writer and may update its
/// atomics with a plain `load` and `store` (no `lock`-prefixed read-modify-write). Handing
/// the reference to another thread and writing there gives that up (updates may be lost; it
/// is never unsound: a cell is only ever shared, `T` is `Sync`). Readers visit every cell
/// ever created with [`for_each`](ThreadCells::for_each); what a read guarantees is `T`'s
/// business (its orderings).
///
/// Cells outlive their threads: a thread that exits gives its index back, and the next
/// thread to take the index inherits its cells, carrying on from what is there. The handover
/// goes through a mutex, so the new owner sees the last owner's final stores. While a thread
/// tears down its thread-locals (after it gave its index back) `local` returns `None`: the
/// caller records elsewhere (a shared cell with read-modify-writes).
///
/// # Performance characteristics
///
/// `local` is a thread-local load, the index arithmetic of a power-of-two bucket table and
/// one Acquire load of the bucket pointer; the first call on a thread registers it (a
/// mutex) and the first use of a bucket allocates it. Memory: one `CachePadded<T>` per thread
/// index ever used, in power-of-two buckets, kept until the `ThreadCells` drops.
/// `for_each` walks every allocated cell.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use livecount::ThreadCells;
///
/// let sums: ThreadCells<AtomicU64> = ThreadCells::new();
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             let mine = sums.local().expect("not tearing down");
///             // The only writer: a plain load and store.
///             mine.store(mine.load(Ordering::Relaxed) + 10, Ordering::Relaxed);
///         });
///     }
/// });
/// let mut total = 0;
/// sums.for_each(|cell| total += cell.load(Ordering::Relaxed));
/// assert_eq!(total, 40);
/// ```
pub struct ThreadCells<T> {
    cells: CellTable<T>,
}

impl<T: Default> ThreadCells<T> {
    /// No cells yet; each thread's cell is created (`T::default()`) on its first
    /// [`local`](ThreadCells::local).
    ///
    /// ```
    /// let cells = livecount::ThreadCells::<std::sync::atomic::AtomicU64>::new();
    /// let mut n = 0;
    /// cells.for_each(|_| n += 1);
    /// assert_eq!(n, 0);
    /// ```
    pub fn new() -> Self {
        ThreadCells {
            cells: CellTable::new(),
        }
    }

    /// The calling thread's cell (see the type's docs for the single-writer contract), or
    /// `None` while the thread tears down its thread-locals.
    ///
    /// ```
    /// # use std::sync::atomic::AtomicU64;
    /// let cells = livecount::ThreadCells::<AtomicU64>::new();
    /// let a = cells.local().unwrap() as *const AtomicU64;
    /// assert_eq!(cells.local().unwrap() as *const AtomicU64, a, "one cell per thread");
    /// ```
    #[inline]
    pub fn local(&self) -> Option<&T> {
        thread_id::current().map(|index| self.cells.get_or_alloc(index))
    }

    /// Calls `f` on every cell created so far (cells of exited threads included).
    pub fn for_each(&self, mut f: impl FnMut(&T)) {
        self.cells.for_each(&mut f);
    }
}

impl<T: Default> Default for ThreadCells<T> {
    fn default() -> Self {
        ThreadCells::new()
    }
}

impl<T> std::fmt::Debug for ThreadCells<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCells")
            .field("cells", &self.cells)
            .finish()
    }
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Threads get distinct cells, and the cells of exited threads are still read.
    #[test]
    fn every_thread_writes_its_own_cell_and_reads_see_them_all() {
        let cells: ThreadCells<AtomicU64> = ThreadCells::new();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        let mine = cells.local().unwrap();
                        mine.store(mine.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        let mut total = 0;
        cells.for_each(|c| total += c.load(Ordering::Relaxed));
        assert_eq!(total, 8_000, "a lost update: two threads shared a cell");
    }

    #[test]
    fn is_send_and_sync_as_its_cells() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<ThreadCells<AtomicU64>>();
    }
}
