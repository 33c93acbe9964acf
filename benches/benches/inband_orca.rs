//! What in-band ORCA costs per response: one criterion group, one `BenchmarkId` per
//! contender (parameter: threads, here 1), all side by side.
//!
//!     cargo bench -p livecount-benches --bench inband_orca
//!
//! * `bare_service` — a ready tower service answering an empty response, polled once: the
//!   baseline every other row adds to.
//! * `layer_text`, `layer_bin` — the same service under `InbandOrcaLayer` (an HTTP
//!   request gets the `TEXT` header; the `bin` row attaches `endpoint-load-metrics-bin`):
//!   the layer's cost per response is the difference from `bare_service`.
//! * `attach_checked` — what the layer does per HTTP response, alone: one atomic load to
//!   see that no report was published since its service's encodings were made
//!   (`InbandOrca::is_current`), the value's reference-count increment, and the insert into
//!   a header map that already has room (and the value's drop when the map is cleared).
//! * `attach_shared` — the same through `InbandOrca::value` (the publish count, an
//!   arc-swap load of the shared encodings): what a gRPC call's trailers cost.
//! * `part_insert`, `part_clone_drop`, `part_is_current` — the attach in pieces: the insert
//!   of a fixed value under the header's name (and the map's clear), a shared value's
//!   reference-count increment and decrement, and the publish-count check.
//! * `encode_per_response` — the alternative the cache avoids: building the ORCA report
//!   and encoding it (`BIN`) for every response.
//!
//! The board is not republished during a run: every row after the first response reads
//! the cached encoding, as every response between two reports does.

use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderName, Request, Response};
use livecount_capacity::CapacityConfig;
use livecount_report::LoadBoard;
use livecount_report::inband::{InbandFormat, InbandOrca, encode_bin};
use livecount_report::orca::orca_report;
use livecount_session::SessionTracker;
use livecount_tower::grpc::InbandOrcaLayer;
use tower_layer::Layer;
use tower_service::Service;

/// A board with one published report (a few sessions open, so every named metric is set).
fn board() -> Arc<LoadBoard> {
    let config = CapacityConfig::builder()
        .build()
        .expect("defaults are valid");
    let board = Arc::new(LoadBoard::builder("b1", config).max_sessions(1000).build());
    let tracker: SessionTracker = SessionTracker::default();
    let open: Vec<_> = (0..7).map(|_| tracker.start()).collect();
    board.publish(tracker.snapshot());
    drop(open);
    board
}

/// The inner service: ready at once, an empty 200 with one header (as real responses have).
#[derive(Clone, Copy)]
struct Ready;

impl Service<Request<()>> for Ready {
    type Response = Response<()>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Response<()>, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        let mut response = Response::new(());
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        std::future::ready(Ok(response))
    }
}

/// Calls `service` once and polls its future to the response (it is always ready).
fn respond<S, R>(service: &mut S) -> R
where
    S: Service<Request<()>, Response = R>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let future = pin!(service.call(Request::new(())));
    match future.poll(&mut cx) {
        Poll::Ready(r) => r.expect("infallible"),
        Poll::Pending => unreachable!("the inner service is always ready"),
    }
}

fn inband_orca(c: &mut Criterion) {
    let board = board();
    let mut group = c.benchmark_group("inband_orca");
    group.bench_function(BenchmarkId::new("bare_service", 1), |b| {
        let mut service = Ready;
        b.iter(|| black_box(respond(&mut service)))
    });
    for (name, format) in [
        ("layer_text", InbandFormat::Text),
        ("layer_bin", InbandFormat::Bin),
    ] {
        let layer = InbandOrcaLayer::new(Arc::clone(&board)).http_format(Some(format));
        let mut service = layer.layer(Ready);
        group.bench_function(BenchmarkId::new(name, 1), |b| {
            b.iter(|| black_box(respond(&mut service)))
        });
    }
    let inband = InbandOrca::new(Arc::clone(&board));
    let name = HeaderName::from_static("endpoint-load-metrics-bin");
    let mut headers = HeaderMap::with_capacity(8);
    let encoded = inband.current();
    group.bench_function(BenchmarkId::new("attach_checked", 1), |b| {
        b.iter(|| {
            assert!(inband.is_current(black_box(&encoded)));
            let value = encoded.value(black_box(InbandFormat::Bin)).clone();
            headers.insert(name.clone(), value);
            black_box(&headers);
            headers.clear();
        })
    });
    group.bench_function(BenchmarkId::new("attach_shared", 1), |b| {
        b.iter(|| {
            headers.insert(name.clone(), inband.value(black_box(InbandFormat::Bin)));
            black_box(&headers);
            headers.clear();
        })
    });
    let fixed = http::HeaderValue::from_static("TEXT eps=1");
    group.bench_function(BenchmarkId::new("part_insert", 1), |b| {
        b.iter(|| {
            headers.insert(name.clone(), black_box(&fixed).clone());
            black_box(&headers);
            headers.clear();
        })
    });
    let shared = encoded.value(InbandFormat::Bin).clone();
    group.bench_function(BenchmarkId::new("part_clone_drop", 1), |b| {
        b.iter(|| black_box(black_box(&shared).clone()))
    });
    group.bench_function(BenchmarkId::new("part_is_current", 1), |b| {
        b.iter(|| black_box(inband.is_current(black_box(&encoded))))
    });
    group.bench_function(BenchmarkId::new("encode_per_response", 1), |b| {
        b.iter(|| black_box(encode_bin(&orca_report(&board.latest()))))
    });
    group.finish();
}

criterion_group!(benches, inband_orca);
criterion_main!(benches);
