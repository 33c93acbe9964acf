//! [`SocketLimits`]: the bounds every [`WebSocketSessions`](crate::WebSocketSessions) socket
//! runs under, with defaults meant for a service on the open internet.

use std::time::Duration;

/// The bounds a [`WebSocketSessions`](crate::WebSocketSessions) socket runs under. Each ends
/// the session exactly once, with its own reason and close code; each default is chosen for
/// a service that faces the open internet, and says why below.
///
/// | limit | default | ends the session | close |
/// |---|---|---|---|
/// | [`max_session`](SocketLimits::max_session) | 20 minutes | [`TimedOut`](livecount_session::EndReason::TimedOut) | 1000 "max session length" |
/// | [`idle_timeout`](SocketLimits::idle_timeout) | 60 s | [`Disconnected`](livecount_session::EndReason::Disconnected) | 1008 "idle timeout" |
/// | [`write_timeout`](SocketLimits::write_timeout) | 10 s | `Disconnected` | none (the peer reads nothing) |
/// | [`max_message_bytes`](SocketLimits::max_message_bytes) | 64 KiB | [`Failed`](livecount_session::EndReason::Failed) | 1009 "message too big" |
///
/// A limit of [`Duration::MAX`] turns a timeout off.
///
/// ```
/// use livecount_tower::SocketLimits;
/// use std::time::Duration;
///
/// let limits = SocketLimits::default()
///     .max_session(Duration::from_secs(3600))
///     .idle_timeout(Duration::from_secs(30))
///     .max_message_bytes(16 * 1024);
/// assert_eq!(limits.write_timeout, Duration::from_secs(10)); // the default
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketLimits {
    /// The longest a session may last. Default 20 minutes: longer than a voice or agent call
    /// usually runs, short enough that a client that holds a slot without end (a leaked tab,
    /// a bot) gives it back within the hour. Raise it for sessions that are meant to run
    /// longer.
    pub max_session: Duration,
    /// The longest the client may send nothing (no message, ping, pong or close) while the
    /// handler waits to read. Default 60 s: a peer gone without a FIN (a phone that lost its
    /// network, a NAT that dropped the mapping) is found within a minute instead of never. A
    /// client that is silent on purpose (a listener, a muted user) must send something more
    /// often than this: WebSocket pings, or a heartbeat message of the application's. Only
    /// time spent waiting in [`recv`](crate::TrackedSocket::recv) counts: a handler busy
    /// elsewhere is not the client's silence.
    pub idle_timeout: Duration,
    /// The longest one send may wait for the socket to take its frame. Default 10 s: a
    /// peer that stopped reading fills its TCP window and every later send waits for ever,
    /// holding the slot; ten seconds outlasts a congested mobile link's stall.
    pub write_timeout: Duration,
    /// The largest message (and frame) accepted from the client, in bytes. Default 64 KiB:
    /// ample for JSON control messages and audio chunks of a few hundred milliseconds, and
    /// far below tungstenite's own default of 64 MiB, which lets one client make the server
    /// buffer 64 MiB per socket.
    pub max_message_bytes: usize,
    /// How long a refused client is told to wait before trying again (`Retry-After` on the
    /// 503 of a refused upgrade). Default 1 s: a balancer that retries elsewhere at once is
    /// better served by a short hint than by a long one that keeps a client waiting.
    pub retry_after: Duration,
}

impl Default for SocketLimits {
    fn default() -> Self {
        SocketLimits {
            max_session: Duration::from_secs(20 * 60),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            max_message_bytes: 64 * 1024,
            retry_after: Duration::from_secs(1),
        }
    }
}

impl SocketLimits {
    /// Sets [`max_session`](SocketLimits::max_session).
    pub fn max_session(mut self, limit: Duration) -> Self {
        self.max_session = limit;
        self
    }

    /// Sets [`idle_timeout`](SocketLimits::idle_timeout).
    pub fn idle_timeout(mut self, limit: Duration) -> Self {
        self.idle_timeout = limit;
        self
    }

    /// Sets [`write_timeout`](SocketLimits::write_timeout).
    pub fn write_timeout(mut self, limit: Duration) -> Self {
        self.write_timeout = limit;
        self
    }

    /// Sets [`max_message_bytes`](SocketLimits::max_message_bytes) (at least 1).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes.max(1);
        self
    }

    /// Sets [`retry_after`](SocketLimits::retry_after).
    pub fn retry_after(mut self, hint: Duration) -> Self {
        self.retry_after = hint;
        self
    }

    /// `Retry-After` in whole seconds, at least 1 (the header takes no fractions).
    pub(crate) fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs_f64().ceil().max(1.0) as u64
    }
}
