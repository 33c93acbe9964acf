//! The agreement checks: the simulator's ranking of balancers holds on real ones.
//!
//! Each test runs `lbtestbed --check` on a scenario at twice its speed
//! (`crates/sim/scenarios/testbed/*_check.toml`: half the lengths, twice the arrivals, one
//! minute) through two balancers the simulator separates there, and fails unless the
//! testbed orders them the same way on overloaded assignments, first-stream p99 and spread
//! CV (where the simulator separates them) and every backend ends at active 0 with started = ended.
//! The figures' own agreement is reported, not judged here: see `results/testbed/` and
//! `docs/testbed.md` for what agrees and what does not, and why.
//!
//! `#[ignore]`d: they need a writable cgroup for the CPU quotas (v1's cpu controller, or a
//! delegated v2 subtree: see `docs/testbed.md`), Envoy from
//! `scripts/lb_tools.sh`, and about three minutes each of a quiet machine; `scripts/test.sh`
//! runs them with the other end-to-end tests, one at a time.

use std::path::PathBuf;
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the check of `scenario` through `balancers`; panics with the tool's output unless
/// it exits 0.
fn check(scenario: &str, balancers: &[&str]) {
    let ws = workspace();
    let out_dir = ws.join("target/testbed-check").join(scenario);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lbtestbed"));
    cmd.arg(ws.join(format!("crates/sim/scenarios/testbed/{scenario}.toml")))
        .args(["--check", "--sim-seeds", "5", "--out"])
        .arg(&out_dir);
    for b in balancers {
        cmd.args(["--balancer", b]);
    }
    let out = cmd.output().expect("lbtestbed runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}\n{stdout}");
    assert!(
        out.status.success(),
        "lbtestbed --check {scenario} exited {}: the ranking or the counts disagree (report in {})",
        out.status,
        out_dir.display()
    );
    assert!(stdout.contains("agrees"), "no finding printed:\n{stdout}");
}

/// Backends of 1 and 2 cores: the simulator puts ORCA-weighted CSWRR (the hybrid
/// headroom) far below least request on overloaded assignments.
#[test]
#[ignore = "needs root (CPU cgroups) and Envoy; run by scripts/test.sh with the end-to-end tests"]
fn heterogeneous_fleet_ranking_agrees() {
    check(
        "heterogeneous_check",
        &["envoy-least-request", "envoy-orca-wrr"],
    );
}

/// Equal backends, mostly short requests among long sessions: least request on Envoy's own
/// open streams spreads the sessions far more evenly than round robin on arrivals (the
/// simulator's spread CV 0.07–0.09 against 0.18–0.26; the committed full run 0.085 against
/// 0.213): the scenario's claim, balancing arrivals is not balancing sessions. (Envoy's ORCA
/// WRR against least request separates there on spread CV alone as well; docs/testbed.md.)
#[test]
#[ignore = "needs root (CPU cgroups), Envoy and HAProxy; run by scripts/test.sh with the end-to-end tests"]
fn homogeneous_long_short_ranking_agrees() {
    check(
        "long_short_homogeneous_check",
        &["haproxy-round-robin", "envoy-least-request"],
    );
}

/// Four independent HAProxy instances over backends of 1 and 2 cores, the sessions spread
/// over them in turn: each `leastconn` instance counts only the streams it placed, while
/// agent-check reads every backend's own report, the same for all four. The simulator puts
/// per-proxy least connections far above the reported headroom on overloaded assignments.
#[test]
#[ignore = "needs root (CPU cgroups) and HAProxy; run by scripts/test.sh with the end-to-end tests"]
fn multi_proxy_ranking_agrees() {
    check(
        "multi_proxy_check",
        &["haproxy-leastconn", "haproxy-agent-check"],
    );
}

/// The same four proxies as Envoys, each asking its own endpoint picker (`livecount-epp`):
/// every picker counts only the sessions it placed since each backend's last report, and
/// the reports are the truth all four share. The simulator runs the picker's own code
/// (`hybrid_p2c`) and puts it far below Envoy's least request on overloaded assignments.
#[test]
#[ignore = "needs root (CPU cgroups), Envoy and a release livecount-epp; run by scripts/test.sh with the end-to-end tests"]
fn endpoint_picker_ranking_agrees() {
    check(
        "multi_proxy_check",
        &["envoy-least-request", "envoy-picker"],
    );
}
