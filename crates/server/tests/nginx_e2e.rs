//! End to end on loopback: a real NGINX (open source, Debian's `nginx`) in front of three
//! `livecount-agent` processes, one of them hot, with WebSocket sessions (HTTP/1.1 upgrade)
//! and gRPC `Converse` streams (`grpc_pass` on an h2c listener) through it.
//!
//! NGINX reads none of the agents' load signals (no run-time weights, no agent-check, no
//! ORCA): `least_conn` and `random two least_conn` count only NGINX's own connections, one
//! per session. So the checks are what is true of it, not the hot-backend bound the other
//! balancers meet:
//!
//! - **the hot backend is not avoided**: with no session ending during the ramp,
//!   `least_conn` keeps its counts within one of each other, so every backend, the hot one
//!   too, gets a third of the new sessions ± 1 (`random two least_conn`: ± 4);
//! - killed and closed clients are counted out exactly by their backends, and NGINX's access
//!   log places every session where the backends counted it;
//! - `max_conns` from each agent's `max_sessions` (its `/load`): a session past a backend's
//!   cap goes to another backend, never refused; without `max_conns` NGINX learns the cap
//!   from the 503 and retries (`proxy_next_upstream http_503`);
//! - a SIGTERMed backend drains (its sessions end `shutdown`, it exits 0) and admits no new
//!   session: a new WebSocket session NGINX sends it during the drain is refused 503 and
//!   retried on another backend, while a new gRPC stream is refused `UNAVAILABLE` in a
//!   trailers-only HTTP 200 that no `grpc_next_upstream` condition matches, so that refusal
//!   reaches the client (and, the backend never marked failed, `least_conn` keeps choosing
//!   it); a held gRPC stream the drain cuts ends `UNAVAILABLE` too, in its trailers; after
//!   it exited every new session succeeds on the others; no session is lost anywhere.
//!
//! `#[ignore]`d (it needs the `nginx` binary, ~45 s): `scripts/test.sh` runs it, and
//! `scripts/lb_tools.sh` installs nginx. The config is `deploy/nginx/nginx.conf.in`; what it
//! measured is in `docs/lb/nginx.md`. Writes `target/lb/nginx/REPORT.md`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod common;

use common::envoy::{Ending, Plan, Tally, channel, plans, session, wave};
use common::lb::{
    Fleet, Sample, Timeline, draining_report, ended_by, load_of, new_sessions, settled_at,
    share_table, write_report,
};
use common::nginx::{AccessLog, Entry, Nginx, nginx_binary, nginx_version, placed, start_nginx};
use livecount_report::LoadReport;
use livecount_server::load_driver::{DriveConfig, DriveSummary, drive};

/// The hot backend (b3), burning 90 % of its core.
const HOT: usize = 2;

/// b4's `--max-sessions`: the backend of the `max_conns` demonstration.
const B4_MAX: u64 = 4;

// === sessions ===

/// WebSocket sessions through NGINX's listener `front`, ramped over `ramp`, each held
/// `hold` and closed cleanly, none interrupted.
fn ws(front: u16, n: u32, ramp: Duration, hold: Duration, seed: u64) -> DriveConfig {
    DriveConfig {
        target: format!("127.0.0.1:{front}"),
        sessions: n,
        ramp,
        hold,
        speak_every: Duration::from_millis(700),
        chunks: 5,
        interrupt_share: 0.0,
        kill_share: 0.0,
        observe: Vec::new(),
        seed,
    }
}

/// The balancing waves: 45 WebSocket sessions through `front` over 3 s, each held 4.5 s
/// (every session outlives the ramp: none ends while the others arrive), 10 % of the
/// answers interrupted, 30 % of the clients killed.
fn ws_45(front: u16, seed: u64) -> DriveConfig {
    let hold = Duration::from_millis(4500);
    DriveConfig {
        interrupt_share: 0.1,
        kill_share: 0.3,
        ..ws(front, 45, Duration::from_secs(3), hold, seed)
    }
}

/// The port of `127.0.0.1:<port>`.
fn port_of(addr: &str) -> u16 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

fn grpc_front(nginx: &Nginx) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], nginx.fronts.grpc))
}

/// The shares of `new`, as `15 / 15 / 15 (33.3 / 33.3 / 33.3 %)`.
fn shares(new: &[u64]) -> String {
    let total = new.iter().sum::<u64>().max(1) as f64;
    let counts: Vec<String> = new.iter().map(u64::to_string).collect();
    let pct: Vec<String> = new
        .iter()
        .map(|&n| format!("{:.1}", 100.0 * n as f64 / total))
        .collect();
    format!("{} ({} %)", counts.join(" / "), pct.join(" / "))
}

/// Every backend's new sessions within `slack` of an even split: the expectation of a
/// policy on connection counts alone when no session ends during the ramp.
fn assert_even(what: &str, new: &[u64], slack: f64) {
    let total: u64 = new.iter().sum();
    let even = total as f64 / new.len() as f64;
    for (i, &n) in new.iter().enumerate() {
        assert!(
            (n as f64 - even).abs() <= slack,
            "{what}: b{} got {n} of {total} new sessions, more than {slack} from an even \
             {even:.1}: {new:?}",
            i + 1
        );
    }
}

/// What one wave did.
struct Wave {
    new: Vec<u64>,
    killed: u64,
    closed: u64,
    secs: f64,
}

/// A wave's clients, by what they did.
struct Clients {
    opened: u64,
    killed: u64,
    closed: u64,
}

impl Wave {
    /// The backends' side of a wave through NGINX's listener `front` (to the backends'
    /// `ports`) that began at `start` with the reports `before`: every backend settled at 0
    /// with started = ended, each client reached a backend once, kills counted
    /// `disconnected` and closes `completed` exactly, and NGINX's access log places the
    /// sessions where the backends counted them.
    async fn counted(
        fleet: &Fleet,
        log: &mut AccessLog,
        (front, ports): (u16, &[u16]),
        (start, before): (Instant, &[LoadReport]),
        clients: Clients,
    ) -> Wave {
        let after = fleet.settled(&[0, 1, 2]).await;
        let new = new_sessions(before, &after);
        let reasons: Vec<(&str, u64)> = ["completed", "cancelled", "disconnected", "failed"]
            .iter()
            .map(|&r| (r, ended_by(before, &after, r)))
            .collect();
        let sum = new.iter().sum::<u64>();
        assert_eq!(sum, clients.opened, "every session reached a backend once");
        assert_eq!(
            ended_by(before, &after, "disconnected"),
            clients.killed,
            "killed clients end Disconnected, once: {reasons:?}"
        );
        assert_eq!(
            ended_by(before, &after, "completed"),
            clients.closed,
            "clean closes end Completed, once: {reasons:?}"
        );
        let entries = log.take(&[(front, sum as usize)]).await;
        assert_eq!(
            placed(&entries, front, ports),
            new,
            "NGINX's log = the backends' counts"
        );
        Wave {
            new,
            killed: clients.killed,
            closed: clients.closed,
            secs: start.elapsed().as_secs_f64(),
        }
    }

    /// Prints the wave and checks every backend got within `slack` of an even third.
    fn even(&self, what: &str, slack: f64) {
        eprintln!(
            "{what}: new sessions b1 / b2 / b3 (hot) {}; {} killed, {} closed; {:.1} s",
            shares(&self.new),
            self.killed,
            self.closed,
            self.secs
        );
        assert_even(what, &self.new, slack);
    }
}

/// One WebSocket wave (`cfg`) through NGINX over the three agents: every client opened,
/// and [`Wave::counted`]'s checks.
async fn ws_wave(fleet: &Fleet, log: &mut AccessLog, cfg: DriveConfig) -> Wave {
    let front = port_of(&cfg.target);
    let n = u64::from(cfg.sessions);
    let start = Instant::now();
    let before = fleet.loads().await;
    let summary = drive(cfg).await;
    assert_eq!((summary.opened, summary.refused), (n, 0), "{summary:?}");
    let http: Vec<u16> = fleet.backends.iter().map(|b| b.http).collect();
    let clients = Clients {
        opened: summary.opened,
        killed: summary.killed,
        closed: summary.closed,
    };
    Wave::counted(fleet, log, (front, &http), (start, &before), clients).await
}

/// The gRPC wave: 30 `Converse` streams through NGINX's h2c listener, one every 100 ms on
/// 4 shared connections (killed clients on their own, cut through a relay), held 3.5–5.5 s
/// (longer than the ramp), 30 % killed; [`Wave::counted`]'s checks.
async fn grpc_wave(fleet: &Fleet, nginx: &Nginx, log: &mut AccessLog) -> Wave {
    let start = Instant::now();
    let before = fleet.loads().await;
    let plans = plans(
        30,
        |i| Duration::from_millis(3500 + 500 * (i % 5)),
        |i| matches!(i % 10, 1 | 4 | 7),
    );
    let tally = wave(grpc_front(nginx), plans, Duration::from_millis(100), 4).await;
    assert_eq!(
        (tally.opened, tally.killed, tally.closed),
        (30, 9, 21),
        "{tally:?}"
    );
    let grpc: Vec<u16> = fleet.backends.iter().map(|b| b.grpc).collect();
    let clients = Clients {
        opened: tally.opened,
        killed: tally.killed,
        closed: tally.closed,
    };
    let front = (nginx.fronts.grpc, grpc.as_slice());
    Wave::counted(fleet, log, front, (start, &before), clients).await
}

/// How a gRPC session opened during the drain went.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    Served(Ending),
    /// `UNAVAILABLE` "draining" before it started.
    Refused,
}

/// `n` gRPC sessions through NGINX, one every `gap`, each held `hold` if admitted.
async fn grpc_probes(front: SocketAddr, n: usize, gap: Duration, hold: Duration) -> Vec<Probe> {
    let ch = channel(front).await;
    let plan = Plan {
        hold,
        speak_every: Duration::from_millis(300),
        kill: false,
    };
    let mut calls = Vec::new();
    for _ in 0..n {
        calls.push(tokio::spawn(session(ch.clone(), plan, None)));
        tokio::time::sleep(gap).await;
    }
    let mut out = Vec::new();
    for c in calls {
        out.push(match c.await.unwrap() {
            Ok(ending) => Probe::Served(ending),
            Err(e) if e.starts_with("open refused") && e.contains("draining") => Probe::Refused,
            Err(e) => panic!("a gRPC session during the drain: {e}"),
        });
    }
    out
}

// === the test ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn nginx_balances_on_its_own_connection_counts_and_counts_return_to_zero() {
    let t0 = Instant::now();
    let version = nginx_version(&nginx_binary());
    let mut fleet = Fleet::start("nginx", 3, HOT, &[]);
    // b4, the max_conns demonstration's backend: few sessions, beside the fleet.
    let b4 = fleet
        .start_extra("b4", &["--max-sessions", &B4_MAX.to_string()])
        .await;
    let b4_http = port_of(&b4);
    fleet.ready().await;
    // max_conns from the report: each agent's max_sessions as its /load says it.
    let mut maxes: Vec<u64> = Vec::new();
    for addr in fleet
        .backends
        .iter()
        .map(|b| b.http_addr())
        .chain([b4.clone()])
    {
        let max = load_of(&addr).await.max_sessions;
        maxes.push(max.expect("the agent reports its max_sessions"));
    }
    assert_eq!(maxes[3], B4_MAX);
    let nginx_started = Instant::now();
    let (nginx, config) = start_nginx(&fleet, b4_http, &maxes).await;
    let nginx_up_ms = nginx_started.elapsed().as_millis();
    let mut log = AccessLog {
        path: nginx.prefix.join("logs/access.log"),
        read: 0,
    };
    let before = fleet.loads().await;
    eprintln!(
        "{version} up in {nginx_up_ms} ms; max_conns from /load {maxes:?}; the hot b3 \
         advertises agent-check {} %, headroom {:.2} sessions (NGINX reads neither)",
        before[HOT].weight_percent, before[HOT].headroom
    );
    let timeline = Timeline::record(&fleet);

    // 1. WebSocket, least_conn: 45 sessions over 3 s, each held 4.5 s, 30 % killed.
    let ws_lc = ws_wave(&fleet, &mut log, ws_45(nginx.fronts.ws_least_conn, 11)).await;
    ws_lc.even("WebSocket least_conn", 1.0);

    // 2. gRPC, least_conn: 30 streams.
    let grpc_lc = grpc_wave(&fleet, &nginx, &mut log).await;
    grpc_lc.even("gRPC least_conn", 1.0);

    // 3. WebSocket, random two least_conn: 45 sessions as in 1.
    let ws_r2 = ws_wave(&fleet, &mut log, ws_45(nginx.fronts.ws_random_two, 12)).await;
    // Two servers at random, the one with fewer connections: for 45 sessions none ending,
    // a simulation of the pick puts every count within 15 ± 4 in all but about 1 in 10^5.
    ws_r2.even("WebSocket random two least_conn", 4.0);

    // 4. max_conns from max_sessions: 10 sessions over b4 (max_sessions 4) and b2.
    let (capped, capped_b4) = capped_wave(&fleet, &b4, &mut log, nginx.fronts.ws_capped, 21).await;
    eprintln!("max_conns: b4 (max_sessions {B4_MAX}) / b2 took {capped:?}, b4 refused {capped_b4}");
    assert_eq!(
        capped,
        [B4_MAX, 10 - B4_MAX],
        "b4 filled to its cap, the rest on b2"
    );
    assert_eq!(capped_b4, 0, "NGINX never sent b4 more than it admits");
    let (uncapped, uncapped_b4) =
        capped_wave(&fleet, &b4, &mut log, nginx.fronts.ws_uncapped, 22).await;
    eprintln!(
        "without max_conns: b4 / b2 took {uncapped:?}, b4 refused {uncapped_b4} (503, retried \
         on b2)"
    );
    assert!(
        uncapped_b4 >= 1,
        "least_conn alone sent b4 a session past its cap"
    );
    assert_eq!(uncapped[0], B4_MAX, "{uncapped:?}");

    // 5. Drain: sessions held through NGINX, SIGTERM b1, new sessions during its drain
    // and after it exited.
    let drain = drain_phase(&mut fleet, &nginx, &mut log).await;

    // No session lost: every agent still running at active 0, started = ended.
    let end = fleet.settled(&[1, 2]).await;
    let b4_end = settled_at(&b4).await;
    let samples = timeline.stop();
    let secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "end: b2 started {} ended {}, b3 started {} ended {}, b4 started {} ended {}; test \
         took {secs:.1} s",
        end[0].started, end[0].ended, end[1].started, end[1].ended, b4_end.started, b4_end.ended
    );
    let errors = nginx.log("error.log");
    let report = Report {
        version,
        nginx_up_ms,
        ws_lc,
        grpc_lc,
        ws_r2,
        capped,
        uncapped,
        uncapped_b4,
        drain,
        secs,
        config,
        upstream_errors: errors.lines().filter(|l| l.contains("upstream")).count(),
    };
    let dir = write_report(
        "nginx",
        "NGINX least_conn on its own connection counts",
        &report.body(&fleet, &samples),
        &fleet,
        &samples,
    );
    eprintln!("report: {}", dir.display());
}

/// 10 WebSocket sessions through the listener `front` (its upstream: b4, then b2), over
/// 1 s, each held 2.5 s: b4 and b2's new sessions, and b4's new refusals. Both settle after.
async fn capped_wave(
    fleet: &Fleet,
    b4: &str,
    log: &mut AccessLog,
    front: u16,
    seed: u64,
) -> ([u64; 2], u64) {
    let b2 = fleet.backends[1].http_addr();
    let (b4_before, b2_before) = (settled_at(b4).await, settled_at(&b2).await);
    let cfg = ws(
        front,
        10,
        Duration::from_secs(1),
        Duration::from_millis(2500),
        seed,
    );
    let summary: DriveSummary = drive(cfg).await;
    assert_eq!(
        (summary.opened, summary.refused, summary.closed),
        (10, 0, 10),
        "{summary:?}"
    );
    let (b4_after, b2_after) = (settled_at(b4).await, settled_at(&b2).await);
    let took = [
        b4_after.started - b4_before.started,
        b2_after.started - b2_before.started,
    ];
    let entries = log.take(&[(front, 10)]).await;
    assert_eq!(
        placed(&entries, front, &[port_of(b4), fleet.backends[1].http]),
        took,
        "NGINX's log = the backends' counts"
    );
    let retried = entries
        .iter()
        .filter(|e| e.port == front && e.statuses.first().is_some_and(|s| s == "503"))
        .count() as u64;
    let refused = b4_after.refused - b4_before.refused;
    assert_eq!(
        refused, retried,
        "each of b4's 503s was retried by NGINX: {entries:?}"
    );
    (took, refused)
}

/// What the drain phase saw.
struct Drain {
    on_b1: u64,
    term_to_exit: f64,
    last: String,
    ws_retried: usize,
    grpc_refused: usize,
    grpc_probes: usize,
    held_ws: DriveSummary,
    held_grpc: Tally,
    moved: Vec<u64>,
}

/// Holds 9 WebSocket and 6 gRPC sessions through NGINX, SIGTERMs b1 2 s in, opens 6 of
/// each during its 2 s drain, checks b1 drained (its sessions ended `shutdown`, exit 0),
/// then opens 10 WebSocket and 6 gRPC sessions after it exited: all served by b2 / b3.
async fn drain_phase(fleet: &mut Fleet, nginx: &Nginx, log: &mut AccessLog) -> Drain {
    let ws_front = nginx.fronts.ws_least_conn;
    let held = ws(
        ws_front,
        9,
        Duration::from_millis(500),
        Duration::from_secs(6),
        31,
    );
    let held_ws = tokio::spawn(drive(held));
    let held_plans = plans(6, |_| Duration::from_secs(6), |_| false);
    let held_grpc = tokio::spawn(wave(
        grpc_front(nginx),
        held_plans,
        Duration::from_millis(80),
        2,
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The new sessions start once b1 says draining: sent at once, the first of them could
    // reach b1 before its signal handler ran, be admitted, and then be cut with the held
    // ones. The draining report counts exactly the sessions the drain will cut.
    let term = Instant::now();
    fleet.send_sigterm(0);
    let on_b1 = draining_report(&fleet.backends[0].http_addr()).await.active;
    assert!(on_b1 > 0, "b1 holds some of the 15 sessions");
    let fresh = ws(
        ws_front,
        6,
        Duration::from_millis(900),
        Duration::from_secs(2),
        32,
    );
    let fresh_ws = tokio::spawn(drive(fresh));
    let probes = grpc_probes(
        grpc_front(nginx),
        6,
        Duration::from_millis(150),
        Duration::from_secs(2),
    )
    .await;
    let (status, last) = fleet.wait_exit(0).await;
    let term_to_exit = term.elapsed().as_secs_f64();
    eprintln!(
        "b1 after SIGTERM with {on_b1} sessions open: {status} in {term_to_exit:.2} s; {last}"
    );
    assert!(status.success(), "b1 exits 0: {status}");
    assert!(last.contains("active 0"), "b1's last log line: {last}");
    assert!(
        last.contains(&format!("\"shutdown\": {on_b1}")),
        "b1's open sessions end Shutdown: {last}"
    );
    let started_ended: Vec<u64> = ["started ", "ended "]
        .iter()
        .map(|k| {
            let at = last.find(k).expect("the last line counts") + k.len();
            let n = last[at..].split_whitespace().next().unwrap();
            n.parse().unwrap()
        })
        .collect();
    assert_eq!(
        started_ended[0], started_ended[1],
        "b1: started = ended: {last}"
    );

    let fresh_ws = fresh_ws.await.unwrap();
    assert_eq!((fresh_ws.opened, fresh_ws.refused), (6, 0), "{fresh_ws:?}");
    let grpc_refused = probes.iter().filter(|p| **p == Probe::Refused).count();
    let served = probes.len() - grpc_refused;
    assert!(
        probes
            .iter()
            .all(|p| matches!(p, Probe::Refused | Probe::Served(Ending::Closed))),
        "{probes:?}"
    );
    let held_ws = held_ws.await.unwrap();
    let held_grpc = tokio::time::timeout(Duration::from_secs(20), held_grpc)
        .await
        .expect("the held gRPC sessions end")
        .unwrap();

    // Where NGINX put them: the held sessions, the new ones and the refusals.
    let (b1_http, b1_grpc) = (fleet.backends[0].http, fleet.backends[0].grpc);
    let entries = log.take(&[(nginx.fronts.grpc, 12), (ws_front, 15)]).await;
    let on = |port: u16, server: u16| {
        entries
            .iter()
            .filter(|e| e.port == port && e.served_by() == Some(server))
            .count() as u64
    };
    let (ws_on_b1, grpc_on_b1) = (on(ws_front, b1_http), on(nginx.fronts.grpc, b1_grpc));
    // UNAVAILABLE twice over: a trailers-only refusal of a new stream, and the trailers of a
    // held stream the drain cut.
    let grpc_refusals: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.port == nginx.fronts.grpc && e.grpc_in_headers == "14")
        .collect();
    let grpc_cut: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.port == nginx.fronts.grpc && e.grpc_in_trailers == "14")
        .collect();
    let ws_retried = entries
        .iter()
        .filter(|e| e.port == ws_front && e.statuses.first().is_some_and(|s| s == "503"))
        .filter(|e| e.tried.first() == Some(&b1_http) && e.served_by() != Some(b1_http))
        .count();
    eprintln!(
        "drain: b1 held {ws_on_b1} WebSocket + {} gRPC sessions; during its drain NGINX sent \
         it {ws_retried} new WebSocket session(s), refused 503 and retried elsewhere, and \
         {grpc_refused} of {} new gRPC streams, refused UNAVAILABLE to the client ({served} \
         served by b2 / b3)",
        grpc_on_b1 - grpc_refused as u64,
        probes.len()
    );
    assert!(
        ws_retried >= 1,
        "NGINX tried b1 during its drain: {entries:?}"
    );
    assert!(
        grpc_refused >= 1,
        "NGINX sent b1 a gRPC stream during its drain: {entries:?}"
    );
    assert_eq!(
        grpc_refusals.len(),
        grpc_refused,
        "every refusal the clients saw is in NGINX's log: {entries:?}"
    );
    assert!(
        grpc_refusals.iter().all(|e| e.served_by() == Some(b1_grpc)),
        "only the draining b1 refused: {grpc_refusals:?}"
    );
    let grpc_held_on_b1 = grpc_on_b1 - grpc_refused as u64;
    assert!(
        grpc_cut.iter().all(|e| e.served_by() == Some(b1_grpc)),
        "only the draining b1 cut streams: {grpc_cut:?}"
    );
    assert_eq!(
        grpc_cut.len() as u64,
        grpc_held_on_b1,
        "every gRPC stream b1 held ended UNAVAILABLE in its trailers: {entries:?}"
    );
    assert_eq!(
        ws_on_b1 + grpc_held_on_b1,
        on_b1,
        "b1's sessions, by NGINX's log"
    );
    // gRPC clients read the drain's end (UNAVAILABLE) at once; a WebSocket client sees the
    // close when it next speaks, or answers it with its bye.
    assert_eq!(held_grpc.opened, 6, "{held_grpc:?}");
    assert_eq!(held_grpc.ended_by_server, grpc_held_on_b1, "{held_grpc:?}");
    assert_eq!(
        held_grpc.closed + held_grpc.ended_by_server,
        6,
        "{held_grpc:?}"
    );
    assert_eq!(held_ws.opened, 9, "{held_ws:?}");
    assert!(held_ws.ended_by_server <= ws_on_b1, "{held_ws:?}");
    assert_eq!(held_ws.closed + held_ws.ended_by_server, 9, "{held_ws:?}");

    // After b1 exited: every new session succeeds, on b2 / b3.
    let before = fleet.settled(&[1, 2]).await;
    let moved = ws(
        ws_front,
        10,
        Duration::from_secs(1),
        Duration::from_secs(2),
        33,
    );
    let moved_ws = tokio::spawn(drive(moved));
    let moved_grpc = wave(
        grpc_front(nginx),
        plans(6, |_| Duration::from_millis(1500), |_| false),
        Duration::from_millis(150),
        2,
    )
    .await;
    let moved_ws = moved_ws.await.unwrap();
    assert_eq!(
        (moved_ws.opened, moved_ws.refused, moved_ws.closed),
        (10, 0, 10),
        "{moved_ws:?}"
    );
    assert_eq!(
        (moved_grpc.opened, moved_grpc.closed),
        (6, 6),
        "{moved_grpc:?}"
    );
    let after = fleet.settled(&[1, 2]).await;
    let moved = new_sessions(&before, &after);
    assert_eq!(
        moved.iter().sum::<u64>(),
        16,
        "all 16 on b2 / b3: {moved:?}"
    );
    eprintln!(
        "after b1 exited: 10 WebSocket + 6 gRPC sessions went b2 {} / b3 {}",
        moved[0], moved[1]
    );
    Drain {
        on_b1,
        term_to_exit,
        last,
        ws_retried,
        grpc_refused,
        grpc_probes: probes.len(),
        held_ws,
        held_grpc,
        moved,
    }
}

/// What the report says.
struct Report {
    version: String,
    nginx_up_ms: u128,
    ws_lc: Wave,
    grpc_lc: Wave,
    ws_r2: Wave,
    capped: [u64; 2],
    uncapped: [u64; 2],
    uncapped_b4: u64,
    drain: Drain,
    secs: f64,
    config: String,
    upstream_errors: usize,
}

impl Report {
    fn body(&self, fleet: &Fleet, samples: &[Sample]) -> String {
        let d = &self.drain;
        format!(
            "{version} (Debian), `worker_processes 2`, every upstream in a shared `zone`, in \
             front of three agents (`--cores 1 --work-ms 1 --report-secs 0.5`; b3 burns 90 % \
             of its core) and b4 (`--max-sessions {B4_MAX}`). NGINX was up {up} ms after its \
             start. NGINX reads no load signal: the shares below are its own connection \
             counts at work, and the hot b3 takes its third.\n\n\
             ## WebSocket, `least_conn`\n\n45 sessions over 3 s, held 4.5 s, {k1} killed, \
             {c1} closed ({s1:.1} s).\n\n{t1}\n\
             ## gRPC `Converse`, `least_conn` (`grpc_pass`, h2c)\n\n30 streams over 3 s, \
             held 3.5–5.5 s, {k2} killed (connection cut), {c2} closed ({s2:.1} s).\n\n{t2}\n\
             ## WebSocket, `random two least_conn`\n\n45 sessions as above, {k3} killed, \
             {c3} closed ({s3:.1} s).\n\n{t3}\n\
             Every wave: each backend settled at active 0 with started = ended, killed \
             clients counted `disconnected` and closes `completed` exactly, and NGINX's access \
             log placed every session where the backends counted it.\n\n\
             ## `max_conns` from `max_sessions`\n\n10 sessions over b4 (max_conns {B4_MAX} \
             from its `/load`) and b2: b4 {a0}, b2 {a1}, none refused. The same without \
             `max_conns`: b4 {u0}, b2 {u1}, b4 refused {ub4} with 503, which NGINX retried on \
             b2 (`proxy_next_upstream http_503`), so no client saw it.\n\n\
             ## SIGTERM\n\nb1 held {on_b1} sessions; it exited 0 {exit:.2} s after SIGTERM, \
             last line `{last}`. During its 2 s drain NGINX sent it {ws_retried} new \
             WebSocket session(s), refused 503 and retried on b2 / b3, and {grpc_refused} of \
             {probes} new gRPC streams, refused `UNAVAILABLE` straight to the client (a \
             trailers-only HTTP 200: no `grpc_next_upstream` condition). Held through it: \
             WebSocket {hws:?}; gRPC {hgrpc:?}. After b1 exited, 10 WebSocket and 6 gRPC \
             sessions all succeeded: b2 {m0}, b3 {m1}.\n\n\
             NGINX's error log: {errors} lines about upstreams. Test duration {secs:.1} s.\n\n\
             ## Config (`deploy/nginx/nginx.conf.in`, as rendered)\n\n```nginx\n{config}```\n",
            version = self.version,
            up = self.nginx_up_ms,
            k1 = self.ws_lc.killed,
            c1 = self.ws_lc.closed,
            s1 = self.ws_lc.secs,
            t1 = share_table(fleet, &self.ws_lc.new, samples),
            k2 = self.grpc_lc.killed,
            c2 = self.grpc_lc.closed,
            s2 = self.grpc_lc.secs,
            t2 = share_table(fleet, &self.grpc_lc.new, samples),
            k3 = self.ws_r2.killed,
            c3 = self.ws_r2.closed,
            s3 = self.ws_r2.secs,
            t3 = share_table(fleet, &self.ws_r2.new, samples),
            a0 = self.capped[0],
            a1 = self.capped[1],
            u0 = self.uncapped[0],
            u1 = self.uncapped[1],
            ub4 = self.uncapped_b4,
            on_b1 = d.on_b1,
            exit = d.term_to_exit,
            last = d.last,
            ws_retried = d.ws_retried,
            grpc_refused = d.grpc_refused,
            probes = d.grpc_probes,
            hws = d.held_ws,
            hgrpc = d.held_grpc,
            m0 = d.moved[0],
            m1 = d.moved[1],
            errors = self.upstream_errors,
            secs = self.secs,
            config = self.config,
        )
    }
}
