//! `CellTable`: an append-only, lock-free, growable array of padded cells that never move.
//!
//! Cell `i` lives in bucket `b = floor(log2(i + 1))`, which holds `2^b` cells and is allocated
//! the first time any of its cells is needed. A cell is a [`Pair`] for the counters and any
//! `T: Default` for [`ThreadCells`](crate::ThreadCells). Buckets are never moved or freed before the table
//! is dropped, so a `&Pair` handed out stays valid and no update can land in a stale copy
//! (the lost-update bug of grow-by-copy striped counters).

use std::marker::PhantomData;
use std::ptr;

use crossbeam_utils::CachePadded;

use crate::pair::Pair;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// Bucket `b` holds `2^b` cells; 64 buckets cover every `usize` index but the last.
const BUCKETS: usize = usize::BITS as usize;

type Slot<T = Pair> = CachePadded<T>;

/// Lazily allocated cells, addressed by a dense index (a thread index or a stripe).
pub(crate) struct CellTable<T = Pair> {
    /// One past the highest bucket ever claimed, so reads scan only the buckets in use.
    /// Raised *before* a bucket is published (see `allocate`).
    high: AtomicUsize,
    buckets: [AtomicPtr<Slot<T>>; BUCKETS],
    /// The table owns `T`s and hands out `&T` to any thread: `Send` / `Sync` as `T` is.
    _cells: PhantomData<Box<[T]>>,
}

impl<T> std::fmt::Debug for CellTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let allocated = (0..BUCKETS)
            .filter(|&b| !self.buckets[b].load(Ordering::Relaxed).is_null())
            .map(|b| 1usize << b)
            .sum::<usize>();
        f.debug_struct("CellTable")
            .field("allocated_cells", &allocated)
            .finish()
    }
}

/// The bucket holding cell `index`, and the cell's offset inside it.
#[inline]
fn locate(index: usize) -> (usize, usize) {
    let n = index + 1;
    let bucket = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (bucket, n - (1 << bucket))
}

/// Where cell `index` lives, computed once per thread (and cached beside its index) so that an
/// update does no arithmetic on the index: the bucket in the low 6 bits, the cell's byte
/// offset in its bucket above them. Reading it back is a mask and a shift, and the mask
/// proves the bucket in range, so the bucket load needs no bounds check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Location(usize);

/// Bits of a [`Location`] holding the bucket (`BUCKETS` = 64 buckets).
const BUCKET_BITS: u32 = BUCKETS.trailing_zeros();

impl Location {
    /// Cell `index`'s location; `None` for an index whose byte offset does not fit beside the
    /// bucket (above 2^51 cells on 64-bit: never a thread count).
    pub(crate) fn of(index: usize) -> Option<Location> {
        let (bucket, offset) = locate(index);
        let bytes = offset.checked_mul(size_of::<Slot>())?;
        (bytes.leading_zeros() >= BUCKET_BITS).then_some(Location((bytes << BUCKET_BITS) | bucket))
    }

    /// The packed word, for a thread-local cache (none under the model checkers).
    #[cfg_attr(any(livecount_loom, livecount_shuttle), allow(dead_code))]
    pub(crate) fn to_bits(self) -> usize {
        self.0
    }

    /// A location from [`to_bits`](Self::to_bits). Any word decodes to a bucket in range; the
    /// caller vouches that the word came from `to_bits`, or the offset may be out of its bucket.
    #[cfg_attr(any(livecount_loom, livecount_shuttle), allow(dead_code))]
    pub(crate) fn from_bits(bits: usize) -> Location {
        Location(bits)
    }

    #[inline]
    fn bucket(self) -> usize {
        self.0 & (BUCKETS - 1)
    }

    #[inline]
    fn byte_offset(self) -> usize {
        self.0 >> BUCKET_BITS
    }
}

impl<T: Default> CellTable<T> {
    pub(crate) fn new() -> Self {
        CellTable {
            high: AtomicUsize::new(0),
            buckets: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            _cells: PhantomData,
        }
    }

    /// The cell at `index`, allocating its bucket on first use.
    #[inline]
    pub(crate) fn get_or_alloc(&self, index: usize) -> &T {
        let (bucket, offset) = locate(index);
        // Acquire: pairs with the AcqRel publication in `allocate`, so the cells' initialised
        // contents are visible before we touch them.
        let mut base = self.buckets[bucket].load(Ordering::Acquire);
        if base.is_null() {
            base = self.allocate(bucket);
        }
        // SAFETY:
        // - `base` is non-null and came from `allocate`, a `Box<[Slot<T>]>` of `1 << bucket`
        //   slots;
        // - `offset < 1 << bucket` by construction of `locate`;
        // - the allocation is freed only in `Drop`, which takes `&mut self`, so it outlives the
        //   returned borrow of `self`; slots are only ever accessed through shared references.
        #[allow(unsafe_code)]
        unsafe {
            &*base.add(offset)
        }
    }

    #[cold]
    fn allocate(&self, bucket: usize) -> *mut Slot<T> {
        let len = 1usize << bucket;
        // Raise `high` before publishing the bucket, so every thread that later finds the
        // bucket through an Acquire load of its pointer has `high > bucket` happen-before its
        // own updates of these cells. Relaxed suffices: that chain runs through the pointer's
        // Release/Acquire, and the reader's load of `high` is ordered by coherence.
        self.high.fetch_max(bucket + 1, Ordering::Relaxed);
        let fresh: Box<[Slot<T>]> = (0..len).map(|_| CachePadded::new(T::default())).collect();
        let fresh = Box::into_raw(fresh).cast::<Slot<T>>();
        // AcqRel on success: Release publishes the initialised cells to every Acquire load of
        // this bucket. Acquire on failure: we adopt the winner's cells, so we need its writes.
        match self.buckets[bucket].compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY:
                // - `fresh` came from `Box::into_raw` of a `Box<[Slot<T>]>` of length `len` just
                //   above and lost the race, so it was never published and nobody else has it.
                #[allow(unsafe_code)]
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
                winner
            }
        }
    }

    /// Calls `f` on every allocated cell. Re-reads the bucket pointers on every call, so a
    /// second call sees buckets allocated since the first.
    #[inline]
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&T)) {
        // Acquire: a reader that has seen an end (Acquire) sees, by coherence, every `high`
        // raised before that end's start; Acquire keeps the bucket loads after this one.
        let high = self.high.load(Ordering::Acquire);
        for (bucket, slot) in self.buckets[..high].iter().enumerate() {
            // Acquire: pairs with the publication in `allocate` (and, transitively, with the
            // start bumps a reader must see once it has seen their ends).
            let base = slot.load(Ordering::Acquire);
            if base.is_null() {
                continue;
            }
            for offset in 0..(1usize << bucket) {
                // SAFETY: as in `get_or_alloc`: a published bucket of `1 << bucket` slots,
                // `offset` in range, freed only by `Drop` on `&mut self`.
                #[allow(unsafe_code)]
                let cell: &T = unsafe { &*base.add(offset) };
                f(cell);
            }
        }
    }
}

impl CellTable<Pair> {
    /// The cell at `at`, allocating its bucket on first use.
    #[inline]
    pub(crate) fn at(&self, at: Location) -> &Pair {
        let bucket = at.bucket();
        // Acquire: as in `get_or_alloc`.
        let mut base = self.buckets[bucket].load(Ordering::Acquire);
        if base.is_null() {
            base = self.allocate(bucket);
        }
        // SAFETY:
        // - `base` is non-null and came from `allocate`, a `Box<[Slot]>` of `1 << bucket` slots;
        // - `at` came from `Location::of` (its `from_bits` caller vouches), whose byte offset is
        //   `offset * size_of::<Slot>()` for an `offset < 1 << bucket` (by `locate`): the
        //   address is that slot's, in bounds and aligned;
        // - the allocation is freed only in `Drop`, which takes `&mut self`, so it outlives the
        //   returned borrow of `self`; slots are only ever accessed through shared references.
        #[allow(unsafe_code)]
        unsafe {
            &*base.byte_add(at.byte_offset())
        }
    }
}

impl<T> Drop for CellTable<T> {
    fn drop(&mut self) {
        for (bucket, slot) in self.buckets.iter().enumerate() {
            // Relaxed: `&mut self` means every other access has already happened-before this.
            let base = slot.load(Ordering::Relaxed);
            if !base.is_null() {
                // SAFETY:
                // - `base` was published by `allocate` from a `Box<[Slot]>` of `1 << bucket`
                //   slots and has not been freed (only `Drop` frees, and it runs once);
                // - `&mut self` guarantees no outstanding borrow of any slot.
                #[allow(unsafe_code)]
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, 1 << bucket)) });
            }
        }
    }
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn locate_packs_buckets_densely() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1), (1, 0));
        assert_eq!(locate(2), (1, 1));
        assert_eq!(locate(3), (2, 0));
        assert_eq!(locate(6), (2, 3));
        assert_eq!(locate(7), (3, 0));
        assert_eq!(locate(usize::MAX - 1), (63, (1 << 63) - 1));
    }

    #[test]
    fn a_location_finds_the_cell_of_its_index() {
        let table = CellTable::new();
        for index in [0, 1, 2, 3, 6, 7, 100, 4_095, 70_000] {
            let at = Location::of(index).expect("a thread-sized index");
            assert_eq!(Location::from_bits(at.to_bits()), at);
            assert_eq!(at.bucket(), locate(index).0, "index {index}");
            assert!(
                std::ptr::eq(table.at(at), table.get_or_alloc(index)),
                "index {index}"
            );
        }
        // Indices past what fits beside the bucket have no location.
        assert!(Location::of(usize::MAX - 1).is_none());
        assert!(Location::of(1 << 50).is_some());
    }

    #[test]
    fn cells_are_stable_and_visited_once() {
        let table = CellTable::new();
        let a = table.get_or_alloc(5) as *const Pair;
        let b = table.get_or_alloc(5) as *const Pair;
        assert_eq!(a, b);
        table.get_or_alloc(0);
        let mut visited = 0;
        table.for_each(&mut |_| visited += 1);
        // bucket 0 (1 cell) and bucket 2 (4 cells: indices 3..=6).
        assert_eq!(visited, 5);
    }
}

#[cfg(all(test, livecount_loom))]
mod loom_tests {
    use super::*;
    use crate::pair::{self, Half};
    use loom::sync::Arc;
    use loom::thread;

    /// A start lands in a bucket that another thread has just published, its end in a bucket
    /// the reader already scans. The reader must find the new bucket in its second pass, or
    /// it counts the end without its start. This is why `high` is raised before publication.
    #[test]
    fn reader_finds_a_freshly_published_bucket() {
        crate::loom_model::bounded(3, || {
            let table = Arc::new(CellTable::<Pair>::new());
            let publisher = {
                let table = Arc::clone(&table);
                thread::spawn(move || {
                    table.get_or_alloc(1);
                })
            };
            let session = {
                let table = Arc::clone(&table);
                thread::spawn(move || {
                    // Cell 2 shares bucket 1 with the publisher's cell 1.
                    table.get_or_alloc(2).add(Half::Started);
                    table.get_or_alloc(0).add(Half::Ended);
                })
            };
            let totals = pair::read(|f| table.for_each(f));
            assert!(totals.started >= totals.ended, "negative read: {totals:?}");
            publisher.join().unwrap();
            session.join().unwrap();
        });
    }
}
