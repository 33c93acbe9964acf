//! Each routing policy's choice on hand-built balancer views.

use livecount_sim::policy::{self, BackendView, Policy, Report};
use livecount_sim::{Scenario, SimRng};

/// Three backends, default capacity parameters (target 0.8, window = interval = 10 s).
fn scenario() -> Scenario {
    Scenario::from_toml_str(
        "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 1\n\
         [sessions]\nduration = 'fixed'\nmean_s = 10\n[[backends]]\ncount = 3",
        "policies.toml",
    )
    .expect("valid scenario")
}

fn make(name: &str) -> Box<dyn Policy> {
    policy::by_name(name, &scenario()).expect("a known policy")
}

fn view(alive: bool) -> BackendView {
    BackendView {
        alive,
        max_sessions: 100,
        report: None,
        sent_since_report: 0,
    }
}

fn report(active: u64, utilisation: f64, arrivals_in_window: u64) -> Report {
    Report {
        taken_at: 10.0,
        active,
        utilisation,
        arrivals_in_window,
        window_s: 10.0,
    }
}

fn reported(active: u64, utilisation: f64, arrivals: u64) -> BackendView {
    BackendView {
        report: Some(report(active, utilisation, arrivals)),
        ..view(true)
    }
}

/// `draws` picks at t = 11 s; counts per backend.
fn counts(p: &mut dyn Policy, views: &[BackendView], draws: usize) -> Vec<usize> {
    let mut rng = SimRng::new(7);
    let mut c = vec![0; views.len()];
    for _ in 0..draws {
        let i = p
            .pick(11.0, views, &mut rng)
            .expect("some backend is alive");
        c[i] += 1;
    }
    c
}

/// Pearson's χ² of observed `counts` against `expected` counts.
fn chi_square(counts: &[usize], expected: [f64; 3]) -> f64 {
    counts
        .iter()
        .zip(expected)
        .map(|(&o, e)| (o as f64 - e).powi(2) / e)
        .sum()
}

#[test]
fn every_policy_returns_none_when_every_backend_is_dead() {
    let views = vec![view(false); 3];
    let mut rng = SimRng::new(1);
    for name in policy::NAMES {
        let mut p = make(name);
        assert_eq!(p.pick(1.0, &views, &mut rng), None, "{name}");
    }
}

#[test]
fn every_policy_avoids_dead_backends() {
    // Backend 1 is dead but looks best by every measure.
    let views = [
        reported(20, 0.6, 8),
        BackendView {
            alive: false,
            ..reported(0, 0.01, 0)
        },
        reported(25, 0.5, 9),
    ];
    for name in policy::NAMES {
        let mut p = make(name);
        for (i, v) in views.iter().enumerate() {
            if let Some(r) = &v.report {
                p.on_report(i, r, 10.0);
            }
        }
        let c = counts(p.as_mut(), &views, 500);
        assert_eq!(c[1], 0, "{name}: {c:?}");
    }
}

#[test]
fn round_robin_cycles_in_index_order_and_skips_dead() {
    let mut p = make("round_robin");
    let mut rng = SimRng::new(1);
    let all = vec![view(true); 3];
    let picks: Vec<usize> = (0..6)
        .map(|_| p.pick(0.0, &all, &mut rng).unwrap())
        .collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    let one_dead = [view(true), view(false), view(true)];
    let picks: Vec<usize> = (0..4)
        .map(|_| p.pick(0.0, &one_dead, &mut rng).unwrap())
        .collect();
    assert_eq!(picks, [0, 2, 0, 2]);
}

#[test]
fn random_spreads_over_alive_backends_only() {
    let mut p = make("random");
    let views = [view(true), view(false), view(true)];
    let c = counts(p.as_mut(), &views, 3000);
    assert_eq!(c[1], 0);
    assert!(c[0] > 1200 && c[2] > 1200, "{c:?}");
}

#[test]
fn least_request_picks_fewest_window_arrivals_plus_sent_since_report() {
    // Scores 5 + 0, 2 + 2, 3 + 3: backend 1.
    let mut views = [
        reported(0, 0.5, 5),
        reported(0, 0.5, 2),
        reported(0, 0.5, 3),
    ];
    views[1].sent_since_report = 2;
    views[2].sent_since_report = 3;
    let c = counts(make("least_request").as_mut(), &views, 50);
    assert_eq!(c, [0, 50, 0]);
    // One more send to backend 1 makes it 5 and ties it with 0; 2 stays worse.
    views[1].sent_since_report = 3;
    let c = counts(make("least_request").as_mut(), &views, 400);
    assert_eq!(c[2], 0, "{c:?}");
    assert!(c[0] > 100 && c[1] > 100, "ties broken at random: {c:?}");
}

#[test]
fn least_cpu_picks_lowest_reported_utilisation() {
    let views = [
        reported(1, 0.5, 0),
        reported(50, 0.2, 0),
        reported(0, 0.9, 0),
    ];
    assert_eq!(counts(make("least_cpu").as_mut(), &views, 50), [0, 50, 0]);
    // A backend without a report reads as idle.
    let views = [reported(1, 0.5, 0), reported(50, 0.2, 0), view(true)];
    assert_eq!(counts(make("least_cpu").as_mut(), &views, 50), [0, 0, 50]);
}

#[test]
fn static_slots_picks_most_free_slots() {
    // Free: 10 − 5 = 5, 20 − (10 + 2) = 8, 10 − 3 = 7.
    let mut views = [
        reported(5, 0.0, 0),
        reported(10, 0.9, 0),
        reported(3, 0.0, 0),
    ];
    views[0].max_sessions = 10;
    views[1].max_sessions = 20;
    views[1].sent_since_report = 2;
    views[2].max_sessions = 10;
    assert_eq!(
        counts(make("static_slots").as_mut(), &views, 50),
        [0, 50, 0]
    );
}

#[test]
fn p2c_sessions_with_two_alive_backends_picks_fewer_estimated_active() {
    // Estimated active: 4 + 3 = 7 against 6 + 0 = 6 (backend 0 is dead).
    let mut views = [view(false), reported(4, 0.1, 0), reported(6, 0.9, 0)];
    views[1].sent_since_report = 3;
    assert_eq!(
        counts(make("p2c_sessions").as_mut(), &views, 200),
        [0, 0, 200]
    );
    views[1].sent_since_report = 1;
    assert_eq!(
        counts(make("p2c_sessions").as_mut(), &views, 200),
        [0, 200, 0]
    );
}

#[test]
fn grpc_wrr_picks_in_proportion_to_qps_over_utilisation() {
    // Weights (active / window) / utilisation: 1 / 0.5 = 2, 1 / 0.25 = 4, 3 / 0.5 = 6,
    // so shares 1 : 2 : 3.
    let views = [
        reported(10, 0.5, 0),
        reported(10, 0.25, 0),
        reported(30, 0.5, 0),
    ];
    let mut p = make("grpc_wrr");
    for (i, v) in views.iter().enumerate() {
        p.on_report(i, v.report.as_ref().unwrap(), 10.0);
    }
    let n = 60_000;
    let c = counts(p.as_mut(), &views, n);
    let expected = [n as f64 / 6.0, n as f64 / 3.0, n as f64 / 2.0];
    let chi2 = chi_square(&c, expected);
    // Two degrees of freedom: P(χ² > 18.4) = 1e-4.
    assert!(chi2 < 18.4, "counts {c:?}, χ² = {chi2}");
}

#[test]
fn grpc_wrr_gives_unweighted_backends_the_mean_weight() {
    // Weights 2 and 6, backend 2 unknown → mean 4: shares 2 : 6 : 4.
    let views = [reported(10, 0.5, 0), reported(30, 0.5, 0), view(true)];
    let mut p = make("grpc_wrr");
    for (i, v) in views.iter().take(2).enumerate() {
        p.on_report(i, v.report.as_ref().unwrap(), 10.0);
    }
    let n = 60_000;
    let c = counts(p.as_mut(), &views, n);
    let expected = [n as f64 / 6.0, n as f64 / 2.0, n as f64 / 3.0];
    let chi2 = chi_square(&c, expected);
    assert!(chi2 < 18.4, "counts {c:?}, χ² = {chi2}");
}

/// Backend 0 runs above target (no headroom), 1 has plenty, 2 is dead but looks idle.
fn hybrid_views() -> [BackendView; 3] {
    [
        reported(10, 0.95, 0),
        reported(10, 0.2, 0),
        BackendView {
            alive: false,
            ..reported(0, 0.0, 0)
        },
    ]
}

fn fed(name: &str, views: &[BackendView]) -> Box<dyn Policy> {
    let mut p = make(name);
    for (i, v) in views.iter().enumerate() {
        p.on_report(i, v.report.as_ref().unwrap(), 10.0);
    }
    p
}

#[test]
fn hybrid_p2c_prefers_the_backend_with_headroom() {
    let views = hybrid_views();
    let c = counts(fed("hybrid_p2c", &views).as_mut(), &views, 300);
    assert_eq!(c, [0, 300, 0]);
}

#[test]
fn hybrid_weighted_prefers_the_backend_with_headroom() {
    let views = hybrid_views();
    let c = counts(fed("hybrid_weighted", &views).as_mut(), &views, 300);
    assert_eq!(c[2], 0, "dead backend picked: {c:?}");
    assert!(c[1] > 9 * c[0], "{c:?}");
}
