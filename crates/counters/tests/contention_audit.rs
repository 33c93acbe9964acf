//! The contention audit of the counters (`--cfg livecount_audit`, run by `scripts/audit.sh`):
//! N threads start and end sessions on each counter, on their own thread and handed off to
//! another, while the shim records which thread writes which line. The designs' claims about
//! who writes what are asserted from the record, not from timing, so they hold for a machine
//! with a core per thread although this one has two.
//!
//! "Shared" below: a 128-byte block (a line and its prefetch pair) that more than one thread
//! wrote. A hot path that writes one shows up once per operation: `PAIRS` times per thread.
//! First-use writes (a cell table's bucket claimed by the first thread to need it) show up
//! at most twice per thread, and are all the counters that claim no sharing may show.

#![cfg(livecount_audit)]

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use livecount::audit::{self, Audit, BLOCK_BYTES, Summary, Writer};
use livecount::{Counter, CpuSource, PerCpu, PerThread, Sharded, Single, Striped};

/// Start+end pairs per thread (per starting thread in a hand-off).
const PAIRS: u64 = 10_000;

/// A starter's end of a hand-off and its partner's.
type Channel<T> = (SyncSender<T>, Mutex<Receiver<T>>);

/// Every pair on the thread that started it.
fn same_thread<C: Counter>(counter: &C, threads: usize) -> (Audit, u64) {
    let audit = audit::run(threads, |_| {
        for _ in 0..PAIRS {
            let token = counter.increment();
            counter.decrement(token);
        }
    });
    (audit, threads as u64 * PAIRS)
}

/// Half the threads start sessions and hand each token to a partner that ends it.
fn hand_off<C: Counter>(counter: &C, threads: usize) -> (Audit, u64) {
    assert!(
        threads >= 2 && threads.is_multiple_of(2),
        "a hand-off runs pairs of threads, not {threads}"
    );
    let pairs = threads / 2;
    let channels: Vec<Channel<C::Token>> = (0..pairs)
        .map(|_| {
            let (tx, rx) = sync_channel(256);
            (tx, Mutex::new(rx))
        })
        .collect();
    let audit = audit::run(threads, |i| {
        let (tx, rx) = &channels[i / 2];
        if i % 2 == 0 {
            for _ in 0..PAIRS {
                tx.send(counter.increment())
                    .expect("the ender waits for every token");
            }
        } else {
            let rx = rx.lock().unwrap();
            for _ in 0..PAIRS {
                counter.decrement(rx.recv().expect("the starter sends every token"));
            }
        }
    });
    (audit, pairs as u64 * PAIRS)
}

/// Prints (and with `LIVECOUNT_AUDIT_DIR`, saves) the audit; returns its summary.
fn report(workload: &str, counter: &str, threads: usize, (audit, pairs): &(Audit, u64)) -> Summary {
    audit::emit(workload, counter, threads, *pairs, audit);
    let s = audit.summary(BLOCK_BYTES, Writer::Thread);
    // Every counter updates through the shim: a start and an end are at least one recorded
    // write each. Fewer means an update escaped the record and the audit is blind to it.
    assert!(
        s.writes >= 2 * pairs,
        "{counter} {workload}: {} writes recorded for {pairs} pairs",
        s.writes
    );
    s
}

/// First-use writes per thread that may land on shared lines: a thread's first update of a
/// cell table (`PerThread`'s cells) raises the table's high-water mark and, if its bucket is
/// new, claims it with a compare-and-swap.
const FIRST_USE_PER_THREAD: u64 = 2;

/// The claim of a counter whose threads each write only their own lines: no shared write
/// but first-use ones, however many operations.
fn assert_no_shared_hot_path(counter: &str, workload: &str, threads: usize, s: &Summary) {
    let first_use = FIRST_USE_PER_THREAD * threads as u64;
    assert!(
        s.shared_writes <= first_use,
        "{counter} {workload} at {threads} threads: {} writes to shared lines ({} lines, up \
         to {} writers each) — a hot path writes a line other threads write (first use \
         allows at most {first_use})",
        s.shared_writes,
        s.shared_blocks,
        s.max_writers,
    );
}

/// A workload: a counter and a thread count in, the audit and its pairs out.
type Workload<C> = fn(&C, usize) -> (Audit, u64);

/// The workloads at `threads`: on the starting thread, and handed off where there are two.
fn workloads<C: Counter>(threads: usize) -> Vec<(&'static str, Workload<C>)> {
    let mut all: Vec<(&'static str, Workload<C>)> = vec![("same thread", same_thread::<C>)];
    if threads >= 2 && threads.is_multiple_of(2) {
        all.push(("hand-off", hand_off::<C>));
    }
    all
}

#[test]
fn per_thread_writes_only_its_own_lines() {
    for threads in audit::thread_counts() {
        for (workload, run) in workloads::<PerThread>(threads) {
            let s = report(
                workload,
                "PerThread",
                threads,
                &run(&PerThread::new(), threads),
            );
            assert_no_shared_hot_path("PerThread", workload, threads, &s);
        }
    }
}

#[test]
fn sharded_shares_no_line_while_threads_fit_the_shards() {
    for threads in audit::thread_counts() {
        for (workload, run) in workloads::<Sharded>(threads) {
            let fits = Sharded::with_shards(threads);
            let name = format!("Sharded ({} shards)", fits.shards());
            let s = report(workload, &name, threads, &run(&fits, threads));
            assert_no_shared_hot_path(&name, workload, threads, &s);
            // The default (twice this machine's CPUs): past the shards, threads share them.
            let default = Sharded::new();
            let name = format!("Sharded ({} shards)", default.shards());
            let s = report(workload, &name, threads, &run(&default, threads));
            if threads > default.shards() {
                assert!(
                    s.shared_writes > 0,
                    "{name} at {threads} threads shares no shard?"
                );
            }
        }
    }
}

/// `PerCpu`'s claim: a cell is written from its own CPU, and from another only when a
/// thread migrated between reading its CPU and adding. Threads taking turns on one CPU share
/// its cell without moving the line, so here the writer is the CPU. Run through the
/// `sched_getcpu` source: the restartable-sequence add is an `asm!` block the shim cannot
/// see, and it never lands on a foreign cell at all (the kernel restarts it on migration).
#[test]
fn per_cpu_writes_another_cpus_line_only_after_a_migration() {
    let cells = PerCpu::new().cells();
    let counter =
        || PerCpu::with_source(cells, CpuSource::SchedGetcpu).expect("Linux has sched_getcpu");
    for threads in audit::thread_counts() {
        for (workload, run) in workloads::<PerCpu>(threads) {
            let result = run(&counter(), threads);
            report(workload, "PerCpu (sched_getcpu)", threads, &result);
            let cpu = result.0.summary(BLOCK_BYTES, Writer::Cpu);
            assert!(
                cpu.foreign_writes <= cpu.migrations,
                "PerCpu {workload} at {threads} threads: {} writes to another CPU's cell, \
                 {} migrations seen",
                cpu.foreign_writes,
                cpu.migrations
            );
        }
    }
}

#[test]
fn single_and_striped_are_reported() {
    for threads in audit::thread_counts() {
        for (workload, run) in workloads::<Single>(threads) {
            let s = report(workload, "Single", threads, &run(&Single::new(), threads));
            // The control: one line, every write shared once two threads write.
            if threads > 1 {
                assert_eq!(
                    s.shared_writes, s.writes,
                    "Single {workload} at {threads} threads"
                );
            }
        }
        for (workload, run) in workloads::<Striped>(threads) {
            // Striped lays itself out by the contention it meets: a first run grows its
            // stripes (up to its cap, from this machine's CPU count), the second is reported.
            let striped = Striped::new();
            run(&striped, threads);
            report(workload, "Striped", threads, &run(&striped, threads));
        }
    }
}
