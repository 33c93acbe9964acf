//! `SessionLayer`: each request a session until its response body ends, each ending with the
//! reason of what happened, exactly once.

mod common;

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use common::{ChannelBody, assert_only, channel_body, poll_frame_now};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::body::SessionBody;
use livecount_tower::{SessionLayer, SessionService};
use tower::{Service, ServiceBuilder, ServiceExt};

type Tracker = SessionTracker;

fn respond<B: Send + 'static>(
    tracker: &Tracker,
    mut response: impl FnMut() -> Response<B> + Send + 'static,
) -> impl Service<Request<()>, Response = Response<SessionBody<B>>, Error = Infallible> {
    ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()))
        .service_fn(move |_: Request<()>| {
            let response = response();
            async move { Ok::<_, Infallible>(response) }
        })
}

/// A service whose one response has `body`.
fn respond_once<B: Send + 'static>(
    tracker: &Tracker,
    body: B,
) -> impl Service<Request<()>, Response = Response<SessionBody<B>>, Error = Infallible> {
    let mut body = Some(body);
    respond(tracker, move || {
        Response::new(body.take().expect("one request"))
    })
}

#[tokio::test]
async fn a_body_read_to_its_end_completes() {
    let tracker = Tracker::new();
    let service = respond(&tracker, || Response::new(Full::new(Bytes::from("done"))));
    let response = service.oneshot(Request::new(())).await.unwrap();
    assert_eq!(
        tracker.active(),
        1,
        "counted until the body ends, not at headers"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes, "done");
    assert_only(&tracker, EndReason::Completed);
}

/// The wrapped body tells hyper what the inner one would: its exact length (so a
/// `Content-Length` is sent instead of chunked encoding) or that it does not know.
#[tokio::test]
async fn the_size_hint_is_the_inner_bodys() {
    let tracker = Tracker::new();
    let service = respond(&tracker, || {
        Response::new(Full::new(Bytes::from("twelve bytes")))
    });
    let response = service.oneshot(Request::new(())).await.unwrap();
    let hint = response.body().size_hint();
    assert_eq!((hint.lower(), hint.exact()), (12, Some(12)));
    drop(response);
    let (_tx, body) = channel_body();
    let streaming = respond_once(&tracker, body)
        .oneshot(Request::new(()))
        .await
        .unwrap();
    let unknown = streaming.body().size_hint();
    assert_eq!((unknown.lower(), unknown.upper()), (0, None));
}

/// A service that is ready or not, or failing, as told; its calls answer an empty body.
struct Gate(std::task::Poll<Result<(), io::Error>>);

impl Service<Request<()>> for Gate {
    type Response = Response<Empty<Bytes>>;
    type Error = io::Error;
    type Future = std::future::Ready<Result<Self::Response, io::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), io::Error>> {
        match &self.0 {
            std::task::Poll::Pending => std::task::Poll::Pending,
            std::task::Poll::Ready(Ok(())) => std::task::Poll::Ready(Ok(())),
            std::task::Poll::Ready(Err(e)) => {
                std::task::Poll::Ready(Err(io::Error::new(e.kind(), "closed")))
            }
        }
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        std::future::ready(Ok(Response::new(Empty::new())))
    }
}

/// Back-pressure passes through: the layered service is ready exactly when the inner one
/// is, and an inner readiness error is the layered service's (a balancer or a limit above
/// depends on it).
#[test]
fn readiness_is_the_inner_services() {
    use std::task::{Context, Poll, Waker};
    use tower::Layer;
    let tracker = Tracker::new();
    let mut cx = Context::from_waker(Waker::noop());
    let layer = SessionLayer::new(tracker.clone());
    assert!(
        layer
            .layer(Gate(Poll::Pending))
            .poll_ready(&mut cx)
            .is_pending()
    );
    assert!(matches!(
        layer.layer(Gate(Poll::Ready(Ok(())))).poll_ready(&mut cx),
        Poll::Ready(Ok(()))
    ));
    let failed = layer
        .layer(Gate(Poll::Ready(Err(io::Error::other("closed")))))
        .poll_ready(&mut cx);
    assert!(matches!(failed, Poll::Ready(Err(_))));
    assert_eq!(tracker.active(), 0, "readiness counts nothing");
}

#[tokio::test]
async fn an_empty_body_completes_when_asked_for_its_end() {
    // hyper asks `is_end_stream` first and drops an empty body unpolled.
    let tracker = Tracker::new();
    let service = respond(&tracker, || Response::new(Empty::<Bytes>::new()));
    let response = service.oneshot(Request::new(())).await.unwrap();
    assert!(response.body().is_end_stream());
    drop(response);
    assert_only(&tracker, EndReason::Completed);
}

#[tokio::test]
async fn a_streaming_body_counts_until_its_last_frame_is_polled() {
    let tracker = Tracker::new();
    let (tx, body) = channel_body();
    let service = respond_once(&tracker, body);
    let mut body = std::pin::pin!(service.oneshot(Request::new(())).await.unwrap().into_body());
    for chunk in ["a", "b", "c"] {
        tx.send(Ok(Frame::data(Bytes::from(chunk)))).unwrap();
        let frame = poll_frame_now(body.as_mut()).expect("a frame is ready");
        assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), chunk);
        assert_eq!(tracker.active(), 1, "still streaming after {chunk:?}");
    }
    assert!(
        poll_frame_now(body.as_mut()).is_none(),
        "nothing sent: pending"
    );
    assert_eq!(tracker.active(), 1);
    drop(tx); // the stream's end
    assert!(poll_frame_now(body.as_mut()).expect("ready").is_none());
    assert_only(&tracker, EndReason::Completed);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_is_cancelled() {
    let tracker = Tracker::new();
    let (tx, body) = channel_body();
    tx.send(Ok(Frame::data(Bytes::from("first")))).unwrap();
    let service = respond_once(&tracker, body);
    let mut body = Box::pin(service.oneshot(Request::new(())).await.unwrap().into_body());
    assert!(poll_frame_now(body.as_mut()).is_some());
    drop(body); // the client went away mid-stream
    assert_only(&tracker, EndReason::Cancelled);
    drop(tx);
}

#[tokio::test]
async fn a_body_error_fails() {
    let tracker = Tracker::new();
    let (tx, body) = channel_body();
    tx.send(Err(io::Error::other("upstream reset"))).unwrap();
    let service = respond_once(&tracker, body);
    let body = service.oneshot(Request::new(())).await.unwrap().into_body();
    assert!(body.collect().await.is_err());
    assert_only(&tracker, EndReason::Failed);
}

#[tokio::test]
async fn an_inner_error_fails() {
    let tracker = Tracker::new();
    let inner =
        tower::service_fn(|_: Request<()>| async { Err::<Response<Empty<Bytes>>, _>("no") });
    let service = SessionService::new(inner, tracker.clone());
    assert_eq!(service.oneshot(Request::new(())).await.unwrap_err(), "no");
    assert_only(&tracker, EndReason::Failed);
}

#[tokio::test]
async fn a_response_future_dropped_before_it_completes_is_cancelled() {
    let tracker = Tracker::new();
    let inner = tower::service_fn(|_: Request<()>| {
        std::future::pending::<Result<Response<Empty<Bytes>>, Infallible>>()
    });
    let mut service = SessionService::new(inner, tracker.clone());
    let future = service.call(Request::new(()));
    assert_eq!(
        tracker.active(),
        1,
        "counted from the moment it is accepted"
    );
    let timed_out = tokio::time::timeout(Duration::from_millis(10), future).await;
    assert!(timed_out.is_err(), "the timeout dropped the future");
    assert_only(&tracker, EndReason::Cancelled);
}

fn with_status(status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from("body")));
    *response.status_mut() = status;
    response
}

#[tokio::test]
async fn a_server_error_fails_however_its_body_ends() {
    for read_to_end in [true, false] {
        let tracker = Tracker::new();
        let service = respond(&tracker, || with_status(StatusCode::SERVICE_UNAVAILABLE));
        let response = service.oneshot(Request::new(())).await.unwrap();
        if read_to_end {
            response.into_body().collect().await.unwrap();
        } else {
            drop(response); // the client did not read it
        }
        assert_only(&tracker, EndReason::Failed);
    }
}

#[tokio::test]
async fn a_client_error_is_served_completely() {
    let tracker = Tracker::new();
    let service = respond(&tracker, || with_status(StatusCode::NOT_FOUND));
    let response = service.oneshot(Request::new(())).await.unwrap();
    response.into_body().collect().await.unwrap();
    assert_only(&tracker, EndReason::Completed);
}

fn grpc_status(code: &'static str) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static(code));
    trailers
}

#[tokio::test]
async fn grpc_status_in_trailers_decides_the_reason() {
    let cases = [
        ("0", EndReason::Completed),
        ("1", EndReason::Cancelled),
        ("4", EndReason::TimedOut),
        ("13", EndReason::Failed),
    ];
    for (code, reason) in cases {
        let tracker = Tracker::new();
        let (tx, body) = channel_body();
        tx.send(Ok(Frame::data(Bytes::from("message")))).unwrap();
        tx.send(Ok(Frame::trailers(grpc_status(code)))).unwrap();
        drop(tx);
        let service = respond_once(&tracker, body);
        let body = service.oneshot(Request::new(())).await.unwrap().into_body();
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["grpc-status"], code);
        assert_only(&tracker, reason);
    }
}

#[tokio::test]
async fn a_trailers_only_grpc_error_fails() {
    let tracker = Tracker::new();
    let service = respond(&tracker, || {
        let mut response = Response::new(Empty::<Bytes>::new());
        *response.headers_mut() = grpc_status("3"); // INVALID_ARGUMENT, status 200
        response
    });
    let response = service.oneshot(Request::new(())).await.unwrap();
    response.into_body().collect().await.unwrap();
    assert_only(&tracker, EndReason::Failed);
}

#[tokio::test]
async fn requests_the_predicate_refuses_are_not_counted() {
    let tracker = Tracker::new();
    let service = ServiceBuilder::new()
        .layer(
            SessionLayer::new(tracker.clone())
                .with_predicate(|r: &Request<()>| r.uri().path().starts_with("/api/")),
        )
        .service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("x"))))
        });
    let health = Request::get("/healthz").body(()).unwrap();
    let response = service.clone().oneshot(health).await.unwrap();
    assert!(response.body().session().is_none());
    response.into_body().collect().await.unwrap();
    assert_eq!(tracker.snapshot().started, 0);

    let api = Request::get("/api/chat").body(()).unwrap();
    let response = service.oneshot(api).await.unwrap();
    assert!(response.body().session().is_some());
    response.into_body().collect().await.unwrap();
    assert_only(&tracker, EndReason::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_requests_count_while_in_flight_and_balance_at_the_end() {
    const N: u64 = 64;
    let tracker = Tracker::new();
    let (release, gate) = tokio::sync::watch::channel(false);
    let service = ServiceBuilder::new()
        .layer(SessionLayer::new(tracker.clone()))
        .service_fn(move |_: Request<()>| {
            let mut gate = gate.clone();
            async move {
                let body = ChannelBody::from_stream(async move {
                    let _ = gate.wait_for(|open| *open).await;
                    Frame::data(Bytes::from("late"))
                });
                Ok::<_, Infallible>(Response::new(body))
            }
        });
    let clients: Vec<_> = (0..N)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move {
                let response = service.oneshot(Request::new(())).await.unwrap();
                response.into_body().collect().await.unwrap().to_bytes()
            })
        })
        .collect();
    common::settle(|| tracker.active() == N, "all requests in flight").await;
    assert_eq!(
        tracker.snapshot().ended,
        0,
        "none ends before its body does"
    );
    release.send(true).unwrap();
    for client in clients {
        let bytes = tokio::time::timeout(Duration::from_secs(10), client)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(bytes, "late");
    }
    let s = tracker.snapshot();
    assert_eq!((s.started, s.ended, s.active), (N, N, 0));
    assert_eq!(s.ended_by(EndReason::Completed), N);
}

#[test]
fn the_service_body_and_future_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<SessionLayer>();
    send_sync::<SessionBody<Full<Bytes>>>();
    send_sync::<SessionService<tower::util::BoxCloneSyncService<Request<()>, Response<()>, ()>>>();
    send_sync::<
        livecount_tower::future::ResponseFuture<std::future::Ready<Result<Response<()>, ()>>>,
    >();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_without_a_body_complete_with_their_head_over_hyper() {
    // hyper sends no body for these and drops it unpolled: that is no cancellation.
    let tracker = Tracker::new();
    let app = axum::Router::new()
        .route("/hello", axum::routing::get(|| async { "hello\n" }))
        .route(
            "/204",
            axum::routing::get(|| async { (StatusCode::NO_CONTENT, "x") }),
        )
        .route(
            "/304",
            axum::routing::get(|| async { (StatusCode::NOT_MODIFIED, "x") }),
        )
        .route(
            "/503",
            axum::routing::get(|| async { (StatusCode::SERVICE_UNAVAILABLE, "x") }),
        )
        .layer(SessionLayer::new(tracker.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let requests = [
        ("HEAD", "/hello", EndReason::Completed),
        ("GET", "/204", EndReason::Completed),
        ("GET", "/304", EndReason::Completed),
        ("HEAD", "/503", EndReason::Failed),
        ("GET", "/hello", EndReason::Completed),
    ];
    for (i, (method, path, reason)) in requests.into_iter().enumerate() {
        let response = common::http_exchange(addr, method, path).await;
        assert!(response.starts_with("HTTP/1.1 "), "{response}");
        common::settle(
            || tracker.snapshot().ended == i as u64 + 1,
            "the request ended",
        )
        .await;
        let s = tracker.snapshot();
        assert_eq!(
            s.ended_by(EndReason::Cancelled),
            0,
            "{method} {path}: {s:?}"
        );
        assert!(s.ended_by(reason) >= 1, "{method} {path}: {s:?}");
    }
    let s = tracker.snapshot();
    assert_eq!((s.started, s.active), (5, 0));
    assert_eq!(
        (
            s.ended_by(EndReason::Completed),
            s.ended_by(EndReason::Failed)
        ),
        (4, 1)
    );
    server.abort();
}

/// A counted request carries its session's handle: the handler's own end wins (here
/// `Failed` on a 200 whose body then completes), and an uncounted request carries none.
#[tokio::test]
async fn the_handler_gets_its_sessions_handle_and_its_end_wins() {
    let tracker = Tracker::new();
    let service = ServiceBuilder::new()
        .layer(
            SessionLayer::new(tracker.clone())
                .with_predicate(|r: &Request<()>| r.uri() == "/counted"),
        )
        .service_fn(|request: Request<()>| async move {
            let handle = request
                .extensions()
                .get::<livecount_session::EndHandle>()
                .cloned();
            let had = handle.is_some();
            if let Some(handle) = handle {
                assert_eq!(handle.phase(), Some(livecount_session::Phase::Listening));
                assert!(handle.end(EndReason::Failed));
            }
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(if had {
                "h"
            } else {
                "-"
            }))))
        });
    let counted = service
        .clone()
        .oneshot(Request::get("/counted").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(counted.into_body().collect().await.unwrap().to_bytes(), "h");
    let other = service
        .oneshot(Request::get("/other").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(other.into_body().collect().await.unwrap().to_bytes(), "-");
    assert_only(&tracker, EndReason::Failed);
}

/// With `leave_drops_to_service`, a response dropped before its end is the service's to end
/// for the grace (a lost connection: `Disconnected`), and `Cancelled` after it if the
/// service says nothing; without it, the drop ends the session `Cancelled` at once.
#[tokio::test(start_paused = true)]
async fn a_dropped_response_is_left_to_the_service_for_the_grace() {
    let grace = Duration::from_millis(500);
    for service_ends in [true, false] {
        let tracker = Tracker::new();
        let (handles, mut handed) = tokio::sync::mpsc::unbounded_channel();
        let service = ServiceBuilder::new()
            .layer(SessionLayer::new(tracker.clone()).leave_drops_to_service(grace))
            .service_fn(move |request: Request<()>| {
                let handle = request
                    .extensions()
                    .get::<livecount_session::EndHandle>()
                    .cloned();
                handles.send(handle.unwrap()).unwrap();
                async { Ok::<_, Infallible>(Response::new(channel_body().1)) }
            });
        let response = service.oneshot(Request::new(())).await.unwrap();
        let handle = handed.recv().await.unwrap();
        drop(response); // the client went away, one way or another
        tokio::time::sleep(grace / 2).await;
        assert_eq!(tracker.active(), 1, "ended within the grace");
        if service_ends {
            assert!(handle.end(EndReason::Disconnected));
        }
        tokio::time::sleep(grace).await;
        let expected = if service_ends {
            EndReason::Disconnected
        } else {
            EndReason::Cancelled
        };
        assert_only(&tracker, expected);
    }
    // The default: at once.
    let tracker = Tracker::new();
    let response = respond_once(&tracker, channel_body().1)
        .oneshot(Request::new(()))
        .await;
    drop(response);
    assert_only(&tracker, EndReason::Cancelled);
}
