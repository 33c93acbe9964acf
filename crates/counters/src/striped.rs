//! [`Striped`]: LongAdder-style striping — a base cell, then stripe tables grown by doubling.

use std::ptr;

use crossbeam_utils::CachePadded;

use crate::counter::Issuer;
use crate::pair::{self, Half, Pair};
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};
use crate::{Totals, thread_id};

/// One stripe: a monotone pair on its own cache line.
type Stripe = CachePadded<Pair>;

/// The most stripes a counter grows to: 2^15 (4 MiB of stripes).
const MAX_LOG2: usize = 15;

/// Tables a counter can grow through: table `g` holds `2^(g + 1)` stripes.
const TABLES: usize = MAX_LOG2;

/// The low bits of a table pointer, which carry log2 of its stripe count: a table is an array
/// of `Stripe`s, aligned to `align_of::<Stripe>()` (128 bytes on x86-64, at least 16 on any
/// target `crossbeam_utils` supports), so those bits of its address are always zero.
const TAG: usize = align_of::<Stripe>() - 1;
const _: () = assert!(
    TAG >= MAX_LOG2,
    "a stripe's alignment must leave room for the tag"
);

/// Java's `LongAdder` design, for a gauge: updates go to one cache-padded base pair while it
/// is uncontended; the first failed compare-and-swap on the base opens a table of two
/// cache-padded stripes, and every later collision on a stripe rehashes the thread's probe
/// (xorshift, seeded from its thread index) and doubles the stripes, up to a cap. Stripes are
/// never moved or freed while the counter lives (no lost update when it grows).
///
/// Every cell is a monotone [`started`, `ended`] pair and a read sums all `ended` before all
/// `started`, so the gauge read guarantee of [`Counter`](crate::Counter) holds even though a
/// session's start and end may land on different stripes.
///
/// # Performance characteristics
///
/// A start is a load and one `lock cmpxchg` on the base, or, once striped, on the stripe its
/// thread's probe picks; an end is one `lock xadd` on the same cell. Contention is detected
/// on starts only: every session has both, so starts see every contended line, and an end
/// needs no compare-and-swap to tell. Finding the stripe costs what finding a shard costs
/// [`Sharded`](crate::Sharded): the table pointer and the mask (loaded side by side from the
/// counter), the probe (one thread-local load), an `and`. A collision (a failed CAS) rehashes
/// the probe, doubles the stripes below the cap, and lands with one `lock xadd`.
///
/// [`new`](Striped::new) caps the stripes at twice the CPUs, as `Sharded` sizes its shards,
/// where `LongAdder` stops at the CPU count ([`with_max_stripes`](Striped::with_max_stripes)
/// gives that): threads are not bound to CPUs, and with more threads than cores two threads
/// that share a stripe keep meeting on the cores and rehashing.
///
/// Growing allocates a fresh table of twice the stripes; the old one stays, still counted by
/// reads but no longer written, so no stripe ever moves. Memory grows only under contention:
/// 128 bytes for the base, then 128 bytes per stripe of every table opened (2 + 4 + … + the
/// cap, under twice the cap), plus 136 bytes of table pointers and mask in the counter
/// itself. Reads load the base and every stripe of every table, twice.
///
/// The monotone pair costs nothing on the update path: a start bumps `started`, an end
/// `ended`, one locked instruction each, exactly as one signed cell would (and two halves on
/// one line run faster than one word taking both: an end does not wait on its own start's
/// locked write to the same word). It costs the read a second word per cell.
///
/// Side by side with `Sharded`, `Single` and Java's `LongAdder` (`scripts/longadder.sh` in
/// the repository; the committed run is `results/intel-r-xeon-r-processor-2c/anchors.md`):
/// level with `Sharded` where neither is contended, since both then do the same work per
/// update, and ahead of `LongAdder`, whose cells hold one signed value, so that an increment
/// and its decrement serialise on one word. The tie with `Sharded` depends on the update path
/// staying that short: the update inlined whole, the probe a plain `const` thread-local (no
/// lazy initialisation, no destructor), the stripe found by one mask; with a call, a lazily
/// initialised probe and a bucket table's arithmetic instead, `Striped` fell clearly behind.
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
    /// The newest table's first stripe, tagged with log2 of its stripe count (see [`TAG`]);
    /// null until the base is first contended. Only ever moves to a bigger table.
    head: AtomicPtr<Stripe>,
    /// The stripe mask updates use: raised (only ever) after `head` points into a table that
    /// big, so whatever `head` an update loads after it has at least `mask + 1` stripes. Kept
    /// apart from the tag so the hot path masks with one `and`, no shift by a variable.
    mask: AtomicUsize,
    /// Every table opened so far: table `g` holds `2^(g + 1)` stripes. Filled in order, each
    /// before `head` points into it; freed on drop.
    tables: [AtomicPtr<Stripe>; TABLES],
    /// log2 of the cap on stripes.
    cap_log2: usize,
    /// This counter's identity, carried by its tokens (debug builds).
    issuer: Issuer,
}

impl Striped {
    /// A counter whose stripes stop growing at twice the available parallelism, rounded up to
    /// a power of two (see the type's docs for why twice).
    ///
    /// ```
    /// use livecount::{Counter, Striped};
    /// let sessions = Striped::new();
    /// assert_eq!(sessions.stripes(), 0); // nothing contended yet
    /// assert!(sessions.max_stripes() >= 2);
    /// ```
    pub fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        Striped::with_max_stripes(2 * cpus)
    }

    /// A counter whose stripes stop growing at `max`, rounded up to a power of two (at least
    /// 2, at most 2^15).
    ///
    /// ```
    /// use livecount::Striped;
    /// assert_eq!(Striped::with_max_stripes(3).max_stripes(), 4);
    /// assert_eq!(Striped::with_max_stripes(usize::MAX).max_stripes(), 1 << 15);
    /// ```
    pub fn with_max_stripes(max: usize) -> Self {
        let cap = max.clamp(2, 1 << MAX_LOG2).next_power_of_two();
        Striped {
            base: CachePadded::new(Pair::new()),
            head: AtomicPtr::new(ptr::null_mut()),
            mask: AtomicUsize::new(0),
            tables: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            cap_log2: cap.trailing_zeros() as usize,
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
        // Relaxed: an informational snapshot of a pointer that only grows.
        let head = self.head.load(Ordering::Relaxed);
        if head.is_null() { 0 } else { 1 << log2(head) }
    }

    /// The cap on stripes.
    ///
    /// ```
    /// use livecount::Striped;
    /// assert_eq!(Striped::with_max_stripes(16).max_stripes(), 16);
    /// assert_eq!(Striped::with_max_stripes(0).max_stripes(), 2);
    /// ```
    pub fn max_stripes(&self) -> usize {
        1 << self.cap_log2
    }

    /// The hot path: a start is a CAS on the base until it is contended, then on the probe's
    /// stripe; an end is a locked add on the same cell (contention shows on the starts).
    #[inline]
    fn bump(&self, half: Half) {
        // Acquire, before `head`: pairs with the Release in `grow`, so the `head` loaded next
        // points into a table of at least `mask + 1` stripes.
        let mask = self.mask.load(Ordering::Acquire);
        // Acquire: pairs with the Release in `grow`, so the stripes of the table we are about
        // to write are initialised before we touch them.
        let head = self.head.load(Ordering::Acquire);
        if half == Half::Ended {
            // Ends are as many as starts and hit the same lines, so detecting contention on
            // starts alone sees every contended line; an end needs no CAS to tell.
            return match head.is_null() {
                true => self.base.add(half),
                false => self.stripe(head, mask, thread_id::probe()).add(half),
            };
        }
        if head.is_null() {
            if !try_bump(&self.base, half) {
                self.open(half);
            }
            return;
        }
        let probe = thread_id::probe();
        if !try_bump(self.stripe(head, mask, probe), half) {
            self.collided(head, probe, half);
        }
    }

    /// The base was contended: open the first table, then count on the probe's stripe.
    #[cold]
    #[inline(never)]
    fn open(&self, half: Half) {
        let head = self.grow(ptr::null_mut());
        self.stripe(head, whole(head), thread_id::probe()).add(half);
    }

    /// Another thread updated this stripe between our load and our CAS. Move this thread's
    /// probe elsewhere, and double the stripes unless they are at the cap. At the cap the
    /// rehash still matters (LongAdder keeps rehashing there too): with more threads than
    /// stripes, two threads running at once that share a stripe would otherwise bounce its
    /// line for as long as both live; rehashing on each collision moves them apart, as the
    /// scheduler moves threads on and off the cores. A locked add then always lands.
    #[cold]
    #[inline(never)]
    fn collided(&self, head: *mut Stripe, probe: u32, half: Half) {
        let probe = thread_id::rehash_probe(probe);
        let head = if log2(head) < self.cap_log2 {
            self.grow(head)
        } else {
            head
        };
        self.stripe(head, whole(head), probe).add(half);
    }

    /// Replaces `seen` (null: no table yet) by a table of twice its stripes, or adopts the
    /// table another thread put there first; returns the head now in place (`seen`'s
    /// successor or a later one).
    fn grow(&self, seen: *mut Stripe) -> *mut Stripe {
        // Table `g` holds 2^(g + 1) stripes: the first is table 0, of two.
        let next = if seen.is_null() { 0 } else { log2(seen) };
        let table = self.table(next);
        let tagged = table.map_addr(|a| a | (next + 1));
        // Release on success: publishes the table (through `table`'s own Acquire load) to
        // every Acquire load of `head` in `bump`. Acquire on failure: we adopt the newer head.
        let now =
            match self
                .head
                .compare_exchange(seen, tagged, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => tagged,
                Err(newer) => newer,
            };
        // Release: pairs with the Acquire in `bump`; raised only after `head` points into a
        // table this big (this CAS, or the one we lost to), and `fetch_max` never lowers it.
        self.mask.fetch_max(whole(now), Ordering::Release);
        now
    }

    /// Table `g` (of `2^(g + 1)` stripes), allocated now if no thread has yet.
    fn table(&self, g: usize) -> *mut Stripe {
        let slot = &self.tables[g];
        // Acquire: pairs with the publication below, so the winner's stripes are initialised.
        let existing = slot.load(Ordering::Acquire);
        if !existing.is_null() {
            return existing;
        }
        let len = 2usize << g;
        let fresh: Box<[Stripe]> = (0..len).map(|_| CachePadded::new(Pair::new())).collect();
        let fresh = Box::into_raw(fresh).cast::<Stripe>();
        // AcqRel on success: Release publishes the initialised stripes to every Acquire load
        // of this slot (reads, and `grow`'s head through its own Release). Acquire on
        // failure: we adopt the winner's stripes, so we need its writes.
        match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY:
                // - `fresh` came from `Box::into_raw` of a `Box<[Stripe]>` of length `len` just
                //   above and lost the race, so it was never published and nobody else has it.
                #[allow(unsafe_code)]
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
                winner
            }
        }
    }

    /// The stripe `probe & mask` of the table `head` (non-null, loaded from `self.head`)
    /// points into; `mask` must be at most [`whole`]`(head)`, as `self.mask` loaded before
    /// `head` is.
    #[inline]
    fn stripe(&self, head: *mut Stripe, mask: usize, probe: u32) -> &Pair {
        debug_assert!(mask <= whole(head), "a mask past its table");
        let first = head.map_addr(|a| a & !TAG);
        // SAFETY:
        // - `head` came from `grow` on this counter: a table of `whole(head) + 1` stripes
        //   allocated by `table`, tagged with its log2 in bits the table's alignment leaves
        //   zero; `first` is that table's first stripe, and `probe & mask ≤ whole(head)`
        //   indexes inside it (the caller's `mask` bound: see `Striped::mask`);
        // - tables are freed only in `Drop`, which takes `&mut self`, so the table outlives
        //   the returned borrow of `self`; stripes are only accessed through shared references.
        #[allow(unsafe_code)]
        unsafe {
            &*first.add(probe as usize & mask)
        }
    }

    fn read(&self) -> Totals {
        pair::read(|f| {
            f(&self.base);
            self.for_each_stripe(f);
        })
    }

    /// Calls `f` on every stripe of every table opened so far. Re-reads the table slots on
    /// every call, so a later pass of a read finds tables opened since the first.
    fn for_each_stripe(&self, f: &mut dyn FnMut(&Pair)) {
        for (g, slot) in self.tables[..self.cap_log2].iter().enumerate() {
            // Acquire: pairs with the publication in `table`; and a start on a table this
            // pass must find was written after its writer loaded `head`, which the Release
            // chain (table slot → head → the start → its end, seen by this read's Acquire
            // `ended` pass) makes this load see.
            let table = slot.load(Ordering::Acquire);
            if table.is_null() {
                continue;
            }
            for i in 0..(2usize << g) {
                // SAFETY: a published table of `2 << g` stripes, `i` in range, freed only by
                // `Drop`, which takes `&mut self`.
                #[allow(unsafe_code)]
                let stripe: &Stripe = unsafe { &*table.add(i) };
                f(stripe);
            }
        }
    }
}

/// log2 of the stripe count of the table `head` points into (its tag).
#[inline]
fn log2(head: *mut Stripe) -> usize {
    head.addr() & TAG
}

/// The mask of every stripe of the table `head` (non-null) points into.
#[inline]
fn whole(head: *mut Stripe) -> usize {
    (1 << log2(head)) - 1
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

impl Drop for Striped {
    fn drop(&mut self) {
        for (g, slot) in self.tables.iter().enumerate() {
            // Relaxed: `&mut self` means every other access has already happened-before this.
            let table = slot.load(Ordering::Relaxed);
            if !table.is_null() {
                // SAFETY:
                // - `table` was published by `Striped::table` from a `Box<[Stripe]>` of
                //   `2 << g` stripes and has not been freed (only `Drop` frees, once);
                // - `&mut self` guarantees no outstanding borrow of any stripe.
                #[allow(unsafe_code)]
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(table, 2 << g)) });
            }
        }
    }
}

pair::counter!(Striped);

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Counter;

    /// How many tables `counter` has opened.
    fn tables(counter: &Striped) -> usize {
        let opened = |slot: &AtomicPtr<Stripe>| !slot.load(Ordering::Relaxed).is_null();
        counter.tables.iter().filter(|slot| opened(slot)).count()
    }

    /// Contended at its cap of 2 stripes, a `Striped` only ever opens its first table (of
    /// two): collisions at the cap rehash probes all over the `u32` range, and a wrong mask
    /// or a growth past the cap would write or open stripes no read needs.
    #[test]
    fn stripes_stay_within_their_table() {
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
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(counter.stripes(), 2);
        assert_eq!(tables(&counter), 1);
        assert_eq!(counter.load(), 0);
    }

    /// Growth by hand, one thread: each `grow` doubles the stripes and opens the next table;
    /// every table's stripes are read, old and new, so counts written before a growth stay.
    #[test]
    fn growing_keeps_every_table_counted() {
        let counter = Striped::with_max_stripes(8);
        let mut head = ptr::null_mut();
        for (g, stripes) in [2, 4, 8].into_iter().enumerate() {
            head = counter.grow(head);
            assert_eq!((counter.stripes(), tables(&counter)), (stripes, g + 1));
            // Updates mask with the whole table: every stripe of it is in use.
            assert_eq!(counter.mask.load(Ordering::Relaxed), stripes - 1);
            // A start on every stripe of this table (each probe its own stripe); the ends go
            // to the base.
            let mut seen = std::collections::HashSet::new();
            for probe in 0..stripes as u32 {
                let stripe = counter.stripe(head, whole(head), probe);
                assert!(
                    seen.insert(stripe as *const Pair),
                    "probe {probe}: a stripe twice"
                );
                stripe.add(Half::Started);
            }
        }
        assert_eq!(counter.totals().unwrap().started, 2 + 4 + 8);
        for _ in 0..14 {
            counter.base.add(Half::Ended);
        }
        assert_eq!(counter.load(), 0);
        // A stale head (another thread grew first) adopts the newer one, never goes back.
        let first = counter.tables[0]
            .load(Ordering::Relaxed)
            .map_addr(|a| a | 1);
        assert_eq!(counter.grow(first), head);
        assert_eq!(counter.stripes(), 8);
    }

    /// A probe picks a stripe inside the table whatever its bits: the mask follows the tag.
    #[test]
    fn a_probe_stays_inside_its_table() {
        let counter = Striped::with_max_stripes(4);
        let two = counter.grow(ptr::null_mut());
        let base = two.map_addr(|a| a & !TAG);
        for probe in [0, 1, 2, 3, 0xFFFF_FFFF] {
            let at = counter.stripe(two, whole(two), probe) as *const Pair as usize;
            let offset = (at - base.addr()) / size_of::<Stripe>();
            assert_eq!(offset, probe as usize & 1, "probe {probe:#x}");
        }
    }
}
