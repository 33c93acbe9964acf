//! The `[autoscaler]` table: defaults, and every bad value rejected with the file and the
//! key named.

use livecount_sim::autoscaler::{PolicyKind, ScalingRules, SelectPolicy};
use livecount_sim::{ScaleIn, Scenario, ScenarioError, Signal};

const FILE: &str = "scaled.toml";

/// A pool of 10; every signal and scale-in compared; each test breaks one thing.
const BASE: &str = r#"description = "scaled"
duration_s = 600
[arrivals]
target_concurrent = 100
[sessions]
duration = "exponential"
mean_s = 60
[[backends]]
count = 10
"#;

const VALID: &str = "min_replicas = 2\nmax_replicas = 8\nstartup_s = 30\n\
    drain_deadline_s = 120\ncpu_target = 0.6\nsessions_target = 40\ncapacity_target = 0.7";

fn scaled(keys: &str) -> String {
    format!("{BASE}[autoscaler]\n{keys}\n")
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_toml_str(text, FILE)
}

/// Fails on `key` (an `Invalid` error) with a message naming the file, the key and
/// containing `mentions`.
fn expect_invalid(text: &str, key: &str, mentions: &str) {
    let err = parse(text).expect_err("the scenario should be rejected");
    let shown = err.to_string();
    assert!(shown.starts_with(&format!("{FILE}: {key} = ")), "{shown}");
    assert!(shown.contains(mentions), "{mentions:?} not in {shown:?}");
    assert!(matches!(err, ScenarioError::Invalid { .. }), "{err:?}");
    assert_eq!(err.key(), Some(key));
}

#[test]
fn the_defaults_are_the_hpas() {
    let s = parse(&scaled(VALID)).expect("valid");
    let a = s.autoscaler.as_ref().unwrap();
    assert_eq!((a.sync_period_s, a.tolerance, a.initial()), (15.0, 0.1, 2));
    assert_eq!(a.signals, [Signal::Cpu, Signal::Sessions, Signal::Capacity]);
    assert_eq!(
        a.scale_in,
        [ScaleIn::Random, ScaleIn::Emptiest, ScaleIn::Drain]
    );
    assert_eq!(a.variants().len(), 9);
    assert_eq!(a.variants()[0].label(), "cpu/random");
    assert_eq!(a.variants()[8].label(), "capacity/drain");
    assert_eq!(a.up_rules(), ScalingRules::default_up());
    assert_eq!(a.down_rules(), ScalingRules::default_down());
    // One key given: the others keep the direction's defaults.
    let s = parse(&scaled(&format!(
        "{VALID}\n[autoscaler.scale_down]\nstabilization_s = 600"
    )))
    .expect("valid");
    let down = s.autoscaler.unwrap().down_rules();
    assert_eq!(down.stabilization_s, 600.0);
    assert_eq!(down.select, SelectPolicy::Max);
    assert_eq!(down.policies, ScalingRules::default_down().policies);
    let s = parse(&scaled(&format!(
        "{VALID}\n[autoscaler.scale_down]\npolicies = [{{ kind = \"pods\", value = 1, period_s = 120 }}]"
    )))
    .expect("valid");
    let p = s.autoscaler.unwrap().down_rules().policies;
    assert_eq!(
        (p.len(), p[0].kind, p[0].value, p[0].period_s),
        (1, PolicyKind::Pods, 1, 120.0)
    );
}

#[test]
fn replica_bounds_are_checked_against_the_pool() {
    let v = |from: &str, to: &str| scaled(&VALID.replace(from, to));
    expect_invalid(
        &v("min_replicas = 2", "min_replicas = 0"),
        "autoscaler.min_replicas",
        "[1, 10]",
    );
    expect_invalid(
        &v("max_replicas = 8", "max_replicas = 11"),
        "autoscaler.max_replicas",
        "[2, 10]",
    );
    expect_invalid(
        &v("max_replicas = 8", "max_replicas = 1"),
        "autoscaler.max_replicas",
        "pool",
    );
    expect_invalid(
        &scaled(&format!("{VALID}\ninitial_replicas = 9")),
        "autoscaler.initial_replicas",
        "[2, 8]",
    );
}

#[test]
fn every_compared_signal_needs_its_target_and_no_other_target_is_set() {
    for (signal, key) in [
        ("cpu_target = 0.6", "autoscaler.cpu_target"),
        ("sessions_target = 40", "autoscaler.sessions_target"),
        ("capacity_target = 0.7", "autoscaler.capacity_target"),
    ] {
        expect_invalid(&scaled(&VALID.replace(signal, "")), key, "(0, ");
    }
    expect_invalid(
        &scaled(&VALID.replace("0.6", "1.5")),
        "autoscaler.cpu_target",
        "(0, 1]",
    );
    expect_invalid(
        &scaled(&VALID.replace("= 40", "= -4")),
        "autoscaler.sessions_target",
        "(0, ",
    );
    let only_sessions = format!("{VALID}\nsignals = [\"sessions\"]");
    expect_invalid(
        &scaled(&only_sessions),
        "autoscaler.cpu_target",
        "only with \"cpu\"",
    );
    expect_invalid(
        &scaled(&format!("{VALID}\nsignals = [\"cpu\", \"cpu\"]")),
        "autoscaler.signals[1]",
        "each value once",
    );
    expect_invalid(
        &scaled(&format!("{VALID}\nsignals = []")),
        "autoscaler.signals",
        "at least one",
    );
    let err = parse(&scaled(&format!("{VALID}\nsignals = [\"qps\"]"))).unwrap_err();
    assert!(matches!(err, ScenarioError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("qps"), "{err}");
}

#[test]
fn the_drain_deadline_goes_with_the_drain() {
    let no_deadline = VALID.replace("drain_deadline_s = 120", "");
    expect_invalid(&scaled(&no_deadline), "autoscaler.drain_deadline_s", "(0, ");
    expect_invalid(
        &scaled(&VALID.replace("= 120", "= 0")),
        "autoscaler.drain_deadline_s",
        "(0, ",
    );
    let cut_only = format!("{VALID}\nscale_in = [\"random\", \"emptiest\"]");
    expect_invalid(
        &scaled(&cut_only),
        "autoscaler.drain_deadline_s",
        "only with \"drain\"",
    );
    parse(&scaled(&format!(
        "{no_deadline}\nscale_in = [\"emptiest\"]"
    )))
    .expect("no drain, no deadline");
}

#[test]
fn controller_settings_and_behaviour_ranges() {
    let extra = |keys: &str| scaled(&format!("{VALID}\n{keys}"));
    expect_invalid(
        &extra("sync_period_s = 0"),
        "autoscaler.sync_period_s",
        "(0, ",
    );
    expect_invalid(&extra("tolerance = 1"), "autoscaler.tolerance", "[0, 0.99]");
    expect_invalid(
        &extra("startup_s = -1").replace("startup_s = 30\n", ""),
        "autoscaler.startup_s",
        "[0, ",
    );
    expect_invalid(
        &extra("reconnect_share = 2"),
        "autoscaler.reconnect_share",
        "[0, 1]",
    );
    expect_invalid(
        &extra("[autoscaler.scale_up]\nstabilization_s = 4000"),
        "autoscaler.scale_up.stabilization_s",
        "[0, 3600]",
    );
    expect_invalid(
        &extra("[autoscaler.scale_down]\npolicies = []"),
        "autoscaler.scale_down.policies",
        "at least one policy",
    );
    expect_invalid(
        &extra(
            "[autoscaler.scale_down]\npolicies = [{ kind = \"percent\", value = 0, period_s = 15 }]",
        ),
        "autoscaler.scale_down.policies[0].value",
        "(0, ",
    );
    expect_invalid(
        &extra(
            "[autoscaler.scale_up]\npolicies = [{ kind = \"pods\", value = 4, period_s = 3600 }]",
        ),
        "autoscaler.scale_up.policies[0].period_s",
        "(0, 1800]",
    );
    let err = parse(&extra("[autoscaler.scale_up]\nselect = \"most\"")).unwrap_err();
    assert!(err.to_string().contains("most"), "{err}");
}

#[test]
fn the_share_with_draining_pods_goes_with_the_capacity_signal() {
    let sessions_only = VALID
        .replace("cpu_target = 0.6\n", "")
        .replace("\ncapacity_target = 0.7", "");
    let text = scaled(&format!(
        "{sessions_only}\nsignals = [\"sessions\"]\nshare_includes_draining = true"
    ));
    expect_invalid(
        &text,
        "autoscaler.share_includes_draining",
        "only with \"capacity\"",
    );
    let s = parse(&scaled(&format!("{VALID}\nshare_includes_draining = true"))).unwrap();
    assert!(s.autoscaler.unwrap().share_includes_draining);
}

#[test]
fn an_autoscaler_owns_the_fleet_alone() {
    let with_failure = format!("{}[[failures]]\nbackend = 0\nat_s = 10\n", scaled(VALID));
    expect_invalid(&with_failure, "autoscaler", "an autoscaler alone");
}
