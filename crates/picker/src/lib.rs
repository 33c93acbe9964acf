//! The picker: measures every livecount counter and the crates you would otherwise use, on
//! this machine, for the workload you describe, and recommends the one to import.
//!
//! Two front ends share everything here:
//!
//! * `cargo run --release` (the `livecount-picker` binary of this crate): a bounded sweep (60 s
//!   by default) that repeats every point at least three times and writes
//!   `target/livecount-picker/<machine>/` (`results/<machine>/` with `--update-results`).
//! * `cargo bench` (criterion, `benches/benches/contention.rs` in `livecount-benches`): one
//!   group per workload, one `BenchmarkId::new(contender, parameter)` per point; it ends with
//!   the same ranked table and recommendation, computed from criterion's own estimates.
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
//! (`livecount-session` vs the bare counter), churn and memory; see [`workload`]. Numbers are
//! ballpark and belong to the machine they were measured on.
//!
//! # Recommendation
//!
//! The fastest qualifying counter at the described thread count, except that `PerCpu` is
//! recommended, with the reasons, for a service with at least 4 threads per core or a byte
//! limit `PerThread` exceeds and `PerCpu` meets; see [`rank`], [`recommend`] and
//! [`per_cpu_case`].
//!
//! # livecount's own targets
//!
//! What livecount itself aims for (≥ 8× `AtomicI64` at two threads, never a read below 0,
//! …) lives in one place, [`targets`], and is reported apart from the recommendation, under
//! "livecount's own targets (for its maintainers)": it is not advice about the workload.
//!
//! # Results
//!
//! [`results`] owns the schema of `results.json`; a figure is looked up by a typed
//! [`figure::Workload`], contender, parameter and [`figure::Metric`] ([`figure::find`]).
//!
//! Each machine's run lives in `results/<machine-label>/` (`results.json`, a generated
//! `REPORT.md`, `throughput.svg`, `reader.svg`); the committed ones are this repository's
//! reference runs (`results/amd-epyc-2c/` is the current machine's). Compare two runs with
//! `cargo run --release -- --compare OLD.json --against NEW.json`.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

pub mod alloc;
pub mod anchors;
pub mod contender;
pub mod cpu_time;
pub mod estimates;
pub mod figure;
pub mod java_probe;
pub mod machine;
pub mod per_cpu_case;
pub mod picker;
pub mod plan;
pub mod plot;
pub mod rank;
pub mod recommend;
pub mod report;
pub mod results;
pub mod targets;
#[cfg(test)]
mod test_support;
pub mod workload;
