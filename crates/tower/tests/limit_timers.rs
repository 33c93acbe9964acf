//! `SessionLayer`'s limits on tokio's paused clock: each limit ends its session at the limit
//! (within the sweeper's granularity) and never before, with its reason and its answer, and
//! the answers at capacity. Bodies are polled by hand, so "the transport stopped polling"
//! is exactly what the test does.

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use common::{ChannelBody, FrameSender, channel_body, poll_frame_now};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::SessionLayer;
use livecount_tower::body::{RequestBody, SessionBody};
use tower::{Service, ServiceBuilder, ServiceExt};

const LIMIT: Duration = Duration::from_secs(4);
/// The sweeper's period for `LIMIT` (a quarter of it): ends come at most two of these late.
const PERIOD: Duration = Duration::from_secs(1);

/// Lets time pass on the paused clock, running every task woken meanwhile.
async fn pass(d: Duration) {
    let step = Duration::from_millis(100);
    let mut passed = Duration::ZERO;
    while passed < d {
        tokio::time::advance(step.min(d - passed)).await;
        passed += step;
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
}

fn grpc_response(body: ChannelBody) -> Response<ChannelBody> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    response
}

/// A counted gRPC response whose body is fed by the returned sender.
async fn grpc_stream(
    layer: SessionLayer,
) -> (FrameSender, std::pin::Pin<Box<SessionBody<ChannelBody>>>) {
    grpc_stream_for(layer, Request::new(())).await
}

/// A gRPC call (`content-type: application/grpc`) with `grpc-timeout: timeout`.
fn grpc_call(timeout: &str) -> Request<()> {
    let mut request = grpc_plain();
    request
        .headers_mut()
        .insert("grpc-timeout", timeout.parse().unwrap());
    request
}

/// A gRPC call (`content-type: application/grpc`) without a deadline.
fn grpc_plain() -> Request<()> {
    Request::post("/svc/Method")
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}

/// [`grpc_stream`] for `request`.
async fn grpc_stream_for(
    layer: SessionLayer,
    request: Request<()>,
) -> (FrameSender, std::pin::Pin<Box<SessionBody<ChannelBody>>>) {
    let (tx, body) = channel_body();
    let mut body = Some(body);
    let service = ServiceBuilder::new()
        .layer(layer)
        .service_fn(move |_: Request<()>| {
            let body = body.take().expect("one request");
            async move { Ok::<_, Infallible>(grpc_response(body)) }
        });
    let response = service.oneshot(request).await.unwrap();
    (tx, Box::pin(response.into_body()))
}

/// The `grpc-status` and `grpc-message` of a trailers frame.
fn status_of(frame: Option<Result<Frame<Bytes>, std::io::Error>>) -> (String, String) {
    let trailers: HeaderMap = frame
        .expect("a frame")
        .unwrap()
        .into_trailers()
        .expect("trailers");
    let get = |name| trailers[name].to_str().unwrap().to_owned();
    (get("grpc-status"), get("grpc-message"))
}

#[tokio::test(start_paused = true)]
async fn the_max_length_ends_a_stream_timed_out_at_its_limit_and_not_before() {
    let tracker = SessionTracker::new();
    let (_tx, mut body) = grpc_stream(SessionLayer::new(tracker.clone()).max_session(LIMIT)).await;
    assert!(
        poll_frame_now(body.as_mut()).is_none(),
        "nothing to send yet"
    );
    pass(LIMIT - Duration::from_millis(100)).await;
    assert_eq!(tracker.active(), 1, "not before the limit");
    pass(PERIOD * 2 + Duration::from_millis(100)).await;
    common::assert_only(&tracker, EndReason::TimedOut);
    let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
    assert_eq!(status_of(frame), ("4".into(), "max session length".into()));
    assert!(body.is_end_stream());
    assert!(poll_frame_now(body.as_mut()).expect("ready").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_grpc_timeout_ends_a_stream_timed_out_at_the_deadline_and_not_before() {
    let tracker = SessionTracker::new();
    // A 400 ms write timeout makes the sweeper's period 100 ms; the stream never stalls.
    let layer = SessionLayer::new(tracker.clone()).write_timeout(Duration::from_millis(400));
    let period = Duration::from_millis(100);
    let (_tx, mut body) = grpc_stream_for(layer, grpc_call("300m")).await;
    assert!(poll_frame_now(body.as_mut()).is_none());
    pass(Duration::from_millis(250)).await;
    assert_eq!(tracker.active(), 1, "not before the deadline");
    pass(period * 2 + Duration::from_millis(100)).await;
    common::assert_only(&tracker, EndReason::TimedOut);
    let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
    assert_eq!(
        status_of(frame),
        ("4".into(), "deadline exceeded (grpc-timeout)".into())
    );
}

#[tokio::test(start_paused = true)]
async fn the_earlier_of_the_max_length_and_the_grpc_timeout_ends_the_session() {
    let tracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker.clone()).max_session(LIMIT);
    let (_tx, mut body) = grpc_stream_for(layer, grpc_call("10S")).await;
    assert!(poll_frame_now(body.as_mut()).is_none());
    pass(LIMIT + PERIOD * 2).await;
    common::assert_only(&tracker, EndReason::TimedOut);
    let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
    assert_eq!(status_of(frame), ("4".into(), "max session length".into()));
}

#[tokio::test(start_paused = true)]
async fn an_invalid_grpc_timeout_is_ignored_and_a_layer_may_ignore_any() {
    let tracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker.clone()).max_session(LIMIT);
    let mut bodies = Vec::new();
    // Nine digits (123 ms if read leniently), no unit, a lower-case second, a fraction.
    for invalid in ["123456789n", "100", "1s", "0.1S"] {
        bodies.push(grpc_stream_for(layer.clone(), grpc_call(invalid)).await);
    }
    // A valid one on a layer that does not honour client deadlines.
    let ignoring = SessionLayer::new(tracker.clone())
        .max_session(LIMIT)
        .grpc_timeout(false);
    bodies.push(grpc_stream_for(ignoring, grpc_call("100m")).await);
    for (_, body) in &mut bodies {
        assert!(poll_frame_now(body.as_mut()).is_none());
    }
    pass(LIMIT - Duration::from_millis(100)).await;
    assert_eq!(tracker.active(), 5, "only the maximum length applies");
    pass(PERIOD * 2 + Duration::from_millis(100)).await;
    for (_, body) in &mut bodies {
        let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
        assert_eq!(status_of(frame), ("4".into(), "max session length".into()));
    }
    assert_eq!(tracker.snapshot().ended_by(EndReason::TimedOut), 5);
}

#[tokio::test(start_paused = true)]
async fn a_frame_the_transport_never_takes_is_a_stall_disconnected() {
    let tracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker.clone()).write_timeout(LIMIT);
    let (tx, mut body) = grpc_stream(layer).await;
    // The service has nothing to say for longer than the write timeout: no stall.
    assert!(poll_frame_now(body.as_mut()).is_none());
    pass(LIMIT * 2).await;
    assert_eq!(tracker.active(), 1, "waiting for the service is no stall");
    // A frame handed over and the body never polled again: the peer stopped reading.
    tx.send(Ok(Frame::data(Bytes::from("frame")))).unwrap();
    assert!(poll_frame_now(body.as_mut()).is_some());
    tx.send(Ok(Frame::data(Bytes::from("next")))).unwrap();
    pass(LIMIT - Duration::from_millis(100)).await;
    assert_eq!(tracker.active(), 1, "not before the limit");
    pass(PERIOD * 2 + Duration::from_millis(100)).await;
    common::assert_only(&tracker, EndReason::Disconnected);
    // Should the transport poll again after all, the stream ends.
    let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
    assert_eq!(status_of(frame), ("4".into(), "write timeout".into()));
}

#[tokio::test(start_paused = true)]
async fn a_reader_polling_within_the_write_timeout_is_never_stalled() {
    let tracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker.clone()).write_timeout(LIMIT);
    let (tx, mut body) = grpc_stream(layer).await;
    for _ in 0..10 {
        tx.send(Ok(Frame::data(Bytes::from("frame")))).unwrap();
        assert!(poll_frame_now(body.as_mut()).is_some());
        pass(LIMIT - PERIOD).await; // each frame taken just within the limit
    }
    assert_eq!(tracker.active(), 1);
    drop(tx);
    assert!(poll_frame_now(body.as_mut()).expect("ready").is_none());
    common::assert_only(&tracker, EndReason::Completed);
}

/// An `Inspected` service whose handler reads the request body on its own task and answers a
/// gRPC stream fed by the returned sender.
type Reader = tokio::task::JoinHandle<usize>;

async fn watched_stream(
    tracker: &SessionTracker,
    request: ChannelBody,
) -> (
    FrameSender,
    std::pin::Pin<Box<SessionBody<ChannelBody>>>,
    Reader,
) {
    let (tx, body) = channel_body();
    let mut body = Some(body);
    let (read_tx, read_rx) = tokio::sync::oneshot::channel();
    let mut read_tx = Some(read_tx);
    let service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()).idle_timeout(LIMIT))
        .service_fn(move |request: Request<RequestBody<ChannelBody>>| {
            let (body, read_tx) = (body.take().unwrap(), read_tx.take().unwrap());
            let reader = tokio::spawn(async move {
                let mut frames = 0;
                let mut requests = request.into_body();
                while let Some(Ok(_)) = requests.frame().await {
                    frames += 1;
                }
                frames
            });
            let _ = read_tx.send(reader);
            async move { Ok::<_, Infallible>(grpc_response(body)) }
        });
    let response = service.oneshot(Request::new(request)).await.unwrap();
    (tx, Box::pin(response.into_body()), read_rx.await.unwrap())
}

#[tokio::test(start_paused = true)]
async fn client_frames_keep_a_session_alive_and_silence_ends_it_idle() {
    let tracker = SessionTracker::new();
    let (requests, request_body) = channel_body();
    let (_tx, mut body, reader) = watched_stream(&tracker, request_body).await;
    assert!(poll_frame_now(body.as_mut()).is_none());
    for _ in 0..6 {
        requests
            .send(Ok(Frame::data(Bytes::from("heartbeat"))))
            .unwrap();
        pass(LIMIT - PERIOD).await;
    }
    assert_eq!(tracker.active(), 1, "heartbeats are activity");
    pass(PERIOD * 3).await; // silence past the limit
    common::assert_only(&tracker, EndReason::Disconnected);
    let frame = poll_frame_now(body.as_mut()).expect("cut: ready");
    assert_eq!(status_of(frame), ("4".into(), "idle timeout".into()));
    drop(requests);
    assert_eq!(reader.await.unwrap(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_request_body_that_fails_ends_the_session_at_once_and_a_clean_end_does_not() {
    let tracker = SessionTracker::new();
    let (requests, request_body) = channel_body();
    let (_tx, mut body, reader) = watched_stream(&tracker, request_body).await;
    assert!(poll_frame_now(body.as_mut()).is_none());
    requests
        .send(Ok(Frame::data(Bytes::from("hello"))))
        .unwrap();
    let lost = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
    requests.send(Err(lost)).unwrap();
    assert_eq!(reader.await.unwrap(), 1);
    common::assert_only(&tracker, EndReason::Disconnected);
    // The stream is cut (nobody reads a status on a dead connection).
    assert!(poll_frame_now(body.as_mut()).is_some());

    let tracker = SessionTracker::new();
    let (requests, request_body) = channel_body();
    let (tx, mut body, reader) = watched_stream(&tracker, request_body).await;
    requests
        .send(Ok(Frame::data(Bytes::from("hello"))))
        .unwrap();
    drop(requests); // a half-close: the request ends cleanly
    assert_eq!(reader.await.unwrap(), 1);
    assert_eq!(tracker.active(), 1, "the response may go on");
    tx.send(Ok(Frame::data(Bytes::from("answer")))).unwrap();
    assert!(poll_frame_now(body.as_mut()).is_some());
    drop(tx);
    assert!(poll_frame_now(body.as_mut()).expect("ready").is_none());
    common::assert_only(&tracker, EndReason::Completed);
}

#[tokio::test(start_paused = true)]
async fn response_frames_are_activity_too() {
    let tracker = SessionTracker::new();
    let (_requests, request_body) = channel_body();
    let (tx, mut body, _reader) = watched_stream(&tracker, request_body).await;
    for _ in 0..6 {
        tx.send(Ok(Frame::data(Bytes::from("pushed")))).unwrap();
        assert!(poll_frame_now(body.as_mut()).is_some());
        assert!(poll_frame_now(body.as_mut()).is_none());
        pass(LIMIT - PERIOD).await;
    }
    assert_eq!(
        tracker.active(),
        1,
        "a server stream that sends is not idle"
    );
    pass(PERIOD * 3).await;
    common::assert_only(&tracker, EndReason::Disconnected);
}

#[tokio::test(start_paused = true)]
async fn a_plain_request_silent_before_its_answer_gets_408() {
    let tracker = SessionTracker::new();
    let service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()).idle_timeout(LIMIT))
        .service_fn(|_: Request<RequestBody<ChannelBody>>| {
            std::future::pending::<Result<Response<ChannelBody>, Infallible>>()
        });
    let (_requests, request_body) = channel_body();
    let call = tokio::spawn(service.oneshot(Request::new(request_body)));
    pass(LIMIT - Duration::from_millis(100)).await;
    assert!(!call.is_finished(), "not before the limit");
    pass(PERIOD * 2 + Duration::from_millis(100)).await;
    let response = call.await.unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(response.body().is_end_stream());
    common::assert_only(&tracker, EndReason::Disconnected);
}

#[tokio::test(start_paused = true)]
async fn a_plain_body_past_the_max_length_just_ends() {
    let tracker = SessionTracker::new();
    let (tx, body) = channel_body();
    let mut body = Some(body);
    let service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()).max_session(LIMIT))
        .service_fn(move |_: Request<()>| {
            let body = body.take().unwrap();
            async move { Ok::<_, Infallible>(Response::new(body)) }
        });
    let mut body = Box::pin(service.oneshot(Request::new(())).await.unwrap().into_body());
    tx.send(Ok(Frame::data(Bytes::from("part")))).unwrap();
    assert!(poll_frame_now(body.as_mut()).is_some());
    assert!(poll_frame_now(body.as_mut()).is_none());
    pass(LIMIT + PERIOD * 2).await;
    common::assert_only(&tracker, EndReason::TimedOut);
    assert!(
        poll_frame_now(body.as_mut()).expect("ready").is_none(),
        "no trailers"
    );
    assert!(tx.is_closed(), "the inner body was dropped");
}

#[tokio::test]
async fn at_capacity_the_inner_service_is_not_called_and_the_answer_says_so() {
    let tracker = SessionTracker::with_max_sessions(1);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let mut service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()).retry_after(Duration::from_millis(1500)))
        .service_fn(move |_: Request<()>| {
            counted.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, Infallible>(Response::new(channel_body().1)) }
        });
    let held = service
        .ready()
        .await
        .unwrap()
        .call(Request::new(()))
        .await
        .unwrap();
    let plain = service
        .ready()
        .await
        .unwrap()
        .call(Request::new(()))
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(plain.headers()["retry-after"], "2"); // 1.5 s, rounded up
    let grpc = service
        .ready()
        .await
        .unwrap()
        .call(grpc_plain())
        .await
        .unwrap();
    assert_eq!(grpc.status(), StatusCode::OK);
    assert_eq!(grpc.headers()["grpc-status"], "8");
    assert!(grpc.body().is_end_stream(), "trailers-only");
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "refusals never reach the service"
    );
    let s = tracker.snapshot();
    assert_eq!((s.started, s.active, s.refused), (1, 1, 2));
    drop(held);
    let s = tracker.snapshot();
    assert_eq!((s.started, s.ended, s.active), (1, 1, 0));
    assert_eq!(s.ended_by(EndReason::Cancelled), 1);
}

/// The limits need a runtime for their sweeper; without one a request is still counted,
/// and ends as it would without limits (here: `Cancelled`, never `TimedOut`).
#[test]
fn outside_a_runtime_requests_are_counted_without_limits() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use tower::Layer;
    let tracker = SessionTracker::new();
    let layer = SessionLayer::new(tracker.clone()).max_session(Duration::from_millis(1));
    let mut service = layer.layer(tower::service_fn(|_: Request<()>| {
        std::future::ready(Ok::<_, Infallible>(Response::new(channel_body().1)))
    }));
    let mut future = std::pin::pin!(service.call(Request::new(())));
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(response)) = future.as_mut().poll(&mut cx) else {
        panic!("the inner future is ready");
    };
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(tracker.active(), 1, "no sweeper, no limit");
    drop(response);
    common::assert_only(&tracker, EndReason::Cancelled);
}

/// Ballpark per-request cost of the limits: a million requests through the layer with the
/// default limits and with none, each answered at once and its body read to the end
/// (`cargo test --release -p livecount-tower --test limit_timers -- --ignored --nocapture`).
#[tokio::test]
#[ignore = "a measurement, not a check: run it in release"]
async fn per_request_cost_with_and_without_limits() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use tower::Layer;
    const N: u32 = 1_000_000;
    let mut cx = Context::from_waker(Waker::noop());
    for (name, layer) in [
        (
            "none",
            SessionLayer::new(SessionTracker::new()).without_limits(),
        ),
        ("default", SessionLayer::new(SessionTracker::new())),
    ] {
        let mut service = layer.layer(tower::service_fn(|_: Request<()>| {
            std::future::ready(Ok::<_, Infallible>(Response::new(
                http_body_util::Full::new(Bytes::from_static(b"x")),
            )))
        }));
        let began = std::time::Instant::now();
        for _ in 0..N {
            let mut future = std::pin::pin!(service.call(Request::new(())));
            let Poll::Ready(Ok(response)) = future.as_mut().poll(&mut cx) else {
                panic!("ready");
            };
            let mut body = std::pin::pin!(response.into_body());
            while let Poll::Ready(Some(_)) = body.as_mut().poll_frame(&mut cx) {}
        }
        let per = began.elapsed() / N;
        println!("{name}: {per:?} per request");
        tokio::task::yield_now().await; // let the sweeper run
    }
}

/// While the tracker drains, the layer refuses before the inner service: `503` with
/// `Retry-After` over plain HTTP, trailers-only `UNAVAILABLE` over gRPC, each counted
/// refused; a stream open before the drain goes on.
#[tokio::test]
async fn while_draining_requests_are_refused_unavailable_and_open_streams_go_on() {
    let tracker = SessionTracker::new();
    let (tx, mut open) = grpc_stream(SessionLayer::new(tracker.clone())).await;
    assert!(tracker.begin_drain());
    let mut service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()))
        .service_fn(|_: Request<()>| async {
            panic!("a refusal never reaches the service");
            #[allow(unreachable_code)]
            Ok::<_, Infallible>(Response::new(channel_body().1))
        });
    let plain = service
        .ready()
        .await
        .unwrap()
        .call(Request::new(()))
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(plain.headers()["retry-after"], "1");
    let grpc = service
        .ready()
        .await
        .unwrap()
        .call(grpc_plain())
        .await
        .unwrap();
    assert_eq!(grpc.headers()["grpc-status"], "14");
    assert_eq!(
        grpc.headers()["grpc-message"],
        "draining: the server is shutting down"
    );
    assert!(grpc.body().is_end_stream(), "trailers-only");
    tx.send(Ok(Frame::data(Bytes::from("still streaming"))))
        .unwrap();
    assert!(matches!(poll_frame_now(open.as_mut()), Some(Some(Ok(_)))));
    let s = tracker.snapshot();
    assert_eq!((s.started, s.active, s.refused), (1, 1, 2));
}

/// A stream still open at the drain's deadline (`end_all(Shutdown)`) is cut at once with
/// `UNAVAILABLE` in its trailers: reconnect, elsewhere.
#[tokio::test(start_paused = true)]
async fn a_stream_ended_shutdown_is_cut_with_unavailable_trailers() {
    let tracker = SessionTracker::new();
    let (tx, mut body) = grpc_stream(SessionLayer::new(tracker.clone())).await;
    assert!(poll_frame_now(body.as_mut()).is_none(), "nothing sent yet");
    assert_eq!(tracker.end_all(EndReason::Shutdown), 1);
    let trailers = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx))
        .await
        .expect("the cut's trailers")
        .unwrap()
        .into_trailers()
        .unwrap();
    assert_eq!(trailers["grpc-status"], "14");
    assert_eq!(trailers["grpc-message"], "server shutting down");
    assert!(tx.is_closed(), "the inner body was dropped");
    common::assert_only(&tracker, EndReason::Shutdown);
}
