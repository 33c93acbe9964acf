//! Session spans out over OTLP/gRPC into an in-process `TraceService` (the official
//! protobufs' tonic server): the span's name, kind, attributes and events as the tracker
//! made them, its parent the caller's `traceparent`, and parent-based ratio sampling.

#![cfg(feature = "otlp-traces")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use livecount_report::otlp::{TraceContextLayer, caller_context, traces};
use livecount_session::{EndReason, Phase, SessionTracker, trace};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use tracing_subscriber::prelude::*;

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// A receiver on a free loopback port, and its endpoint.
    async fn start() -> (Self, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let receiver = Receiver::default();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        (receiver, endpoint)
    }

    fn spans(&self) -> Vec<Span> {
        let requests = self.0.lock().unwrap();
        requests
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }
}

fn attr(
    span_attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<Value> {
    span_attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn caller() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert("traceparent", TRACEPARENT.parse().unwrap());
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_spans_go_out_as_the_tracker_made_them() {
    let (receiver, endpoint) = Receiver::start().await;
    let export = traces(&endpoint)
        .interval(Duration::from_millis(100))
        .install("b1")
        .unwrap();
    let tracker = SessionTracker::new();
    tracker.trace_sessions("b1");
    let subscriber = tracing_subscriber::registry().with(export.layer());
    let ids = tracing::subscriber::with_default(subscriber, || {
        let _caller = caller_context(&caller()).attach();
        let mut session = tracker.start();
        session.trace_transport("grpc");
        session.set_phase(Phase::Generating);
        session.note_first_chunk();
        session.note_interrupt();
        session.set_phase(Phase::Listening);
        session.end(EndReason::Completed);
        let first = session.id().as_u64();
        drop(session);
        drop(_caller);
        let orphan = tracker.start(); // no caller: a trace of its own
        let second = orphan.id().as_u64();
        drop(orphan);
        [first, second]
    });
    export.flush().await.unwrap();
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let first = &spans[0];
    assert_eq!(first.name, trace::SPAN);
    assert_eq!(first.kind, SpanKind::Server as i32);
    assert_eq!(hex(&first.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex(&first.parent_span_id), "b7ad6b7169203331");
    // (tracing-opentelemetry sends a `u64` as its decimal string.)
    assert_eq!(
        attr(&first.attributes, trace::attr::ID),
        Some(Value::StringValue(ids[0].to_string()))
    );
    assert_eq!(
        attr(&first.attributes, trace::attr::BACKEND),
        Some(Value::StringValue("b1".into()))
    );
    assert_eq!(
        attr(&first.attributes, trace::attr::TRANSPORT),
        Some(Value::StringValue("grpc".into()))
    );
    assert_eq!(
        attr(&first.attributes, trace::attr::END_REASON),
        Some(Value::StringValue("completed".into()))
    );
    assert!(
        matches!(attr(&first.attributes, trace::attr::DURATION), Some(Value::DoubleValue(d)) if d >= 0.0)
    );
    let events: Vec<_> = first.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        events,
        [
            trace::event::PHASE,
            trace::event::FIRST_CHUNK,
            trace::event::INTERRUPT,
            trace::event::PHASE,
            trace::event::END
        ]
    );
    assert_eq!(
        attr(&first.events[0].attributes, trace::attr::PHASE),
        Some(Value::StringValue("generating".into()))
    );
    let second = &spans[1];
    assert_ne!(second.trace_id, first.trace_id);
    assert!(second.parent_span_id.is_empty());
    assert_eq!(
        attr(&second.attributes, trace::attr::END_REASON),
        Some(Value::StringValue("dropped".into()))
    );
    assert_eq!(export.stats().failed, 0);
    export.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ratio_zero_samples_only_what_a_sampled_caller_asks_for() {
    let (receiver, endpoint) = Receiver::start().await;
    let export = traces(&endpoint).sample_ratio(0.0).install("b1").unwrap();
    let tracker = SessionTracker::new();
    tracker.trace_sessions("b1");
    let subscriber = tracing_subscriber::registry().with(export.layer());
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..10 {
            drop(tracker.start()); // no caller: never sampled
        }
        let _caller = caller_context(&caller()).attach();
        drop(tracker.start()); // the caller sampled its trace: so is this
    });
    export.flush().await.unwrap();
    let spans = receiver.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(hex(&spans[0].parent_span_id), "b7ad6b7169203331");
}

#[tokio::test]
async fn bad_settings_are_refused_by_name() {
    let bad = [
        traces("http://127.0.0.1:4317").sample_ratio(1.5),
        traces("http://127.0.0.1:4317").sample_ratio(f64::NAN),
        traces("http://127.0.0.1:4317").interval(Duration::from_millis(1)),
        traces("http://127.0.0.1:4317").timeout(Duration::ZERO),
        traces("127.0.0.1:4317"),
    ];
    let errors: Vec<String> = bad
        .into_iter()
        .map(|b| b.install("b1").unwrap_err().to_string())
        .collect();
    assert!(errors[0].contains("ratio 1.5"), "{errors:?}");
    assert!(errors[1].contains("ratio NaN"), "{errors:?}");
    assert!(errors[2].contains("interval"), "{errors:?}");
    assert!(errors[3].contains("timeout"), "{errors:?}");
    assert!(errors[4].contains("127.0.0.1:4317"), "{errors:?}");
}

/// The layer runs the request's service in the caller's context.
#[tokio::test]
async fn the_layer_makes_the_callers_context_current_for_the_service() {
    use opentelemetry::trace::TraceContextExt as _;
    use tower::{Layer as _, ServiceExt as _};
    let service = TraceContextLayer.layer(tower::service_fn(|_: http::Request<()>| async {
        let cx = opentelemetry::Context::current();
        Ok::<_, std::convert::Infallible>(cx.span().span_context().trace_id().to_string())
    }));
    let mut request = http::Request::new(());
    *request.headers_mut() = caller();
    let seen = service.clone().oneshot(request).await.unwrap();
    assert_eq!(seen, "0af7651916cd43dd8448eb211c80319c");
    let seen = service.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(
        seen, "00000000000000000000000000000000",
        "no caller, no context"
    );
}

/// A malformed `traceparent` is no context (a new trace), never an error; `tracestate`
/// travels with a valid one.
#[test]
fn a_malformed_traceparent_starts_a_new_trace_and_tracestate_is_kept() {
    use opentelemetry::trace::TraceContextExt as _;
    let malformed = [
        "",
        "garbage",
        // version ff is invalid
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        // an all-zero trace id, an all-zero span id
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        // too short, not hex, upper case
        "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
        // a field more than version 00 has, a flags field too long
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-011",
    ];
    for value in malformed {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", value.parse().unwrap());
        let cx = caller_context(&headers);
        assert!(
            !cx.span().span_context().is_valid(),
            "{value:?} gave a context"
        );
    }
    // A later version may append fields.
    let mut headers = http::HeaderMap::new();
    let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future";
    headers.insert("traceparent", later.parse().unwrap());
    assert!(caller_context(&headers).span().span_context().is_valid());
    let mut headers = caller();
    headers.insert("tracestate", "vendor=abc,other=1".parse().unwrap());
    let cx = caller_context(&headers);
    let context = cx.span().span_context().clone();
    assert!(context.is_valid() && context.is_remote());
    assert_eq!(context.trace_state().get("vendor"), Some("abc"));
    assert_eq!(context.trace_state().get("other"), Some("1"));
}
