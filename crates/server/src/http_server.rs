//! [`HttpServer`]: an axum `Router` served over HTTP/1.1 with hyper directly, so that a
//! client that never finishes a request (slowloris) cannot hold a connection or a file
//! descriptor for long.
//!
//! `axum::serve` has neither a header-read timeout nor a bound on connections, so 300
//! half-sent upgrades held 300 descriptors forever. Here:
//!
//! * **Header-read timeout.** hyper closes a connection whose request head (or, on an
//!   idle keep-alive connection, the next one) has not fully arrived in
//!   `header_read_timeout`.
//! * **A bound on pending connections.** A connection is *pending* from its accept until
//!   it is upgraded to a WebSocket (a session, bounded by `max_sessions`) or closed; at
//!   most `max_pending` are open. When a new one arrives at the bound, the **oldest**
//!   pending connection is closed to make room. Refusing the newcomer instead would let an
//!   attacker who holds the bound deny every fresh client for a whole header timeout;
//!   closing the oldest means a fresh client (which sends its request head within
//!   milliseconds) is served, and an attacker must open `max_pending` connections faster
//!   than a real client's handshake to hurt one.
//! * **Graceful shutdown per connection.** On the agent's shutdown signal the accept loop
//!   stops, every connection gets hyper's `graceful_shutdown` (finish the request in
//!   flight, then close), and [`HttpServer::serve`] returns once all have.

use std::collections::VecDeque;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

/// Serves a `Router` with a header-read timeout and a bound on pending connections.
#[derive(Debug, Clone)]
pub(crate) struct HttpServer {
    http: http1::Builder,
    max_pending: usize,
}

impl HttpServer {
    /// A server closing a connection whose request head takes longer than
    /// `header_read_timeout`, with at most `max_pending` (≥ 1) connections not upgraded.
    pub(crate) fn new(header_read_timeout: Duration, max_pending: usize) -> Self {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout);
        Self {
            http,
            max_pending: max_pending.max(1),
        }
    }

    /// Accepts and serves connections until `shutdown` becomes `true`, then shuts every
    /// connection down gracefully and returns when they have closed.
    pub(crate) async fn serve(
        self,
        listener: TcpListener,
        app: Router,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut connections = JoinSet::new();
        let mut pending = Pending::new(self.max_pending);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            while connections.try_join_next().is_some() {}
            let Ok((stream, _)) = accepted else {
                // Out of descriptors or a connection reset before its accept: back off a
                // little rather than spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            pending.make_room();
            let conn = serve_connection(self.http.clone(), stream, app.clone(), shutdown.clone());
            pending.push(connections.spawn(conn));
        }
        while connections.join_next().await.is_some() {}
    }
}

/// Serves one connection until it closes, is upgraded (hyper hands the socket to the
/// upgrade and this future ends), or shuts down gracefully on `shutdown`.
async fn serve_connection(
    http: http1::Builder,
    stream: TcpStream,
    app: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(app);
    let conn = http
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = shutdown.wait_for(|stop| *stop) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

// === impl Pending ===

/// The connections not yet upgraded or closed, oldest first (only the accept loop
/// touches it, so it needs no lock).
#[derive(Debug)]
struct Pending {
    max: usize,
    oldest_first: VecDeque<AbortHandle>,
}

impl Pending {
    fn new(max: usize) -> Self {
        Self {
            max,
            oldest_first: VecDeque::with_capacity(max),
        }
    }

    /// Makes room for one more: forgets finished connections, then closes the oldest
    /// pending ones while at the bound.
    fn make_room(&mut self) {
        if self.oldest_first.len() < self.max {
            return;
        }
        self.oldest_first.retain(|conn| !conn.is_finished());
        while self.oldest_first.len() >= self.max {
            if let Some(oldest) = self.oldest_first.pop_front() {
                // Dropping its future closes the socket.
                oldest.abort();
            }
        }
    }

    fn push(&mut self, conn: AbortHandle) {
        self.oldest_first.push_back(conn);
    }
}
