//! One handle for a tokio service: its sessions counted and capped, every load signal a
//! balancer, a gateway or an autoscaler reads, and a drain in the one right order.
//!
//! A [`Backend`] is built once — a name, a cap, the capacity model, the limits — and owns
//! the session tracker, the load board made from it and the drain. From it a service takes
//! what it mounts: [`routes`](Backend::routes) (`/load`, `/metrics`, `/ready`),
//! [`websocket`](Backend::websocket) sessions, the [`layer`](Backend::layer) that counts
//! HTTP/gRPC streams, and the gRPC signals; [`serve`](Backend::serve) runs the listeners
//! and, on the shutdown signal, drains: refuse, say draining everywhere, let sessions run
//! to the deadline, end the rest, and only then stop the servers.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-service = "0.1"
//! ```
//!
//! # Examples
//!
//! A WebSocket echo, capped at 1 000 sessions, with every signal, drained on Ctrl-C:
//!
//! ```no_run
//! use axum::extract::{State, WebSocketUpgrade};
//! use axum::{response::Response, routing::get};
//! use livecount_service::Backend;
//! use tokio::net::TcpListener;
//!
//! async fn echo(ws: WebSocketUpgrade, State(backend): State<Backend>) -> Response {
//!     backend.websocket(ws, |mut socket, _session| async move {
//!         while let Some(Ok(message)) = socket.recv().await && socket.send(message).await.is_ok() {}
//!     })
//! }
//!
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! let backend = Backend::builder("b1").max_sessions(1_000).build();
//! let app = backend.routes().route("/session", get(echo)).with_state(backend.clone());
//! let http = TcpListener::bind("127.0.0.1:3000").await?;
//! let shutdown = async { tokio::signal::ctrl_c().await.unwrap_or(()) };
//! let drained = backend.serve(shutdown).http(http, app).await?;
//! println!("drained: {} sessions cut", drained.cut);
//! # Ok(()) }
//! ```
//!
//! `examples/full_service.rs` adds gRPC (a counted stream, ORCA, health) and HAProxy's
//! agent-check; `examples/own_services.rs` brings its own tonic service and axum routes.
//!
//! # Feature flags
//!
//! * `otlp`: `Backend::otlp`, the load report exported as OpenTelemetry metrics.
//!
//! # What it holds a client to
//!
//! | client | what happens |
//! |---|---|
//! | past the cap | WebSocket `503` + `Retry-After`, gRPC `RESOURCE_EXHAUSTED`; counted refused, never started |
//! | during the drain | WebSocket `503` + `Retry-After`, gRPC `UNAVAILABLE`; counted refused |
//! | opens a session and sends nothing | ended `Disconnected` at the first-frame timeout (10 s): WebSocket close 1008, gRPC `DEADLINE_EXCEEDED` |
//! | many streams on one connection | at most 100 at once per HTTP/2 connection |
//! | stops reading | ended `Disconnected` at the write timeout (30 s) |
//! | longer than the maximum session (1 h) | ended `TimedOut` |
//! | still open at the drain deadline | ended `Shutdown`: WebSocket 1012, gRPC `UNAVAILABLE` |
//!
//! Every session ends exactly once, and its place under the cap comes back before any
//! goodbye is sent. The limits and their reasons are `livecount_tower`'s
//! (`StreamLimits`, `SocketLimits`); the HTTP server's bounds (head timeout, pending
//! connections) are `livecount_tower::serve`'s.
//!
//! # Safety and correctness
//!
//! * `#![forbid(unsafe_code)]`; the counting, admission and exactly-once endings are
//!   `livecount-session`'s, model-checked there (loom, shuttle).
//! * `tests/full_service.rs`: the example as it is mounted, on loopback: every signal, the
//!   drain's order (signals say draining while sessions run, cut at the deadline, servers
//!   stopped after), its cap under a burst, hostile sockets ended once. `tests/serve.rs`:
//!   the builder's settings reach the parts, two HTTP listeners, a hurried drain.
//! * `tests/backend.rs`: a silent-stream attacker (many
//!   connections of HTTP/2 streams that never send a frame) against a capped backend:
//!   probes keep being served, every silent stream ends at the first-frame timeout, and
//!   the count returns to zero with started = ended.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
mod serve;

pub use backend::{Backend, BackendBuilder};
pub use livecount_report::PrequalEstimator;
pub use livecount_report::inband::InbandFormat;
pub use livecount_session::{EndHandle, EndReason};
pub use livecount_tower::TrackedSocket;
pub use livecount_tower::drain::Drained;
pub use serve::Serve;

/// The layer a [`Backend`] counts requests with, and which requests it counts.
pub mod layer {
    pub use crate::backend::{BackendLayer, Counted};
}
