//! tower and axum integration for livecount sessions: a [`SessionLayer`] that counts each
//! HTTP request until its response *body* ends, [`WebSocketSessions`] for axum sockets that
//! end on graceful shutdown, and a tower [`Load`](tower::load::Load) ([`SessionLoad`]) read
//! from a backend's own load reports, so a client's p2c balancer routes on sessions.
//!
//! A streaming response (a gRPC server stream, SSE, a chunked download) holds the backend
//! until its body ends, not until its headers go out; a WebSocket holds it until the socket
//! closes, which axum's graceful shutdown does not wait for (tokio-rs/axum#3003). Both are
//! counted here as sessions on a [`livecount_session::SessionTracker`], each ended exactly
//! once with the reason of what happened, and the backend's report of them is what a client
//! balances on.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-tower = "0.1"
//! ```
//!
//! # Examples
//!
//! A whole service in 29 lines: `examples/full_service.rs` mounts WebSocket sessions, a
//! tonic streaming RPC counted until its stream ends, `/load`, `/metrics`, ORCA and HAProxy
//! agent-check (from `livecount-report`) on one tracker, and drains on a
//! `CancellationToken` within a bound (`cargo run -p livecount-tower --example
//! full_service`; `tests/full_service.rs` runs it on loopback).
//!
//! Counting requests until their bodies end:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use axum::{Router, routing::get};
//! use http_body_util::BodyExt;
//! use livecount_session::{EndReason, SessionTracker};
//! use livecount_tower::SessionLayer;
//! use tower::ServiceExt;
//!
//! let tracker: SessionTracker = SessionTracker::new();
//! let app = Router::new()
//!     .route("/chat", get(|| async { "a streamed answer" }))
//!     .layer(SessionLayer::new(tracker.clone()));
//!
//! let request = http::Request::get("/chat").body(axum::body::Body::empty()).unwrap();
//! let response = app.oneshot(request).await.unwrap();
//! assert_eq!(tracker.active(), 1); // headers out, body not yet
//! response.into_body().collect().await.unwrap();
//! let s = tracker.snapshot();
//! assert_eq!((s.active, s.ended_by(EndReason::Completed)), (0, 1));
//! # }
//! ```
//!
//! WebSocket sessions that end on graceful shutdown (`examples/service.rs` serves both):
//!
//! ```
//! use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
//! use livecount_session::SessionTracker;
//! use livecount_tower::WebSocketSessions;
//! use tokio_util::sync::CancellationToken;
//!
//! async fn talk(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
//!     sessions.upgrade(ws, |mut socket, _session| async move {
//!         while let Some(Ok(_message)) = socket.recv().await { /* ... */ }
//!     })
//! }
//!
//! let shutdown = CancellationToken::new(); // cancel it where axum's graceful shutdown starts
//! let app: Router = Router::new()
//!     .route("/talk", get(talk))
//!     .with_state(WebSocketSessions::new(SessionTracker::new(), shutdown.clone()));
//! # let _ = app;
//! ```
//!
//! A client balancing on the backends' reports ([`HttpLoadSource`] polls each backend's
//! `/load`, the agent's [`livecount_report::ServedReport`], with hyper's HTTP/1 client;
//! [`BackendLoad`] is the part of it a balancer routes on):
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use livecount_tower::{HttpLoadSource, LoadFeed, Metric, SessionLoad};
//! use std::time::Duration;
//! use tower::{Service, ServiceExt, balance::p2c::Balance, discover::ServiceList};
//!
//! let backends = ["10.0.0.1:9000", "10.0.0.2:9000"].map(|addr| {
//!     let source = HttpLoadSource::new(addr.parse().unwrap(), Duration::from_secs(1));
//!     let feed = LoadFeed::spawn(source, Metric::Occupancy, Duration::from_secs(3));
//!     SessionLoad::new(tower::service_fn(move |_: ()| async move { Ok::<_, std::io::Error>(addr) }), feed)
//! });
//! let mut balance = Balance::new(ServiceList::new(backends));
//! let chosen = balance.ready().await.unwrap().call(()).await.unwrap();
//! # let _ = chosen;
//! # }
//! ```
//!
#![cfg_attr(
    feature = "orca",
    doc = r#"
The same on each backend's ORCA out-of-band stream (feature `orca`), the way a gRPC client
balances long streams (`docs/lb/tower-p2c.md` in the repository runs it against three
agents):

```no_run
# #[tokio::main(flavor = "current_thread")]
# async fn main() {
use livecount_tower::{LoadFeed, Metric, OrcaLoadSource, SessionLoad};
use std::time::Duration;
use tower::{Service, ServiceExt, balance::p2c::Balance, discover::ServiceList};

let backends = ["10.0.0.1:50051", "10.0.0.2:50051"].map(|addr| {
    let source = OrcaLoadSource::new(addr.parse().unwrap(), Duration::from_millis(500));
    let feed = LoadFeed::spawn(source, Metric::Occupancy, Duration::from_secs(2));
    // In production: a service that opens the stream on this backend's tonic channel.
    SessionLoad::new(tower::service_fn(move |_: ()| async move { Ok::<_, std::io::Error>(addr) }), feed)
});
let mut balance = Balance::new(ServiceList::new(backends));
let chosen = balance.ready().await.unwrap().call(()).await.unwrap();
# let _ = chosen;
# }
```
"#
)]
//!
//! # Feature flags
//!
//! * `axum` (default): [`WebSocketSessions`], [`tracked_upgrade`], [`TrackedSocket`]
//!   (axum's `ws` extractor, tokio-util's `CancellationToken`). [`SessionLayer`] and
//!   [`SessionLoad`] need only tower, http and tokio.
//! * `orca`: `OrcaLoadSource`, a [`LoadSource`] holding a backend's ORCA out-of-band
//!   stream (`xds.service.orca.v3.OpenRcaService`) open over a tonic channel
//!   (`livecount-report`'s generated client, tonic's `channel`).
//!
//! # Comparison with alternatives
//!
//! tower-http's `InFlightRequestsLayer` counts requests until their bodies end too, on one
//! shared atomic and with no reasons; tower's `PendingRequests` counts at the client and ends
//! at headers by default (`CompleteOnResponse`). Here each request is a livecount session:
//! a contention-free counter, exactly-once endings with a reason, ghost reaping, and the same
//! snapshot the load reports are made from. tonic's channels report a constant `Load` of 0,
//! so a p2c balancer over them is random; [`SessionLoad`] reads the backend's own count.
//!
//! # Safety and correctness
//!
//! * `#![forbid(unsafe_code)]`.
//! * proptest (`tests/model.rs`): random programs of requests started, futures and bodies
//!   polled, asked for their end and dropped, with inner and body errors and 5xx statuses,
//!   against a reference count of active sessions and endings per reason, after every step.
//! * `tests/layer.rs`: every reason produced exactly once; a stream counted until its last
//!   frame; 64 parallel requests counted while in flight and balanced at the end; over a
//!   real hyper server, bodiless responses (`HEAD`, 204, 304) complete, not cancel.
//! * `tests/websocket.rs`, `tests/example.rs`: real axum servers on loopback and
//!   tokio-tungstenite clients: shutdown → `Shutdown` and a 1001 close, a refused upgrade
//!   (or one after shutdown began) counts nothing, a failed one or a panicking handler ends
//!   `Failed`, a client leaving a stream → `Cancelled`.
//! * `tests/full_service.rs`: the full example on loopback: `/load`, `/metrics`, ORCA and
//!   agent-check report a WebSocket and a gRPC `Health/Watch` stream (ORCA's own stream
//!   uncounted); a client leaving its Watch → `Cancelled`; shutdown → 1001, `drain`, and
//!   a Watch still open cut off after the bounded drain (`Shutdown`).
//! * `tests/balance.rs`: a p2c balancer over two `/load` servers sends all 100 requests to
//!   the less loaded one, follows the reports when they change, and never picks a backend
//!   whose report is stale or missing over one with a fresh report; [`HttpLoadSource`]
//!   reads what `livecount-report`'s router serves, and (its unit tests) any HTTP/1
//!   framing, within its timeout and 64 KiB bounds.
//!
//! # Performance
//!
//! Per request the layer adds one session start and end on the tracker (see
//! `livecount-session`'s lifecycle numbers; a start allocates the session's shared core) and
//! no allocation of its own: the response future and body wrap the inner ones in place, and
//! the predicate and the end-of-body checks are a few branches. [`SessionLoad::load`](tower::load::Load)
//! is two atomic loads and a clock read.
//!
//! # Implementation notes
//!
//! The session moves from the response future into the body; the body ends it on the frame
//! after which the inner body reports `is_end_stream`, on a `None` frame, or when asked
//! `is_end_stream` with the inner body at its end (hyper asks that first and drops an empty
//! body unpolled), so a fully sent body never counts as cancelled. gRPC trailers are read
//! as they pass for `grpc-status`. A [`LoadFeed`] publishes the latest metric and its
//! freshness deadline in two atomics (Release / Acquire); its task is aborted when the last
//! handle drops.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]

mod body;
mod feed;
mod future;
mod layer;
mod limits;
mod load;
#[cfg(feature = "orca")]
mod orca_source;
mod report;
mod request_body;
mod source;
#[cfg(feature = "axum")]
mod socket_limits;
#[cfg(feature = "axum")]
mod tracked_socket;
mod watch;
#[cfg(feature = "axum")]
mod websocket;

pub use body::SessionBody;
pub use feed::{LoadFeed, LoadMetric};
pub use future::ResponseFuture;
pub use layer::{CountAll, Predicate, SessionLayer, SessionService};
pub use limits::{
    DEFAULT_MAX_SESSION, DEFAULT_RETRY_AFTER, DEFAULT_WRITE_TIMEOUT, StreamLimits, Unwatched,
    Watched,
};
pub use load::SessionLoad;
#[cfg(feature = "orca")]
pub use orca_source::{DRAINING_SEQUENCE, OrcaLoadSource};
pub use report::{BackendLoad, Metric};
pub use request_body::{BoxError, MessageTooLarge, RequestBody};
pub use source::{HttpLoadSource, LoadSource};
#[cfg(feature = "axum")]
pub use socket_limits::{DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_SOCKET_IDLE_TIMEOUT, SocketLimits};
#[cfg(feature = "axum")]
pub use tracked_socket::TrackedSocket;
#[cfg(feature = "axum")]
pub use websocket::{DEFAULT_CLOSE_TIMEOUT, IntoEndReason, WebSocketSessions, tracked_upgrade};
