//! The workload: worker threads doing start+end pairs with cross-thread hand-off, one reader,
//! and the timing of the window in which they all overlap.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SendError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use crate::gauge::Gauge;

/// Sessions a worker starts per round, half kept locally and half handed to its neighbour.
const ROUND: usize = 64;
/// Locally kept sessions still open per worker: each local end closes the oldest of these.
const RING: usize = 8;

/// What one contender did in the measured window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measurement {
    /// Start+end pairs the workers completed in the window, and how many ended on another
    /// thread than they started on.
    pub(crate) tally: Tally,
    /// The overlapping window: from the start barrier to the end barrier.
    pub(crate) elapsed: Duration,
    /// Smallest and largest value the reader saw.
    pub(crate) min: i64,
    pub(crate) max: i64,
    /// Reads the reader performed in the window.
    pub(crate) reads: u64,
    /// The value once every thread had finished (every session ended): must be zero.
    pub(crate) final_value: i64,
}

/// Shared by every thread of one run.
#[derive(Debug)]
struct Shared {
    /// Workers, the reader and the timing thread meet here before the window opens.
    start: Barrier,
    /// Workers and the timing thread meet here once every worker has stopped handing off.
    end: Barrier,
    stop: AtomicBool,
}

/// Runs `gauge` with `threads` workers and one reader for about `window`.
pub(crate) fn measure<G: Gauge>(gauge: &G, threads: usize, window: Duration) -> Measurement {
    let shared = Shared {
        start: Barrier::new(threads + 2),
        end: Barrier::new(threads + 1),
        stop: AtomicBool::new(false),
    };
    // Worker i sends on channel i, which worker i + 1 (mod threads) receives.
    let (senders, mut receivers): (Vec<_>, Vec<_>) = (0..threads).map(|_| mpsc::channel()).unzip();
    receivers.rotate_right(1);
    thread::scope(|s| {
        let shared = &shared;
        let workers: Vec<_> = senders
            .into_iter()
            .zip(receivers)
            .map(|(tx, rx)| s.spawn(move || worker(gauge, shared, tx, rx)))
            .collect();
        let reader = s.spawn(|| reader(gauge, shared));
        let elapsed = time_window(shared, window);
        let tally = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let (min, max, reads) = reader.join().unwrap();
        Measurement {
            tally,
            elapsed,
            min,
            max,
            reads,
            final_value: gauge.read(),
        }
    })
}

/// Opens the window, waits `window`, asks everyone to stop, and times until the workers have.
fn time_window(shared: &Shared, window: Duration) -> Duration {
    shared.start.wait();
    let opened = Instant::now();
    thread::sleep(window);
    shared.stop.store(true, Ordering::Relaxed);
    shared.end.wait();
    opened.elapsed()
}

type Inbox<G> = Receiver<Vec<<G as Gauge>::Token>>;
type Outbox<G> = Sender<Vec<<G as Gauge>::Token>>;

/// Ends counted by a worker inside the window.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    /// Sessions it ended (each completes one start+end pair).
    pub(crate) pairs: u64,
    /// Of those, sessions another worker had started.
    pub(crate) remote: u64,
}

impl std::iter::Sum for Tally {
    fn sum<I: Iterator<Item = Tally>>(tallies: I) -> Tally {
        tallies.fold(Tally::default(), |sum, t| Tally {
            pairs: sum.pairs + t.pairs,
            remote: sum.remote + t.remote,
        })
    }
}

/// One worker's end of the ring: what it drives, where it sends and receives hand-offs.
#[derive(Debug)]
struct Worker<'a, G: Gauge> {
    gauge: &'a G,
    outbox: Outbox<G>,
    inbox: Inbox<G>,
    /// Emptied batches, reused so a steady state allocates nothing.
    spare: Vec<Vec<G::Token>>,
    tally: Tally,
}

/// Start+end pairs until told to stop: every round starts `ROUND` sessions, ends half of them
/// here (oldest first, keeping `RING` open) and hands the other half to the next worker, then
/// ends what the previous worker handed over. Counts only ends made inside the window.
fn worker<G: Gauge>(gauge: &G, shared: &Shared, outbox: Outbox<G>, inbox: Inbox<G>) -> Tally {
    let mut w = Worker {
        gauge,
        outbox,
        inbox,
        spare: Vec::new(),
        tally: Tally::default(),
    };
    let mut local: VecDeque<G::Token> = VecDeque::with_capacity(RING + 1);
    shared.start.wait();
    while !shared.stop.load(Ordering::Relaxed) {
        let mut batch = w
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(ROUND / 2));
        for _ in 0..ROUND / 2 {
            local.push_back(black_box(gauge.start()));
            batch.push(black_box(gauge.start()));
            if local.len() > RING {
                w.end_local(local.pop_front().expect("the ring holds RING + 1"));
            }
        }
        w.hand_off(batch);
        w.drain();
    }
    let tally = w.tally;
    local.into_iter().for_each(|token| gauge.end(token));
    shared.end.wait();
    // Every worker has stopped sending: what is left in the inbox is the last hand-offs, ended
    // outside the window and not counted.
    w.drain();
    tally
}

impl<G: Gauge> Worker<'_, G> {
    fn end_local(&mut self, token: G::Token) {
        self.gauge.end(black_box(token));
        self.tally.pairs += 1;
    }

    /// Sends `batch` to the next worker. The channel is unbounded, so a worker never waits for
    /// a descheduled neighbour (that would time the OS scheduler, not the counter); the
    /// neighbour ends the backlog when it runs again.
    fn hand_off(&mut self, batch: Vec<G::Token>) {
        if let Err(SendError(batch)) = self.outbox.send(batch) {
            // The neighbour is gone (it panicked): end its share here.
            batch.into_iter().for_each(|token| self.end_local(token));
        }
    }

    /// Ends every session waiting in the inbox, keeping the emptied batches for reuse.
    fn drain(&mut self) {
        while let Ok(mut batch) = self.inbox.try_recv() {
            let n = batch.len() as u64;
            batch
                .drain(..)
                .for_each(|token| self.gauge.end(black_box(token)));
            self.tally.pairs += n;
            self.tally.remote += n;
            self.spare.push(batch);
        }
    }
}

/// Reads continuously until told to stop; returns the smallest and largest values seen and
/// the number of reads.
fn reader<G: Gauge>(gauge: &G, shared: &Shared) -> (i64, i64, u64) {
    let (mut min, mut max, mut reads) = (i64::MAX, i64::MIN, 0u64);
    shared.start.wait();
    while !shared.stop.load(Ordering::Relaxed) {
        let value = black_box(gauge.read());
        min = min.min(value);
        max = max.max(value);
        reads += 1;
    }
    (min, max, reads)
}
