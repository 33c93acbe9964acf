//! End to end on loopback: livecount's endpoint picker (`livecount-epp`, the Endpoint
//! Picker Protocol over `ext_proc`) inside a real Envoy 1.40, in front of three
//! `livecount-agent` processes, one of them hot. Envoy asks the picker for each new
//! session (request headers only) and sends it where the picker's `envoy.lb` metadata
//! says (`override_host`); the picker chooses by power of two choices on the hybrid
//! model's capacity, from the agents' ORCA streams (gRPC pool) and `/load` (WebSocket pool).
//!
//! Checked, in order:
//! - **gRPC**: 60 `Converse` sessions (30 % of the clients killed): the hot backend takes at
//!   most 10 %, every session reached a backend once and every ending was counted once;
//!   no stream failed open (`failure_mode_allowed` 0).
//! - **WebSocket**: 45 sessions through the WebSocket pool's picker: the hot backend at
//!   most 10 %, none refused.
//! - **Two replicas, two Envoys**: a second Envoy asks two picker replicas (the first
//!   picker and another), the first Envoy the first picker alone; 30 sessions through each
//!   at once: the hot backend at most 10 %, and each replica placed some. Each replica
//!   counts only its own placements; the reports are the truth they share.
//! - **A killed picker**: `kill -9` of the picker 1 s into a wave of 30: every session
//!   still opens and ends (Envoy's `failure_mode_allow` and `override_host`'s fallback to
//!   `LEAST_REQUEST`), and Envoy counted the fail-open (`failure_mode_allowed` > 0).
//! - **A draining backend**: b1 SIGTERMed under held sessions; 12 new sessions during its
//!   drain all open elsewhere, and b1 refused none (the picker never sent it one).
//! - Every backend settles at active 0 with started = ended.
//!
//! `#[ignore]`d (Envoy from `scripts/lb_tools.sh`, the `livecount-epp` binary from
//! `cargo build --release -p livecount-epp`; ~70 s): `scripts/test.sh` runs it. The config
//! is `deploy/envoy/envoy-picker.yaml.in`; `docs/lb/endpoint-picker.md` explains it.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod common;

use common::envoy::*;
use common::lb::*;
use livecount_server::load_driver::{DriveConfig, drive};

/// The config the test runs (and the one `docs/lb/endpoint-picker.md` shows).
const TEMPLATE: &str = include_str!("../../../deploy/envoy/envoy-picker.yaml.in");

/// The hot backend (b3), burning 90 % of its core.
const HOT: usize = 2;

/// `livecount-epp`, built into the same target directory as this test.
fn epp_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let bin = dir.join("livecount-epp");
    assert!(
        bin.exists(),
        "livecount-epp not found at {}: build it first (cargo build --release -p \
         livecount-epp; scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// A picker process; killed (by PID) on drop.
struct Picker {
    child: Child,
    log: PathBuf,
    args: Vec<String>,
}

impl Picker {
    /// Starts `livecount-epp` on `port` over `backends` (`--backend` values), its stderr
    /// to `<name>.log` in the fleet's directory.
    fn start(fleet: &Fleet, name: &str, port: u16, backends: &[String]) -> Picker {
        let mut args = vec![
            "--listen".to_owned(),
            format!("127.0.0.1:{port}"),
            "--report-secs".to_owned(),
            "0.5".to_owned(),
        ];
        for b in backends {
            args.push("--backend".to_owned());
            args.push(b.clone());
        }
        let log = fleet.dir.join(format!("{name}.log"));
        let child = spawn(&args, &log);
        Picker { child, log, args }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kill -9`: no goodbye to Envoy, its streams cut.
    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The same picker again, on the same port (a restarted pod).
    fn restart(&mut self) {
        assert!(self.child.try_wait().unwrap().is_some(), "still running");
        let log = self.log.with_extension("2.log");
        self.child = spawn(&self.args, &log);
        self.log = log;
    }

    /// SIGTERM, then its last line: the placements it made (`PickerStats`).
    async fn stop(&mut self) -> String {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        for _ in 0..100 {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "the picker exits 0: {status}\n{}",
                    self.log()
                );
                return self.log().lines().last().unwrap_or_default().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the picker did not stop within 10 s of SIGTERM\n{}",
            self.log()
        );
    }
}

fn spawn(args: &[String], log: &std::path::Path) -> Child {
    Command::new(epp_binary())
        .args(args)
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("livecount-epp starts")
}

impl Drop for Picker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sessions a picker's final line says it placed: `placed: [(addr, n), …]`'s sum.
fn placed(line: &str) -> u64 {
    let at = line.find("picks: ").expect("the picker's stats line") + "picks: ".len();
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pick count in {line}"))
}

/// An Envoy counter of the ext_proc filter (`…ext_proc.<name>`), 0 before it exists.
async fn ext_proc_stat(envoy: &Envoy, name: &str) -> u64 {
    let body = admin_get(&envoy.admin_addr(), "/stats?filter=ext_proc")
        .await
        .expect("Envoy's /stats answers");
    body.lines()
        .filter(|l| l.contains("ext_proc.") && !l.contains("cluster."))
        .find_map(|l| {
            let (key, value) = l.split_once(": ")?;
            key.ends_with(&format!(".{name}"))
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// Waits (up to 20 s) until Envoy answers `/ready` and sees every host of `cluster`
/// (`127.0.0.1:<port>`) healthy.
async fn wait_healthy(envoy: &Envoy, cluster: &str, ports: &[u16]) {
    let start = Instant::now();
    loop {
        if admin_get(&envoy.admin_addr(), "/ready").await.is_some()
            && let Some(body) = admin_get(&envoy.admin_addr(), "/clusters").await
        {
            let healthy = ports.iter().all(|p| {
                let key = format!("{cluster}::127.0.0.1:{p}::health_flags::");
                body.lines()
                    .find_map(|l| l.strip_prefix(&key))
                    .is_some_and(|h| h.trim() == "healthy")
            });
            if healthy {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "Envoy never saw {cluster} {ports:?} healthy\n{}",
            envoy_log(envoy)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The Envoy config values: the pickers of the gRPC pool (one line per replica) and the
/// WebSocket pool's picker.
fn picker_values(template: &str, grpc: &[u16], ws: u16) -> (String, Vec<(String, String)>) {
    let line = template
        .lines()
        .find(|l| l.contains("@PICKER_GRPC1@"))
        .expect("the template's picker line");
    let lines: Vec<String> = (1..=grpc.len())
        .map(|i| line.replace("@PICKER_GRPC1@", &format!("@PICKER_GRPC{i}@")))
        .collect();
    let template = template.replace(line, &lines.join("\n"));
    let mut values: Vec<(String, String)> = grpc
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("PICKER_GRPC{}", i + 1), p.to_string()))
        .collect();
    values.push(("PICKER_WS1".into(), ws.to_string()));
    (template, values)
}

/// 30 gRPC sessions through `envoy`, one every 100 ms on 3 shared channels, each held
/// 2–3 s, none killed.
async fn short_wave(envoy: &Envoy) -> Tally {
    let plans = plans(
        30,
        |i| Duration::from_millis(2000 + 250 * (i % 5)),
        |_| false,
    );
    wave(envoy.front(), plans, Duration::from_millis(100), 3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy (scripts/lb_tools.sh) and livecount-epp; run by scripts/test.sh"]
async fn the_picker_places_sessions_by_the_backends_reports_and_envoy_survives_its_death() {
    let t0 = Instant::now();
    let mut fleet = Fleet::start("envoy-picker", 3, HOT, &[]);
    let grpc_backends: Vec<String> = fleet
        .backends
        .iter()
        .map(|b| format!("127.0.0.1:{}", b.grpc))
        .collect();
    let ws_backends: Vec<String> = fleet
        .backends
        .iter()
        .map(|b| format!("127.0.0.1:{0},load=127.0.0.1:{0}", b.http))
        .collect();
    let (a_port, b_port, ws_port) = (free_port(), free_port(), free_port());
    let mut picker_a = Picker::start(&fleet, "picker-a", a_port, &grpc_backends);
    let mut picker_b = Picker::start(&fleet, "picker-b", b_port, &grpc_backends);
    let mut picker_ws = Picker::start(&fleet, "picker-ws", ws_port, &ws_backends);
    let (one, values) = picker_values(TEMPLATE, &[a_port], ws_port);
    let (envoy, config) = start_envoy_with(&mut fleet, &one, "envoy", &values);
    let (two, values) = picker_values(TEMPLATE, &[a_port, b_port], ws_port);
    let (envoy2, _) = start_envoy_with(&mut fleet, &two, "envoy2", &values);
    fleet.ready().await;
    wait_healthy(&envoy, "picker_grpc", &[a_port]).await;
    wait_healthy(&envoy, "picker_ws", &[ws_port]).await;
    wait_healthy(&envoy2, "picker_grpc", &[a_port, b_port]).await;
    eprintln!("ready after {:.1} s", t0.elapsed().as_secs_f64());

    // gRPC: 60 sessions, 30 % killed.
    let timeline = Timeline::record(&fleet);
    let before = fleet.loads().await;
    let sixty = plans(
        60,
        |i| Duration::from_millis(4000 + 500 * (i % 5)),
        |i| matches!(i % 10, 1 | 4 | 7),
    );
    let tally = wave(envoy.front(), sixty, Duration::from_millis(100), 4).await;
    let after = fleet.settled(&[0, 1, 2]).await;
    let samples = timeline.stop();
    let grpc_new = new_sessions(&before, &after);
    eprintln!("gRPC: {tally:?}; new sessions per backend (b3 hot) {grpc_new:?}");
    assert_eq!((tally.opened, tally.killed, tally.closed), (60, 18, 42));
    assert_eq!(
        grpc_new.iter().sum::<u64>(),
        60,
        "each reached a backend once"
    );
    assert_eq!(
        ended_by(&before, &after, "disconnected"),
        18,
        "killed: counted out"
    );
    assert_eq!(ended_by(&before, &after, "completed"), 42);
    assert_hot_share("envoy + picker (gRPC)", &grpc_new, HOT);
    let started = ext_proc_stat(&envoy, "streams_started").await;
    assert!(started >= 60, "one picker stream per session: {started}");
    assert_eq!(ext_proc_stat(&envoy, "failure_mode_allowed").await, 0);

    // WebSocket: 45 sessions through the WebSocket pool's picker.
    let before = fleet.loads().await;
    let summary = drive(DriveConfig {
        target: envoy.front().to_string(),
        sessions: 45,
        ramp: Duration::from_secs(3),
        hold: Duration::from_millis(4500),
        speak_every: Duration::from_millis(700),
        chunks: 5,
        interrupt_share: 0.1,
        kill_share: 0.3,
        observe: Vec::new(),
        seed: 41,
    })
    .await;
    let after = fleet.settled(&[0, 1, 2]).await;
    let ws_new = new_sessions(&before, &after);
    eprintln!("WebSocket: {summary:?}; new sessions per backend {ws_new:?}");
    assert_eq!((summary.opened, summary.refused), (45, 0), "{summary:?}");
    assert_eq!(
        ws_new.iter().sum::<u64>(),
        45,
        "each reached a backend once"
    );
    assert_hot_share("envoy + picker (WebSocket)", &ws_new, HOT);

    // Two replicas behind envoy2, picker A shared by both Envoys: 30 sessions each, at once.
    let before = fleet.loads().await;
    let (through_one, through_two) = tokio::join!(short_wave(&envoy), short_wave(&envoy2));
    let after = fleet.settled(&[0, 1, 2]).await;
    let shared_new = new_sessions(&before, &after);
    eprintln!("two Envoys: {through_one:?} {through_two:?}; new per backend {shared_new:?}");
    assert_eq!((through_one.closed, through_two.closed), (30, 30));
    assert_eq!(shared_new.iter().sum::<u64>(), 60);
    assert_hot_share("two Envoys, two replicas", &shared_new, HOT);
    let b_line = picker_b.stop().await;
    let b_placed = placed(&b_line);
    eprintln!("replica B: {b_line}");
    assert!(b_placed > 0, "envoy2 asked both replicas: {b_line}");
    assert!(b_placed < 30, "and not only B: {b_line}");

    // A killed picker: Envoy falls back to its own policy, no call fails.
    let before = fleet.loads().await;
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        picker_a.kill9();
        picker_a
    });
    let survived = short_wave(&envoy).await;
    let mut picker_a = killer.await.unwrap();
    let after = fleet.settled(&[0, 1, 2]).await;
    let fallback_new = new_sessions(&before, &after);
    let failed_open = ext_proc_stat(&envoy, "failure_mode_allowed").await;
    eprintln!(
        "picker killed: {survived:?}; new per backend {fallback_new:?}; Envoy failed open \
         {failed_open} times"
    );
    assert_eq!(
        (survived.opened, survived.closed),
        (30, 30),
        "no failed call"
    );
    assert_eq!(fallback_new.iter().sum::<u64>(), 30);
    assert!(failed_open > 0, "the fallback path ran");
    picker_a.restart();
    wait_healthy(&envoy, "picker_grpc", &[a_port]).await;

    // A draining backend gets no new session.
    let held_plans = plans(9, |_| Duration::from_secs(8), |_| false);
    let held = tokio::spawn(wave(
        envoy.front(),
        held_plans,
        Duration::from_millis(60),
        3,
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    fleet.send_sigterm(0);
    let draining = draining_report(&fleet.backends[0].http_addr()).await;
    assert!(draining.active > 0, "b1 holds some of the 9: {draining:?}");
    // The picker learns it from the ORCA stream's end (milliseconds).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mid = [
        load_of(&fleet.backends[1].http_addr()).await,
        load_of(&fleet.backends[2].http_addr()).await,
    ];
    let fresh = wave(
        envoy.front(),
        plans(12, |_| Duration::from_millis(800), |_| false),
        Duration::from_millis(100),
        2,
    )
    .await;
    let (status, last) = fleet.wait_exit(0).await;
    eprintln!(
        "b1 after SIGTERM with {} open: {status}; {last}",
        draining.active
    );
    assert!(status.success(), "b1 exits 0: {status}");
    assert_eq!((fresh.opened, fresh.closed), (12, 12), "{fresh:?}");
    assert!(
        last.ends_with("refused 0"),
        "nothing was sent to b1 draining: {last}"
    );
    let held = tokio::time::timeout(Duration::from_secs(30), held)
        .await
        .expect("the held sessions end")
        .unwrap();
    assert_eq!(held.ended_by_server, draining.active, "{held:?}");
    let end = fleet.settled(&[1, 2]).await;
    let late = [
        end[0].started - mid[0].started,
        end[1].started - mid[1].started,
    ];
    assert_eq!(late[0] + late[1], 12, "all on b2 / b3: {late:?}");
    let a_line = picker_a.stop().await;
    let ws_line = picker_ws.stop().await;
    eprintln!("picker A (after its restart): {a_line}\nWebSocket picker: {ws_line}");

    let secs = t0.elapsed().as_secs_f64();
    let body = format!(
        "Three agents (`--cores 1 --work-ms 1 --report-secs 0.5`; b3 burns 90 % of its core) \
         behind Envoy 1.40, every new session placed by `livecount-epp` (ext_proc, request \
         headers only; `override_host` reading `envoy.lb` / `x-gateway-destination-endpoint`, \
         falling back to `LEAST_REQUEST`). The gRPC pool's picker reads the agents' ORCA \
         streams, the WebSocket pool's their `/load`.\n\n\
         ## New sessions per backend\n\n\
         | wave | b1 | b2 | b3 (hot) |\n|---|---:|---:|---:|\n\
         | gRPC, 60 (18 killed) | {g0} | {g1} | {g2} |\n\
         | WebSocket, 45 ({wk} killed) | {w0} | {w1} | {w2} |\n\
         | two Envoys, one with two picker replicas, 30 + 30 | {s0} | {s1} | {s2} |\n\
         | picker killed 1 s in, 30 | {f0} | {f1} | {f2} |\n\n\
         Replica B placed {b_placed} of the 30 sessions through the second Envoy. With the \
         picker killed, Envoy failed open {failed_open} times and every session opened and \
         ended. b1, SIGTERMed with {held_b1} sessions open, refused none: the 12 sessions \
         of its drain went to b2 {l0} and b3 {l1}. Every backend settled at active 0, \
         started = ended.\n\nTest duration {secs:.1} s.\n\n\
         ## Config (`deploy/envoy/envoy-picker.yaml.in`, as rendered)\n\n```yaml\n{config}```\n",
        g0 = grpc_new[0],
        g1 = grpc_new[1],
        g2 = grpc_new[2],
        wk = summary.killed,
        w0 = ws_new[0],
        w1 = ws_new[1],
        w2 = ws_new[2],
        s0 = shared_new[0],
        s1 = shared_new[1],
        s2 = shared_new[2],
        f0 = fallback_new[0],
        f1 = fallback_new[1],
        f2 = fallback_new[2],
        held_b1 = draining.active,
        l0 = late[0],
        l1 = late[1],
    );
    let dir = write_report(
        "envoy-picker",
        "Envoy with livecount's endpoint picker",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}; test took {secs:.1} s", dir.display());
}
