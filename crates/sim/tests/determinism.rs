//! A seed reproduces a run bit for bit; another seed gives another run; every policy
//! replays the same workload.

use livecount_sim::{Scenario, ScenarioResult, policy, run};

/// Exercises every random stream: Poisson arrivals, log-normal lengths, short sessions,
/// phases, cancels, disconnects, lost and delayed reports, a death with revival, a wave.
const BUSY: &str = r#"
description = "every random stream at once"
duration_s = 300
seed = 11
counter = "naive"

[arrivals]
target_concurrent = 60

[sessions]
duration = "lognormal"
mean_s = 60
max_s = 150
short_share = 0.3
idle_mean_s = 5
speaking_mean_s = 3
cancel_share = 0.1
disconnect_share = 0.1

[[backends]]
count = 3
max_sessions = 40

[[backends]]
count = 2
size = 2
max_sessions = 80

[reports]
interval_s = 5
loss = 0.1
delay_s = 0.3

[[failures]]
backend = 1
at_s = 100
down_for_s = 40

[[waves]]
at_s = 200
for_s = 20
"#;

fn busy() -> Scenario {
    Scenario::from_toml_str(BUSY, "busy.toml").expect("valid scenario")
}

fn all_policies() -> Vec<String> {
    policy::NAMES.iter().map(|s| (*s).to_owned()).collect()
}

/// The run with its only nondeterministic field, wall-clock time, zeroed.
fn run_all(s: &Scenario) -> ScenarioResult {
    let mut r = run(s, &all_policies(), &mut |_, _| {});
    for p in &mut r.policies {
        p.wall_s = 0.0;
    }
    r
}

#[test]
fn same_seed_reproduces_the_whole_result() {
    let s = busy();
    let (a, b) = (run_all(&s), run_all(&s));
    assert!(a.policies.iter().all(|p| p.summary.arrivals > 0));
    assert_eq!(a, b);
}

#[test]
fn different_seed_gives_a_different_result() {
    let s = busy();
    let mut other = s.clone();
    other.seed = 12;
    let (a, b) = (run_all(&s), run_all(&other));
    for (pa, pb) in a.policies.iter().zip(&b.policies) {
        assert_ne!(pa.summary, pb.summary, "{}", pa.policy);
    }
}

#[test]
fn every_policy_sees_the_same_number_of_arrivals() {
    let r = run_all(&busy());
    let first = r.policies[0].summary.arrivals;
    for p in &r.policies {
        assert_eq!(p.summary.arrivals, first, "{}", p.policy);
    }
}

#[test]
fn policies_that_never_reject_see_identical_session_fates() {
    // No failures and ample slots: no policy rejects or drops, so every arrival is
    // assigned and ends as its plan says, whatever the backend.
    let mut s = busy();
    s.failures.clear();
    for g in &mut s.backends {
        g.max_sessions = 10_000;
    }
    let r = run_all(&s);
    let fates = |i: usize| {
        let mut m = r.policies[i].summary.ended.clone();
        m.remove("backend_lost");
        m
    };
    for (i, p) in r.policies.iter().enumerate() {
        let m = &p.summary;
        assert_eq!((m.rejected, m.dropped), (0, 0), "{}", p.policy);
        assert_eq!(m.ended.get("backend_lost"), Some(&0), "{}", p.policy);
        assert_eq!(
            fates(i),
            fates(0),
            "{} vs {}",
            p.policy,
            r.policies[0].policy
        );
    }
    let m = &r.policies[0].summary.ended;
    for reason in ["completed", "timed_out", "cancelled", "disconnected"] {
        assert!(m[reason] > 0, "the workload has no {reason} session: {m:?}");
    }
}

/// An autoscaled run (every signal × scale-in, the random scale-in's own stream, lost
/// reports, a wave) is reproduced bit for bit by its seed, and differs with another.
#[test]
fn an_autoscaled_run_is_reproduced_by_its_seed() {
    // BUSY without its failure (an autoscaler owns the fleet alone), with an autoscaler.
    let failure = "[[failures]]\nbackend = 1\nat_s = 100\ndown_for_s = 40\n";
    assert!(BUSY.contains(failure));
    let toml = BUSY.replace(failure, "")
        + "[autoscaler]\nmin_replicas = 1\nmax_replicas = 4\nstartup_s = 10\n\
           drain_deadline_s = 20\ncpu_target = 0.3\nsessions_target = 10\n\
           capacity_target = 0.6\n[autoscaler.scale_down]\nstabilization_s = 30\n";
    let s = Scenario::from_toml_str(&toml, "busy-scaled.toml").expect("valid scenario");
    let one = |s: &Scenario| {
        let mut r = run(s, &["p2c_sessions".to_owned()], &mut |_, _| {});
        for p in &mut r.policies {
            p.wall_s = 0.0;
        }
        r
    };
    let (a, b) = (one(&s), one(&s));
    assert_eq!(a.policies.len(), 9);
    let cut = |p: &livecount_sim::PolicyResult| p.summary.autoscale.map_or(0, |a| a.cut);
    assert!(
        a.policies.iter().any(|p| cut(p) > 0),
        "no scale-in cut anything"
    );
    assert_eq!(a, b);
    let mut other = s.clone();
    other.seed += 1;
    let c = one(&other);
    for (pa, pc) in a.policies.iter().zip(&c.policies) {
        assert_ne!(pa.summary, pc.summary, "{}", pa.policy);
    }
}
