//! A streaming agent server with the livecount session tracker inside, reporting its load
//! to the load balancers people already run.
//!
//! # What it serves
//!
//! * **Sessions** over WebSocket at `/session` (JSON text frames, see [`protocol`]): each
//!   connection is one `livecount-session` session, `Listening` until the client speaks,
//!   `Generating` while a response streams; `interrupt` cancels the response and keeps the
//!   session (barge-in). Exactly one ending per session: `bye` or a close frame →
//!   `Completed`; a dropped connection, silence past the idle timeout (a missed
//!   heartbeat, as the session crate names it; `Reaped` is left to the ghost reaper) or a
//!   client that stops reading → `Disconnected`; the maximum length → `TimedOut`; bad
//!   input or a WebSocket protocol violation (close 1002 / 1007 / 1009) → `Failed`;
//!   shutdown → `Shutdown`.
//! * **Sessions over gRPC** with `--grpc ADDR` ([`grpc_agent`]): the same protocol as
//!   protobuf frames on one bidirectional stream per call,
//!   `livecount.agent.v1.Agent/Converse`, admitted, tracked and ended like a WebSocket
//!   session; the ending is the call's status (OK, `UNAVAILABLE` on shutdown,
//!   `INVALID_ARGUMENT` for a bad frame, `INTERNAL` for an undecodable message,
//!   `DEADLINE_EXCEEDED` when idle, past the maximum length or the client's
//!   `grpc-timeout`, `RESOURCE_EXHAUSTED` at `--max-sessions`); a client's reset or
//!   dropped call counts `Cancelled`, a lost connection `Disconnected`.
//! * **Load**, all from one coherent [`LoadReport`] per interval: `/load` (JSON with its
//!   sequence number and age), `/metrics` (Prometheus text), and an HAProxy agent-check
//!   responder (`up ready N%` from the hybrid capacity model, `drain` on shutdown).
//! * **A Prequal probe** at `/prequal` (and as ORCA named metrics `prequal_rif`,
//!   `prequal_latency_ms`): requests in flight (the sessions open) and the median time to
//!   first stream of recent sessions that started at about that many, for Prequal's
//!   hot-cold selection. Each session's first response is timed from its `speak` to its
//!   first chunk ([`first_chunk_clock`]); `docs/prequal-probe.md` has the format and
//!   limits.
//! * **ORCA out-of-band load reports** on the same `--grpc` port
//!   ([`livecount_report::OrcaService`]):
//!   `xds.service.orca.v3.OpenRcaService/StreamCoreMetrics` streams
//!   `xds.data.orca.v3.OrcaLoadReport`s whose `rps_fractional ÷ application_utilization`
//!   is the backend's headroom in sessions (both always positive, see
//!   [`livecount_report::orca`]), so unmodified gRPC `weighted_round_robin` and Envoy
//!   client-side WRR send new sessions where there is room.
//!   The protobuf code is generated once and committed ([`generated`] here, and
//!   `livecount_report::generated` for ORCA): building needs no `protoc`.
//!
//! The agent is a thin application on the handle a service of your own takes (see
//! `livecount-service`'s `full_service` and `own_services` examples): one
//! `livecount_service::Backend`, built from the flags, owns the tracker (its exact cap is
//! the admission), the load board, the limits and the drain, and `Backend::serve` runs
//! every listener (HTTP and the scrape port, gRPC, agent-check), the publisher and the drain
//! in its one order. What is the agent's own: the session protocol ([`conversation`],
//! [`protocol`]) over the Backend's WebSocket sessions and as a tonic service, the Prequal
//! clock ([`first_chunk_clock`]), the CPU it burns, the OTLP export's flags, the `drive`
//! client and the CLI. So every end-to-end test behind a real balancer and every
//! hostile-client test runs the path a service imports.
//!
//! # Example
//!
//! ```no_run
//! use livecount_server::{AgentConfig, RunningAgent};
//!
//! # async fn run() -> std::io::Result<()> {
//! let config = AgentConfig::from_args(&["--http".into(), "127.0.0.1:0".into()]).unwrap();
//! let agent = RunningAgent::start(config).await?;
//! println!("sessions at ws://{}/session", agent.http);
//! let last = agent.shutdown().await;
//! assert_eq!(last.active, 0);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod agent;
mod agent_config;
pub mod conversation;
pub mod first_chunk_clock;
mod flag_values;
pub mod generated;
pub mod grpc_agent;
mod http_router;
pub mod load_driver;
mod otlp_args;
pub mod ports;
pub mod protocol;
mod running_agent;

pub use agent::Agent;
pub use agent_config::{AgentConfig, ServeArgs};
pub use livecount_report::{LoadBoard, LoadReport};
pub use otlp_args::OtlpConfig;
pub use running_agent::RunningAgent;
