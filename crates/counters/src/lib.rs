//! Active-session counters for hot paths: interchangeable, contention-friendly, and never
//! read below zero.
//!
//! A real-time backend (voice, video, agents on long-lived streams) counts its open sessions
//! at every stream start and end, and a load balancer routes on that count. The count must be
//! nearly free to update and right when read: a missed decrement is a ghost that repels
//! traffic, a double decrement invents capacity. This crate gives one [`Counter`] trait and
//! several implementations to choose from by measurement.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount = "0.1"
//! ```
//!
//! # Examples
//!
//! One thread:
//!
//! ```
//! use livecount::{Counter, PerThread};
//!
//! let sessions = PerThread::new();
//! let token = sessions.increment(); // stream opened
//! assert_eq!(sessions.load(), 1);
//! sessions.decrement(token); // stream closed: the token is consumed
//! assert_eq!(sessions.load(), 0);
//! ```
//!
//! Shared with `Arc`, sessions ending on other threads:
//!
//! ```
//! use livecount::{Counter, Sharded};
//! use std::sync::{Arc, mpsc};
//!
//! let sessions = Arc::new(Sharded::new());
//! let (tx, rx) = mpsc::channel();
//! let acceptor = {
//!     let sessions = Arc::clone(&sessions);
//!     std::thread::spawn(move || {
//!         for _ in 0..1000 {
//!             tx.send(sessions.increment()).unwrap();
//!         }
//!     })
//! };
//! let closer = {
//!     let sessions = Arc::clone(&sessions);
//!     std::thread::spawn(move || {
//!         for token in rx {
//!             sessions.decrement(token);
//!         }
//!     })
//! };
//! acceptor.join().unwrap();
//! closer.join().unwrap();
//! assert_eq!(sessions.totals().unwrap().started, 1000);
//! assert_eq!(sessions.load(), 0);
//! ```
//!
//! # The counters
//!
//! | type | update | read | memory | read guarantee |
//! |---|---|---|---|---|
//! | [`Single`] | one `lock xadd`, shared line | one load | 128 B | linearizable |
//! | [`Sharded`] | one `lock xadd` on the thread's shard | 2 × shards loads | 128 B × shards | gauge |
//! | [`Striped`] | a start: CAS on a base, on the thread's stripe once contended; an end: `lock xadd` there | 2 × (1 + stripes opened) loads | 128 B, grows on contention to < 128 B × 4 × CPUs | gauge |
//! | [`PerThread`] | plain load + store on the thread's own line | 2 × threads ever seen | 128 B × peak threads | gauge |
//! | [`PerCpu`] | rseq critical section: plain `add` on the CPU's line (else CPU id + `lock xadd`) | 2 × (CPUs + 1) | 128 B × (CPUs + 1) | gauge |
//! | [`Reference`] | mutex | mutex | small | linearizable; an oracle for tests only |
//!
//! *Gauge* is the read guarantee documented on [`Counter`]: never negative, never below the
//! sessions open during the whole read, never above the sessions started by its end.
//!
//! # Comparison with alternatives
//!
//! A plain `AtomicI64` is [`Single`]: exact, and the slowest under contention. Sharded
//! counters such as `fast-counter` and `contatori` keep one signed value per shard; when a
//! session ends on another thread than it started on, a reader can see the `-1` before the
//! `+1` and read a negative or too-small count (both crates document it). The counters here
//! keep monotone started / ended pairs per cell and read all ends before all starts, which
//! rules that out, and they give arrivals (`started`) for free.
//!
//! # Correctness
//!
//! Every implementation is checked by `loom` models (exhaustive interleavings with a
//! preemption bound, including cross-thread ends racing a reader, per-thread slot inheritance
//! and stripe growth), by `shuttle` with eight threads, by a proptest suite that compares each
//! against [`Reference`] on random multi-threaded programs, and by fuzz targets whose corpus is
//! replayed in ordinary tests. See the repository's `scripts/` and `tests/`.
//!
//! # Performance
//!
//! The table above says what an update and a read cost in instructions and cache lines; what
//! that comes to in pairs per second depends on the machine and the workload, so it is
//! measured, not stated here. `cargo run --release` in the repository runs the picker on
//! your machine for the workload you describe (threads, reader pace, bytes per counter) and
//! names the counter to import. The committed runs, each with its machine, toolchain and
//! commit and the command that reproduces it, are in the repository's `results/` folder:
//! `results/amd-epyc-2c/REPORT.md` and `results/amd-epyc-2c-256-threads/REPORT.md` (a 2-core
//! AMD EPYC VM; the second for a described service of 256 threads), and [`Striped`] beside
//! Java's `LongAdder` in `results/intel-r-xeon-r-processor-2c/anchors.md` (a 2-core Xeon VM).
//!
//! What holds on any machine, by construction: [`PerThread`] and [`PerCpu`] (on rseq) do no
//! locked instruction per update, so they scale with cores until the memory system stops
//! them; [`Sharded`] does one on a line the thread has to itself while threads do not
//! outnumber shards, [`Striped`] one on its base until that is contended, then on the stripe
//! the thread's probe picks; [`Single`] does one on a line every thread shares, so it is the
//! one that falls as threads are added. A read walks every cell: [`PerCpu`]'s cost grows with
//! the CPUs, [`PerThread`]'s with the threads ever seen.
//!
//! # Implementation notes
//!
//! `PerCpu` finds glibc's registered restartable-sequences area (`__rseq_offset`, looked up
//! with `dlsym`, never a second registration) and runs one `asm!` critical section the
//! kernel restarts on preemption or migration; where there is none it falls back to
//! `sched_getcpu` or the thread index with locked adds ([`CpuSource`]).
//!
//! Threads are identified by small *reusable* indices (lowest free first), so per-thread
//! tables stay dense and a new thread inherits an exited thread's cells. [`ThreadCells`]
//! exposes that table for any cell type (a per-thread histogram, a few sums), with the
//! same single-writer contract `PerThread` relies on. Concurrency
//! primitives come from one `sync` shim that switches to loom or shuttle under the
//! `livecount_loom` / `livecount_shuttle` cfgs. The only `unsafe` code is the lock-free,
//! append-only cell table and `PerCpu`'s platform layer (the rseq area and critical section,
//! `sched_getcpu`, `dlsym`), each block with its `SAFETY:` argument.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

#[cfg(livecount_audit)]
#[doc(hidden)]
pub mod audit;
mod cell_table;
mod counter;
mod cpu;
mod index_cache;
#[cfg(livecount_loom)]
#[doc(hidden)]
pub mod loom_model;
mod pair;
mod per_cpu;
mod per_thread;
mod reference;
mod sharded;
mod single;
mod striped;
mod sync;
mod thread_cells;
mod thread_id;

pub use counter::{Counter, Token, Totals};
pub use per_cpu::{CpuSource, PerCpu, SourceUnavailable};
pub use per_thread::PerThread;
pub use reference::Reference;
pub use sharded::Sharded;
pub use single::Single;
pub use striped::Striped;
pub use thread_cells::ThreadCells;

/// Model checkers only (`livecount_loom`, `livecount_shuttle`): moves every model thread to
/// the next CPU, as the kernel may between any two instructions. [`PerCpu`] is the only
/// counter that reads the CPU.
#[cfg(any(livecount_loom, livecount_shuttle))]
#[doc(hidden)]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// the model checkers' instrumentation, compiled only under them.
#[cfg_attr(mutants, mutants::skip)]
pub fn model_migrate() {
    cpu::model::migrate();
}
