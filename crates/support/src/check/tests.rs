//! The checker must be able to fail: deliberately broken counters are run through it and must
//! be caught; a slow but correct one must pass; the real implementations must pass.

use std::collections::HashMap;
use std::panic;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::thread::ThreadId;
use std::time::Duration;

use livecount::{Counter, PerThread, Reference, Sharded, Single, Striped, Totals};

use crate::check::{Op, Program, check_program, check_program_with};

/// The token of the broken counters below.
#[derive(Debug)]
struct Ticket;

/// The panic message of `check_program::<C>(program)`, or `None` if it passed.
fn failure_of<C: Counter + Default + 'static>(program: &Program) -> Option<String> {
    let caught = panic::catch_unwind(|| check_program::<C>(program)).err()?;
    Some(match caught.downcast::<String>() {
        Ok(message) => *message,
        Err(caught) => caught
            .downcast_ref::<&str>()
            .map_or("(non-string panic)".into(), |s| s.to_string()),
    })
}

fn p(threads: u8, ops: Vec<Op>) -> Program {
    Program::new(threads, ops)
}

/// A program touching every op kind, with cross-thread ends and a race with sessions open.
fn tour() -> Program {
    p(
        3,
        vec![
            Op::Burst { thread: 0, n: 5 },
            Op::End {
                thread: 1,
                session: 0,
            },
            Op::Respawn { thread: 0 },
            Op::End {
                thread: 2,
                session: 3,
            },
            Op::Read { thread: 0 },
            Op::Race { rounds: 16 },
            Op::Start { thread: 1 },
            Op::Respawn { thread: 1 },
            Op::End {
                thread: 0,
                session: 255,
            },
            Op::Read { thread: 2 },
            Op::Burst { thread: 2, n: 2 },
            Op::EndAtExit {
                thread: 2,
                session: 1,
            },
            Op::EndAtExit {
                thread: 0,
                session: 0,
            },
        ],
    )
}

// === the real counters pass ===

#[test]
fn every_implementation_passes_the_tour() {
    check_program::<Single>(&tour());
    check_program::<Sharded>(&tour());
    check_program::<Striped>(&tour());
    check_program::<PerThread>(&tour());
    check_program::<Reference>(&tour());
    check_program_with(&tour(), || Sharded::with_shards(1));
    check_program_with(&tour(), || Striped::with_max_stripes(2));
}

#[test]
fn empty_and_edge_programs_pass() {
    check_program::<Sharded>(&p(2, vec![]));
    check_program::<Striped>(&p(
        4,
        vec![Op::End {
            thread: 3,
            session: 9,
        }],
    ));
    check_program::<PerThread>(&p(2, vec![Op::Respawn { thread: 1 }; 4]));
    check_program::<Sharded>(&p(
        2,
        vec![Op::EndAtExit {
            thread: 0,
            session: 0,
        }],
    ));
}

// === broken: loses every 7th end (a missed decrement: a ghost session) ===

#[derive(Debug, Default)]
struct DropsEvery7th {
    active: AtomicU64,
    ends: AtomicU64,
}

impl Counter for DropsEvery7th {
    type Token = Ticket;
    fn increment(&self) -> Ticket {
        self.active.fetch_add(1, SeqCst);
        Ticket
    }
    fn decrement(&self, _: Ticket) {
        if self.ends.fetch_add(1, SeqCst) % 7 != 6 {
            self.active.fetch_sub(1, SeqCst);
        }
    }
    fn load(&self) -> u64 {
        self.active.load(SeqCst)
    }
    fn totals(&self) -> Option<Totals> {
        None
    }
}

#[test]
fn a_lost_decrement_is_caught() {
    let mut ops = vec![Op::Burst { thread: 0, n: 8 }];
    ops.extend((0..8).map(|i| Op::End {
        thread: i % 2,
        session: 0,
    }));
    let message = failure_of::<DropsEvery7th>(&p(2, ops)).expect("caught");
    assert!(message.contains("at op #7"), "{message}");
    assert!(
        message.contains("load() = 2 but 1 sessions are open"),
        "{message}"
    );
    assert!(message.contains("DropsEvery7th"), "{message}");
    assert!(
        message.contains("program: Program { threads: 2"),
        "{message}"
    );
}

// === broken: signed shard per thread, each shard clamped at zero when read ===

/// One signed value per thread; `load` sums the shards, clamping each at zero. A session that
/// ends on another thread leaves `-1` on that thread's shard, which the clamp turns into 0.
#[derive(Debug, Default)]
struct ClampedShards {
    shards: Mutex<HashMap<ThreadId, i64>>,
}

impl ClampedShards {
    fn add(&self, delta: i64) {
        let id = std::thread::current().id();
        *self.shards.lock().unwrap().entry(id).or_default() += delta;
    }
}

impl Counter for ClampedShards {
    type Token = Ticket;
    fn increment(&self) -> Ticket {
        self.add(1);
        Ticket
    }
    fn decrement(&self, _: Ticket) {
        self.add(-1);
    }
    fn load(&self) -> u64 {
        let shards = self.shards.lock().unwrap();
        shards.values().map(|&v| v.max(0) as u64).sum()
    }
    fn totals(&self) -> Option<Totals> {
        None
    }
}

#[test]
fn a_cross_thread_end_on_a_clamped_shard_is_caught() {
    let program = p(
        2,
        vec![
            Op::Start { thread: 0 },
            Op::End {
                thread: 1,
                session: 0,
            },
        ],
    );
    let message = failure_of::<ClampedShards>(&program).expect("caught");
    assert!(
        message.contains("at op #1") && message.contains("load() = 1 but 0 sessions"),
        "{message}"
    );
    // Ending on the thread that started it hides the bug from the lockstep steps; the final
    // race, which hands sessions between threads, still catches it.
    let same_thread = p(
        2,
        vec![
            Op::Start { thread: 0 },
            Op::End {
                thread: 0,
                session: 0,
            },
        ],
    );
    let message = failure_of::<ClampedShards>(&same_thread).expect("caught");
    assert!(message.contains("in the final race"), "{message}");
}

// === broken only under concurrency: a read that loads `started` before `ended` ===

/// Exact whenever nothing runs concurrently, so only the concurrent phase can catch it. Its
/// read loads `started` first and `ended` after a pause (the wrong order), so sessions that
/// start and end during the pause are subtracted without being added, hiding open ones.
#[derive(Debug, Default)]
struct TornRead {
    started: AtomicU64,
    ended: AtomicU64,
    right_order: bool,
}

impl TornRead {
    fn read(&self) -> Totals {
        let pause = || std::thread::sleep(Duration::from_micros(50));
        if self.right_order {
            let ended = self.ended.load(SeqCst);
            pause();
            let started = self.started.load(SeqCst);
            Totals { started, ended }
        } else {
            let started = self.started.load(SeqCst);
            pause();
            let ended = self.ended.load(SeqCst);
            Totals { started, ended }
        }
    }
}

impl Counter for TornRead {
    type Token = Ticket;
    fn increment(&self) -> Ticket {
        self.started.fetch_add(1, SeqCst);
        Ticket
    }
    fn decrement(&self, _: Ticket) {
        self.ended.fetch_add(1, SeqCst);
    }
    fn load(&self) -> u64 {
        self.read().active()
    }
    fn totals(&self) -> Option<Totals> {
        Some(self.read())
    }
}

/// The same reads in the right order (all ends, then all starts), just as slow: correct.
#[derive(Debug)]
struct SlowButRight(TornRead);

impl Default for SlowButRight {
    fn default() -> Self {
        SlowButRight(TornRead {
            right_order: true,
            ..TornRead::default()
        })
    }
}

impl Counter for SlowButRight {
    type Token = Ticket;
    fn increment(&self) -> Ticket {
        self.0.increment()
    }
    fn decrement(&self, t: Ticket) {
        self.0.decrement(t)
    }
    fn load(&self) -> u64 {
        self.0.load()
    }
    fn totals(&self) -> Option<Totals> {
        self.0.totals()
    }
}

fn racy_program() -> Program {
    let mut ops = vec![Op::Burst { thread: 0, n: 3 }];
    ops.extend([Op::Race { rounds: 32 }, Op::Read { thread: 1 }].repeat(6));
    p(4, ops)
}

#[test]
fn a_torn_concurrent_read_is_caught() {
    // Timing decides whether a read overlaps enough updates, so allow several attempts; one
    // usually suffices.
    let caught = (0..30).find_map(|_| failure_of::<TornRead>(&racy_program()));
    let message = caught.expect("the torn read was never caught in 30 programs");
    assert!(message.contains("concurrent read"), "{message}");
    // A torn read shows as a value below the sessions known open, as `is_idle()` while
    // some were (the read the idle check made was the torn one), or, when more ends than
    // starts landed in the pause, as totals with started < ended.
    assert!(
        message.contains("below its lower bound")
            || message.contains("is_idle() = true but at least")
            || message.contains("has started < ended"),
        "{message}"
    );
}

#[test]
fn a_slow_but_correct_read_passes() {
    for _ in 0..3 {
        check_program::<SlowButRight>(&racy_program());
    }
}

// === broken: an end made while the thread tears down its thread-locals is lost ===

/// Per-thread state with a destructor, like a counter's thread registration: it is
/// registered at first use and destroyed at thread exit.
struct Registration;

impl Drop for Registration {
    fn drop(&mut self) {}
}

thread_local! {
    static REGISTERED: Registration = const { Registration };
}

/// Exact, except that a decrement made after this thread's thread-local state is gone is
/// dropped (a per-thread counter that forgot its teardown fallback).
#[derive(Debug, Default)]
struct LosesTeardownEnds(Single);

impl Counter for LosesTeardownEnds {
    type Token = <Single as Counter>::Token;
    fn increment(&self) -> Self::Token {
        REGISTERED.with(|_| ());
        self.0.increment()
    }
    fn decrement(&self, token: Self::Token) {
        if REGISTERED.try_with(|_| ()).is_ok() {
            self.0.decrement(token);
        } else {
            std::mem::forget(token); // the lost end
        }
    }
    fn load(&self) -> u64 {
        self.0.load()
    }
    fn totals(&self) -> Option<Totals> {
        None
    }
}

#[test]
fn an_end_lost_during_thread_teardown_is_caught() {
    let program = p(
        2,
        vec![
            Op::Start { thread: 1 },
            Op::Read { thread: 1 }, // thread 1 registers with the counter
            Op::EndAtExit {
                thread: 1,
                session: 0,
            },
        ],
    );
    let message = failure_of::<LosesTeardownEnds>(&program).expect("caught");
    assert!(
        message.contains("at op #2") && message.contains("load() = 1 but 0 sessions"),
        "{message}"
    );
}

// === broken: a counter method that panics (on a worker thread) is reported, not hung ===

#[derive(Debug, Default)]
struct PanicsOnIncrement {
    inner: Single,
    calls: AtomicU64,
    limit: u64,
}

impl Counter for PanicsOnIncrement {
    type Token = <Single as Counter>::Token;
    fn increment(&self) -> Self::Token {
        let n = self.calls.fetch_add(1, SeqCst);
        assert!(n < self.limit, "increment #{n}: deliberate panic");
        self.inner.increment()
    }
    fn decrement(&self, token: Self::Token) {
        self.inner.decrement(token)
    }
    fn load(&self) -> u64 {
        self.inner.load()
    }
    fn totals(&self) -> Option<Totals> {
        None
    }
}

#[test]
fn a_panicking_counter_fails_the_check_instead_of_hanging() {
    for limit in [2, 20] {
        let program = p(
            3,
            vec![Op::Burst { thread: 1, n: 4 }, Op::Race { rounds: 16 }],
        );
        let caught = panic::catch_unwind(|| {
            check_program_with(&program, || PanicsOnIncrement {
                limit,
                ..PanicsOnIncrement::default()
            })
        });
        let message = *caught.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("died"), "limit {limit}: {message}");
    }
}
