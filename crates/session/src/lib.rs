//! Session tracking on `livecount` counters: exactly-once ending under racing timeout /
//! cancel / disconnect, ghost reaping, coherent snapshots, tokio integration.
//!
//! A real-time AI backend (voice, video, agents on long-lived gRPC / WebSocket streams) needs
//! to know how many sessions it is committed to, how many of those are silent, and how fast
//! they arrive, cheaply enough to sit on every stream's start and end and correctly enough
//! for a load balancer to route on. A [`SessionTracker`] counts sessions on any
//! [`livecount::Counter`]; [`start`](SessionTracker::start) returns a [`Session`] guard; the
//! session ends **exactly once**, whichever of its [`EndHandle`]s (timeout, cancel, disconnect,
//! shutdown, reaper) or the guard's drop gets there first.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-session = "0.1"
//! ```
//!
//! # Examples
//!
//! One thread:
//!
//! ```
//! use livecount_session::{EndReason, Phase, SessionTracker};
//!
//! let tracker = SessionTracker::new(); // over livecount::PerThread
//! let mut session = tracker.start();
//! session.set_phase(Phase::Generating); // the agent is speaking
//! let timeout = session.handle();
//! assert!(timeout.end(EndReason::TimedOut)); // the deadline won...
//! assert!(!session.end(EndReason::Completed)); // ...so this changes nothing
//! drop(session); // nor does the drop
//!
//! let s = tracker.snapshot();
//! assert_eq!((s.started, s.ended, s.active, s.generating), (1, 1, 0, 0));
//! assert_eq!(s.ended_by(EndReason::TimedOut), 1);
//! ```
//!
//! Across threads (`Arc` inside: a tracker clone is a handle), enders racing:
//!
//! ```
//! use livecount_session::{EndReason, SessionTracker};
//!
//! let tracker = SessionTracker::<livecount::Sharded>::default();
//! for _ in 0..100 {
//!     let session = tracker.start();
//!     let enders: Vec<_> = [EndReason::TimedOut, EndReason::Cancelled, EndReason::Disconnected]
//!         .into_iter()
//!         .map(|reason| {
//!             let handle = session.handle();
//!             std::thread::spawn(move || handle.end(reason))
//!         })
//!         .collect();
//!     drop(session); // races them with `Dropped`
//!     let wins: usize = enders.into_iter().map(|e| usize::from(e.join().unwrap())).sum();
//!     assert!(wins <= 1); // if no ender won, the drop did
//! }
//! let s = tracker.snapshot();
//! assert_eq!((s.started, s.ended, s.active), (100, 100, 0));
//! assert!(s.is_consistent());
//! ```
//!
//! A service that must never hold more than it can serve caps the tracker: the cap is
//! exact, so a burst of connects cannot overshoot it between two load reports.
//!
//! ```
//! use livecount_session::{SessionTracker, StartError};
//!
//! let tracker = SessionTracker::with_max_sessions(100);
//! match tracker.try_start() {
//!     Ok(session) => drop(session), // serve the client
//!     Err(StartError::AtCapacity { max }) => eprintln!("503: {max} sessions already"),
//!     Err(e) => eprintln!("{e}"),
//! }
//! ```
//!
//! # Feature flags
//!
//! * `tokio` (default): [`Session::hold_to`], a session held to [`Limits`] (maximum length,
//!   a deadline, idle, read idle, first frame, write stall) by the tracker's one sweeper task
//!   over the session table; [`SessionTracker::reap_after`], ghost reaping by the same
//!   sweeper; [`SessionTracker::track`] and [`SessionTracker::track_stream`] (a deadline and
//!   an idle limit held by that sweeper, `Completed` / `TimedOut` / `Cancelled` on abort or
//!   drop, and a stop at the next poll, woken, when anything else ends the session); and
//!   [`EndHandle::drain_started`].
//! * `serde`: `Serialize` / `Deserialize` for [`Snapshot`], [`Window`], [`ByReason`],
//!   [`DurationsByReason`], [`DurationHistogram`], [`EndReason`] and [`Phase`].
//!
//! The crate takes snapshots and publishes none: `livecount-report`'s `LoadBoard` turns
//! them into the one published load report (and its `spawn_publisher` is the periodic
//! task); [`Window::between`] gives the rates between any two snapshots.
//!
//! Without tokio, [`Session::poll_ended`] and [`EndHandle::ended`] wait for the end in any
//! executor.
//!
//! # Comparison with alternatives
//!
//! An `AtomicBool` "ended" flag per session plus a shared `AtomicI64` gets exactly-once
//! right but puts every start and end of every thread on one cache line, keeps no reasons
//! and cannot find leaked guards. `tokio-metrics` and `metrics` gauges count whatever they
//! are told; nothing stops a double decrement. Here the counter is any `livecount`
//! implementation, ending is a CAS on a per-session word, and each counter token is consumed
//! by exactly one thread.
//!
//! # Safety and correctness
//!
//! * loom (`tests/loom_session.rs`, run by `scripts/loom.sh`): three and four enders racing
//!   on one session — counter decremented once, one reason, totals balanced; a phase change
//!   racing an end; the reaper racing a normal end; snapshots never torn while sessions
//!   end, one poller's counts never going back and readers racing each other getting
//!   sequence numbers of their own; phase changes through a handle racing the owner's and
//!   an end; an end (by handle, by id, by the reaper) racing a poll that registers for it,
//!   for the owner's slot and for two `ended()` waiters — no lost wake-up; two limit ends
//!   (`end_for`, as the sweeper ends) racing the owner's end and `end_all`: one end, and
//!   `ended_by` names a cause exactly when a cause's end won. `tests/loom_drain.rs`: a task
//!   waiting in `drain_started` racing `begin_drain` is always woken.
//! * Durations: loom — an end, `end_all` and the reaper racing record the winner's
//!   duration once, in its bucket; the proptest model buckets every end's virtual duration
//!   itself and compares each reason's histogram after every step; `tests/durations.rs` —
//!   snapshots racing four ending threads count exactly the ends by reason, sums never
//!   short.
//! * tokio (`tests/tracked.rs`): a task blocked on a tracked stream or future whose source
//!   never yields wakes and stops right after an end from a handle, `end_all`, by id or the
//!   reaper.
//! * proptest state machine (`tests/model.rs`): random start / set-phase (guard or handle) /
//!   touch / end / clone-handle / drop / forget / reap / snapshot programs against a plain
//!   model.
//! * tokio stress (`tests/stress.rs`): tens of thousands of tracked sessions with deadlines,
//!   aborts, disconnects and concurrent snapshot readers, for every counter.
//! * loom, for the session table: a stale id racing the guard's drop and the slot's reuse
//!   never ends the new session; a handle outliving its guard keeps the slot until released;
//!   a walk racing an end, free and reuse never reads a slot being rewritten (loom's
//!   `UnsafeCell` checks every access to the slot's data); the last tracker handle and the
//!   last session racing to free the tracker state.
//! * Table behaviour (`tests/slots.rs`, `tests/no_leak.rs`): more than 4 096 threads at once,
//!   slots reused under churn and under handoff between threads, a reused slot's new id, a
//!   tracker's memory back to the byte once its handles and sessions are gone.
//! * An exact cap ([`SessionTracker::with_max_sessions`]): loom (`tests/loom_cap.rs`) — a
//!   cap of 1 is mutual exclusion among three starters, an end racing a start frees the
//!   place once, racing enders give it back once; eight real threads against caps of 1 and 3
//!   (`tests/cap.rs`); the proptest model runs capped at 0 to 5 as well as uncapped.
//! * The `unsafe` is the slot table (raw slot and tracker pointers kept valid by counted
//!   references), two token cells and a data cell per session, each with its `SAFETY:`
//!   argument (loom checks the cells' exclusive access), and the coarse clock's libc calls.
//!   The crate denies `unsafe_code` and allows it per site. Every test of the crate runs
//!   under AddressSanitizer with LeakSanitizer as well (`scripts/sanitize.sh`): use after
//!   free, out-of-bounds access and leaked tracker state are reported as errors.
//!
//! # Performance
//!
//! `cargo run --release -p livecount-session --example lifecycle_cost` measures one
//! start + end through the tracker against the bare counter. The committed measurements (a
//! 2-core Xeon VM, ballpark) are in the repository's `results/session-table/REPORT.md` (the
//! tracked pair against the bare counter and `AtomicI64`) and
//! `results/session-durations/REPORT.md` (what the duration histogram and its clock read
//! add); the crate README summarises them.
//!
//! # Implementation notes
//!
//! Instants the crate reads itself (a session's start, `touch()`, a phase change) come from a
//! coarse clock: on 64-bit Linux `CLOCK_MONOTONIC_COARSE` (a few loads from the vDSO page
//! where `Instant::now()` reads the TSC), anchored to `Instant` through a fine
//! reading of the same clock, so a reading is never later than the true time and as early as
//! the kernel's last tick (a few ms; more while a loaded VM delays the timer interrupt). A
//! session may therefore look idle a few ms longer than it was; reaping limits are seconds
//! to minutes. Instants
//! passed in (`touch_at`, `reap_at`, `snapshot_at`) are used exactly.
//!
//! A session lives in a slot of the tracker's table: the state word (phase, BUSY, ENDED,
//! reason, two "someone waits" bits, the slot's reference count and its generation), the
//! counter tokens in two cells, the end signal (the owner's `AtomicWaker` slot, a list for
//! `ended()` waiters, empty and unallocated until used), the start and last-activity clock
//! readings and the metadata. Slots sit in cache-padded pages that never move and are reused
//! through a one-slot thread-local cache (the start after a free on the same thread) and
//! per-thread free lists behind it, so a start + end allocates nothing, takes no lock and
//! writes no line another thread's sessions write: one Release store publishes the session,
//! one CAS ends it, and a guard dropped after its end frees the slot with a load and a store.
//! The guard, every `EndHandle` and a walker each hold a reference counted in the state word;
//! the last one frees the slot, and references to an ended session are only ever cloned from
//! a held one, so a slot is never reused under anyone. An id is the slot index and its
//! generation: a stale id's CAS fails on a reused slot. Walks (the reaper, `end_all`,
//! `sessions()`, the limits' sweeper) visit every slot handed out so far and take a
//! reference to each live one.
//!
//! Limits live in the slot too, after the words a start and an end touch: the limits armed
//! by [`Session::hold_to`], the traffic the edge notes (a frame count, the response's
//! `polls << 1 | holding` word, a "heard" flag: relaxed writes on the session's own line),
//! the cause that claimed the end, and what the sweeper saw last. The sweeper (one tokio
//! task per tracker, spawned with the first armed session, waking every quarter of the
//! shortest limit armed, 10 ms to 1 s) measures each limit from the sweep that first saw the
//! session or its last change, on tokio's clock, so an end comes at the limit or up to two
//! periods later, never earlier; it claims the cause, then ends through the same CAS as
//! every end. A slot whose limits were never used is freed without reading them.
//! Ends are counted by reason and duration bucket in the ending thread's own cell
//! (`livecount::ThreadCells`, the machinery of `PerThread`: a plain load and store, after a
//! Release fence), so a snapshot that reads ends before starts always has `started >=
//! ended`, and the ends by reason are the sums of the duration buckets: each reason's
//! [`DurationHistogram`] in a snapshot counts exactly its ends.
//!
//! Before this table the registry was a `sharded-slab` of `Arc`'d cores plus a journal of
//! keys to walk: 168–169 ns per start + end on one thread and *slower* on two than on one,
//! because every session cloned the tracker's `Arc` (one line all threads wrote). The measurements
//! behind the change are in `results/session-table/REPORT.md`.

#![warn(missing_docs)]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod cap;
mod clock;
mod drain_started;
mod duration_histogram;
mod durations_by_reason;
mod end_cells;
mod end_signal;
mod ended;
mod lifecycle;
mod limits;
mod phase;
mod reason;
mod session;
mod session_id;
mod slots;
mod snapshot;
mod start_error;
#[cfg(feature = "tokio")]
mod sweeper;
mod sync;
mod tally;
#[cfg(feature = "tracing")]
pub mod trace;
#[cfg(feature = "tokio")]
mod tracked;
mod tracker;
mod window;

pub use drain_started::DrainStarted;
pub use duration_histogram::DurationHistogram;
pub use durations_by_reason::DurationsByReason;
pub use ended::Ended;
pub use limits::{EndCause, Limits};
pub use phase::Phase;
pub use reason::{ByReason, EndReason};
pub use session::{EndHandle, Session, SessionInfo};
pub use session_id::SessionId;
pub use snapshot::Snapshot;
pub use start_error::StartError;
#[cfg(feature = "tokio")]
pub use tracked::{EndedEarly, StreamEnd, Tracked, TrackedStream};
pub use tracker::SessionTracker;
pub use window::Window;
