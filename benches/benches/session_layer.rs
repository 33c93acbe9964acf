//! What counting a request as a session costs: one criterion group, one `BenchmarkId` per
//! contender (parameter: threads, here 1), side by side in one run.
//!
//!     cargo bench -p livecount-benches --bench session_layer
//!
//! * `tracked_pair` — a session started and ended on a tracker: the floor every row above
//!   the bare service pays.
//! * `bare_service` — a ready tower service answering a one-frame body, called, polled and
//!   its body drained: the baseline.
//! * `layer_no_limits` — the same under `SessionLayer::without_limits()`: a session per
//!   request, nothing else.
//! * `layer_default` — `SessionLayer::new` with its default limits (maximum length, write
//!   timeout, the client's `grpc-timeout`): the response body watched for the sweeper.
//! * `layer_watched` — the layer a `Backend` mounts: the first-frame timeout on, so the
//!   request body is watched too (the request here is complete at once, as a `GET` is).
//!
//! The limits need a runtime for their sweeper: the rows run inside a one-worker tokio
//! runtime whose sweeper runs as it would in a service.

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body::Body;
use http_body_util::{Empty, Full};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::{SessionLayer, StreamLimits};
use tower_layer::Layer;
use tower_service::Service;

/// The inner service: ready at once, a one-frame body.
#[derive(Clone, Copy)]
struct Ready;

impl<B> Service<Request<B>> for Ready {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        std::future::ready(Ok(Response::new(Full::new(Bytes::from_static(b"x")))))
    }
}

/// Calls `service` once, polls its future and drains its body: one request, start to end.
fn one_request<S, B>(service: &mut S, cx: &mut Context<'_>)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: Body,
{
    let mut future = pin!(service.call(Request::new(Empty::new())));
    let Poll::Ready(Ok(response)) = future.as_mut().poll(cx) else {
        panic!("the service is ready");
    };
    let mut body = pin!(response.into_body());
    while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(cx) {
        black_box(frame.is_ok());
    }
}

fn bench<S, B>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut service: S,
) where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>>,
    S::Error: std::fmt::Debug,
    B: Body,
{
    let mut cx = Context::from_waker(Waker::noop());
    c.bench_function(BenchmarkId::new(name, 1), |b| {
        b.iter(|| one_request(&mut service, &mut cx));
    });
}

fn per_request(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("a runtime");
    let _inside = runtime.enter();
    let mut group = c.benchmark_group("per_request");
    group.measurement_time(Duration::from_secs(3));

    let tracker: SessionTracker = SessionTracker::new();
    group.bench_function(BenchmarkId::new("tracked_pair", 1), |b| {
        b.iter(|| black_box(tracker.start()).end(EndReason::Completed));
    });
    bench(&mut group, "bare_service", Ready);
    let tracker: SessionTracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker).without_limits();
    bench(&mut group, "layer_no_limits", layer.layer(Ready));
    let tracker: SessionTracker = SessionTracker::new();
    bench(
        &mut group,
        "layer_default",
        SessionLayer::new(tracker).layer(Ready),
    );
    let tracker: SessionTracker = SessionTracker::new();
    let layer =
        SessionLayer::new(tracker).first_frame_timeout(StreamLimits::DEFAULT_FIRST_FRAME_TIMEOUT);
    bench(&mut group, "layer_watched", layer.layer(Ready));
    group.finish();
}

criterion_group!(benches, per_request);
criterion_main!(benches);
