//! [`InbandOrcaLayer`]: every response carries the backend's latest load report as in-band
//! ORCA — HTTP responses and WebSocket upgrades in a header, gRPC calls in their trailers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::{HeaderMap, HeaderName, Request, Response};
use http_body::{Body, Frame, SizeHint};
use livecount_report::LoadBoard;
use livecount_report::inband::{
    ENDPOINT_LOAD_METRICS, ENDPOINT_LOAD_METRICS_BIN, EncodedReport, InbandFormat, InbandOrca,
};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::limits::is_grpc;
use crate::map_response::{MapResponse, MapResponseFuture};

/// A tower [`Layer`] that attaches the backend's latest load report, as in-band ORCA
/// (`livecount_report::inband`: the same fields and weight as the out-of-band stream), to
/// every response:
///
/// | response | where | default form |
/// | --- | --- | --- |
/// | HTTP (any status), WebSocket upgrade (101) | response header | `endpoint-load-metrics: TEXT …` |
/// | gRPC call (`content-type: application/grpc…`) | trailers, at the call's end | `endpoint-load-metrics-bin` |
/// | gRPC trailers-only answer (a refusal, an error before any message) | its headers (which are its trailers) | `endpoint-load-metrics-bin` |
///
/// A gRPC call's report goes in the trailers only, read when they are sent: a stream that
/// lasted twenty minutes reports the load at its end, not at its start, and Envoy (which
/// reads the headers first and then stops looking) sees that one. gRPC clients read only
/// the `-bin` trailer. A response that already has the header keeps its own.
///
/// Each value is the board's latest report encoded once ([`InbandOrca`]), and each service
/// keeps the encodings it last used: per HTTP response the layer does one atomic load (has a
/// report been published since?), a reference-count increment and the insert
/// (`benches/benches/inband_orca.rs`). An HTTP response gets the latest report when its
/// request arrived (its handler's time to the response head later); a gRPC call's
/// trailers the latest when they go out.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::Arc;
/// use axum::{Router, routing::get};
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::LoadBoard;
/// use livecount_tower::grpc::InbandOrcaLayer;
/// use tower::ServiceExt;
///
/// let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build().unwrap()));
/// let app = Router::new()
///     .route("/chat", get(|| async { "hello" }))
///     .layer(InbandOrcaLayer::new(board));
/// let request = http::Request::get("/chat").body(axum::body::Body::empty()).unwrap();
/// let response = app.oneshot(request).await.unwrap();
/// let report = response.headers()["endpoint-load-metrics"].to_str().unwrap();
/// assert!(report.starts_with("TEXT ") && report.contains("rps_fractional="));
/// # }
/// ```
///
/// On a tonic server, `Server::builder().layer(InbandOrcaLayer::new(board))`; see
/// [`grpc_format`](InbandOrcaLayer::grpc_format) and
/// [`http_format`](InbandOrcaLayer::http_format) to change or turn off either form.
#[derive(Clone)]
pub struct InbandOrcaLayer {
    source: Arc<InbandOrca>,
    http: Option<InbandFormat>,
    grpc: Option<InbandFormat>,
}

impl InbandOrcaLayer {
    /// Attaches `board`'s reports: `TEXT` in HTTP response headers, `BIN` in gRPC trailers.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let board = Arc::new(livecount_report::LoadBoard::new("b", livecount_capacity::CapacityConfig::builder().build().unwrap()));
    /// use livecount_report::inband::InbandFormat;
    /// let layer = livecount_tower::grpc::InbandOrcaLayer::new(board);
    /// assert_eq!((layer.http(), layer.grpc()), (Some(InbandFormat::Text), Some(InbandFormat::Bin)));
    /// ```
    pub fn new(board: Arc<LoadBoard>) -> Self {
        Self::from_source(Arc::new(InbandOrca::new(board)))
    }

    /// The same, on encodings shared with other layers (one encoding per report for all).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let board = Arc::new(livecount_report::LoadBoard::new("b", livecount_capacity::CapacityConfig::builder().build().unwrap()));
    /// use livecount_report::inband::InbandOrca;
    /// let shared = Arc::new(InbandOrca::new(board));
    /// let http = livecount_tower::grpc::InbandOrcaLayer::from_source(Arc::clone(&shared));
    /// let grpc = livecount_tower::grpc::InbandOrcaLayer::from_source(shared);
    /// # let _ = (http, grpc);
    /// ```
    pub fn from_source(source: Arc<InbandOrca>) -> Self {
        InbandOrcaLayer {
            source,
            http: Some(InbandFormat::Text),
            grpc: Some(InbandFormat::Bin),
        }
    }

    /// The form for HTTP responses and WebSocket upgrades; `None`: none attached.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let board = Arc::new(livecount_report::LoadBoard::new("b", livecount_capacity::CapacityConfig::builder().build().unwrap()));
    /// use livecount_report::inband::InbandFormat;
    /// let layer = livecount_tower::grpc::InbandOrcaLayer::new(board).http_format(Some(InbandFormat::Json));
    /// assert_eq!(layer.http(), Some(InbandFormat::Json));
    /// ```
    pub fn http_format(mut self, format: Option<InbandFormat>) -> Self {
        self.http = format;
        self
    }

    /// The form for gRPC calls (in their trailers); `None`: none attached. gRPC clients
    /// read only [`InbandFormat::Bin`]; Envoy reads any.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # let board = Arc::new(livecount_report::LoadBoard::new("b", livecount_capacity::CapacityConfig::builder().build().unwrap()));
    /// let layer = livecount_tower::grpc::InbandOrcaLayer::new(board).grpc_format(None);
    /// assert_eq!(layer.grpc(), None);
    /// ```
    pub fn grpc_format(mut self, format: Option<InbandFormat>) -> Self {
        self.grpc = format;
        self
    }

    /// The form attached to HTTP responses, if any.
    pub fn http(&self) -> Option<InbandFormat> {
        self.http
    }

    /// The form attached to gRPC trailers, if any.
    pub fn grpc(&self) -> Option<InbandFormat> {
        self.grpc
    }
}

impl fmt::Debug for InbandOrcaLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InbandOrcaLayer")
            .field("board", &self.source.board().name())
            .field("http", &self.http)
            .field("grpc", &self.grpc)
            .finish()
    }
}

impl<S> Layer<S> for InbandOrcaLayer {
    type Service = InbandOrcaService<S>;

    fn layer(&self, inner: S) -> InbandOrcaService<S> {
        InbandOrcaService {
            inner,
            layer: self.clone(),
            encoded: None,
        }
    }
}

/// The service [`InbandOrcaLayer`] builds.
#[derive(Clone, Debug)]
pub struct InbandOrcaService<S> {
    inner: S,
    layer: InbandOrcaLayer,
    /// The encodings this service last attached, reused while no report is published.
    encoded: Option<Arc<EncodedReport>>,
}

impl<S> InbandOrcaService<S> {
    /// The latest report in `format`: from this service's encodings while they are current
    /// (one atomic load), else from the shared ones (kept for the next call).
    fn value(&mut self, format: InbandFormat) -> http::HeaderValue {
        let source = &self.layer.source;
        match &self.encoded {
            Some(encoded) if source.is_current(encoded) => encoded.value(format).clone(),
            _ => {
                let encoded = source.current();
                let value = encoded.value(format).clone();
                self.encoded = Some(encoded);
                value
            }
        }
    }
}

/// What to attach, and where: chosen at `call` from the request's content type.
enum Attach {
    /// An HTTP response: this value, in its headers.
    Header(HeaderName, http::HeaderValue),
    /// A gRPC call: the latest report when its trailers (or its trailers-only head) pass.
    Trailer(Arc<InbandOrca>, InbandFormat),
}

/// The header name of `format`.
fn name(format: InbandFormat) -> HeaderName {
    match format {
        InbandFormat::Text | InbandFormat::Json => TEXT_OR_JSON,
        InbandFormat::Bin => BIN,
    }
}

/// Inserts `value` as `name` into `headers` unless they carry one already.
fn insert(headers: &mut HeaderMap, name: HeaderName, value: impl FnOnce() -> http::HeaderValue) {
    if let http::header::Entry::Vacant(slot) = headers.entry(name) {
        slot.insert(value());
    }
}

/// The two header names, built at compile time (`from_static` is `const`).
const TEXT_OR_JSON: HeaderName = HeaderName::from_static(ENDPOINT_LOAD_METRICS);
const BIN: HeaderName = HeaderName::from_static(ENDPOINT_LOAD_METRICS_BIN);

impl<S, B, ResBody> Service<Request<B>> for InbandOrcaService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<InbandOrcaBody<ResBody>>;
    type Error = S::Error;
    type Future = InbandOrcaFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let grpc = is_grpc(request.headers());
        let format = if grpc {
            self.layer.grpc
        } else {
            self.layer.http
        };
        let attach = format.map(|format| {
            if grpc {
                Attach::Trailer(Arc::clone(&self.layer.source), format)
            } else {
                Attach::Header(name(format), self.value(format))
            }
        });
        InbandOrcaFuture {
            inner: MapResponseFuture::new(self.inner.call(request), attach),
        }
    }
}

pin_project! {
    /// The response future of [`InbandOrcaService`].
    pub struct InbandOrcaFuture<F> {
        #[pin]
        inner: MapResponseFuture<F, Option<Attach>>,
    }
}

impl<F> fmt::Debug for InbandOrcaFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InbandOrcaFuture").finish_non_exhaustive()
    }
}

impl<F, ResBody, E> Future for InbandOrcaFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<InbandOrcaBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}

impl<ResBody> MapResponse<Response<ResBody>> for Option<Attach> {
    type Output = Response<InbandOrcaBody<ResBody>>;

    /// An HTTP response gets its header now; a gRPC call its trailer as it passes, or now
    /// if it is trailers-only.
    fn map_response(self, mut response: Response<ResBody>) -> Self::Output {
        let mut trailer = None;
        match self {
            None => {}
            Some(Attach::Header(name, value)) => insert(response.headers_mut(), name, || value),
            // A gRPC answer whose headers carry `grpc-status` is trailers-only: its headers
            // are its trailers, and no trailers frame follows.
            Some(Attach::Trailer(source, format)) => {
                if response.headers().contains_key("grpc-status") {
                    insert(response.headers_mut(), name(format), || {
                        source.value(format)
                    });
                } else {
                    trailer = Some((source, format));
                }
            }
        }
        response.map(|inner| InbandOrcaBody { inner, trailer })
    }
}

pin_project! {
    /// The response body of [`InbandOrcaService`]: the inner body, with the latest report
    /// added to a gRPC call's trailers as they pass.
    pub struct InbandOrcaBody<B> {
        #[pin]
        inner: B,
        trailer: Option<(Arc<InbandOrca>, InbandFormat)>,
    }
}

impl<B> fmt::Debug for InbandOrcaBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InbandOrcaBody")
            .field("trailer_pending", &self.trailer.is_some())
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for InbandOrcaBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let mut frame = ready!(this.inner.poll_frame(cx));
        if let Some(Ok(f)) = frame.as_mut()
            && let Some(trailers) = f.trailers_mut()
            && let Some((source, format)) = this.trailer.take()
        {
            insert(trailers, name(format), || source.value(format));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: Default> Default for InbandOrcaBody<B> {
    fn default() -> Self {
        InbandOrcaBody {
            inner: B::default(),
            trailer: None,
        }
    }
}
