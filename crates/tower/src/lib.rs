//! tower and axum integration for livecount sessions: a [`SessionLayer`] that counts each
//! HTTP request until its response *body* ends, [`WebSocketSessions`] for axum sockets, and
//! [`drain()`] for a deploy that cuts no call that ends in time.
//!
//! A streaming response (a gRPC server stream, SSE, a chunked download) holds the backend
//! until its body ends, not until its headers go out; a WebSocket holds it until the socket
//! closes, which axum's graceful shutdown does not wait for (tokio-rs/axum#3003). Both are
//! counted here as sessions on a [`livecount_session::SessionTracker`], each ended exactly
//! once with the reason of what happened, and the backend's report of them is what a client
//! balances on (the client side, a tower `Load` read from those reports for proxies and
//! clients, is `livecount-balance`).
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
//! A service usually takes these parts from one handle, `livecount-service`'s `Backend`,
//! which builds them on one tracker, runs the servers and drains them in order; this
//! crate is for a service that needs the parts themselves.
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
//! Limits, so that a peer that goes silent, stops reading or sends too much cannot hold
//! a count forever (a ghost in the load report). [`SessionLayer::new`] already bounds a
//! session to an hour (or a gRPC call to its client's `grpc-timeout`, if that comes first)
//! and a response frame's wait for a reader to 30 s; the idle timeout
//! and the request message limit are opt-in ([`StreamLimits`] has every default and its
//! reason), and a tracker built with `SessionTracker::with_max_sessions` makes the layer
//! refuse past its cap (gRPC `RESOURCE_EXHAUSTED`, else 503 with `Retry-After`) without
//! calling the service:
//!
//! ```
//! use std::time::Duration;
//! use livecount_session::SessionTracker;
//! use livecount_tower::SessionLayer;
//!
//! let tracker: SessionTracker = SessionTracker::with_max_sessions(1_000);
//! let layer = SessionLayer::new(tracker.clone())
//!     .max_session(Duration::from_secs(20 * 60)) // TimedOut, DEADLINE_EXCEEDED
//!     .grpc_timeout(true) // the default: the client's deadline too, if earlier
//!     .write_timeout(Duration::from_secs(10)) // a reader that stopped: Disconnected
//!     .idle_timeout(Duration::from_secs(60)) // no frame either way: Disconnected
//!     .max_request_message(4 << 20); // Failed, RESOURCE_EXHAUSTED
//! // tonic::transport::Server::builder().layer(layer).add_service(...)
//! # let _ = layer;
//! ```
//!
//! With the request body watched (the idle timeout or the message limit on), a client's
//! stream reset `CANCEL` ends its session `Cancelled` and a dead connection (or another
//! reset code, as a proxy whose client died sends) `Disconnected` the moment
//! the service reads the failed body, told apart by h2's error (tonic hides a reset `CANCEL`
//! as a clean end of its stream). In front of a gRPC server, [`GrpcOnlyLayer`](grpc::GrpcOnlyLayer) answers
//! requests that are not gRPC with HTTP 415, as gRPC's HTTP/2 protocol asks and tonic does
//! not:
//!
//! ```
//! # use livecount_session::SessionTracker;
//! # use livecount_tower::{SessionLayer, grpc::GrpcOnlyLayer};
//! # let tracker: SessionTracker = SessionTracker::new();
//! let server = tonic::transport::Server::builder()
//!     .layer(GrpcOnlyLayer::new()) // outermost: a 415 is no session
//!     .layer(SessionLayer::new(tracker).idle_timeout(std::time::Duration::from_secs(60)));
//! # let _ = server;
//! ```
//!
//! WebSocket sessions, refused once the tracker drains and left to finish;
//! [`drain()`] ends the rest at its deadline (`livecount-service`'s `Backend` performs the
//! whole sequence):
//!
//! ```
//! use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
//! use livecount_session::SessionTracker;
//! use livecount_tower::WebSocketSessions;
//!
//! async fn talk(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
//!     sessions.upgrade(ws, |mut socket, _session| async move {
//!         while let Some(Ok(_message)) = socket.recv().await { /* ... */ }
//!     })
//! }
//!
//! let tracker = SessionTracker::new(); // `tracker.begin_drain()` when the drain begins
//! let app: Router = Router::new()
//!     .route("/talk", get(talk))
//!     .with_state(WebSocketSessions::new(tracker));
//! # let _ = app;
//! ```
//!
//! Serving it on a port the internet can reach: [`serve()`] has `axum::serve`'s shape and
//! adds what that lacks, so slowloris clients (request heads sent a byte at a time) cannot
//! hold the process's descriptors: a request-head timeout, a bound on connections not yet
//! upgraded derived from `RLIMIT_NOFILE` (at the bound the oldest head still arriving is
//! closed; out of descriptors anyway, `accept` sheds one and backs off), and a graceful
//! shutdown with a bound. Each default is documented with its reason on [`Serve`](serve::Serve)'s
//! methods:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use axum::{Router, routing::get};
//! use std::time::Duration;
//! use tokio::net::TcpListener;
//! use tokio_util::sync::CancellationToken;
//!
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let app = Router::new().route("/", get(|| async { "hello" }));
//! let shutdown = CancellationToken::new();
//! # shutdown.cancel();
//! livecount_tower::serve(listener, app)
//!     .header_read_timeout(Duration::from_secs(10)) // the default
//!     .with_graceful_shutdown(shutdown.cancelled_owned())
//!     .shutdown_timeout(Duration::from_secs(20)) // the default
//!     .await;
//! # Ok(()) }
//! ```
//!
//! # Feature flags
//!
//! * `axum` (default): [`WebSocketSessions`], [`tracked_upgrade`](websocket::tracked_upgrade), [`TrackedSocket`]
//!   (axum's `ws` extractor). [`SessionLayer`] needs
//!   only tower, http and tokio.
//! * `serve` (default): [`serve()`], an HTTP/1.1 server for any cloneable tower service
//!   (hyper's server, hyper-util's tokio glue, and rustix's safe `getrlimit` on unix).
//! * `inband-orca`: `InbandOrcaLayer`, the backend's latest load report on every response
//!   as in-band ORCA (`endpoint-load-metrics` in HTTP headers, `endpoint-load-metrics-bin`
//!   in gRPC trailers; `livecount-report`'s `inband` encodings, its `orca` feature).
//!
//! # Comparison with alternatives
//!
//! tower-http's `InFlightRequestsLayer` counts requests until their bodies end too, on one
//! shared atomic and with no reasons; tower's `PendingRequests` counts at the client and ends
//! at headers by default (`CompleteOnResponse`). Here each request is a livecount session:
//! a contention-free counter, exactly-once endings with a reason, ghost reaping, and the same
//! snapshot the load reports are made from.
//! `axum::serve` has no request-head timeout, no bound on connections and no bound on its
//! graceful shutdown; hyper-util's `auto` server has the timeout but neither bound;
//! [`serve()`] has all three, with the bound kept below the descriptor limit.
//!
//! # Safety and correctness
//!
//! * `#![forbid(unsafe_code)]`.
//! * proptest (`tests/model.rs`): random programs of requests started, futures and bodies
//!   polled, asked for their end and dropped, with inner and body errors and 5xx statuses,
//!   on a tracker capped at 0–5 sessions or not at all (a start at the cap answered 503
//!   without a session), against a reference count of active sessions, refusals and
//!   endings per reason, after every step.
//! * `tests/layer_limits.rs`: a tonic server on loopback with the layer mounted as a service
//!   author would, Health's `Watch` and a hand-made streaming service, raw `h2` and tonic
//!   clients: a silent `Watch` → `Disconnected` / `DEADLINE_EXCEEDED` "idle timeout"; the
//!   maximum length → `TimedOut` / `DEADLINE_EXCEEDED`; a reader with a 64-byte window that
//!   never reads → `Disconnected`, count back to 0, while a slow reader that keeps reading
//!   is left alone; a message declaring 1 MiB over a 1 KiB limit → `Failed` /
//!   `RESOURCE_EXHAUSTED`; a reset mid-stream and dropped calls → `Cancelled`; a `Watch`
//!   with `grpc-timeout` 300 ms → `TimedOut` / `DEADLINE_EXCEEDED` "deadline exceeded
//!   (grpc-timeout)", not before; JSON, text and a near-miss content type → 415 with
//!   `grpc-status` 3 and nothing counted ([`GrpcOnlyLayer`](grpc::GrpcOnlyLayer)); with the handler reading its
//!   request and a drop grace far longer than the test waits, a `RST_STREAM(CANCEL)` →
//!   `Cancelled`, a `RST_STREAM(INTERNAL_ERROR)` (Envoy's, for a client it lost) and a cut
//!   TCP connection → `Disconnected` within 2 s, and 20 clean
//!   half-closes → `Completed`, never `Cancelled`; 2 000
//!   concurrent calls on a tracker capped at 50: exactly 50 admitted, never more live, the
//!   rest `RESOURCE_EXHAUSTED` and counted refused once each.
//! * `tests/limit_timers.rs`, on tokio's paused clock: each limit ends its session at the
//!   limit and not before (the sweeper's granularity), a `grpc-timeout` likewise (and the
//!   maximum length when that is earlier; invalid values, or a layer set not to honour
//!   them, leave only the maximum length), a failed request body ends its session at once
//!   and a clean end does not, a wait for the service is no stall,
//!   client heartbeats and server frames both count as activity, 408 / 503 / 413 and
//!   `Retry-After` for plain HTTP, the inner service never called at the cap, and no
//!   limits (nor panics) outside a runtime.
//! * `tests/layer.rs`: every reason produced exactly once; a stream counted until its last
//!   frame; 64 parallel requests counted while in flight and balanced at the end; over a
//!   real hyper server, bodiless responses (`HEAD`, 204, 304) complete, not cancel.
//! * `tests/websocket_sessions.rs`, `tests/example.rs`: real axum servers on loopback and
//!   tokio-tungstenite clients: a drain lets open sockets finish (a handler told to wrap
//!   up), refuses new ones 503 + `Retry-After`, and closes the rest 1012 at its deadline
//!   (`Shutdown`); a refused upgrade counts nothing, a failed one or a panicking handler
//!   ends `Failed`, a client leaving a stream → `Cancelled`.
//! * `tests/serve.rs`: [`serve()`] on loopback: 256 slowloris heads trickled a byte at a
//!   time are each closed within the 1 s head timeout, while descriptors stay under the
//!   clients' plus the bound of 64 (not twice the clients) and a fresh GET and WebSocket
//!   echo are answered; an idle keep-alive connection closes after the head timeout;
//!   upgraded sockets and a request in flight are not shed before heads still arriving;
//!   a head over 32 KiB is refused; graceful shutdown waits for the request in flight
//!   and returns when it is done, and a stuck request holds it only for the shutdown
//!   timeout.
//! * `tests/serve_rlimit.rs`: a child process under `RLIMIT_NOFILE` 200 against 220
//!   slowloris heads from the parent: with the default (derived) bound it never holds
//!   more than half its limit and a fresh WebSocket session is served at once; with 120
//!   more files open, `accept` fails with `EMFILE`, sheds the oldest head, and a fresh
//!   session is still served. Each fails against the agent's former server (bound 256,
//!   no shedding on `EMFILE`): the fresh session waits out the head timeout.
//!
//! # Performance
//!
//! Per request the layer adds one session start and end on the tracker (see
//! `livecount-session`'s lifecycle numbers; a start allocates the session's shared core) and
//! no allocation of its own: the response future and body wrap the inner ones in place, and
//! the predicate and the end-of-body checks are a few branches.
//!
//! With limits on (the default), a request also arms its session's limits in the session
//! table (a few relaxed stores on the session's own slot) and holds one more reference to
//! it; per frame the bodies do a relaxed load and store (and a request frame a relaxed
//! add) on that slot: no allocation, no lock, no clock read, no timer, no task per request.
//! The per-request cost, with and without limits, is measured side by side by
//! `benches/benches/session_layer.rs` (`cargo bench -p livecount-benches --bench
//! session_layer`). [`SessionLayer::without_limits`] removes all of it.
//!
//! # Implementation notes
//!
//! The session moves from the response future into the body; the body ends it on the frame
//! after which the inner body reports `is_end_stream`, on a `None` frame, or when asked
//! `is_end_stream` with the inner body at its end (hyper asks that first and drops an empty
//! body unpolled), so a fully sent body never counts as cancelled. gRPC trailers are read
//! as they pass for `grpc-status`.
//!
//! Limits are held by the session table, not inside the bodies: hyper polls a response
//! body only while the peer's flow-control window (or the socket) has room, so a timer
//! inside `poll_frame` would never run for the reader that stopped. At `call` the layer
//! arms the session with its limits (`Session::hold_to`, the client's `grpc-timeout` as its
//! deadline, read once); the tracker's one sweeper task (spawned on the first armed
//! session's runtime, shared by every layer and socket on the tracker) walks the session
//! table every quarter of the shortest limit (10 ms to 1 s), measures each limit from the
//! sweep that first saw the session or its last change, and so ends a session at the limit
//! or up to two periods later, never earlier. A response body notes each poll and each
//! frame it hands over (`writes << 1 | holding`, `EndHandle::note_written` and
//! `note_writing`); a frame still held, with no poll since, for the write timeout is a
//! stall. A limit claims the session's end in its slot first (its `EndCause`), then ends
//! the session through the same exactly-once CAS as every end; the future or body,
//! registered with `Session::poll_ended` while it waits, wakes and answers with the limit's
//! status (`EndHandle::ended_by`). hyper's h2 takes one frame past the window into its
//! buffer, so a stream is seen stalled once its next frame waits. A request body's failure
//! claims the session's end the same way (`Cancelled` for an h2 `CANCEL` reset in the
//! error's sources, else `Disconnected`) from inside `poll_frame`, before the service sees
//! the error.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "serve")]
mod busy;
#[cfg(feature = "serve")]
mod descriptor_budget;
mod drain_impl;
#[cfg(feature = "serve")]
mod early_answer;
mod grpc_only;
#[cfg(feature = "inband-orca")]
mod inband_orca;
mod layer;
mod limits;
#[cfg(any(feature = "serve", feature = "inband-orca"))]
mod map_response;
#[cfg(feature = "serve")]
mod pending;
mod request_body;
mod response_future;
#[cfg(feature = "serve")]
mod server;
mod session_body;
#[cfg(feature = "axum")]
mod socket_end;
#[cfg(feature = "axum")]
mod socket_limits;
#[cfg(feature = "axum")]
mod tracked_socket;
mod traffic;
#[cfg(feature = "axum")]
mod websocket_sessions;

pub use layer::{CountAll, Predicate, SessionLayer, SessionService};
pub use limits::StreamLimits;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use socket_limits::SocketLimits;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use tracked_socket::TrackedSocket;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use websocket_sessions::WebSocketSessions;

pub use drain::drain;
#[cfg(feature = "serve")]
#[cfg_attr(docsrs, doc(cfg(feature = "serve")))]
pub use serve::serve;

pub mod body {
    //! The bodies a counted request runs with: the response's ([`SessionBody`], ending the
    //! session when it ends), the request's under limits ([`RequestBody`]), and the request
    //! modes of a [`SessionLayer`] ([`PassThrough`], the default, and [`Inspected`]).

    #[cfg(feature = "inband-orca")]
    #[cfg_attr(docsrs, doc(cfg(feature = "inband-orca")))]
    pub use crate::inband_orca::InbandOrcaBody;
    pub use crate::limits::{Inspected, PassThrough};
    pub use crate::request_body::{BoxError, MessageTooLarge, RequestBody};
    pub use crate::session_body::SessionBody;

    #[cfg(doc)]
    use crate::SessionLayer;
}

pub mod future {
    //! The futures the services of this crate return.

    pub use crate::grpc_only::GrpcOnlyFuture;
    #[cfg(feature = "inband-orca")]
    #[cfg_attr(docsrs, doc(cfg(feature = "inband-orca")))]
    pub use crate::inband_orca::InbandOrcaFuture;
    pub use crate::response_future::ResponseFuture;
}

pub mod grpc {
    //! gRPC-only parts: [`GrpcOnlyLayer`] (HTTP/1 and non-gRPC requests answered `415` before
    //! they reach a tonic service) and the in-band ORCA layer ([`InbandOrcaLayer`]: every
    //! response carries the backend's load report).

    pub use crate::grpc_only::{GrpcOnly, GrpcOnlyLayer};
    #[cfg(feature = "inband-orca")]
    #[cfg_attr(docsrs, doc(cfg(feature = "inband-orca")))]
    pub use crate::inband_orca::{InbandOrcaLayer, InbandOrcaService};
}

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod websocket {
    //! What a [`WebSocketSessions`](crate::WebSocketSessions) handler returns and how it ends
    //! its session ([`SocketEnd`], [`IntoEndReason`]), and [`tracked_upgrade`], an upgrade
    //! counted on a tracker without a `WebSocketSessions` state.

    pub use crate::socket_end::{IntoEndReason, SocketEnd};
    pub use crate::websocket_sessions::tracked_upgrade;
}

pub mod drain {
    //! [`drain()`]: a deploy that cuts no call that ends in time, and [`Drained`], how it went.

    pub use crate::drain_impl::{Drained, drain};
}

#[cfg(feature = "serve")]
#[cfg_attr(docsrs, doc(cfg(feature = "serve")))]
pub mod serve {
    //! [`serve()`]: a hardened HTTP server for the layer's services (bounded heads, bounded
    //! pending connections, a graceful shutdown that waits for counted bodies), its builder and
    //! futures, and its defaults.

    pub use crate::descriptor_budget::MAX_DEFAULT_PENDING;
    pub use crate::server::{
        DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_HEADER_BYTES, DEFAULT_SHUTDOWN_TIMEOUT, Serve,
        ServeFuture, WithGracefulShutdown, serve,
    };
}
