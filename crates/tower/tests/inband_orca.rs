//! `InbandOrcaLayer` on loopback: the latest report is on plain HTTP responses, on a
//! WebSocket upgrade's 101, in a gRPC call's trailers (unary, and a server stream at its
//! end) and on a trailers-only gRPC answer; it decodes to the board's ORCA report and
//! changes exactly when a report is published.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{State, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use base64::Engine as _;
use livecount_capacity::CapacityConfig;
use livecount_report::LoadBoard;
use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_report::inband::InbandFormat;
use livecount_report::orca::orca_report;
use livecount_session::SessionTracker;
use livecount_tower::WebSocketSessions;
use livecount_tower::grpc::InbandOrcaLayer;
use prost::Message as _;
use tokio::net::TcpListener;
use tonic::transport::{Endpoint, Server, server::TcpIncoming};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tower::ServiceExt;

/// Every wait in these tests is bounded by this.
const WAIT: Duration = Duration::from_secs(10);

fn board() -> Arc<LoadBoard> {
    Arc::new(LoadBoard::new(
        "b1",
        CapacityConfig::builder().build().unwrap(),
    ))
}

/// A `TEXT` value's numbers by name (the spec's comma-separated `name=value`).
fn text_fields(value: &str) -> Vec<(String, f64)> {
    let body = value.strip_prefix("TEXT ").expect("TEXT prefix");
    body.split(',')
        .map(|e| {
            let (k, v) = e.trim().split_once('=').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

fn decode_bin(value: &[u8]) -> OrcaLoadReport {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap();
    OrcaLoadReport::decode(&bytes[..]).unwrap()
}

#[tokio::test]
async fn http_responses_carry_the_latest_report_and_it_changes_on_publish() {
    let board = board();
    let app = Router::new()
        .route("/", get(|| async { "hi" }))
        .route("/missing", get(|| async { http::StatusCode::NOT_FOUND }))
        .layer(InbandOrcaLayer::new(Arc::clone(&board)));
    let get = |path: &'static str| {
        let app = app.clone();
        async move {
            let request = http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let value = response.headers()["endpoint-load-metrics"].clone();
            assert!(!response.headers().contains_key("endpoint-load-metrics-bin"));
            value
        }
    };
    let first = get("/").await;
    let fields = text_fields(first.to_str().unwrap());
    let expected = orca_report(&board.latest());
    let field = |name: &str| fields.iter().find(|(k, _)| k == name).unwrap().1;
    assert_eq!(field("rps_fractional"), expected.rps_fractional);
    assert_eq!(
        field("application_utilization"),
        expected.application_utilization
    );
    assert_eq!(field("named_metrics.report_sequence"), 0.0);
    // No publish: the very same value (one encoding, shared), on any status.
    assert_eq!(get("/missing").await, first);
    assert_eq!(
        get("/").await.as_bytes().as_ptr(),
        first.as_bytes().as_ptr()
    );
    let tracker: SessionTracker = SessionTracker::default();
    let _s = tracker.start();
    let published = board.publish(tracker.snapshot());
    let second = get("/").await;
    assert_ne!(second, first);
    let fields = text_fields(second.to_str().unwrap());
    let sequence = fields
        .iter()
        .find(|(k, _)| k == "named_metrics.report_sequence")
        .unwrap()
        .1;
    assert_eq!(sequence, published.sequence as f64);
}

#[tokio::test]
async fn a_response_that_has_its_own_report_keeps_it_and_json_is_configurable() {
    let board = board();
    let app = Router::new()
        .route(
            "/own",
            get(|| async { ([("endpoint-load-metrics", "TEXT eps=1")], "mine") }),
        )
        .route("/", get(|| async { "hi" }))
        .layer(InbandOrcaLayer::new(board).http_format(Some(InbandFormat::Json)));
    let call = |path: &'static str| {
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        app.clone().oneshot(request)
    };
    let own = call("/own").await.unwrap();
    assert_eq!(own.headers()["endpoint-load-metrics"], "TEXT eps=1");
    let json = call("/").await.unwrap();
    let value = json.headers()["endpoint-load-metrics"].to_str().unwrap();
    let parsed: serde_json::Value =
        serde_json::from_str(value.strip_prefix("JSON ").unwrap()).unwrap();
    assert!(parsed["rps_fractional"].as_f64().unwrap() > 0.0, "{value}");
    assert_eq!(parsed["named_metrics"]["active_sessions"], 0.0);
}

async fn ws(State(sessions): State<WebSocketSessions>, upgrade: WebSocketUpgrade) -> Response {
    sessions.upgrade(upgrade, |mut socket, _| async move {
        while let Some(Ok(_)) = socket.recv().await {}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_upgrade_carries_the_report() {
    let board = board();
    let tracker: SessionTracker = SessionTracker::default();
    let sessions = WebSocketSessions::new(tracker);
    let app = Router::new()
        .route("/ws", get(ws))
        .with_state(sessions)
        .layer(InbandOrcaLayer::new(Arc::clone(&board)).http_format(Some(InbandFormat::Bin)));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let url = format!("ws://{addr}/ws");
    let (socket, response) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 101);
    let value = response.headers()["endpoint-load-metrics-bin"].as_bytes();
    assert_eq!(decode_bin(value), orca_report(&board.latest()));
    drop(socket);
    server.abort();
}

/// Health under the layer on loopback; returns its address and a channel to it.
async fn grpc_server(layer: InbandOrcaLayer) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("live", tonic_health::ServingStatus::Serving)
        .await;
    let server = Server::builder()
        .layer(layer)
        .add_service(service)
        .serve_with_incoming(TcpIncoming::from(listener));
    let task = tokio::spawn(async move {
        let _reporter = reporter; // keeps `Watch` streams open
        let _ = server.await;
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_carry_the_report_in_their_trailers() {
    let board = board();
    let (addr, server) = grpc_server(InbandOrcaLayer::new(Arc::clone(&board))).await;
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let channel = tokio::time::timeout(WAIT, endpoint.connect())
        .await
        .unwrap()
        .unwrap();
    let mut client = HealthClient::new(channel);
    let request = || HealthCheckRequest {
        service: "live".into(),
    };

    // Unary: tonic merges the trailers into the response's metadata.
    let response = client.check(request()).await.unwrap();
    let value = response
        .metadata()
        .get_bin("endpoint-load-metrics-bin")
        .expect("the report in the trailers");
    assert_eq!(
        decode_bin(value.as_encoded_bytes()),
        orca_report(&board.latest())
    );
    assert!(response.metadata().get("endpoint-load-metrics").is_none());

    // A trailers-only answer (an unknown service: NOT_FOUND) carries it in its headers.
    let missing = HealthCheckRequest {
        service: "nope".into(),
    };
    let status = client.check(missing).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(
        status
            .metadata()
            .get_bin("endpoint-load-metrics-bin")
            .is_some()
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_stream_reports_the_load_at_its_end() {
    use tonic_health::pb::health_server::{Health, HealthServer};
    use tonic_health::pb::{HealthCheckResponse, health_check_response::ServingStatus};

    /// `Watch` sends one answer, then ends OK once `end` is notified.
    struct Ending(Arc<tokio::sync::Notify>);

    #[tonic::async_trait]
    impl Health for Ending {
        async fn check(
            &self,
            _: tonic::Request<HealthCheckRequest>,
        ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
            Err(tonic::Status::unimplemented(""))
        }

        type WatchStream = std::pin::Pin<
            Box<dyn futures_util::Stream<Item = Result<HealthCheckResponse, tonic::Status>> + Send>,
        >;

        async fn watch(
            &self,
            _: tonic::Request<HealthCheckRequest>,
        ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
            let end = Arc::clone(&self.0);
            let first = HealthCheckResponse {
                status: ServingStatus::Serving as i32,
            };
            let stream = futures_util::stream::unfold(Some(first), move |next| {
                let end = Arc::clone(&end);
                async move {
                    match next {
                        Some(first) => Some((Ok(first), None)),
                        None => {
                            end.notified().await;
                            None
                        }
                    }
                }
            });
            Ok(tonic::Response::new(Box::pin(stream)))
        }
    }

    let board = board();
    let end = Arc::new(tokio::sync::Notify::new());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(
        Server::builder()
            .layer(InbandOrcaLayer::new(Arc::clone(&board)))
            .add_service(HealthServer::new(Ending(Arc::clone(&end))))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let mut client = HealthClient::new(endpoint.connect().await.unwrap());
    let mut stream = client
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    // Published while the stream is open: the trailers must carry this one.
    let tracker: SessionTracker = SessionTracker::default();
    let _open: Vec<_> = (0..3).map(|_| tracker.start()).collect();
    let later = board.publish(tracker.snapshot());
    end.notify_one();
    let ended = tokio::time::timeout(WAIT, stream.message()).await.unwrap();
    assert!(ended.unwrap().is_none(), "the stream ends OK");
    let trailers = tokio::time::timeout(WAIT, stream.trailers())
        .await
        .unwrap()
        .unwrap()
        .expect("trailers");
    let value = trailers.get_bin("endpoint-load-metrics-bin").unwrap();
    let orca = decode_bin(value.as_encoded_bytes());
    assert_eq!(orca, orca_report(&later));
    assert_eq!(orca.named_metrics["active_sessions"], 3.0);
    server.abort();
}

#[tokio::test]
async fn grpc_can_be_turned_off_and_http_kept() {
    let board = board();
    let layer = InbandOrcaLayer::new(board).grpc_format(None);
    let service =
        tower::ServiceBuilder::new()
            .layer(layer)
            .service_fn(|_: http::Request<()>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
            });
    let grpc = http::Request::post("/x")
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let response = service.clone().oneshot(grpc).await.unwrap();
    assert!(response.headers().is_empty());
    let plain = service.oneshot(http::Request::new(())).await.unwrap();
    assert!(plain.headers().contains_key("endpoint-load-metrics"));
}
