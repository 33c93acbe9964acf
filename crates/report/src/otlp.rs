//! OpenTelemetry metrics over OTLP/gRPC: a [`LoadBoard`]'s latest report, pushed to a
//! collector (or Prometheus 3's OTLP receiver) every interval. Feature `otlp`.
//!
//! What is exported, and the names (OpenTelemetry semantic-convention style, modelled on
//! `http.server.active_requests`, `kestrel.active_connections` and
//! `signalr.server.connection.duration`; `docs/otel.md` says why each):
//!
//! | name | instrument | unit | attributes |
//! |---|---|---|---|
//! | `livecount.session.active` | UpDownCounter (observable) | `{session}` | `livecount.session.phase` |
//! | `livecount.session.starts` | Counter (observable) | `{session}` | |
//! | `livecount.session.ends` | Counter (observable) | `{session}` | `livecount.session.end_reason` |
//! | `livecount.session.refusals` | Counter (observable) | `{session}` | |
//! | `livecount.session.duration` | Histogram | `s` | `livecount.session.end_reason` |
//! | `livecount.session.limit` | Gauge (observable) | `{session}` | |
//! | `livecount.capacity.headroom` | Gauge (observable) | `{session}` | |
//! | `livecount.capacity.effective` | Gauge (observable) | `{session}` | |
//! | `livecount.capacity.utilization` | Gauge (observable) | `1` | |
//! | `livecount.draining` | Gauge (observable) | `1` | |
//!
//! # Usage
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use livecount_capacity::CapacityConfig;
//! use livecount_report::LoadBoard;
//! use livecount_session::SessionTracker;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let tracker: SessionTracker = SessionTracker::default();
//! let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build()?));
//! board.spawn_publisher(tracker.clone());
//! let otlp = livecount_report::otlp::install(&board, "http://127.0.0.1:4317", Duration::from_secs(10))?;
//! // ... serve ...
//! board.publish(tracker.snapshot()); // the last report
//! otlp.shutdown().await?; // sends it
//! # Ok(()) }
//! ```
//!
//! # How the values stay the tracker's
//!
//! Every instrument is observable: its callback reads the board's latest published report,
//! the same `Arc<LoadReport>` `/metrics`, `/load` and ORCA serve, so no formula is
//! computed twice. One collection reads one report: the first callback pins it, the rest
//! and the exporter read it (a collection takes microseconds; if one were preempted past
//! 50 ms, a later callback would read the next report, still a report the board published).
//!
//! The duration histogram cannot be an observable instrument (the SDK has none, and an
//! SDK histogram only aggregates values recorded one by one, here or since it was
//! created). The tracker already holds it whole: per end reason, a count per bucket since
//! it began. So the exporter adds it to each request as it is — OTLP `Histogram`,
//! cumulative temporality, the report's per-bucket counts, sum and count, bounds
//! 0.1 s … 3600 s (the Prometheus histogram's `le`s) — beside the SDK's metrics in the
//! same scope, from the pinned report. Its count for a reason equals `ends` for that
//! reason in the same request. This is why the requests go out through the official
//! protobufs' client (`opentelemetry-proto`, tonic) rather than `opentelemetry-otlp`,
//! whose exporter only sends what the SDK aggregated.
//!
//! Every wait is bounded: an export by its timeout (connecting included), the final one at
//! shutdown by the SDK's 5 s. A failed export is counted ([`OtlpHandle::stats`]) and the
//! next interval tries again with fresh totals (cumulative values lose nothing).

mod grpc_call;
mod instruments;
mod otlp_builder;
mod report_exporter;
#[cfg(feature = "otlp-traces")]
mod trace_context;
#[cfg(feature = "otlp-traces")]
mod traces;

use std::sync::Arc;
use std::time::Duration;

pub use otlp_builder::{OtlpBuilder, OtlpError, OtlpHandle, check_endpoint, named_resource};
pub use report_exporter::ExportStats;
#[cfg(feature = "otlp-traces")]
pub use trace_context::{TraceContextLayer, TraceContextService, caller_context};
#[cfg(feature = "otlp-traces")]
pub use traces::{
    DEFAULT_SAMPLE_RATIO, DEFAULT_TRACE_INTERVAL, TraceExport, TracesBuilder, traces,
};

use crate::LoadBoard;

/// The metric and attribute names (see the table in the module docs).
pub mod names {
    /// The instrumentation scope (meter) name.
    pub const SCOPE: &str = "livecount";
    /// Open sessions, by [`PHASE`].
    pub const ACTIVE: &str = "livecount.session.active";
    /// Sessions started.
    pub const STARTS: &str = "livecount.session.starts";
    /// Sessions ended, by [`END_REASON`].
    pub const ENDS: &str = "livecount.session.ends";
    /// Sessions refused before they started.
    pub const REFUSALS: &str = "livecount.session.refusals";
    /// How long ended sessions lasted, by [`END_REASON`].
    pub const DURATION: &str = "livecount.session.duration";
    /// The most sessions the backend admits.
    pub const LIMIT: &str = "livecount.session.limit";
    /// Sessions the backend can still take.
    pub const HEADROOM: &str = "livecount.capacity.headroom";
    /// Sessions the backend can hold (the hybrid capacity model).
    pub const EFFECTIVE_CAPACITY: &str = "livecount.capacity.effective";
    /// Utilisation the capacity model read.
    pub const UTILIZATION: &str = "livecount.capacity.utilization";
    /// 1 while draining.
    pub const DRAINING: &str = "livecount.draining";
    /// `listening` or `generating` ([`livecount_session::Phase::as_str`]).
    pub const PHASE: &str = "livecount.session.phase";
    /// Why a session ended ([`livecount_session::EndReason::as_str`]).
    pub const END_REASON: &str = "livecount.session.end_reason";
    /// The resource attribute the board's name goes in by default.
    pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
    /// The resource attribute naming the service ([`named_resource`](super::named_resource)).
    pub const SERVICE_NAME: &str = "service.name";
}

/// The usual OTLP/gRPC endpoint: a collector on this host.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4317";
/// Default interval between exports: 10 s (the SDK's own default, 60 s, is long for a
/// load signal; a report is published every second or so).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// The shortest interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Default bound on one export, connecting included: 3 s, within the SDK's 5 s for the
/// final export.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// Configures an export to `endpoint` (`http://host:4317`); see [`OtlpBuilder`].
pub fn builder(endpoint: &str) -> OtlpBuilder {
    OtlpBuilder::new(endpoint)
}

/// Exports `board`'s latest report to `endpoint` every `interval`, with the default
/// timeout and resource: `builder(endpoint).interval(interval).install(board)`.
///
/// # Errors
///
/// See [`OtlpBuilder::install`].
pub fn install(
    board: &Arc<LoadBoard>,
    endpoint: &str,
    interval: Duration,
) -> Result<OtlpHandle, OtlpError> {
    builder(endpoint).interval(interval).install(board)
}

#[cfg(test)]
mod tests;
