//! The ext_proc service on a loopback tonic server, asked as Envoy asks: one stream per
//! request, the request headers first. What it answers (the endpoint list in the header and
//! the `envoy.lb` metadata, the same value; 503 with `Retry-After` when nothing has room,
//! `UNAVAILABLE` for gRPC), that it ends each stream after its answer, and every wait
//! bounded (a silent stream, a stream with no phase).

use std::sync::Arc;
use std::time::Duration;

use livecount_balance::{BackendLoad, LoadFeed, LoadSignal};
use livecount_epp::generated::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use livecount_epp::generated::envoy::config::core::v3::{HeaderMap, HeaderValue};
use livecount_epp::generated::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use livecount_epp::generated::envoy::service::ext_proc::v3::{
    HttpBody, HttpHeaders, ImmediateResponse, ProcessingRequest, ProcessingResponse,
    processing_request, processing_response,
};
use livecount_epp::{
    BackendSpec, DESTINATION, EndpointPicker, METADATA_NAMESPACE, NO_ROOM_DETAILS, Picker,
    PickerConfig,
};
use prost_types::value::Kind;
use tokio::sync::mpsc;
use tonic::transport::Channel;

const B1: &str = "127.0.0.1:7001";
const B2: &str = "127.0.0.1:7002";

/// The service on a loopback port over two backends; `reported` says whether they have
/// reported (room on both, b2 emptier). Returns a client and the reports' senders (kept
/// open: a closed feed would be a finished source).
async fn serve(
    reported: bool,
    service: impl FnOnce(EndpointPicker) -> EndpointPicker,
) -> (
    ExternalProcessorClient<Channel>,
    Vec<mpsc::Sender<BackendLoad>>,
) {
    let mut senders = Vec::new();
    let mut feeds = Vec::new();
    for b in [B1, B2] {
        let (tx, rx) = mpsc::channel(1);
        senders.push(tx);
        let feed = LoadFeed::spawn(rx, LoadSignal::Occupancy, Duration::from_secs(60));
        feeds.push((BackendSpec::orca(b.parse().unwrap()), feed));
    }
    let config = PickerConfig {
        seed: Some(1),
        ..PickerConfig::default()
    };
    let picker = Arc::new(Picker::from_feeds(feeds, config).unwrap());
    if reported {
        senders[0]
            .send(BackendLoad::new(1, 60, 100.0))
            .await
            .unwrap();
        senders[1]
            .send(BackendLoad::new(1, 10, 100.0))
            .await
            .unwrap();
        let heard = async {
            while !picker.ready_all() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), heard)
            .await
            .expect("both reports reach the picker");
    }
    let server = service(EndpointPicker::new(picker)).server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (ExternalProcessorClient::new(channel), senders)
}

fn headers(content_type: &str) -> ProcessingRequest {
    let header = |k: &str, v: &str| HeaderValue {
        key: k.into(),
        value: String::new(),
        raw_value: v.as_bytes().to_vec(),
    };
    ProcessingRequest {
        request: Some(processing_request::Request::RequestHeaders(HttpHeaders {
            headers: Some(HeaderMap {
                headers: vec![
                    header(":method", "POST"),
                    header(":path", "/livecount.agent.v1.Agent/Converse"),
                    header("content-type", content_type),
                ],
            }),
            end_of_stream: false,
        })),
        metadata_context: None,
    }
}

/// Sends `messages` on one stream (kept open unless `close`), returns every answer until
/// the service ends the stream, and how it ended.
async fn exchange(
    client: &mut ExternalProcessorClient<Channel>,
    messages: Vec<ProcessingRequest>,
    close: bool,
) -> (Vec<ProcessingResponse>, Result<(), tonic::Status>) {
    let (tx, rx) = mpsc::channel(8);
    for m in messages {
        tx.send(m).await.unwrap();
    }
    let keep = if close {
        drop(tx);
        None
    } else {
        Some(tx)
    };
    let requests = futures_util::stream::poll_fn({
        let mut rx = rx;
        move |cx| rx.poll_recv(cx)
    });
    let mut answers = Vec::new();
    let call = async {
        let mut stream = client.process(requests).await?.into_inner();
        while let Some(a) = stream.message().await? {
            answers.push(a);
        }
        Ok(())
    };
    let ended = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("every stream ends within 10 s");
    drop(keep);
    (answers, ended)
}

/// The endpoint list of a routing answer: the header's and the metadata's, which must agree.
fn routed_to(answer: &ProcessingResponse) -> String {
    let Some(processing_response::Response::RequestHeaders(h)) = &answer.response else {
        panic!("not a request-headers answer: {answer:?}");
    };
    let set = &h
        .response
        .as_ref()
        .unwrap()
        .header_mutation
        .as_ref()
        .unwrap()
        .set_headers;
    assert_eq!(set.len(), 1, "{set:?}");
    assert_eq!(
        set[0].append_action,
        HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        "a client's own destination header is replaced, never appended to"
    );
    let header = set[0].header.as_ref().unwrap();
    assert_eq!(header.key, DESTINATION);
    let from_header = String::from_utf8(header.raw_value.clone()).unwrap();
    let namespace = &answer.dynamic_metadata.as_ref().unwrap().fields[METADATA_NAMESPACE];
    let Some(Kind::StructValue(inner)) = &namespace.kind else {
        panic!("{namespace:?}")
    };
    let Some(Kind::StringValue(from_metadata)) = &inner.fields[DESTINATION].kind else {
        panic!("{inner:?}")
    };
    assert_eq!(&from_header, from_metadata, "header and metadata differ");
    from_header
}

fn refusal(answer: &ProcessingResponse) -> &ImmediateResponse {
    match &answer.response {
        Some(processing_response::Response::ImmediateResponse(r)) => r,
        other => panic!("not a local reply: {other:?}"),
    }
}

#[tokio::test]
async fn a_request_is_routed_in_the_header_and_the_metadata_then_the_stream_ends() {
    let (mut client, _reports) = serve(true, |s| s).await;
    let (answers, ended) = exchange(&mut client, vec![headers("application/grpc")], false).await;
    ended.expect("the service ends the stream OK");
    assert_eq!(answers.len(), 1, "{answers:?}");
    // Both have room; b2 is emptier and the pair is both of them.
    assert_eq!(routed_to(&answers[0]), format!("{B2},{B1}"));
}

#[tokio::test]
async fn no_room_is_503_with_retry_after_and_unavailable_for_grpc() {
    let (mut client, _reports) = serve(false, |s| s.retry_after(Duration::from_millis(1500))).await;
    for (content_type, grpc) in [("application/grpc", Some(14)), ("", None)] {
        let (answers, ended) = exchange(&mut client, vec![headers(content_type)], false).await;
        ended.unwrap();
        let reply = refusal(&answers[0]);
        assert_eq!(reply.status.as_ref().unwrap().code, 503);
        let set = &reply.headers.as_ref().unwrap().set_headers;
        let retry = set[0].header.as_ref().unwrap();
        assert_eq!(
            (retry.key.as_str(), retry.raw_value.as_slice()),
            ("retry-after", &b"2"[..])
        );
        assert_eq!(reply.grpc_status.as_ref().map(|g| g.status), grpc);
        assert_eq!(reply.details, NO_ROOM_DETAILS);
    }
}

#[tokio::test]
async fn other_phases_get_an_empty_answer_of_their_kind() {
    let (mut client, _reports) = serve(true, |s| s).await;
    let body = ProcessingRequest {
        request: Some(processing_request::Request::RequestBody(HttpBody {
            body: b"x".to_vec(),
            end_of_stream: true,
        })),
        metadata_context: None,
    };
    let (answers, ended) = exchange(&mut client, vec![body], false).await;
    ended.unwrap();
    assert!(matches!(
        answers[0].response,
        Some(processing_response::Response::RequestBody(_))
    ));
    assert_eq!(answers[0].dynamic_metadata, None);
}

#[tokio::test]
async fn every_wait_is_bounded() {
    let (mut client, _reports) = serve(true, |s| {
        s.first_message_timeout(Duration::from_millis(200))
    })
    .await;
    // Silent: nothing sent, the stream held open.
    let (answers, ended) = exchange(&mut client, vec![], false).await;
    assert!(answers.is_empty());
    assert_eq!(ended.unwrap_err().code(), tonic::Code::DeadlineExceeded);
    // Closed before asking: nothing to answer, an OK end.
    let (answers, ended) = exchange(&mut client, vec![], true).await;
    assert!(answers.is_empty());
    ended.unwrap();
    // A message naming no phase.
    let empty = ProcessingRequest {
        request: None,
        metadata_context: None,
    };
    let (_, ended) = exchange(&mut client, vec![empty], false).await;
    assert_eq!(ended.unwrap_err().code(), tonic::Code::InvalidArgument);
}
