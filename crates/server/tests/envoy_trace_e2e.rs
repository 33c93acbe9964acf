//! End to end on loopback: session traces through a real Envoy (1.40, its OpenTelemetry
//! tracer) into one OTLP/gRPC receiver, `tests/lb/otlp_receiver.py` (grpcio on the official
//! protobufs). Two `livecount-agent` backends export their session spans and metrics there,
//! Envoy its span of every request, whose context it sends upstream in `traceparent`.
//!
//! Scripted sessions go through Envoy's one listener, WebSocket and gRPC `Converse` alike,
//! each labelled by a request header Envoy copies onto its span (`x-livecount-client`):
//! turns (a speak read to its `done`, or a long speak interrupted after its first chunk),
//! then `bye` (`completed`), a cut connection (`disconnected`), or nothing until both agents
//! are SIGTERM'd (`shutdown`, after a `drain` event). During the drain one session of each
//! transport is refused (`draining`). One client sends a `traceparent` of its own. The
//! agents trace with `--otlp-trace-ratio 0`: only the caller's sampled flag (Envoy samples
//! every request) makes a span, and a session straight to an agent, without one, leaves none
//! (one that completes, and one held on each agent so that both stay open through the
//! drain whichever agent Envoy gave the held scripts).
//!
//! Checked in the receiver's decoded spans, per labelled request: exactly one Envoy span,
//! and exactly one agent span in its trace, whose parent is that Envoy span (and Envoy's
//! parent is the client's span when it sent one); the agent span's name, kind, transport,
//! end reason, duration and events — phases alternating generating / listening, one per
//! turn each, interrupts as sent, a first chunk iff the client spoke, a drain event iff the
//! session was open at the drain, one end event, last — or the refusal's zero-length span.
//! Overall: no span without its request, and per backend the spans by end reason and the
//! refusal spans equal what the agent's own last metrics export counted.
//!
//! `#[ignore]`d (it needs Envoy, grpcio and `opentelemetry-proto` from
//! `scripts/lb_tools.sh`; about 8 s): `scripts/test.sh` runs it. The config is
//! `deploy/envoy/envoy-tracing.yaml.in`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt, stream};
use livecount_report::otlp::names;
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

mod common;

use common::envoy::{STEP, admin_get, channel, envoy_log, frame, relay, start_envoy};
use common::lb::Fleet;
use common::otlp::{Receiver, num};

/// The config the test runs (and the one `docs/otel.md` shows).
const TEMPLATE: &str = include_str!("../../../deploy/envoy/envoy-tracing.yaml.in");

/// The request header Envoy copies onto its span as [`CLIENT_TAG`].
const CLIENT_HEADER: &str = "x-livecount-client";
const CLIENT_TAG: &str = "livecount.client";

/// The traceparent one client sends: its own trace and span, sampled.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

// === the receiver ===

/// Every span received so far.
fn spans(receiver: &Receiver) -> Vec<Span> {
    receiver.traces().iter().flat_map(spans_of).collect()
}

// === decoded spans ===

/// Key-value attributes, each value its `AnyValue` object (`{"string_value": …}`).
#[derive(Debug, Clone, Default)]
struct Attributes(BTreeMap<String, Value>);

impl Attributes {
    fn of(item: &Value) -> Self {
        let list = item["attributes"].as_array().cloned().unwrap_or_default();
        Attributes(
            list.into_iter()
                .map(|kv| (kv["key"].as_str().unwrap().to_owned(), kv["value"].clone()))
                .collect(),
        )
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.0.get(key)?["string_value"].as_str()
    }

    fn double(&self, key: &str) -> Option<f64> {
        self.0.get(key)?.get("double_value").map(num)
    }
}

#[derive(Debug, Clone)]
struct Event {
    name: String,
    time: u64,
    attributes: Attributes,
}

/// One span as the receiver decoded it (ids in hex; `parent` empty for a root).
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    kind: String,
    trace_id: String,
    span_id: String,
    parent: String,
    start: u64,
    end: u64,
    attributes: Attributes,
    events: Vec<Event>,
    /// The span as decoded, for the record.
    raw: Value,
}

impl Span {
    fn events(&self, name: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.name == name).collect()
    }

    /// A compact line for failure messages.
    fn brief(&self) -> String {
        let events: Vec<&str> = self.events.iter().map(|e| e.name.as_str()).collect();
        format!(
            "{} {} {}/{} parent {:?} {:?} events {events:?}",
            self.service, self.name, self.trace_id, self.span_id, self.parent, self.attributes.0
        )
    }
}

/// The spans of one `ExportTraceServiceRequest`.
fn spans_of(request: &Value) -> Vec<Span> {
    let mut out = Vec::new();
    for resource in request["resource_spans"].as_array().unwrap() {
        let service = Attributes::of(&resource["resource"]);
        let service = service.text("service.name").unwrap_or_default().to_owned();
        for scope in resource["scope_spans"].as_array().unwrap() {
            for s in scope["spans"].as_array().unwrap() {
                out.push(span(&service, s));
            }
        }
    }
    out
}

fn span(service: &str, s: &Value) -> Span {
    let text = |key: &str| s[key].as_str().unwrap_or_default().to_owned();
    let events = s["events"].as_array().cloned().unwrap_or_default();
    Span {
        service: service.to_owned(),
        name: text("name"),
        kind: text("kind"),
        trace_id: text("trace_id"),
        span_id: text("span_id"),
        parent: text("parent_span_id"),
        start: num(&s["start_time_unix_nano"]) as u64,
        end: num(&s["end_time_unix_nano"]) as u64,
        attributes: Attributes::of(s),
        events: events
            .iter()
            .map(|e| Event {
                name: e["name"].as_str().unwrap().to_owned(),
                time: num(&e["time_unix_nano"]) as u64,
                attributes: Attributes::of(e),
            })
            .collect(),
        raw: s.clone(),
    }
}

// === what the clients do ===

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    WebSocket,
    Grpc,
}

impl Transport {
    /// `livecount.session.transport`.
    fn attribute(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::Grpc => "grpc",
        }
    }

    /// Envoy's span name: the route's decorator.
    fn envoy_operation(self) -> &'static str {
        match self {
            Transport::WebSocket => "/session",
            Transport::Grpc => "livecount.agent.v1.Agent/Converse",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// Speak 3 chunks and read them to `done`.
    Speak,
    /// Speak 10 000 chunks, interrupt after the first, read to `interrupted`.
    Interrupt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// `bye`: `completed`.
    Bye,
    /// The client's connection cut with the session open: `disconnected`.
    Cut,
    /// Nothing more until the agent's drain cuts it: `shutdown`.
    Held,
}

impl End {
    fn reason(self) -> &'static str {
        match self {
            End::Bye => "completed",
            End::Cut => "disconnected",
            End::Held => "shutdown",
        }
    }
}

/// One client's session, start to end.
#[derive(Debug, Clone, Copy)]
struct Script {
    /// Sent in [`CLIENT_HEADER`]; Envoy puts it on its span.
    label: &'static str,
    transport: Transport,
    turns: &'static [Turn],
    end: End,
    /// Sends its own `traceparent` ([`CLIENT_TRACE`], [`CLIENT_SPAN`], sampled).
    traceparent: bool,
}

impl Script {
    const fn new(
        label: &'static str,
        transport: Transport,
        turns: &'static [Turn],
        end: End,
    ) -> Self {
        Script {
            label,
            transport,
            turns,
            end,
            traceparent: false,
        }
    }

    fn interrupts(&self) -> usize {
        self.turns.iter().filter(|t| **t == Turn::Interrupt).count()
    }
}

use End::{Bye, Cut, Held};
use Transport::{Grpc, WebSocket};
use Turn::{Interrupt, Speak};

/// The sessions driven through Envoy, all at once.
const SCRIPTS: &[Script] = &[
    Script {
        traceparent: true,
        ..Script::new("ws-bye", WebSocket, &[Speak, Interrupt, Speak], Bye)
    },
    Script::new("ws-quiet", WebSocket, &[], Bye),
    Script::new("ws-cut", WebSocket, &[Speak], Cut),
    Script::new("ws-held", WebSocket, &[Speak, Interrupt], Held),
    Script::new("grpc-bye", Grpc, &[Interrupt, Speak, Interrupt], Bye),
    Script::new("grpc-quiet", Grpc, &[], Bye),
    Script::new("grpc-cut", Grpc, &[Speak, Interrupt], Cut),
    Script::new("grpc-held", Grpc, &[Speak], Held),
];

/// The labels of the two sessions refused during the drain.
const REFUSED: [(&str, Transport); 2] = [("ws-refused", WebSocket), ("grpc-refused", Grpc)];

fn traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// Runs `script` through `front`; a held session says so on `at_rest` once its turns are
/// done, then waits for the drain's end.
async fn run(
    front: SocketAddr,
    script: Script,
    at_rest: mpsc::Sender<&'static str>,
) -> Result<(), String> {
    let ran = match script.transport {
        WebSocket => ws_session(front, script, at_rest).await,
        Grpc => grpc_session(front, script, at_rest).await,
    };
    ran.map_err(|e| format!("{}: {e}", script.label))
}

// === WebSocket clients ===

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// What came in on a WebSocket.
#[derive(Debug)]
enum WsIn {
    Text(String),
    /// A close frame (its code), or the end of the stream.
    Closed(Option<u16>),
}

/// Opens `/session` at `to` with the script's headers, within [`STEP`].
async fn ws_open(to: SocketAddr, label: &str, with_traceparent: bool) -> Result<Ws, WsError> {
    let mut request = format!("ws://{to}/session").into_client_request()?;
    let headers = request.headers_mut();
    headers.insert(CLIENT_HEADER, HeaderValue::from_str(label).unwrap());
    if with_traceparent {
        headers.insert(
            "traceparent",
            HeaderValue::from_str(&traceparent()).unwrap(),
        );
    }
    let opened = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(request)).await;
    Ok(opened.expect("a WebSocket handshake within 10 s")?.0)
}

async fn ws_send(ws: &mut Ws, text: &str) -> Result<(), String> {
    ws.send(Message::text(text))
        .await
        .map_err(|e| format!("send {text}: {e}"))
}

/// The next text frame or the close, within [`STEP`].
async fn ws_next(ws: &mut Ws) -> Result<WsIn, String> {
    loop {
        let next = tokio::time::timeout(STEP, ws.next()).await;
        match next.map_err(|_| "no frame within 10 s")? {
            Some(Ok(Message::Text(t))) => return Ok(WsIn::Text(t.to_string())),
            Some(Ok(Message::Close(f))) => return Ok(WsIn::Closed(f.map(|f| f.code.into()))),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(format!("read: {e}")),
            None => return Ok(WsIn::Closed(None)),
        }
    }
}

/// Reads frames until one of type `kind` (chunks may come before it).
async fn ws_until(ws: &mut Ws, kind: &str) -> Result<(), String> {
    let want = format!(r#""type":"{kind}""#);
    loop {
        match ws_next(ws).await? {
            WsIn::Text(t) if t.contains(&want) => return Ok(()),
            WsIn::Text(t) if t.contains(r#""type":"chunk""#) => {}
            other => return Err(format!("waiting for {kind}: {other:?}")),
        }
    }
}

async fn ws_session(
    to: SocketAddr,
    script: Script,
    at_rest: mpsc::Sender<&'static str>,
) -> Result<(), String> {
    let mut ws = ws_open(to, script.label, script.traceparent)
        .await
        .map_err(|e| format!("open: {e}"))?;
    for turn in script.turns {
        match turn {
            Speak => {
                ws_send(&mut ws, r#"{"type":"speak","chunks":3}"#).await?;
                ws_until(&mut ws, "done").await?;
            }
            Interrupt => {
                ws_send(&mut ws, r#"{"type":"speak","chunks":10000}"#).await?;
                ws_until(&mut ws, "chunk").await?;
                ws_send(&mut ws, r#"{"type":"interrupt"}"#).await?;
                ws_until(&mut ws, "interrupted").await?;
            }
        }
    }
    let code = match script.end {
        Cut => {
            drop(ws); // no close frame: the TCP connection just ends
            return Ok(());
        }
        Bye => {
            ws_send(&mut ws, r#"{"type":"bye"}"#).await?;
            1000
        }
        Held => {
            at_rest.send(script.label).await.unwrap();
            1012 // the drain's "service restart"
        }
    };
    match ws_next(&mut ws).await? {
        WsIn::Closed(Some(c)) if c == code => Ok(()),
        other => Err(format!("expected close {code}, got {other:?}")),
    }
}

// === gRPC clients ===

/// The script's metadata on a request.
fn labelled<T>(message: T, label: &str, with_traceparent: bool) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let meta = request.metadata_mut();
    meta.insert(CLIENT_HEADER, label.parse().unwrap());
    if with_traceparent {
        meta.insert("traceparent", traceparent().parse().unwrap());
    }
    request
}

type Frames = tonic::Streaming<pb::ServerFrame>;

/// Opens a `Converse` call on `ch`: its request sender and response stream, or the status
/// the call ended with at once.
async fn converse(
    ch: tonic::transport::Channel,
    label: &str,
    with_traceparent: bool,
) -> Result<(mpsc::Sender<pb::ClientFrame>, Frames), tonic::Status> {
    let (tx, mut rx) = mpsc::channel(16);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let mut client = pb::agent_client::AgentClient::new(ch);
    let call = client.converse(labelled(requests, label, with_traceparent));
    let opened = tokio::time::timeout(STEP, call).await;
    Ok((
        tx,
        opened.expect("response headers within 10 s")?.into_inner(),
    ))
}

/// Reads frames until one `is_it` accepts (chunks may come before it).
async fn grpc_until(
    frames: &mut Frames,
    what: &str,
    is_it: impl Fn(&Server) -> bool,
) -> Result<(), String> {
    loop {
        match common::envoy::next(frames).await? {
            Ok(Some(f)) if is_it(&f) => return Ok(()),
            Ok(Some(Server::Chunk(_))) => {}
            other => return Err(format!("waiting for {what}: {other:?}")),
        }
    }
}

async fn grpc_send(tx: &mpsc::Sender<pb::ClientFrame>, f: Client) -> Result<(), String> {
    tx.send(frame(f))
        .await
        .map_err(|_| "the request stream closed".to_owned())
}

async fn grpc_session(
    front: SocketAddr,
    script: Script,
    at_rest: mpsc::Sender<&'static str>,
) -> Result<(), String> {
    // A cut client gets a connection of its own, through a relay it can cut.
    let (to, cut) = match script.end {
        Cut => {
            let (addr, cut) = relay(front).await;
            (addr, Some(cut))
        }
        _ => (front, None),
    };
    let (tx, mut frames) = converse(channel(to).await, script.label, script.traceparent)
        .await
        .map_err(|s| format!("open: {s:?}"))?;
    for turn in script.turns {
        match turn {
            Speak => {
                grpc_send(&tx, Client::Speak(pb::Speak { chunks: 3 })).await?;
                grpc_until(&mut frames, "done", |f| matches!(f, Server::Done(_))).await?;
            }
            Interrupt => {
                grpc_send(&tx, Client::Speak(pb::Speak { chunks: 10_000 })).await?;
                grpc_until(&mut frames, "a chunk", |f| matches!(f, Server::Chunk(_))).await?;
                grpc_send(&tx, Client::Interrupt(pb::Interrupt {})).await?;
                let interrupted = |f: &Server| matches!(f, Server::Interrupted(_));
                grpc_until(&mut frames, "interrupted", interrupted).await?;
            }
        }
    }
    match script.end {
        Cut => {
            cut.expect("a cut client has a relay").abort();
            return Ok(());
        }
        Bye => grpc_send(&tx, Client::Bye(pb::Bye {})).await?,
        Held => at_rest.send(script.label).await.unwrap(),
    }
    match (script.end, common::envoy::next(&mut frames).await?) {
        (Bye, Ok(None)) => Ok(()),
        (Held, Err(s)) if s.code() == tonic::Code::Unavailable => Ok(()),
        (_, other) => Err(format!("at the end: {other:?}")),
    }
}

/// A session refused while both agents drain: 503 for WebSocket, `UNAVAILABLE` for gRPC.
async fn refused(front: SocketAddr, label: &str, transport: Transport) -> Result<(), String> {
    match transport {
        WebSocket => match ws_open(front, label, false).await {
            Err(WsError::Http(r)) if r.status() == 503 => Ok(()),
            Err(e) => Err(format!("{label}: {e}")),
            Ok(_) => Err(format!("{label}: a session opened during the drain")),
        },
        Grpc => match converse(channel(front).await, label, false).await {
            Err(s) if s.code() == tonic::Code::Unavailable => Ok(()),
            Err(s) => Err(format!("{label}: {s:?}")),
            Ok((_tx, mut frames)) => match common::envoy::next(&mut frames).await? {
                Err(s) if s.code() == tonic::Code::Unavailable => Ok(()),
                other => Err(format!(
                    "{label}: a session opened during the drain: {other:?}"
                )),
            },
        },
    }
}

// === the checks ===

/// The agents' `service.name` (`livecount_server`'s default for the agent).
const AGENT: &str = "livecount-agent";
const SESSION: &str = "livecount.session";
const REFUSED_SPAN: &str = "livecount.session.refused";

/// Envoy's one span for the request labelled `label`, and the one agent span in its trace.
fn pair<'a>(spans: &'a [Span], label: &str) -> (&'a Span, &'a Span) {
    let envoy: Vec<&Span> = spans
        .iter()
        .filter(|s| s.service == "envoy" && s.attributes.text(CLIENT_TAG) == Some(label))
        .collect();
    let [envoy] = envoy[..] else {
        panic!("{label}: {} Envoy spans, not one: {envoy:#?}", envoy.len());
    };
    let agent: Vec<&Span> = spans
        .iter()
        .filter(|s| s.service == AGENT && s.trace_id == envoy.trace_id)
        .collect();
    let [agent] = agent[..] else {
        panic!(
            "{label}: {} agent spans in Envoy's trace, not one: {agent:#?}",
            agent.len()
        );
    };
    assert_eq!(
        agent.parent,
        envoy.span_id,
        "{label}: the parent is Envoy's span\n{}",
        agent.brief()
    );
    assert_eq!(envoy.kind, "SPAN_KIND_SERVER", "{label}: {}", envoy.brief());
    assert!(
        agent.start >= envoy.start,
        "{label}: the session starts within Envoy's request"
    );
    (envoy, agent)
}

/// The session span of `script` against what its client did.
fn check_session(script: &Script, envoy: &Span, span: &Span) {
    let label = script.label;
    let brief = span.brief();
    let want_operation = script.transport.envoy_operation();
    assert_eq!(envoy.name, want_operation, "{label}: {}", envoy.brief());
    if script.traceparent {
        assert_eq!(
            envoy.trace_id, CLIENT_TRACE,
            "{label}: Envoy continues the client's trace"
        );
        assert_eq!(
            envoy.parent, CLIENT_SPAN,
            "{label}: under the client's span"
        );
    } else {
        assert_eq!(envoy.parent, "", "{label}: Envoy's span is a root");
    }
    if script.transport == WebSocket {
        assert_eq!(
            envoy.attributes.text("http.status_code"),
            Some("101"),
            "{label}"
        );
    }
    assert_eq!(
        (span.name.as_str(), span.kind.as_str()),
        (SESSION, "SPAN_KIND_SERVER"),
        "{brief}"
    );
    let a = &span.attributes;
    assert_eq!(
        a.text("livecount.session.transport"),
        Some(script.transport.attribute()),
        "{brief}"
    );
    assert!(
        matches!(a.text("livecount.backend.name"), Some("b1" | "b2")),
        "{brief}"
    );
    // A u64: `tracing-opentelemetry` sends it as its decimal string.
    let id = a.text("livecount.session.id").map(str::parse::<u64>);
    assert!(matches!(id, Some(Ok(_))), "{brief}");
    assert_eq!(
        a.text("livecount.session.end_reason"),
        Some(script.end.reason()),
        "{brief}"
    );
    let duration = a.double("livecount.session.duration").expect("a duration");
    let length = (span.end - span.start) as f64 / 1e9;
    // The tracker's clock is the coarse one (a tick of up to 10 ms): a quick session may
    // read 0 s. The span closes when the session's last holder lets go, which may be
    // later than its end (a gRPC stream whose client vanished: when the server notices);
    // the end event is at the end.
    let tick = 0.011;
    assert!(
        duration >= 0.0 && duration <= length + tick,
        "{label}: {duration} s in {length} s"
    );
    let end = span.events.last().expect("an end event");
    let at = (end.time - span.start) as f64 / 1e9;
    assert!(
        (at - duration).abs() <= 2.0 * tick,
        "{label}: the end event {at} s after the start, the duration {duration} s"
    );
    check_events(script, span, duration);
}

/// The span's events against the script: phases, interrupts, first chunk, drain, end.
fn check_events(script: &Script, span: &Span, duration: f64) {
    let brief = span.brief();
    let phases: Vec<&str> = span
        .events("livecount.session.phase")
        .iter()
        .map(|e| {
            e.attributes
                .text("livecount.session.phase")
                .expect("the phase")
        })
        .collect();
    let want: Vec<&str> = script
        .turns
        .iter()
        .flat_map(|_| ["generating", "listening"])
        .collect();
    assert_eq!(
        phases, want,
        "{}: one generating/listening per turn\n{brief}",
        script.label
    );
    let count = |name: &str| span.events(name).len();
    assert_eq!(
        count("livecount.session.interrupt"),
        script.interrupts(),
        "{brief}"
    );
    let first = span.events("livecount.session.first_chunk");
    assert_eq!(
        first.len(),
        usize::from(!script.turns.is_empty()),
        "{brief}"
    );
    if let [first] = first[..] {
        let ttfc = first
            .attributes
            .double("livecount.session.time_to_first_chunk");
        assert!(
            ttfc.is_some_and(|t| (0.0..=duration).contains(&t)), // coarse: may read 0
            "{ttfc:?}: {brief}"
        );
    }
    assert_eq!(
        count("livecount.session.drain"),
        usize::from(script.end == Held),
        "{brief}"
    );
    let end = span.events.last().expect("events");
    assert_eq!(
        end.name, "livecount.session.end",
        "the end comes last: {brief}"
    );
    assert_eq!(count("livecount.session.end"), 1, "{brief}");
    let reason = end.attributes.text("livecount.session.end_reason");
    assert_eq!(reason, Some(script.end.reason()), "{brief}");
    let times: Vec<u64> = span.events.iter().map(|e| e.time).collect();
    assert!(times.is_sorted(), "events in order: {brief}");
    assert!(
        span.start <= times[0] && times[times.len() - 1] <= span.end,
        "{brief}"
    );
}

/// A refusal's span: zero length, `draining`, under Envoy's span of the refused request.
fn check_refused(label: &str, transport: Transport, envoy: &Span, span: &Span) {
    let brief = span.brief();
    assert_eq!(span.name, REFUSED_SPAN, "{label}: {brief}");
    // Opened and closed at once (the clock reads nanoseconds: within a millisecond).
    assert!(span.end - span.start < 1_000_000, "zero length: {brief}");
    let a = &span.attributes;
    assert_eq!(
        a.text("livecount.session.refusal"),
        Some("draining"),
        "{brief}"
    );
    assert!(
        matches!(a.text("livecount.backend.name"), Some("b1" | "b2")),
        "{brief}"
    );
    let (key, want) = match transport {
        WebSocket => ("http.status_code", "503"),
        Grpc => ("grpc.status_code", "14"), // UNAVAILABLE
    };
    assert_eq!(
        envoy.attributes.text(key),
        Some(want),
        "{label}: {}",
        envoy.brief()
    );
}

/// What one agent's last metrics export counted.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    starts: u64,
    ends: BTreeMap<String, u64>,
    refusals: u64,
}

/// Every agent's last metrics export, by its name (`service.instance.id`).
fn last_counts(requests: &[Value]) -> BTreeMap<String, Counts> {
    let mut out = BTreeMap::new();
    for request in requests {
        let resource = &request["resource_metrics"][0];
        let attributes = Attributes::of(&resource["resource"]);
        let name = attributes
            .text(names::SERVICE_INSTANCE_ID)
            .unwrap()
            .to_owned();
        let mut counts = Counts::default();
        for scope in resource["scope_metrics"].as_array().unwrap() {
            for m in scope["metrics"].as_array().unwrap() {
                let points = m["sum"]["data_points"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for p in points {
                    let n = num(&p["as_int"]) as u64;
                    match m["name"].as_str().unwrap() {
                        names::STARTS => counts.starts = n,
                        names::REFUSALS => counts.refusals = n,
                        names::ENDS if n > 0 => {
                            let reason = Attributes::of(&p)
                                .text(names::END_REASON)
                                .unwrap()
                                .to_owned();
                            counts.ends.insert(reason, n);
                        }
                        _ => {}
                    }
                }
            }
        }
        out.insert(name, counts);
    }
    out
}

/// The agents' spans, counted as their metrics count sessions, by backend name.
fn span_counts(spans: &[Span]) -> BTreeMap<String, Counts> {
    let mut out: BTreeMap<String, Counts> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.service == AGENT) {
        let backend = s
            .attributes
            .text("livecount.backend.name")
            .unwrap()
            .to_owned();
        let counts = out.entry(backend).or_default();
        if s.name == REFUSED_SPAN {
            counts.refusals += 1;
        } else {
            counts.starts += 1;
            let reason = s.attributes.text("livecount.session.end_reason").unwrap();
            *counts.ends.entry(reason.to_owned()).or_default() += 1;
        }
    }
    out
}

// === the run ===

/// The template with the agents' HTTP ports and the receiver's port filled in
/// (`start_envoy` fills the rest).
fn render(fleet: &Fleet, otlp: u16) -> String {
    let mut config = TEMPLATE.replace("@OTLP@", &otlp.to_string());
    for (i, b) in fleet.backends.iter().enumerate() {
        config = config.replace(&format!("@HTTP{}@", i + 1), &b.http.to_string());
    }
    config
}

/// Polls `done` every 50 ms for at most [`STEP`]; panics with `what` and the last value.
async fn wait_until<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    mut poll: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let start = Instant::now();
    loop {
        let last = poll().await;
        if done(&last) {
            return last;
        }
        assert!(
            start.elapsed() < STEP,
            "{what}: not within 10 s; last {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most [`STEP`]) for agent `i` to exit; its status and its log's last line.
async fn exited(fleet: &mut Fleet, i: usize) -> (std::process::ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = fleet.procs.0[i].try_wait().unwrap() {
            let log = std::fs::read_to_string(&fleet.backends[i].log).unwrap();
            return (status, log.lines().last().unwrap_or_default().to_owned());
        }
        assert!(
            start.elapsed() < STEP,
            "{} still runs 10 s after SIGTERM",
            fleet.backends[i].name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy, grpcio and opentelemetry-proto (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn every_session_span_is_a_child_of_envoys_span_and_tells_what_its_client_did() {
    let t0 = Instant::now();
    let dir =
        std::env::temp_dir().join(format!("livecount-envoy-trace-otlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let receiver = Receiver::start(&dir);
    let endpoint = receiver.endpoint();
    // Ratio 0: a span only where the caller's sampled flag asks for one.
    let otlp = ["--otlp-endpoint", &endpoint, "--otlp-interval-secs", "0.3"];
    let options = [&otlp[..], &["--otlp-trace-ratio", "0", "--drain-secs", "2"]].concat();
    let mut fleet = Fleet::start("envoy-trace", 2, usize::MAX, &options);
    let config = render(&fleet, receiver.port);
    let (envoy, _) = start_envoy(&mut fleet, &config, "envoy");
    let admin = envoy.admin_addr();
    wait_until(
        "Envoy's /ready",
        || admin_get(&admin, "/ready"),
        Option::is_some,
    )
    .await;
    fleet.loads().await;

    // No traceparent, straight to an agent: no span (a sampler of ratio 0 decides). One
    // to b1 that ends, and one held on each agent, so that both stay open through the
    // drain's deadline whichever agent Envoy put the held scripts on.
    let (at_rest_tx, mut at_rest) = mpsc::channel(SCRIPTS.len() + 2);
    let direct = Script::new("direct", WebSocket, &[Speak], Bye);
    let b1: SocketAddr = fleet.backends[0].http_addr().parse().unwrap();
    ws_session(b1, direct, at_rest_tx.clone())
        .await
        .expect("the direct session");
    let mut clients = JoinSet::new();
    for b in &fleet.backends {
        let anchor = Script::new("anchor", WebSocket, &[], Held);
        let to: SocketAddr = b.http_addr().parse().unwrap();
        clients.spawn(ws_session(to, anchor, at_rest_tx.clone()));
    }
    let anchors = fleet.backends.len();

    // Every script at once; the held ones report when at rest.
    let front = envoy.front();
    for &script in SCRIPTS {
        clients.spawn(run(front, script, at_rest_tx.clone()));
    }
    let held = anchors + SCRIPTS.iter().filter(|s| s.end == Held).count();
    for _ in 0..held {
        let rested = tokio::time::timeout(STEP, at_rest.recv()).await;
        rested.expect("held sessions at rest within 10 s");
    }
    // Before the drain, every other session has ended at its agent (a cut one too).
    let total = (1 + anchors + SCRIPTS.len()) as u64;
    let sum = |loads: &Vec<livecount_report::LoadReport>| {
        let started: u64 = loads.iter().map(|l| l.started).sum();
        (started, loads.iter().map(|l| l.active).sum::<u64>())
    };
    wait_until(
        "the sessions but the held ones ended",
        || fleet.loads(),
        |l| sum(l) == (total, held as u64),
    )
    .await;

    // The drain: both agents at once; a session of each transport is refused meanwhile,
    // and the held ones end `shutdown` at its deadline (2 s).
    for i in 0..fleet.backends.len() {
        fleet.send_sigterm(i);
    }
    let draining = |l: &Vec<livecount_report::LoadReport>| l.iter().all(|l| l.draining);
    wait_until("both agents draining", || fleet.loads(), draining).await;
    for (label, transport) in REFUSED {
        refused(front, label, transport)
            .await
            .expect("refused while draining");
    }
    let ended = tokio::time::timeout(Duration::from_secs(20), clients.join_all()).await;
    for client in ended.expect("every client ends within 20 s") {
        client.expect("client session");
    }
    for i in 0..fleet.backends.len() {
        let (status, last) = exited(&mut fleet, i).await;
        eprintln!("{}: {status}; {last}", fleet.backends[i].name);
        assert!(status.success() && last.contains("active 0"), "{last}");
    }

    // Every request's spans: Envoy's (flushed every 200 ms) and the agents' (flushed at
    // their exit).
    let requests = SCRIPTS.len() + REFUSED.len();
    wait_until(
        "every request's two spans",
        || std::future::ready(spans(&receiver)),
        |spans| spans.len() >= 2 * requests,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let spans = spans(&receiver);
    let by_service = |name: &str| spans.iter().filter(|s| s.service == name).count();
    eprintln!(
        "spans: {} from Envoy, {} from the agents",
        by_service("envoy"),
        by_service(AGENT)
    );
    for s in &spans {
        eprintln!("  {}", s.brief());
    }
    assert_eq!(
        (by_service("envoy"), by_service(AGENT)),
        (requests, requests),
        "\n{}",
        envoy_log(&envoy)
    );

    for script in SCRIPTS {
        let (envoy, session) = pair(&spans, script.label);
        check_session(script, envoy, session);
    }
    for (label, transport) in REFUSED {
        let (envoy, refusal) = pair(&spans, label);
        check_refused(label, transport, envoy, refusal);
    }
    // Per backend, the spans count what the agent counted; the direct sessions have none
    // (b1's that completed, and each agent's anchor, ended `shutdown`).
    let mut counted = last_counts(&receiver.metrics());
    for (name, counts) in &mut counted {
        let direct = if name == "b1" { 2 } else { 1 };
        counts.starts -= direct;
        *counts.ends.get_mut("shutdown").unwrap() -= 1;
        if name == "b1" {
            *counts.ends.get_mut("completed").unwrap() -= 1;
        }
    }
    counted
        .values_mut()
        .for_each(|c| c.ends.retain(|_, n| *n > 0));
    assert_eq!(
        span_counts(&spans),
        counted,
        "spans and metrics, per backend"
    );

    // For docs/otel.md's example: the request's two spans as received.
    let (envoy_span, session_span) = pair(&spans, "ws-bye");
    for (what, s) in [("envoy", envoy_span), ("session", session_span)] {
        eprintln!(
            "example {what} span: {}",
            serde_json::to_string(&s.raw).unwrap()
        );
    }
    eprintln!("envoy trace e2e: {:.1} s", t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
