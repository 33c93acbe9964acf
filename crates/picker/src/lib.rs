//! The picker: measures every livecount counter and the crates you would otherwise use, on
//! this machine, for the workload you describe, and recommends the one to import.
//!
//! # Usage
//!
//! Most people run its binary from the workspace: `cargo run --release` (`-- --help` lists the
//! options) is a bounded sweep (60 s by default) that repeats every point at least three
//! times, prints a ranked table and the counter to import, and writes `results.json`,
//! `REPORT.md` and plots to `target/livecount-picker/<machine>/`.
//!
//! As a library it is the same run: [`Options`] (parsed from the binary's flags), then [`run`]
//! for what the binary prints, or [`measure`] for the [`Results`] (the ranked table, the
//! recommendation, every figure; [`results`] holds the schema of `results.json`). Install
//! [`CountingAlloc`] as the global allocator, as the binary does, or the memory figures are
//! left out.
//!
//! # Examples
//!
//! ```no_run
//! use livecount_picker::{CountingAlloc, Mode, Options};
//!
//! #[global_allocator]
//! static ALLOC: CountingAlloc = CountingAlloc;
//!
//! fn main() {
//!     // Your service: 8 writer threads, read continuously; a 20 s sweep.
//!     let args = ["--quick", "--threads", "8", "--readers-hz", "continuous"];
//!     let opts = Options::parse(args.map(String::from)).expect("valid flags");
//!     assert_eq!((opts.mode, opts.threads), (Mode::Quick, 8));
//!
//!     let results = livecount_picker::measure(&opts);
//!     println!("{}", results.recommendation);
//! }
//! ```
//!
//! # Contenders
//!
//! Every `livecount` counter (`PerThread`, `PerCpu`, `Sharded`, `Striped`, `Single`, and the
//! `Reference` oracle); `std`'s `AtomicI64` plain and cache-padded; `fast-counter`;
//! `contatori`'s `Signed`; `prometheus::IntGauge`; and the `metrics::Gauge` handle that
//! `metrics-exporter-prometheus` hands out (an `Arc<AtomicU64>` of `f64` bits updated by
//! `metrics`' own `GaugeFn for AtomicU64` CAS loop: built here exactly as the exporter builds
//! it, without the exporter's HTTP stack). The **ceiling** is each writer doing a plain
//! load + store into its own cache-padded cell, with the cell chosen before timing starts.
//!
//! # Workloads
//!
//! threads, handoff, tasks (tokio), read under write, read at threads (one reader timing
//! loads while a thousand threads that each counted are parked alive), lifecycle
//! (`livecount-session` vs the bare counter), churn and memory; see [`results::Workload`].
//! Numbers are ballpark and belong to the machine they were measured on.
//!
//! # Recommendation
//!
//! The fastest qualifying counter at the described thread count, except that `PerCpu` is
//! recommended, with the reasons, for a service with at least 4 threads per core or a byte
//! limit `PerThread` exceeds and `PerCpu` meets. A run also judges livecount's own
//! performance targets, for livecount's maintainers: printed after the recommendation and
//! written to `TARGETS.md` beside `REPORT.md`, never into it, since they say nothing about the
//! workload you described.
//!
//! # Results
//!
//! [`results::Results`] is the schema of `results.json`; a figure is one
//! [`results::Workload`] at a parameter, for a contender, in a [`results::Metric`]. The
//! committed runs live in `results/<machine-label>/` of this repository; compare two with
//! `cargo run --release -- --compare OLD.json --against NEW.json`.
//!
//! `cargo bench` (the contention suite of `livecount-benches`) runs the same workloads under
//! criterion and ends with the same ranked table and recommendation, computed from
//! criterion's own estimates.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

mod alloc;
mod anchors;
mod contender;
mod cpu_time;
mod estimates;
mod figure;
mod java_probe;
mod machine;
mod per_cpu_case;
mod plan;
mod plot;
mod rank;
mod recommend;
mod report;
pub mod results;
mod sweep;
mod targets;
#[cfg(test)]
mod test_support;
mod workload;

#[doc(hidden)]
pub mod internals;

pub use alloc::CountingAlloc;
pub use plan::Mode;
pub use results::Results;
pub use sweep::{Options, measure, run};
