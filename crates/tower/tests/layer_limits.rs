//! `SessionLayer`'s limits on a real tonic server on loopback, mounted as a service author
//! would (`Server::builder().layer(SessionLayer::new(tracker)…)`), against clients that go
//! silent, stop reading, send too much, outlive their `grpc-timeout`, reset, drop their
//! calls or their connection, or are not gRPC at all (`GrpcOnlyLayer`). After each: the
//! status the client got, and the tracker settled with active 0, started = ended and the
//! exact reasons.

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
use livecount::PerThread;
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::body::Inspected;
use livecount_tower::grpc::GrpcOnlyLayer;
use livecount_tower::{CountAll, SessionLayer};
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
/// it is read, `Drain` reads its whole request and answers OK (or INTERNAL if it cannot),
/// `Echo` answers each request frame with its bytes from a task reading the request, and
/// ends OK once the request ends cleanly.
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
            if request.uri().path() == "/test.Raw/Echo" {
                return Ok(echo(request.into_body()));
            }
            match request.into_body().collect().await {
                Ok(_) => Ok(grpc_head("0")),
                Err(_) => Ok(grpc_head("13")),
            }
        })
    }
}

/// `Echo`'s answer: the request's frames back, from a task of their own; OK trailers once the
/// request ends cleanly, and nothing more if it fails.
fn echo(mut request: tonic::body::Body) -> http::Response<tonic::body::Body> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    tokio::spawn(async move {
        while let Some(frame) = request.frame().await {
            let Ok(frame) = frame else { return }; // failed: the layer said why
            if let Ok(data) = frame.into_data()
                && tx.send(Ok(Frame::data(data))).await.is_err()
            {
                return;
            }
        }
        let mut ok = http::HeaderMap::new();
        ok.insert("grpc-status", http::HeaderValue::from_static("0"));
        let _ = tx.send(Ok(Frame::trailers(ok))).await;
    });
    let frames = stream::poll_fn(move |cx| rx.poll_recv(cx));
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(tonic::body::Body::new(StreamBody::new(frames)))
        .unwrap()
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

// === gRPC's own edges: the client's deadline, not gRPC at all, reset vs dead connection ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_past_its_grpc_timeout_ends_timed_out_with_deadline_exceeded() {
    const DEADLINE: Duration = Duration::from_millis(300);
    let tracker = SessionTracker::new();
    // A write timeout of `LIMIT` makes the sweeper's period 50 ms; nothing stalls.
    let (addr, _server) = serve!(SessionLayer::new(tracker.clone()).write_timeout(LIMIT));
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let mut client = HealthClient::new(endpoint.connect().await.unwrap());
    let began = Instant::now();
    let mut request = tonic::Request::new(HealthCheckRequest::default());
    request.set_timeout(DEADLINE); // grpc-timeout: 300000u (tonic writes microseconds)
    let call = tokio::time::timeout(PATIENCE, client.watch(request)).await;
    let stream = call.unwrap().unwrap().into_inner();
    let status = final_status(stream).await;
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "deadline exceeded (grpc-timeout)");
    assert!(
        began.elapsed() >= DEADLINE,
        "not before the deadline: {:?}",
        began.elapsed()
    );
    settled(&tracker, 1, &[(EndReason::TimedOut, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_grpc_gets_415_and_is_no_session() {
    let tracker = SessionTracker::new();
    let layers = tower::ServiceBuilder::new()
        .layer(GrpcOnlyLayer::new())
        .layer(SessionLayer::new(tracker.clone()))
        .into_inner();
    let (addr, _server) = serve!(layers);
    let mut h2 = raw_h2(addr, 65_535).await;
    for content_type in ["application/json", "text/plain", "application/grp"] {
        let (response, mut request) = h2.call_as("/test.Raw/Drain", content_type).await;
        // The answer may come (and the stream close) before this is sent.
        let _ = request.send_data(grpc_message(0, &[]), true);
        let response = tokio::time::timeout(PATIENCE, response).await.unwrap();
        let response = response.unwrap();
        assert_eq!(response.status(), http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let headers = response.headers();
        assert_eq!(headers["grpc-status"], "3", "{content_type}");
        let message = headers["grpc-message"].to_str().unwrap();
        assert!(message.contains(content_type), "{message}");
    }
    assert_eq!(tracker.snapshot().started, 0, "nothing counted");
    // gRPC itself, any subtype, is served and counted.
    for content_type in ["application/grpc", "application/grpc+proto"] {
        let (response, mut request) = h2.call_as("/test.Raw/Drain", content_type).await;
        request.send_data(grpc_message(0, &[]), true).unwrap();
        assert_eq!(raw_status(response).await.0, "0");
    }
    settled(&tracker, 2, &[(EndReason::Completed, 2)]).await;
}

/// The layer for the request-body tests: watched, and leaving a dropped response to the
/// service for far longer than the tests wait, so only the request body's failure can end
/// a session in time.
fn inspected(tracker: &SessionTracker) -> SessionLayer<PerThread, (), CountAll, Inspected> {
    SessionLayer::new(tracker.clone())
        .max_request_message(1 << 20)
        .leave_drops_to_service(PATIENCE * 6)
}

/// Opens an `Echo` call and has one message echoed, so the handler is reading.
async fn echoing(
    h2: &mut raw_h2::RawH2,
    end_stream: bool,
) -> (h2::RecvStream, h2::SendStream<Bytes>) {
    let (response, mut request) = h2.call("/test.Raw/Echo").await;
    request
        .send_data(grpc_message(3, b"hey"), end_stream)
        .unwrap();
    let response = tokio::time::timeout(PATIENCE, response).await.unwrap();
    let mut body = response.unwrap().into_body();
    let echoed = tokio::time::timeout(PATIENCE, body.data()).await.unwrap();
    assert_eq!(echoed.unwrap().unwrap().len(), 8);
    (body, request)
}

/// Waits (at most 2 s: far less than the drop grace) until `tracker` has no session left.
async fn ended_at_once(tracker: &SessionTracker) {
    let ended = tokio::time::timeout(Duration::from_secs(2), async {
        while tracker.active() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(
        ended.await.is_ok(),
        "not ended at once: {:?}",
        tracker.snapshot()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_while_the_handler_reads_is_cancelled_at_once() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(inspected(&tracker));
    let mut h2 = raw_h2(addr, 65_535).await;
    let (_body, mut request) = echoing(&mut h2, false).await;
    request.send_reset(h2::Reason::CANCEL);
    ended_at_once(&tracker).await;
    settled(&tracker, 1, &[(EndReason::Cancelled, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_with_another_code_is_a_broken_stream_disconnected() {
    // What Envoy sends upstream when its client's connection dies.
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(inspected(&tracker));
    let mut h2 = raw_h2(addr, 65_535).await;
    let (_body, mut request) = echoing(&mut h2, false).await;
    request.send_reset(h2::Reason::INTERNAL_ERROR);
    ended_at_once(&tracker).await;
    settled(&tracker, 1, &[(EndReason::Disconnected, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_while_the_handler_reads_is_disconnected() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(inspected(&tracker));
    let mut h2 = raw_h2(addr, 65_535).await;
    let (body, request) = echoing(&mut h2, false).await;
    // The connection task goes, and the socket with it, before the stream handles could
    // send a reset (h2 resets the streams of handles dropped while their stream is open).
    drop(h2);
    ended_at_once(&tracker).await;
    drop((body, request));
    settled(&tracker, 1, &[(EndReason::Disconnected, 1)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_half_close_is_never_a_cancel() {
    let tracker = SessionTracker::new();
    let (addr, _server) = serve!(inspected(&tracker));
    let mut h2 = raw_h2(addr, 65_535).await;
    for _ in 0..20 {
        let (mut body, _request) = echoing(&mut h2, true).await; // the message, then END_STREAM
        let trailers = tokio::time::timeout(PATIENCE, body.trailers()).await;
        let trailers = trailers.unwrap().unwrap().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
    }
    settled(&tracker, 20, &[(EndReason::Completed, 20)]).await;
}
