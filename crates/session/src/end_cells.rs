//! `EndCells`: every end, counted by reason and duration bucket in the ending thread's own
//! cell, and the read that turns them into [`DurationsByReason`] (and so the ends by reason).
//!
//! # Write
//!
//! An end bumps one bucket count and adds to one sum, both in the ending thread's cell of a
//! [`livecount::ThreadCells`]: a line no other thread writes, so a plain load and store each,
//! no lock, no allocation, nothing shared by all threads (the cell is `CachePadded`). Order:
//! the sum, then a **Release fence**, then the bucket count.
//!
//! # Read
//!
//! Every cell's bucket counts, then an **Acquire fence**, then every cell's sums. A reader
//! that counts an end (sees its bucket store) therefore also sees everything before that
//! end's fence: the session's start (so `started >= ended` once the tally reads the starts
//! next) and the end's own addition to the sum.
//!
//! # What a reading guarantees
//!
//! * A reason's ends *are* the sum of its buckets, so a histogram's count equals the
//!   reason's count in the same reading, exactly, always.
//! * Each sum includes the duration of every end counted in its buckets, and may also
//!   include those of ends recorded while the read ran (whose sums the second pass saw but
//!   whose buckets the first did not): `sum` overstates the counted ends' total by at most
//!   the durations of the ends recorded during the read (a few µs of reading). With no end
//!   racing the read it is exact.
//!
//! Under `livecount_loom` there is a single shared cell, bumped with `fetch_add` after the
//! same fence: what the models check is the fence pair and the exactly-once recording, and
//! the thread-index machinery of `ThreadCells` is model-checked in `livecount`'s own suite
//! (and would multiply these models' state space a hundredfold). A thread tearing down its
//! thread-locals has no cell of its own either and uses the shared one too.

#[cfg(not(livecount_loom))]
use livecount::ThreadCells;

use crate::duration_histogram::DurationHistogram;
use crate::durations_by_reason::DurationsByReason;
use crate::reason::EndReason;
use crate::sync::{AtomicU64, Ordering, fence};
use crossbeam_utils::CachePadded;

/// One reason's buckets and sum in one cell.
#[derive(Debug, Default)]
struct Row {
    buckets: [AtomicU64; DurationHistogram::BUCKETS],
    sum_micros: AtomicU64,
}

/// One thread's ends (or the shared cell's): a row per reason, 960 bytes.
#[derive(Debug, Default)]
struct EndCell {
    rows: [Row; EndReason::COUNT],
}

impl EndCell {
    /// Records an end by the cell's only writer: plain loads and stores.
    #[cfg(not(livecount_loom))]
    #[inline]
    fn record_owned(&self, row: usize, bucket: usize, micros: u64) {
        let row = &self.rows[row];
        // Relaxed loads: this thread is the only writer (or inherited the cell through the
        // thread-index pool's mutex), so it reads its own latest values.
        let sum = row.sum_micros.load(Ordering::Relaxed);
        row.sum_micros
            .store(sum.wrapping_add(micros), Ordering::Relaxed);
        // Release: pairs with the Acquire in `EndCells::read`, so a reader that counts this
        // end also sees its sum and its session's start (both before this fence).
        fence(Ordering::Release);
        let count = &row.buckets[bucket];
        count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Records an end in a cell any thread may write: read-modify-writes.
    #[inline]
    fn record_shared(&self, row: usize, bucket: usize, micros: u64) {
        let row = &self.rows[row];
        // Relaxed: ordered for readers by the fence below, as in `record_owned`.
        row.sum_micros.fetch_add(micros, Ordering::Relaxed);
        // Release: as in `record_owned`.
        fence(Ordering::Release);
        row.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds this cell's bucket counts to `into` (the first pass of a read).
    fn add_buckets(&self, into: &mut [[u64; DurationHistogram::BUCKETS]; EndReason::COUNT]) {
        for (row, counts) in self.rows.iter().zip(into.iter_mut()) {
            for (bucket, n) in row.buckets.iter().zip(counts.iter_mut()) {
                // Relaxed: the Acquire fence after this pass orders what follows.
                *n += bucket.load(Ordering::Relaxed);
            }
        }
    }

    /// Adds this cell's sums to `into` (the second pass, after the Acquire fence).
    fn add_sums(&self, into: &mut [u64; EndReason::COUNT]) {
        for (row, sum) in self.rows.iter().zip(into.iter_mut()) {
            // Relaxed: sequenced after the read's Acquire fence (see the module docs).
            *sum = sum.wrapping_add(row.sum_micros.load(Ordering::Relaxed));
        }
    }
}

/// Every end by reason and duration: see the module docs.
#[derive(Debug)]
pub(crate) struct EndCells {
    /// One cell per thread that ever ended a session of this tracker.
    #[cfg(not(livecount_loom))]
    cells: ThreadCells<CachePadded<EndCell>>,
    /// Ends by threads without a cell of their own (thread-local teardown; every end under
    /// loom).
    shared: CachePadded<EndCell>,
}

impl EndCells {
    pub(crate) fn new() -> Self {
        EndCells {
            #[cfg(not(livecount_loom))]
            cells: ThreadCells::new(),
            shared: CachePadded::default(),
        }
    }

    /// Records one end for `reason` that lasted `micros` microseconds.
    #[inline]
    pub(crate) fn record(&self, reason: EndReason, micros: u64) {
        let bucket = DurationHistogram::bucket_of_micros(micros);
        #[cfg(not(livecount_loom))]
        if let Some(cell) = self.cells.local() {
            // This thread's own cell, written only through `local` on this thread.
            cell.record_owned(reason.index(), bucket, micros);
            return;
        }
        self.shared.record_shared(reason.index(), bucket, micros);
    }

    /// Every end so far, by reason and duration (see the module docs for the guarantee).
    pub(crate) fn read(&self) -> DurationsByReason {
        let mut buckets = [[0; DurationHistogram::BUCKETS]; EndReason::COUNT];
        self.for_each_cell(|cell| cell.add_buckets(&mut buckets));
        // Acquire: pairs with the Release fences of `record_owned` / `record_shared`.
        fence(Ordering::Acquire);
        let mut sums = [0; EndReason::COUNT];
        self.for_each_cell(|cell| cell.add_sums(&mut sums));
        DurationsByReason::from_histograms(std::array::from_fn(|i| {
            DurationHistogram::from_parts(buckets[i], sums[i])
        }))
    }

    fn for_each_cell(&self, mut f: impl FnMut(&EndCell)) {
        f(&self.shared);
        #[cfg(not(livecount_loom))]
        self.cells.for_each(|cell| f(cell));
    }
}

#[cfg(all(test, not(livecount_loom)))]
mod tests {
    use super::*;

    /// Ends from many threads, cells of exited threads included, all read back.
    #[test]
    fn every_threads_ends_are_read() {
        let ends = EndCells::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let ends = &ends;
                s.spawn(move || {
                    for _ in 0..100 {
                        ends.record(EndReason::Completed, 1_000_000 * t);
                    }
                });
            }
        });
        ends.record(EndReason::Failed, 7);
        let read = ends.read();
        let completed = read.get(EndReason::Completed);
        assert_eq!(completed.count(), 400);
        assert_eq!(completed.sum_micros(), 100 * 1_000_000 * (1 + 2 + 3));
        assert_eq!(completed.buckets()[0], 100); // 0 s
        assert_eq!(completed.buckets()[2], 100); // 1 s: up to 1 s
        assert_eq!(completed.buckets()[3], 100); // 2 s: up to 2.5 s
        assert_eq!(completed.buckets()[4], 100); // 3 s: up to 5 s
        assert_eq!(read.get(EndReason::Failed).sum_micros(), 7);
        assert_eq!(read.total().count(), 401);
    }
}
