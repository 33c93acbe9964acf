//! `Registry`: live sessions in a `sharded-slab`, plus a journal of their keys to walk.
//!
//! `sharded-slab` gives lock-free insert / get / remove from any thread, generation-tagged
//! keys (a stale [`SessionId`](crate::SessionId) never finds a newer session) and slot reuse,
//! but iterating it needs `&mut`. So every key also goes into a *journal*: a few cache-padded
//! `Vec`s behind mutexes. A `start` pushes its key with `try_lock` on its thread's journal
//! shard and moves on to the next shard if that one is busy, so it never waits; `end` does
//! not touch the journal at all (the winner removes the slab entry, the key goes stale).
//! Walkers (the reaper, `sessions()`) take a shard's keys out in O(1), look each one up in the
//! slab *outside* the lock, and put the survivors back. Stale keys are dropped by walkers, and
//! by a `start` that finds its shard's journal twice as long as after the last clean-up
//! (amortised O(1) per start), so the journal stays proportional to the live sessions even
//! if nothing ever walks it.
//!
//! The journal uses `std` mutexes even under `livecount_loom`: no loom operation runs while one
//! is held, so to loom each critical section is a single step.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use livecount::Counter;
use sharded_slab::Slab;

use crate::clock::CoarseClock;
use crate::lifecycle::Lifecycle;
use crate::start_error::StartError;
use crate::sync::shard_hint;
use crate::tally::Tally;

/// Everything known about one session; shared by its guard, its handles and the registry.
pub(crate) struct Core<C: Counter, M> {
    pub(crate) life: Lifecycle<C>,
    pub(crate) tracker: Arc<Shared<C, M>>,
    pub(crate) key: usize,
    pub(crate) started_at: Instant,
    /// Nanoseconds from `started_at` to the last activity. `std` atomic, Relaxed: a hint for
    /// the reaper, not part of the ending protocol.
    last_activity: StdAtomicU64,
    pub(crate) metadata: Option<M>,
}

/// The tracker's state, shared by the tracker handles and every session.
pub(crate) struct Shared<C: Counter, M> {
    pub(crate) tally: Tally<C>,
    pub(crate) registry: Registry<C, M>,
    /// The next snapshot's sequence number.
    pub(crate) sequence: StdAtomicU64,
    /// Start and activity instants, at tick precision.
    pub(crate) clock: CoarseClock,
}

impl<C: Counter, M> Core<C, M> {
    /// Records activity at `now`.
    pub(crate) fn touch_at(&self, now: Instant) {
        let nanos = now.saturating_duration_since(self.started_at).as_nanos();
        // Relaxed: a monotone-enough hint; `fetch_max` so a late, older touch cannot undo a newer.
        self.last_activity.fetch_max(
            u64::try_from(nanos).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The instant of the last recorded activity (the start, if none).
    pub(crate) fn last_activity(&self) -> Instant {
        let nanos = self
            .last_activity
            .load(std::sync::atomic::Ordering::Relaxed);
        self.started_at + Duration::from_nanos(nanos)
    }

    /// Ends the session for `reason`; the winner also unregisters it.
    pub(crate) fn end(&self, reason: crate::EndReason) -> bool {
        let won = self.life.end(reason, &self.tracker.tally);
        if won {
            self.tracker.registry.slab.remove(self.key);
        }
        won
    }
}

/// A journal shard: keys pushed since the last clean-up, and when to clean up next.
#[derive(Debug, Default)]
struct Keys {
    keys: Vec<usize>,
    compact_at: usize,
}

/// The smallest journal shard worth cleaning up.
const MIN_COMPACT: usize = 64;

/// Live sessions: a slab of session cores and a journal of their keys.
pub(crate) struct Registry<C: Counter, M> {
    slab: Slab<Arc<Core<C, M>>>,
    journal: Box<[CachePadded<Mutex<Keys>>]>,
    /// Serialises walkers, so no walker misses keys another one has taken out. Never taken by
    /// `start` or `end`.
    walk: Mutex<()>,
}

impl<C: Counter, M> Registry<C, M> {
    pub(crate) fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        Registry {
            slab: Slab::new(),
            journal: (0..(2 * cpus).next_power_of_two())
                .map(|_| CachePadded::new(Mutex::new(Keys::default())))
                .collect(),
            walk: Mutex::new(()),
        }
    }

    /// Starts a session: counts it, stores it, journals its key. Nothing is counted if there
    /// is no slot for it.
    ///
    /// `sharded-slab` gives each thread that touches a slab a process-wide thread index below
    /// its `DefaultConfig::MAX_THREADS` (4096), reused once the thread exits, and *panics* on a
    /// thread past that limit instead of returning `None`. That panic is caught here (the
    /// slab has changed nothing when it fires: it comes from the index registration) and
    /// reported as [`StartError::ThreadLimit`]; the panic hook has printed it by then.
    pub(crate) fn start(
        shared: &Arc<Shared<C, M>>,
        metadata: Option<M>,
        now: Instant,
    ) -> Result<Arc<Core<C, M>>, StartError> {
        let registry = &shared.registry;
        // Reserve the slot first, so a full slab fails before anything is counted.
        let vacant = std::panic::catch_unwind(AssertUnwindSafe(|| registry.slab.vacant_entry()))
            .map_err(|_| StartError::ThreadLimit)?
            .ok_or(StartError::Full)?;
        let key = vacant.key();
        let core = Arc::new(Core {
            life: Lifecycle::start(&shared.tally),
            tracker: Arc::clone(shared),
            key,
            started_at: now,
            last_activity: StdAtomicU64::new(0),
            metadata,
        });
        vacant.insert(Arc::clone(&core));
        registry.journal_push(key);
        Ok(core)
    }

    /// The live session with this key, if any.
    pub(crate) fn get(&self, key: usize) -> Option<Arc<Core<C, M>>> {
        let core = self.slab.get(key)?;
        (core.life.phase().is_some()).then(|| Arc::clone(&core))
    }

    fn journal_push(&self, key: usize) {
        let shards = self.journal.len();
        let mut index = shard_hint();
        loop {
            let shard = &self.journal[index & (shards - 1)];
            let mut keys = match shard.try_lock() {
                Ok(keys) => keys,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // Busy (a walker putting keys back, another start): never wait, try the next.
                Err(TryLockError::WouldBlock) => {
                    index = index.wrapping_add(1);
                    continue;
                }
            };
            keys.keys.push(key);
            if keys.keys.len() >= keys.compact_at.max(MIN_COMPACT) {
                // Only presence: no `Arc` clone per key. An ended session whose winner has
                // not removed it yet stays one more round; a stale key finds nothing.
                keys.keys.retain(|&key| self.slab.contains(key));
                keys.compact_at = 2 * keys.keys.len();
            }
            return;
        }
    }

    /// Calls `f` on every session live when the walk reaches it. Sessions started during the
    /// walk may be missed. Never blocks `start` or `end`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<Core<C, M>>)) {
        let _walker = self.walk.lock().unwrap_or_else(PoisonError::into_inner);
        for shard in self.journal.iter() {
            let taken = std::mem::take(&mut lock(shard).keys);
            let mut survivors = Vec::with_capacity(taken.len());
            for key in taken {
                if let Some(core) = self.get(key) {
                    f(&core);
                    if core.life.phase().is_some() {
                        survivors.push(key);
                    }
                }
            }
            let mut keys = lock(shard);
            // Keys pushed while we walked go after the survivors: O(new) under the lock.
            survivors.append(&mut keys.keys);
            keys.compact_at = 2 * survivors.len();
            keys.keys = survivors;
        }
    }
}

impl<C: Counter, M> fmt::Debug for Core<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("key", &self.key)
            .field("life", &self.life)
            .finish_non_exhaustive()
    }
}

impl<C: Counter, M> fmt::Debug for Shared<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("tally", &self.tally)
            .finish_non_exhaustive()
    }
}

impl<C: Counter, M> fmt::Debug for Registry<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

fn lock(shard: &Mutex<Keys>) -> std::sync::MutexGuard<'_, Keys> {
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}
