//! Where the recorded writes go: a map per thread (no shared state on the recording path but
//! the last-writer table), handed to the current [`Recording`] when the thread flushes or
//! exits.
//!
//! Each thread keeps its writes as (64-byte line, the source line that wrote) → count and
//! (64-byte line, the CPU it ran on) → count. The analysis folds lines into 128-byte blocks where it wants the
//! adjacent-line prefetcher's view (see the module docs of [`super`]).
//!
//! Observed transfers: a fixed table maps each line (hashed) to the last thread that wrote
//! it; a write that finds another thread there is a transfer, the line changing owner. Two
//! lines hashing to one entry evict each other (the entry keeps the line, so an eviction is
//! never mistaken for a transfer, only missed).

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Bytes of a recorded line (x86-64's cache line).
pub const LINE_BYTES: usize = 64;

/// One recorded key: which line, which source line. The thread is the map's.
pub(super) type Key = (usize, &'static Location<'static>);

/// What one thread recorded.
#[derive(Debug, Default)]
pub(super) struct Records {
    /// The writing thread (numbered from 1 in the order threads first wrote in a recording).
    pub(super) thread: u32,
    /// Writes per (line: address / [`LINE_BYTES`], source line).
    pub(super) writes: HashMap<Key, u64>,
    /// Writes per (line, the CPU the thread ran on: `sched_getcpu`, 0 where there is none).
    pub(super) cpus: HashMap<(usize, u32), u64>,
    /// Observed transfers per line: writes that took the line from another thread.
    pub(super) transfers: HashMap<usize, u64>,
    /// Times this thread's CPU changed between two of its writes.
    pub(super) migrations: u64,
}

/// Whether a recording is running (writes outside one are not kept).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The current recording's number: records of an older one are dropped, never mixed in.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The next thread number.
static NEXT_THREAD: AtomicU32 = AtomicU32::new(1);
/// Records handed over by threads that flushed or exited during the current recording.
static FLUSHED: Mutex<Vec<Records>> = Mutex::new(Vec::new());
/// One recording at a time.
static RUNNING: Mutex<()> = Mutex::new(());

/// Entries of the last-writer table (2 MiB).
const OWNERS: usize = 1 << 18;
/// Bits of a last-writer entry holding the thread; the line is above them.
const THREAD_BITS: u32 = 22;
static OWNERS_TABLE: [AtomicU64; OWNERS] = [const { AtomicU64::new(0) }; OWNERS];

/// This thread's records, in the recording `epoch`.
struct Local {
    epoch: u64,
    thread: u32,
    last_cpu: Option<u32>,
    records: Records,
}

impl Drop for Local {
    fn drop(&mut self) {
        hand_over(self);
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local {
        epoch: 0,
        thread: 0,
        last_cpu: None,
        records: Records::default(),
    });
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records a write of the byte at `addr` by the source line `site`. Called by the shims'
/// atomics (and the session crate's `UnsafeCell::with_mut`) before the write.
#[inline(never)]
pub fn record(addr: usize, site: &'static Location<'static>) {
    // Relaxed: a recording starts before its threads (spawned after it) and ends after they
    // are joined; the flag only keeps writes outside any recording out.
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    // A thread tearing down its thread-locals records nothing more.
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            local.write(addr / LINE_BYTES, site);
        }
    });
}

impl Local {
    fn write(&mut self, line: usize, site: &'static Location<'static>) {
        let epoch = EPOCH.load(Ordering::Relaxed);
        if self.epoch != epoch {
            self.epoch = epoch;
            self.thread = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            self.last_cpu = None;
            self.records = Records::default();
        }
        self.records.thread = self.thread;
        let cpu = current_cpu();
        if self.last_cpu.is_some_and(|last| last != cpu) {
            self.records.migrations += 1;
        }
        self.last_cpu = Some(cpu);
        *self.records.writes.entry((line, site)).or_default() += 1;
        *self.records.cpus.entry((line, cpu)).or_default() += 1;
        if took_line(line, self.thread) {
            *self.records.transfers.entry(line).or_default() += 1;
        }
    }
}

/// Marks `thread` as `line`'s last writer; `true` if another thread was.
fn took_line(line: usize, thread: u32) -> bool {
    let entry = &OWNERS_TABLE[line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 18)];
    let tag = (line as u64) << THREAD_BITS | u64::from(thread);
    // Relaxed: a statistic; the entry's line part tells an eviction from a transfer.
    let last = entry.swap(tag, Ordering::Relaxed);
    last >> THREAD_BITS == tag >> THREAD_BITS && last != tag
}

#[cfg(target_os = "linux")]
fn current_cpu() -> u32 {
    // SAFETY: `sched_getcpu` takes nothing and only reads the calling thread's CPU.
    #[allow(unsafe_code)]
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn current_cpu() -> u32 {
    0
}

/// Hands `local`'s records of the current recording over, if a recording runs.
fn hand_over(local: &mut Local) {
    let records = std::mem::take(&mut local.records);
    local.last_cpu = None;
    if ACTIVE.load(Ordering::Relaxed) && local.epoch == EPOCH.load(Ordering::Relaxed) {
        lock(&FLUSHED).push(records);
    }
}

/// Hands the calling thread's records to the current recording. Each thread of a recorded
/// workload calls it when done ([`super::run`] does): a thread-local's destructor does it too,
/// but may run after the thread has been joined.
pub fn flush() {
    let _ = LOCAL.try_with(|local| {
        if let Ok(mut local) = local.try_borrow_mut() {
            hand_over(&mut local);
        }
    });
}

/// A running recording: from [`Recording::start`] to [`Recording::finish`], writes through
/// the shims are recorded. One at a time (a second `start` waits).
#[derive(Debug)]
pub struct Recording {
    _one: MutexGuard<'static, ()>,
}

impl Recording {
    /// Starts recording (waiting for a recording of another thread to finish).
    pub fn start() -> Recording {
        let one = lock(&RUNNING);
        lock(&FLUSHED).clear();
        for entry in &OWNERS_TABLE {
            entry.store(0, Ordering::Relaxed);
        }
        EPOCH.fetch_add(1, Ordering::Relaxed);
        ACTIVE.store(true, Ordering::SeqCst);
        Recording { _one: one }
    }

    /// Stops recording and returns every record handed over (and the calling thread's).
    pub(super) fn finish(self) -> Vec<Records> {
        flush();
        ACTIVE.store(false, Ordering::SeqCst);
        std::mem::take(&mut *lock(&FLUSHED))
    }
}
