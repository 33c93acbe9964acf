//! Plays a planned workload through a balancer: one gRPC `Converse` call per session, on
//! a connection of its own (every session is another client), at the planned instants,
//! speaking in the planned phases, ending as planned. Every wait is bounded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream;
use livecount_server::generated::livecount::agent::v1 as pb;
use livecount_sim::workload::{PlannedEnd, PlannedSession};
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tonic::Streaming;
use tonic::transport::Endpoint;

use crate::scaling::Scaling;

/// Connecting and opening a call: beyond this the session counts as refused.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait for one frame while a response streams.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);
/// How long past its planned length a timed-out session may wait for the server's end.
const TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// What happened to one planned session.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Its arrival, seconds from the replay's start (as planned).
    pub at_s: f64,
    /// Arrival to the call's response headers (the session is set up), milliseconds.
    pub startup_ms: Option<f64>,
    /// Arrival to the first chunk of its greeting, milliseconds.
    pub first_stream_ms: Option<f64>,
    /// How it ended.
    pub end: End,
}

/// How a session ended, as its client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// As planned (a timed-out session: the server ended it at its maximum length).
    Planned(PlannedEnd),
    /// Never opened: the balancer or a backend refused it, or it did not open in 10 s.
    Refused(String),
    /// Opened, then ended by something other than its plan (a status, a lost stream).
    Dropped(String),
}

/// Plays `plan` through the balancer instances at `fronts`, each session through the one
/// the simulator sends it to (`tier`'s [`proxy_of`](livecount_sim::Balancer::proxy_of): in
/// turn, or by its shares); returns one outcome per session, in plan order, once the last
/// one has ended.
pub async fn replay(
    fronts: &[SocketAddr],
    tier: &livecount_sim::Balancer,
    plan: &[PlannedSession],
    scaling: &Scaling,
) -> Vec<Outcome> {
    assert_eq!(
        fronts.len(),
        tier.proxies.max(1) as usize,
        "one front per proxy"
    );
    let start = Instant::now();
    let pacing = Arc::new(scaling.clone());
    let tasks: Vec<_> = plan
        .iter()
        .cloned()
        .enumerate()
        .map(|(id, session)| {
            let front = fronts[tier.proxy_of(id as u64)];
            let pacing = Arc::clone(&pacing);
            tokio::spawn(async move {
                let arrival = start + Duration::from_secs_f64(session.at_s);
                tokio::time::sleep_until(arrival).await;
                play(front, &session, &pacing, arrival).await
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for (task, session) in tasks.into_iter().zip(plan) {
        out.push(task.await.unwrap_or_else(|e| Outcome {
            at_s: session.at_s,
            startup_ms: None,
            first_stream_ms: None,
            end: End::Dropped(format!("the client task failed: {e}")),
        }));
    }
    out
}

fn frame(f: Client) -> pb::ClientFrame {
    pb::ClientFrame { frame: Some(f) }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// One session, from its arrival to its end.
async fn play(
    front: SocketAddr,
    s: &PlannedSession,
    pacing: &Scaling,
    arrival: Instant,
) -> Outcome {
    let mut outcome = Outcome {
        at_s: s.at_s,
        startup_ms: None,
        first_stream_ms: None,
        end: End::Refused(String::new()),
    };
    let endpoint = Endpoint::from_shared(format!("http://{front}")).expect("a loopback URI");
    let channel = match timeout(OPEN_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return refused(outcome, format!("connect: {e}")),
        Err(_) => return refused(outcome, "connect: no answer within 10 s".into()),
    };
    let (tx, mut rx) = mpsc::channel(8);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let left = OPEN_TIMEOUT.saturating_sub(arrival.elapsed());
    let mut response = match timeout(left, AgentClient::new(channel).converse(requests)).await {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => {
            return refused(
                outcome,
                format!("{:?}: {}", status.code(), status.message()),
            );
        }
        Err(_) => return refused(outcome, "no response headers within 10 s".into()),
    };
    outcome.startup_ms = Some(ms_since(arrival));
    let end_at = arrival + Duration::from_secs_f64(s.length_s);
    // The greeting: one chunk at once, the session's time to first stream.
    let greeting = speak(&tx, &mut response, 1, Some(arrival)).await;
    match greeting {
        Ok(first) => outcome.first_stream_ms = first,
        Err(why) => return dropped(outcome, s, why, arrival),
    }
    let phases: &[(f64, f64)] = if s.short { &[] } else { &s.speaking };
    for &(from, len) in phases {
        tokio::time::sleep_until(arrival + Duration::from_secs_f64(from)).await;
        if let Err(why) = speak(&tx, &mut response, pacing.chunks_for(len), None).await {
            return dropped(outcome, s, why, arrival);
        }
    }
    tokio::time::sleep_until(end_at).await;
    let ended = match s.end {
        PlannedEnd::Completed => bye(&tx, &mut response).await,
        PlannedEnd::TimedOut => server_ends(&mut response, end_at + TIMEOUT_GRACE).await,
        // A reset stream (dropping the call), and a dropped connection: the channel goes
        // with it, as a client that went away.
        PlannedEnd::Cancelled | PlannedEnd::Disconnected => Ok(()),
    };
    match ended {
        Ok(()) => {
            outcome.end = End::Planned(s.end);
            outcome
        }
        Err(why) => dropped(outcome, s, why, arrival),
    }
}

fn refused(mut o: Outcome, why: String) -> Outcome {
    o.end = End::Refused(why);
    o
}

/// Ended early: dropped, unless the session was to outlive the server's maximum length and
/// the server ended it at that length (mid-phase, as the plan's phases run to its length;
/// late, when its last response streamed slowly on a saturated backend).
fn dropped(mut o: Outcome, s: &PlannedSession, why: String, arrival: Instant) -> Outcome {
    let at_limit = arrival.elapsed().as_secs_f64() >= s.length_s - 2.0
        && why.starts_with(&format!("{:?}", tonic::Code::DeadlineExceeded));
    o.end = if s.end == PlannedEnd::TimedOut && at_limit {
        End::Planned(PlannedEnd::TimedOut)
    } else {
        End::Dropped(format!("{why} (planned {:?}, {:.1} s)", s.end, s.length_s))
    };
    o
}

/// Asks for `chunks` chunks and reads them and `done`; returns the time from `since` to
/// the first chunk when `since` is given.
async fn speak(
    tx: &mpsc::Sender<pb::ClientFrame>,
    response: &mut Streaming<pb::ServerFrame>,
    chunks: u32,
    since: Option<Instant>,
) -> Result<Option<f64>, String> {
    tx.send(frame(Client::Speak(pb::Speak { chunks })))
        .await
        .map_err(|_| "the request stream closed".to_owned())?;
    let mut first = None;
    loop {
        match next(response).await? {
            Some(Server::Chunk(_)) => {
                if first.is_none() {
                    first = since.map(ms_since).or(Some(0.0));
                }
            }
            Some(Server::Done(_)) => return Ok(first.filter(|_| since.is_some())),
            Some(other) => return Err(format!("unexpected frame {other:?}")),
            None => return Err("the call ended OK mid-response".into()),
        }
    }
}

/// The next frame within [`FRAME_TIMEOUT`]; `None` at the call's OK end.
async fn next(response: &mut Streaming<pb::ServerFrame>) -> Result<Option<Server>, String> {
    match timeout(FRAME_TIMEOUT, response.message()).await {
        Err(_) => Err(format!("no frame within {} s", FRAME_TIMEOUT.as_secs())),
        Ok(Ok(f)) => Ok(f.and_then(|f| f.frame)),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
    }
}

/// `bye`, then the call's OK end.
async fn bye(
    tx: &mpsc::Sender<pb::ClientFrame>,
    response: &mut Streaming<pb::ServerFrame>,
) -> Result<(), String> {
    tx.send(frame(Client::Bye(pb::Bye {})))
        .await
        .map_err(|_| "the request stream closed before bye".to_owned())?;
    match next(response).await? {
        None => Ok(()),
        Some(other) => Err(format!("after bye: {other:?}")),
    }
}

/// Waits until `deadline` for the server to end the call (its maximum session length).
async fn server_ends(
    response: &mut Streaming<pb::ServerFrame>,
    deadline: Instant,
) -> Result<(), String> {
    let left = deadline.saturating_duration_since(Instant::now());
    match timeout(left, response.message()).await {
        Err(_) => Err("the server did not end it at its maximum length".into()),
        // Any end from the server (OK or a status naming the limit) is the planned one.
        Ok(Ok(None) | Err(_)) => Ok(()),
        Ok(Ok(Some(f))) => Err(format!("a frame after the last phase: {f:?}")),
    }
}
