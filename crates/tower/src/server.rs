//! [`serve`]: a tower service (an axum `Router`) served over HTTP/1.1 on a
//! `TcpListener`, hardened for an internet-facing port.
//!
//! `axum::serve` has no request-head timeout, no bound on connections and no bound on its
//! graceful shutdown, so a client that never finishes a request (slowloris) holds a
//! connection and a file descriptor for as long as it likes, and a few hundred of them
//! exhaust the process's descriptors: `accept` fails with `EMFILE` and nobody is served.
//! Here:
//!
//! * **A request-head timeout.** A connection whose first request head has not fully
//!   arrived in time is answered `503` with `Retry-After` and closed; an idle keep-alive
//!   connection whose next head has not arrived is closed (hyper's timer, measured from
//!   the connection's first poll or from the previous response). The bound a well-behaved
//!   client is held to: its whole head reaches the server's socket within the timeout of
//!   the server taking the connection from the listener. A head that has arrived in time
//!   is always served however late the server gets to read it (a server short of CPU
//!   reads the socket before it looks at the clock).
//! * **A bound on pending connections, below the descriptor limit.** A connection is
//!   *pending* from its accept until it is upgraded (a WebSocket, which the application
//!   bounds) or closed. At the bound, a new connection sheds the oldest pending one that
//!   is still waiting for a request head: answered `503` with `Retry-After`, then closed
//!   (see [`Pending`](crate::pending::Pending), which also says what this cannot stop). The default bound is derived from `RLIMIT_NOFILE` and the descriptors already open, and
//!   an explicit one is capped below the limit (see
//!   [`DescriptorBudget`](crate::descriptor_budget::DescriptorBudget)).
//! * **Out of descriptors anyway** (other parts of the process opened files, or another
//!   process took the system's): an `accept` failing with `EMFILE` or `ENFILE` closes the
//!   oldest pending connection and backs off briefly, instead of spinning or returning.
//! * **No connection closed without a word before its request.** Whatever closes a
//!   connection no request head of which has reached the service (shedding, the head
//!   timeout, shutdown), it is answered `503` with `Retry-After` first, so a client whose
//!   head is in the socket or on its way reads an answer, not an end of stream (see
//!   [`answer_unavailable`](crate::early_answer::answer_unavailable)).
//! * **Bounded graceful shutdown.** On the signal the listener is closed, a connection
//!   that never completed a request head is answered `503` and closed at once, every other one gets hyper's
//!   `graceful_shutdown` (finish the request in flight, then close), and the server
//!   returns when all have closed, or when the shutdown timeout has passed, closing the
//!   rest.
//! * **Nagle off** on every accepted connection: a stream's small frames go out as they
//!   are written, not ~40 ms later behind the peer's delayed ACK (the agent's gRPC port
//!   had Nagle on until its fix: behind Envoy, first-stream p99 87 → 20 ms).

use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::busy::{Busy, BusyService};
use crate::descriptor_budget::DescriptorBudget;
use crate::early_answer::answer_unavailable;
use crate::pending::Pending;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The default request-head timeout: a real client sends its whole head right behind its
/// handshake (or within a round trip of its previous response), well under a second even
/// on a poor mobile link, so 10 s leaves slow links ample room while an attacker's
/// connection is recycled within seconds. (hyper's own default is 30 s, nginx's `client_header_timeout` 60 s;
/// both let a slowloris hold a descriptor that much longer.) A head the network delays
/// longer (retransmitted on the client's backoff after the listener's backlog overflowed)
/// is answered `503` with `Retry-After`, not dropped.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default bound on a graceful shutdown: 20 s fits inside Kubernetes' default 30 s
/// termination grace period (after which the process is killed anyway) and leaves 10 s for
/// what the application does after serving returns (a last load report, flushing logs).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);

/// The default largest request head, bytes: 32 KiB is nginx's default total for header
/// lines (`large_client_header_buffers 4 8k`), above what browsers send with their
/// cookies, and keeps [`MAX_DEFAULT_PENDING`](crate::serve::MAX_DEFAULT_PENDING) half-sent heads
/// under 128 MiB of buffers (hyper's own bound is its ~400 KiB read buffer). A larger head
/// is answered 431.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 32 * 1024;

/// hyper adds the head timeout to the clock, which must not overflow.
const MAX_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// hyper's smallest read buffer (it asserts this bound); a smaller head limit would not
/// shrink the buffer anyway.
const MIN_MAX_HEADER_BYTES: usize = 8 * 1024;

/// The pause after `accept` failed for want of descriptors and a pending connection was
/// shed: time for its task to answer and close it, freeing its descriptor.
const SHED_BACKOFF: Duration = Duration::from_millis(5);

/// The pause after any other failed `accept` (nothing to free: wait for the system).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `service` on `listener` over HTTP/1.1 with upgrades (WebSocket), with a
/// request-head timeout, a bound on pending connections below the descriptor limit, and
/// (with [`Serve::with_graceful_shutdown`]) a bounded graceful shutdown.
///
/// `service` is any cloneable tower service of hyper requests, such as an axum `Router`
/// (one clone serves each connection). Await the result, or spawn it (it is `Send`);
/// without a shutdown signal it serves until dropped, which closes every connection.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use axum::{Router, routing::get};
/// use tokio::net::TcpListener;
///
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// let app = Router::new().route("/", get(|| async { "hello" }));
/// let server = tokio::spawn(livecount_tower::serve(listener, app).into_future());
/// # server.abort();
/// # Ok(()) }
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    Serve {
        listener,
        service,
        settings: Settings::default(),
    }
}

/// A server being configured; see [`serve`]. Await it (or call
/// [`into_future`](IntoFuture::into_future) and spawn that) to run it.
#[must_use = "a server does nothing until awaited or spawned"]
pub struct Serve<S> {
    listener: TcpListener,
    service: S,
    settings: Settings,
}

/// A server that shuts down gracefully on a signal; see [`Serve::with_graceful_shutdown`].
#[must_use = "a server does nothing until awaited or spawned"]
pub struct WithGracefulShutdown<S, F> {
    serve: Serve<S>,
    signal: F,
    shutdown_timeout: Duration,
}

/// A running server: [`Serve`] or [`WithGracefulShutdown`] turned into a future. It
/// resolves when the server has shut down; dropping it closes every connection.
#[must_use = "a server does nothing until awaited or spawned"]
pub struct ServeFuture(Pin<Box<dyn Future<Output = ()> + Send>>);

/// Everything but the listener, the service and the signal.
#[derive(Debug, Clone, Copy)]
struct Settings {
    header_read_timeout: Duration,
    max_header_bytes: usize,
    /// `None`: derived from the descriptor limit.
    max_pending: Option<usize>,
}

// === impl Serve ===

impl<S> Serve<S> {
    /// Answers `503` with `Retry-After` and closes a connection whose first request head
    /// has not fully arrived `timeout` after the server took the connection; closes an
    /// idle keep-alive connection whose next head has not arrived `timeout` after its
    /// previous response. A head that has arrived in time is served however late the
    /// server reads it. Default [`DEFAULT_HEADER_READ_TIMEOUT`]; clamped to between 1 ms
    /// and a day.
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// use std::time::Duration;
    /// let server = livecount_tower::serve(listener, app).header_read_timeout(Duration::from_secs(5));
    /// # let _ = server;
    /// # }
    /// ```
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        let timeout = timeout.clamp(Duration::from_millis(1), MAX_HEADER_READ_TIMEOUT);
        self.settings.header_read_timeout = timeout;
        self
    }

    /// Holds at most `max` connections not yet upgraded or closed; at the bound a new one
    /// sheds the oldest still waiting for a request head, answering it `503` with
    /// `Retry-After` (else the oldest, closed). Default: half
    /// the soft `RLIMIT_NOFILE` minus the descriptors open when the server starts, at
    /// most [`MAX_DEFAULT_PENDING`](crate::serve::MAX_DEFAULT_PENDING). An explicit bound is still
    /// capped at the limit minus the descriptors open minus 32, so that the listener keeps
    /// working; at least 1.
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// let server = livecount_tower::serve(listener, app).max_pending(256);
    /// assert!(server.effective_max_pending() <= 256);
    /// # }
    /// ```
    pub fn max_pending(mut self, max: usize) -> Self {
        self.settings.max_pending = Some(max);
        self
    }

    /// Answers a request head longer than `bytes` with 431 and closes the connection.
    /// Default [`DEFAULT_MAX_HEADER_BYTES`]; at least 8 KiB (hyper's smallest buffer).
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// let server = livecount_tower::serve(listener, app).max_header_bytes(64 * 1024);
    /// # let _ = server;
    /// # }
    /// ```
    pub fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.settings.max_header_bytes = bytes.max(MIN_MAX_HEADER_BYTES);
        self
    }

    /// Shuts down gracefully when `signal` completes: stops accepting, lets every
    /// connection finish its request in flight, and returns once all have closed, or once
    /// [`shutdown_timeout`](WithGracefulShutdown::shutdown_timeout) has passed (closing
    /// the rest). Upgraded connections (WebSockets) are the application's to close.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let app = axum::Router::new();
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let server = livecount_tower::serve(listener, app)
    ///     .with_graceful_shutdown(async { stopped.await.ok(); });
    /// stop.send(()).unwrap();
    /// server.await; // returns at once: no connection is open
    /// # Ok(()) }
    /// ```
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<S, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            serve: self,
            signal,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = livecount_tower::serve(listener, axum::Router::new());
    /// assert!(server.local_addr()?.ip().is_loopback());
    /// # Ok(()) }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The bound on pending connections the server would apply if started now (it is
    /// computed once, when the server is turned into a future): the explicit or derived
    /// bound, capped by the descriptor limit and the descriptors open now.
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// let server = livecount_tower::serve(listener, app);
    /// assert!((1..=livecount_tower::serve::MAX_DEFAULT_PENDING).contains(&server.effective_max_pending()));
    /// # }
    /// ```
    pub fn effective_max_pending(&self) -> usize {
        self.settings
            .max_pending(DescriptorBudget::of_this_process())
    }
}

impl<S> fmt::Debug for Serve<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<S, B> IntoFuture for Serve<S>
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = ();
    type IntoFuture = ServeFuture;

    /// Starts serving: the bound on pending connections is fixed here.
    fn into_future(self) -> ServeFuture {
        let never = std::future::pending::<()>();
        ServeFuture(Box::pin(run(self, never, Duration::MAX)))
    }
}

// === impl WithGracefulShutdown ===

impl<S, F> WithGracefulShutdown<S, F> {
    /// Waits at most `timeout` after the signal for connections to finish, then closes
    /// the rest and returns, so a stuck request or a client that stops reading cannot hold
    /// the shutdown. Default [`DEFAULT_SHUTDOWN_TIMEOUT`]; `Duration::MAX` waits for ever.
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// use std::time::Duration;
    /// let server = livecount_tower::serve(listener, app)
    ///     .with_graceful_shutdown(std::future::pending())
    ///     .shutdown_timeout(Duration::from_secs(5));
    /// # let _ = server;
    /// # }
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = livecount_tower::serve(listener, axum::Router::new())
    ///     .with_graceful_shutdown(std::future::pending());
    /// assert!(server.local_addr()?.ip().is_loopback());
    /// # Ok(()) }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.serve.local_addr()
    }

    /// The bound on pending connections the server would apply if started now; see
    /// [`Serve::effective_max_pending`].
    ///
    /// ```
    /// # async fn doc(listener: tokio::net::TcpListener, app: axum::Router) {
    /// let server = livecount_tower::serve(listener, app)
    ///     .max_pending(64)
    ///     .with_graceful_shutdown(std::future::pending());
    /// assert!(server.effective_max_pending() <= 64);
    /// # }
    /// ```
    pub fn effective_max_pending(&self) -> usize {
        self.serve.effective_max_pending()
    }
}

impl<S, F> fmt::Debug for WithGracefulShutdown<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithGracefulShutdown")
            .field("serve", &self.serve)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl<S, B, F> IntoFuture for WithGracefulShutdown<S, F>
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = ();
    type IntoFuture = ServeFuture;

    /// Starts serving: the bound on pending connections is fixed here.
    fn into_future(self) -> ServeFuture {
        ServeFuture(Box::pin(run(
            self.serve,
            self.signal,
            self.shutdown_timeout,
        )))
    }
}

// === impl ServeFuture ===

impl Future for ServeFuture {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeFuture").finish_non_exhaustive()
    }
}

// === impl Settings ===

impl Default for Settings {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_pending: None,
        }
    }
}

impl Settings {
    fn max_pending(&self, budget: DescriptorBudget) -> usize {
        match self.max_pending {
            Some(max) => budget.cap(max),
            None => budget.default_max_pending(),
        }
    }

    fn http1(&self) -> http1::Builder {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_header_size(self.max_header_bytes);
        http
    }
}

// === the accept loop ===

/// Accepts and serves connections until `signal`, then shuts them down gracefully within
/// `shutdown_timeout`. The bound on pending connections is fixed here, when the server is
/// turned into a future.
fn run<S, B>(
    serve: Serve<S>,
    signal: impl Future<Output = ()> + Send + 'static,
    shutdown_timeout: Duration,
) -> impl Future<Output = ()> + Send + 'static
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let Serve {
        listener,
        service,
        settings,
    } = serve;
    let mut pending = Pending::new(settings.max_pending(DescriptorBudget::of_this_process()));
    let http = settings.http1();
    async move {
        let (stop, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        tokio::pin!(signal);
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut signal => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    let resume = after_accept_error(&error, &mut pending);
                    tokio::select! {
                        () = &mut signal => break,
                        () = tokio::time::sleep_until(resume) => continue,
                    }
                }
            };
            if pending.make_room() > 0 {
                // Let the tasks just shed answer and close their sockets before this loop
                // accepts more (it may otherwise run on for a whole cooperative budget of
                // accepts).
                tokio::task::yield_now().await;
            }
            let busy = Busy::default();
            let service = BusyService::new(service.clone(), busy.clone());
            let conn = serve_connection(&http, stream, service, stopped.clone());
            pending.push(connections.spawn(conn), busy);
        }
        drop(listener);
        let _ = stop.send(true);
        let all_closed = async { while connections.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(shutdown_timeout, all_closed).await;
        // Dropping `connections` aborts those still open.
    }
}

/// Turns Nagle's algorithm off on an accepted connection (as tonic's `Server::builder` does
/// by default; `axum::serve` leaves it to the listener's `tap_io`): a session's small frames — a WebSocket chunk after its
/// headers, a chunk after the previous one — must not wait for the peer's delayed ACK
/// (~40 ms on Linux) behind each other. A socket that refuses is already broken; its
/// connection fails on its own.
fn without_nagle(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
}

/// Serves one connection until it closes, is upgraded (hyper hands the socket to the
/// upgrade and this future ends), is shed by the accept loop, or shuts down on
/// `stopped`.
///
/// A connection no request head of which has reached the service when it is shed, misses
/// the head timeout, or shuts down is answered `503` with `Retry-After` and closed at once
/// (hyper has written nothing on it, so the socket is ours to answer on; hyper would
/// close it without a word, or on shutdown wait out the head timeout). Otherwise a shed
/// connection is closed, and on shutdown hyper answers the request in flight, flushes
/// and closes.
fn serve_connection<S, B>(
    http: &http1::Builder,
    stream: TcpStream,
    service: BusyService<S>,
    mut stopped: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static
where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let busy = service.busy().clone();
    without_nagle(&stream);
    let conn = http
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    async move {
        // `Unpin`, and owned: `into_parts` takes it back from hyper.
        let mut conn = conn;
        let stop = tokio::select! {
            // First: a shed connection goes now, not after another request.
            biased;
            () = busy.shed_requested() => false,
            result = &mut conn => match result {
                // hyper's head timer; a later head (keep-alive) is closed without a word.
                Err(e) if e.is_timeout() && !busy.ever_busy() => false,
                _ => return,
            },
            // An error: the server is gone, and so is this task soon.
            _ = stopped.wait_for(|stop| *stop) => true,
        };
        // Not polled meanwhile, so no head can complete between this check and the answer.
        if !busy.ever_busy() {
            if let Some(parts) = conn.into_parts() {
                answer_unavailable(parts.io.into_inner());
            }
        } else if stop {
            Pin::new(&mut conn).graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// After a failed `accept`, when to accept again: at once after a connection that failed
/// by itself; out of descriptors, close the oldest pending connection to free one and try
/// again shortly; otherwise a little later.
fn after_accept_error(error: &io::Error, pending: &mut Pending) -> Instant {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted};
    let now = Instant::now();
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted
    ) {
        return now;
    }
    if !out_of_descriptors(error) {
        return now + ACCEPT_ERROR_BACKOFF;
    }
    if pending.shed_one() {
        now + SHED_BACKOFF
    } else {
        now + ACCEPT_ERROR_BACKOFF
    }
}

/// `EMFILE` (this process's limit), `ENFILE` (the system's), or the kernel out of socket
/// buffers or memory: freeing a descriptor of ours may let the next `accept` through.
#[cfg(unix)]
fn out_of_descriptors(error: &io::Error) -> bool {
    use rustix::io::Errno;
    let errno = Errno::from_io_error(error);
    errno.is_some_and(|e| [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&e))
}

/// Anything but a failed connection may be a shortage of sockets.
#[cfg(not(unix))]
fn out_of_descriptors(_: &io::Error) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_accepted_connection_has_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (accepted, _client) = tokio::join!(listener.accept(), client);
        let (stream, _) = accepted.unwrap();
        assert!(!stream.nodelay().unwrap(), "Linux accepts with Nagle on");
        without_nagle(&stream);
        assert!(stream.nodelay().unwrap());
    }
}
