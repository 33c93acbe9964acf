//! Shuttle models of every counter with eight threads at once — more than loom's limit of
//! five — checking the gauge read guarantee documented on `Counter` under randomised (and PCT)
//! schedules.
//!
//! Each execution runs one workload over one counter:
//!
//! * the main thread pins [`PINNED`] sessions open for the whole run;
//! * two *acceptors* start sessions, end some themselves and hand the rest through channels to
//!   two *closers*, so most ends land on another thread (and shard, stripe or cell) than their
//!   start;
//! * two *churners* each run a chain of short-lived children: a child starts sessions, ends
//!   the token its predecessor left, and exits, handing its last token on. A child's thread
//!   index goes back to the pool when it exits and the next thread to register takes it, so
//!   `PerThread` cells are inherited mid-run and `Sharded` shards change hands;
//! * two *readers* read continuously and check every value against bookkeeping atomics;
//! * a *migrator* moves every thread to the next CPU a few times (`PerCpu` reads the CPU as a
//!   model variable: an update may read it, be migrated, and add to the old CPU's cell).
//!
//! # What the bookkeeping proves
//!
//! Four shuttle atomics bracket every counter update: `begun` and `dec_begun` are bumped just
//! *before* an increment / decrement, `inc_done` and `dec_done` just *after*. A reader loads the
//! `*_done` books before its read and the `*_begun` books after it. Then:
//!
//! * `inc_done` (before) - `dec_begun` (after) is at most the number of sessions whose increment
//!   finished before the read began and whose decrement had not begun when it ended — sessions
//!   open during the whole read, which `load` must count (item 2 of the guarantee). The pinned
//!   sessions are such sessions too, so the bound is the larger of the two.
//! * `begun` (after) is at least the number of increments that took effect before the read
//!   returned, which `load` must not exceed (item 3).
//! * `totals()` holds monotone counts: `started` is between `inc_done` (before) and `begun`
//!   (after), `ended` between `dec_done` (before) and `dec_begun` (after), `ended <= started`,
//!   and neither ever decreases from one read to the next.
//! * After every thread has joined, the counter is exact: the totals equal the books.
//!
//! # What this cannot find
//!
//! Shuttle models every atomic access as `SeqCst`, so it explores interleavings but never weak
//! memory behaviour: a too-weak ordering (a Relaxed that should be a Release) passes here. The
//! loom models (`tests/loom_*.rs`) check the orderings; shuttle adds thread counts and run
//! lengths loom cannot reach.
//!
//! Run with `scripts/shuttle.sh` (`SHUTTLE_ITERATIONS` sets the executions per scheduler,
//! `SHUTTLE_REPLAY=<file>` replays a failing schedule printed by shuttle).

#![cfg(livecount_shuttle)]

use std::sync::Arc;

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped, Totals};
use shuttle::sync::atomic::{AtomicU64, Ordering::SeqCst};
use shuttle::sync::mpsc;
use shuttle::thread;

/// Sessions the main thread keeps open from before the first spawn until after the last join.
const PINNED: u64 = 2;
/// Sessions each acceptor starts; it ends every third itself and hands the rest to its closer.
const ACCEPTED: usize = 3;
/// Short-lived children each churner runs one after another.
const CHILDREN: usize = 3;
/// Reads (a `load`, a `totals` and an `is_idle`, each checked) each reader performs.
const READS: usize = 3;
/// Times the migrator moves every thread to the next CPU (only `PerCpu` reads the CPU).
const MIGRATIONS: usize = 4;

/// Executions per scheduler and implementation; override with `SHUTTLE_ITERATIONS`.
const DEFAULT_ITERATIONS: usize = 10_000;
/// PCT depth: bugs needing up to this many ordering constraints are found with good odds.
const PCT_DEPTH: usize = 3;

fn iterations() -> usize {
    std::env::var("SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_ITERATIONS)
}

// === impl Books ===

/// The test's own record of the updates, bumped on the right side of each counter update.
#[derive(Debug, Default)]
struct Books {
    /// Bumped before `increment`: an upper bound on starts that took effect.
    begun: AtomicU64,
    /// Bumped after `increment` returned: a lower bound on starts that took effect.
    inc_done: AtomicU64,
    /// Bumped before `decrement`: an upper bound on ends that took effect.
    dec_begun: AtomicU64,
    /// Bumped after `decrement` returned: a lower bound on ends that took effect.
    dec_done: AtomicU64,
}

impl Books {
    fn start<C: Counter>(&self, counter: &C) -> C::Token {
        self.begun.fetch_add(1, SeqCst);
        let token = counter.increment();
        self.inc_done.fetch_add(1, SeqCst);
        token
    }

    fn end<C: Counter>(&self, counter: &C, token: C::Token) {
        self.dec_begun.fetch_add(1, SeqCst);
        counter.decrement(token);
        self.dec_done.fetch_add(1, SeqCst);
    }
}

/// What a reader knew before a read (loaded before the read started).
#[derive(Debug, Clone, Copy)]
struct Before {
    inc_done: u64,
    dec_done: u64,
}

/// What a reader knew after a read (loaded after the read returned).
#[derive(Debug, Clone, Copy)]
struct After {
    begun: u64,
    dec_begun: u64,
}

/// Runs `read` between the two halves of the bookkeeping.
fn bracket<T>(books: &Books, read: impl FnOnce() -> T) -> (Before, T, After) {
    let before = Before {
        inc_done: books.inc_done.load(SeqCst),
        dec_done: books.dec_done.load(SeqCst),
    };
    let value = read();
    let after = After {
        begun: books.begun.load(SeqCst),
        dec_begun: books.dec_begun.load(SeqCst),
    };
    (before, value, after)
}

// === readers ===

/// Checks one `load` against the gauge read guarantee.
fn check_load<C: Counter>(counter: &C, books: &Books) {
    let (before, active, after) = bracket(books, || counter.load());
    let open_throughout = PINNED.max(before.inc_done.saturating_sub(after.dec_begun));
    assert!(
        active >= open_throughout,
        "load {active} < {open_throughout} sessions open during the whole read \
         ({before:?}, {after:?})"
    );
    assert!(
        active <= after.begun,
        "load {active} > {} sessions started by the end of the read ({before:?}, {after:?})",
        after.begun
    );
}

/// Checks one `totals` read, and that it did not go backwards from the reader's `last`.
fn check_totals<C: Counter>(counter: &C, books: &Books, last: &mut Option<Totals>) {
    let (before, totals, after) = bracket(books, || counter.totals());
    let Some(t) = totals else { return };
    let ctx = format!("{t:?}, {before:?}, {after:?}, last {last:?}");
    assert!(t.started >= t.ended, "ended > started: {ctx}");
    assert!(
        t.started >= before.inc_done,
        "a finished start is missing: {ctx}"
    );
    assert!(t.started <= after.begun, "a start that never began: {ctx}");
    assert!(
        t.ended >= before.dec_done,
        "a finished end is missing: {ctx}"
    );
    assert!(t.ended <= after.dec_begun, "an end that never began: {ctx}");
    assert!(t.active() >= PINNED, "pinned sessions missing: {ctx}");
    if let Some(prev) = *last {
        assert!(
            t.started >= prev.started && t.ended >= prev.ended,
            "totals went backwards: {ctx}"
        );
    }
    *last = Some(t);
}

fn reader<C: Counter>(counter: &C, books: &Books) {
    let mut last = None;
    for _ in 0..READS {
        check_load(counter, books);
        check_totals(counter, books, &mut last);
        // The pinned sessions are open throughout, so there is no idle moment to report.
        assert!(!counter.is_idle(), "is_idle with {PINNED} sessions pinned");
    }
}

// === writers ===

/// Starts sessions; ends every third itself and sends the rest to `closer`.
fn acceptor<C: Counter>(counter: &C, books: &Books, closer: mpsc::Sender<C::Token>) {
    for i in 0..ACCEPTED {
        let token = books.start(counter);
        if i % 3 == 2 {
            books.end(counter, token);
        } else {
            closer
                .send(token)
                .expect("closer alive until every sender is gone");
        }
    }
}

/// Ends every session it is handed, on a thread that started none of them.
fn closer<C: Counter>(counter: &C, books: &Books, tokens: mpsc::Receiver<C::Token>) {
    for token in tokens {
        books.end(counter, token);
    }
}

/// Runs short-lived children one after another. Each starts two sessions, ends the token its
/// predecessor left (started on another, now exited, thread) and one of its own, and exits
/// with the other; the churner ends the last child's token itself.
fn churner<C: Counter + 'static>(counter: &Arc<C>, books: &Arc<Books>) {
    let mut carried: Option<C::Token> = None;
    for _ in 0..CHILDREN {
        let (counter, books) = (Arc::clone(counter), Arc::clone(books));
        let child = thread::spawn(move || {
            let mine = books.start(&*counter);
            let handed_on = books.start(&*counter);
            if let Some(inherited) = carried {
                books.end(&*counter, inherited);
            }
            books.end(&*counter, mine);
            handed_on
        });
        carried = Some(child.join().expect("child panicked"));
    }
    if let Some(last) = carried {
        books.end(&**counter, last);
    }
}

// === the model ===

/// One execution: eight threads (two acceptors, two closers, two churners, two readers), a
/// migrator, the churners' children and the main thread, then exact checks at quiescence.
fn model<C: Counter + 'static>(new: fn() -> C) {
    let counter = Arc::new(new());
    let books = Arc::new(Books::default());
    let pinned: Vec<C::Token> = (0..PINNED).map(|_| books.start(&*counter)).collect();

    let mut handles = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel();
        handles.push(spawn(&counter, &books, move |c, b| acceptor(&**c, b, tx)));
        handles.push(spawn(&counter, &books, move |c, b| closer(&**c, b, rx)));
        handles.push(spawn(&counter, &books, churner));
        handles.push(spawn(&counter, &books, |c, b| reader(&**c, b)));
    }
    // The migrator: between any two steps of any update, every thread may change CPU.
    handles.push(thread::spawn(|| {
        for _ in 0..MIGRATIONS {
            livecount::model_migrate();
            thread::yield_now();
        }
    }));
    for handle in handles {
        handle.join().expect("model thread panicked");
    }

    let started = books.begun.load(SeqCst);
    let ended = books.dec_begun.load(SeqCst);
    assert_eq!(started, books.inc_done.load(SeqCst));
    assert_eq!(ended, books.dec_done.load(SeqCst));
    assert_eq!(started - ended, PINNED);
    assert_quiescent(&*counter, started, ended);

    for token in pinned {
        books.end(&*counter, token);
    }
    assert_quiescent(&*counter, started, ended + PINNED);
    assert!(counter.is_idle());
}

/// Spawns a model thread running `f` on its own handles to the counter and the books.
fn spawn<C: Counter + 'static>(
    counter: &Arc<C>,
    books: &Arc<Books>,
    f: impl FnOnce(&Arc<C>, &Arc<Books>) + Send + 'static,
) -> thread::JoinHandle<()> {
    let (counter, books) = (Arc::clone(counter), Arc::clone(books));
    thread::spawn(move || f(&counter, &books))
}

/// With no update running, every read is exact.
fn assert_quiescent<C: Counter>(counter: &C, started: u64, ended: u64) {
    assert_eq!(
        counter.load(),
        started - ended,
        "quiescent load of {counter:?}"
    );
    if let Some(totals) = counter.totals() {
        assert_eq!(totals, Totals { started, ended }, "quiescent totals");
    }
}

/// Runs the model over counters made by `new` under the random or the PCT scheduler, or
/// replays the failing schedule in the file named by `SHUTTLE_REPLAY` (shuttle prints it when a
/// test fails; pick the one test it came from with a test-name filter).
fn check<C: Counter + 'static>(scheduler: &str, new: fn() -> C) {
    let model = move || model(new);
    if let Ok(path) = std::env::var("SHUTTLE_REPLAY") {
        let schedule =
            std::fs::read_to_string(&path).expect("SHUTTLE_REPLAY names a readable file");
        let schedule: String = schedule.split_whitespace().collect();
        return shuttle::replay(model, schedule.trim_matches('"'));
    }
    let n = iterations();
    match scheduler {
        "random" => shuttle::check_random(model, n),
        "pct" => shuttle::check_pct(model, n, PCT_DEPTH),
        other => unreachable!("unknown scheduler {other}"),
    }
}

/// One module per counter configuration, one test per scheduler.
macro_rules! suite {
    ($name:ident, $new:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn random_schedules() {
                check("random", $new);
            }

            #[test]
            fn pct_schedules() {
                check("pct", $new);
            }
        }
    };
}

suite!(single, Single::new);
// `new()` sizes by the CPU count; on a 2-CPU machine that is 4 shards for 8+ threads, so
// threads share shards. 16 shards gives every live thread its own.
suite!(sharded, Sharded::new);
suite!(sharded_wide, || Sharded::with_shards(16));
// `new()` caps stripes at the CPU count; at 2 that is the cap the first contention opens, so
// the collide-rehash-grow path only runs with a higher cap.
suite!(striped, Striped::new);
suite!(striped_growing, || Striped::with_max_stripes(16));
suite!(per_thread, PerThread::new);
// Two cells: model threads sit on CPUs `index + shift`, so as the migrator shifts them some
// updates land on per-CPU cells and some on the overflow cell, and a session's start and
// end on different ones.
suite!(per_cpu, || PerCpu::with_cpus(2));
suite!(reference, Reference::new);
