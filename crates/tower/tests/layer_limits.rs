//! `SessionLayer`'s limits on a real tonic server on loopback, mounted as a service author
//! would (`Server::builder().layer(SessionLayer::new(tracker)…)`), against clients that go
//! silent, stop reading, send too much, reset or drop their calls. After each: the status the
//! client got, and the tracker settled with active 0, started = ended and the exact reasons.

mod common;
#[path = "common/raw_h2.rs"]
mod raw_h2;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::SessionLayer;
use raw_h2::raw_h2;
use tokio::net::TcpListener;
use tonic::server::NamedService;
use tonic::transport::{Endpoint, Server, server::TcpIncoming};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// Generous bound on every wait (a noisy CI machine), never a performance claim.
const PATIENCE: Duration = Duration::from_secs(10);

/// The short limit the timed tests use.
const LIMIT: Duration = Duration::from_millis(200);

// === the server ===

/// A hand-made gRPC service without codegen: `Flood` streams 1 KiB messages for as long as
/// it is read, `Drain` reads its whole request and answers OK (or INTERNAL if it cannot).
#[derive(Clone, Debug)]
struct Raw;

impl NamedService for Raw {
    const NAME: &'static str = "test.Raw";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One gRPC message: flag, declared length, bytes.
fn grpc_message(declared_len: u32, bytes: &[u8]) -> Bytes {
    let mut out = vec![0];
    out.extend_from_slice(&declared_len.to_be_bytes());
    out.extend_from_slice(bytes);
    out.into()
}

fn grpc_head(status: &'static str) -> http::Response<tonic::body::Body> {
    http::Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", status)
        .body(tonic::body::Body::empty())
        .unwrap()
}

impl tower::Service<http::Request<tonic::body::Body>> for Raw {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move {
            if request.uri().path() == "/test.Raw/Flood" {
                let kib = grpc_message(1019, &[7; 1019]);
                let frames =
                    stream::repeat_with(move || Ok::<_, Infallible>(Frame::data(kib.clone())));
                let body = tonic::body::Body::new(StreamBody::new(frames));
                return Ok(http::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(body)
                    .unwrap());
            }
            match request.into_body().collect().await {
                Ok(_) => Ok(grpc_head("0")),
                Err(_) => Ok(grpc_head("13")),
            }
        })
    }
}

/// Serves Health (its `Watch` a server stream) and [`Raw`] under `layer` on loopback.
macro_rules! serve {
    ($layer:expr) => {{
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = Server::builder()
            .layer($layer)
            .add_service(tonic_health::server::health_reporter().1)
            .add_service(Raw)
            .serve_with_incoming(TcpIncoming::from(listener));
        let task = tokio::spawn(server);
        (addr, tokio_util::task::AbortOnDropHandle::new(task))
    }};
}

// === clients ===

/// A `Health/Watch` stream through tonic's client, past its first answer (`SERVING`).
async fn watch(addr: SocketAddr) -> tonic::Streaming<tonic_health::pb::HealthCheckResponse> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let channel = tokio::time::timeout(PATIENCE, endpoint.connect())
        .await
        .unwrap()
        .unwrap();
    let mut client = HealthClient::new(channel);
    let call = client.watch(HealthCheckRequest::default());
    let mut stream = tokio::time::timeout(PATIENCE, call)
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(PATIENCE, stream.message())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.unwrap().status, ServingStatus::Serving as i32);
    stream
}

/// The status a stream ended with.
async fn final_status(
    mut stream: tonic::Streaming<tonic_health::pb::HealthCheckResponse>,
) -> tonic::Status {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return tonic::Status::ok(""),
                Err(status) => return status,
            }
        }
    })
    .await
    .expect("the stream ends within the patience")
}

/// The `grpc-status` and `grpc-message` a raw call ended with (trailers, or a trailers-only
/// head), reading and releasing everything on the way.
async fn raw_status(response: h2::client::ResponseFuture) -> (String, String) {
    tokio::time::timeout(PATIENCE, async move {
        let response = response.await.unwrap();
        let header =
            |h: &http::HeaderMap, name: &str| h.get(name).map(|v| v.to_str().unwrap().to_owned());
        if let Some(status) = header(response.headers(), "grpc-status") {
            return (
                status,
                header(response.headers(), "grpc-message").unwrap_or_default(),
            );
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.unwrap().len());
        }
        let trailers = body.trailers().await.unwrap().expect("trailers");
        (
            header(&trailers, "grpc-status").unwrap(),
            header(&trailers, "grpc-message").unwrap_or_default(),
        )
    })
    .await
    .expect("the call ends within the patience")
}

// === checks ===

/// Waits until every session of `tracker` has ended, then checks `started` sessions ended
/// with exactly `reasons`.
async fn settled(tracker: &SessionTracker, started: u64, reasons: &[(EndReason, u64)]) {
    common::settle(
        || tracker.snapshot().ended >= started,
        "every session ended",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await; // nothing more is to come
    let s = tracker.snapshot();
    assert!(s.is_consistent());
    assert_eq!(
        (s.started, s.ended, s.active),
        (started, started, 0),
        "{s:?}"
    );
    for (reason, n) in reasons {
        assert_eq!(s.ended_by(*reason), *n, "{reason}: {:?}", s.ended_by_reason);
    }
}

// === the tests ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_ends_idle_disconnected_with_deadline_exceeded() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).idle_timeout(LIMIT));
    let began = Instant::now();
    let stream = watch(addr).await; // SERVING, then nothing: the status never changes
    let status = final_status(stream).await;
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "idle timeout");
    assert!(
        began.elapsed() >= LIMIT,
        "not before the limit: {:?}",
        began.elapsed()
    );
    settled(&tracker, 1, &[(EndReason::Disconnected, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_max_session_length_ends_timed_out_with_deadline_exceeded() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).max_session(LIMIT));
    let began = Instant::now();
    let status = final_status(watch(addr).await).await;
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "max session length");
    assert!(
        began.elapsed() >= LIMIT,
        "not before the limit: {:?}",
        began.elapsed()
    );
    settled(&tracker, 1, &[(EndReason::TimedOut, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_is_disconnected_and_its_count_freed() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).write_timeout(LIMIT));
    // A 64-byte window that is never released: the second 1 KiB message waits for good.
    let mut stalled = raw_h2(addr, 64).await;
    let (response, _request) = stalled.call("/test.Raw/Flood").await;
    let _response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    common::settle(|| tracker.active() == 1, "the flood is counted").await;
    let began = Instant::now();
    common::settle(|| tracker.active() == 0, "the stalled session ended").await;
    assert!(
        began.elapsed() < LIMIT * 10,
        "freed in {:?}",
        began.elapsed()
    );
    settled(&tracker, 1, &[(EndReason::Disconnected, 1)]).await;
    drop(stalled); // the connection goes: nothing is counted twice
    settled(&tracker, 1, &[(EndReason::Disconnected, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_keeps_reading_is_not_stalled() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).write_timeout(LIMIT));
    let mut reader = raw_h2(addr, 2048).await;
    let (response, mut request) = reader.call("/test.Raw/Flood").await;
    let response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    let mut body = response.into_body();
    // Reads slowly (at most 2 KiB, then a 50 ms pause) for five write timeouts: always
    // behind, each frame waiting, but every frame taken within the timeout.
    let until = Instant::now() + LIMIT * 5;
    while Instant::now() < until {
        let chunk = tokio::time::timeout(PATIENCE, body.data()).await.unwrap();
        let chunk = chunk.expect("the stream goes on").unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    assert_eq!(tracker.active(), 1, "{:?}", tracker.snapshot());
    request.send_reset(h2::Reason::CANCEL);
    settled(&tracker, 1, &[(EndReason::Cancelled, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_fails_with_resource_exhausted() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).max_request_message(1024));
    let mut h2 = raw_h2(addr, 65_535).await;
    // Within the limit: served.
    let (response, mut request) = h2.call("/test.Raw/Drain").await;
    request
        .send_data(grpc_message(1024, &[1; 1024]), true)
        .unwrap();
    assert_eq!(raw_status(response).await.0, "0");
    // A prefix declaring a mebibyte: refused before its bytes come.
    let (response, mut request) = h2.call("/test.Raw/Drain").await;
    request
        .send_data(grpc_message(1 << 20, &[1; 16]), false)
        .unwrap();
    let (status, message) = raw_status(response).await;
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("8", "request message above the limit")
    );
    settled(
        &tracker,
        2,
        &[(EndReason::Completed, 1), (EndReason::Failed, 1)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_mid_stream_and_a_dropped_call_are_cancelled() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()));
    let mut h2 = raw_h2(addr, 65_535).await;
    // A Watch read past its first message, then reset.
    let (response, mut request) = h2.call("/grpc.health.v1.Health/Watch").await;
    request.send_data(grpc_message(0, &[]), true).unwrap(); // its one request message
    let response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    let mut body = response.into_body();
    tokio::time::timeout(PATIENCE, body.data())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    request.send_reset(h2::Reason::CANCEL);
    settled(&tracker, 1, &[(EndReason::Cancelled, 1)]).await;
    // A tonic client dropping its Watch call (h2 resets the stream).
    let stream = watch(addr).await;
    drop(stream);
    settled(&tracker, 2, &[(EndReason::Cancelled, 2)]).await;
    // A flood whose raw client drops the call once its head came.
    let (response, request) = h2.call("/test.Raw/Flood").await;
    let response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    drop((response, request));
    settled(&tracker, 3, &[(EndReason::Cancelled, 3)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_capped_tracker_admits_exactly_the_cap() {
    const CAP: u64 = 50;
    const CALLS: u64 = 2_000;
    const CHANNELS: u64 = 10; // 200 calls each: hyper's default stream limit per connection
    let tracker = SessionTracker::with_max_sessions(CAP);
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()));
    let mut channels = Vec::new();
    for _ in 0..CHANNELS {
        let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
        channels.push(
            tokio::time::timeout(PATIENCE, endpoint.connect())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let (tracker, peak) = (tracker.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                peak.fetch_max(tracker.active(), std::sync::atomic::Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        })
    };
    let (release, gate) = tokio::sync::watch::channel(false);
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let mut client = HealthClient::new(channels[(i % CHANNELS) as usize].clone());
            let mut gate = gate.clone();
            tokio::spawn(async move {
                match client.watch(HealthCheckRequest::default()).await {
                    Ok(response) => {
                        let _stream = response.into_inner(); // held open until released
                        let _ = gate.wait_for(|open| *open).await;
                        Ok(())
                    }
                    Err(status) => Err(status),
                }
            })
        })
        .collect();
    common::settle(
        || tracker.snapshot().refused == CALLS - CAP && tracker.active() == CAP,
        "every call admitted or refused",
    )
    .await;
    release.send(true).unwrap();
    let (mut admitted, mut refused) = (0, 0);
    for call in calls {
        match tokio::time::timeout(PATIENCE, call).await.unwrap().unwrap() {
            Ok(()) => admitted += 1,
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                assert_eq!(status.message(), format!("at capacity: {CAP} sessions"));
                refused += 1;
            }
        }
    }
    sampler.abort();
    assert_eq!((admitted, refused), (CAP, CALLS - CAP));
    assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= CAP);
    settled(&tracker, CAP, &[(EndReason::Cancelled, CAP)]).await;
    let s = tracker.snapshot();
    assert_eq!(s.refused, CALLS - CAP, "each refusal counted once: {s:?}");
}
