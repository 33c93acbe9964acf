//! Shared checking harness for the livecount counters: op programs run on real threads,
//! compared step by step with [`Reference`](livecount::Reference) and a plain model, with
//! concurrent phases held to the gauge read guarantee. The proptest suite, the fuzz targets
//! and the corpus-replay test all go through [`check_program`].
//!
//! # Usage
//!
//! ```
//! use livecount::PerThread;
//! use livecount_support::check::{Op, Program, check_program};
//!
//! let program = Program::new(3, vec![
//!     Op::Start { thread: 0 },
//!     Op::Respawn { thread: 0 },          // the starting thread exits; its cells stay
//!     Op::End { thread: 2, session: 0 },  // the session ends on a third thread
//!     Op::Read { thread: 1 },
//! ]);
//! check_program::<PerThread>(&program); // panics, describing the program, on a violation
//! ```
//!
//! A fuzz target is one line — `fuzz_target!(|p: Program| check_program::<Sharded>(&p));`
//! — and an ordinary test replays its corpus with [`replay_dir`], which decodes files with
//! [`decode`] exactly as `libfuzzer-sys` 0.4.13 does.
//!
//! # What is checked
//!
//! * **Lockstep.** Each [`Op`] runs on its virtual thread (one OS thread each) while the
//!   driver waits, so the expected value is exact after every step: `load`, `totals` (when
//!   the implementation keeps them) and `is_idle` must equal the model's, and so must the
//!   reference counter's. Sessions are started on one thread and usually ended on another;
//!   [`Op::Respawn`] replaces a thread so per-thread state changes hands, and
//!   [`Op::EndAtExit`] ends a session from a thread-local destructor while the thread tears
//!   down, after the counter's own per-thread registration is gone.
//! * **Concurrent phases** ([`Op::Race`] and one at the end of every program): all threads
//!   start and end sessions at once and hand some to each other, while the driver reads
//!   continuously. Each read must lie within bounds computed from a tally the workers keep
//!   (see the `race` module): never below the sessions open throughout the read, never above
//!   those open before it plus those started during it, `started >= ended`.
//! * **Quiescence.** After each phase the counter must be exact again, and after the program
//!   every session is ended and the counter must read zero.
//!
//! The checker's own unit tests run deliberately broken counters through it and assert that
//! each is caught.

mod driver;
mod program;
mod race;
mod replay;
mod worker;

#[cfg(test)]
mod tests;

pub use driver::{FINAL_RACE_ROUNDS, check_program, check_program_with};
pub use program::{MAX_BURST, MAX_OPS, MAX_RACE_ROUNDS, MAX_THREADS, MIN_THREADS, Op, Program};
pub use replay::{Replayed, decode, files_in, replay_dir};
