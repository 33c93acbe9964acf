//! The criterion suites of livecount (`cargo bench`); this library is empty.
//!
//! * `benches/contention.rs`: one group per workload, one `BenchmarkId::new(contender,
//!   parameter)` per point, every counter side by side; it ends with the ranked table and
//!   recommendation of [`livecount_picker`], computed from criterion's own estimates.
//! * `benches/inband_orca.rs`: what attaching in-band ORCA costs per response.
//!
//! The workloads, contenders and ranking live in `livecount-picker` (`crates/picker`), which
//! `cargo run --release` runs, so both front ends measure exactly the same code; the suite
//! reaches them through the picker's hidden `internals` module, which is not its API.

#![warn(missing_docs)]
#![forbid(unsafe_code)]
