//! axum WebSocket sessions: [`tracked_upgrade`] / [`WebSocketSessions`] count a socket from the
//! upgrade response to the handler's end and end it on graceful shutdown, which axum does not
//! do for upgraded connections; [`TrackedSocket`] is what the handler gets.

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_core::Stream;
use futures_sink::Sink;
use livecount::Counter;
use livecount_session::{EndHandle, EndReason, Session, SessionTracker};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How long a shutdown waits, at most, to send the 1001 close frame and read the peer's reply.
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a WebSocket handler's output says about how its session ended.
///
/// ```
/// use livecount_session::EndReason;
/// use livecount_tower::IntoEndReason;
///
/// assert_eq!(().into_end_reason(), EndReason::Completed);
/// assert_eq!(Err::<(), _>("bad frame").into_end_reason(), EndReason::Failed);
/// assert_eq!(EndReason::Disconnected.into_end_reason(), EndReason::Disconnected);
/// ```
pub trait IntoEndReason {
    /// The reason.
    fn into_end_reason(self) -> EndReason;
}

impl IntoEndReason for () {
    fn into_end_reason(self) -> EndReason {
        EndReason::Completed
    }
}

impl IntoEndReason for EndReason {
    fn into_end_reason(self) -> EndReason {
        self
    }
}

impl<T, E> IntoEndReason for Result<T, E> {
    fn into_end_reason(self) -> EndReason {
        match self {
            Ok(_) => EndReason::Completed,
            Err(_) => EndReason::Failed,
        }
    }
}

/// Counts axum WebSocket sessions on a tracker and ends them on a shutdown signal.
///
/// [`upgrade`](WebSocketSessions::upgrade) starts the session *before* the `101 Switching
/// Protocols` response leaves, so no load report ever shows a slot as free that an accepted
/// socket is about to take, and moves the guard into axum's `on_upgrade` task. Then:
///
/// * the handler returns → the reason its output says ([`IntoEndReason`]);
/// * the shutdown token is cancelled → the session ends [`Shutdown`](EndReason::Shutdown)
///   at once, the handler is dropped, and the socket gets a 1001 (going away) close frame,
///   the close handshake bounded by the close timeout;
/// * the upgrade fails after the response (the connection was lost before hyper handed it
///   over) → [`Failed`](EndReason::Failed), and the handler never runs;
/// * the handler panics → `Failed`; the task is dropped unfinished (the runtime shutting
///   down) → [`Cancelled`](EndReason::Cancelled);
/// * a request that is no WebSocket upgrade never gets here: axum's `WebSocketUpgrade`
///   extractor refuses it, and nothing is counted; after the shutdown token is cancelled,
///   `upgrade` answers `503 Service Unavailable` and counts nothing either.
///
/// A clone shares the tracker and the token.
///
/// ```
/// use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
/// use livecount_session::SessionTracker;
/// use livecount_tower::WebSocketSessions;
/// use tokio_util::sync::CancellationToken;
///
/// async fn echo(ws: WebSocketUpgrade, State(sessions): State<WebSocketSessions>) -> Response {
///     sessions.upgrade(ws, |mut socket, _session| async move {
///         while let Some(Ok(message)) = socket.recv().await {
///             if socket.send(message).await.is_err() {
///                 break;
///             }
///         }
///     })
/// }
///
/// let tracker: SessionTracker = SessionTracker::new();
/// let shutdown = CancellationToken::new(); // also given to axum's with_graceful_shutdown
/// let app: Router = Router::new()
///     .route("/ws", get(echo))
///     .with_state(WebSocketSessions::new(tracker, shutdown));
/// # let _ = app;
/// ```
pub struct WebSocketSessions<C: Counter = livecount::PerThread, M = ()> {
    tracker: SessionTracker<C, M>,
    shutdown: CancellationToken,
    close_timeout: Duration,
}

impl<C: Counter + 'static, M: Send + Sync + 'static> WebSocketSessions<C, M> {
    /// Counts sessions on `tracker` and ends them when `shutdown` is cancelled.
    pub fn new(tracker: SessionTracker<C, M>, shutdown: CancellationToken) -> Self {
        WebSocketSessions {
            tracker,
            shutdown,
            close_timeout: DEFAULT_CLOSE_TIMEOUT,
        }
    }

    /// Bounds the close handshake at shutdown by `timeout` (default
    /// [`DEFAULT_CLOSE_TIMEOUT`]).
    ///
    /// ```
    /// # use livecount_tower::WebSocketSessions;
    /// # use std::time::Duration;
    /// let sessions: WebSocketSessions = WebSocketSessions::new(Default::default(), Default::default())
    ///     .close_timeout(Duration::from_millis(250));
    /// # let _ = sessions;
    /// ```
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// The shutdown token (for a handler's other long work, an endless HTTP stream say).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Answers `ws` with the upgrade response and runs `handler` on the socket as a session,
    /// as described on [`WebSocketSessions`]. The handler gets the socket and an
    /// [`EndHandle`] (to end the session with a reason of its own, or `touch` it).
    pub fn upgrade<F, Fut>(&self, ws: WebSocketUpgrade, handler: F) -> Response
    where
        F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoEndReason,
    {
        if self.shutdown.is_cancelled() {
            // Draining: refuse before anything is counted or upgraded.
            return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
        }
        let session = SocketGuard(self.tracker.start());
        let on_failure = session.0.handle();
        let shutdown = self.shutdown.clone();
        let close_timeout = self.close_timeout;
        ws.on_failed_upgrade(move |_| {
            on_failure.end(EndReason::Failed);
        })
        .on_upgrade(move |socket| run(socket, session, shutdown, close_timeout, handler))
    }
}

impl<C: Counter, M> Clone for WebSocketSessions<C, M> {
    fn clone(&self) -> Self {
        WebSocketSessions {
            tracker: self.tracker.clone(),
            shutdown: self.shutdown.clone(),
            close_timeout: self.close_timeout,
        }
    }
}

impl<C: Counter, M> fmt::Debug for WebSocketSessions<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketSessions")
            .field("shutting_down", &self.shutdown.is_cancelled())
            .field("close_timeout", &self.close_timeout)
            .finish_non_exhaustive()
    }
}

/// [`WebSocketSessions::upgrade`] in one call, with the default close timeout.
///
/// ```
/// use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
/// use livecount_session::{EndReason, SessionTracker};
/// use livecount_tower::tracked_upgrade;
/// use tokio_util::sync::CancellationToken;
///
/// async fn chat(
///     ws: WebSocketUpgrade,
///     State((tracker, shutdown)): State<(SessionTracker, CancellationToken)>,
/// ) -> Response {
///     tracked_upgrade(ws, &tracker, shutdown, |mut socket, _session| async move {
///         match socket.recv().await {
///             Some(Ok(_)) => EndReason::Completed,
///             _ => EndReason::Disconnected,
///         }
///     })
/// }
///
/// let state = (SessionTracker::new(), CancellationToken::new());
/// let app: Router = Router::new().route("/chat", get(chat)).with_state(state);
/// # let _ = app;
/// ```
pub fn tracked_upgrade<C, M, F, Fut>(
    ws: WebSocketUpgrade,
    tracker: &SessionTracker<C, M>,
    shutdown: CancellationToken,
    handler: F,
) -> Response
where
    C: Counter + 'static,
    M: Send + Sync + 'static,
    F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoEndReason,
{
    WebSocketSessions::new(tracker.clone(), shutdown).upgrade(ws, handler)
}

/// The upgraded socket's task: the handler raced with the shutdown signal.
async fn run<C, M, F, Fut>(
    socket: WebSocket,
    session: SocketGuard<C, M>,
    shutdown: CancellationToken,
    close_timeout: Duration,
    handler: F,
) where
    C: Counter,
    F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut,
    Fut: Future,
    Fut::Output: IntoEndReason,
{
    let (home, returned) = oneshot::channel();
    let socket = TrackedSocket {
        socket: Some(socket),
        home: Some(home),
    };
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {}
        output = handler(socket, session.0.handle()) => {
            session.0.end(output.into_end_reason());
            return;
        }
    }
    // Shutdown. The handler is dropped by now, and with it the TrackedSocket (unless the
    // handler moved it elsewhere), which sent the socket back. Release the count before the
    // goodbye, which may take up to the close timeout.
    session.0.end(EndReason::Shutdown);
    drop(session);
    let goodbye = async {
        if let Ok(socket) = returned.await {
            going_away(socket).await;
        }
    };
    let _ = tokio::time::timeout(close_timeout, goodbye).await;
}

/// Owns a socket's session in its task: a task dropped before its handler finished ends it
/// [`Cancelled`](EndReason::Cancelled) (the runtime shutting down), a handler that panicked
/// [`Failed`](EndReason::Failed).
struct SocketGuard<C: Counter, M>(Session<C, M>);

impl<C: Counter, M> Drop for SocketGuard<C, M> {
    fn drop(&mut self) {
        self.0.end(if std::thread::panicking() {
            EndReason::Failed
        } else {
            EndReason::Cancelled
        });
    }
}

/// Sends a 1001 close frame and reads until the peer's close reply (or the stream's end).
async fn going_away(mut socket: WebSocket) {
    let frame = CloseFrame {
        code: close_code::AWAY,
        reason: "server shutting down".into(),
    };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        return;
    }
    while let Some(Ok(message)) = socket.recv().await {
        if matches!(message, Message::Close(_)) {
            break;
        }
    }
}

/// The socket a [`WebSocketSessions`] handler gets: an axum [`WebSocket`] (through `Deref`,
/// and as a `Stream` and `Sink` of [`Message`]s, so `split` works) that goes back to the
/// session's task when the handler drops it, so that a shutdown can still send the close
/// frame.
///
/// ```no_run
/// # async fn handler(mut socket: livecount_tower::TrackedSocket) {
/// use axum::extract::ws::Message;
/// socket.send(Message::Text("hello".into())).await.ok(); // WebSocket's own methods
/// let raw: axum::extract::ws::WebSocket = socket.into_inner(); // no close at shutdown then
/// # let _ = raw;
/// # }
/// ```
pub struct TrackedSocket {
    socket: Option<WebSocket>,
    home: Option<oneshot::Sender<WebSocket>>,
}

impl TrackedSocket {
    /// The axum socket itself; a shutdown then ends the session but cannot send it a close
    /// frame.
    pub fn into_inner(mut self) -> WebSocket {
        self.socket
            .take()
            .expect("a TrackedSocket holds its socket until dropped")
    }

    fn socket(self: Pin<&mut Self>) -> Pin<&mut WebSocket> {
        Pin::new(self.get_mut().socket.as_mut().expect("held until dropped"))
    }
}

impl Deref for TrackedSocket {
    type Target = WebSocket;

    fn deref(&self) -> &WebSocket {
        self.socket.as_ref().expect("held until dropped")
    }
}

impl DerefMut for TrackedSocket {
    fn deref_mut(&mut self) -> &mut WebSocket {
        self.socket.as_mut().expect("held until dropped")
    }
}

impl Drop for TrackedSocket {
    fn drop(&mut self) {
        if let (Some(socket), Some(home)) = (self.socket.take(), self.home.take()) {
            let _ = home.send(socket); // the task is gone if the handler finished: then drop it
        }
    }
}

impl Stream for TrackedSocket {
    type Item = Result<Message, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.socket().poll_next(cx)
    }
}

impl Sink<Message> for TrackedSocket {
    type Error = axum::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.socket().poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.socket().start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.socket().poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.socket().poll_close(cx)
    }
}

impl fmt::Debug for TrackedSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedSocket")
            .field("held", &self.socket.is_some())
            .finish()
    }
}
