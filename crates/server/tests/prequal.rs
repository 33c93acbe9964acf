//! `/prequal` on the real agent over loopback: its RIF is the sessions open, and its
//! latency the time sessions took from their first `speak` to their first chunk —
//! recorded over WebSocket and gRPC alike, at least the 5 ms of work a chunk burns here —
//! and ORCA carries the same probe.

mod common;

use std::time::Duration;

use common::{agent, channel};
use futures_util::{SinkExt, StreamExt, stream};
use livecount_report::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use livecount_server::RunningAgent;
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

const WAIT: Duration = Duration::from_secs(5);

/// The work each chunk burns before it is sent: a floor under every latency recorded.
const WORK_MS: f64 = 5.0;

async fn connect(a: &RunningAgent) -> Ws {
    let url = format!("ws://{}/session", a.http);
    let (ws, _) = timeout(WAIT, tokio_tungstenite::connect_async(url))
        .await
        .expect("connected in time")
        .unwrap();
    ws
}

/// The next text frame, within [`WAIT`].
async fn text(ws: &mut Ws) -> String {
    loop {
        match timeout(WAIT, ws.next()).await.expect("a frame in time") {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}

/// Speaks one chunk and reads the response to its end.
async fn speak_once(ws: &mut Ws) {
    let speak = Message::text(r#"{"type":"speak","chunks":1}"#);
    ws.send(speak).await.unwrap();
    assert_eq!(text(ws).await, r#"{"type":"chunk","seq":0}"#);
    assert_eq!(text(ws).await, r#"{"type":"done","chunks":1}"#);
}

/// `GET /prequal`: the head and the JSON body.
async fn prequal(a: &RunningAgent) -> (String, serde_json::Value) {
    let exchange = async {
        let mut conn = TcpStream::connect(a.http).await.unwrap();
        let request = "GET /prequal HTTP/1.0\r\nHost: agent\r\n\r\n";
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut text = String::new();
        conn.read_to_string(&mut text).await.unwrap();
        text
    };
    let text = timeout(WAIT, exchange).await.expect("/prequal in time");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    (head.to_owned(), serde_json::from_str(body).expect(body))
}

/// The value of header `name` in `head`.
fn header<'h>(head: &'h str, name: &str) -> &'h str {
    let value = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then_some(v.trim())
    });
    value.unwrap_or_else(|| panic!("no {name} in\n{head}"))
}

/// Polls `/prequal` (every 50 ms, at most 100 times: the agent reports every 0.2 s)
/// until `until` holds; the last reply.
async fn prequal_until(
    a: &RunningAgent,
    until: impl Fn(&serde_json::Value) -> bool,
) -> (String, serde_json::Value) {
    let mut last = prequal(a).await;
    for _ in 0..100 {
        if until(&last.1) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        last = prequal(a).await;
    }
    panic!("/prequal never got there: {}", last.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prequal_says_the_sessions_open_and_their_time_to_first_chunk() {
    let a = agent(&["--work-ms", "5"]).await;
    let (head, probe) = prequal(&a).await;
    assert_eq!(probe["rif"], 0, "{probe}");
    assert!(
        probe["latency_ms"].is_null(),
        "no session has started: {probe}"
    );
    assert_eq!(probe["samples"], 0, "{probe}");
    assert_eq!(header(&head, "x-prequal-latency-us"), "0");

    // Five sessions open first — four WebSocket, one gRPC — so every speak is at RIF 5.
    let mut ws = Vec::new();
    for _ in 0..4 {
        ws.push(connect(&a).await);
    }
    let (tx, mut rx) = mpsc::channel(4);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let client = pb::agent_client::AgentClient::new(channel(&a).await);
    let call = timeout(WAIT, client.clone().converse(requests)).await;
    let mut grpc = call.expect("the call opened in time").unwrap().into_inner();
    for _ in 0..100 {
        if a.agent.tracker().active() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(a.agent.tracker().active(), 5);

    // Three WebSocket sessions and the gRPC one speak; the fourth WebSocket never does.
    for w in &mut ws[..3] {
        speak_once(w).await;
    }
    let speak = pb::Speak { chunks: 1 };
    tx.send(pb::ClientFrame {
        frame: Some(Client::Speak(speak)),
    })
    .await
    .unwrap();
    for _ in 0..2 {
        let frame = timeout(WAIT, grpc.message()).await.expect("in time");
        let frame = frame.unwrap().and_then(|f| f.frame);
        assert!(
            matches!(frame, Some(Server::Chunk(_) | Server::Done(_))),
            "{frame:?}"
        );
    }

    let (head, probe) = prequal_until(&a, |p| p["rif"] == 5 && p["samples"] == 4).await;
    let latency = probe["latency_ms"].as_f64().expect("a latency");
    assert!((WORK_MS..5_000.0).contains(&latency), "{probe}");
    assert_eq!(probe["samples_used"], 4, "all at RIF 5: {probe}");
    assert_eq!(header(&head, "x-prequal-rif"), "5");
    let micros: u64 = header(&head, "x-prequal-latency-us").parse().unwrap();
    assert_eq!(micros, (latency * 1000.0).round() as u64);

    // ORCA's first report is the latest one, at least as new as the reply above.
    let mut orca = OpenRcaServiceClient::new(channel(&a).await);
    let reports = orca.stream_core_metrics(OrcaLoadReportRequest::default());
    let mut reports = timeout(WAIT, reports).await.unwrap().unwrap().into_inner();
    let first = timeout(WAIT, reports.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.named_metrics["prequal_rif"], 5.0, "{first:?}");
    assert_eq!(
        first.named_metrics["prequal_latency_ms"], latency,
        "{first:?}"
    );

    // A session leaves: the RIF follows, and the samples at 5 are still near 4.
    ws[0].close(None).await.unwrap();
    let (_, probe) = prequal_until(&a, |p| p["rif"] == 4).await;
    assert_eq!(probe["latency_ms"].as_f64(), Some(latency), "{probe}");

    drop((tx, grpc, ws, reports));
    let last = a.shutdown().await;
    assert_eq!(last.active, 0);
}
