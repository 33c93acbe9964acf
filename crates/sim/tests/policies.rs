//! Each routing policy's choice on hand-built balancer views.

use livecount_sim::policy::{self, BackendView, Policy, Probe, Report};
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
        open: 0,
    }
}

fn report(active: u64, utilisation: f64, arrivals_in_window: u64) -> Report {
    Report {
        taken_at: 10.0,
        active,
        utilisation,
        arrivals_in_window,
        window_s: 10.0,
        utilisation_recent: utilisation,
    }
}

fn reported(active: u64, utilisation: f64, arrivals: u64) -> BackendView {
    BackendView {
        report: Some(report(active, utilisation, arrivals)),
        ..view(true)
    }
}

/// Tells `p` every view, as the engine does after each change.
fn prime(p: &mut dyn Policy, views: &[BackendView], rng: &mut SimRng) {
    for (i, v) in views.iter().enumerate() {
        p.on_view(i, v, 10.5, rng);
    }
}

/// `draws` picks at t = 11 s (after telling `p` the views); counts per backend.
fn counts(p: &mut dyn Policy, views: &[BackendView], draws: usize) -> Vec<usize> {
    let mut rng = SimRng::new(7);
    prime(p, views, &mut rng);
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
        prime(p.as_mut(), &views, &mut rng);
        assert_eq!(p.pick(1.0, &views, &mut rng), None, "{name}");
        // Probes go to live backends only.
        let mut out = Vec::new();
        p.probe(1.0, &views, &mut rng, &mut out);
        assert!(out.is_empty(), "{name}: {out:?}");
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
    // A tie is broken when the scores are set (each pick then changes a score), so fresh
    // policies, not repeated picks, show it is broken at random.
    views[1].sent_since_report = 3;
    let mut c = [0; 3];
    for seed in 0..400 {
        let mut p = make("least_request");
        let mut rng = SimRng::new(seed);
        prime(p.as_mut(), &views, &mut rng);
        c[p.pick(11.0, &views, &mut rng).unwrap()] += 1;
    }
    assert_eq!(c[2], 0, "{c:?}");
    assert!(c[0] > 150 && c[1] > 150, "ties broken at random: {c:?}");
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

#[test]
fn hybrid_weighted_follows_every_view_change_between_refreshes() {
    // Both alive backends have headroom; the weights are refreshed at the first pick.
    let dead = BackendView {
        alive: false,
        ..reported(0, 0.0, 0)
    };
    let mut views = [reported(10, 0.4, 0), reported(10, 0.2, 0), dead];
    let mut p = fed("hybrid_weighted", &views);
    let c = counts(p.as_mut(), &views, 200);
    assert!(c[0] > 0 && c[1] > 0 && c[2] == 0, "{c:?}");
    let mut rng = SimRng::new(3);
    let picks = |p: &mut dyn Policy, views: &[BackendView], rng: &mut SimRng| {
        let mut c = [0; 3];
        for _ in 0..200 {
            c[p.pick(11.2, views, rng).expect("one has room")] += 1;
        }
        c
    };
    // Backend 1 filled by sends since its report: no room left, within the same second.
    views[1].sent_since_report = 1000;
    p.on_view(1, &views[1], 11.1, &mut rng);
    assert_eq!(picks(p.as_mut(), &views, &mut rng), [200, 0, 0]);
    // Backend 1 emptied again, backend 0 believed dead.
    views[1].sent_since_report = 0;
    views[0].alive = false;
    p.on_view(0, &views[0], 11.1, &mut rng);
    p.on_view(1, &views[1], 11.1, &mut rng);
    assert_eq!(picks(p.as_mut(), &views, &mut rng), [0, 200, 0]);
}

#[test]
fn least_request_bias_divides_the_weight_by_open_streams_plus_one() {
    // Equal weights: plain P2C on this proxy's open streams.
    let mut views = [view(true), view(true), view(false)];
    (views[0].open, views[1].open) = (3, 2);
    let c = counts(make("least_request_bias").as_mut(), &views, 200);
    assert_eq!(c, [0, 200, 0]);
    // Reports and sends since do not matter: only what this proxy has open.
    views[1].report = Some(report(0, 0.0, 0));
    views[0].report = Some(report(90, 0.99, 90));
    views[0].sent_since_report = 50;
    assert_eq!(
        counts(make("least_request_bias").as_mut(), &views, 200),
        [0, 200, 0]
    );
    // Weight 300 ÷ (4 + 1) = 60 beats 100 ÷ (1 + 1) = 50.
    let mut views = [view(true), view(true), view(false)];
    (views[0].max_sessions, views[0].open) = (100, 1);
    (views[1].max_sessions, views[1].open) = (300, 4);
    assert_eq!(
        counts(make("least_request_bias").as_mut(), &views, 200),
        [0, 200, 0]
    );
    views[1].open = 6; // 300 ÷ 7 ≈ 42.9 < 50
    assert_eq!(
        counts(make("least_request_bias").as_mut(), &views, 200),
        [200, 0, 0]
    );
}

#[test]
fn cpu_threshold_spreads_over_workers_below_the_threshold() {
    let mut views = [reported(5, 0.5, 0), reported(1, 0.5, 0), view(true)];
    // Backend 0's recent load is 0.75: unavailable, whatever its longer mean says.
    views[0].report.as_mut().unwrap().utilisation_recent = 0.75;
    views[1].report.as_mut().unwrap().utilisation_recent = 0.74;
    let c = counts(make("cpu_threshold").as_mut(), &views, 3000);
    assert_eq!(c[0], 0, "{c:?}");
    assert!(
        c[1] > 1300 && c[2] > 1300,
        "uniform over the available: {c:?}"
    );
    // Nobody available: the session is not placed.
    views[1].report.as_mut().unwrap().utilisation_recent = 0.9;
    views[2].alive = false;
    let mut p = make("cpu_threshold");
    let mut rng = SimRng::new(2);
    prime(p.as_mut(), &views, &mut rng);
    assert_eq!(p.pick(11.0, &views, &mut rng), None);
    // A fresh report below the threshold makes a worker available again.
    views[0].report.as_mut().unwrap().utilisation_recent = 0.1;
    p.on_view(0, &views[0], 12.0, &mut rng);
    assert_eq!(p.pick(12.0, &views, &mut rng), Some(0));
}

#[test]
fn peak_ewma_weighs_latency_by_open_streams_and_jumps_to_peaks() {
    let views = [view(true), view(true), view(false)];
    let mut p = make("peak_ewma_p2c");
    assert!(p.observes_latency());
    // 100 ms against 1 000 ms: backend 0, as long as its open streams stay below 10.
    for t in 0..20 {
        p.on_latency(0, 100.0, f64::from(t) * 0.5);
        p.on_latency(1, 1000.0, f64::from(t) * 0.5);
    }
    assert_eq!(counts(p.as_mut(), &views, 100), [100, 0, 0]);
    let mut busy = views.clone();
    busy[0].open = 20; // cost ≈ 100 × 21 > 1 000 × 1
    assert_eq!(counts(p.as_mut(), &busy, 100), [0, 100, 0]);
    // One slow response on backend 0 is a peak: its estimate jumps at once.
    p.on_latency(0, 5000.0, 11.0);
    assert_eq!(counts(p.as_mut(), &views, 100), [0, 100, 0]);
}

#[test]
fn peak_ewma_decays_towards_lower_latencies_over_its_window() {
    let views = [view(true), view(true), view(false)];
    let mut p = make("peak_ewma_p2c");
    p.on_latency(0, 1000.0, 0.0);
    p.on_latency(1, 400.0, 0.0);
    // Fast replies from backend 0 pull its 1 000 ms down with weight 1 − e^(−Δt/10 s):
    // after 1 s still above 400 ms, after 30 s well below.
    p.on_latency(0, 100.0, 1.0); // 1000·e^−0.1 + 100·(1 − e^−0.1) ≈ 914
    assert_eq!(counts(p.as_mut(), &views, 50), [0, 50, 0]);
    let mut p = make("peak_ewma_p2c");
    p.on_latency(0, 1000.0, 0.0);
    p.on_latency(1, 400.0, 11.0);
    p.on_latency(0, 100.0, 11.0); // ≈ 1000·e^−1.1 + 100·(1 − e^−1.1) ≈ 400 − ε
    assert_eq!(counts(p.as_mut(), &views, 50), [50, 0, 0]);
}

fn probe(rif: u64, latency_ms: f64) -> Probe {
    Probe {
        taken_at: 10.8,
        rif,
        latency_ms: Some(latency_ms),
    }
}

/// Probes (backend, RIF, latency) for backends 0, 1, 2 into a Prequal policy.
fn probed(name: &str, probes: [(u64, f64); 3]) -> Box<dyn Policy> {
    let mut p = make(name);
    for (b, (rif, ms)) in probes.into_iter().enumerate() {
        p.on_probe(b, &probe(rif, ms), 10.9);
    }
    p
}

#[test]
fn prequal_picks_the_fastest_cold_probe_by_its_rif_quantile() {
    let views = vec![view(true); 3];
    let probes = [(10, 50.0), (2, 200.0), (3, 100.0)];
    let mut rng = SimRng::new(1);
    // q = 0.84: the 3rd of 3 RIFs (10) is the threshold, nobody is hot: fastest wins.
    let mut p = probed("prequal_hcl", probes);
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(0));
    // q = 0.6: the 2nd RIF (3) is the threshold, backend 0 (10) is hot: fastest cold one.
    let mut p = probed("prequal_hcl_q60", probes);
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(2));
    // A tie on latency goes to the lower RIF.
    let mut p = probed("prequal_hcl", [(4, 80.0), (2, 80.0), (3, 90.0)]);
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(1));
}

#[test]
fn prequal_discards_old_probes_and_dead_backends_and_is_random_below_two() {
    let views = vec![view(true); 3];
    let probes = [(1, 500.0), (1, 10.0), (1, 900.0)];
    // At 11.85 s every probe (taken at 10.8 s) is over 1 s old: random picks.
    let mut p = probed("prequal_hcl", probes);
    let mut rng = SimRng::new(4);
    let mut seen = [0; 3];
    for _ in 0..300 {
        seen[p.pick(11.85, &views, &mut rng).unwrap()] += 1;
    }
    assert!(
        seen.iter().all(|&c| c > 60),
        "uniform without probes: {seen:?}"
    );
    // Backend 1, the fastest, dies: its probe is dropped and the next fastest wins.
    let mut p = probed("prequal_hcl", probes);
    let mut views = views;
    views[1].alive = false;
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(0));
}

#[test]
fn prequal_reuses_a_probe_with_its_rif_raised_and_removes_one_per_query() {
    let views = vec![view(true); 3];
    let mut rng = SimRng::new(5);
    // Pool: backend 0 at RIF 0 and 10 ms, backend 1 at RIF 5 and 20 ms, backend 2 at RIF
    // 5 and 30 ms (the oldest). q = 0.6: threshold = 2nd of (0, 5, 5) = 5, nobody hot.
    let mut p = make("prequal_hcl_q60");
    p.on_probe(
        2,
        &Probe {
            taken_at: 10.5,
            ..probe(5, 30.0)
        },
        10.9,
    );
    p.on_probe(1, &probe(5, 20.0), 10.9);
    p.on_probe(0, &probe(0, 10.0), 10.9);
    // 1st query: backend 0 (fastest), its probe now RIF 1; the oldest (backend 2) goes.
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(0));
    // Pool (0: RIF 1, 10 ms), (1: RIF 5, 20 ms): threshold = 2nd of (1, 5) = 5, cold both:
    // backend 0 again; then the worst (slowest cold: backend 1) goes.
    assert_eq!(p.pick(11.0, &views, &mut rng), Some(0));
    // One probe left: fewer than 2, so the pick is random over every live backend.
    let mut seen = [0; 3];
    for _ in 0..300 {
        seen[p.pick(11.0, &views, &mut rng).unwrap()] += 1;
    }
    assert!(seen.iter().all(|&c| c > 60), "{seen:?}");
}

#[test]
fn prequal_asks_for_three_probes_per_query() {
    let views = vec![view(true); 3];
    let mut p = make("prequal_hcl");
    let mut rng = SimRng::new(6);
    let mut out = Vec::new();
    p.probe(1.0, &views, &mut rng, &mut out);
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out.iter().all(|&b| b < 3));
    // Other policies send none.
    let mut out = Vec::new();
    make("hybrid_p2c").probe(1.0, &views, &mut rng, &mut out);
    assert!(out.is_empty());
}
