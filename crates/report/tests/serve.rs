//! The encoders served for real on loopback: `/load`, `/metrics`, `/prequal`, agent-check
//! and ORCA all carry the numbers of the same report, and draining reaches each of them.

use std::sync::Arc;
use std::time::Duration;

use livecount_capacity::CapacityConfig;
use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_report::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use livecount_report::{
    LoadBoard, ManualUtilisation, OrcaService, PrequalEstimator, router, serve_agent_check,
};
use livecount_session::{Phase, SessionTracker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

struct Served {
    board: Arc<LoadBoard>,
    http: std::net::SocketAddr,
    check: std::net::SocketAddr,
    grpc: std::net::SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn serve(board: Arc<LoadBoard>) -> Served {
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let check = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addrs = (
        http.local_addr().unwrap(),
        check.local_addr().unwrap(),
        grpc.local_addr().unwrap(),
    );
    let app = router(Arc::clone(&board));
    let orca = OrcaService::server(Arc::clone(&board));
    let tasks = vec![
        tokio::spawn(async move {
            let _ = axum::serve(http, app).await;
        }),
        tokio::spawn(serve_agent_check(check, Arc::clone(&board))),
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(orca)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(grpc))
                .await;
        }),
    ];
    Served {
        board,
        http: addrs.0,
        check: addrs.1,
        grpc: addrs.2,
        tasks,
    }
}

/// A minimal HTTP/1.0 GET: the body of a 200.
async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let (head, body) = get_any(addr, path).await;
    assert_eq!(status(&head), 200, "{head}");
    body
}

/// The status code of a response head.
fn status(head: &str) -> u16 {
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    code.unwrap_or_else(|| panic!("no status in {head}"))
}

/// A minimal HTTP/1.0 GET: the head (status line and headers) and the body.
async fn get_any(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut text = String::new();
        conn.read_to_string(&mut text).await.unwrap();
        text
    };
    let text = timeout(WAIT, exchange).await.expect("GET answered in time");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_owned(), body.to_owned())
}

/// The value of header `name` in `head`, if present once.
fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    let mut values = head.lines().filter_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then_some(v.trim())
    });
    let value = values.next();
    assert!(values.next().is_none(), "{name} twice in\n{head}");
    value
}

async fn agent_check(addr: std::net::SocketAddr) -> String {
    let exchange = async {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).await.unwrap();
        reply
    };
    timeout(WAIT, exchange)
        .await
        .expect("agent-check answered in time")
}

/// An ORCA out-of-band stream from `addr`.
async fn orca_stream(addr: std::net::SocketAddr) -> tonic::Streaming<OrcaLoadReport> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut orca = OpenRcaServiceClient::new(channel);
    timeout(
        WAIT,
        orca.stream_core_metrics(OrcaLoadReportRequest::default()),
    )
    .await
    .unwrap()
    .unwrap()
    .into_inner()
}

/// The stream's next report, within [`WAIT`].
async fn next_report(stream: &mut tonic::Streaming<OrcaLoadReport>) -> OrcaLoadReport {
    timeout(WAIT, stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} missing from\n{text}"))
}

fn config() -> CapacityConfig {
    let second = Duration::from_secs(1);
    CapacityConfig::new(0.8, 2.0, second, second).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_metrics_agent_check_and_orca_carry_one_report() {
    let tracker: SessionTracker = SessionTracker::default();
    let (cpu, set_cpu) = ManualUtilisation::new();
    let board = Arc::new(
        LoadBoard::builder("b1", config())
            .max_sessions(50)
            .utilisation(cpu)
            .build(),
    );
    let served = serve(Arc::clone(&board)).await;
    let mut sessions: Vec<_> = (0..6).map(|_| tracker.start()).collect();
    sessions[0].set_phase(Phase::Generating);
    set_cpu.set(0.3);
    let report = served.board.publish(tracker.snapshot());

    let load: serde_json::Value = serde_json::from_str(&get(served.http, "/load").await).unwrap();
    assert_eq!(load["sequence"], report.sequence);
    assert_eq!(
        (load["active"].as_u64(), load["generating"].as_u64()),
        (Some(6), Some(1))
    );
    assert_eq!(load["max_sessions"], 50);
    assert!(load["age_ms"].as_u64().is_some());
    assert_eq!(load["headroom"].as_f64(), Some(report.headroom));

    let text = get(served.http, "/metrics").await;
    assert_eq!(
        metric(&text, "livecount_report_sequence"),
        report.sequence as f64
    );
    assert_eq!(metric(&text, "livecount_active_sessions"), 6.0);
    assert_eq!(metric(&text, "livecount_headroom"), report.headroom);

    assert_eq!(agent_check(served.check).await, report.agent_reply());

    let mut stream = orca_stream(served.grpc).await;
    let first = next_report(&mut stream).await;
    assert_eq!(
        first.named_metrics["report_sequence"],
        report.sequence as f64
    );
    assert_eq!(first.named_metrics["active_sessions"], 6.0);
    assert_eq!(first.named_metrics["generating_sessions"], 1.0);
    // The WRR weight a balancer computes is the headroom the report says, in thousandths
    // of a session.
    let weight = first.rps_fractional / first.application_utilization;
    let units = 1000.0 * report.headroom.max(0.01);
    assert!((weight - units).abs() < 1e-9 * units, "{first:?}");
    assert_eq!(
        first.named_metrics["headroom"], report.headroom,
        "the same report"
    );

    // Draining: agent-check says so at once and the ORCA stream ends (OK).
    drop(sessions);
    let drained = {
        tracker.begin_drain();
        served.board.publish(tracker.snapshot())
    };
    assert_eq!(agent_check(served.check).await, "drain\n");
    let end = timeout(WAIT, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the ORCA stream ends when the board drains");
    assert!(matches!(end, Ok(None)), "{end:?}");
    let load: serde_json::Value = serde_json::from_str(&get(served.http, "/load").await).unwrap();
    assert_eq!(
        (load["draining"].as_bool(), load["weight_percent"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(load["sequence"], drained.sequence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_check_survives_many_silent_connections() {
    let board = Arc::new(LoadBoard::new("b1", config()));
    let served = serve(board).await;
    // Clients that connect and never read: each reply is bounded, the responder keeps
    // answering others.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(served.check).await.unwrap());
    }
    assert_eq!(agent_check(served.check).await, "up ready 100%\n");
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prequal_answers_from_the_report_in_json_headers_and_orca() {
    let tracker: SessionTracker = SessionTracker::default();
    let estimator = Arc::new(PrequalEstimator::new());
    let board = Arc::new(
        LoadBoard::builder("b1", config())
            .prequal(Arc::clone(&estimator))
            .build(),
    );
    let served = serve(Arc::clone(&board)).await;
    // Before any sample: the RIF, and a latency nobody knows.
    let (head, body) = get_any(served.http, "/prequal").await;
    let probe: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(probe["rif"], 0, "{body}");
    assert!(probe["latency_ms"].is_null(), "{body}");
    assert_eq!(
        (probe["samples"].as_u64(), probe["sequence"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(header(&head, "x-prequal-latency-us"), Some("0"), "{head}");

    let sessions: Vec<_> = (0..4).map(|_| tracker.start()).collect();
    for ms in [40, 41, 43] {
        estimator.record(4, Duration::from_millis(ms));
    }
    estimator.record(40, Duration::from_millis(900)); // too far from 4 to count
    let report = board.publish(tracker.snapshot());
    let (head, body) = get_any(served.http, "/prequal").await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(
        header(&head, "content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert_eq!(header(&head, "x-prequal-rif"), Some("4"), "{head}");
    assert_eq!(
        header(&head, "x-prequal-latency-us"),
        Some("41000"),
        "{head}"
    );
    let probe: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(probe["rif"], 4, "{body}");
    assert_eq!(probe["latency_ms"].as_f64(), Some(41.0), "{body}");
    assert_eq!(
        (probe["samples"].as_u64(), probe["samples_used"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(probe["sequence"], report.sequence);
    assert!(probe["age_ms"].as_u64().is_some(), "{body}");
    // /load carries the same probe.
    let load: serde_json::Value = serde_json::from_str(&get(served.http, "/load").await).unwrap();
    assert_eq!(load["sequence"], report.sequence);
    assert_eq!(load["prequal"]["latency_ms"].as_f64(), Some(41.0));

    let mut stream = orca_stream(served.grpc).await;
    let first = next_report(&mut stream).await;
    assert_eq!(
        first.named_metrics["report_sequence"],
        report.sequence as f64
    );
    assert_eq!(first.named_metrics["prequal_rif"], 4.0);
    assert_eq!(first.named_metrics["prequal_latency_ms"], 41.0);
    drop(sessions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prequal_is_not_found_without_an_estimator() {
    let served = serve(Arc::new(LoadBoard::new("b1", config()))).await;
    let (head, body) = get_any(served.http, "/prequal").await;
    assert_eq!(status(&head), 404, "{head}");
    assert!(body.contains("no Prequal estimator"), "{body}");
    assert_eq!(header(&head, "x-prequal-rif"), None);
    let load = get(served.http, "/load").await;
    assert!(!load.contains("prequal"), "{load}");
}
