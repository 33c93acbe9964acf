//! loom models of every counter: exhaustive interleavings (with a preemption bound) of
//! increments, cross-thread decrements and concurrent reads, under the C++11 memory model.
//!
//! Run with `scripts/loom.sh` (release, debug assertions on, `LOOM_MAX_PREEMPTIONS`).
//! Each model uses at most four threads including the main thread.
#![cfg(livecount_loom)]

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped, Totals};
use loom::sync::Arc;
use loom::thread;

/// Runs `f` under loom with a preemption bound of 3 unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise. `max_duration` / `max_permutations` are deliberately never set: hitting them
/// ends the exploration early and still reports a pass.
fn model(f: impl Fn() + Sync + Send + 'static) {
    livecount::loom_model::bounded(3, f);
}

/// The runner explores interleavings at all: two threads' unsynchronised load + store
/// increments lose one in some interleaving, which the model must find. (A runner that ran
/// `f` once, or not at all, would pass every model below.)
#[test]
#[should_panic(expected = "lost update")]
fn the_runner_finds_a_lost_update() {
    livecount::loom_model::bounded(2, || {
        let n = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let bump = |n: Arc<loom::sync::atomic::AtomicUsize>| {
            move || {
                let v = n.load(Relaxed);
                n.store(v + 1, Relaxed);
            }
        };
        let a = thread::spawn(bump(Arc::clone(&n)));
        let b = thread::spawn(bump(Arc::clone(&n)));
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(n.load(Relaxed), 2, "lost update");
    });
}

/// Spawns a model thread that runs `f` on its own handle to `counter`.
fn spawn<C, T>(counter: &Arc<C>, f: impl FnOnce(&C) -> T + 'static) -> thread::JoinHandle<T>
where
    C: 'static,
    T: 'static,
{
    let counter = Arc::clone(counter);
    thread::spawn(move || f(&counter))
}

/// What every concurrent read must satisfy, given the sessions the model knows about:
/// `open_throughout` were open during the whole read, at most `started_max` were ever started.
fn check_read<C: Counter>(counter: &C, open_throughout: u64, started_max: u64) {
    let value = counter.load();
    assert!(
        value >= open_throughout,
        "read {value}, but {open_throughout} sessions were open during the whole read"
    );
    assert!(
        value <= started_max,
        "read {value}, but only {started_max} sessions were ever started"
    );
    if let Some(Totals { started, ended }) = counter.totals() {
        assert!(
            started >= ended,
            "totals read negative: {started} started, {ended} ended"
        );
        assert!(started <= started_max, "{started} started > {started_max}");
        assert!(
            started - ended >= open_throughout,
            "totals missed an open session"
        );
    }
}

/// After every thread has joined: exact, idle, and (where kept) totals of `sessions` each.
fn assert_quiescent<C: Counter>(counter: &C, sessions: u64) {
    assert_eq!(counter.load(), 0);
    assert!(counter.is_idle());
    if let Some(totals) = counter.totals() {
        let expected = Totals {
            started: sessions,
            ended: sessions,
        };
        assert_eq!(totals, expected);
    }
}

/// (a) A session starts on one thread and ends on another while a reader reads.
fn cross_thread_end_with_reader<C: Counter + Default + 'static>(bound: usize) {
    livecount::loom_model::bounded(bound, || {
        let counter = Arc::new(C::default());
        let reader = spawn(&counter, |counter| check_read(counter, 0, 1));
        let starter = spawn(&counter, |counter| counter.increment());
        let token = starter.join().unwrap();
        counter.decrement(token); // on the main thread: another cell than the start's
        reader.join().unwrap();
        assert_quiescent(&*counter, 1);
    });
}

/// (b) A session open during the whole read is counted, even while another session starts on
/// one thread and ends on a third (the end's cell differs from both the start's and the open
/// session's).
fn open_session_is_always_counted<C: Counter + Default + 'static>(bound: usize) {
    livecount::loom_model::bounded(bound, || {
        let counter = Arc::new(C::default());
        let open = counter.increment(); // main thread's cell, before the reader starts
        let reader = spawn(&counter, |counter| check_read(counter, 1, 2));
        let starter = spawn(&counter, |counter| counter.increment());
        let token = starter.join().unwrap();
        let ender = spawn(&counter, |counter| counter.decrement(token));
        ender.join().unwrap();
        reader.join().unwrap(); // the open session ends only after the read returned
        counter.decrement(open);
        assert_quiescent(&*counter, 2);
    });
}

/// Two writers each run a start/end pair while a reader reads: no update is lost.
fn concurrent_pairs_lose_nothing<C: Counter + Default + 'static>(bound: usize) {
    livecount::loom_model::bounded(bound, || {
        let counter = Arc::new(C::default());
        let writers: Vec<_> = (0..2)
            .map(|_| {
                spawn(&counter, |counter| {
                    let token = counter.increment();
                    counter.decrement(token);
                })
            })
            .collect();
        check_read(&*counter, 0, 2);
        for w in writers {
            w.join().unwrap();
        }
        assert_quiescent(&*counter, 2);
    });
}

/// The three models for one counter, at a default preemption bound (3, or 2 for counters
/// whose reads walk a growable table and whose first update per thread takes the index mutex).
macro_rules! suite {
    ($name:ident, $counter:ty, bound = $bound:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn cross_thread_end_with_reader() {
                super::cross_thread_end_with_reader::<$counter>($bound);
            }

            #[test]
            fn open_session_is_always_counted() {
                super::open_session_is_always_counted::<$counter>($bound);
            }

            #[test]
            fn concurrent_pairs_lose_nothing() {
                super::concurrent_pairs_lose_nothing::<$counter>($bound);
            }
        }
    };
}

suite!(single, Single, bound = 3);
suite!(sharded, Sharded, bound = 3);
suite!(striped, Striped, bound = 2);
suite!(per_thread, PerThread, bound = 2);
suite!(per_cpu, PerCpu, bound = 2);
suite!(reference, Reference, bound = 3);

/// PerCpu: the CPU is a model variable (`model_migrate` moves every thread to the next CPU),
/// so loom puts the migration between an update's CPU read and its add, and everywhere else.
/// Two writers each run a session while a reader reads: a start and its end may land on
/// different cells, or one on a per-CPU cell and one on the overflow cell (with two cells,
/// a thread on CPU 2 or 3 has none); none is lost and no read misses an open session.
#[test]
fn per_cpu_migrating_between_cpu_read_and_add() {
    livecount::loom_model::bounded(2, || {
        let counter = Arc::new(PerCpu::with_cpus(2));
        let open = counter.increment();
        let migrator = thread::spawn(|| {
            livecount::model_migrate();
            livecount::model_migrate();
        });
        let writer = spawn(&counter, |counter| {
            let token = counter.increment();
            counter.decrement(token);
        });
        let reader = spawn(&counter, |counter| check_read(counter, 1, 2));
        migrator.join().unwrap();
        writer.join().unwrap();
        reader.join().unwrap();
        counter.decrement(open);
        assert_quiescent(&*counter, 2);
    });
}

/// PerCpu: a session started on one thread ends on another after a migration, while a
/// reader reads: the read is never negative and never above the starts.
#[test]
fn per_cpu_end_after_migration_on_another_thread() {
    livecount::loom_model::bounded(2, || {
        let counter = Arc::new(PerCpu::with_cpus(2));
        let starter = spawn(&counter, |counter| counter.increment());
        let reader = spawn(&counter, |counter| check_read(counter, 0, 1));
        let token = starter.join().unwrap();
        livecount::model_migrate();
        counter.decrement(token);
        reader.join().unwrap();
        assert_quiescent(&*counter, 1);
    });
}

/// Sharded with fewer shards than threads: shards are shared and still exact.
#[test]
fn sharded_with_one_shard_is_still_exact() {
    concurrent_pairs_lose_nothing::<OneShard>(3);
}

#[derive(Debug)]
struct OneShard(Sharded);

impl Default for OneShard {
    fn default() -> Self {
        OneShard(Sharded::with_shards(1))
    }
}

impl Counter for OneShard {
    type Token = <Sharded as Counter>::Token;
    fn increment(&self) -> Self::Token {
        self.0.increment()
    }
    fn decrement(&self, token: Self::Token) {
        self.0.decrement(token)
    }
    fn load(&self) -> u64 {
        self.0.load()
    }
    fn totals(&self) -> Option<Totals> {
        self.0.totals()
    }
}

/// (c) PerThread: a thread that exits hands its index, and its cells, to the next thread. The
/// heir updates the inherited cell with a plain load + store; without a happens-before edge
/// from the previous owner's last store, that store would overwrite it and lose a start.
/// (No reader here: the property is about lost updates, and a reader multiplies the schedules.)
#[test]
fn per_thread_slot_inheritance_after_exit() {
    livecount::loom_model::bounded(2, || {
        let counter = Arc::new(PerThread::new());
        let first = spawn(&counter, |counter| counter.increment());
        // Spawned concurrently with `first`: it may take a fresh index, or `first`'s once
        // `first` exits, in which case it inherits `first`'s cell.
        let second = spawn(&counter, |counter| {
            let token = counter.increment();
            counter.decrement(token);
        });
        let token = first.join().unwrap();
        second.join().unwrap();
        counter.decrement(token);
        assert_eq!(
            counter.totals(),
            Some(Totals {
                started: 2,
                ended: 2
            })
        );
    });
}

/// (c) The strict version: the heir starts only after the first owner has exited, so it
/// certainly reuses the index and writes into the inherited cell.
#[test]
fn per_thread_heir_continues_from_inherited_counts() {
    model(|| {
        let counter = Arc::new(PerThread::new());
        let first = spawn(&counter, |counter| counter.increment());
        let token = first.join().unwrap();
        let reader = spawn(&counter, |counter| check_read(counter, 1, 2));
        let heir = spawn(&counter, |counter| {
            let again = counter.increment();
            counter.decrement(token); // ends the first owner's session
            again
        });
        let again = heir.join().unwrap();
        reader.join().unwrap();
        assert_eq!(
            counter.totals(),
            Some(Totals {
                started: 2,
                ended: 1
            })
        );
        counter.decrement(again);
        assert_eq!(counter.load(), 0);
    });
}

/// Executions in which `Striped` opened its stripes; the growth test requires at least one,
/// or it would not be testing growth at all.
static STRIPED_GREW: AtomicUsize = AtomicUsize::new(0);

/// (d) Striped: contention on the base opens the stripes and collisions grow them while
/// other updates and a reader run. No update may be lost, no read may go negative.
#[test]
fn striped_growth_races_updates_and_reads() {
    livecount::loom_model::bounded(2, || {
        let counter = Arc::new(Striped::with_max_stripes(4));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                spawn(&counter, |counter| {
                    let a = counter.increment();
                    let b = counter.increment();
                    counter.decrement(a);
                    counter.decrement(b);
                })
            })
            .collect();
        check_read(&*counter, 0, 4);
        for w in writers {
            w.join().unwrap();
        }
        if counter.stripes() > 0 {
            STRIPED_GREW.fetch_add(1, Relaxed);
        }
        assert_eq!(
            counter.totals(),
            Some(Totals {
                started: 4,
                ended: 4
            })
        );
    });
    assert!(
        STRIPED_GREW.load(Relaxed) > 0,
        "no execution grew the stripes"
    );
}

/// (d) A session started on a freshly grown stripe and ended on the base (or the reverse) is
/// still never read negative: the reader must find the new stripe in its second pass.
#[test]
fn striped_end_seen_before_its_start_on_a_new_stripe() {
    livecount::loom_model::bounded(2, || {
        let counter = Arc::new(Striped::with_max_stripes(2));
        let open = counter.increment();
        let contender = spawn(&counter, |counter| counter.increment());
        let reader = spawn(&counter, |counter| check_read(counter, 1, 3));
        let mine = counter.increment();
        let theirs = contender.join().unwrap();
        counter.decrement(theirs);
        counter.decrement(mine);
        reader.join().unwrap();
        counter.decrement(open);
        assert_eq!(
            counter.totals(),
            Some(Totals {
                started: 3,
                ended: 3
            })
        );
    });
}
