//! [`IntoEndReason`]: what a WebSocket handler's output says about how its session ended;
//! [`SocketEnd`]: the same with last words, sent after the session has ended.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use livecount_session::EndReason;

/// What a WebSocket handler's output says about how its session ended (and, through
/// [`into_socket_end`](IntoEndReason::into_socket_end), what to say to the client after).
///
/// ```
/// use livecount_session::EndReason;
/// use livecount_tower::websocket::IntoEndReason;
///
/// assert_eq!(().into_end_reason(), EndReason::Completed);
/// assert_eq!(Err::<(), _>("bad frame").into_end_reason(), EndReason::Failed);
/// assert_eq!(EndReason::Disconnected.into_end_reason(), EndReason::Disconnected);
/// ```
pub trait IntoEndReason {
    /// The reason.
    fn into_end_reason(self) -> EndReason;

    /// The reason and the last words: none, unless the output is a [`SocketEnd`].
    fn into_socket_end(self) -> SocketEnd
    where
        Self: Sized,
    {
        SocketEnd::new(self.into_end_reason())
    }
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

/// A handler's ending with its last words: the session ends with `reason` *first* (its count
/// and its place under the cap released), and then the session's task sends the messages
/// and the close frame, bounded by the close timeout, so a client that does not read holds
/// neither. A handler that sent its last words itself would hold both until they were out.
///
/// ```
/// use axum::extract::ws::Message;
/// use livecount_session::EndReason;
/// use livecount_tower::websocket::{IntoEndReason, SocketEnd};
///
/// let end = SocketEnd::new(EndReason::Failed)
///     .say(Message::Text(r#"{"error":"unknown frame"}"#.into()))
///     .close(1007, "invalid frame");
/// assert_eq!(end.reason(), EndReason::Failed);
/// assert_eq!(end.into_end_reason(), EndReason::Failed);
/// ```
#[derive(Debug, Clone)]
pub struct SocketEnd {
    reason: EndReason,
    goodbye: Goodbye,
}

impl SocketEnd {
    /// Ends with `reason`, saying nothing more.
    pub fn new(reason: EndReason) -> Self {
        SocketEnd {
            reason,
            goodbye: Goodbye::none(),
        }
    }

    /// Sends `message` after the end (after the ones added before it, before the close).
    pub fn say(mut self, message: Message) -> Self {
        self.goodbye.messages.push(message);
        self
    }

    /// Closes with `code` and `reason` after the messages, then reads until the client's
    /// close reply (all within the close timeout).
    pub fn close(mut self, code: u16, reason: &str) -> Self {
        self.goodbye.close = Some(CloseFrame {
            code,
            reason: reason.into(),
        });
        self
    }

    /// The reason the session ends with.
    pub fn reason(&self) -> EndReason {
        self.reason
    }

    pub(crate) fn into_parts(self) -> (EndReason, Goodbye) {
        (self.reason, self.goodbye)
    }
}

impl IntoEndReason for SocketEnd {
    fn into_end_reason(self) -> EndReason {
        self.reason
    }

    fn into_socket_end(self) -> SocketEnd {
        self
    }
}

/// What the session's task sends after the end: messages, then a close frame; or, for a
/// client that closed first, just the flush of the close reply tungstenite queued.
#[derive(Debug, Clone, Default)]
pub(crate) struct Goodbye {
    messages: Vec<Message>,
    close: Option<CloseFrame>,
    flush: bool,
}

impl Goodbye {
    pub(crate) fn none() -> Self {
        Goodbye::default()
    }

    pub(crate) fn close((code, reason): (u16, &'static str)) -> Self {
        Goodbye {
            close: Some(CloseFrame {
                code,
                reason: reason.into(),
            }),
            ..Goodbye::default()
        }
    }

    /// Completes a close handshake the client began: the reply goes out before the
    /// connection is dropped (unless the handler's own last words say more).
    pub(crate) fn or_flush(self) -> Self {
        Goodbye {
            flush: true,
            ..self
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.close.is_none() && !self.flush
    }

    /// Sends the messages and the close frame, then reads until the peer's close reply (or
    /// the stream's end). The caller bounds it.
    pub(crate) async fn say(self, mut socket: WebSocket) {
        for message in self.messages {
            if socket.send(message).await.is_err() {
                return;
            }
        }
        let Some(close) = self.close else {
            if self.flush {
                // Sends the close reply tungstenite queued (or a close, if none was) and
                // flushes it.
                let close = |cx: &mut std::task::Context<'_>| {
                    futures_sink::Sink::<Message>::poll_close(std::pin::Pin::new(&mut socket), cx)
                };
                let _ = std::future::poll_fn(close).await;
            }
            return;
        };
        if socket.send(Message::Close(Some(close))).await.is_err() {
            return;
        }
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    }
}
