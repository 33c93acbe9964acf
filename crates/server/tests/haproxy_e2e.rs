//! End to end on loopback: a real HAProxy (`balance leastconn` + `agent-check`) in front of
//! three `livecount-agent` processes, one of them hot. The hot backend must take at most
//! 10 % of new sessions and the cold ones shares within 1.5× of each other; after clients
//! are killed abruptly every backend's count must return to exactly 0 with started = ended,
//! matching what the driver did; a SIGTERMed backend drains and HAProxy moves on.
//!
//! `#[ignore]`d (it needs the `haproxy` binary and takes ~25 s): `scripts/test.sh` runs it
//! alone after the heavy phase, and `scripts/lb_tools.sh` installs haproxy when missing.
//! Writes `target/lb/haproxy/REPORT.md` (and `results/lb/haproxy/` with
//! `LIVECOUNT_UPDATE_RESULTS=1`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::lb::{
    Fleet, Timeline, assert_shares, ended_by, free_port, new_sessions, share_table, write_report,
};
use livecount_server::load_driver::{DriveConfig, drive};

fn haproxy() -> PathBuf {
    common::lb::tool(&["haproxy", "/usr/sbin/haproxy"], "-v")
}

/// Sessions through HAProxy's frontend.
fn sessions(front: u16, n: u32, hold: Duration, kill_share: f64, seed: u64) -> DriveConfig {
    DriveConfig {
        target: format!("127.0.0.1:{front}"),
        sessions: n,
        ramp: Duration::from_secs(3),
        hold,
        speak_every: Duration::from_millis(700),
        chunks: 5,
        interrupt_share: 0.1,
        kill_share,
        observe: Vec::new(),
        seed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy; run by scripts/test.sh after the heavy phase"]
async fn sessions_shift_away_from_a_hot_backend_and_counts_return_to_zero() {
    let haproxy = haproxy();
    let mut fleet = Fleet::start("haproxy", 3, 2, &[]);
    let front = free_port();
    let template = include_str!("../../../deploy/haproxy/haproxy.cfg.in");
    let mut config = template.replace("@FRONT@", &front.to_string());
    for (i, b) in fleet.backends.iter().enumerate() {
        config = config
            .replace(&format!("@HTTP{}@", i + 1), &b.http.to_string())
            .replace(&format!("@AGENT{}@", i + 1), &b.agent_check.to_string());
    }
    let cfg = fleet.dir.join("haproxy.cfg");
    std::fs::write(&cfg, &config).unwrap();
    fleet.procs.0.push(
        Command::new(&haproxy)
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts"),
    );
    fleet.ready().await;
    // HAProxy polls agent-check every 500 ms: let it read the hot backend's weight.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let timeline = Timeline::record(&fleet);
    let before = fleet.loads().await;
    assert!(before[2].weight_percent <= 5, "{:?}", before[2]);

    let summary = drive(sessions(front, 45, Duration::from_secs(6), 0.3, 7)).await;
    assert_eq!(summary.opened, 45, "{summary:?}");
    assert!(summary.killed > 0 && summary.closed > 0, "{summary:?}");

    // Every backend settles at exactly 0, and the totals match what the clients did.
    let after = fleet.settled(&[0, 1, 2]).await;
    let new = new_sessions(&before, &after);
    let sum = |reason: &str| ended_by(&before, &after, reason);
    assert_eq!(new.iter().sum::<u64>(), summary.opened);
    assert_eq!(
        sum("disconnected"),
        summary.killed,
        "killed clients end Disconnected, once"
    );
    assert_eq!(
        sum("completed"),
        summary.closed,
        "clean closes end Completed, once"
    );
    let samples_so_far = timeline.stop();
    let table = share_table(&fleet, &new, &samples_so_far);
    eprintln!("HAProxy leastconn + agent-check, new sessions per backend:\n{table}");
    assert_shares("haproxy", &new, 2);

    // Graceful shutdown under HAProxy: open sessions, SIGTERM b1 while they are held.
    let timeline = Timeline::record(&fleet);
    let mut held = sessions(front, 12, Duration::from_secs(6), 0.0, 8);
    (held.ramp, held.interrupt_share) = (Duration::from_millis(500), 0.0);
    let held = tokio::spawn(drive(held));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on_b1 = fleet.loads().await[0].active;
    assert!(on_b1 > 0, "b1 holds some of the sessions");
    fleet.sigterm_drained(0, on_b1).await;
    let summary = held.await.unwrap();
    assert_eq!(summary.opened, 12, "{summary:?}");
    // b1's clients see the server's close when they next speak (or at their own bye).
    assert!(
        (1..=on_b1).contains(&summary.ended_by_server),
        "{summary:?}"
    );
    assert_eq!(summary.closed + summary.ended_by_server, 12, "{summary:?}");
    // HAProxy moves on: every new session is served, by b2 and b3.
    let before_moved = fleet.settled(&[1, 2]).await;
    let mut moved = sessions(front, 10, Duration::from_secs(2), 0.0, 9);
    moved.ramp = Duration::from_secs(1);
    let summary = drive(moved).await;
    assert_eq!((summary.opened, summary.refused), (10, 0), "{summary:?}");
    let after_moved = fleet.settled(&[1, 2]).await;
    let moved: Vec<u64> = new_sessions(&before_moved, &after_moved);
    assert_eq!(moved.iter().sum::<u64>(), 10, "{moved:?}");
    let samples = [samples_so_far, timeline.stop()].concat();

    let body = format!(
        "Three agents (`--cores 1 --work-ms 1`, b3 also `--background-load 0.9`), HAProxy \
         `balance leastconn` with `agent-check` every 500 ms. 45 WebSocket sessions over 3 s, \
         held 6 s, 30 % of clients killed abruptly.\n\n{table}\n\
         Endings: {} completed, {} disconnected (killed clients), summed over the backends, \
         equal to the driver's counts. Then b1 got SIGTERM holding {on_b1} sessions: it \
         drained (they ended `shutdown`) and exited 0; the next 10 sessions went to b2 / b3 \
         as {moved:?}.\n\n\
         The configuration (`deploy/haproxy/haproxy.cfg.in`, ports filled in):\n\n\
         ```\n{template}```\n",
        sum("completed"),
        sum("disconnected"),
    );
    let out = write_report(
        "haproxy",
        "HAProxy leastconn with agent-check",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}", out.display());
}
