//! Small, reusable thread indices.
//!
//! `std::thread::ThreadId` is never reused, so a shard picked from it drifts as threads come
//! and go, and a per-thread table indexed by it grows forever. Here a thread takes the lowest
//! free index the first time it touches a counter and gives it back when it exits, so indices
//! stay dense (`0..live threads`) and the next thread inherits the cells of the last one.
//!
//! The pool is behind a mutex: it is touched once when a thread starts counting and once when
//! it exits, never on an update.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::cell_table::Location;
use crate::index_cache;
use crate::sync::{self, Global, Mutex, thread_local};

/// Free thread indices: everything at or above `next`, plus the released ones in `free`.
#[derive(Debug)]
pub(crate) struct IdPool {
    next: usize,
    free: BinaryHeap<Reverse<usize>>,
}

impl Default for IdPool {
    fn default() -> Self {
        IdPool::new()
    }
}

impl IdPool {
    pub(crate) const fn new() -> Self {
        IdPool {
            next: 0,
            free: BinaryHeap::new(),
        }
    }

    fn acquire(&mut self) -> usize {
        match self.free.pop() {
            Some(Reverse(index)) => index,
            None => {
                let index = self.next;
                self.next += 1;
                index
            }
        }
    }

    fn release(&mut self, index: usize) {
        self.free.push(Reverse(index));
    }
}

sync::global! {
    /// The process-wide pool of reusable thread indices (fresh for every model-checker run,
    /// so thread indices are deterministic per iteration).
    fn id_pool() -> Mutex<IdPool> = Mutex::new(IdPool::new());
}

/// A thread's registration: its index and its striping probe. Dropped at thread exit.
#[derive(Debug)]
struct Registration {
    index: usize,
    probe: Cell<u32>,
    pool: Global<Mutex<IdPool>>,
}

impl Registration {
    fn new() -> Self {
        // The mutex hands the index over with happens-before: whatever the previous holder
        // wrote into cells at this index is visible to this thread, its only writer from now on.
        let pool = id_pool();
        let index = sync::lock_global(&pool).acquire();
        Registration {
            index,
            probe: Cell::new(seed_probe(index)),
            pool,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Forget the cached copy first: from here on this thread has no index.
        index_cache::set(None);
        sync::lock_global(&self.pool).release(self.index);
    }
}

thread_local! {
    static REGISTRATION: Registration = Registration::new();
}

/// The calling thread's index, or `None` while the thread is tearing down its thread-locals
/// (after its registration has been released).
#[inline]
pub(crate) fn current() -> Option<usize> {
    // Fast path: a plain thread-local word, no lazy-initialisation or destructor state.
    match index_cache::get() {
        Some(index) => Some(index),
        None => register(),
    }
}

/// Where the calling thread's cell lives in a [`CellTable`](crate::cell_table::CellTable),
/// or `None` while the thread tears down its thread-locals (then the caller counts elsewhere).
#[inline]
pub(crate) fn current_location() -> Option<Location> {
    // Fast path: as `current`, one thread-local load, and no arithmetic on the index.
    match index_cache::location() {
        Some(location) => Some(location),
        None => register().and_then(Location::of),
    }
}

/// First use on this thread (or teardown): registers, and caches the index for `current`.
#[cold]
fn register() -> Option<usize> {
    #[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
    tests::REGISTER_CALLS.with(|n| n.set(n.get() + 1));
    REGISTRATION
        .try_with(|r| {
            index_cache::set(Some(r.index));
            r.index
        })
        .ok()
}

/// The calling thread's striping probe (never zero): one thread-local load once seeded.
#[inline]
pub(crate) fn probe() -> u32 {
    match index_cache::probe() {
        Some(probe) => probe,
        None => seed(),
    }
}

/// First use on this thread (or under a model checker): the registration's probe, seeded
/// from the thread index, cached for [`probe`]. During teardown, when the registration is
/// gone, a fixed probe: every stripe is as correct as any other.
#[cold]
fn seed() -> u32 {
    let probe = REGISTRATION.try_with(|r| r.probe.get()).unwrap_or(1);
    index_cache::set_probe(probe);
    probe
}

/// Moves the calling thread's probe after a collision (xorshift, as LongAdder does) and
/// returns the new one.
#[cold]
pub(crate) fn rehash_probe(old: u32) -> u32 {
    let new = rehash(old);
    // The registration's copy is the one a model checker reads; outside one, the cache.
    let _ = REGISTRATION.try_with(|r| r.probe.set(new));
    index_cache::set_probe(new);
    new
}

/// A non-zero starting probe derived from the thread index, so that model-checked runs are
/// deterministic. Multiplying by an odd constant is a bijection modulo every power of two, so
/// threads with consecutive indices start on distinct stripes for any stripe count.
fn seed_probe(index: usize) -> u32 {
    // 2^32 / golden ratio (odd), as in Fibonacci hashing; `max(1)` keeps xorshift off zero.
    (index as u32)
        .wrapping_add(1)
        .wrapping_mul(0x9E37_79B9)
        .max(1)
}

/// Advances a probe with Marsaglia's xorshift32 (the generator LongAdder uses on collision).
#[inline]
fn rehash(probe: u32) -> u32 {
    let mut x = probe;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
mod tests {
    use super::*;

    std::thread_local! {
        /// How often this thread took `current`'s slow path.
        pub(super) static REGISTER_CALLS: Cell<usize> = const { Cell::new(0) };
    }

    /// The index cache is what keeps `current` to one thread-local load: after the first
    /// call registers, no later call on the thread takes the slow path again.
    #[test]
    fn only_the_first_lookup_on_a_thread_registers() {
        std::thread::spawn(|| {
            let first = current();
            for _ in 0..1_000 {
                assert_eq!(current(), first);
            }
            assert_eq!(REGISTER_CALLS.with(Cell::get), 1);
        })
        .join()
        .unwrap();
    }

    /// The located fast path `PerThread` takes is cached too, and agrees with the index.
    #[test]
    fn locations_are_cached_and_match_the_index() {
        std::thread::spawn(|| {
            let at = current_location().expect("a live thread has a location");
            for _ in 0..1_000 {
                assert_eq!(current_location(), Some(at));
            }
            assert_eq!(REGISTER_CALLS.with(Cell::get), 1);
            assert_eq!(Location::of(current().unwrap()), Some(at));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pool_hands_out_the_lowest_free_index() {
        let mut pool = IdPool::new();
        assert_eq!((pool.acquire(), pool.acquire(), pool.acquire()), (0, 1, 2));
        pool.release(1);
        pool.release(0);
        assert_eq!(pool.acquire(), 0);
        assert_eq!(pool.acquire(), 1);
        assert_eq!(pool.acquire(), 3);
    }

    #[test]
    fn an_exited_threads_index_is_reused() {
        let first = std::thread::spawn(|| current().unwrap()).join().unwrap();
        // Other tests run concurrently and hold indices, so only check that indices stay dense.
        let second = std::thread::spawn(|| current().unwrap()).join().unwrap();
        let live_bound = 64;
        assert!(
            first < live_bound && second < live_bound,
            "{first} {second}"
        );
    }

    /// The probe is seeded from the thread's index once, then read from the cache; a rehash
    /// moves it, and the next read sees the moved one (a stale probe would keep colliding).
    #[test]
    fn the_probe_is_cached_and_follows_its_rehash() {
        std::thread::spawn(|| {
            let first = probe();
            assert_eq!(first, seed_probe(current().unwrap()));
            assert_eq!(index_cache::probe(), Some(first));
            let moved = rehash_probe(first);
            assert_ne!(moved, first);
            assert_eq!((probe(), probe()), (moved, moved));
            assert_eq!(REGISTRATION.with(|r| r.probe.get()), moved);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn rehash_never_reaches_zero_from_a_nonzero_probe() {
        let mut p = seed_probe(0);
        for _ in 0..100_000 {
            p = rehash(p);
            assert_ne!(p, 0);
        }
    }
}
