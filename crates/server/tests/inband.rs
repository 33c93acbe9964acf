//! The agent's in-band ORCA on loopback (`--inband-orca`): a `Converse` call's trailers, a
//! WebSocket upgrade and `/load` carry the latest report, decoding to the same weight the
//! out-of-band stream advertises; `off` sends none.

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::{agent, channel};
use futures_util::stream;
use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_server::RunningAgent;
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(10);

/// One `Converse` call (speak once, read to `done`, `bye`); returns its trailers' report.
async fn converse_trailer(a: &RunningAgent) -> Option<OrcaLoadReport> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let speak = pb::ClientFrame {
        frame: Some(Client::Speak(pb::Speak { chunks: 1 })),
    };
    tx.send(speak).await.unwrap();
    let mut client = AgentClient::new(channel(a).await);
    let mut call = tokio::time::timeout(WAIT, client.converse(requests))
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    loop {
        let frame = tokio::time::timeout(WAIT, call.message()).await.unwrap();
        let frame = frame.unwrap().expect("a frame before the end").frame;
        if matches!(frame, Some(pb::server_frame::Frame::Done(_))) {
            break;
        }
    }
    let bye = pb::ClientFrame {
        frame: Some(Client::Bye(pb::Bye {})),
    };
    tx.send(bye).await.unwrap();
    let end = tokio::time::timeout(WAIT, call.message()).await.unwrap();
    assert!(end.unwrap().is_none(), "bye ends the call OK");
    let trailers = call.trailers().await.unwrap().expect("trailers");
    let value = trailers.get_bin("endpoint-load-metrics-bin")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.as_encoded_bytes())
        .unwrap();
    Some(OrcaLoadReport::decode(&bytes[..]).unwrap())
}

/// The response head of `GET path` (HTTP/1.1, `Connection: close`).
async fn head(a: &RunningAgent, path: &str, extra: &str) -> String {
    let mut conn = tokio::net::TcpStream::connect(a.http).await.unwrap();
    let close = if extra.contains("Connection:") {
        ""
    } else {
        "Connection: close\r\n"
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}{close}\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0; 8192];
    let mut got = 0;
    while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(WAIT, conn.read(&mut buf[got..]))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed before the head ended");
        got += n;
    }
    String::from_utf8_lossy(&buf[..got]).into_owned()
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_report_by_default() {
    let a = agent(&[]).await;
    let orca = converse_trailer(&a).await.expect("the -bin trailer");
    let weight = orca.rps_fractional / orca.application_utilization;
    assert!(weight > 0.0 && weight.is_finite(), "{orca:?}");
    assert!(orca.named_metrics.contains_key("active_sessions"));

    let load = head(&a, "/load", "").await;
    let text = header(&load, "endpoint-load-metrics").expect("on /load");
    assert!(
        text.starts_with("TEXT ") && text.contains("rps_fractional="),
        "{text}"
    );

    let upgrade = head(
        &a,
        "/session",
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
    )
    .await;
    assert!(upgrade.starts_with("HTTP/1.1 101"), "{upgrade}");
    assert!(
        header(&upgrade, "endpoint-load-metrics").is_some(),
        "{upgrade}"
    );
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_sends_none_and_bin_goes_everywhere() {
    let a = agent(&["--inband-orca", "off"]).await;
    assert!(converse_trailer(&a).await.is_none());
    assert!(header(&head(&a, "/load", "").await, "endpoint-load-metrics").is_none());
    a.shutdown().await;

    let a = agent(&["--inband-orca", "bin"]).await;
    assert!(converse_trailer(&a).await.is_some());
    let load = head(&a, "/load", "").await;
    assert!(
        header(&load, "endpoint-load-metrics-bin").is_some(),
        "{load}"
    );
    a.shutdown().await;
}
