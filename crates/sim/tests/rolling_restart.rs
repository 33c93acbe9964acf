//! The rolling restart, on tiny scenarios computed by hand: `cut` ends every session open
//! on a backend at its restart; `drain` stops sending new sessions there (refusing the ones
//! sent before the balancer knows), lets the open ones end on their own and cuts exactly
//! those still open at the deadline. Every cut client reconnects `reconnect_after_s` later
//! through the balancer (unless `reconnect_share = 0`) and is placed like an arrival. The
//! reconnected parts' end times are checked in the engine's own tests (`engine/restart.rs`).
//!
//! Deterministic by construction, as in `metrics_hand_computed.rs`: every arrival comes
//! from `bursts` of 2 at t = 1, 2, …, 9, sessions have a fixed length, reports are all lost
//! (the balancer learns of a drain only from its health check or a refusal), and no two
//! events that matter share an instant. Two backends, round robin: a burst goes to backend
//! 0 then 1 while both are up, both to the one up otherwise.

use std::collections::BTreeMap;

use livecount_sim::{PolicyResult, RestartMode, RestartSummary, Scenario, policy, run};

/// Sessions of `length_s`; backend 0 restarts at 2.6 s, is away 1 s, backend 1 restarts
/// 0.75 s after it is back; a health check notices a change 0.3 s after it. `keys` are more
/// `[rolling_restart]` keys (cut clients reconnect 0.5 s later unless they say otherwise).
fn scenario(length_s: f64, mode: &str, keys: &str) -> Scenario {
    let text = format!(
        r#"
description = "hand-computed rolling restart"
duration_s = 10

[arrivals]
pattern = "bursts"
rate_per_s = 1e-9
burst_every_s = 1
burst_size = 2

[sessions]
duration = "fixed"
mean_s = {length_s:?}
speaking_mean_s = 0

[[backends]]
count = 2

[latency]
startup_ms = 0
first_stream_ms = 0

[reports]
loss = 1
health_check_s = 0.3

[rolling_restart]
start_s = 2.6
mode = "{mode}"
restart_s = 1
gap_s = 0.75
reconnect_after_s = 0.5
{keys}
"#
    );
    Scenario::from_toml_str(&text, "rolling.toml").expect("the scenario is valid")
}

fn run_one(s: &Scenario, policy: &str) -> PolicyResult {
    run(s, &[policy.to_owned()], &mut |_, _| {})
        .policies
        .remove(0)
}

fn restart(p: &PolicyResult) -> RestartSummary {
    p.summary.restart.expect("a rolling restart was run")
}

/// The nonzero counts of `ended`.
fn ended(p: &PolicyResult) -> BTreeMap<&str, u64> {
    p.summary
        .ended
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| (r.as_str(), *n))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn cut_ends_every_session_open_on_the_backend_at_its_restart() {
    // Clients that do not reconnect. 2.2 s sessions. t = 1, 2: one each to b0 and b1.
    // 2.6: b0 restarts with both of its sessions open (ending 3.2, 4.2): 2 cut. Known down
    // 2.9, back 3.6, known up 3.9. t = 3: both to b1 (5.2). 3.2, 4.2: b1's first two end.
    // t = 4: b0, b1 (6.2). 4.35: b1 restarts with t = 3's two and t = 4's one open: 3 cut.
    // Back 5.35.
    let p = run_one(&scenario(2.2, "cut", "reconnect_share = 0"), "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 18, 0, 0)
    );
    assert_eq!(
        ended(&p),
        BTreeMap::from([("completed", 13), ("shutdown", 5)])
    );
    let r = restart(&p);
    assert_eq!((r.cut, r.reconnects, r.refused), (5, 0, 0));
    assert!(close(r.window_s, 5.35 - 2.6), "{r:?}");
    assert_eq!(
        r.window_assigned, 6,
        "t = 3, 4, 5 inside [2.6, 5.35]: {r:?}"
    );
}

#[test]
fn every_cut_client_reconnects_once_and_is_placed_like_an_arrival() {
    // As above, clients reconnecting 0.5 s after their cut. 2.6: b0's two are cut (0.6 s
    // and 1.6 s left); 3.1: both reconnect, to b1 (the only one up), ending 3.7 and 4.7.
    // 4.35: b1 restarts with four open: t = 3's two, t = 4's second and the 1.6 s one,
    // cut a second time (0.35 s left). 4.85: all four reconnect, to b0. 6 cuts, 6
    // reconnects, every one placed: assigned 18 + 6, and every part ends once.
    let p = run_one(&scenario(2.2, "cut", ""), "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 24, 0, 0),
        "reconnects are not arrivals, but are assigned"
    );
    assert_eq!(
        ended(&p),
        BTreeMap::from([("completed", 18), ("shutdown", 6)])
    );
    let r = restart(&p);
    assert_eq!((r.cut, r.reconnects, r.refused), (6, 6, 0));
    assert_eq!(
        r.window_assigned, 12,
        "t = 3, 4, 5 and the six reconnects inside [2.6, 5.35]: {r:?}"
    );
}

#[test]
fn a_reconnect_sent_to_a_restarting_backend_before_the_balancer_knows_is_refused() {
    // Reconnecting 1.9 s after the cut. 2.6: b0's two are cut; 4.35: b1's three (t = 3's
    // two, t = 4's second). 4.5: b0's two reconnect: the first to b0 (back and known up),
    // the second, round robin, to b1, away since 4.35 but not known down until 4.65:
    // refused, like an arrival would be, and gone. 6.25: b1's three reconnect, placed.
    let mut s = scenario(2.2, "cut", "");
    s.rolling_restart.as_mut().unwrap().reconnect_after_s = 1.9;
    let p = run_one(&s, "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 22, 1, 0)
    );
    assert_eq!(
        ended(&p),
        BTreeMap::from([("completed", 17), ("shutdown", 5)])
    );
    let r = restart(&p);
    assert_eq!((r.cut, r.reconnects, r.refused), (5, 5, 1));
}

#[test]
fn a_drain_longer_than_every_session_cuts_none_and_sends_nothing_to_the_drainer() {
    // 1.4 s sessions, 2 s deadline. 2.6: b0 drains with t = 2's session (ending 3.4);
    // known at 2.9. t = 3: both to b1. 3.4: b0 is empty and exits at once (before its
    // deadline, 4.6), back 4.4, known up 4.7. t = 4: both to b1. t = 5: b0, b1 (6.4).
    // 5.15: b1 drains with t = 5's session; known at 5.45. t = 6: both to b0. 6.4: b1 is
    // empty, exits, back 7.4. Nothing cut, nothing refused.
    let p = run_one(
        &scenario(1.4, "drain", "drain_deadline_s = 2.0"),
        "round_robin",
    );
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 18, 0, 0)
    );
    assert_eq!(ended(&p), BTreeMap::from([("completed", 18)]));
    let r = restart(&p);
    assert_eq!((r.cut, r.reconnects, r.refused), (0, 0, 0));
    assert!(close(r.window_s, 7.4 - 2.6), "{r:?}");
}

#[test]
fn a_session_sent_to_a_drainer_before_the_balancer_knows_is_refused() {
    // As above with a 0.7 s health check. 2.6: b0 drains, known at 3.3. t = 3: the first
    // arrival goes to b0 and is refused (the proxy marks it down), the second to b1.
    // 3.4: b0 exits; back 4.4, known up 5.1. t = 4, 5: all to b1 (5.4, 6.4). 5.15: b1
    // drains with t = 4's and t = 5's sessions; known at 5.85, before t = 6: both to b0.
    // 6.4: b1 exits. One refused, none cut.
    let mut s = scenario(1.4, "drain", "drain_deadline_s = 2.0");
    s.reports.health_check_s = 0.7;
    let p = run_one(&s, "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 17, 1, 0)
    );
    assert_eq!(ended(&p), BTreeMap::from([("completed", 17)]));
    assert_eq!((restart(&p).cut, restart(&p).refused), (0, 1));
}

#[test]
fn a_drain_shorter_than_the_sessions_cuts_exactly_those_still_open_at_the_deadline() {
    // 2.2 s sessions, 1.2 s deadline. 2.6: b0 drains with t = 1's (ending 3.2) and t = 2's
    // (4.2) sessions; 3.2: the first ends on its own; 3.8: the deadline cuts the second
    // (0.4 s left). Back 4.8, known up 5.1. t = 3, 4, 5: all to b1 (5.2, 6.2, 7.2); 4.3:
    // the cut one reconnects, to b1 (4.7). 5.55: b1 drains with t = 4's and t = 5's two
    // each; 6.2: t = 4's end; 6.75: t = 5's two are cut; 7.25: they reconnect, to b0.
    // 3 cut, 3 reconnected and completed.
    let p = run_one(
        &scenario(2.2, "drain", "drain_deadline_s = 1.2"),
        "round_robin",
    );
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (18, 21, 0, 0)
    );
    assert_eq!(
        ended(&p),
        BTreeMap::from([("completed", 18), ("shutdown", 3)])
    );
    let r = restart(&p);
    assert_eq!((r.cut, r.reconnects, r.refused), (3, 3, 0));
    assert!(close(r.window_s, 7.75 - 2.6), "{r:?}");
}

#[test]
fn every_policy_ends_each_session_once_and_never_assigns_to_a_drainer() {
    // The engine refuses any session sent to a draining backend, so "never assigned there"
    // is: every refusal is counted, and arrivals are conserved. With sessions longer than
    // the run, every session on a restarted backend is either cut or was sent after it came
    // back, so nothing is lost or ended twice whatever the policy.
    for mode in ["cut", "drain"] {
        let keys = if mode == "drain" {
            "drain_deadline_s = 1.2"
        } else {
            ""
        };
        let s = scenario(50.0, mode, keys);
        assert_eq!(
            s.rolling_restart.as_ref().unwrap().mode,
            if mode == "cut" {
                RestartMode::Cut
            } else {
                RestartMode::Drain
            }
        );
        for name in policy::NAMES {
            let p = run_one(&s, name);
            let m = &p.summary;
            let r = restart(&p);
            assert_eq!(
                m.arrivals + r.reconnects,
                m.assigned + m.rejected + m.dropped,
                "{name} {mode}"
            );
            assert_eq!(m.ended.values().sum::<u64>(), m.assigned, "{name} {mode}");
            assert_eq!(m.counter.tracked_max_error, 0, "{name} {mode}");
            assert_eq!(r.cut, m.ended["shutdown"], "{name} {mode}");
            assert_eq!(
                r.reconnects, r.cut,
                "{name} {mode}: every cut client is back"
            );
            assert!(r.refused <= m.rejected, "{name} {mode}");
            assert!(
                r.cut > 0,
                "{name} {mode}: 50 s sessions are open at every restart"
            );
        }
    }
}

#[test]
fn without_a_rolling_restart_there_is_no_restart_summary() {
    let mut s = scenario(2.2, "cut", "");
    s.rolling_restart = None;
    assert_eq!(run_one(&s, "round_robin").summary.restart, None);
}
