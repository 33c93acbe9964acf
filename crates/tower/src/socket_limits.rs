//! [`SocketLimits`]: the bounds every [`WebSocketSessions`](crate::WebSocketSessions) socket
//! runs under, with defaults meant for a service on the open internet.

use std::time::Duration;

use crate::StreamLimits;

/// The bounds a [`WebSocketSessions`](crate::WebSocketSessions) socket runs under. Each ends
/// the session exactly once, with its own reason and close code; `None` turns a timeout off.
/// The durations and the refusal hint share their defaults (and their reasons) with
/// [`StreamLimits`](crate::StreamLimits), a `SessionLayer`'s.
///
/// | limit | default | ends the session | close |
/// |---|---|---|---|
/// | [`max_session`](SocketLimits::max_session) | 1 h ([`StreamLimits::DEFAULT_MAX_SESSION`]) | [`TimedOut`](livecount_session::EndReason::TimedOut) | 1000 "max session length" |
/// | [`idle_timeout`](SocketLimits::idle_timeout) | 60 s ([`DEFAULT_IDLE_TIMEOUT`](Self::DEFAULT_IDLE_TIMEOUT)) | [`Disconnected`](livecount_session::EndReason::Disconnected) | 1008 "idle timeout" |
/// | [`first_message_timeout`](SocketLimits::first_message_timeout) | off (10 s in a `Backend`: [`StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT`](crate::StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT)) | `Disconnected` | 1008 "first message timeout" |
/// | [`write_timeout`](SocketLimits::write_timeout) | 30 s ([`StreamLimits::DEFAULT_WRITE_TIMEOUT`]) | `Disconnected` | none (the peer reads nothing) |
/// | [`max_message_bytes`](SocketLimits::max_message_bytes) | 64 KiB ([`DEFAULT_MAX_MESSAGE_BYTES`](Self::DEFAULT_MAX_MESSAGE_BYTES)) | [`Failed`](livecount_session::EndReason::Failed) | 1009 "message too big" |
///
/// The first-message timeout counts from the upgrade until the handler reads the client's
/// first message (a ping counts): a client that opens a socket and never speaks gives its
/// place under the cap back within seconds, not at the idle timeout.
///
/// The idle timeout counts only time the handler spends waiting in
/// [`recv`](crate::TrackedSocket::recv) with nothing read: every message read resets it,
/// pings and pongs included, and a handler busy elsewhere is not the client's silence. The
/// write timeout counts how long one send (or flush) has waited for the socket to take its
/// frame.
///
/// No timer runs per socket: the limits are the session's, in its tracker's session table
/// ([`livecount_session::Limits`]), and the tracker's one sweeper ends a socket at a limit
/// or up to two sweeper periods later (a quarter of the shortest limit on the tracker,
/// between 10 ms and 1 s), never earlier.
///
/// Set on [`WebSocketSessions`](crate::WebSocketSessions), as a `SessionLayer`'s are set on
/// the layer:
///
/// ```
/// use livecount_session::SessionTracker;
/// use livecount_tower::WebSocketSessions;
/// use std::time::Duration;
///
/// let sessions: WebSocketSessions = WebSocketSessions::new(SessionTracker::new())
///     .max_session(Duration::from_secs(3 * 3600))
///     .idle_timeout(None) // the clients cannot send pings
///     .max_message_bytes(16 * 1024);
/// let limits = sessions.limits();
/// assert_eq!(limits.write_timeout(), Some(Duration::from_secs(30))); // the default
/// assert_eq!((limits.idle_timeout(), limits.max_message_bytes()), (None, 16 * 1024));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketLimits {
    pub(crate) max_session: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) first_message_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) max_message_bytes: usize,
    pub(crate) retry_after: Duration,
}

impl Default for SocketLimits {
    fn default() -> Self {
        SocketLimits {
            max_session: Some(StreamLimits::DEFAULT_MAX_SESSION),
            idle_timeout: Some(Self::DEFAULT_IDLE_TIMEOUT),
            first_message_timeout: None,
            write_timeout: Some(StreamLimits::DEFAULT_WRITE_TIMEOUT),
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            retry_after: StreamLimits::DEFAULT_RETRY_AFTER,
        }
    }
}

impl SocketLimits {
    /// The default [`idle_timeout`](Self::idle_timeout): 60 seconds.
    ///
    /// A WebSocket peer gone without a FIN (a phone that lost its network, a NAT that dropped the
    /// mapping) is found within a minute instead of never. Unlike a gRPC stream's, a WebSocket's
    /// idle default can be on: a client that is silent on purpose (a listener, a muted user)
    /// keeps its socket alive with WebSocket pings or a heartbeat message of the application's,
    /// as the agent's protocol does with its `idle` frame.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The default [`max_message_bytes`](Self::max_message_bytes): 64 KiB.
    ///
    /// Ample for JSON control messages and audio chunks of a few hundred milliseconds, and far
    /// below tungstenite's own default of 64 MiB, which lets one client make the server buffer
    /// 64 MiB per socket.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024;

    /// How long an ending decided here waits, at most, to send its close frame (1012 at a
    /// drain's deadline) and read the peer's reply.
    pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

    /// The longest a session lasts, from its upgrade.
    pub fn max_session(&self) -> Option<Duration> {
        self.max_session
    }

    /// The longest the client may send nothing while the handler waits to read.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// The longest a socket may stay open with no message read from the client.
    pub fn first_message_timeout(&self) -> Option<Duration> {
        self.first_message_timeout
    }

    /// The longest one send may wait for the socket to take its frame.
    pub fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout
    }

    /// The largest message (and frame) accepted from the client, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// The `Retry-After` of the 503 that refuses an upgrade (whole seconds, rounded up, at
    /// least 1).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The limits as the session table holds them (the tracker's sweeper times them).
    pub(crate) fn as_session_limits(&self) -> livecount_session::Limits {
        livecount_session::Limits {
            max_session: self.max_session,
            read_idle: self.idle_timeout,
            first_frame: self.first_message_timeout,
            write: self.write_timeout,
            ..livecount_session::Limits::default()
        }
    }

    /// `Retry-After` in whole seconds, at least 1 (the header takes no fractions).
    pub(crate) fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs_f64().ceil().max(1.0) as u64
    }
}
