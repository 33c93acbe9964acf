//! The agent's gRPC side on loopback, driven by tonic clients: ORCA reports against
//! `/load`, sessions over `Converse` through every ending, bad frames, floods and
//! shutdown, with the counters checked exact afterwards.

mod common;

use std::time::Duration;

use common::{agent, channel, reasons, settled};
use futures_util::stream;
use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_report::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use livecount_server::RunningAgent;
use livecount_server::generated::livecount::agent::v1 as pb;
use livecount_server::load_driver::fetch_load;
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};

/// A channel through a loopback TCP relay; aborting the returned task cuts the
/// connection as a crashed client or a dead network would (closing the socket with
/// streams open). Dropping a tonic call alone is not that: while its request stream is
/// pending, hyper keeps the HTTP/2 stream open.
async fn cuttable_channel(a: &RunningAgent) -> (Channel, tokio::task::JoinHandle<()>) {
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (listen, upstream) = (relay.local_addr().unwrap(), a.grpc.unwrap());
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut down, _)) = relay.accept().await {
            conns.spawn(async move {
                let mut up = tokio::net::TcpStream::connect(upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
            });
        }
    });
    let ch = Endpoint::from_shared(format!("http://{listen}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (ch, task)
}

/// One `Converse` call: frames go in through `tx`, come back on `rx`.
struct Session {
    tx: mpsc::Sender<pb::ClientFrame>,
    rx: Streaming<pb::ServerFrame>,
}

/// Opens a session; dropping its `tx` ends the request stream (a clean end).
async fn open(ch: &Channel) -> Result<Session, Status> {
    let (tx, mut rx) = mpsc::channel(16);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let response = AgentClient::new(ch.clone()).converse(requests).await?;
    Ok(Session {
        tx,
        rx: response.into_inner(),
    })
}

fn frame(f: Client) -> pb::ClientFrame {
    pb::ClientFrame { frame: Some(f) }
}

fn speak(chunks: u32) -> pb::ClientFrame {
    frame(Client::Speak(pb::Speak { chunks }))
}

impl Session {
    async fn send(&self, f: pb::ClientFrame) {
        self.tx.send(f).await.unwrap();
    }

    /// The next frame; `Ok(None)` when the call ended OK, `Err` with its status.
    async fn recv(&mut self) -> Result<Option<Server>, Status> {
        let next = tokio::time::timeout(Duration::from_secs(5), self.rx.message())
            .await
            .expect("a frame within 5 s")?;
        Ok(next.map(|f| f.frame.expect("frames have a oneof set")))
    }
}

/// An ORCA stream reporting every `every` (no faster than the agent publishes).
async fn orca(ch: &Channel, every: Duration) -> Streaming<OrcaLoadReport> {
    let request = OrcaLoadReportRequest {
        report_interval: Some(prost_types::Duration {
            seconds: every.as_secs() as i64,
            nanos: every.subsec_nanos() as i32,
        }),
        request_cost_names: Vec::new(),
    };
    OpenRcaServiceClient::new(ch.clone())
        .stream_core_metrics(request)
        .await
        .unwrap()
        .into_inner()
}

/// `a` and `b` equal, allowing for JSON's float parsing.
fn close(a: f64, b: &serde_json::Value) -> bool {
    let b = b.as_f64().unwrap();
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

/// Reports are compared only once they were taken after the server had observably
/// reached the state under test (three sessions, one generating): the ORCA stream's
/// first report is the latest one published, which may be older than the speak. The
/// test publishes one such stale report on purpose, between the opens and the speak,
/// where the reporter's tick used to land by chance once in a few dozen runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orca_reports_carry_the_numbers_of_load() {
    let a = agent(&[]).await;
    let ch = channel(&a).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(open(&ch).await.unwrap());
    }
    let stale = a.agent.publish(); // as if the reporter ticked right now
    assert_eq!((stale.active, stale.generating), (3, 0), "{stale:?}");
    sessions[0].send(speak(10_000)).await;
    assert!(matches!(
        sessions[0].recv().await,
        Ok(Some(Server::Chunk(_)))
    ));
    let reached = a.agent.tracker().snapshot();
    assert_eq!((reached.active, reached.generating), (3, 1), "{reached:?}");
    // Every 0.3 s against the agent's 0.2 s: were both every 0.2 s, their phases could
    // lock with each publish landing between a report and the `/load` read after it,
    // so that no report ever matched.
    let mut reports = orca(&ch, Duration::from_millis(300)).await;
    let mut matched = 0;
    for _ in 0..100 {
        let report = tokio::time::timeout(Duration::from_secs(5), reports.message())
            .await
            .expect("a report within 5 s")
            .unwrap()
            .expect("the stream stays open");
        let load = fetch_load(&a.http.to_string()).await.unwrap();
        let named = &report.named_metrics;
        if named["report_sequence"] <= reached.sequence as f64 {
            continue; // taken before the state under test: true, but of an earlier moment
        }
        if named["report_sequence"] != load["sequence"].as_u64().unwrap() as f64 {
            continue; // published between the two reads
        }
        assert_eq!(named["active_sessions"], 3.0, "{report:?}");
        assert_eq!(named["generating_sessions"], 1.0, "{report:?}");
        // The WRR weight (qps ÷ utilisation) is the headroom in thousandths of a session,
        // both fields positive.
        assert!(report.rps_fractional > 0.0, "{report:?}");
        assert!(report.application_utilization > 0.0, "{report:?}");
        let weight = report.rps_fractional / report.application_utilization;
        let headroom = load["headroom"].as_f64().unwrap().max(0.01);
        assert!(
            (weight - 1000.0 * headroom).abs() < 1e-6 * 1000.0 * headroom,
            "{report:?} {load}"
        );
        assert!(close(
            report.application_utilization,
            &serde_json::json!(4.0 / (4.0 + headroom))
        ));
        assert!(close(report.cpu_utilization, &load["raw_utilisation"]));
        assert!(close(
            named["effective_capacity"],
            &load["effective_capacity"]
        ));
        assert!(close(named["headroom"], &load["headroom"]));
        matched += 1;
        if matched == 2 {
            break;
        }
    }
    assert_eq!(matched, 2, "no ORCA report matched /load's sequence");
    drop(sessions);
    drop(reports);
    settled(&a).await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converse_speaks_interrupts_and_ends_completed_or_disconnected() {
    let a = agent(&[]).await;
    let ch = channel(&a).await;
    let mut s = open(&ch).await.unwrap();
    s.send(speak(3)).await;
    for seq in 0..3 {
        assert_eq!(
            s.recv().await.unwrap(),
            Some(Server::Chunk(pb::Chunk { seq }))
        );
    }
    assert_eq!(
        s.recv().await.unwrap(),
        Some(Server::Done(pb::Done { chunks: 3 }))
    );
    s.send(speak(10_000)).await;
    assert!(matches!(s.recv().await, Ok(Some(Server::Chunk(_)))));
    assert_eq!(a.agent.tracker().snapshot().generating, 1);
    s.send(frame(Client::Interrupt(pb::Interrupt {}))).await;
    while !matches!(s.recv().await.unwrap(), Some(Server::Interrupted(_))) {}
    assert_eq!(
        a.agent.tracker().snapshot().generating,
        0,
        "barge-in keeps the session, listening"
    );
    s.send(frame(Client::Idle(pb::Idle {}))).await;
    let Session { tx, mut rx } = s;
    drop(tx); // the client ends its stream
    assert!(matches!(rx.message().await, Ok(None)), "the call ends OK");
    assert_eq!(settled(&a).await, reasons(&[("completed", 1)]));

    let mut bye = open(&ch).await.unwrap();
    bye.send(frame(Client::Bye(pb::Bye {}))).await;
    assert_eq!(bye.recv().await.unwrap(), None, "bye ends the call OK");

    let (cut, relay) = cuttable_channel(&a).await;
    let mut gone = Vec::new();
    for _ in 0..3 {
        let mut s = open(&cut).await.unwrap();
        s.send(speak(10_000)).await;
        assert!(matches!(s.recv().await, Ok(Some(Server::Chunk(_)))));
        gone.push(s);
    }
    relay.abort(); // mid-response: the connection dies under the calls
    assert_eq!(
        settled(&a).await,
        reasons(&[("completed", 2), ("disconnected", 3)])
    );
    let last = a.shutdown().await;
    assert_eq!((last.started, last.ended, last.active), (5, 5, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_end_invalid_argument_and_others_keep_going() {
    let a = agent(&["--idle-timeout-secs", "1"]).await;
    let ch = channel(&a).await;
    let mut good = open(&ch).await.unwrap();

    let mut range = open(&ch).await.unwrap();
    range.send(speak(0)).await;
    assert!(
        matches!(range.recv().await, Ok(Some(Server::Error(e))) if e.message.contains("out of range"))
    );
    let status = range.recv().await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("out of range"), "{status:?}");

    let mut empty = open(&ch).await.unwrap();
    empty.send(pb::ClientFrame { frame: None }).await;
    assert!(matches!(empty.recv().await, Ok(Some(Server::Error(_)))));
    let status = empty.recv().await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("empty frame"), "{status:?}");

    good.send(speak(1)).await;
    assert!(matches!(good.recv().await, Ok(Some(Server::Chunk(_)))));
    good.send(frame(Client::Bye(pb::Bye {}))).await;
    while good.recv().await.unwrap().is_some() {}

    let mut silent = open(&ch).await.unwrap();
    let status = silent.recv().await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "idle timeout");
    assert_eq!(
        settled(&a).await,
        reasons(&[("completed", 1), ("failed", 2), ("disconnected", 1)])
    );
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_above_max_sessions_is_refused_resource_exhausted() {
    let a = agent(&["--max-sessions", "3"]).await;
    let (ch, relay) = cuttable_channel(&a).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(open(&ch).await.unwrap());
    }
    for _ in 0..5 {
        let status = open(&ch).await.err().expect("refused");
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(status.message(), "at capacity: 3 sessions");
    }
    for s in &mut held {
        s.send(speak(1)).await;
        assert!(matches!(s.recv().await, Ok(Some(Server::Chunk(_)))));
    }
    let report = a.agent.publish();
    assert_eq!((report.active, report.refused), (3, 5));
    relay.abort();
    assert_eq!(settled(&a).await, reasons(&[("disconnected", 3)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_sessions_unavailable_and_the_orca_stream() {
    let a = agent(&["--drain-secs", "1"]).await;
    let ch = channel(&a).await;
    let mut open_sessions = Vec::new();
    for _ in 0..4 {
        open_sessions.push(open(&ch).await.unwrap());
    }
    open_sessions[0].send(speak(10_000)).await;
    assert!(matches!(
        open_sessions[0].recv().await,
        Ok(Some(Server::Chunk(_)))
    ));
    let mut reports = orca(&ch, Duration::ZERO).await;
    reports.message().await.unwrap().expect("a first report");
    let stopping = tokio::spawn(a.shutdown());
    for s in &mut open_sessions {
        let status = loop {
            match s.recv().await {
                Ok(Some(Server::Chunk(_))) => {}
                Ok(other) => panic!("{other:?}"),
                Err(status) => break status,
            }
        };
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert_eq!(status.message(), "server shutting down");
    }
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), reports.message())
            .await
            .expect("the ORCA stream ends")
        {
            Ok(Some(_)) => {}
            end => break end,
        }
    };
    assert!(matches!(end, Ok(None)), "ORCA ends OK: {end:?}");
    let last = stopping.await.unwrap();
    assert!(last.draining);
    assert_eq!((last.active, last.started, last.ended), (0, 4, 4));
    assert_eq!(last.ended_by_reason.get("shutdown"), Some(&4));
}
