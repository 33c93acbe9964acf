//! [`RequestBody`]: a request body inspected by an [`Inspected`](crate::body::Inspected) layer: its frames
//! are activity for the idle timeout, its messages are held to the message limit, and its
//! failure (a reset, a dead connection) ends the session with the reason it stands for.

use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use livecount::{Counter, PerThread};
use pin_project_lite::pin_project;

use crate::limits::Limit;
use crate::traffic::Traffic;

/// The error type of a [`RequestBody`]: the inner body's error, or [`MessageTooLarge`].
pub type BoxError = Box<dyn Error + Send + Sync>;

pin_project! {
    /// The request body a [`Inspected`](crate::body::Inspected) [`SessionLayer`](crate::SessionLayer)
    /// hands its inner service: the client's body, each frame of it counted as activity
    /// (for the idle timeout), and each gRPC message's declared length (or a plain body's
    /// size) held to [`max_request_message`](crate::StreamLimits::max_request_message).
    ///
    /// Above the limit the session ends [`Failed`](livecount_session::EndReason::Failed) and
    /// the body yields a [`MessageTooLarge`] error, at the 5-byte prefix of the message that
    /// declares too much (before its bytes arrive) or at the frame that crosses a plain body's
    /// limit; the response becomes `RESOURCE_EXHAUSTED` (gRPC) or 413 (plain HTTP, before its
    /// head). Its errors are boxed ([`BoxError`]), as tonic and axum take them.
    ///
    /// An error of the client's body ends the session at once (before the service sees the
    /// error): [`Cancelled`](livecount_session::EndReason::Cancelled) for an HTTP/2 stream
    /// reset with `CANCEL` (the code a client cancelling its call sends),
    /// [`Disconnected`](livecount_session::EndReason::Disconnected) for anything else (an I/O
    /// error, a `GOAWAY`, a reset with another code, a body cut short: the connection or
    /// the stream broke), told apart by the error's
    /// type (h2's error, in the error's source chain). A body that ends cleanly (a
    /// half-close) ends nothing. A service holding the request's
    /// [`EndHandle`](livecount_session::EndHandle) thus knows its request ended cleanly if
    /// the session is still open when the body (or tonic's stream over it) ends: tonic turns
    /// a `CANCEL` reset into a clean end of its stream.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use http::{Request, Response};
    /// use http_body_util::{BodyExt, Full};
    /// use livecount_session::{EndReason, SessionTracker};
    /// use livecount_tower::{SessionLayer, body::RequestBody};
    /// use tower::{ServiceBuilder, ServiceExt};
    ///
    /// let tracker: SessionTracker = SessionTracker::new();
    /// let service = ServiceBuilder::new()
    ///     .layer(SessionLayer::new(tracker.clone()).max_request_message(4))
    ///     .service_fn(|request: Request<RequestBody<Full<bytes::Bytes>>>| async move {
    ///         let read = request.into_body().collect().await; // the handler reads the body
    ///         assert!(read.is_err());
    ///         Ok::<_, std::convert::Infallible>(Response::new(Full::new(bytes::Bytes::new())))
    ///     });
    /// let request = Request::post("/upload").body(Full::new(bytes::Bytes::from("too long"))).unwrap();
    /// let response = service.oneshot(request).await.unwrap();
    /// assert_eq!(response.status(), 413);
    /// assert_eq!(tracker.snapshot().ended_by(EndReason::Failed), 1);
    /// # }
    /// ```
    pub struct RequestBody<B, C: Counter = PerThread, M = ()> {
        #[pin]
        inner: B,
        traffic: Option<Traffic<C, M>>,
        limit: Option<u64>,
        framing: Framing,
        failed: bool,
    }
}

/// What the message limit reads of the body.
#[derive(Clone, Copy, Debug)]
enum Framing {
    /// gRPC length-prefixed messages: `have` bytes of the current prefix read, then `skip`
    /// bytes of the message to pass.
    Grpc {
        prefix: [u8; 5],
        have: usize,
        skip: u64,
    },
    /// A plain body: bytes so far.
    Plain { seen: u64 },
}

impl Framing {
    /// Reads `bytes`; `Err(size)` with the first size above `limit`.
    fn feed(&mut self, mut bytes: &[u8], limit: u64) -> Result<(), u64> {
        match self {
            Framing::Plain { seen } => {
                *seen += bytes.len() as u64;
                if *seen > limit { Err(*seen) } else { Ok(()) }
            }
            Framing::Grpc { prefix, have, skip } => {
                while !bytes.is_empty() {
                    if *skip > 0 {
                        let n = (*skip).min(bytes.len() as u64);
                        *skip -= n;
                        bytes = &bytes[n as usize..];
                        continue;
                    }
                    let n = (5 - *have).min(bytes.len());
                    prefix[*have..*have + n].copy_from_slice(&bytes[..n]);
                    (*have, bytes) = (*have + n, &bytes[n..]);
                    if *have == 5 {
                        let [_, a, b, c, d] = *prefix;
                        let declared = u64::from(u32::from_be_bytes([a, b, c, d]));
                        if declared > limit {
                            return Err(declared);
                        }
                        (*have, *skip) = (0, declared);
                    }
                }
                Ok(())
            }
        }
    }
}

impl<B, C: Counter, M> RequestBody<B, C, M> {
    /// Wraps `inner`, noting activity on `traffic` (if any) and holding it to `limit` (if
    /// any); `grpc` reads it as gRPC messages.
    pub(crate) fn new(
        inner: B,
        traffic: Option<Traffic<C, M>>,
        limit: Option<u64>,
        grpc: bool,
    ) -> Self {
        let framing = match grpc {
            true => Framing::Grpc {
                prefix: [0; 5],
                have: 0,
                skip: 0,
            },
            false => Framing::Plain { seen: 0 },
        };
        RequestBody {
            inner,
            traffic,
            limit,
            framing,
            failed: false,
        }
    }

    /// The client's body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B, C, M> Body for RequestBody<B, C, M>
where
    B: Body,
    B::Data: AsRef<[u8]>,
    B::Error: Into<BoxError>,
    C: Counter,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        let frame = match ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => {
                let error = error.into();
                if let Some(traffic) = this.traffic.as_ref() {
                    traffic.end(failure(&*error));
                }
                return Poll::Ready(Some(Err(error)));
            }
            None => {
                if let Some(traffic) = this.traffic.as_ref() {
                    traffic.heard(); // the whole request, even if it was empty
                }
                return Poll::Ready(None);
            }
        };
        let Some(traffic) = this.traffic.as_ref() else {
            return Poll::Ready(Some(Ok(frame))); // not counted
        };
        traffic.heard();
        traffic.active();
        if let (Some(limit), Some(data)) = (*this.limit, frame.data_ref())
            && let Err(size) = this.framing.feed(data.as_ref(), limit)
        {
            *this.failed = true;
            traffic.end(Limit::TooLarge);
            return Poll::Ready(Some(Err(Box::new(MessageTooLarge { size, limit }))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.failed {
            true => SizeHint::with_exact(0),
            false => self.inner.size_hint(),
        }
    }
}

impl<B: fmt::Debug, C: Counter, M> fmt::Debug for RequestBody<B, C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBody")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

/// Why a request body failed, from its error's type (the error itself or any of its
/// sources: tonic's `Status` wraps hyper's error, which wraps h2's or an I/O error):
///
/// * an HTTP/2 stream reset ([`h2::Error::is_reset`]) with [`h2::Reason::CANCEL`]: the
///   client cancelled the call (gRPC clients reset with `CANCEL`, and tonic reads it as a
///   cancel too), [`Limit::Reset`] (`Cancelled`);
/// * anything else: an I/O error (hyper turns h2's I/O errors into its own, their source
///   the `io::Error`), a `GOAWAY` ([`h2::Error::is_go_away`]), a reset with another code, an
///   HTTP/1.1 body cut short: the connection or the stream broke under the request,
///   [`Limit::Lost`] (`Disconnected`). A proxy in front resets the upstream stream of a
///   client whose connection died with such a code: Envoy sends `INTERNAL_ERROR`, so a
///   cut client behind Envoy counts `Disconnected`, as a cut direct connection does.
fn failure(error: &(dyn Error + 'static)) -> Limit {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return if h2.is_reset() && h2.reason() == Some(h2::Reason::CANCEL) {
                Limit::Reset
            } else {
                Limit::Lost
            };
        }
        source = error.source();
    }
    Limit::Lost
}

/// A request message (gRPC) or body (plain HTTP) above the layer's
/// [`max_request_message`](crate::StreamLimits::max_request_message).
///
/// ```
/// let e = livecount_tower::body::MessageTooLarge { size: 10, limit: 4 };
/// assert_eq!(e.to_string(), "request message of 10 bytes above the limit of 4");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageTooLarge {
    /// The declared length of the gRPC message, or the plain body's bytes so far.
    pub size: u64,
    /// The limit.
    pub limit: u64,
}

impl fmt::Display for MessageTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request message of {} bytes above the limit of {}",
            self.size, self.limit
        )
    }
}

impl Error for MessageTooLarge {}

#[cfg(test)]
mod tests {
    use super::*;

    fn grpc() -> Framing {
        Framing::Grpc {
            prefix: [0; 5],
            have: 0,
            skip: 0,
        }
    }

    fn message(len: u32) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&len.to_be_bytes());
        bytes.resize(5 + len as usize, 7);
        bytes
    }

    #[test]
    fn grpc_prefixes_are_read_across_any_split() {
        let mut stream = message(3);
        stream.extend(message(4));
        stream.extend(message(5)); // above the limit of 4
        for split in 0..stream.len() {
            let mut framing = grpc();
            let (a, b) = stream.split_at(split);
            let result = framing.feed(a, 4).and_then(|()| framing.feed(b, 4));
            assert_eq!(result, Err(5), "split at {split}");
        }
        let mut framing = grpc();
        assert_eq!(framing.feed(&stream[..5 + 3 + 5 + 4], 4), Ok(()));
    }

    #[test]
    fn resets_are_cancels_and_other_failures_lost_connections() {
        #[derive(Debug)]
        struct Wrapped(Box<dyn Error + Send + Sync>);
        impl fmt::Display for Wrapped {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl Error for Wrapped {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&*self.0)
            }
        }
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(failure(&io), Limit::Lost);
        assert_eq!(failure(&Wrapped(Box::new(io))), Limit::Lost);
        // A reason alone (no RST_STREAM) is not a reset.
        let reason = h2::Error::from(h2::Reason::CANCEL);
        assert_eq!(failure(&Wrapped(Box::new(reason))), Limit::Lost);
        assert_eq!(failure(&MessageTooLarge { size: 2, limit: 1 }), Limit::Lost);
    }

    #[test]
    fn a_plain_body_is_held_to_its_total() {
        let mut framing = Framing::Plain { seen: 0 };
        assert_eq!(framing.feed(b"abcd", 4), Ok(()));
        assert_eq!(framing.feed(b"e", 4), Err(5));
    }
}
