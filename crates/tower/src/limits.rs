//! [`StreamLimits`]: how long a request counted by a [`SessionLayer`](crate::SessionLayer)
//! may last, stay silent or keep a frame waiting, and how much it may send; the
//! [`PassThrough`] and [`Inspected`] request modes; [`Limit`], the limit that ended a session.

use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode};

/// The limits a [`SessionLayer`](crate::SessionLayer) enforces on each request it counts.
/// `None` turns a limit off.
///
/// | limit | default | session ends | gRPC status | plain HTTP |
/// |---|---|---|---|---|
/// | [`max_session`](Self::max_session) | 1 h ([`DEFAULT_MAX_SESSION`](Self::DEFAULT_MAX_SESSION)) | `TimedOut` | `DEADLINE_EXCEEDED` "max session length" | 503 before the head; after it the body ends |
/// | the client's `grpc-timeout` ([`grpc_timeout`](Self::grpc_timeout)) | on | `TimedOut` | `DEADLINE_EXCEEDED` "deadline exceeded (grpc-timeout)" | — (gRPC only) |
/// | [`write_timeout`](Self::write_timeout) | 30 s ([`DEFAULT_WRITE_TIMEOUT`](Self::DEFAULT_WRITE_TIMEOUT)) | `Disconnected` | — (nobody reads it) | — |
/// | [`idle_timeout`](Self::idle_timeout) | off | `Disconnected` | `DEADLINE_EXCEEDED` "idle timeout" | 408 before the head; after it the body ends |
/// | [`first_frame_timeout`](Self::first_frame_timeout) | off (10 s in a `Backend`: [`DEFAULT_FIRST_FRAME_TIMEOUT`](Self::DEFAULT_FIRST_FRAME_TIMEOUT)) | `Disconnected` | `DEADLINE_EXCEEDED` "first frame timeout" | 408 before the head; after it the body ends |
/// | [`max_request_message`](Self::max_request_message) | off | `Failed` | `RESOURCE_EXHAUSTED` | 413 before the head; after it the body ends |
/// | at the tracker's cap (admission) | the tracker's | not started, counted refused | `RESOURCE_EXHAUSTED` (trailers-only) | 503 with `Retry-After` ([`retry_after`](Self::retry_after)) |
/// | the tracker drains (admission; [`SessionTracker::begin_drain`](livecount_session::SessionTracker::begin_drain)) | — | not started, counted refused | `UNAVAILABLE` "draining: …" (trailers-only) | 503 with `Retry-After` |
/// | the drain's deadline: `end_all(Shutdown)` | — | `Shutdown` | `UNAVAILABLE` "server shutting down" in the trailers | the body ends |
///
/// A gRPC response (`content-type: application/grpc…`) cut by a limit ends with trailers
/// carrying the status, or, before its head, is a trailers-only response; the inner
/// service's future or body is dropped then. A plain HTTP body cut after its head simply
/// ends: over HTTP/1.1 with chunked encoding the client sees a normal end (with a
/// `Content-Length`, hyper and the client see it short), so a plain streaming protocol that
/// must tell a cut from an end needs an end marker of its own.
///
/// **Idle timeout, off by default.** Activity is a frame in either direction: a data or
/// trailers frame of the request body, or a frame of the response body. A server-streaming
/// RPC's client sends nothing after its request, and a stream such as `Health/Watch` may
/// send nothing for hours while nothing changes: both sides silent is normal for it, so no
/// idle default is safe for every service. A peer that vanished is found by the transport
/// (HTTP/2 keepalive pings: tonic's `http2_keepalive_interval` and
/// `http2_keepalive_timeout`), a peer that stopped reading by the write timeout. Set it for
/// protocols with heartbeats. It needs the request body inspected, so setting it switches the
/// layer to [`Inspected`].
///
/// **First-frame timeout, off by default.** A request whose client has sent nothing since
/// `call` — no request frame, and its request not already complete (a bodiless `GET`, a
/// stream opened with `END_STREAM`) — ends at this limit. It is the silent opener's bound: a
/// client that opens streams and never speaks holds a place under the cap until the idle
/// timeout otherwise. Request frames are counted as the service reads them (tonic reads a
/// unary or server-streaming request at once; a bidirectional handler reads when it
/// polls its stream), so a service that leaves its request unread for this long is cut
/// too. It needs the request body inspected, so setting it switches the layer to
/// [`Inspected`].
///
/// **Maximum request message, off by default.** tonic already refuses a message above its
/// `max_decoding_message_size` (4 MiB unless raised) with `RESOURCE_EXHAUSTED`, which this
/// layer counts `Failed` from the status, and axum's `DefaultBodyLimit` (2 MB) or
/// tower-http's `RequestBodyLimitLayer` bound plain bodies. The layer's limit is a second
/// line for a service that raised or bypassed those: it reads each gRPC message's declared
/// length from its 5-byte prefix (before the message arrives) or counts a plain body's
/// bytes. It too switches the layer to [`Inspected`].
///
/// **The client's `grpc-timeout`, on by default.** gRPC says a call's deadline bounds the
/// whole call (`doc/PROTOCOL-HTTP2.md`: `Timeout → "grpc-timeout" TimeoutValue TimeoutUnit`,
/// "If Timeout is omitted a server should assume an infinite timeout"); tonic's server only
/// bounds the wait for the response headers, which a streaming call has at once. So a
/// counted gRPC request's session lasts at most the earlier of `max_session` and its
/// `grpc-timeout` (1 to 8 digits and a unit of `H M S m u n`; any other value is ignored, as
/// if omitted). It is the client's own deadline: past it the client has given up (or will
/// never read the answer), so honouring it is always right; `false` turns it off.
///
/// **Write timeout.** A frame the transport does not take for this long (the peer stopped
/// reading: its HTTP/2 flow-control window or the socket's buffer is full) ends the session
/// `Disconnected` and frees the count at once. hyper stops polling a body while its window
/// is closed, so this is found by the tracker's one sweeper over its session table, not
/// inside the body (see the crate's implementation notes). The stream itself stays open until the peer reads on or
/// the connection dies (set HTTP/2 keepalive for that); its count does not.
///
/// Every limit is checked by the sweeper, a few times per limit (its period is a quarter of
/// the shortest limit, between 10 ms and 1 s), so a session ends at its limit or up to about
/// two periods later, never earlier. The limits need a tokio runtime with a timer (the
/// tracker's sweeper is spawned on the first armed session's runtime); a request served
/// outside one is counted without limits.
///
/// ```
/// use std::time::Duration;
/// use livecount_tower::StreamLimits;
///
/// let limits = StreamLimits::default();
/// assert_eq!(limits.max_session(), Some(StreamLimits::DEFAULT_MAX_SESSION));
/// assert_eq!(limits.write_timeout(), Some(StreamLimits::DEFAULT_WRITE_TIMEOUT));
/// assert_eq!((limits.idle_timeout(), limits.max_request_message()), (None, None));
/// assert!(limits.grpc_timeout()); // the client's deadline, if earlier than max_session
/// assert_eq!(limits.retry_after(), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    pub(crate) max_session: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) first_frame_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) max_request_message: Option<u64>,
    pub(crate) retry_after: Duration,
    pub(crate) drop_grace: Option<Duration>,
    pub(crate) grpc_timeout: bool,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_session: Some(StreamLimits::DEFAULT_MAX_SESSION),
            idle_timeout: None,
            first_frame_timeout: None,
            write_timeout: Some(StreamLimits::DEFAULT_WRITE_TIMEOUT),
            max_request_message: None,
            retry_after: StreamLimits::DEFAULT_RETRY_AFTER,
            drop_grace: None,
            grpc_timeout: true,
        }
    }
}

impl StreamLimits {
    /// The default [`StreamLimits::max_session`]: one hour.
    ///
    /// Long enough for any interactive session and for the streams a client keeps open for
    /// minutes (a voice call, a health `Watch`), short enough that nothing (a peer that keeps its
    /// connection alive and reads but never ends, a handler that never finishes) holds a count
    /// for longer than that. A balancer moves a long stream only when it ends, so bounding
    /// stream length is also what lets load rebalance (gRPC servers do the same with
    /// `MAX_CONNECTION_AGE`); clients of endless streams reconnect, as they must after any
    /// server restart anyway.
    pub const DEFAULT_MAX_SESSION: Duration = Duration::from_secs(3600);

    /// The default [`StreamLimits::write_timeout`]: 30 seconds.
    ///
    /// A reader that takes nothing at all for 30 s while a frame waits is gone or hostile; a
    /// slow mobile link or a congested path still takes *something* (a window update) within
    /// seconds. nginx's `send_timeout` is 60 s for a whole response; streams need the count
    /// back sooner, and the agent binary uses 10 s for its own protocol.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

    /// The default [`StreamLimits::retry_after`]: 1 second, the `Retry-After` of a 503 at
    /// capacity.
    ///
    /// Sessions end all the time on a busy backend, so a slot is likely free within a second;
    /// a longer hint makes a client that obeys it wait longer than needed, a zero one invites
    /// an immediate retry storm. A balancer in front usually retries on another backend first.
    pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

    /// The first-frame timeout a [`Backend`](https://docs.rs/livecount-service)'s layer
    /// sets: 10 seconds.
    ///
    /// A client that opens a stream and sends nothing at all (not one message, not the end
    /// of its request) holds a place under the cap without ever using it: one client with
    /// a few connections of silent HTTP/2 streams can hold every place. A real client sends
    /// its first message within a round trip or two of opening the stream; ten seconds is
    /// far above any network's and far below the idle timeout a silent-but-live session
    /// needs, so the place comes back long before the idle timeout would return it.
    pub const DEFAULT_FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(10);

    /// No limit at all (the layer before limits existed): no sweeper, nothing per request
    /// beyond the session.
    ///
    /// ```
    /// let none = livecount_tower::StreamLimits::none();
    /// assert_eq!((none.max_session(), none.write_timeout()), (None, None));
    /// ```
    pub fn none() -> Self {
        StreamLimits {
            max_session: None,
            idle_timeout: None,
            first_frame_timeout: None,
            write_timeout: None,
            max_request_message: None,
            retry_after: StreamLimits::DEFAULT_RETRY_AFTER,
            drop_grace: None,
            grpc_timeout: false,
        }
    }

    /// How long a response dropped before its end is left to the service to end (see
    /// [`SessionLayer::leave_drops_to_service`](crate::SessionLayer::leave_drops_to_service));
    /// `None`: it ends `Cancelled` at once.
    pub fn drop_grace(&self) -> Option<Duration> {
        self.drop_grace
    }

    /// The longest a session lasts, from `call`.
    pub fn max_session(&self) -> Option<Duration> {
        self.max_session
    }

    /// The longest no frame may pass in either direction.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// The longest a client may send nothing at all after `call`: not one request frame,
    /// nor the end of its request.
    pub fn first_frame_timeout(&self) -> Option<Duration> {
        self.first_frame_timeout
    }

    /// The longest a response frame may wait for the transport to take it.
    pub fn write_timeout(&self) -> Option<Duration> {
        self.write_timeout
    }

    /// The largest request message (gRPC) or body (plain HTTP), in bytes.
    pub fn max_request_message(&self) -> Option<u64> {
        self.max_request_message
    }

    /// The `Retry-After` of a plain HTTP 503 at capacity (whole seconds, rounded up).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// Whether a gRPC request's `grpc-timeout` bounds its session (see
    /// [`SessionLayer::grpc_timeout`](crate::SessionLayer::grpc_timeout)).
    pub fn grpc_timeout(&self) -> bool {
        self.grpc_timeout
    }

    /// Whether any limit needs the sweeper.
    pub(crate) fn timed(&self) -> bool {
        self.max_session.is_some()
            || self.idle_timeout.is_some()
            || self.first_frame_timeout.is_some()
            || self.write_timeout.is_some()
            || self.grpc_timeout
    }
}

/// Request mode of a [`SessionLayer`](crate::SessionLayer) whose inner service sees the
/// request body as it came (`Request<B>`): the default. Response frames are noted, request
/// frames are not, so the idle timeout and the message limit are unavailable.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassThrough;

/// Request mode of a [`SessionLayer`](crate::SessionLayer) that wraps each request body in a
/// [`RequestBody`](crate::body::RequestBody) (the inner service sees `Request<RequestBody<B>>`),
/// so that request frames count as activity and the message limit applies. Chosen by
/// [`SessionLayer::idle_timeout`](crate::SessionLayer::idle_timeout) and
/// [`SessionLayer::max_request_message`](crate::SessionLayer::max_request_message); tonic
/// and axum services accept any body, so mounting does not change.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inspected;

/// The limit that ended a session, or the refusal a request got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Limit {
    MaxSession = 1,
    Idle = 2,
    Stall = 3,
    TooLarge = 4,
    AtCapacity = 5,
    /// The client's `grpc-timeout` passed.
    GrpcTimeout = 6,
    /// The request body failed with a stream reset `CANCEL` (the client cancelled).
    Reset = 7,
    /// The request body failed with a connection error (the connection died).
    Lost = 8,
    /// The tracker drains: a request refused before it started.
    Draining = 9,
    /// The session was ended `Shutdown` from elsewhere (`end_all` at a drain's deadline).
    Shutdown = 10,
    /// The client sent nothing for the first-frame timeout.
    FirstFrame = 11,
}

impl Limit {
    /// `grpc-status` and `grpc-message`.
    fn grpc(self) -> (&'static str, &'static str) {
        match self {
            Limit::MaxSession => ("4", "max session length"),
            Limit::Idle => ("4", "idle timeout"),
            Limit::FirstFrame => ("4", "first frame timeout"),
            Limit::Stall => ("4", "write timeout"),
            Limit::TooLarge => ("8", "request message above the limit"),
            Limit::AtCapacity => ("8", "at capacity"),
            Limit::GrpcTimeout => ("4", "deadline exceeded (grpc-timeout)"),
            // Nobody reads these two: the stream or the connection is gone.
            Limit::Reset => ("1", "the client reset the stream"),
            Limit::Lost => ("14", "connection lost"),
            // UNAVAILABLE: the retryable "go elsewhere" status.
            Limit::Draining => ("14", "draining: the server is shutting down"),
            Limit::Shutdown => ("14", "server shutting down"),
        }
    }

    /// The HTTP status of a plain answer made before the response head.
    pub(crate) fn http_status(self) -> StatusCode {
        match self {
            Limit::MaxSession | Limit::Stall | Limit::AtCapacity | Limit::GrpcTimeout => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Limit::Draining | Limit::Shutdown => StatusCode::SERVICE_UNAVAILABLE,
            Limit::Idle | Limit::FirstFrame => StatusCode::REQUEST_TIMEOUT,
            Limit::Reset | Limit::Lost => StatusCode::BAD_REQUEST,
            Limit::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// The gRPC status as headers (trailers, or a trailers-only head's).
    pub(crate) fn grpc_headers(self) -> HeaderMap {
        let (status, message) = self.grpc();
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert("grpc-status", HeaderValue::from_static(status));
        headers.insert("grpc-message", HeaderValue::from_static(message));
        headers
    }
}

/// Whether `headers` say gRPC (`content-type: application/grpc`, `+proto`, `+json`, …).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// A gRPC request's `grpc-timeout`, if it has a valid one: 1 to 8 ASCII digits and a unit,
/// `H` (hours), `M` (minutes), `S` (seconds), `m` (milliseconds), `u` (microseconds) or `n`
/// (nanoseconds), as gRPC's `doc/PROTOCOL-HTTP2.md` defines `TimeoutValue` and
/// `TimeoutUnit`. Anything else is ignored (`None`), as if the header were absent.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 8 digits: no overflow below, even in hours (99 999 999 h in seconds < 2^49).
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use livecount_session::EndReason;

    fn timeout(value: &'static str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-timeout", HeaderValue::from_static(value));
        grpc_timeout(&headers)
    }

    #[test]
    fn grpc_timeouts_parse_as_the_spec_says_and_bad_ones_are_ignored() {
        assert_eq!(timeout("300m"), Some(Duration::from_millis(300)));
        assert_eq!(timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(timeout("5n"), Some(Duration::from_nanos(5)));
        assert_eq!(timeout("00000001S"), Some(Duration::from_secs(1)));
        assert_eq!(
            timeout("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in [
            "",
            "m",
            "S",
            "123456789m",
            "12x",
            "-1S",
            "+1S",
            "1.5S",
            " 1S",
            "1s",
            "1 S",
        ] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }

    #[test]
    fn limits_round_trip_through_the_sessions_cause_with_its_reason() {
        use Limit::*;
        let all = [
            MaxSession,
            Idle,
            Stall,
            TooLarge,
            AtCapacity,
            GrpcTimeout,
            Reset,
            Lost,
            Draining,
            Shutdown,
            FirstFrame,
        ];
        let mut causes = 0;
        for limit in all {
            if let Some(cause) = limit.cause() {
                assert_eq!(Limit::of(cause), limit);
                causes += 1;
            }
        }
        assert_eq!(
            causes, 8,
            "refusals and a shutdown from elsewhere are no causes"
        );
        assert_eq!(
            FirstFrame.cause().map(|c| c.reason()),
            Some(EndReason::Disconnected)
        );
        assert_eq!(
            TooLarge.cause().map(|c| c.reason()),
            Some(EndReason::Failed)
        );
        assert_eq!(
            Reset.cause().map(|c| c.reason()),
            Some(EndReason::Cancelled)
        );
    }
}
