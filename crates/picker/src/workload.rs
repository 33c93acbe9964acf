//! The workloads, each generic over a [`Contender`] and shared by the criterion suite and the
//! picker, so both measure exactly the same code.
//!
//! Every threaded workload starts its threads on a [`Barrier`]; each thread reads the clock
//! after the barrier and again after its last operation, and the measured window is from the
//! earliest start to the latest end: only the work, none of the spawning or setup (per-writer
//! state comes from [`Contender::local`] before the barrier).
//!
//! Past the core count the threads workload is timed by the cores' busy time rather than its
//! window. There the window holds the harness's own waiting: a barrier releases hundreds of
//! threads one wake-up at a time, and each wake-up preempts a thread mid-loop, so a run timed
//! by its window timed the wake-ups, not the counter (every contender read about 20 k pairs/s
//! at 256 threads on 2 cores). So each thread measures its CPU time in its loop
//! ([`crate::cpu_time`]), and with more threads than cores a run's time is that CPU time
//! summed over the cores ([`threads_sample`]): the cores' time spent counting, context
//! switches and cache misses included, harness waiting excluded. With a core per thread the
//! window stays the measure: every thread can run at once, so it holds little waiting, and it
//! keeps what CPU time would hide on a busy machine — threads that did not overlap did not
//! contend, and their CPU times would add up as if they had run side by side. (Past the
//! cores that flattery remains: on a machine shared with other work, a contended counter's
//! busy-time figure there is an upper bound.)

// Items here are public only through the hidden `internals` module (the criterion suite's
// access): their links to this crate's private items are for `--document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

use std::fmt;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::contender::Contender;

/// Sessions a hand-off batch carries.
pub(crate) const BATCH: usize = 64;

/// What one run of a workload did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    /// The overlapping window: earliest start to latest end (for the threads workload past
    /// the core count, the cores' busy time: see [`threads_sample`]).
    pub elapsed: Duration,
    /// Start+end pairs completed in the window.
    pub pairs: u64,
    /// For the threads workload, the cores' busy time: the threads' CPU time in their loops
    /// over `min(threads, cores)` (`None` elsewhere, or without a per-thread CPU clock).
    pub busy: Option<Duration>,
    /// What the reader saw, for the read-under-write workload.
    pub read: Option<ReadStats>,
}

impl Sample {
    /// Start+end pairs per second.
    pub(crate) fn throughput(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Start+end pairs per second of the cores' busy time, where measured (see
    /// [`busy`](Sample::busy)); else [`throughput`](Sample::throughput).
    pub(crate) fn busy_throughput(&self) -> f64 {
        self.busy.map_or_else(
            || self.throughput(),
            |busy| self.pairs as f64 / busy.as_secs_f64().max(1e-9),
        )
    }
}

/// What a reader saw while writers hammered.
#[derive(Clone, Copy, Debug)]
pub struct ReadStats {
    /// Reads performed.
    pub reads: u64,
    /// Mean nanoseconds per read.
    pub ns_per_read: f64,
    /// Smallest value read.
    pub min: i64,
    /// Largest value read.
    pub max: i64,
    /// The true value is always within `0..=true_max` (see [`read_under_write`]).
    pub true_max: i64,
}

/// Runs `work(i)` on `threads` threads started together; returns the overlapping window and the
/// results. `work` gets thread index `i` and returns what it wants kept.
fn together<R: Send>(
    threads: usize,
    work: impl Fn(usize, &Barrier) -> (Instant, Instant, R) + Sync,
) -> (Duration, Vec<(Instant, Instant, R)>) {
    let barrier = Barrier::new(threads);
    let outs: Vec<_> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (work, barrier) = (&work, &barrier);
                s.spawn(move || work(i, barrier))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let first = outs.iter().map(|o| o.0).min().expect("at least one thread");
    let last = outs.iter().map(|o| o.1).max().expect("at least one thread");
    (last - first, outs)
}

/// `n` start+end pairs back to back.
#[inline]
fn pairs<C: Contender>(c: &C, local: &C::Local, n: u64) {
    for _ in 0..n {
        let c = black_box(c);
        let token = black_box(c.start(local));
        c.end(local, token);
    }
}

/// **threads**: `threads` threads each do `per_thread` start+end pairs; timed by
/// [`threads_sample`].
pub(crate) fn threads<C: Contender>(c: &C, threads: usize, per_thread: u64) -> Sample {
    let (window, outs) = together(threads, |_, barrier| {
        let local = c.local();
        barrier.wait();
        let (t0, cpu0) = (Instant::now(), crate::cpu_time::thread());
        pairs(c, &local, per_thread);
        let cpu = cpu0
            .zip(crate::cpu_time::thread())
            .map(|(a, b)| b.saturating_sub(a));
        (t0, Instant::now(), cpu)
    });
    // Every thread's CPU time in its loop, if this platform has a per-thread CPU clock.
    let cpu: Option<Duration> = outs.iter().map(|(_, _, cpu)| *cpu).sum();
    threads_sample(window, cpu, threads, threads as u64 * per_thread)
}

/// A threads run of `pairs` pairs on `threads` threads, whose window was `window` and whose
/// threads spent `cpu` (summed) in their loops: timed by its window while `threads ≤ cores`,
/// past that by the cores' busy time, `cpu / cores` (see the module docs; the window where
/// there is no per-thread CPU clock). One rule for livecount's threads and the Java probe's.
/// [`Sample::busy`] holds `cpu / min(threads, cores)` at every count.
pub(crate) fn threads_sample(
    window: Duration,
    cpu: Option<Duration>,
    threads: usize,
    pairs: u64,
) -> Sample {
    let cores = crate::machine::cores().max(1);
    let busy = cpu.map(|cpu| cpu / threads.clamp(1, cores) as u32);
    Sample {
        elapsed: busy.filter(|_| threads > cores).unwrap_or(window),
        pairs,
        busy,
        read: None,
    }
}

/// **handoff**: `pairs` producer/consumer pairs; each producer starts `per_pair` sessions in
/// batches of [`BATCH`] and sends them over a bounded channel (4 batches deep) to its
/// consumer, which ends them: every session ends on another thread than it started on.
pub(crate) fn handoff<C: Contender>(c: &C, pairs: usize, per_pair: u64) -> Sample {
    let batches = per_pair.div_ceil(BATCH as u64);
    let channels: Vec<_> = (0..pairs)
        .map(|_| mpsc::sync_channel::<Vec<C::Token>>(4))
        .collect();
    let (senders, receivers): (Vec<_>, Vec<_>) = channels.into_iter().unzip();
    let receivers: Vec<_> = receivers.into_iter().map(std::sync::Mutex::new).collect();
    let senders: Vec<_> = senders.into_iter().map(std::sync::Mutex::new).collect();
    let (elapsed, _) = together(2 * pairs, |i, barrier| {
        let local = c.local();
        if i % 2 == 0 {
            let tx = senders[i / 2].lock().expect("unpoisoned").clone();
            barrier.wait();
            let t0 = Instant::now();
            for _ in 0..batches {
                let batch: Vec<_> = (0..BATCH).map(|_| black_box(c.start(&local))).collect();
                tx.send(batch).expect("the consumer outlives the producer");
            }
            (t0, Instant::now(), ())
        } else {
            let rx = receivers[i / 2].lock().expect("unpoisoned");
            barrier.wait();
            let t0 = Instant::now();
            for _ in 0..batches {
                let batch = rx.recv().expect("the producer sends every batch");
                batch.into_iter().for_each(|t| c.end(&local, black_box(t)));
            }
            (t0, Instant::now(), ())
        }
    });
    Sample {
        elapsed,
        pairs: pairs as u64 * batches * BATCH as u64,
        busy: None,
        read: None,
    }
}

/// **tasks**: `tasks` tokio tasks on `rt`, each looping `rounds` times start → `yield_now` →
/// end. Tasks are spawned and parked on a gate before the clock starts; the window ends when
/// the last task finishes.
pub(crate) fn tasks<C: Contender>(
    rt: &tokio::runtime::Runtime,
    c: &Arc<C>,
    tasks: usize,
    rounds: u64,
) -> Sample {
    let ready = Arc::new(AtomicUsize::new(0));
    let left = Arc::new(AtomicUsize::new(tasks));
    let done = Arc::new(tokio::sync::Notify::new());
    let (go, gate) = tokio::sync::watch::channel(false);
    let elapsed = rt.block_on(async {
        for _ in 0..tasks {
            let (c, ready, left, done, mut gate) = (
                Arc::clone(c),
                Arc::clone(&ready),
                Arc::clone(&left),
                Arc::clone(&done),
                gate.clone(),
            );
            tokio::spawn(async move {
                let local = c.local();
                ready.fetch_add(1, Ordering::Release);
                let _ = gate.wait_for(|&go| go).await;
                for _ in 0..rounds {
                    let token = black_box(c.start(&local));
                    tokio::task::yield_now().await;
                    c.end(&local, token);
                }
                if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    done.notify_one();
                }
            });
        }
        while ready.load(Ordering::Acquire) < tasks {
            tokio::task::yield_now().await;
        }
        let t0 = Instant::now();
        go.send(true).expect("tasks hold receivers");
        done.notified().await;
        t0.elapsed()
    });
    Sample {
        elapsed,
        pairs: tasks as u64 * rounds,
        busy: None,
        read: None,
    }
}

/// How often the reader of [`read_under_write`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// No reader: the writers' baseline.
    None,
    /// Paced: one read, then one every `1 / hz` seconds (the first read is at the window's start).
    Hz(u32),
    /// Reads back to back.
    Continuous,
}

impl Reader {
    /// `"none"`, `"1000Hz"`, `"continuous"`: the criterion parameter and JSON key.
    pub(crate) fn label(self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reader::None => f.write_str("none"),
            Reader::Hz(hz) => write!(f, "{hz}Hz"),
            Reader::Continuous => f.write_str("continuous"),
        }
    }
}

/// **read under write**: `writers` threads in a ring, each round starting [`BATCH`] sessions and
/// handing them to the next writer through a one-batch channel (ending them itself if the slot is
/// full), then ending what it was handed; one reader reads at `reader`'s pace until the writers
/// finish `rounds` rounds each.
///
/// The true value is never below 0 (every end follows its start) and never above
/// `3 × writers × BATCH`: a writer's sessions are at most one batch being built, one in the
/// channel and one being ended by its neighbour. A read outside `0..=true_max` is an error of
/// the contender, not of the workload.
pub(crate) fn read_under_write<C: Contender>(
    c: &C,
    writers: usize,
    rounds: u64,
    reader: Reader,
) -> Sample {
    let stop = AtomicBool::new(false);
    let finished = AtomicUsize::new(0);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..writers)
        .map(|_| mpsc::sync_channel::<Vec<C::Token>>(1))
        .unzip();
    let mut rxs: Vec<_> = rxs.into_iter().map(std::sync::Mutex::new).collect();
    rxs.rotate_right(1);
    let txs: Vec<_> = txs.into_iter().map(std::sync::Mutex::new).collect();
    let threads = writers + usize::from(reader != Reader::None);
    let (_, outs) = together(threads, |i, barrier| {
        if i == writers {
            barrier.wait();
            let t0 = Instant::now();
            let stats = read_loop(c, &stop, reader);
            return (t0, t0, Err(stats));
        }
        let local = c.local();
        let tx = txs[i].lock().expect("unpoisoned").clone();
        let rx = rxs[i].lock().expect("unpoisoned");
        barrier.wait();
        let t0 = Instant::now();
        for _ in 0..rounds {
            let batch: Vec<_> = (0..BATCH).map(|_| black_box(c.start(&local))).collect();
            if let Err(TrySendError::Full(batch) | TrySendError::Disconnected(batch)) =
                tx.try_send(batch)
            {
                batch.into_iter().for_each(|t| c.end(&local, black_box(t)));
            }
            while let Ok(batch) = rx.try_recv() {
                batch.into_iter().for_each(|t| c.end(&local, black_box(t)));
            }
        }
        let t1 = Instant::now();
        drop(tx);
        if finished.fetch_add(1, Ordering::AcqRel) + 1 == writers {
            stop.store(true, Ordering::Release);
        }
        // Once every writer has stopped sending, end what the neighbour sent last (outside the
        // window).
        while finished.load(Ordering::Acquire) < writers {
            thread::yield_now();
        }
        rx.try_iter().flatten().for_each(|t| c.end(&local, t));
        (t0, t1, Ok(()))
    });
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    let mut read = None;
    for (t0, t1, out) in outs {
        match out {
            Ok(_) => {
                first = Some(first.map_or(t0, |f| f.min(t0)));
                last = Some(last.map_or(t1, |l| l.max(t1)));
            }
            Err(mut stats) => {
                stats.true_max = (3 * writers * BATCH) as i64;
                read = Some(stats);
            }
        }
    }
    Sample {
        elapsed: last.zip(first).map_or(Duration::ZERO, |(l, f)| l - f),
        pairs: writers as u64 * rounds * BATCH as u64,
        busy: None,
        read,
    }
}

fn read_loop<C: Contender>(c: &C, stop: &AtomicBool, reader: Reader) -> ReadStats {
    let (mut min, mut max, mut reads, mut busy) = (i64::MAX, i64::MIN, 0u64, Duration::ZERO);
    let mut record = |value: i64| {
        min = min.min(value);
        max = max.max(value);
        reads += 1;
    };
    match reader {
        Reader::Continuous => {
            let t0 = Instant::now();
            // At least one read, even if the writers are already done.
            loop {
                record(black_box(c.read()));
                if stop.load(Ordering::Acquire) {
                    break;
                }
            }
            busy = t0.elapsed();
        }
        Reader::Hz(hz) => {
            let period = Duration::from_secs_f64(1.0 / f64::from(hz.max(1)));
            let mut next = Instant::now();
            let mut first = true;
            // The first read happens at once, even if the writers are already done.
            while first || !stop.load(Ordering::Acquire) {
                first = false;
                if Instant::now() >= next {
                    let t = Instant::now();
                    let value = black_box(c.read());
                    busy += t.elapsed();
                    record(value);
                    next += period;
                }
                thread::sleep(
                    Duration::from_micros(200).min(next.saturating_duration_since(Instant::now())),
                );
            }
        }
        Reader::None => {}
    }
    ReadStats {
        reads,
        ns_per_read: busy.as_nanos() as f64 / reads.max(1) as f64,
        min: if reads == 0 { 0 } else { min },
        max: if reads == 0 { 0 } else { max },
        true_max: 0,
    }
}

/// **churn**: `generations` waves of `threads` short-lived threads, each doing `per_thread`
/// pairs and exiting, so counters that give threads cells must reuse them. The window covers
/// the whole run, spawns included (they are the workload).
pub(crate) fn churn<C: Contender>(
    c: &C,
    threads: usize,
    generations: u64,
    per_thread: u64,
) -> Sample {
    let t0 = Instant::now();
    for _ in 0..generations {
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| pairs(c, &c.local(), per_thread));
            }
        });
    }
    Sample {
        elapsed: t0.elapsed(),
        pairs: threads as u64 * generations * per_thread,
        busy: None,
        read: None,
    }
}

/// Stack size of each parked thread of [`read_at_threads`]: it counts once and waits, and a
/// thousand default 2 MiB stacks would reserve 2 GiB.
pub(crate) const PARKED_STACK: usize = 64 * 1024;

/// **read at threads**: `threads` threads (with [`PARKED_STACK`] stacks) each start a session
/// on `c` and park, alive and holding it, so a counter with a cell per thread has `threads`
/// cells in use; meanwhile this thread times `reps` windows of about `window` of back-to-back
/// reads (a pilot sizes them), then releases the threads, which end their sessions, and joins
/// them. Returns each window's nanoseconds per read, or why the threads could not be spawned.
///
/// Only the reads are timed, and every one must see exactly `threads`: nothing writes while
/// they run.
pub fn read_at_threads<C: Contender>(
    c: &C,
    threads: usize,
    window: Duration,
    reps: usize,
) -> Result<Vec<f64>, String> {
    let gate = Gate::default();
    thread::scope(|s| {
        // Opens the gate however this closure ends (a failed spawn, a failed read check), so
        // the scope can join every parked thread instead of waiting for them forever.
        let _open = Opener(&gate);
        for spawned in 0..threads {
            let parked = thread::Builder::new()
                .name("parked".into())
                .stack_size(PARKED_STACK)
                .spawn_scoped(s, || {
                    let local = c.local();
                    let token = c.start(&local);
                    gate.arrive_and_wait();
                    c.end(&local, token);
                });
            if let Err(e) = parked {
                return Err(format!("spawned {spawned} of {threads} threads, then: {e}"));
            }
        }
        gate.wait_for(threads);
        Ok(time_reads(c, threads as i64, window, reps))
    })
}

/// `reps` windows of about `window` each of back-to-back reads of `c`, which must all be
/// `expect`: nanoseconds per read of each.
fn time_reads<C: Contender>(c: &C, expect: i64, window: Duration, reps: usize) -> Vec<f64> {
    let timed = |reads: u64| {
        let mut wrong = 0u64;
        let t0 = Instant::now();
        for _ in 0..reads {
            wrong += u64::from(black_box(black_box(c).read()) != expect);
        }
        let elapsed = t0.elapsed();
        assert_eq!(
            wrong,
            0,
            "{} read other than {expect} with {expect} sessions open and no writer",
            C::NAME
        );
        elapsed
    };
    let mut reads = 1u64;
    let pilot = loop {
        let elapsed = timed(reads);
        if elapsed >= window / 8 || reads >= 1 << 40 {
            break elapsed;
        }
        reads *= 8;
    };
    let scale = window.as_secs_f64() / pilot.as_secs_f64().max(1e-9);
    let reads = ((reads as f64 * scale) as u64).max(1);
    (0..reps)
        .map(|_| timed(reads).as_nanos() as f64 / reads as f64)
        .collect()
}

/// Where [`read_at_threads`]' threads park: how many have arrived, and whether it is open.
#[derive(Debug, Default)]
struct Gate {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Gate {
    fn arrive_and_wait(&self) {
        let mut state = self.state.lock().expect("unpoisoned");
        state.0 += 1;
        self.changed.notify_all();
        while !state.1 {
            state = self.changed.wait(state).expect("unpoisoned");
        }
    }

    /// Returns once `n` threads have arrived: the mutex orders their sessions' starts before
    /// whatever the caller does next.
    fn wait_for(&self, n: usize) {
        let mut state = self.state.lock().expect("unpoisoned");
        while state.0 < n {
            state = self.changed.wait(state).expect("unpoisoned");
        }
    }

    fn open(&self) {
        // A poisoned gate still opens: its threads must be released to be joined.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1 = true;
        self.changed.notify_all();
    }
}

/// Opens its gate when dropped.
struct Opener<'a>(&'a Gate);

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// **memory**: heap + inline bytes of a fresh `C` after `threads` threads each started a
/// session at the same time and ended it, or `None` if the binary did not install
/// [`CountingAlloc`](crate::alloc::CountingAlloc).
pub fn memory<C: Contender>(threads: usize) -> Option<usize> {
    let touch = |c: &C| {
        together(threads, |_, barrier| {
            let local = c.local();
            let token = c.start(&local);
            barrier.wait();
            c.end(&local, token);
            let now = Instant::now();
            (now, now, ())
        });
    };
    // Once untracked, so process-wide lazies (thread-index registries) are not charged.
    touch(&C::new(threads));
    let (counter, heap) = crate::alloc::measure(|| {
        let c = Box::new(C::new(threads));
        touch(&c);
        c
    });
    drop(counter);
    heap.map(|h| h.max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contender::{Ceiling, FastCounter, Live};
    use livecount::{PerCpu, PerThread};

    #[test]
    fn workloads_count_and_end_every_session() {
        let c = Live::<PerThread>::new(4);
        assert_eq!(threads(&c, 3, 100).pairs, 300);
        assert_eq!(handoff(&c, 2, 100).pairs, 2 * 2 * BATCH as u64);
        let s = read_under_write(&c, 2, 50, Reader::Continuous);
        let r = s.read.unwrap();
        assert!(r.reads > 0 && r.min >= 0 && r.max <= r.true_max, "{r:?}");
        assert_eq!(churn(&c, 2, 2, 10).pairs, 40);
        assert_eq!(c.read(), 0);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let c = Arc::new(Ceiling::new(10));
        assert_eq!(tasks(&rt, &c, 10, 3).pairs, 30);
        assert_eq!(c.read(), 0);
        let f = FastCounter::new(1);
        read_under_write(&f, 2, 20, Reader::Hz(1000));
        assert_eq!(f.read(), 0);
    }

    /// Every parked thread counted (each read checks it), and every one was joined after
    /// ending its session.
    #[test]
    fn reads_at_parked_threads_see_every_thread() {
        let c = Live::<PerThread>::new(0);
        let ns = read_at_threads(&c, 64, Duration::from_millis(2), 3).unwrap();
        assert_eq!(ns.len(), 3);
        assert!(ns.iter().all(|&ns| ns > 0.0), "{ns:?}");
        assert_eq!(c.read(), 0);
        let p = Live::<PerCpu>::new(0);
        read_at_threads(&p, 64, Duration::from_millis(2), 1).unwrap();
        assert_eq!(p.read(), 0);
    }
}
