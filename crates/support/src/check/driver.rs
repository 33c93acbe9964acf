//! [`check_program`]: runs a [`Program`] on real threads in lockstep and checks every step.

use std::fmt;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use livecount::{Counter, Reference, Totals};

use crate::check::program::{Op, Program};
use crate::check::race::Phase;
use crate::check::worker::{self, Command, Observation, Reply, Session};

/// Rounds per thread of the concurrent phase every program ends with.
pub const FINAL_RACE_ROUNDS: usize = 32;

/// Runs `program` against a fresh `C::default()` and panics, describing the program and the
/// step, at the first violation of the [`Counter`] contract. See [`check_program_with`].
///
/// ```
/// use livecount::Striped;
/// use livecount_support::check::{Op, Program, check_program};
///
/// let program = Program::new(2, vec![
///     Op::Burst { thread: 0, n: 3 },
///     Op::End { thread: 1, session: 0 }, // ends on another thread than it started
///     Op::Race { rounds: 8 },            // two sessions stay open during the race
///     Op::Read { thread: 1 },
/// ]);
/// check_program::<Striped>(&program);
/// ```
pub fn check_program<C: Counter + Default + 'static>(program: &Program) {
    check_program_with(program, C::default);
}

/// Runs `program` against the counter `new_counter` builds, next to a [`Reference`] counter
/// and a plain model (started / ended integers), and panics at the first difference.
///
/// Each virtual thread is a real OS thread. Operations run in lockstep: the driver sends
/// each one to its thread and waits for it to finish, so tokens travel between threads and
/// the exact expected value is known after every step. After every step the driver (itself
/// another thread) compares `load`, `totals` (when `Some`) and `is_idle` of the counter and
/// of the reference with the model; [`Op::Read`] does the same from a worker. [`Op::Race`]
/// and a final race run every thread at once against a continuous reader held to the gauge
/// read guarantee. At the end every open session is ended and the counter must read zero.
pub fn check_program_with<C: Counter + 'static>(
    program: &Program,
    new_counter: impl FnOnce() -> C,
) {
    let program = program.normalized();
    let counter = Arc::new(new_counter());
    let oracle = Arc::new(Reference::new());
    let outcome = std::thread::scope(|scope| {
        let mut driver = Driver::new(scope, counter, oracle, program.threads);
        let outcome = driver.run(&program.ops);
        outcome.and(driver.shut_down())
    });
    if let Err(failure) = outcome {
        panic!(
            "livecount_support::check: {} broke the Counter contract\n  {failure}\n  program: {program:?}",
            std::any::type_name::<C>()
        );
    }
}

/// Where a check failed, and how.
#[derive(Debug)]
struct Failure {
    stage: String,
    message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.stage, self.message)
    }
}

/// The driver's handle on one worker thread.
#[derive(Debug)]
struct Worker<'scope, C: Counter> {
    thread: ScopedJoinHandle<'scope, ()>,
    commands: Sender<Command<C>>,
    replies: Receiver<Reply<C>>,
}

/// Runs the program: owns the open sessions and the model.
struct Driver<'scope, 'env, C: Counter> {
    scope: &'scope Scope<'scope, 'env>,
    counter: Arc<C>,
    oracle: Arc<Reference>,
    workers: Vec<Option<Worker<'scope, C>>>,
    /// Open sessions, oldest first.
    open: Vec<Session<C>>,
    model: Totals,
}

impl<'scope, 'env, C: Counter + 'static> Driver<'scope, 'env, C> {
    fn new(
        scope: &'scope Scope<'scope, 'env>,
        counter: Arc<C>,
        oracle: Arc<Reference>,
        threads: u8,
    ) -> Self {
        let mut driver = Driver {
            scope,
            counter,
            oracle,
            workers: Vec::new(),
            open: Vec::new(),
            model: Totals::default(),
        };
        for t in 0..usize::from(threads) {
            let worker = driver.spawn(t);
            driver.workers.push(Some(worker));
        }
        driver
    }

    fn spawn(&self, t: usize) -> Worker<'scope, C> {
        let (commands, inbox) = mpsc::channel();
        let (outbox, replies) = mpsc::channel();
        let (counter, oracle) = (Arc::clone(&self.counter), Arc::clone(&self.oracle));
        let thread = std::thread::Builder::new()
            .name(format!("livecount-check-{t}"))
            .spawn_scoped(self.scope, move || {
                worker::run(t, counter, oracle, inbox, outbox)
            })
            .expect("spawn a worker thread");
        Worker {
            thread,
            commands,
            replies,
        }
    }

    /// Every operation, then a final race, then every open session ended.
    fn run(&mut self, ops: &[Op]) -> Result<(), Failure> {
        self.verify()
            .map_err(|message| failure("before the first op", message))?;
        for (i, op) in ops.iter().enumerate() {
            self.step(op)
                .and_then(|()| self.verify())
                .map_err(|message| failure(format!("at op #{i} {op:?}"), message))?;
        }
        self.race(FINAL_RACE_ROUNDS)
            .and_then(|()| self.verify())
            .map_err(|message| failure("in the final race", message))?;
        let threads = self.workers.len();
        for k in 0.. {
            if self.open.is_empty() {
                break;
            }
            self.end(k % threads, 0)
                .and_then(|()| self.verify())
                .map_err(|message| failure("ending the sessions left open", message))?;
        }
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Start { thread } => self.start(thread.into(), 1),
            Op::Burst { thread, n } => self.start(thread.into(), n.into()),
            Op::End { thread, session } => self.end(thread.into(), session.into()),
            Op::Read { thread } => self.read(thread.into()),
            Op::Respawn { thread } => self.respawn(thread.into()),
            Op::Race { rounds } => self.race(rounds.into()),
            Op::EndAtExit { thread, session } => self.end_at_exit(thread.into(), session.into()),
        }
    }

    fn start(&mut self, t: usize, n: usize) -> Result<(), String> {
        match self.request(t, Command::Start(n))? {
            Reply::Started(sessions) if sessions.len() == n => {
                self.open.extend(sessions);
                self.model.started += n as u64;
                Ok(())
            }
            other => Err(unexpected(t, &other)),
        }
    }

    fn end(&mut self, t: usize, index: usize) -> Result<(), String> {
        if self.open.is_empty() {
            return Ok(());
        }
        let session = self.open.remove(index % self.open.len());
        let from = session.started_on;
        match self.request(t, Command::End(session))? {
            Reply::Ended => {
                self.model.ended += 1;
                Ok(())
            }
            other => Err(unexpected(t, &other)),
        }
        .map_err(|e| format!("{e} (ending a session started on thread {from})"))
    }

    fn read(&mut self, t: usize) -> Result<(), String> {
        match self.request(t, Command::Read)? {
            Reply::Read { counter, oracle } => {
                counter.expect(&format!("read on thread {t}:"), self.model)?;
                oracle.expect(&format!("read on thread {t}: Reference"), self.model)
            }
            other => Err(unexpected(t, &other)),
        }
    }

    fn respawn(&mut self, t: usize) -> Result<(), String> {
        self.replace(t, Command::Exit)
    }

    fn end_at_exit(&mut self, t: usize, index: usize) -> Result<(), String> {
        if self.open.is_empty() {
            return self.respawn(t);
        }
        let session = self.open.remove(index % self.open.len());
        let from = session.started_on;
        let (done, outcome) = mpsc::channel();
        self.replace(t, Command::ExitEnding(session, done))?;
        // The thread has been joined, so its thread-local destructors have run; the timeout
        // only guards against a platform where join returns before they do.
        match outcome.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {
                self.model.ended += 1;
                Ok(())
            }
            Ok(Err(panic)) => Err(format!(
                "decrement from a thread-local destructor on thread {t} panicked: {panic}"
            )),
            Err(_) => Err(format!(
                "thread {t} exited without ending the session (started on thread {from}) \
                 from its thread-local destructor"
            )),
        }
    }

    /// Sends `command` (which makes the worker exit), joins the thread, starts a new one.
    fn replace(&mut self, t: usize, command: Command<C>) -> Result<(), String> {
        let worker = self.workers[t].take().expect("worker slots are refilled");
        // A failed send means the worker is already gone; `join` reports how.
        let _ = worker.commands.send(command);
        let joined = worker.thread.join();
        self.workers[t] = Some(self.spawn(t));
        joined.map_err(|_| format!("worker thread {t} panicked before it could exit"))
    }

    /// A concurrent phase of `rounds` rounds per worker; the open sessions stay open.
    fn race(&mut self, rounds: usize) -> Result<(), String> {
        let phase = Phase::new(self.workers.len(), rounds, self.model);
        let mut joined = Vec::new();
        for (t, job) in phase.jobs::<C>().into_iter().enumerate() {
            match self.worker(t).commands.send(Command::Race(job)) {
                Ok(()) => joined.push(t),
                Err(_) => {
                    let phase = std::sync::Arc::clone(&phase);
                    self.scope.spawn(move || phase.stand_in());
                }
            }
        }
        let reads = phase.read_until_finished(&*self.counter);
        let (mut started, mut ended, mut handed_off, mut received) = (0, 0, 0, 0);
        for t in joined.iter().copied() {
            match self.reply(t)? {
                Reply::Raced(report) => {
                    started += report.started;
                    ended += report.ended;
                    handed_off += report.handed_off;
                    received += report.received;
                }
                other => return Err(unexpected(t, &other)),
            }
        }
        reads?;
        if joined.len() != self.workers.len() {
            return Err("a worker thread died before the race".to_string());
        }
        let tally = phase.tally();
        if started != ended || handed_off != received || tally != [started; 4] {
            return Err(format!(
                "the race did not balance (checker bug): workers report {started} starts, \
                 {ended} ends, {handed_off} hand-offs, {received} received; tally (announced, \
                 started, ending, ended) = {tally:?}"
            ));
        }
        self.model.started += started;
        self.model.ended += ended;
        Ok(())
    }

    /// Exact comparison of the counter and the oracle with the model, read from the driver.
    fn verify(&self) -> Result<(), String> {
        Observation::of(&*self.counter).expect("", self.model)?;
        let oracle = Observation::of(&*self.oracle);
        if oracle.totals != Some(self.model) {
            return Err(format!(
                "Reference totals() = {:?} but the model has {:?} (checker bug?)",
                oracle.totals, self.model
            ));
        }
        oracle.expect("Reference", self.model)
    }

    fn worker(&self, t: usize) -> &Worker<'scope, C> {
        self.workers[t].as_ref().expect("worker slots are refilled")
    }

    fn request(&self, t: usize, command: Command<C>) -> Result<Reply<C>, String> {
        self.worker(t).commands.send(command).map_err(|_| died(t))?;
        self.reply(t)
    }

    fn reply(&self, t: usize) -> Result<Reply<C>, String> {
        self.worker(t).replies.recv().map_err(|_| died(t))
    }

    /// Hangs up on every worker and joins it; a worker that panicked is a failure.
    fn shut_down(&mut self) -> Result<(), Failure> {
        let mut panicked = Vec::new();
        for (t, worker) in self.workers.drain(..).enumerate() {
            let Some(Worker {
                thread, commands, ..
            }) = worker
            else {
                continue;
            };
            // Hanging up ends the worker's command loop.
            drop(commands);
            if thread.join().is_err() {
                panicked.push(t);
            }
        }
        match panicked.as_slice() {
            [] => Ok(()),
            threads => Err(failure(
                "shutting down",
                format!("worker threads {threads:?} panicked (a counter method panicked?)"),
            )),
        }
    }
}

fn failure(stage: impl Into<String>, message: String) -> Failure {
    Failure {
        stage: stage.into(),
        message,
    }
}

fn died(t: usize) -> String {
    format!("worker thread {t} died (a counter method panicked on it; see its panic above)")
}

fn unexpected<C: Counter>(t: usize, reply: &Reply<C>) -> String {
    format!("worker thread {t} answered {reply:?} (checker bug)")
}
