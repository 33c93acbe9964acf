//! [`TrackedSocket`]: the socket a [`WebSocketSessions`](crate::WebSocketSessions) handler
//! gets, and [`SocketWatch`]: what it tells the session's task about the transport (how
//! long the client has been silent, how long a send has waited, how the connection ended).

use std::fmt;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use futures_core::Stream;
use futures_sink::Sink;
use livecount::Counter;
use livecount_session::{EndHandle, EndReason};
use std::future::Future;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How the transport ended, as the socket saw it while the handler read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransportEnd {
    /// The client sent a close frame.
    ClosedByPeer,
    /// The connection ended without a close frame (reset, EOF, an I/O error).
    Lost,
    /// A message (or frame) above the size limit: close 1009.
    TooLarge,
    /// The client broke RFC 6455: 1002 for framing, 1007 for invalid UTF-8.
    Violation {
        /// The close code.
        code: u16,
        /// The close reason.
        reason: &'static str,
    },
}

impl TransportEnd {
    /// The session's reason and the close frame to send, if the transport decides them
    /// (a clean close by the peer leaves both to the handler).
    pub(crate) fn ending(self) -> Option<(EndReason, Option<(u16, &'static str)>)> {
        match self {
            TransportEnd::ClosedByPeer => None,
            TransportEnd::Lost => Some((EndReason::Disconnected, None)),
            TransportEnd::TooLarge => Some((EndReason::Failed, Some((1009, "message too big")))),
            TransportEnd::Violation { code, reason } => {
                Some((EndReason::Failed, Some((code, reason))))
            }
        }
    }

    /// Classifies a read error by its type (axum wraps tungstenite's): a message above the
    /// limit is 1009, invalid UTF-8 1007, any other framing violation 1002 (RFC 6455
    /// §7.4.1); a reset and I/O errors are a lost connection. tungstenite fails only the
    /// read on a violation, so the close frame can still be sent. A control frame that
    /// declares more than the frame limit is refused before its opcode is judged: 1009.
    fn of(error: &axum::Error) -> Self {
        use tungstenite::Error as Ws;
        use tungstenite::error::ProtocolError;
        let inner = std::error::Error::source(error).and_then(|e| e.downcast_ref::<Ws>());
        match inner {
            Some(Ws::Capacity(_)) => TransportEnd::TooLarge,
            Some(Ws::Utf8(_)) => TransportEnd::Violation {
                code: 1007,
                reason: "invalid UTF-8",
            },
            Some(Ws::Protocol(ProtocolError::ResetWithoutClosingHandshake)) | None => {
                TransportEnd::Lost
            }
            Some(Ws::Protocol(_)) => TransportEnd::Violation {
                code: 1002,
                reason: "protocol error",
            },
            Some(_) => TransportEnd::Lost,
        }
    }
}

/// What a socket tells its session's task, shared between the two: the moments its waits
/// began, as nanoseconds since `base` plus one (0 = not waiting), and how the transport
/// ended. Written by whichever task polls the socket, read by the session's watchdog; the
/// watchdog looks again every quarter limit, so a reading one poll late changes nothing.
#[derive(Debug)]
pub(crate) struct SocketWatch {
    base: Instant,
    /// Since when the handler has waited in `recv` with nothing read (0: not waiting).
    reading_since: AtomicU64,
    /// Since when a send has waited for the socket to take its frame (0: none waits).
    sending_since: AtomicU64,
    /// Whether the handler has read anything from the client.
    heard: AtomicBool,
    transport: OnceLock<TransportEnd>,
}

impl SocketWatch {
    pub(crate) fn new() -> Self {
        SocketWatch {
            base: Instant::now(),
            reading_since: AtomicU64::new(0),
            sending_since: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            transport: OnceLock::new(),
        }
    }

    fn stamp(&self) -> u64 {
        let nanos = Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    /// Marks a wait as going on (keeping its start) or over.
    fn mark(&self, since: &AtomicU64, waiting: bool) {
        // Relaxed: a time stamp the watchdog reads on its next tick; nothing is published
        // with it.
        if !waiting {
            since.store(0, Ordering::Relaxed);
        } else if since.load(Ordering::Relaxed) == 0 {
            since.store(self.stamp(), Ordering::Relaxed);
        }
    }

    /// How long the wait in `since` has lasted, if one goes on.
    fn waited(&self, since: &AtomicU64) -> Option<Duration> {
        // Relaxed: see `mark`.
        let since = since.load(Ordering::Relaxed);
        (since != 0).then(|| Duration::from_nanos(self.stamp().saturating_sub(since)))
    }

    /// How long the handler has waited in `recv` for a client that sends nothing.
    pub(crate) fn silent_for(&self) -> Option<Duration> {
        self.waited(&self.reading_since)
    }

    /// How long the socket has been open without a message read from the client, if none
    /// has been.
    pub(crate) fn unheard_for(&self) -> Option<Duration> {
        // Relaxed: see `mark`.
        (!self.heard.load(Ordering::Relaxed)).then(|| Duration::from_nanos(self.stamp()))
    }

    /// How long the oldest send still waiting has waited.
    pub(crate) fn stalled_for(&self) -> Option<Duration> {
        self.waited(&self.sending_since)
    }

    /// How the transport ended, if the socket has seen it.
    pub(crate) fn transport(&self) -> Option<TransportEnd> {
        self.transport.get().copied()
    }

    fn saw(&self, end: TransportEnd) {
        let _ = self.transport.set(end); // the first thing seen is how it ended
    }
}

/// The socket a [`WebSocketSessions`](crate::WebSocketSessions) handler gets: an axum
/// [`WebSocket`] whose every read and send the session's limits watch
/// ([`SocketLimits`](crate::SocketLimits)), usable with its own [`recv`](TrackedSocket::recv)
/// and [`send`](TrackedSocket::send), as a `Stream` and `Sink` of [`Message`]s (so `split`
/// works and both halves stay watched), and through `Deref` for the rest. It goes back to
/// the session's task when the handler drops it, so that a shutdown or a limit can still
/// send the close frame.
///
/// What the socket sees decides the session's reason when the transport, not the handler,
/// ended it: a connection lost without a close frame is
/// [`Disconnected`](EndReason::Disconnected) even if the handler then returns `()`, and a
/// message above the limit or a protocol violation is [`Failed`](EndReason::Failed) with
/// close 1009, 1002 or 1007.
///
/// ```no_run
/// # async fn handler(mut socket: livecount_tower::TrackedSocket) {
/// use axum::extract::ws::Message;
/// socket.send(Message::Text("hello".into())).await.ok(); // watched by the write timeout
/// let raw: axum::extract::ws::WebSocket = socket.into_inner(); // unwatched from here on
/// # let _ = raw;
/// # }
/// ```
pub struct TrackedSocket {
    socket: Option<WebSocket>,
    home: Option<oneshot::Sender<WebSocket>>,
    watch: std::sync::Arc<SocketWatch>,
    /// Touched on every message read, so the ghost reaper sees a live client.
    activity: Option<Box<dyn Fn() + Send + Sync>>,
    /// The tracker's drain, through the session's handle.
    drain: Box<dyn Drain>,
    /// The message `recv` sends the client once the drain begins, if any (not sent yet).
    notice: Option<Message>,
}

impl TrackedSocket {
    pub(crate) fn new<C: Counter + 'static, M: Send + Sync + 'static>(
        socket: WebSocket,
        home: oneshot::Sender<WebSocket>,
        watch: std::sync::Arc<SocketWatch>,
        session: EndHandle<C, M>,
        notice: Option<Message>,
    ) -> Self {
        TrackedSocket {
            socket: Some(socket),
            home: Some(home),
            watch,
            drain: Box::new(session.clone()),
            activity: Some(Box::new(move || session.touch())),
            notice,
        }
    }

    /// Whether the server has begun to drain: this session goes on, but new ones are
    /// refused and the drain's deadline will end it ([`Shutdown`](EndReason::Shutdown),
    /// close 1012 "service restart") unless it ends first. Time to wrap up.
    pub fn is_draining(&self) -> bool {
        self.drain.is_draining()
    }

    /// Resolves when the server begins to drain (at once if it has): a handler selects on
    /// it to finish its sentence and say goodbye before the drain's deadline.
    ///
    /// ```no_run
    /// # async fn handler(mut socket: livecount_tower::TrackedSocket) {
    /// use axum::extract::ws::Message;
    /// let wrap_up = socket.drain_started();
    /// tokio::pin!(wrap_up);
    /// loop {
    ///     tokio::select! {
    ///         message = socket.recv() => match message {
    ///             Some(Ok(message)) => { let _ = socket.send(message).await; }
    ///             _ => break,
    ///         },
    ///         () = &mut wrap_up => {
    ///             let _ = socket.send(Message::Text("goodbye: the server restarts".into())).await;
    ///             break;
    ///         }
    ///     }
    /// }
    /// # }
    /// ```
    pub fn drain_started(&self) -> impl Future<Output = ()> + Send + 'static {
        self.drain.started()
    }

    /// The next message from the client, as [`WebSocket::recv`]: `None` once the
    /// connection is over. The wait counts toward the idle timeout.
    ///
    /// With a drain notice set ([`WebSocketSessions::drain_notice`](crate::WebSocketSessions::drain_notice)),
    /// the first `recv` that is waiting when the drain begins (or called after it) sends the
    /// notice to the client, once, and goes on waiting.
    pub async fn recv(&mut self) -> Option<Result<Message, axum::Error>> {
        loop {
            if self.drain.is_draining()
                && let Some(notice) = self.notice.take()
            {
                let _ = self.send(notice).await; // a lost client is seen by the read
            }
            let drain = (self.notice.is_some()).then(|| self.drain.started());
            let next = std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx));
            match drain {
                None => return next.await,
                Some(drain) => tokio::select! {
                    biased;
                    message = next => return message,
                    // Cancel-safe: the socket's stream loses nothing when its poll is dropped.
                    () = drain => {}
                },
            }
        }
    }

    /// Sends `message` and flushes it, as [`WebSocket::send`]; a send the socket does not
    /// take within the write timeout ends the session.
    pub async fn send(&mut self, message: Message) -> Result<(), axum::Error> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_ready(cx)).await?;
        Pin::new(&mut *self).start_send(message)?;
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_flush(cx)).await
    }

    /// The axum socket itself; the limits and a shutdown still end the session, but no
    /// longer see its reads and sends, and cannot send it a close frame.
    pub fn into_inner(mut self) -> WebSocket {
        self.socket
            .take()
            .expect("a TrackedSocket holds its socket until dropped")
    }

    fn socket(&mut self) -> Pin<&mut WebSocket> {
        Pin::new(self.socket.as_mut().expect("held until dropped"))
    }

    /// Notes how a send poll went: pending is a send waiting on the client.
    fn sending<T>(&self, poll: Poll<T>) -> Poll<T> {
        self.watch
            .mark(&self.watch.sending_since, poll.is_pending());
        poll
    }
}

/// A session's view of its tracker's drain, without the tracker's types.
trait Drain: Send + Sync {
    fn is_draining(&self) -> bool;
    fn started(&self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl<C: Counter + 'static, M: Send + Sync + 'static> Drain for EndHandle<C, M> {
    fn is_draining(&self) -> bool {
        EndHandle::is_draining(self)
    }

    fn started(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.drain_started())
    }
}

impl Deref for TrackedSocket {
    type Target = WebSocket;

    fn deref(&self) -> &WebSocket {
        self.socket.as_ref().expect("held until dropped")
    }
}

impl Drop for TrackedSocket {
    fn drop(&mut self) {
        // A send dropped while it waited is no longer waiting.
        self.watch.mark(&self.watch.sending_since, false);
        self.watch.mark(&self.watch.reading_since, false);
        if let (Some(socket), Some(home)) = (self.socket.take(), self.home.take()) {
            let _ = home.send(socket); // the task is gone if the handler finished: then drop it
        }
    }
}

impl Stream for TrackedSocket {
    type Item = Result<Message, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let polled = this.socket().poll_next(cx);
        let watch = &this.watch;
        watch.mark(&watch.reading_since, polled.is_pending());
        match &polled {
            Poll::Ready(Some(Ok(message))) => {
                if !watch.heard.load(Ordering::Relaxed) {
                    // Relaxed: see `SocketWatch::mark`.
                    watch.heard.store(true, Ordering::Relaxed);
                }
                if matches!(message, Message::Close(_)) {
                    watch.saw(TransportEnd::ClosedByPeer);
                }
                if let Some(touch) = &this.activity {
                    touch();
                }
            }
            Poll::Ready(Some(Err(error))) => watch.saw(TransportEnd::of(error)),
            Poll::Ready(None) => watch.saw(TransportEnd::Lost),
            Poll::Pending => {}
        }
        polled
    }
}

impl Sink<Message> for TrackedSocket {
    type Error = axum::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        let polled = this.socket().poll_ready(cx);
        this.sending(polled)
    }

    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.get_mut().socket().start_send(item)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        let polled = this.socket().poll_flush(cx);
        this.sending(polled)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        let polled = this.socket().poll_close(cx);
        this.sending(polled)
    }
}

impl fmt::Debug for TrackedSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedSocket")
            .field("held", &self.socket.is_some())
            .field("transport", &self.watch.transport())
            .finish_non_exhaustive()
    }
}
