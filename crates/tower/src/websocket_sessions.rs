//! axum WebSocket sessions: [`tracked_upgrade`] / [`WebSocketSessions`] admit a socket (or
//! refuse it before the upgrade), count it from the upgrade response to its end, hold it to
//! its [`SocketLimits`], let it finish during a drain and end it at the drain's deadline,
//! which axum does not do for upgraded connections; [`TrackedSocket`] is what the handler
//! gets.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use livecount::Counter;
use livecount_session::{EndCause, EndHandle, EndReason, Session, SessionTracker, StartError};
use tokio::sync::oneshot;

use crate::SocketLimits;
use crate::socket_end::Goodbye;
use crate::socket_end::IntoEndReason;
use crate::tracked_socket::{TrackedSocket, TransportSeen};

/// Counts axum WebSocket sessions on a tracker, holds each to its [`SocketLimits`], and lets
/// them finish when the server drains.
///
/// **Draining.** The tracker's drain is the signal: once it
/// [drains](SessionTracker::begin_drain),
/// every new upgrade is refused with `503` and `Retry-After`, counted refused, while the
/// sockets already open *go on*: each handler can see it
/// ([`TrackedSocket::drain_started`], [`TrackedSocket::is_draining`]) and wrap up. At the
/// drain's deadline, `end_all(EndReason::Shutdown)` on the tracker (what
/// [`drain`](crate::drain()) does) ends the sessions still open, each with a 1012 "service
/// restart" close that tells the client to reconnect, elsewhere.
///
/// [`upgrade`](WebSocketSessions::upgrade) admits the session *before* the `101 Switching
/// Protocols` response leaves, so no load report ever shows a slot as free that an accepted
/// socket is about to take, and moves the guard into axum's `on_upgrade` task. A client it
/// cannot admit gets `503 Service Unavailable` with `Retry-After` and is never upgraded:
/// the tracker is at its cap ([`SessionTracker::with_max_sessions`], exact under any burst)
/// or the tracker drains; the refusal is
/// counted in the snapshot's `refused`, never as a session. Then, exactly once, whichever
/// comes first:
///
/// | what happened | reason | close frame |
/// |---|---|---|
/// | the handler returned | what its output says ([`IntoEndReason`]), unless the transport said otherwise (below) | its [`SocketEnd`](crate::websocket::SocketEnd)'s last words, if any |
/// | the connection was lost without a close frame (reset, EOF) | [`Disconnected`](EndReason::Disconnected) | — |
/// | a message above [`max_message_bytes`](SocketLimits::max_message_bytes) | [`Failed`](EndReason::Failed) | 1009 |
/// | an RFC 6455 violation: bad framing / invalid UTF-8 | `Failed` | 1002 / 1007 |
/// | [`max_session`](SocketLimits::max_session) passed | [`TimedOut`](EndReason::TimedOut) | 1000 "max session length" |
/// | the client sent nothing for [`idle_timeout`](SocketLimits::idle_timeout) while the handler waited for it | `Disconnected` | 1008 "idle timeout" |
/// | no message read for [`first_message_timeout`](SocketLimits::first_message_timeout) after the upgrade | `Disconnected` | 1008 "first message timeout" |
/// | a send waited [`write_timeout`](SocketLimits::write_timeout) (the client stopped reading) | `Disconnected` | — |
/// | the drain's deadline: `end_all(Shutdown)` | [`Shutdown`](EndReason::Shutdown) | 1012 "service restart" |
/// | something else ended the session (the reaper, an [`EndHandle`]) | that reason | 1012 for `Shutdown`, else 1000 |
/// | the upgrade failed after the response | `Failed`, the handler never runs | — |
/// | the handler panicked / its task was dropped unfinished | `Failed` / [`Cancelled`](EndReason::Cancelled) | — |
///
/// Every ending but the handler's own drops the handler at once; every ending releases the
/// count and the place under the cap *before* the last words and the close frame are sent,
/// which is bounded by the close timeout: a client that does not read holds neither.
///
/// A clone shares the tracker, the token and the limits.
///
/// ```
/// use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
/// use livecount_session::SessionTracker;
/// use livecount_tower::WebSocketSessions;
/// use std::time::Duration;
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
/// let tracker = SessionTracker::with_max_sessions(1000); // the 1001st is refused, 503
/// let sessions = WebSocketSessions::new(tracker).idle_timeout(Duration::from_secs(30));
/// let app: Router = Router::new().route("/ws", get(echo)).with_state(sessions);
/// # let _ = app;
/// ```
pub struct WebSocketSessions<C: Counter = livecount::PerThread, M = ()> {
    tracker: SessionTracker<C, M>,
    close_timeout: Duration,
    limits: SocketLimits,
    notice: Option<Message>,
}

impl<C: Counter + 'static, M: Send + Sync + 'static> WebSocketSessions<C, M> {
    /// Counts sessions on `tracker` (admitting up to its cap, if it has one) under the
    /// default [`SocketLimits`], refusing new ones once the tracker drains (open sockets go
    /// on until they end or the drain's deadline ends them).
    pub fn new(tracker: SessionTracker<C, M>) -> Self {
        WebSocketSessions {
            tracker,
            close_timeout: SocketLimits::DEFAULT_CLOSE_TIMEOUT,
            limits: SocketLimits::default(),
            notice: None,
        }
    }

    /// Tells every open socket's client, once, when the drain begins: `recv` sends `notice`
    /// as it waits (see [`TrackedSocket::recv`]), so a handler that only reads and answers
    /// needs no drain code of its own to tell its client to wrap up and reconnect elsewhere.
    ///
    /// ```
    /// use axum::extract::ws::Message;
    /// # use livecount_tower::WebSocketSessions;
    /// let sessions: WebSocketSessions = WebSocketSessions::new(Default::default())
    ///     .drain_notice(Message::text("draining"));
    /// # let _ = sessions;
    /// ```
    pub fn drain_notice(mut self, notice: Message) -> Self {
        self.notice = Some(notice);
        self
    }

    /// The limits every socket is held to.
    pub fn limits(&self) -> &SocketLimits {
        &self.limits
    }

    /// Ends a session this long after its upgrade, [`TimedOut`](EndReason::TimedOut) with
    /// close 1000 (`None`: no limit; default [`StreamLimits::DEFAULT_MAX_SESSION`](crate::StreamLimits::DEFAULT_MAX_SESSION)).
    pub fn max_session(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.max_session = limit.into();
        self
    }

    /// Ends a session whose client sends nothing this long while the handler waits to read,
    /// [`Disconnected`](EndReason::Disconnected) with close 1008 (`None`: never; default
    /// [`SocketLimits::DEFAULT_IDLE_TIMEOUT`]).
    pub fn idle_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.idle_timeout = limit.into();
        self
    }

    /// Ends a session whose client has sent no message this long after the upgrade (none
    /// read by the handler), [`Disconnected`](EndReason::Disconnected) with close 1008
    /// "first message timeout" (`None`: never, the default here; 10 s in a `Backend`:
    /// [`StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT`](crate::StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT)).
    pub fn first_message_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.first_message_timeout = limit.into();
        self
    }

    /// Ends a session whose send waits this long for the socket to take its frame,
    /// `Disconnected`, no close frame (`None`: never; default
    /// [`StreamLimits::DEFAULT_WRITE_TIMEOUT`](crate::StreamLimits::DEFAULT_WRITE_TIMEOUT)).
    pub fn write_timeout(mut self, limit: impl Into<Option<Duration>>) -> Self {
        self.limits.write_timeout = limit.into();
        self
    }

    /// Refuses client messages and frames above `bytes` (at least 1): the session ends
    /// [`Failed`](EndReason::Failed) with close 1009 (default
    /// [`SocketLimits::DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_message_bytes = bytes.max(1);
        self
    }

    /// The `Retry-After` of a refused upgrade's 503 (default
    /// [`StreamLimits::DEFAULT_RETRY_AFTER`](crate::StreamLimits::DEFAULT_RETRY_AFTER)).
    pub fn retry_after(mut self, hint: Duration) -> Self {
        self.limits.retry_after = hint;
        self
    }

    /// Bounds the close handshake after an ending decided here (shutdown, a limit, a
    /// violation) by `timeout` (default [`SocketLimits::DEFAULT_CLOSE_TIMEOUT`]).
    ///
    /// ```
    /// # use livecount_tower::WebSocketSessions;
    /// # use std::time::Duration;
    /// let sessions: WebSocketSessions = WebSocketSessions::new(Default::default())
    ///     .close_timeout(Duration::from_millis(250));
    /// # let _ = sessions;
    /// ```
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// The tracker sessions are counted on.
    pub fn tracker(&self) -> &SessionTracker<C, M> {
        &self.tracker
    }

    /// Answers `ws` with the upgrade response (or a 503 refusal) and runs `handler` on the
    /// socket as a session, as described on [`WebSocketSessions`]. The handler gets the socket
    /// and an [`EndHandle`] (to end the session with a reason of its own, or `touch` it).
    pub fn upgrade<F, Fut>(&self, ws: WebSocketUpgrade, handler: F) -> Response
    where
        F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoEndReason,
    {
        let session = match self.tracker.try_start() {
            Ok(session) => SocketGuard(session),
            Err(StartError::AtCapacity { max }) => {
                return self.refusal(format!("at capacity: {max} sessions\n"));
            }
            Err(e) => return self.refusal(format!("{e}\n")),
        };
        session.0.trace_transport("websocket");
        let on_failure = session.0.handle();
        let task = SocketTask {
            close_timeout: self.close_timeout,
            limits: self.limits,
            notice: self.notice.clone(),
        };
        let bytes = self.limits.max_message_bytes;
        ws.max_message_size(bytes)
            .max_frame_size(bytes)
            .on_failed_upgrade(move |_| {
                on_failure.end(EndReason::Failed);
            })
            .on_upgrade(move |socket| task.run(socket, session, handler))
    }

    /// `503 Service Unavailable` with `Retry-After` and `why`.
    fn refusal(&self, why: String) -> Response {
        let retry = self.limits.retry_after_secs().to_string();
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, retry)],
            why,
        )
            .into_response()
    }
}

impl<C: Counter, M> Clone for WebSocketSessions<C, M> {
    fn clone(&self) -> Self {
        WebSocketSessions {
            tracker: self.tracker.clone(),
            close_timeout: self.close_timeout,
            limits: self.limits,
            notice: self.notice.clone(),
        }
    }
}

impl<C: Counter, M> fmt::Debug for WebSocketSessions<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketSessions")
            .field("tracker", &self.tracker)
            .field("close_timeout", &self.close_timeout)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// [`WebSocketSessions::upgrade`] in one call, with the default limits and close timeout.
///
/// ```
/// use axum::{Router, extract::{State, WebSocketUpgrade}, response::Response, routing::get};
/// use livecount_session::{EndReason, SessionTracker};
/// use livecount_tower::websocket::tracked_upgrade;
///
/// async fn chat(
///     ws: WebSocketUpgrade,
///     State(tracker): State<SessionTracker>,
/// ) -> Response {
///     tracked_upgrade(ws, &tracker, |mut socket, _session| async move {
///         match socket.recv().await {
///             Some(Ok(_)) => EndReason::Completed,
///             _ => EndReason::Disconnected,
///         }
///     })
/// }
///
/// let state = SessionTracker::new();
/// let app: Router = Router::new().route("/chat", get(chat)).with_state(state);
/// # let _ = app;
/// ```
pub fn tracked_upgrade<C, M, F, Fut>(
    ws: WebSocketUpgrade,
    tracker: &SessionTracker<C, M>,
    handler: F,
) -> Response
where
    C: Counter + 'static,
    M: Send + Sync + 'static,
    F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoEndReason,
{
    WebSocketSessions::new(tracker.clone()).upgrade(ws, handler)
}

/// The close frame of a session ended `Shutdown` (the drain's deadline): 1012 "service
/// restart" (IANA WebSocket close code registry), so a client reconnects, elsewhere, where
/// 1001 "going away" would read as "this endpoint is gone".
const SHUTDOWN_CLOSE: (u16, &str) = (1012, "service restart");

/// What an upgraded socket's task needs besides the socket, the session and the handler.
struct SocketTask {
    close_timeout: Duration,
    limits: SocketLimits,
    notice: Option<Message>,
}

impl SocketTask {
    /// The upgraded socket's task: the handler raced with the session's limits and any end
    /// from elsewhere (the drain's deadline among them).
    async fn run<C, M, F, Fut>(self, socket: WebSocket, session: SocketGuard<C, M>, handler: F)
    where
        C: Counter + 'static,
        M: Send + Sync + 'static,
        F: FnOnce(TrackedSocket, EndHandle<C, M>) -> Fut,
        Fut: Future,
        Fut::Output: IntoEndReason,
    {
        let (home, returned) = oneshot::channel();
        let transport = Arc::new(TransportSeen::default());
        let handle = session.0.handle();
        // The limits are the tracker's sweeper's: no timer here.
        session.0.hold_to(self.limits.as_session_limits());
        let notice = self.notice.clone();
        let socket =
            TrackedSocket::new(socket, home, Arc::clone(&transport), handle.clone(), notice);
        // Boxed so that it can be dropped the moment another ending wins.
        let mut handler = Box::pin(handler(socket, handle.clone()));
        let (reason, goodbye) = {
            tokio::select! {
                biased;
                reason = handle.ended() => (reason, goodbye_for(handle.ended_by(), reason)),
                output = &mut handler => {
                    // The transport's word wins: a handler that saw its stream end says
                    // nothing about why.
                    match transport.get() {
                        Some(end) => match end.ending() {
                            Some((reason, close)) => (reason, close.map_or_else(Goodbye::none, Goodbye::close)),
                            // The client closed: the handler's word, and the close reply.
                            None => {
                                let (reason, goodbye) = output.into_socket_end().into_parts();
                                (reason, goodbye.or_flush())
                            }
                        },
                        None => output.into_socket_end().into_parts(),
                    }
                }
            }
        };
        // The count and the place under the cap go first, before the goodbye, which may wait
        // on a client that does not read for up to the close timeout.
        session.0.end(reason);
        drop(session);
        // The handler (and the socket, if it still held it) goes now: the socket comes home.
        drop(handler);
        if goodbye.is_empty() {
            return;
        }
        let goodbye = async {
            if let Ok(socket) = returned.await {
                goodbye.say(socket).await;
            }
        };
        let _ = tokio::time::timeout(self.close_timeout, goodbye).await;
    }
}

/// What to send the client after its session ended while the handler ran: the close frame
/// for the limit that ended it (none for a write stall: the client reads nothing), else for
/// an end from elsewhere.
fn goodbye_for(limit: Option<EndCause>, reason: EndReason) -> Goodbye {
    match limit {
        Some(EndCause::MaxSession) => Goodbye::close((1000, "max session length")),
        Some(EndCause::Idle) => Goodbye::close((1008, "idle timeout")),
        Some(EndCause::FirstFrame) => Goodbye::close((1008, "first message timeout")),
        Some(EndCause::Stall) => Goodbye::none(),
        _ => Goodbye::close(close_for_elsewhere(reason)),
    }
}

/// The close frame for an end from elsewhere: 1012 for a shutdown (`end_all` at the end of a
/// drain), 1000 otherwise (the session is over; its reason is the server's business).
fn close_for_elsewhere(reason: EndReason) -> (u16, &'static str) {
    match reason {
        EndReason::Shutdown => SHUTDOWN_CLOSE,
        _ => (1000, "session ended"),
    }
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
