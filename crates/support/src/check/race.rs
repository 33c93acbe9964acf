//! The concurrent phase: every worker starts and ends sessions at once (handing some to the
//! next worker to end), while the driver reads continuously and checks each read against the
//! gauge read guarantee documented on [`Counter`].
//!
//! # The bounds a read is held to
//!
//! The workers keep a *tally* next to the counter; the reader samples it just before and just
//! after each read. With `P` the sessions open when the phase began (held open throughout):
//!
//! * **lower**: `P` plus every phase session whose `increment` had returned before the read
//!   began (ids below `starts_done` sampled before) and whose end had not been announced when
//!   the read returned (its bit in `end_begun` still clear after). Such a session's `decrement` cannot
//!   have happened before the read returned (its announcement is sequenced before it), so the
//!   contract (point 2) requires it to be counted.
//! * **upper**: `P` plus the phase starts *announced* by the time the read returned, minus the
//!   phase ends that had *completed* before the read began. The first part is point 3 of the
//!   contract; the second is its corollary "a load balancer may over-estimate … by the sessions
//!   that started during the read": an end that happened before the read is seen by it.
//! * `totals()`: `started` and `ended` each between their own such bounds, `started >= ended`.
//! * `is_idle()`: `true` only if the lower bound is 0, `false` only if the upper bound is not.
//!
//! Every start announces itself, then issues a Release fence, then increments; the reader
//! issues an Acquire fence after its read and only then samples the announcements. If the read
//! saw a start's (or end's) bump, the two fences synchronise, so the announcement is visible:
//! the upper bounds hold whatever orderings the counter uses internally.

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::mpsc::{Receiver, SendError, Sender};
use std::sync::{Arc, Barrier};

use livecount::{Counter, Reference, Token, Totals};

/// Sessions a worker keeps open across rounds before ending the oldest.
const STASH: usize = 3;
/// Reads the reader makes after the last worker finished (and so at least this many).
const TRAILING_READS: usize = 4;
/// The reader yields after this many reads. On a machine with fewer cores than workers plus
/// reader, a reader that never yields starves the workers it should overlap with (a phase
/// took 20 times longer on 2 cores); one that yields after every read overlaps too few
/// updates to catch a torn read. 8 keeps both (measured with the `TornRead` test counter).
const YIELD_EVERY: usize = 8;

/// Shared state of one concurrent phase.
#[derive(Debug)]
pub(crate) struct Phase {
    barrier: Barrier,
    workers: usize,
    rounds: usize,
    /// The model when the phase began; its open sessions stay open throughout.
    base: Totals,
    /// Phase starts begun (announced before `increment`).
    announced: AtomicU64,
    /// Phase starts whose `increment` has returned; the pre-increment value is the session id.
    starts_done: AtomicUsize,
    /// Phase ends begun (announced before `decrement`).
    ends_begun: AtomicU64,
    /// Phase ends whose `decrement` has returned.
    ends_done: AtomicU64,
    /// Bit `id % 64` of word `id / 64`: session `id`'s end has been announced. A bitset so
    /// the reader counts them a word at a time.
    end_begun: Box<[AtomicU64]>,
    /// Workers done (or gone).
    finished: AtomicUsize,
}

/// One worker's part in a phase.
#[derive(Debug)]
pub(crate) struct Job<C: Counter> {
    phase: Arc<Phase>,
    worker: usize,
    inbox: Receiver<Live<C>>,
    next: Sender<Live<C>>,
}

/// A phase session in flight. Its tokens are forgotten, not dropped, if a failed race
/// abandons it (see `worker::Session`).
#[derive(Debug)]
pub(crate) struct Live<C: Counter> {
    id: usize,
    token: ManuallyDrop<C::Token>,
    oracle: ManuallyDrop<Token<Reference>>,
}

/// What one worker did in a phase.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Report {
    pub(crate) started: u64,
    pub(crate) ended: u64,
    pub(crate) handed_off: u64,
    pub(crate) received: u64,
}

// === impl Phase ===

impl Phase {
    /// A phase for `workers` workers (plus the reader) of `rounds` rounds each.
    pub(crate) fn new(workers: usize, rounds: usize, base: Totals) -> Arc<Phase> {
        Arc::new(Phase {
            barrier: Barrier::new(workers + 1),
            workers,
            rounds,
            base,
            announced: AtomicU64::new(0),
            starts_done: AtomicUsize::new(0),
            ends_begun: AtomicU64::new(0),
            ends_done: AtomicU64::new(0),
            end_begun: (0..(workers * rounds).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            finished: AtomicUsize::new(0),
        })
    }

    /// One job per worker, wired in a ring: worker `w` hands sessions to worker `w + 1`.
    pub(crate) fn jobs<C: Counter>(self: &Arc<Self>) -> Vec<Job<C>> {
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..self.workers)
            .map(|_| std::sync::mpsc::channel())
            .unzip();
        let mut senders: VecDeque<_> = senders.into();
        senders.rotate_left(1);
        inboxes
            .into_iter()
            .zip(senders)
            .enumerate()
            .map(|(worker, (inbox, next))| Job {
                phase: Arc::clone(self),
                worker,
                inbox,
                next,
            })
            .collect()
    }

    /// Takes the place of a worker that could not be given its job, so the barrier opens.
    pub(crate) fn stand_in(&self) {
        self.barrier.wait();
        self.finished.fetch_add(1, Ordering::Release);
    }

    /// Tally totals once every worker is done: (announced, starts done, ends begun, ends done).
    pub(crate) fn tally(&self) -> [u64; 4] {
        // Relaxed: read after every worker's reply arrived over a channel (happens-before).
        [
            self.announced.load(Ordering::Relaxed),
            self.starts_done.load(Ordering::Relaxed) as u64,
            self.ends_begun.load(Ordering::Relaxed),
            self.ends_done.load(Ordering::Relaxed),
        ]
    }

    fn start<C: Counter>(&self, counter: &C, oracle: &Reference) -> Live<C> {
        // Relaxed, then a Release fence: a reader that sees this start's bump in the counter and
        // then issues an Acquire fence synchronises with this fence, so it sees the announcement.
        self.announced.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        let token = counter.increment();
        let oracle = oracle.increment();
        // Release: pairs with the Acquire in `before`; a reader that sees `id + 1` knows this
        // increment happened before its read began (RMWs continue each other's release sequence).
        let id = self.starts_done.fetch_add(1, Ordering::Release);
        Live {
            id,
            token: ManuallyDrop::new(token),
            oracle: ManuallyDrop::new(oracle),
        }
    }

    fn end<C: Counter>(&self, counter: &C, oracle: &Reference, live: Live<C>) {
        // Relaxed: sequenced before the decrement, so if the decrement happened before a read
        // returned, the reader's later load sees the mark by coherence.
        self.end_begun[live.id / 64].fetch_or(1 << (live.id % 64), Ordering::Relaxed);
        // Relaxed + Release fence: as in `start`, for the upper bound on `ended`.
        self.ends_begun.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        counter.decrement(ManuallyDrop::into_inner(live.token));
        oracle.decrement(ManuallyDrop::into_inner(live.oracle));
        // Release: pairs with the Acquire in `before`; ends counted there happened before the read.
        self.ends_done.fetch_add(1, Ordering::Release);
    }
}

// === worker side ===

/// Marks the worker finished when dropped, even if a counter method panicked on it.
struct Finished<'a>(&'a Phase);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        // Release: the reader's Acquire load of `finished` then sees this worker's updates.
        self.0.finished.fetch_add(1, Ordering::Release);
    }
}

/// A worker's side of a phase: `rounds` starts; each session is handed to the next worker,
/// ended at once, or kept open for a few rounds, depending on the round and the worker;
/// sessions received from the previous worker are ended here.
pub(crate) fn work<C: Counter>(counter: &C, oracle: &Reference, job: Job<C>) -> Report {
    let Job {
        phase,
        worker,
        inbox,
        next,
    } = job;
    let _finished = Finished(&phase);
    let mut report = Report::default();
    let mut end = |live| {
        phase.end(counter, oracle, live);
        report.ended += 1;
    };
    let mut stash = VecDeque::with_capacity(STASH + 1);
    let mut handed_off = 0;
    let mut received = 0;
    phase.barrier.wait();
    for round in 0..phase.rounds {
        let live = phase.start(counter, oracle);
        // Worker `w` hands off every `w + 2`th session, so the workers hand off unequal
        // numbers and every thread's own cell ends up with more or fewer ends than starts.
        if round % (worker + 2) == 0 {
            match next.send(live) {
                Ok(()) => handed_off += 1,
                Err(SendError(live)) => end(live),
            }
        } else if round % 3 == 1 {
            end(live);
        } else {
            stash.push_back(live);
            if stash.len() > STASH {
                end(stash.pop_front().expect("stash is not empty"));
            }
        }
        while let Ok(live) = inbox.try_recv() {
            received += 1;
            end(live);
        }
    }
    stash.drain(..).for_each(&mut end);
    // Hang up, then end whatever the previous worker still sends until it hangs up too.
    drop(next);
    for live in inbox {
        received += 1;
        end(live);
    }
    Report {
        started: phase.rounds as u64,
        handed_off,
        received,
        ..report
    }
}

// === reader side ===

/// The tally sampled just before a read.
#[derive(Clone, Copy, Debug)]
struct Before {
    starts_done: usize,
    ends_done: u64,
}

/// What a read may return, from the tally around it.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    active: (u64, u64),
    started: (u64, u64),
    ended: (u64, u64),
    /// The samples the bounds were computed from, for the failure message.
    pinned: u64,
    before: Before,
    announced: u64,
    ends_begun: u64,
    still_open: u64,
}

impl Bounds {
    fn explain(&self) -> String {
        format!(
            "{} sessions pinned open across the phase; before the read {} phase starts and {} \
             phase ends had completed; when it returned {} starts and {} ends had begun, and \
             {} of the sessions started before it were not yet ending",
            self.pinned,
            self.before.starts_done,
            self.before.ends_done,
            self.announced,
            self.ends_begun,
            self.still_open
        )
    }

    /// `Ok` if `low <= value <= high`.
    fn check(&self, what: &str, value: u64, (low, high): (u64, u64)) -> Result<(), String> {
        if value < low {
            Err(format!(
                "{what} = {value} is below its lower bound {low} (it missed what was complete \
                 before the read began and not undone before it returned): {}",
                self.explain()
            ))
        } else if value > high {
            Err(format!(
                "{what} = {value} is above its upper bound {high} (it counted what had not \
                 begun by the time the read returned, or missed ends complete before it began): {}",
                self.explain()
            ))
        } else {
            Ok(())
        }
    }
}

/// Which read the reader makes.
#[derive(Clone, Copy, Debug)]
enum Read {
    Load,
    Totals,
    Idle,
}

impl Phase {
    fn before(&self) -> Before {
        // Acquire: pairs with the Release increments in `start` / `end`.
        Before {
            starts_done: self.starts_done.load(Ordering::Acquire),
            ends_done: self.ends_done.load(Ordering::Acquire),
        }
    }

    fn after(&self, before: Before) -> Bounds {
        // Acquire fence: pairs with the Release fences in `start` / `end` through whatever
        // counter cell the read just loaded (see the module docs).
        fence(Ordering::Acquire);
        let announced = self.announced.load(Ordering::Relaxed);
        let ends_begun = self.ends_begun.load(Ordering::Relaxed);
        // Sessions whose increment returned before the read began and whose end had not been
        // announced by the time it returned.
        let still_open = before.starts_done as u64 - self.ends_begun_below(before.starts_done);
        let pinned = self.base.started - self.base.ended;
        Bounds {
            active: (
                pinned + still_open,
                (pinned + announced).saturating_sub(before.ends_done),
            ),
            started: (
                self.base.started + before.starts_done as u64,
                self.base.started + announced,
            ),
            ended: (
                self.base.ended + before.ends_done,
                self.base.ended + ends_begun,
            ),
            pinned,
            before,
            announced,
            ends_begun,
            still_open,
        }
    }

    /// How many sessions with an id below `n` have announced their end.
    fn ends_begun_below(&self, n: usize) -> u64 {
        // Relaxed: only coherence is needed. A mark that happened before this call (because its
        // decrement happened before the read returned) is seen; one seen early only loosens
        // the lower bound.
        let (full, rest) = (n / 64, n % 64);
        let count = |word: &AtomicU64, mask: u64| {
            u64::from((word.load(Ordering::Relaxed) & mask).count_ones())
        };
        let mut begun: u64 = self.end_begun[..full]
            .iter()
            .map(|w| count(w, u64::MAX))
            .sum();
        if rest > 0 {
            begun += count(&self.end_begun[full], (1 << rest) - 1);
        }
        begun
    }

    /// Reads `counter` continuously until every worker has finished (plus a few reads more),
    /// checking each read; returns the number of reads, or the first violation.
    pub(crate) fn read_until_finished<C: Counter>(&self, counter: &C) -> Result<usize, String> {
        self.barrier.wait();
        let mut reads = 0;
        let mut trailing = 0;
        while trailing < TRAILING_READS {
            // Acquire: pairs with `Finished::drop`.
            if self.finished.load(Ordering::Acquire) == self.workers {
                trailing += 1;
            }
            let read = [Read::Load, Read::Totals, Read::Idle][reads % 3];
            self.read_once(counter, read)
                .map_err(|e| format!("concurrent read #{reads}: {e}"))?;
            reads += 1;
            if reads % YIELD_EVERY == 0 {
                std::thread::yield_now();
            }
        }
        Ok(reads)
    }

    fn read_once<C: Counter>(&self, counter: &C, read: Read) -> Result<(), String> {
        let before = self.before();
        match read {
            Read::Load => {
                let load = counter.load();
                let b = self.after(before);
                b.check("load()", load, b.active)
            }
            Read::Totals => {
                let Some(totals) = counter.totals() else {
                    return Ok(());
                };
                let b = self.after(before);
                if totals.started < totals.ended {
                    return Err(format!("totals() = {totals:?} has started < ended"));
                }
                b.check("totals().started", totals.started, b.started)?;
                b.check("totals().ended", totals.ended, b.ended)?;
                b.check("totals().active()", totals.active(), b.active)
                    .map_err(|e| format!("{e}; totals() = {totals:?}"))
            }
            Read::Idle => {
                let idle = counter.is_idle();
                let b = self.after(before);
                match (idle, b.active) {
                    (true, (1.., _)) => Err(format!(
                        "is_idle() = true but at least {} sessions were open throughout: {}",
                        b.active.0,
                        b.explain()
                    )),
                    (false, (_, 0)) => Err(format!(
                        "is_idle() = false but no session could have been counted: {}",
                        b.explain()
                    )),
                    _ => Ok(()),
                }
            }
        }
    }
}
