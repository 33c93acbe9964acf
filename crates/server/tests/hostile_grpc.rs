//! The agent's gRPC side against hostile and careless clients on loopback: hand-made
//! HTTP/2 frames (through the `h2` crate, below tonic) that break the gRPC framing or the
//! protobuf, resets, cancels, deadlines and a reader that never reads. After each: the
//! status the client got, and the tracker settled with active 0, started = ended and
//! the reasons the client caused.

mod common;
#[path = "../../tower/tests/common/raw_h2.rs"]
mod raw_h2;

use std::time::Duration;

use common::{agent, channel, reasons, settled};
use futures_util::stream;
use livecount_server::RunningAgent;
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use prost::Message;
use raw_h2::raw_h2;
use tokio::sync::mpsc;
use tonic::codegen::{Bytes, http};
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

/// Generous bound on every wait (a noisy CI machine), never a performance claim.
const PATIENCE: Duration = Duration::from_secs(10);

/// The path of the agent's session RPC.
const CONVERSE: &str = "/livecount.agent.v1.Agent/Converse";

// === raw HTTP/2 ===

/// One gRPC message: the compressed flag, the length prefix, the bytes.
fn grpc_message(compressed: bool, declared_len: u32, bytes: &[u8]) -> Bytes {
    let mut out = vec![u8::from(compressed)];
    out.extend_from_slice(&declared_len.to_be_bytes());
    out.extend_from_slice(bytes);
    out.into()
}

fn speak(chunks: u32) -> pb::ClientFrame {
    pb::ClientFrame {
        frame: Some(Client::Speak(pb::Speak { chunks })),
    }
}

/// A well-framed message holding `frame`.
fn framed(frame: &pb::ClientFrame) -> Bytes {
    let bytes = frame.encode_to_vec();
    grpc_message(false, bytes.len() as u32, &bytes)
}

/// What a raw call ended with: the HTTP status, the `grpc-status` and `grpc-message`
/// (from the trailers, or the headers of a trailers-only answer), and the data bytes.
#[derive(Debug)]
struct Answer {
    http: http::StatusCode,
    grpc_status: Option<String>,
    grpc_message: String,
    data: usize,
}

/// Reads a whole response, releasing flow control as it goes.
async fn answer(response: h2::client::ResponseFuture) -> Answer {
    tokio::time::timeout(PATIENCE, async move {
        let response = response.await.unwrap();
        let status = response.status();
        let header =
            |h: &http::HeaderMap, name: &str| h.get(name).map(|v| v.to_str().unwrap().to_owned());
        let (mut grpc_status, mut grpc_message) = (
            header(response.headers(), "grpc-status"),
            header(response.headers(), "grpc-message"),
        );
        let mut body = response.into_body();
        let mut data = 0;
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            data += chunk.len();
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if let Some(trailers) = body.trailers().await.unwrap() {
            grpc_status = header(&trailers, "grpc-status");
            grpc_message = header(&trailers, "grpc-message");
        }
        Answer {
            http: status,
            grpc_status,
            grpc_message: grpc_message.unwrap_or_default(),
            data,
        }
    })
    .await
    .expect("the call ends within the patience")
}

/// Reads `n` gRPC messages from a response body (however DATA frames split them).
async fn read_messages(body: &mut h2::RecvStream, n: usize) -> Vec<pb::ServerFrame> {
    let (mut bytes, mut frames) = (Vec::new(), Vec::new());
    while frames.len() < n {
        let data = tokio::time::timeout(PATIENCE, body.data()).await;
        let data = data.expect("data within the patience").unwrap().unwrap();
        let _ = body.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
        while bytes.len() >= 5 {
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            if bytes.len() < 5 + len {
                break;
            }
            frames.push(pb::ServerFrame::decode(&bytes[5..5 + len]).unwrap());
            bytes.drain(..5 + len);
        }
    }
    frames
}

/// `Code` as the number `grpc-status` carries.
fn code(c: Code) -> Option<String> {
    Some((c as i32).to_string())
}

/// Sends `bytes` as the request (ending the stream if `end`) and reads the answer.
async fn send_raw(a: &RunningAgent, bytes: Bytes, end: bool) -> Answer {
    let mut h2 = raw_h2(a.grpc.unwrap(), 65_535).await;
    let (response, mut body) = h2.call_as(CONVERSE, "application/grpc").await;
    body.send_data(bytes, end).unwrap();
    answer(response).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_messages_end_internal_and_count_failed() {
    let a = agent(&[]).await;
    let speak_bytes = speak(1).encode_to_vec();
    let cases: [(&str, Bytes, bool, &str); 3] = [
        // A length-delimited field 1 whose length runs past the message.
        (
            "garbage protobuf",
            grpc_message(false, 3, &[0x0a, 0x7f, 0x01]),
            false,
            "decode",
        ),
        (
            "compressed flag without grpc-encoding",
            grpc_message(true, speak_bytes.len() as u32, &speak_bytes),
            false,
            "compressed-flag",
        ),
        (
            "length prefix past the end of the stream",
            grpc_message(false, 100, &speak_bytes),
            true,
            "EOF",
        ),
    ];
    for (n, (what, bytes, end, says)) in cases.into_iter().enumerate() {
        let got = send_raw(&a, bytes, end).await;
        assert_eq!(got.http, http::StatusCode::OK, "{what}: {got:?}");
        assert_eq!(got.grpc_status, code(Code::Internal), "{what}: {got:?}");
        assert!(got.grpc_message.contains(says), "{what}: {got:?}");
        assert!(got.data > 0, "{what}: an error frame comes first: {got:?}");
        assert_eq!(
            settled(&a).await,
            reasons(&[("failed", n as u64 + 1)]),
            "{what}"
        );
    }
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_grpc_gets_415_and_is_no_session() {
    let a = agent(&[]).await;
    let mut h2 = raw_h2(a.grpc.unwrap(), 65_535).await;
    for content_type in ["text/plain", "application/json", "application/grp"] {
        let (response, mut body) = h2.call_as(CONVERSE, content_type).await;
        let _ = body.send_data(framed(&speak(1)), true);
        let got = answer(response).await;
        assert_eq!(
            got.http,
            http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{got:?}"
        );
        assert_eq!(got.grpc_status, code(Code::InvalidArgument), "{got:?}");
        assert!(got.grpc_message.contains("content-type"), "{got:?}");
    }
    let s = a.agent.tracker().snapshot();
    assert_eq!((s.started, s.ended, s.active), (0, 0, 0), "{s:?}");
    // The same connection still serves real gRPC.
    let (response, mut body) = h2.call_as(CONVERSE, "application/grpc+proto").await;
    body.send_data(framed(&speak(1)), true).unwrap();
    let got = answer(response).await;
    assert_eq!(got.grpc_status, code(Code::Ok), "{got:?}");
    assert_eq!(settled(&a).await, reasons(&[("completed", 1)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_mid_response_counts_cancelled() {
    let a = agent(&[]).await;
    let mut h2 = raw_h2(a.grpc.unwrap(), 65_535).await;
    for _ in 0..5 {
        let (response, mut body) = h2.call_as(CONVERSE, "application/grpc").await;
        body.send_data(framed(&speak(10_000)), false).unwrap();
        let mut response = tokio::time::timeout(PATIENCE, response)
            .await
            .unwrap()
            .unwrap()
            .into_body();
        let first = tokio::time::timeout(PATIENCE, response.data())
            .await
            .unwrap();
        assert!(first.unwrap().unwrap().len() > 5, "a chunk frame");
        body.send_reset(h2::Reason::CANCEL);
    }
    assert_eq!(settled(&a).await, reasons(&[("cancelled", 5)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_while_listening_counts_cancelled_and_a_cut_connection_disconnected() {
    let a = agent(&[]).await;
    let mut h2 = raw_h2(a.grpc.unwrap(), 65_535).await;
    for _ in 0..5 {
        let (response, mut body) = h2.call_as(CONVERSE, "application/grpc").await;
        body.send_data(framed(&speak(1)), false).unwrap();
        let mut response = tokio::time::timeout(PATIENCE, response)
            .await
            .unwrap()
            .unwrap()
            .into_body();
        // The chunk and the done: the session is listening again, nothing in flight.
        let frames = read_messages(&mut response, 2).await;
        assert!(
            matches!(frames[1].frame, Some(Server::Done(_))),
            "{frames:?}"
        );
        body.send_reset(h2::Reason::CANCEL);
    }
    assert_eq!(settled(&a).await, reasons(&[("cancelled", 5)]));
    let mut calls = Vec::new();
    for _ in 0..3 {
        let (response, body) = h2.call_as(CONVERSE, "application/grpc").await;
        let response = tokio::time::timeout(PATIENCE, response).await.unwrap();
        calls.push((response.unwrap(), body));
    }
    tokio::time::timeout(PATIENCE, async {
        while a.agent.tracker().active() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    drop(h2); // the connection task goes, and the socket with it
    assert_eq!(
        settled(&a).await,
        reasons(&[("cancelled", 5), ("disconnected", 3)])
    );
    a.shutdown().await;
}

// === tonic clients ===

/// Opens a `Converse` call (with `timeout` as its `grpc-timeout`, if any); frames go in
/// through the sender, dropping it half-closes the call.
async fn open(
    ch: &Channel,
    timeout: Option<Duration>,
) -> Result<(mpsc::Sender<pb::ClientFrame>, Streaming<pb::ServerFrame>), Status> {
    let (tx, mut rx) = mpsc::channel(16);
    let mut request = tonic::Request::new(stream::poll_fn(move |cx| rx.poll_recv(cx)));
    if let Some(t) = timeout {
        request.set_timeout(t);
    }
    let response = AgentClient::new(ch.clone()).converse(request).await?;
    Ok((tx, response.into_inner()))
}

/// The next frame within the patience; `Ok(None)` when the call ended OK.
async fn next(rx: &mut Streaming<pb::ServerFrame>) -> Result<Option<Server>, Status> {
    let next = tokio::time::timeout(PATIENCE, rx.message())
        .await
        .expect("a frame within the patience")?;
    Ok(next.map(|f| f.frame.expect("frames have a oneof set")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tonic_client_that_drops_its_call_mid_response_counts_cancelled() {
    let a = agent(&[]).await;
    let ch = channel(&a).await;
    for _ in 0..10 {
        let (speaking, spoke) = tokio::sync::oneshot::channel();
        let call = tokio::spawn({
            let ch = ch.clone();
            async move {
                let (tx, mut rx) = open(&ch, None).await.unwrap();
                tx.send(speak(10_000)).await.unwrap();
                assert!(matches!(next(&mut rx).await, Ok(Some(Server::Chunk(_)))));
                let _ = speaking.send(());
                std::future::pending::<()>().await; // holds the call until aborted
            }
        });
        tokio::time::timeout(PATIENCE, spoke)
            .await
            .unwrap()
            .unwrap();
        call.abort(); // drops the request sender and the response stream together
        let _ = call.await;
    }
    assert_eq!(settled(&a).await, reasons(&[("cancelled", 10)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_close_lets_the_response_in_flight_finish() {
    let a = agent(&[]).await;
    let ch = channel(&a).await;
    let (tx, mut rx) = open(&ch, None).await.unwrap();
    tx.send(speak(5)).await.unwrap();
    drop(tx); // half-close right behind the speak
    for seq in 0..5 {
        assert_eq!(
            next(&mut rx).await.unwrap(),
            Some(Server::Chunk(pb::Chunk { seq }))
        );
    }
    assert_eq!(
        next(&mut rx).await.unwrap(),
        Some(Server::Done(pb::Done { chunks: 5 }))
    );
    assert_eq!(next(&mut rx).await.unwrap(), None, "then the call ends OK");
    assert_eq!(settled(&a).await, reasons(&[("completed", 1)]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_outlives_its_grpc_timeout_ends_deadline_exceeded_timed_out() {
    let a = agent(&[]).await;
    let ch = channel(&a).await;
    let began = tokio::time::Instant::now();
    let (tx, mut rx) = open(&ch, Some(Duration::from_millis(300))).await.unwrap();
    tx.send(speak(10_000)).await.unwrap();
    let status = loop {
        match next(&mut rx).await {
            Ok(Some(Server::Chunk(_))) => {}
            Ok(other) => panic!("{other:?}"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("grpc-timeout"), "{status:?}");
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "not before the deadline"
    );
    assert_eq!(settled(&a).await, reasons(&[("timed_out", 1)]));
    drop(tx);
    a.shutdown().await;
}

// === a reader that never reads ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_frees_its_slot() {
    let a = agent(&["--max-sessions", "1", "--idle-timeout-secs", "1"]).await;
    // A 64-byte window: the server's sends stall after a few chunks.
    let mut stalled = raw_h2(a.grpc.unwrap(), 64).await;
    let (response, mut body) = stalled.call_as(CONVERSE, "application/grpc").await;
    body.send_data(framed(&speak(10_000)), false).unwrap();
    let _response = tokio::time::timeout(PATIENCE, response)
        .await
        .unwrap()
        .unwrap();
    // Never read: the count must still return to 0 within idle timeout + slack ...
    let freed = tokio::time::timeout(PATIENCE, async {
        while a.agent.tracker().active() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    freed.await.expect("the stalled session ended");
    // ... and its slot be free again: a new session is admitted.
    let ch = channel(&a).await;
    let admitted = tokio::time::timeout(PATIENCE, async {
        loop {
            match open(&ch, None).await {
                Ok(call) => break call,
                Err(s) if s.code() == Code::ResourceExhausted => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(s) => panic!("{s:?}"),
            }
        }
    });
    let (tx, mut rx) = admitted.await.expect("a new session is admitted");
    tx.send(speak(1)).await.unwrap();
    assert!(matches!(next(&mut rx).await, Ok(Some(Server::Chunk(_)))));
    drop((tx, rx));
    settled(&a).await;
    a.shutdown().await;
}
