//! [`GrpcOnlyLayer`] and [`GrpcOnly`]: a gRPC server that answers requests which are not
//! gRPC with HTTP 415, instead of serving them as if they were.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::limits::is_grpc;

/// A tower [`Layer`] that refuses requests whose `content-type` is not `application/grpc…`
/// with HTTP 415 (Unsupported Media Type) and `grpc-status` 3 (`INVALID_ARGUMENT`), without
/// calling the service; see [`GrpcOnly`].
///
/// gRPC's `doc/PROTOCOL-HTTP2.md` says: "If Content-Type does not begin with
/// "application/grpc", gRPC servers SHOULD respond with HTTP status of 415 (Unsupported
/// Media Type). This will prevent other HTTP/2 clients from interpreting a gRPC error
/// response, which uses status 200 (OK), as successful." grpc-go does; tonic serves such
/// a request as if it were gRPC.
///
/// Mount it outside a [`SessionLayer`](crate::SessionLayer) (first, in tonic's
/// `Server::builder().layer(…)` order), so that a request that is not a gRPC call is not
/// counted as a session either:
///
/// ```
/// use livecount_session::SessionTracker;
/// use livecount_tower::{SessionLayer, grpc::GrpcOnlyLayer};
///
/// let tracker: SessionTracker = SessionTracker::new();
/// let server = tonic::transport::Server::builder()
///     .layer(GrpcOnlyLayer::new())
///     .layer(SessionLayer::new(tracker));
/// // server.add_service(...).serve(addr)
/// # let _ = server;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcOnlyLayer;

impl GrpcOnlyLayer {
    /// The layer.
    ///
    /// ```
    /// use tower::Layer;
    /// let service = livecount_tower::grpc::GrpcOnlyLayer::new().layer(tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// # let _ = service;
    /// ```
    pub fn new() -> Self {
        GrpcOnlyLayer
    }
}

impl<S> Layer<S> for GrpcOnlyLayer {
    type Service = GrpcOnly<S>;

    fn layer(&self, inner: S) -> GrpcOnly<S> {
        GrpcOnly::new(inner)
    }
}

/// The service [`GrpcOnlyLayer`] builds: `inner` for gRPC requests (`content-type:
/// application/grpc`, `application/grpc+proto`, …); for any other request a trailers-only
/// answer with HTTP status 415, `content-type: application/grpc`, `grpc-status: 3`
/// (`INVALID_ARGUMENT`) and a `grpc-message` naming the content type it expected, as grpc-go
/// answers. The response body is the inner service's body type, empty (its `Default`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use http::{Request, Response};
/// use livecount_tower::grpc::GrpcOnly;
/// use tower::ServiceExt;
///
/// let inner = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("served")))
/// });
/// let service = GrpcOnly::new(inner);
/// let json = Request::post("/pkg.Svc/Call").header("content-type", "application/json").body(()).unwrap();
/// let response = service.clone().oneshot(json).await.unwrap();
/// assert_eq!(response.status(), 415);
/// assert_eq!(response.headers()["grpc-status"], "3");
/// let grpc = Request::post("/pkg.Svc/Call").header("content-type", "application/grpc").body(()).unwrap();
/// assert_eq!(service.oneshot(grpc).await.unwrap().into_body(), "served");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct GrpcOnly<S> {
    inner: S,
}

impl<S> GrpcOnly<S> {
    /// `inner`, answering requests that are not gRPC with 415.
    ///
    /// ```
    /// let service = livecount_tower::grpc::GrpcOnly::new(tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// }));
    /// # let _ = service;
    /// ```
    pub fn new(inner: S) -> Self {
        GrpcOnly { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, ResBody> Service<Request<B>> for GrpcOnly<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = GrpcOnlyFuture<S::Future, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if is_grpc(request.headers()) {
            GrpcOnlyFuture {
                future: Some(self.inner.call(request)),
                refused: None,
            }
        } else {
            let answer = unsupported_media_type(request.headers().get(CONTENT_TYPE));
            GrpcOnlyFuture {
                future: None,
                refused: Some(answer),
            }
        }
    }
}

/// The 415 answer to a request with `content_type` (if any).
fn unsupported_media_type<B: Default>(content_type: Option<&HeaderValue>) -> Response<B> {
    let got = content_type.map_or("none".into(), |v| String::from_utf8_lossy(v.as_bytes()));
    let message = format!("invalid gRPC request content-type {got:?}: expected application/grpc");
    let mut response = Response::new(B::default());
    *response.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from_static("3"));
    if let Ok(message) = HeaderValue::try_from(percent_encoded(&message)) {
        headers.insert("grpc-message", message);
    }
    response
}

/// `message` percent-encoded as `grpc-message` must be (`doc/PROTOCOL-HTTP2.md`: every byte
/// outside `%x20-%x7E`, and `%` itself).
fn percent_encoded(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &byte in message.as_bytes() {
        match byte {
            b'%' | ..0x20 | 0x7F.. => out.push_str(&format!("%{byte:02X}")),
            _ => out.push(char::from(byte)),
        }
    }
    out
}

pin_project! {
    /// The future [`GrpcOnly`] returns: the inner service's, or its own 415 answer.
    pub struct GrpcOnlyFuture<F, B> {
        // `None` for a request that is not gRPC: the service was not called.
        #[pin]
        future: Option<F>,
        // The 415 answer, until taken.
        refused: Option<Response<B>>,
    }
}

impl<F, B, E> Future for GrpcOnlyFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.future.as_pin_mut() {
            Some(future) => future.poll(cx),
            None => Poll::Ready(Ok(this.refused.take().expect("polled after completion"))),
        }
    }
}

impl<F, B> fmt::Debug for GrpcOnlyFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcOnlyFuture")
            .field("grpc", &self.future.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(percent_encoded("a \"b\" 100%"), "a \"b\" 100%25");
        assert_eq!(percent_encoded("é\n"), "%C3%A9%0A");
    }

    #[test]
    fn the_answer_names_what_came_and_what_was_expected() {
        let json = HeaderValue::from_static("application/json");
        let response: Response<String> = unsupported_media_type(Some(&json));
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let headers = response.headers();
        assert_eq!(headers[CONTENT_TYPE], "application/grpc");
        assert_eq!(headers["grpc-status"], "3");
        assert_eq!(
            headers["grpc-message"],
            "invalid gRPC request content-type \"application/json\": expected application/grpc"
        );
        let none: Response<String> = unsupported_media_type(None);
        assert!(
            none.headers()["grpc-message"]
                .to_str()
                .unwrap()
                .contains("\"none\"")
        );
    }
}
