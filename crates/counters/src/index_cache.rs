//! A copy of the calling thread's index (and of its striping probe) in `const`-initialised
//! thread-locals without a destructor: reading one is one thread-local load, with no
//! initialisation or teardown state to check. The thread's registration (`thread_id`), which
//! owns the index, fills and clears the index; `thread_id` seeds and moves the probe.
//!
//! Under a model checker the cache stands aside (every lookup misses and goes through the
//! registration, whose thread-local is the one the checker models): a plain `std`
//! thread-local is not one per modelled thread there ([`MODEL_CHECKED`]).

use std::cell::Cell;

use crate::cell_table::Location;
use crate::sync::MODEL_CHECKED;

// `std`'s macro on purpose, not the shim's: the cache must cost one plain load, and a model
// checker never reads it (see `MODEL_CHECKED` in every function below).
std::thread_local! {
    static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The index's `Location` bits (`usize::MAX`: none): what `PerThread` reads.
    static LOCATION: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The thread's striping probe for `Striped` (0: not seeded yet). Never cleared: any
    /// probe is a correct one, so it stays usable while the thread tears down.
    static PROBE: Cell<u32> = const { Cell::new(0) };
}

/// The cached index, or `None` if the thread has none cached (not yet registered, or tearing
/// down, or under a model checker).
#[inline]
pub(crate) fn get() -> Option<usize> {
    if MODEL_CHECKED {
        return None;
    }
    let index = INDEX.get();
    (index != usize::MAX).then_some(index)
}

/// The cached index's cell location, under the same conditions as [`get`].
#[inline]
pub(crate) fn location() -> Option<Location> {
    if MODEL_CHECKED {
        return None;
    }
    let bits = LOCATION.get();
    // `usize::MAX` is no location's bits: its offset would not fit beside the bucket.
    (bits != usize::MAX).then(|| Location::from_bits(bits))
}

/// Caches `index` (and its location) for the calling thread, or forgets it (`None`).
#[inline]
pub(crate) fn set(index: Option<usize>) {
    if MODEL_CHECKED {
        return;
    }
    INDEX.set(index.unwrap_or(usize::MAX));
    let location = index.and_then(Location::of);
    LOCATION.set(location.map_or(usize::MAX, Location::to_bits));
}

/// The cached striping probe, or `None` if it is not seeded yet (or under a model checker).
#[inline]
pub(crate) fn probe() -> Option<u32> {
    if MODEL_CHECKED {
        return None;
    }
    let probe = PROBE.get();
    (probe != 0).then_some(probe)
}

/// Caches `probe` (non-zero) as the calling thread's striping probe.
#[inline]
pub(crate) fn set_probe(probe: u32) {
    if MODEL_CHECKED {
        return;
    }
    PROBE.set(probe);
}
