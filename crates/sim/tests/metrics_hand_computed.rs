//! Every metric of a run, checked against tiny scenarios computed by hand.
//!
//! The scenarios are made deterministic by construction: the Poisson background has a rate
//! of 1e-9/s (its first arrival is ~1e9 s away, far past any horizon), so every arrival
//! comes from `bursts`, which admit `burst_size` sessions at `burst_every_s`,
//! `2 · burst_every_s`, … strictly before `duration_s`. Sessions have a fixed length and
//! never speak, the CPU curve has no overhead, so a backend's utilisation is exactly
//! `base_utilisation + active · idle_cost / size`. Event times are chosen so that no two
//! events that matter share an instant (ties run in insertion order).

use std::collections::BTreeMap;

use livecount_sim::{PolicyResult, Scenario, run};

/// One backend, bursts of one session every 1.5 s for 2 s (so one burst, at t = 1.5),
/// ten-second fixed sessions that never speak and cost nothing, no CPU overhead, zero
/// latency, samples every second, a health check half a second after a death.
const BASE: &str = r#"
description = "hand-computed"
duration_s = 2
sample_interval_s = 1

[arrivals]
pattern = "bursts"
rate_per_s = 1e-9
burst_every_s = 1.5
burst_size = 1

[sessions]
duration = "fixed"
mean_s = 10
speaking_mean_s = 0
idle_cost = 0

[[backends]]
count = 1
max_sessions = 100
base_utilisation = 0

[cpu]
overhead = 0

[latency]
startup_ms = 0
first_stream_ms = 0

[reports]
health_check_s = 0.5
"#;

fn base() -> Scenario {
    Scenario::from_toml_str(BASE, "base.toml").expect("the base scenario is valid")
}

fn run_one(scenario: &Scenario, policy: &str) -> PolicyResult {
    let mut result = run(scenario, &[policy.to_owned()], &mut |_, _| {});
    assert_eq!(result.policies.len(), 1);
    result.policies.remove(0)
}

/// The `ended` map expected: every reason present, the ones not listed at zero.
fn ends(nonzero: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = [
        "completed",
        "timed_out",
        "cancelled",
        "disconnected",
        "backend_lost",
        "shutdown",
    ]
    .iter()
    .map(|r| ((*r).to_owned(), 0))
    .collect();
    for (r, n) in nonzero {
        *m.get_mut(*r).expect("a known reason") = *n;
    }
    m
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn hard_limit_rejects_arrivals_past_max_sessions() {
    // One burst of 5 at t = 1.5 on a backend with 3 slots: 3 assigned, 2 rejected.
    let mut s = base();
    s.arrivals.burst_size = Some(5);
    s.backends[0].max_sessions = 3;
    let p = run_one(&s, "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (5, 3, 2, 0)
    );
    assert_eq!(m.ended, ends(&[("completed", 3)]));
}

/// Bursts of 2 at t = 2, 4, 6, 8 (duration 10); 100-second sessions; the only backend
/// dies at t = 5 and never comes back.
fn dying_fleet(health_check_s: f64) -> Scenario {
    let mut s = base();
    s.duration_s = 10.0;
    s.arrivals.burst_every_s = Some(2.0);
    s.arrivals.burst_size = Some(2);
    s.sessions.mean_s = 100.0;
    s.reports.health_check_s = health_check_s;
    s.failures = vec![livecount_sim::Failure {
        backend: 0,
        at_s: 5.0,
        down_for_s: None,
    }];
    s
}

#[test]
fn death_ends_sessions_as_backend_lost_and_known_dead_fleet_drops() {
    // t = 2, 4: four sessions assigned. t = 5: the backend dies, all four "backend_lost".
    // t = 5.5: the health check tells the balancer. t = 6, 8: nowhere to send: 4 dropped.
    let p = run_one(&dying_fleet(0.5), "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (8, 4, 0, 4)
    );
    assert_eq!(m.ended, ends(&[("backend_lost", 4)]));
}

#[test]
fn send_to_dead_backend_before_health_check_is_rejected_then_dropped() {
    // Health check at t = 7.5. At t = 6 the first arrival is sent to the dead backend
    // (connection refused: rejected, and the balancer marks it down), the second finds no
    // backend (dropped); at t = 8 both are dropped.
    let p = run_one(&dying_fleet(2.5), "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (8, 4, 1, 3)
    );
    assert_eq!(m.ended, ends(&[("backend_lost", 4)]));
}

#[test]
fn revived_backend_takes_sessions_after_its_health_check() {
    // Dies at 5 (4 lost), known dead at 5.5, t = 6 burst dropped (2), back at 7, known
    // alive at 7.5, t = 8 burst assigned (2, completed at 108).
    let mut s = dying_fleet(0.5);
    s.failures[0].down_for_s = Some(2.0);
    let p = run_one(&s, "round_robin");
    let m = &p.summary;
    assert_eq!(
        (m.arrivals, m.assigned, m.rejected, m.dropped),
        (8, 6, 0, 2)
    );
    assert_eq!(m.ended, ends(&[("backend_lost", 4), ("completed", 2)]));
}

#[test]
fn cancelled_sessions_are_clean_closes_even_for_a_naive_counter() {
    let mut s = base();
    s.arrivals.burst_size = Some(4);
    s.sessions.cancel_share = 1.0;
    s.counter = livecount_sim::CounterKind::Naive;
    let m = run_one(&s, "round_robin").summary;
    assert_eq!(m.ended, ends(&[("cancelled", 4)]));
    assert_eq!(m.counter.naive_final_error, 0);
    assert_eq!(m.counter.tracked_final_error, 0);
}

#[test]
fn disconnected_sessions_leave_ghosts_in_the_naive_counter_only() {
    // Four sessions, all cut without a close frame: the naive counter keeps all four.
    let mut s = base();
    s.arrivals.burst_size = Some(4);
    s.sessions.disconnect_share = 1.0;
    s.counter = livecount_sim::CounterKind::Naive;
    let m = run_one(&s, "round_robin").summary;
    assert_eq!(m.ended, ends(&[("disconnected", 4)]));
    assert_eq!(m.counter.naive_final_error, 4);
    assert_eq!(m.counter.naive_max_error, 4);
    assert_eq!(m.counter.tracked_final_error, 0);
    assert_eq!(m.counter.tracked_max_error, 0);
}

#[test]
fn sessions_longer_than_max_s_time_out() {
    let mut s = base();
    s.arrivals.burst_size = Some(3);
    s.sessions.mean_s = 10.0;
    s.sessions.max_s = 5.0;
    let m = run_one(&s, "round_robin").summary;
    assert_eq!(m.ended, ends(&[("timed_out", 3)]));
}

#[test]
fn assignment_counts_as_overloaded_when_backend_is_above_target_before_it() {
    // u before the k-th session = 0.05 + 0.2 (k − 1): 0.05, 0.25, 0.45, 0.65, 0.85.
    // Target 0.5: the 4th and 5th are overloaded, 2 of 5.
    let mut s = base();
    s.arrivals.burst_size = Some(5);
    s.backends[0].base_utilisation = 0.05;
    s.sessions.idle_cost = 0.2;
    s.capacity.target = 0.5;
    let m = run_one(&s, "round_robin").summary;
    assert_eq!(m.assigned, 5);
    assert_eq!(m.overloaded_assignments, 2);
    assert!(close(m.overloaded_rate, 0.4), "{}", m.overloaded_rate);
}

#[test]
fn overloaded_time_share_peak_utilisation_and_sample_count() {
    // Samples at t = 1..=6 (floor(6 / 1) = 6 of them); one burst of 4 at t = 3.5
    // (the next, 7, is past the horizon). u = 0.05 before, 0.05 + 4 · 0.2 = 0.85 after:
    // samples at 4, 5, 6 are above the 0.5 target, 3 of 6 backend-samples. The burst's
    // 4th session arrives at u = 0.05 + 3 · 0.2 = 0.65 > 0.5: one overloaded assignment.
    let mut s = base();
    s.duration_s = 6.0;
    s.arrivals.burst_every_s = Some(3.5);
    s.arrivals.burst_size = Some(4);
    s.backends[0].base_utilisation = 0.05;
    s.sessions.idle_cost = 0.2;
    s.capacity.target = 0.5;
    let p = run_one(&s, "round_robin");
    let m = &p.summary;
    let times: Vec<f64> = p.spread.iter().map(|x| x.t).collect();
    assert_eq!(times, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(close(m.overloaded_time_share, 0.5), "{m:?}");
    assert!(close(m.peak_utilisation, 0.85), "{m:?}");
    assert_eq!(m.overloaded_assignments, 1);
}

#[test]
fn spread_samples_of_two_backends_under_round_robin() {
    // Two backends, round robin, bursts of 3 at t = 1.5, 3.0, 4.5, samples at
    // 1.25, 2.5, 3.75, 5.0 (= floor(5 / 1.25) = 4 samples, all exact in binary).
    //   1.5: picks 0,1,0 → [2,1];  3.0: picks 1,0,1 → [3,3];  4.5: picks 0,1,0 → [5,4].
    // Samples: [0,0] [2,1] [3,3] [5,4]
    //   max  0 2 3 5 | min 0 1 3 4 | mean 0 1.5 3 4.5
    //   cv   0, 0.5/1.5 = 1/3, 0, 0.5/4.5 = 1/9   → mean (4/9)/4 = 1/9
    //   range 0 1 0 1 → mean 0.5, max 1
    //   peak ratio 1 (empty fleet), 2/1.5, 1, 5/4.5 → mean (9+12+9+10)/9/4 = 10/9
    //   utilisation at 5.0: 0.02 + 5 · 0.002 = 0.03 and 0.028 → max 0.03, mean 0.029
    let mut s = base();
    s.duration_s = 5.0;
    s.sample_interval_s = Some(1.25);
    s.arrivals.burst_every_s = Some(1.5);
    s.arrivals.burst_size = Some(3);
    s.sessions.mean_s = 100.0;
    s.sessions.idle_cost = 0.002;
    s.backends[0].count = 2;
    s.backends[0].base_utilisation = 0.02;
    let p = run_one(&s, "round_robin");
    let got: Vec<(f64, u64, u64, f64)> = p
        .spread
        .iter()
        .map(|x| (x.t, x.max, x.min, x.mean))
        .collect();
    assert_eq!(
        got,
        [
            (1.25, 0, 0, 0.0),
            (2.5, 2, 1, 1.5),
            (3.75, 3, 3, 3.0),
            (5.0, 5, 4, 4.5)
        ]
    );
    let cvs: Vec<f64> = p.spread.iter().map(|x| x.cv).collect();
    for (got, want) in cvs.iter().zip([0.0, 1.0 / 3.0, 0.0, 1.0 / 9.0]) {
        assert!(close(*got, want), "cv {cvs:?}");
    }
    let last = p.spread.last().expect("four samples");
    assert!(close(last.max_utilisation, 0.03), "{last:?}");
    assert!(close(last.mean_utilisation, 0.029), "{last:?}");
    let m = &p.summary;
    assert!(close(m.spread_cv_mean, 1.0 / 9.0), "{m:?}");
    assert!(close(m.spread_range_mean, 0.5), "{m:?}");
    assert_eq!(m.spread_range_max, 1);
    assert!(close(m.spread_peak_ratio_mean, 10.0 / 9.0), "{m:?}");
    assert!(close(m.peak_utilisation, 0.03), "{m:?}");
}

#[test]
fn spread_series_has_one_sample_per_interval_within_duration() {
    // floor(duration / interval) samples, at interval, 2 · interval, …; the sessions
    // (100 s) outlive the horizon, so the run is still going at every sample time.
    for (duration, interval) in [(10.0, 1.0), (10.0, 3.0), (7.5, 2.5), (1.0, 0.25)] {
        let mut s = base();
        s.duration_s = duration;
        s.sample_interval_s = Some(interval);
        s.arrivals.burst_every_s = Some(0.37 * duration);
        s.sessions.mean_s = 100.0;
        let p = run_one(&s, "random");
        let expected = (duration / interval).floor() as usize;
        assert_eq!(
            p.spread.len(),
            expected,
            "duration {duration}, interval {interval}"
        );
        for (k, x) in p.spread.iter().enumerate() {
            assert!(close(x.t, (k + 1) as f64 * interval), "{:?}", p.spread);
        }
    }
}

#[test]
fn spread_series_keeps_sampling_after_the_fleet_empties_before_duration() {
    // One burst at t = 6 (the next, 12, is past the 10 s horizon) of one 1-second session,
    // which ends at 7. Samples are due at 1, 2, …, 10 and must all be taken even though
    // the fleet is empty from 7 on (a run that stopped at the last end kept 1..=6 only).
    let mut s = base();
    s.duration_s = 10.0;
    s.arrivals.burst_every_s = Some(6.0);
    s.sessions.mean_s = 1.0;
    let p = run_one(&s, "round_robin");
    let times: Vec<f64> = p.spread.iter().map(|x| x.t).collect();
    assert_eq!(times, (1..=10).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn zero_base_latency_gives_zero_percentiles() {
    let mut s = base();
    s.arrivals.burst_size = Some(50);
    s.backends[0].base_utilisation = 0.5;
    let m = run_one(&s, "round_robin").summary;
    for p in [m.startup_ms, m.first_stream_ms] {
        assert_eq!((p.p50, p.p95, p.p99, p.max), (0.0, 0.0, 0.0, 0.0));
    }
}

/// 2000 sessions in one burst on one backend held at utilisation `u` (sessions cost 0).
fn latency_at(u: f64) -> livecount_sim::Summary {
    let mut s = base();
    s.arrivals.burst_size = Some(2000);
    s.backends[0].max_sessions = 10_000;
    s.backends[0].base_utilisation = u;
    s.latency.startup_ms = 40.0;
    s.latency.first_stream_ms = 250.0;
    run_one(&s, "round_robin").summary
}

#[test]
fn latency_percentiles_follow_the_exponential_and_scale_with_one_over_one_minus_u() {
    let cold = latency_at(0.0);
    // Exponential, mean 40 ms: p50 = 40 ln 2 ≈ 27.7, p95 = 40 ln 20 ≈ 119.8.
    let st = cold.startup_ms;
    assert!((st.p50 - 27.7).abs() < 0.15 * 27.7, "{st:?}");
    assert!((st.p95 - 119.8).abs() < 0.15 * 119.8, "{st:?}");
    assert!(
        st.p50 <= st.p95 && st.p95 <= st.p99 && st.p99 <= st.max,
        "{st:?}"
    );
    let fs = cold.first_stream_ms;
    assert!(
        fs.p50 > st.p50 && fs.p99 > st.p99,
        "first stream includes startup: {fs:?}"
    );
    // At u = 0.9 each session draws the same variate with a mean 1 / (1 − 0.9) = 10×.
    let hot = latency_at(0.9);
    for (c, h) in [
        (cold.startup_ms, hot.startup_ms),
        (cold.first_stream_ms, hot.first_stream_ms),
    ] {
        for (a, b) in [
            (c.p50, h.p50),
            (c.p95, h.p95),
            (c.p99, h.p99),
            (c.max, h.max),
        ] {
            assert!((b / a - 10.0).abs() < 1e-4, "cold {c:?} hot {h:?}");
        }
    }
}
