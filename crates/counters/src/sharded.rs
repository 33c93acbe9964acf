//! [`Sharded`]: a fixed array of cache-padded monotone pairs, one shard per thread index.

use crossbeam_utils::CachePadded;

use crate::counter::Issuer;
use crate::pair::{self, Half, Pair};
use crate::{Totals, thread_id};

/// A fixed, power-of-two array of cache-padded [`started`, `ended`] pairs. A thread updates
/// the shard of its *reusable* thread index (the lowest index free when it first counted),
/// so up to `shards` threads never share a line, and indices do not drift as threads churn.
///
/// A session may end on any thread: its end is counted on the ending thread's shard, and the
/// read sums all `ended` before all `started` (see [`Counter`](crate::Counter)'s gauge read guarantee), so a
/// cross-shard end can never make the read negative or hide an open session.
///
/// # Performance characteristics
///
/// One `lock xadd` per update on a line that only this thread writes while live threads ≤
/// shards; threads beyond that share shards (still correct, some line bouncing). Reads load
/// `2 × shards` words. `128 × shards` bytes, fixed at construction (default: twice the
/// available parallelism, rounded up to a power of two).
///
/// # Examples
///
/// ```
/// use livecount::{Counter, Sharded};
/// use std::sync::Arc;
///
/// let sessions = Arc::new(Sharded::with_shards(8));
/// let token = sessions.increment();
/// let remote = Arc::clone(&sessions);
/// // The session ends on another thread, landing on another shard.
/// std::thread::spawn(move || remote.decrement(token)).join().unwrap();
/// assert_eq!(sessions.load(), 0);
/// assert_eq!(sessions.totals().unwrap().started, 1);
/// ```
#[derive(Debug)]
pub struct Sharded {
    shards: Box<[CachePadded<Pair>]>,
    /// `shards.len() - 1`; the length is a power of two.
    mask: usize,
    issuer: Issuer,
}

impl Sharded {
    /// A counter with twice the available parallelism in shards, rounded up to a power of two.
    ///
    /// ```
    /// use livecount::Sharded;
    /// assert!(Sharded::new().shards() >= 2);
    /// ```
    pub fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        Sharded::with_shards(2 * cpus)
    }

    /// A counter with `shards` shards, rounded up to a power of two (at least 1).
    ///
    /// ```
    /// use livecount::Sharded;
    /// assert_eq!(Sharded::with_shards(5).shards(), 8);
    /// assert_eq!(Sharded::with_shards(0).shards(), 1);
    /// ```
    pub fn with_shards(shards: usize) -> Self {
        let len = shards.max(1).next_power_of_two();
        Sharded {
            shards: (0..len).map(|_| CachePadded::new(Pair::new())).collect(),
            mask: len - 1,
            issuer: Issuer::new(),
        }
    }

    /// The number of shards.
    ///
    /// ```
    /// use livecount::Sharded;
    /// assert_eq!(Sharded::with_shards(4).shards(), 4);
    /// ```
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    #[inline]
    fn bump(&self, half: Half) {
        // During thread teardown the index is gone: shard 0 is as correct as any other, since
        // every shard takes locked read-modify-writes.
        let index = thread_id::current().unwrap_or(0);
        self.shards[index & self.mask].add(half);
    }
}

impl Default for Sharded {
    fn default() -> Self {
        Sharded::new()
    }
}

pair::counter!(Sharded);

impl Sharded {
    fn read(&self) -> Totals {
        pair::read(|f| self.shards.iter().for_each(|shard| f(shard)))
    }
}
