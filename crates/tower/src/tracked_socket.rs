//! [`TrackedSocket`]: the socket a [`WebSocketSessions`](crate::WebSocketSessions) handler
//! gets. It tells the session's slot what the limits need (a read waiting, a send waiting,
//! the client heard: the tracker's sweeper does the timing) and the session's task how the
//! transport ended ([`TransportSeen`]).

use std::fmt;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use axum::extract::ws::{Message, WebSocket};
use futures_core::Stream;
use futures_sink::Sink;
use livecount::Counter;
use livecount_session::{EndHandle, EndReason};
use std::future::Future;
use tokio::sync::oneshot;

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

/// How the transport ended, as the socket saw it: written by whichever task polls the
/// socket, read by the session's task once the handler is done.
#[derive(Debug, Default)]
pub(crate) struct TransportSeen(OnceLock<TransportEnd>);

impl TransportSeen {
    /// How the transport ended, if the socket has seen it.
    pub(crate) fn get(&self) -> Option<TransportEnd> {
        self.0.get().copied()
    }

    fn saw(&self, end: TransportEnd) {
        let _ = self.0.set(end); // the first thing seen is how it ended
    }
}

/// The socket a [`WebSocketSessions`](crate::WebSocketSessions) handler gets: an axum
/// [`WebSocket`] whose every read and send the session's limits see
/// ([`SocketLimits`](crate::SocketLimits)), usable with its own [`recv`](TrackedSocket::recv)
/// and [`send`](TrackedSocket::send), as a `Stream` and `Sink` of [`Message`]s (so `split`
/// works and both halves stay seen), and through `Deref` for the rest. It goes back to
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
/// socket.send(Message::Text("hello".into())).await.ok(); // held to the write timeout
/// let raw: axum::extract::ws::WebSocket = socket.into_inner(); // its reads and sends unseen from here on
/// # let _ = raw;
/// # }
/// ```
pub struct TrackedSocket {
    socket: Option<WebSocket>,
    home: Option<oneshot::Sender<WebSocket>>,
    transport: std::sync::Arc<TransportSeen>,
    /// The session's handle, without its types: what the limits need told, and the drain.
    session: Box<dyn SocketSession>,
    /// The message `recv` sends the client once the drain begins, if any (not sent yet).
    notice: Option<Message>,
}

impl TrackedSocket {
    pub(crate) fn new<C: Counter + 'static, M: Send + Sync + 'static>(
        socket: WebSocket,
        home: oneshot::Sender<WebSocket>,
        transport: std::sync::Arc<TransportSeen>,
        session: EndHandle<C, M>,
        notice: Option<Message>,
    ) -> Self {
        TrackedSocket {
            socket: Some(socket),
            home: Some(home),
            transport,
            session: Box::new(session),
            notice,
        }
    }

    /// Whether the server has begun to drain: this session goes on, but new ones are
    /// refused and the drain's deadline will end it ([`Shutdown`](EndReason::Shutdown),
    /// close 1012 "service restart") unless it ends first. Time to wrap up.
    pub fn is_draining(&self) -> bool {
        self.session.is_draining()
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
        self.session.started()
    }

    /// The next message from the client, as [`WebSocket::recv`]: `None` once the
    /// connection is over. The wait counts toward the idle timeout.
    ///
    /// With a drain notice set ([`WebSocketSessions::drain_notice`](crate::WebSocketSessions::drain_notice)),
    /// the first `recv` that is waiting when the drain begins (or called after it) sends the
    /// notice to the client, once, and goes on waiting.
    pub async fn recv(&mut self) -> Option<Result<Message, axum::Error>> {
        loop {
            if self.session.is_draining()
                && let Some(notice) = self.notice.take()
            {
                let _ = self.send(notice).await; // a lost client is seen by the read
            }
            let drain = (self.notice.is_some()).then(|| self.session.started());
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

    /// Notes how a send poll went: pending is a send waiting on the client (the write
    /// limit's clock runs), ready is the wait over.
    fn sending<T>(&self, poll: Poll<T>) -> Poll<T> {
        match poll {
            Poll::Pending => self.session.note_writing(),
            Poll::Ready(_) => self.session.note_written(),
        }
        poll
    }
}

/// A session's handle as the socket uses it, without the tracker's types.
trait SocketSession: Send + Sync {
    fn is_draining(&self) -> bool;
    fn started(&self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
    /// A message arrived: the reaper's activity, the first-message limit met.
    fn heard(&self);
    fn note_reading(&self);
    fn note_read(&self);
    fn note_writing(&self);
    fn note_written(&self);
}

impl<C: Counter + 'static, M: Send + Sync + 'static> SocketSession for EndHandle<C, M> {
    fn is_draining(&self) -> bool {
        EndHandle::is_draining(self)
    }

    fn started(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.drain_started())
    }

    fn heard(&self) {
        self.touch();
        self.note_heard();
    }

    fn note_reading(&self) {
        EndHandle::note_reading(self);
    }

    fn note_read(&self) {
        EndHandle::note_read(self);
    }

    fn note_writing(&self) {
        EndHandle::note_writing(self);
    }

    fn note_written(&self) {
        EndHandle::note_written(self);
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
        // A send or a read dropped while it waited is no longer waiting.
        self.session.note_written();
        self.session.note_read();
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
        let (session, transport) = (&this.session, &this.transport);
        match &polled {
            Poll::Pending => session.note_reading(),
            Poll::Ready(Some(Ok(message))) => {
                session.note_read();
                session.heard();
                if matches!(message, Message::Close(_)) {
                    transport.saw(TransportEnd::ClosedByPeer);
                }
            }
            Poll::Ready(Some(Err(error))) => {
                session.note_read();
                transport.saw(TransportEnd::of(error));
            }
            Poll::Ready(None) => {
                session.note_read();
                transport.saw(TransportEnd::Lost);
            }
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
            .field("transport", &self.transport.get())
            .finish_non_exhaustive()
    }
}
