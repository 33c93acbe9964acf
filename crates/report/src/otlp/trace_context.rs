//! The caller's W3C trace context (`traceparent`, `tracestate`) for the sessions a request
//! starts: [`TraceContextLayer`] makes it the current OpenTelemetry context while the
//! request's service runs, so a session span started there (by `livecount-tower`'s layers,
//! the WebSocket upgrade, a handler) is the caller's span's child. A request without one
//! starts a new trace.

use std::task::{Context, Poll};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{FutureExt as _, WithContext};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The OpenTelemetry context `headers` carry (W3C Trace Context: `traceparent` and
/// `tracestate`; HTTP/1 headers and gRPC metadata alike), on top of the current one.
///
/// ```
/// use opentelemetry::trace::TraceContextExt as _;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert(
///     "traceparent",
///     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".parse().unwrap(),
/// );
/// let cx = livecount_report::otlp::caller_context(&headers);
/// let span = cx.span();
/// assert_eq!(span.span_context().trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
/// assert!(span.span_context().is_remote() && span.span_context().is_sampled());
/// ```
pub fn caller_context(headers: &http::HeaderMap) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&Headers(headers))
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key).and_then(|v| v.to_str().ok())?;
        (key != "traceparent" || well_formed(value)).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Whether `traceparent` has W3C Trace Context's form: `version-traceid-parentid-flags`,
/// lower-case hex of 2, 32, 16 and 2 digits, version `ff` invalid, nothing after the flags
/// in version `00` (a later version may append fields). The SDK's propagator checks the
/// values (no all-zero ids) but takes a trace id of any length up to 32 digits; a header
/// that is not W3C's is no context at all, so the session starts a new trace.
fn well_formed(traceparent: &str) -> bool {
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let mut fields = traceparent.split('-');
    let (Some(version), Some(trace), Some(parent), Some(flags)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    let rest = fields.next().is_some();
    hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && !(version == "00" && rest)
}

/// A tower layer that runs each request's service (its `call` and every poll of its
/// future) in the caller's trace context ([`caller_context`]). Put it outside the layers
/// that start sessions.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceContextLayer;

impl<S> tower_layer::Layer<S> for TraceContextLayer {
    type Service = TraceContextService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TraceContextService { inner }
    }
}

/// The service [`TraceContextLayer`] makes.
#[derive(Clone, Debug)]
pub struct TraceContextService<S> {
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<B>> for TraceContextService<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = WithContext<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let cx = caller_context(request.headers());
        let _current = cx.clone().attach();
        self.inner.call(request).with_context(cx)
    }
}
