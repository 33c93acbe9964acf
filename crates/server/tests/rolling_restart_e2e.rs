//! End to end on loopback: a rolling restart of three `livecount-agent` processes behind a
//! real Envoy (gRPC sessions; CSWRR with ORCA, a gRPC health check, retries of a refused
//! call) and behind a real HAProxy (WebSocket sessions; agent-check, `retry-on 503`), each
//! run twice on the same seeded workload: "cut" (`--drain-secs 0`: every open session ends at
//! the signal, as on a server that stops without draining) and "drain" (`--drain-secs 4`).
//!
//! The workload: one new session every 150 ms for the whole restart, each planned to last
//! 1–8 s (seeded), so some end before the drain's deadline and some after. Every backend
//! in turn gets SIGTERM; when it has exited, a new agent starts on the same ports; once the
//! balancer sees it healthy, the next one. Each client knows its backend (a response
//! header the balancer adds), when it opened and when it meant to end; the test knows when
//! each backend got its SIGTERM. Checked in drain mode: no session is cut whose planned
//! end came before its backend's deadline; those open at SIGTERM and planned past it end
//! `Shutdown` (close 1012 / `UNAVAILABLE`); no backend starts a session after its first
//! draining report; every refusal a client sees carries its retry hint; every backend
//! exits 0 with `active 0`, `started = ended`. Cut mode is measured, not judged.
//!
//! `#[ignore]`d (Envoy from `scripts/lb_tools.sh`, HAProxy from apt; ~2.5 min):
//! `scripts/test.sh` runs it alone. Writes `target/lb/rolling-restart/REPORT.md` (and
//! `results/lb/rolling-restart/` with `LIVECOUNT_UPDATE_RESULTS=1`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "rolling_restart/clients.rs"]
mod clients;
mod common;
#[path = "rolling_restart/outcome.rs"]
mod outcome;

use clients::{Record, Transport, load};
use common::lb::{Fleet, Sample, Timeline, free_port, load_of, report_dirs, report_text, tool};
use livecount_server::load_driver::fetch_load;
use outcome::{Outcome, Restart, plot, table};

/// The drain's deadline in drain mode (`--drain-secs`); a cut run's sessions are judged
/// against it too (the ones it cut that a drain would have let finish).
const DEADLINE: Duration = Duration::from_secs(4);

/// Sessions run before the first SIGTERM, so that long ones are open at it.
const WARM: Duration = Duration::from_secs(5);

/// The seed of the workload (each session's planned duration), the same in every run.
const SEED: u64 = 24;

/// Every wait on a process or the network is bounded by this.
const STEP: Duration = Duration::from_secs(10);

/// Envoy: gRPC sessions through CSWRR with ORCA, a gRPC health check (NOT_SERVING takes a
/// host out), a refused call retried on another host; the upstream's address in a header.
const ENVOY: &str = r#"admin:
  address: { socket_address: { address: 127.0.0.1, port_value: @ADMIN@ } }
static_resources:
  listeners:
  - name: sessions
    address: { socket_address: { address: 127.0.0.1, port_value: @LISTEN@ } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: sessions
          codec_type: AUTO
          stream_idle_timeout: 0s
          route_config:
            name: agents
            virtual_hosts:
            - name: agents
              domains: ["*"]
              routes:
              - match: { prefix: "/livecount.agent.v1.Agent/" }
                route:
                  cluster: agents
                  timeout: 0s
                  # A call refused before it started (a draining agent's trailers-only
                  # UNAVAILABLE, a refused connection) goes to another host; never a call
                  # that got its response headers.
                  retry_policy:
                    retry_on: connect-failure,refused-stream,unavailable
                    num_retries: 2
                    retry_host_predicate:
                    - name: envoy.retry_host_predicates.previous_hosts
                      typed_config:
                        "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate
                    host_selection_retry_max_attempts: 3
                # Which backend took the call, for the test's accounting.
                response_headers_to_add:
                - header: { key: x-livecount-upstream, value: "%UPSTREAM_REMOTE_ADDRESS%" }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: agents
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
    load_balancing_policy:
      policies:
      - typed_extension_config:
          name: envoy.load_balancing_policies.client_side_weighted_round_robin
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3.ClientSideWeightedRoundRobin
            enable_oob_load_report: true
            oob_reporting_period: 0.5s
            blackout_period: 1s
            weight_update_period: 1s
    # grpc.health.v1.Health/Check, service "": the agent answers NOT_SERVING from the
    # first moment of its drain, and one failed check takes the host out.
    health_checks:
    - timeout: 0.5s
      interval: 0.5s
      no_traffic_interval: 0.5s
      unhealthy_threshold: 1
      healthy_threshold: 1
      grpc_health_check: {}
    load_assignment:
      cluster_name: agents
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: @GRPC1@ } } }
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: @GRPC2@ } } }
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: @GRPC3@ } } }
"#;

/// HAProxy: WebSocket sessions, `leastconn` weighted by agent-check (`drain` takes a
/// server out), a 503 retried on another server; the server's name in a header.
const HAPROXY: &str = "global
    maxconn 4096
    stats socket @SOCK@ level user

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout tunnel 120s

frontend sessions
    bind 127.0.0.1:@FRONT@
    default_backend agents

backend agents
    balance leastconn
    # An upgrade refused by a backend that began draining before HAProxy's next
    # agent-check (503 with Retry-After, before any upgrade) is retried on another
    # server, as is a refused connection.
    retry-on 503 conn-failure empty-response
    option redispatch 1
    retries 2
    # Which server took the session, for the test's accounting.
    http-response set-header x-livecount-backend %s
    server b1 127.0.0.1:@HTTP1@ weight 100 agent-check agent-addr 127.0.0.1 agent-port @AGENT1@ agent-inter 500ms check inter 500ms fall 2 rise 2
    server b2 127.0.0.1:@HTTP2@ weight 100 agent-check agent-addr 127.0.0.1 agent-port @AGENT2@ agent-inter 500ms check inter 500ms fall 2 rise 2
    server b3 127.0.0.1:@HTTP3@ weight 100 agent-check agent-addr 127.0.0.1 agent-port @AGENT3@ agent-inter 500ms check inter 500ms fall 2 rise 2
";

/// Which balancer, and where to ask it what it sees.
#[derive(Debug, Clone)]
enum Balancer {
    /// Envoy's admin port.
    Envoy { admin: u16 },
    /// HAProxy's stats socket.
    Haproxy { socket: std::path::PathBuf },
}

/// One backend as the balancer sees it.
#[derive(Debug, Clone, Default)]
struct HostView {
    /// Taken out: Envoy `failed_active_hc`, HAProxy anything but `UP…`.
    out: bool,
    /// Envoy's `health_flags`, HAProxy's `status`.
    state: String,
    /// Requests (Envoy `rq_total`) or connections (HAProxy `stot`) it sent there.
    sent: u64,
}

impl Balancer {
    /// Every backend's view, in fleet order; `None` if the balancer did not answer.
    async fn view(&self, fleet: &Fleet) -> Option<Vec<HostView>> {
        match self {
            Balancer::Envoy { admin } => {
                Some(envoy_view(&admin_get(*admin, "/clusters").await?, fleet))
            }
            Balancer::Haproxy { socket } => haproxy_view(socket, fleet).await,
        }
    }

    /// The balancer's own counters worth reading when a run goes wrong: Envoy's panics,
    /// retries and health checks for the cluster; nothing for HAProxy (its view says it).
    async fn counters(&self) -> String {
        match self {
            Balancer::Envoy { admin } => {
                let filter = r"^cluster\.agents\.(lb_healthy_panic|upstream_rq_retry.*|health_check\..*|upstream_rq_503|upstream_cx_connect_fail)$";
                let encoded: String = filter
                    .bytes()
                    .map(|b| match b.is_ascii_alphanumeric() || b == b'_' {
                        true => char::from(b).to_string(),
                        false => format!("%{b:02X}"),
                    })
                    .collect();
                let path = format!("/stats?filter={encoded}");
                admin_get(*admin, &path).await.unwrap_or_default()
            }
            Balancer::Haproxy { .. } => String::new(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Balancer::Envoy { .. } => "Envoy",
            Balancer::Haproxy { .. } => "HAProxy",
        }
    }
}

/// `GET path` on Envoy's admin (HTTP/1.1: it refuses 1.0), the body of a 200 within 2 s.
async fn admin_get(admin: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", admin))
            .await
            .ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        conn.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, mut rest) = text.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        if !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            return Some(rest.to_owned());
        }
        let mut body = String::new();
        loop {
            let (size, after) = rest.split_once("\r\n")?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                return Some(body);
            }
            body.push_str(after.get(..size)?);
            rest = after.get(size + 2..)?;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), fetch)
        .await
        .ok()
        .flatten()
}

fn envoy_view(body: &str, fleet: &Fleet) -> Vec<HostView> {
    let stat = |port: u16, name: &str| {
        let key = format!("agents::127.0.0.1:{port}::{name}::");
        body.lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let view = |port| {
        let state = stat(port, "health_flags");
        HostView {
            out: state.contains("failed_active_hc"),
            sent: stat(port, "rq_total").parse().unwrap_or(0),
            state,
        }
    };
    fleet.backends.iter().map(|b| view(b.grpc)).collect()
}

async fn haproxy_view(socket: &std::path::Path, fleet: &Fleet) -> Option<Vec<HostView>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut conn = tokio::net::UnixStream::connect(socket).await.ok()?;
        conn.write_all(b"show stat\n").await.ok()?;
        let mut csv = String::new();
        conn.read_to_string(&mut csv).await.ok()?;
        Some(csv)
    };
    let csv = tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()??;
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (sv, status, stot) = (col("svname")?, col("status")?, col("stot")?);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let view = |name: &str| {
        let row = rows
            .iter()
            .find(|r| r.first() == Some(&"agents") && r[sv] == name)?;
        Some(HostView {
            // DRAIN (agent-check `drain`), DOWN, MAINT; not `UP 1/2` (a check failing).
            out: !row[status].starts_with("UP"),
            state: row[status].to_owned(),
            sent: row[stot].parse().ok()?,
        })
    };
    fleet.backends.iter().map(|b| view(&b.name)).collect()
}

/// Starts the balancer for `fleet` (its PID joins the fleet's) and waits until it sees
/// every backend in; returns it and its rendered config.
async fn start_balancer(kind: &str, fleet: &mut Fleet) -> (Balancer, u16, String) {
    let front = free_port();
    let (balancer, config, child) = if kind == "envoy" {
        let admin = free_port();
        let mut config = ENVOY
            .replace("@LISTEN@", &front.to_string())
            .replace("@ADMIN@", &admin.to_string());
        for (i, b) in fleet.backends.iter().enumerate() {
            config = config.replace(&format!("@GRPC{}@", i + 1), &b.grpc.to_string());
        }
        let path = fleet.dir.join("envoy.yaml");
        std::fs::write(&path, &config).unwrap();
        let envoy = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../.tools/venv/bin/envoy");
        assert!(
            envoy.exists(),
            "Envoy not found at {}: run scripts/lb_tools.sh",
            envoy.display()
        );
        let child = Command::new(envoy)
            .arg("-c")
            .arg(&path)
            // No hot restart: no shared memory, so one run's Envoy (killed) never stands
            // in the next one's way.
            .args(["--concurrency", "1", "--disable-hot-restart"])
            .args(["-l", "warning", "--log-path"])
            .arg(fleet.dir.join("envoy.log"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(fleet.dir.join("envoy.stderr")).unwrap())
            .spawn()
            .expect("envoy starts");
        (Balancer::Envoy { admin }, config, child)
    } else {
        let haproxy = tool(&["haproxy", "/usr/sbin/haproxy"], "-v");
        let socket = fleet.dir.join("haproxy.sock");
        let mut config = HAPROXY
            .replace("@FRONT@", &front.to_string())
            .replace("@SOCK@", socket.to_str().unwrap());
        for (i, b) in fleet.backends.iter().enumerate() {
            config = config
                .replace(&format!("@HTTP{}@", i + 1), &b.http.to_string())
                .replace(&format!("@AGENT{}@", i + 1), &b.agent_check.to_string());
        }
        let path = fleet.dir.join("haproxy.cfg");
        std::fs::write(&path, &config).unwrap();
        let child = Command::new(haproxy)
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(fleet.dir.join("haproxy.stderr")).unwrap())
            .spawn()
            .expect("haproxy starts");
        (Balancer::Haproxy { socket }, config, child)
    };
    fleet.procs.0.push(child);
    let placeholder = |s: &&str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    };
    assert!(
        !config.split('@').any(|s| placeholder(&s)),
        "a placeholder left in {config}"
    );
    for i in 0..fleet.backends.len() {
        load_of(&fleet.backends[i].http_addr()).await;
        wait_in(&balancer, fleet, i).await;
    }
    (balancer, front, config)
}

/// Waits (up to 10 s) until the balancer sees backend `i` healthy.
async fn wait_in(balancer: &Balancer, fleet: &Fleet, i: usize) {
    let start = Instant::now();
    loop {
        let view = balancer.view(fleet).await;
        if let Some(v) = &view {
            let state = &v[i].state;
            if state == "healthy" || state == "UP" {
                return;
            }
        }
        if start.elapsed() > STEP {
            let log = |f: &str| std::fs::read_to_string(fleet.dir.join(f)).unwrap_or_default();
            let logs = ["envoy.stderr", "envoy.log", "haproxy.stderr"]
                .map(log)
                .join("\n");
            panic!(
                "{} never saw {} healthy: {view:?}\n{logs}",
                balancer.name(),
                fleet.backends[i].name
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM to backend `i`, its drain watched every 50 ms on its `/load` and on the
/// balancer until it exits (bounded), then a new agent on its ports, until the balancer
/// sees it healthy.
async fn restart(fleet: &mut Fleet, balancer: &Balancer, i: usize, t0: Instant) -> Restart {
    let addr = fleet.backends[i].http_addr();
    let before = load_of(&addr).await;
    let mut r = Restart::new(i, before.refused);
    fleet.send_sigterm(i);
    r.term_at = t0.elapsed().as_secs_f64();
    let status = loop {
        if let Some(status) = fleet.procs.0[i].try_wait().unwrap() {
            break status;
        }
        let report = tokio::time::timeout(Duration::from_millis(200), fetch_load(&addr));
        if let Some(report) = report.await.ok().flatten() {
            r.saw_report(serde_json::from_value(report).unwrap(), t0);
        }
        if let Some(view) = balancer.view(fleet).await {
            r.saw_balancer(&view[i].state, view[i].out, view[i].sent, t0);
            let states = view
                .iter()
                .enumerate()
                .map(|(j, v)| format!("b{} {} (sent {})", j + 1, v.state, v.sent));
            r.saw_fleet(states.collect::<Vec<_>>().join(", "), t0);
        }
        assert!(
            t0.elapsed().as_secs_f64() - r.term_at < DEADLINE.as_secs_f64() + STEP.as_secs_f64(),
            "{} still runs {STEP:?} after its drain's deadline",
            fleet.backends[i].name
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    r.exited_at = t0.elapsed().as_secs_f64();
    r.exited(
        status,
        &std::fs::read_to_string(&fleet.backends[i].log).unwrap(),
    );
    fleet.restart(i).await;
    wait_in(balancer, fleet, i).await;
    r.back_at = t0.elapsed().as_secs_f64();
    eprintln!("{r:?}");
    r
}

/// One run: a fresh fleet (`--drain-secs` from `drain`) behind `kind`, the workload, the
/// rolling restart, every client's end, every backend's last words.
async fn run(kind: &str, drain: Duration) -> Outcome {
    let mode = if drain.is_zero() { "cut" } else { "drain" };
    let secs = format!("{}", drain.as_secs_f64());
    let mut fleet = Fleet::start(
        &format!("rolling-{kind}-{mode}"),
        3,
        usize::MAX,
        &["--drain-secs", &secs],
    );
    let (balancer, front, config) = start_balancer(kind, &mut fleet).await;
    let transport = match kind {
        "envoy" => Transport::grpc(front, &fleet).await,
        _ => Transport::websocket(front, &fleet),
    };
    let t0 = Instant::now();
    let timeline = Timeline::record(&fleet);
    let (stop, clients) = load(transport, SEED, t0);
    tokio::time::sleep(WARM).await;
    let mut restarts = Vec::new();
    for i in 0..fleet.backends.len() {
        restarts.push(restart(&mut fleet, &balancer, i, t0).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = stop.send(true);
    let records: Vec<Record> = tokio::time::timeout(Duration::from_secs(30), clients)
        .await
        .expect("every client ends within 30 s of the last arrival")
        .unwrap();
    let samples: Vec<Sample> = timeline.stop();
    let counters = balancer.counters().await;
    fleet.settled(&[0, 1, 2]).await;
    // The new agents, empty now: their own SIGTERM must find nothing to drain.
    let mut last_words = Vec::new();
    for i in 0..fleet.backends.len() {
        let (status, line) = fleet.sigterm(i).await;
        last_words.push((status, line));
    }
    let mut outcome = Outcome::new(
        kind, mode, drain, config, restarts, records, samples, last_words,
    );
    outcome.counters = counters;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy and haproxy (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn a_rolling_restart_behind_envoy_and_haproxy_cuts_no_session_that_ends_in_time() {
    let t0 = Instant::now();
    let mut outcomes = Vec::new();
    for kind in ["envoy", "haproxy"] {
        for drain in [Duration::ZERO, DEADLINE] {
            let outcome = run(kind, drain).await;
            eprintln!("{}", outcome.summary());
            outcomes.push(outcome);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let table = table(&outcomes);
    eprintln!("{table}\ntest took {secs:.1} s");
    write(&outcomes, &table, secs);
    // Judged after the report is written, so a failure leaves its numbers behind.
    for outcome in &outcomes {
        outcome.check(DEADLINE);
    }
}

/// `REPORT.md` and `sessions.svg` under `target/lb/rolling-restart` (and `results/`).
fn write(outcomes: &[Outcome], table: &str, secs: f64) {
    let body = outcome::body(outcomes, table, DEADLINE, WARM, SEED, secs);
    let caption = "active sessions per backend over each run; dashed: SIGTERM";
    let report = report_text("Rolling restart behind Envoy and HAProxy", &body, caption);
    for dir in report_dirs("rolling-restart") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("REPORT.md"), &report).unwrap();
        plot(&dir.join("sessions.svg"), outcomes);
        eprintln!("report: {}", dir.display());
    }
}
