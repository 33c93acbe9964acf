//! One coherent load report per interval from a `livecount-session` tracker, served the
//! ways load balancers read load: Prometheus text, `/load` JSON, HAProxy agent-check,
//! ORCA (`xds.service.orca.v3.OpenRcaService`) and a Prequal probe reply (`/prequal`).
//!
//! A [`LoadBoard`] turns a tracker [`Snapshot`](livecount_session::Snapshot), the process's
//! utilisation and the hybrid capacity model (`livecount-capacity`) into a [`LoadReport`]
//! and publishes it lock-free; every encoder reads the same `Arc<LoadReport>`, so `/load`,
//! `/metrics`, agent-check and ORCA never disagree about a moment.
//!
//! Each wire format is defined once, here, for both ends: the `/load` JSON is
//! [`ServedReport`] (the agent encodes it, `livecount-balance`'s `HttpLoadSource` decodes it;
//! its compatibility rules are on the type), and the ORCA named-metric keys are the
//! constants of the `orca` module. Without default features the crate is the report types
//! and their plain encoders, with no axum or tonic: what a balancer needs to read them.
//!
//! With a [`PrequalEstimator`] ([`LoadBoardBuilder::prequal`]), each report also carries a
//! [`PrequalProbe`]: requests in flight (the active sessions) and the median latency of
//! recent session starts at about that many, for Prequal's hot-cold selection (NSDI 2024);
//! the service records one sample per session start, lock-free. `docs/prequal-probe.md`
//! describes the format and its limits.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-report = "0.1"
//! ```
//!
//! # Examples
//!
//! A tokio service mounts all four in a few lines:
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use livecount_capacity::CapacityConfig;
//! use livecount_report::{LoadBoard, OrcaService, router, serve_agent_check};
//! use livecount_session::SessionTracker;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let tracker: SessionTracker = SessionTracker::default();
//! let second = Duration::from_secs(1);
//! let config = CapacityConfig::new(0.8, 2.0, second, second)?;
//! let board = Arc::new(LoadBoard::builder("b1", config).max_sessions(1000).build());
//! board.spawn_publisher(tracker.clone()); // one report per second
//!
//! let http = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! tokio::spawn(axum::serve(http, router(Arc::clone(&board))).into_future()); // /load, /metrics, /prequal
//! let check = tokio::net::TcpListener::bind("127.0.0.1:9101").await?;
//! tokio::spawn(serve_agent_check(check, Arc::clone(&board))); // HAProxy agent-check
//! tonic::transport::Server::builder() // ORCA for gRPC WRR and Envoy CSWRR
//!     .add_service(OrcaService::server(board))
//!     .serve("127.0.0.1:50051".parse()?)
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! One report, read directly:
//!
//! ```
//! use std::time::Duration;
//! use livecount_capacity::CapacityConfig;
//! use livecount_report::{LoadBoard, ManualUtilisation};
//! use livecount_session::SessionTracker;
//!
//! let tracker: SessionTracker = SessionTracker::default();
//! let ten = Duration::from_secs(10);
//! let (cpu, set_cpu) = ManualUtilisation::new();
//! let board = LoadBoard::builder("b1", CapacityConfig::new(0.8, 2.0, ten, ten)?)
//!     .utilisation(cpu)
//!     .build();
//! let sessions: Vec<_> = (0..80).map(|_| tracker.start()).collect();
//! set_cpu.set(0.4);
//! let report = board.publish(tracker.snapshot());
//! // The source article's case: 80 sessions at 40 % with target 80 % and k = 2 → 120.
//! assert_eq!((report.active, report.effective_capacity.round()), (80, 120.0));
//! assert!(livecount_report::prometheus::render(&report).contains("livecount_active_sessions 80\n"));
//! # drop(sessions);
//! # Ok::<(), livecount_capacity::ConfigError>(())
//! ```
//!
//! # Feature flags
//!
//! * `http` (default): [`router`], `/load`, `/metrics` and `/prequal` as an axum `Router`.
//! * `orca` (default): [`OrcaService`], the ORCA out-of-band reporting service for tonic,
//!   with the committed generated protobuf code ([`generated`]; building needs no `protoc`);
//!   and [`inband`], the same report as in-band ORCA (`endpoint-load-metrics` `TEXT` / `JSON`,
//!   `endpoint-load-metrics-bin`) encoded once per report, for a header or trailer on every
//!   response (`docs/lb/in-band-orca.md`).
//! * `otlp`: `otlp::install`, the latest report pushed as OpenTelemetry metrics over
//!   OTLP/gRPC (sessions, ends, capacity and the session-duration histogram; `docs/otel.md`).
//!
//! # Correctness
//!
//! * Every figure of a report comes from one tracker snapshot (its fields agree by
//!   construction) and one utilisation sample; a report is swapped in whole.
//! * Sequence numbers never go back: a publisher that took its snapshot before another's
//!   leaves the newer report in place.
//! * Capacity and headroom never exceed the configured `max_sessions`, and headroom is
//!   never negative.
//! * Utilisation comes from `getrusage` on Unix; where nothing measures it the report
//!   says `utilisation_measured: false` rather than a silent 0.
//! * Every wait of the agent-check responder is bounded ([`agent_check::WRITE_TIMEOUT`]).
//! * A [`PrequalEstimator`] sample is one atomic word, so a probe never reads a torn one;
//!   its answers are checked against a `Vec`-based model by proptest, and recording is
//!   checked to allocate nothing.

#![warn(missing_docs)]
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod agent_check;
#[cfg(feature = "orca")]
pub mod generated;
#[cfg(feature = "orca")]
mod health;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "orca")]
pub mod inband;
mod load_board;
mod load_report;
#[cfg(feature = "orca")]
pub mod orca;
#[cfg(feature = "otlp")]
pub mod otlp;
mod prequal_estimator;
mod prequal_probe;
mod prequal_sample;
pub mod prometheus;
mod served_report;
mod utilisation_source;

pub use agent_check::serve_agent_check;
#[cfg(feature = "orca")]
pub use health::health_service;
#[cfg(feature = "http")]
pub use http::{READY_PATH, router};
pub use load_board::{LoadBoard, LoadBoardBuilder};
pub use load_report::LoadReport;
#[cfg(feature = "orca")]
pub use orca::OrcaService;
pub use prequal_estimator::PrequalEstimator;
pub use prequal_probe::{LATENCY_US_HEADER, PrequalProbe, RIF_HEADER};
pub use served_report::ServedReport;
pub use utilisation_source::{
    ManualUtilisation, ManualUtilisationHandle, ProcessCpu, UtilisationSource, process_cpu_time,
};
