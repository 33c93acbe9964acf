//! Scenario errors name the file and the offending key, in the library and in `lbsim`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::bundled;
use livecount_sim::{Scenario, ScenarioError, ScenarioResult, policy};

const FILE: &str = "broken.toml";

/// A valid scenario; each test breaks one thing in it.
const VALID: &str = r#"description = "valid"
duration_s = 60
[arrivals]
rate_per_s = 2
[sessions]
duration = "exponential"
mean_s = 30
[[backends]]
count = 2
"#;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_toml_str(text, FILE)
}

/// `text` must fail with an error whose Display names the file and contains `mentions`.
fn expect_error(text: &str, mentions: &str) -> ScenarioError {
    let err = parse(text).expect_err("the scenario should be rejected");
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("{FILE}: ")),
        "no file in {shown:?}"
    );
    assert!(shown.contains(mentions), "{mentions:?} not in {shown:?}");
    err
}

/// `text` must fail validation on `key`, and the Display must name the file and key.
fn expect_invalid(text: &str, key: &str) {
    let err = expect_error(text, key);
    assert!(matches!(err, ScenarioError::Invalid { .. }), "{err:?}");
    assert_eq!(err.key(), Some(key), "{err}");
}

/// VALID with `extra` appended inside the table `[table]` (or at the top when empty).
fn with(table: &str, extra: &str) -> String {
    if table.is_empty() {
        return format!("{extra}\n{VALID}");
    }
    VALID.replacen(&format!("[{table}]\n"), &format!("[{table}]\n{extra}\n"), 1)
}

#[test]
fn valid_base_scenario_parses() {
    parse(VALID).expect("the base of these tests is valid");
}

#[test]
fn unknown_top_level_key_is_a_parse_error_naming_it() {
    let err = expect_error(&with("", "speedup = 3"), "speedup");
    assert!(matches!(err, ScenarioError::Parse { .. }), "{err:?}");
    assert_eq!(err.key(), None);
}

#[test]
fn unknown_nested_key_is_a_parse_error_naming_it() {
    let err = expect_error(&with("sessions", "speed = 3"), "speed");
    assert!(matches!(err, ScenarioError::Parse { .. }), "{err:?}");
}

#[test]
fn wrong_type_is_a_parse_error_naming_the_key() {
    let text = VALID.replace("duration_s = 60", "duration_s = \"long\"");
    let err = expect_error(&text, "duration_s");
    assert!(matches!(err, ScenarioError::Parse { .. }), "{err:?}");
}

#[test]
fn missing_description_is_a_parse_error_naming_it() {
    let text = VALID.replace("description = \"valid\"\n", "");
    expect_error(&text, "description");
}

#[test]
fn capacity_target_must_be_in_zero_one() {
    for target in ["0", "1.5", "-0.1"] {
        let text = format!("{VALID}[capacity]\ntarget = {target}\n");
        expect_invalid(&text, "capacity.target");
    }
    let ok = format!("{VALID}[capacity]\ntarget = 1.0\n");
    parse(&ok).expect("target = 1 is allowed");
}

#[test]
fn safety_scaler_below_one_is_invalid() {
    let text = format!("{VALID}[capacity]\nsafety_scaler = 0.5\n");
    expect_invalid(&text, "capacity.safety_scaler");
}

#[test]
fn zero_report_window_is_invalid() {
    let text = format!("{VALID}[reports]\nwindow_s = 0\n");
    expect_invalid(&text, "reports.window_s");
}

#[test]
fn cancel_share_above_one_is_invalid() {
    expect_invalid(
        &with("sessions", "cancel_share = 1.5"),
        "sessions.cancel_share",
    );
}

#[test]
fn cancel_and_disconnect_shares_summing_above_one_are_invalid() {
    let text = with("sessions", "cancel_share = 0.6\ndisconnect_share = 0.5");
    expect_invalid(&text, "sessions.cancel_share + sessions.disconnect_share");
}

#[test]
fn zero_size_in_second_backend_group_names_its_index() {
    let text = format!("{VALID}[[backends]]\ncount = 1\nsize = 0\n");
    expect_invalid(&text, "backends[1].size");
}

#[test]
fn failure_of_a_backend_out_of_range_is_invalid() {
    // Two backends: indices 0 and 1.
    let text = format!("{VALID}[[failures]]\nbackend = 2\nat_s = 10\n");
    expect_invalid(&text, "failures[0].backend");
    let ok = format!("{VALID}[[failures]]\nbackend = 1\nat_s = 10\n");
    parse(&ok).expect("backend 1 exists");
}

#[test]
fn unknown_policy_name_is_invalid() {
    let text = with("", "policies = [\"round_robin\", \"fastest\"]");
    expect_invalid(&text, "policies");
    expect_error(&text, "fastest");
}

#[test]
fn key_of_another_pattern_is_invalid() {
    expect_invalid(&with("arrivals", "burst_size = 3"), "arrivals.burst_size");
    expect_invalid(&with("arrivals", "period_s = 60"), "arrivals.period_s");
    expect_invalid(&with("arrivals", "factor = 3"), "arrivals.factor");
}

#[test]
fn bursts_without_their_keys_are_invalid() {
    let text = with("arrivals", "pattern = \"bursts\"\nburst_size = 3");
    expect_invalid(&text, "arrivals.burst_every_s");
}

#[test]
fn both_rate_and_target_concurrent_are_invalid() {
    expect_invalid(&with("arrivals", "target_concurrent = 100"), "arrivals");
    let neither = VALID.replace("rate_per_s = 2\n", "");
    expect_invalid(&neither, "arrivals");
}

/// VALID (60 s, two backends) with a rolling restart of these keys.
fn restart(keys: &str) -> String {
    format!("{VALID}[rolling_restart]\n{keys}\n")
}

const DRAIN: &str = "start_s = 10\nmode = \"drain\"\nrestart_s = 5\ngap_s = 2";

#[test]
fn a_valid_rolling_restart_parses() {
    // Worst case: 10 + 2 × (20 + 5) + 2 = 62 > 60; with a 19 s deadline, 60.
    parse(&restart(&format!("{DRAIN}\ndrain_deadline_s = 19"))).expect("fits the run");
    parse(&restart("start_s = 0\nmode = \"cut\"\nrestart_s = 5")).expect("cut, no gap");
}

#[test]
fn a_bad_drain_deadline_is_invalid_naming_it() {
    for d in ["-1", "0", "nan", "inf"] {
        let text = restart(&format!("{DRAIN}\ndrain_deadline_s = {d}"));
        expect_invalid(&text, "rolling_restart.drain_deadline_s");
    }
    // Missing in drain mode, present in cut mode.
    expect_invalid(&restart(DRAIN), "rolling_restart.drain_deadline_s");
    let cut = DRAIN.replace("drain\"", "cut\"") + "\ndrain_deadline_s = 5";
    let err = expect_error(&restart(&cut), "only with mode = \"drain\"");
    assert_eq!(err.key(), Some("rolling_restart.drain_deadline_s"));
}

#[test]
fn an_unknown_restart_mode_is_a_parse_error_naming_the_key() {
    let text = restart(&DRAIN.replace("drain\"", "gentle\""));
    let err = expect_error(&text, "gentle");
    assert!(matches!(err, ScenarioError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("mode"), "{err}");
}

#[test]
fn bad_restart_times_are_invalid_naming_the_key() {
    let cut = "mode = \"cut\"";
    expect_invalid(
        &restart(&format!("{cut}\nstart_s = -1\nrestart_s = 5")),
        "rolling_restart.start_s",
    );
    expect_invalid(
        &restart(&format!("{cut}\nstart_s = 1\nrestart_s = 0")),
        "rolling_restart.restart_s",
    );
    expect_invalid(
        &restart(&format!("{cut}\nstart_s = 1\nrestart_s = 5\ngap_s = nan")),
        "rolling_restart.gap_s",
    );
}

#[test]
fn bad_reconnect_keys_are_invalid_naming_the_key() {
    let cut = "mode = \"cut\"\nstart_s = 1\nrestart_s = 5";
    for share in ["-0.1", "1.5", "nan"] {
        expect_invalid(
            &restart(&format!("{cut}\nreconnect_share = {share}")),
            "rolling_restart.reconnect_share",
        );
    }
    expect_invalid(
        &restart(&format!("{cut}\nreconnect_after_s = -1")),
        "rolling_restart.reconnect_after_s",
    );
    // A reconnect may come back at once, and may come after the arrivals stop.
    parse(&restart(&format!(
        "{cut}\nreconnect_after_s = 0\nreconnect_share = 0.5"
    )))
    .expect("valid");
    parse(&restart(&format!("{cut}\nreconnect_after_s = 3600"))).expect("valid");
}

#[test]
fn a_rolling_restart_running_past_the_arrivals_is_invalid() {
    // 10 + 2 × (20 + 5) + 2 = 62 s in the worst case, past the 60 s of arrivals.
    let text = restart(&format!("{DRAIN}\ndrain_deadline_s = 20"));
    let err = expect_error(&text, "duration_s = 60");
    assert_eq!(err.key(), Some("rolling_restart"));
    // And a rolling restart does not mix with [[failures]].
    let both = format!(
        "{}[[failures]]\nbackend = 1\nat_s = 10\n",
        restart("mode = \"cut\"\nstart_s = 1\nrestart_s = 5")
    );
    expect_invalid(&both, "rolling_restart");
}

#[test]
fn loading_a_missing_file_is_an_io_error_naming_it() {
    let path = std::env::temp_dir().join("livecount-sim-no-such-scenario.toml");
    let err = Scenario::load(&path).expect_err("the file does not exist");
    assert!(matches!(err, ScenarioError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn load_takes_the_name_from_the_file_stem() {
    let dir = temp_dir("stem");
    let path = dir.join("my_scenario.toml");
    std::fs::write(&path, VALID).expect("write scenario");
    let s = Scenario::load(&path).expect("valid");
    assert_eq!(s.name, "my_scenario");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

// === the lbsim binary ===

fn lbsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lbsim"))
        .args(args)
        .output()
        .expect("lbsim runs")
}

/// A fresh directory under the system temp dir, unique to this process and test.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("livecount-sim-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

#[test]
fn lbsim_run_on_invalid_file_fails_naming_file_and_key() {
    let dir = temp_dir("bad-run");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, with("sessions", "cancel_share = 1.5")).expect("write");
    let out = lbsim(&["run", bad.to_str().expect("utf-8 path"), "--no-write"]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
    assert!(stderr.contains("sessions.cancel_share"), "{stderr}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn lbsim_policies_lists_all_fourteen_names() {
    let out = lbsim(&["policies"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = stdout.lines().collect();
    assert_eq!(names, policy::NAMES);
    assert_eq!(names.len(), 14);
}

#[test]
fn lbsim_check_accepts_every_bundled_scenario() {
    let files = bundled();
    let args: Vec<&str> = std::iter::once("check")
        .chain(files.iter().map(|p| p.to_str().expect("utf-8 path")))
        .collect();
    let out = lbsim(&args);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.contains(": ok (")).count(),
        files.len()
    );
}

#[test]
fn lbsim_run_writes_json_markdown_and_plots() {
    let dir = temp_dir("run-out");
    let out_dir = dir.join("out");
    let out = lbsim(&[
        "run",
        "silent_then_speaking",
        "--no-progress",
        "--out",
        out_dir.to_str().expect("utf-8 path"),
        "--policy",
        "random,hybrid_p2c",
    ]);
    assert!(out.status.success(), "{out:?}");
    for f in ["results.json", "REPORT.md", "spread.svg", "latency.svg"] {
        let meta = std::fs::metadata(out_dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(meta.len() > 0, "{f} is empty");
    }
    let json = std::fs::read_to_string(out_dir.join("results.json")).expect("read json");
    let result: ScenarioResult = serde_json::from_str(&json).expect("results.json parses");
    let names: Vec<&str> = result.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["random", "hybrid_p2c"]);
    assert_eq!(result.scenario, "silent_then_speaking");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn proxy_shares_not_one_per_proxy_are_invalid() {
    let text = format!("{VALID}[balancer]\nproxies = 3\nproxy_shares = [1.0, 2.0]\n");
    expect_invalid(&text, "balancer.proxy_shares");
}

#[test]
fn a_proxy_share_of_zero_is_invalid() {
    let text = format!("{VALID}[balancer]\nproxies = 2\nproxy_shares = [1.0, 0.0]\n");
    expect_invalid(&text, "balancer.proxy_shares");
}

#[test]
fn a_reload_of_a_proxy_out_of_range_is_invalid() {
    let text = format!("{VALID}[balancer]\nproxies = 2\nreloads = [{{ proxy = 2, at_s = 1.0 }}]\n");
    expect_invalid(&text, "balancer.reloads.proxy");
}
