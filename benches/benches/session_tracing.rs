//! What tracing a session costs on the tracked start+end pair: one criterion group, one
//! `BenchmarkId` per row (parameter: threads, here 1), side by side in one run.
//!
//!     cargo bench -p livecount-benches --bench session_tracing
//!
//! * `untraced` — a tracker never traced, with `livecount-session`'s `tracing` feature
//!   compiled in: the pair every service pays (compare `session_layer`'s `tracked_pair`
//!   built before the feature existed for the feature's own cost).
//! * `traced_no_subscriber` — `trace_sessions` called, no subscriber anywhere: `tracing`
//!   answers from the callsite's cached interest. Runs first, before any subscriber exists
//!   in the process, as in a service that never installs one.
//! * `traced_ratio_0` — the subscriber a traced service installs (a registry with
//!   `TraceExport::layer`: `tracing-opentelemetry` over the SDK's batch processor), sampling
//!   0: every span is built in `tracing`, none recorded by the SDK.
//! * `traced_ratio_1` — the same, sampling 1: every session a span exported over OTLP/gRPC
//!   to an in-process receiver (tonic, the official protobufs) that decodes and counts it.
//!
//! The export runs on a one-worker tokio runtime beside the measuring thread, as in a
//! service. With sampling 1 the pair makes spans faster than one receiver on a 2-core
//! machine takes them, so the batch processor's queue (2 048 spans) fills and drops the
//! rest without blocking: the row measures what the session's thread pays (building,
//! recording and handing over the span), and the run prints how many of its spans the
//! receiver got. Before each traced row, outside the timing, one session checks the row
//! measures what it says: its span reaches the receiver at sampling 1, none at sampling 0.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use livecount_report::otlp::{TraceExport, traces};
use livecount_session::{EndReason, SessionTracker};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tracing_subscriber::layer::SubscriberExt as _;

/// An OTLP trace receiver that decodes every request and counts its spans.
#[derive(Clone, Default)]
struct Receiver(Arc<AtomicU64>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = (request.into_inner().resource_spans.iter())
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        // Relaxed: a tally read after the export's flush, which orders it.
        self.0.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    fn spans(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The receiver on a free loopback port, served on the current runtime; its endpoint.
async fn receiver() -> (Receiver, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let endpoint = format!("http://{}", listener.local_addr().expect("bound"));
    let receiver = Receiver::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (receiver, endpoint)
}

/// One session, started and ended: the pair.
fn pair(tracker: &SessionTracker) {
    black_box(tracker.start()).end(EndReason::Completed);
}

/// A tracker traced as `b1`.
fn traced() -> SessionTracker {
    let tracker = SessionTracker::new();
    assert!(tracker.trace_sessions("b1"));
    tracker
}

/// An export to `endpoint` sampling `ratio`, and the subscriber a traced service installs.
fn export(endpoint: &str, ratio: f64) -> (TraceExport, tracing::Dispatch) {
    let export = traces(endpoint)
        .sample_ratio(ratio)
        .interval(Duration::from_millis(100))
        .install("b1")
        .expect("the export installs");
    let subscriber = tracing_subscriber::registry().with(export.layer());
    (export, tracing::Dispatch::new(subscriber))
}

fn session_pair(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let _inside = runtime.enter();
    let (receiver, endpoint) = runtime.block_on(receiver());

    let mut group = c.benchmark_group("session_pair");
    group.measurement_time(Duration::from_secs(3));
    let untraced = SessionTracker::new();
    group.bench_function(BenchmarkId::new("untraced", 1), |b| {
        b.iter(|| pair(&untraced));
    });
    // No subscriber has existed in this process yet: `tracing` knows no one is interested.
    let no_subscriber = traced();
    group.bench_function(BenchmarkId::new("traced_no_subscriber", 1), |b| {
        b.iter(|| pair(&no_subscriber));
    });
    for (name, ratio) in [("traced_ratio_0", 0.0), ("traced_ratio_1", 1.0)] {
        let (export, dispatch) = export(&endpoint, ratio);
        let tracker = traced();
        // Outside the timing, the row measures what it says: one session under the
        // subscriber reaches the receiver at sampling 1, and nothing does at sampling 0.
        let probe = receiver.spans();
        tracing::dispatcher::with_default(&dispatch, || pair(&tracker));
        runtime.block_on(export.flush()).expect("the flush");
        let seen = receiver.spans() - probe;
        assert_eq!(seen > 0, ratio > 0.0, "{name}: {seen} spans of one session");

        let before = receiver.spans();
        tracing::dispatcher::with_default(&dispatch, || {
            group.bench_function(BenchmarkId::new(name, 1), |b| {
                b.iter(|| pair(&tracker));
            });
        });
        runtime.block_on(export.flush()).expect("the flush");
        let stats = export.stats();
        runtime.block_on(export.shutdown()).expect("the shutdown");
        let sessions = tracker.snapshot().started - 1; // the probe's is not the row's
        let spans = receiver.spans() - before;
        if sessions > 0 {
            eprintln!(
                "{name}: {sessions} sessions, {spans} spans received ({:.1} %), exports {stats:?}",
                100.0 * spans as f64 / sessions as f64
            );
        }
        assert!(ratio > 0.0 || spans == 0, "{name}: {spans} spans received");
    }
    group.finish();
}

criterion_group!(benches, session_pair);
criterion_main!(benches);
