//! The settings an application needs beyond the defaults reach the parts they bound, and
//! [`Serve`](livecount_service::Serve) runs two HTTP listeners, closes a connection that
//! sends no request head at the backend's head timeout, and ends its drain's wait when
//! hurried.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use livecount_service::{Backend, EndReason, InbandFormat, PrequalEstimator};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The bound of every single wait.
const WAIT: Duration = Duration::from_secs(20);

#[test]
fn the_settings_reach_the_layer_the_in_band_forms_and_the_board() {
    let estimator = Arc::new(PrequalEstimator::new());
    let backend = Backend::builder("b1")
        .max_session(Duration::from_secs(1200))
        .write_timeout(Duration::from_secs(10))
        .idle_timeout(Duration::from_secs(60))
        .first_frame_timeout(None)
        .leave_drops_to_service(Duration::from_secs(1))
        .inband_orca(Some(InbandFormat::Json), None)
        .cores(2.0)
        .prequal(Arc::clone(&estimator))
        .build();
    let layer = backend.layer();
    let limits = layer.limits();
    assert_eq!(limits.max_session(), Some(Duration::from_secs(1200)));
    assert_eq!(limits.write_timeout(), Some(Duration::from_secs(10)));
    assert_eq!(limits.idle_timeout(), Some(Duration::from_secs(60)));
    assert_eq!(limits.first_frame_timeout(), None);
    assert_eq!(limits.drop_grace(), Some(Duration::from_secs(1)));
    let inband = backend.inband_orca();
    assert_eq!(
        (inband.http(), inband.grpc()),
        (Some(InbandFormat::Json), None)
    );
    estimator.record(0, Duration::from_millis(40));
    let probe = backend.publish().prequal.expect("a Prequal probe");
    assert_eq!(probe.latency_ms, Some(40.0));
}

#[test]
fn the_defaults_are_the_documented_ones() {
    let backend = Backend::builder("b1").build();
    let layer = backend.layer();
    let limits = layer.limits();
    assert_eq!(
        limits.max_session(),
        Some(livecount_tower::StreamLimits::DEFAULT_MAX_SESSION)
    );
    assert_eq!(
        limits.write_timeout(),
        Some(livecount_tower::StreamLimits::DEFAULT_WRITE_TIMEOUT)
    );
    assert_eq!((limits.idle_timeout(), limits.drop_grace()), (None, None));
    let inband = backend.inband_orca();
    let forms = (inband.http(), inband.grpc());
    assert_eq!(forms, (Some(InbandFormat::Text), Some(InbandFormat::Bin)));
    assert!(backend.board().latest().prequal.is_none());
}

/// The response to `GET path`, whole.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(WAIT, conn.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_listeners_a_head_timeout_and_a_hurried_drain() {
    let backend = Backend::builder("b1")
        .header_read_timeout(Duration::from_millis(300))
        .max_pending_connections(64)
        .drain_deadline(Duration::from_secs(60))
        .build();
    let (app, scrape) = (
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let (app_addr, scrape_addr) = (app.local_addr().unwrap(), scrape.local_addr().unwrap());
    let (shutdown, hurry) = (CancellationToken::new(), CancellationToken::new());
    let serving = backend
        .serve(shutdown.clone().cancelled_owned())
        .hurry(hurry.clone().cancelled_owned())
        .http(app, backend.routes())
        .http(scrape, backend.routes())
        .into_future();
    let serving = tokio::spawn(serving);
    for addr in [app_addr, scrape_addr] {
        assert!(get(addr, "/load").await.starts_with("HTTP/1.1 200"));
    }

    // A connection that never sends its head is closed at the backend's head timeout.
    let mut silent = TcpStream::connect(app_addr).await.unwrap();
    let began = Instant::now();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(WAIT, silent.read_to_end(&mut buf))
        .await
        .unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );

    // A session that would outlive the 60 s deadline: the hurry ends the wait.
    let open = backend.tracker().start();
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(backend.is_draining());
    hurry.cancel();
    let drained = tokio::time::timeout(WAIT, serving)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(drained.hurried && drained.waited < Duration::from_secs(5));
    assert_eq!((drained.open_at_start, drained.cut), (1, 1));
    assert_eq!(open.handle().reason(), Some(EndReason::Shutdown));
    let last = backend.board().latest();
    assert!(last.draining && last.active == 0);
}
