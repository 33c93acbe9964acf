//! Internal support for livecount's own tests, fuzz targets and committed results (never
//! published): one crate, three parts, each user turning on only the part it needs.
//!
//! | module | feature | what | used by |
//! |---|---|---|---|
//! | `check` | `check` | the counter checker: op programs on real threads vs a reference, fuzz corpus decoding and replay | `tests/` (proptest, corpus replay), `fuzz/` |
//! | `protos` | `protos` | the committed generated gRPC code checked against its `.proto` files with a vendored `protoc` | `livecount-report`'s and `livecount-server`'s `generated_protos` tests |
//! | [`provenance`] | (always) | where a committed result came from: CPU, cores, rustc, commit with `-dirty`, date; and the check that refuses to write `results/` from a dirty tree | the picker, `lbsim`, `lbtestbed`, the end-to-end balancer tests |
//!
//! The features keep the costs apart: `provenance` needs only std, `check` the counters
//! and `arbitrary`, `protos` `tonic-prost-build` and the vendored `protoc` binaries, which
//! neither the binaries stamping their results nor the fuzz workspace should build.
//!
//! ```
//! let cpu = livecount_support::provenance::cpu_model();
//! assert!(livecount_support::provenance::label(&cpu, 2).ends_with("-2c"));
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "check")]
pub mod check;
#[cfg(feature = "protos")]
pub mod protos;
pub mod provenance;
