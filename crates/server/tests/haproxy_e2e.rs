//! End to end on loopback: a real HAProxy (`balance leastconn` + `agent-check`) in front of
//! three `livecount-agent` processes, one of them hot. Sessions must shift away from the
//! hot backend, and after clients are killed abruptly every backend's count must return to
//! exactly 0 with started = ended, matching what the driver did.
//!
//! `#[ignore]`d (it needs the `haproxy` binary and takes ~20 s): `scripts/test.sh` runs it
//! in its heavy phase, and `.ci/run` installs haproxy when it is missing.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::Procs;
use livecount_server::driver::{DriveConfig, drive, fetch_load};

/// Where agent `i` writes its log (its last line is the final count after shutdown).
fn log(i: usize) -> PathBuf {
    std::env::temp_dir().join(format!(
        "livecount-e2e-{}-b{}.log",
        std::process::id(),
        i + 1
    ))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn haproxy() -> PathBuf {
    ["haproxy", "/usr/sbin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            Command::new(p)
                .arg("-v")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("haproxy not found: `apt-get install haproxy` (.ci/run does this)")
}

async fn wait_for_load(addr: &str) -> serde_json::Value {
    for _ in 0..200 {
        if let Some(v) = fetch_load(addr).await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent at {addr} never answered /load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy; run by scripts/test.sh in the heavy phase"]
async fn sessions_shift_away_from_a_hot_backend_and_counts_return_to_zero() {
    let haproxy = haproxy();
    let front = free_port();
    let http: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let agent: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut procs = Procs(Vec::new());
    for i in 0..3 {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_livecount-agent"));
        cmd.args(["serve", "--name", &format!("b{}", i + 1)])
            .args(["--http", &format!("127.0.0.1:{}", http[i])])
            .args(["--agent-check", &format!("127.0.0.1:{}", agent[i])])
            .args(["--cores", "1", "--work-ms", "1"])
            .stderr(std::fs::File::create(log(i)).unwrap());
        if i == 2 {
            cmd.args(["--background-load", "0.9"]);
        }
        procs.0.push(cmd.spawn().expect("livecount-agent starts"));
    }
    let template = include_str!("../../../examples/haproxy/haproxy.cfg.in");
    let mut config = template.replace("@FRONT@", &front.to_string());
    for i in 0..3 {
        config = config
            .replace(&format!("@HTTP{}@", i + 1), &http[i].to_string())
            .replace(&format!("@AGENT{}@", i + 1), &agent[i].to_string());
    }
    let dir = std::env::temp_dir().join(format!("livecount-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(&cfg, config).unwrap();
    procs.0.push(
        Command::new(&haproxy)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts"),
    );
    let backends: Vec<String> = http.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    for b in &backends {
        wait_for_load(b).await;
    }
    // Let the hot backend report its CPU and HAProxy poll agent-check (every 500 ms).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hot = wait_for_load(&backends[2]).await;
    let weight = hot["weight_percent"].as_u64().unwrap();
    assert!(
        weight <= 5,
        "the hot backend offers almost no headroom: {hot}"
    );

    let summary = drive(DriveConfig {
        target: format!("127.0.0.1:{front}"),
        sessions: 45,
        ramp: Duration::from_secs(3),
        hold: Duration::from_secs(6),
        speak_every: Duration::from_millis(700),
        chunks: 5,
        interrupt_share: 0.1,
        kill_share: 0.3,
        observe: Vec::new(),
        seed: 7,
    })
    .await;
    assert_eq!(summary.opened, 45, "{summary:?}");
    assert!(summary.killed > 0 && summary.closed > 0, "{summary:?}");

    // Every backend settles at exactly 0, and the totals match what the clients did.
    let mut finals = Vec::new();
    for b in &backends {
        let mut last = serde_json::Value::Null;
        for _ in 0..100 {
            last = wait_for_load(b).await;
            if last["active"] == 0 && last["started"] == last["ended"] {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(last["active"], 0, "{b}: {last}");
        assert_eq!(last["started"], last["ended"], "{b}: {last}");
        finals.push(last);
    }
    let sum = |key: &str| finals.iter().map(|v| v[key].as_u64().unwrap()).sum::<u64>();
    let by = |reason: &str| {
        finals
            .iter()
            .map(|v| v["ended_by_reason"][reason].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum("started"), summary.opened);
    assert_eq!(
        by("disconnected"),
        summary.killed,
        "killed clients end Disconnected, once"
    );
    assert_eq!(
        by("completed"),
        summary.closed,
        "clean closes end Completed, once"
    );
    let started: Vec<u64> = finals
        .iter()
        .map(|v| v["started"].as_u64().unwrap())
        .collect();
    eprintln!("sessions per backend (b3 hot): {started:?}; driver: {summary:?}");
    assert!(
        started[2] * 2 < started[0].min(started[1]),
        "new sessions should shift away from the hot backend: {started:?}"
    );

    // Graceful shutdown under HAProxy: open sessions, SIGTERM b1 while they are held.
    let config = DriveConfig {
        target: format!("127.0.0.1:{front}"),
        sessions: 12,
        ramp: Duration::from_millis(500),
        hold: Duration::from_secs(6),
        speak_every: Duration::from_millis(700),
        chunks: 5,
        interrupt_share: 0.0,
        kill_share: 0.0,
        observe: Vec::new(),
        seed: 8,
    };
    let held = tokio::spawn(drive(config));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on_b1 = wait_for_load(&backends[0]).await["active"]
        .as_u64()
        .unwrap();
    assert!(on_b1 > 0, "b1 holds some of the sessions");
    let pid = procs.0[0].id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut exited = None;
    for _ in 0..100 {
        if let Some(status) = procs.0[0].try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(exited.expect("b1 exits within 10 s of SIGTERM").success());
    let b1_log = std::fs::read_to_string(log(0)).unwrap();
    let last = b1_log.lines().last().unwrap_or_default();
    eprintln!("b1 after SIGTERM with {on_b1} sessions open: {last}");
    assert!(last.contains("active 0"), "{b1_log}");
    let expected = format!("\"shutdown\": {on_b1}");
    assert!(
        last.contains(&expected),
        "b1's open sessions end Shutdown: {last}"
    );
    let summary = held.await.unwrap();
    assert_eq!(summary.opened, 12, "{summary:?}");
    // b1's clients see the server's close when they next speak (or at their own bye).
    assert!(
        (1..=on_b1).contains(&summary.ended_by_server),
        "{summary:?}"
    );
    assert_eq!(summary.closed + summary.ended_by_server, 12, "{summary:?}");
    let _ = std::fs::remove_dir_all(&dir);
    for i in 0..3 {
        let _ = std::fs::remove_file(log(i));
    }
}
