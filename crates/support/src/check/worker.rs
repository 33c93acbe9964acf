//! The worker thread behind each virtual thread: it runs one command at a time for the driver.

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use livecount::{Counter, Reference, Token, Totals};

use crate::check::race;

/// One open session: the counter's token, the oracle's token, and where it started.
///
/// A session a failed program abandons (the check stops at the first failure) is dropped
/// without being ended: its tokens are forgotten, not dropped, so livecount's debug-build
/// check for a dropped token does not fire on a program that has already failed.
#[derive(Debug)]
pub(crate) struct Session<C: Counter> {
    pub(crate) token: ManuallyDrop<C::Token>,
    pub(crate) oracle: ManuallyDrop<Token<Reference>>,
    /// The virtual thread that started it.
    pub(crate) started_on: usize,
}

impl<C: Counter> Session<C> {
    fn start(counter: &C, oracle: &Reference, thread: usize) -> Self {
        Session {
            token: ManuallyDrop::new(counter.increment()),
            oracle: ManuallyDrop::new(oracle.increment()),
            started_on: thread,
        }
    }

    fn end(self, counter: &C, oracle: &Reference) {
        counter.decrement(ManuallyDrop::into_inner(self.token));
        oracle.decrement(ManuallyDrop::into_inner(self.oracle));
    }
}

/// What one thread saw in one `load` + `totals` + `is_idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Observation {
    pub(crate) load: u64,
    pub(crate) totals: Option<Totals>,
    pub(crate) idle: bool,
}

impl Observation {
    pub(crate) fn of(counter: &impl Counter) -> Self {
        Observation {
            load: counter.load(),
            totals: counter.totals(),
            idle: counter.is_idle(),
        }
    }

    /// `Ok` if this quiescent observation is exact for `model`; `who` names the counter.
    pub(crate) fn expect(&self, who: &str, model: Totals) -> Result<(), String> {
        let open = model.started - model.ended;
        let counts = format!("started {}, ended {}", model.started, model.ended);
        if self.load != open {
            return Err(format!(
                "{who} load() = {} but {open} sessions are open ({counts})",
                self.load
            ));
        }
        if let Some(totals) = self.totals.filter(|&t| t != model) {
            return Err(format!(
                "{who} totals() = {totals:?} but the model has {model:?}"
            ));
        }
        if self.idle != (open == 0) {
            return Err(format!(
                "{who} is_idle() = {} with {open} sessions open ({counts})",
                self.idle
            ));
        }
        Ok(())
    }
}

/// A request from the driver to one worker.
#[derive(Debug)]
pub(crate) enum Command<C: Counter> {
    /// Start this many sessions and hand them back.
    Start(usize),
    /// End this session here.
    End(Session<C>),
    /// Observe the counter and the oracle from this thread.
    Read,
    /// Take part in a concurrent phase.
    Race(race::Job<C>),
    /// Exit the thread.
    Exit,
    /// Exit the thread, ending this session from a thread-local destructor; the outcome
    /// (`Err` with the panic message if the end panicked) is sent on the channel.
    ExitEnding(Session<C>, Sender<Result<(), String>>),
}

/// A worker's answer to one [`Command`] (`Exit` has none).
#[derive(Debug)]
pub(crate) enum Reply<C: Counter> {
    Started(Vec<Session<C>>),
    Ended,
    Read {
        counter: Observation,
        oracle: Observation,
    },
    Raced(race::Report),
}

/// Work queued for this thread's teardown.
struct AtExit(RefCell<Vec<Box<dyn FnOnce()>>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        for job in self.0.get_mut().drain(..) {
            job();
        }
    }
}

thread_local! {
    static AT_EXIT: AtExit = const { AtExit(RefCell::new(Vec::new())) };
}

/// Queues `session`'s end for this thread's teardown; reports on `done` when it has run.
fn end_at_exit<C: Counter + 'static>(
    session: Session<C>,
    counter: Arc<C>,
    oracle: Arc<Reference>,
    done: Sender<Result<(), String>>,
) {
    let job = move || {
        let ended = panic::catch_unwind(AssertUnwindSafe(|| session.end(&*counter, &oracle)))
            .map_err(|panic| crate::check::replay::panic_message(&*panic).to_string());
        // The driver waits for this after joining the thread; it may have given up already.
        let _ = done.send(ended);
    };
    AT_EXIT.with(|at_exit| at_exit.0.borrow_mut().push(Box::new(job)));
}

/// The body of worker thread `thread`: runs commands until told to exit or until the driver
/// hangs up.
pub(crate) fn run<C: Counter + 'static>(
    thread: usize,
    counter: Arc<C>,
    oracle: Arc<Reference>,
    commands: Receiver<Command<C>>,
    replies: Sender<Reply<C>>,
) {
    // Register the teardown hook before the counter registers its own per-thread state:
    // thread-local destructors run in reverse order of registration (on the platforms we
    // run), so the hook's ends come after the counter has let go of this thread's index.
    AT_EXIT.with(|_| ());
    let (counter_arc, oracle_arc) = (counter, oracle);
    let (counter, oracle) = (&*counter_arc, &*oracle_arc);
    for command in commands {
        let reply = match command {
            Command::Start(n) => Reply::Started(
                (0..n)
                    .map(|_| Session::start(counter, oracle, thread))
                    .collect(),
            ),
            Command::End(session) => {
                session.end(counter, oracle);
                Reply::Ended
            }
            Command::Read => Reply::Read {
                counter: Observation::of(counter),
                oracle: Observation::of(oracle),
            },
            Command::Race(job) => Reply::Raced(race::work(counter, oracle, job)),
            Command::Exit => return,
            Command::ExitEnding(session, done) => {
                let counter = Arc::clone(&counter_arc);
                end_at_exit(session, counter, Arc::clone(&oracle_arc), done);
                return;
            }
        };
        if replies.send(reply).is_err() {
            return;
        }
    }
}
