//! Exact values of the formulas where they change behaviour: the edges of each definition
//! (no sessions, a zero window, a cost of zero or below), stale decay by half-lives, and the
//! builder keeping every field it was given. The properties in `properties.rs` say which way
//! the model errs; these say it computes what the docs say, to the last case.

use std::time::Duration;

use livecount_capacity::{
    BackendModel, CapacityConfig, DEFAULT_COST_ALPHA, DEFAULT_PRIOR_COST, Estimate, Freshness,
    MIN_MEASURABLE_UTILISATION, additional_session_rate, cost_per_session, pretend_qps,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// t = 0.8, k = 2, w = r = 10 s (TTL 30 s, half-life 10 s, slow start 10 s by default).
fn config() -> CapacityConfig {
    CapacityConfig::new(0.8, 2.0, secs(10), secs(10)).expect("valid")
}

#[test]
fn pretend_qps_is_sessions_over_the_window_and_zero_without_one() {
    assert_eq!(pretend_qps(90, secs(10)), 9.0);
    assert_eq!(pretend_qps(0, secs(10)), 0.0);
    // No window: no rate (not 90 / 0 = ∞, not 0 / 0 = NaN).
    assert_eq!(pretend_qps(90, Duration::ZERO), 0.0);
    assert_eq!(pretend_qps(0, Duration::ZERO), 0.0);
}

#[test]
fn cost_per_session_is_defined_only_with_sessions_work_and_a_window() {
    let w = secs(10);
    assert_eq!(cost_per_session(80, 0.40, w), Some(0.05));
    // No sessions: no rate to divide by.
    assert_eq!(cost_per_session(0, 0.40, w), None);
    // No measurable work: a cost of 0 would offer unbounded capacity.
    assert_eq!(cost_per_session(80, 0.0, w), None);
    assert_eq!(
        cost_per_session(80, MIN_MEASURABLE_UTILISATION / 2.0, w),
        None
    );
    assert!(cost_per_session(80, MIN_MEASURABLE_UTILISATION, w).is_some());
    // No window.
    assert_eq!(cost_per_session(80, 0.40, Duration::ZERO), None);
    // Neither sessions nor work.
    assert_eq!(cost_per_session(0, 0.0, w), None);
    // Garbled utilisation reads as saturated (NaN → 1), still a defined cost.
    assert_eq!(cost_per_session(10, f64::NAN, w), Some(1.0));
}

#[test]
fn additional_rate_never_invents_capacity_from_a_bad_cost() {
    let c = config();
    assert!((additional_session_rate(&c, 0.40, 0.05) - 4.0).abs() < 1e-12);
    for cost in [0.0, -0.05, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert_eq!(additional_session_rate(&c, 0.40, cost), 0.0, "cost {cost}");
    }
    // At or above target: no more sessions, whatever the cost.
    assert_eq!(additional_session_rate(&c, 0.8, 0.05), 0.0);
    assert_eq!(additional_session_rate(&c, 0.95, 0.05), 0.0);
}

#[test]
fn an_unusable_fleet_prior_falls_back_to_the_configs() {
    let c = config();
    // No sessions: the cost is the prior's. With the config's 0.1: (0.8 − 0.4) / 0.1 / 2 ×
    // 10 s = 20.
    let fallback = Estimate::compute(&c, 0, 0.40, None);
    assert!((fallback.headroom - 20.0).abs() < 1e-9, "{fallback:?}");
    assert_eq!(c.prior_cost(), DEFAULT_PRIOR_COST);
    for bad in [0.0, -0.2, f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert_eq!(
            Estimate::compute(&c, 0, 0.40, Some(bad)),
            fallback,
            "prior {bad}"
        );
    }
    // A usable one is used: 0.2 halves the headroom.
    let fleet = Estimate::compute(&c, 0, 0.40, Some(0.2));
    assert!((fleet.headroom - 10.0).abs() < 1e-9, "{fleet:?}");
    // ... clamped into [1e-9, 1e9]: a tiny prior caps out, it is not refused.
    let tiny = Estimate::compute(&c, 0, 0.40, Some(1e-12));
    assert_eq!(tiny, Estimate::compute(&c, 0, 0.40, Some(1e-9)));
}

#[test]
fn a_stale_report_loses_half_its_headroom_per_half_life() {
    let c = config(); // TTL 30 s, half-life 10 s
    let mut b = BackendModel::new(Duration::ZERO);
    b.report(&c, secs(20), 80, 0.40);
    let fresh = b.estimate(&c, secs(20), None);
    assert_eq!(fresh.freshness, Freshness::Fresh);
    assert!((fresh.headroom - 40.0).abs() < 1e-9, "{fresh:?}");
    // At the TTL it is still fresh.
    assert_eq!(b.estimate(&c, secs(50), None), fresh);
    for (age, headroom) in [(35, 40.0 / 2f64.sqrt()), (40, 20.0), (50, 10.0), (70, 2.5)] {
        let e = b.estimate(&c, secs(20 + age), None);
        assert_eq!(e.freshness, Freshness::Stale, "age {age}");
        assert!(
            (e.headroom - headroom).abs() < 1e-9,
            "age {age} s: headroom {} instead of {headroom}",
            e.headroom
        );
        assert!((e.effective_capacity - (80.0 + headroom)).abs() < 1e-9);
    }
    // A longer half-life decays more slowly: 20 s → one halving after 20 s past the TTL.
    let slow = CapacityConfig::builder()
        .stale_half_life(secs(20))
        .build()
        .expect("valid");
    let mut b = BackendModel::new(Duration::ZERO);
    b.report(&slow, secs(20), 80, 0.40);
    assert!((b.estimate(&slow, secs(70), None).headroom - 20.0).abs() < 1e-9);
}

#[test]
fn the_builder_keeps_every_field_it_was_given() {
    let c = CapacityConfig::builder()
        .target_utilisation(0.7)
        .safety_scaler(3.0)
        .window(secs(5))
        .report_interval(secs(2))
        .stale_ttl(secs(7))
        .stale_half_life(secs(4))
        .slow_start(secs(9))
        .ewma_alpha(0.25)
        .cost_alpha(0.75)
        .prior_cost(0.3)
        .build()
        .expect("valid");
    assert_eq!(c.target_utilisation(), 0.7);
    assert_eq!(c.cost_alpha(), 0.75);
    assert_eq!(c.safety_scaler(), 3.0);
    assert_eq!(c.window(), secs(5));
    assert_eq!(c.report_interval(), secs(2));
    assert_eq!(c.stale_ttl(), secs(7));
    assert_eq!(c.stale_half_life(), secs(4));
    assert_eq!(c.slow_start(), secs(9));
    assert_eq!(c.ewma_alpha(), 0.25);
    assert_eq!(c.prior_cost(), 0.3);
    // Whatever the order: a setter does not reset the others.
    let reordered = CapacityConfig::builder()
        .slow_start(secs(9))
        .prior_cost(0.3)
        .cost_alpha(0.75)
        .ewma_alpha(0.25)
        .stale_half_life(secs(4))
        .stale_ttl(secs(7))
        .report_interval(secs(2))
        .window(secs(5))
        .safety_scaler(3.0)
        .target_utilisation(0.7)
        .build()
        .expect("valid");
    assert_eq!(reordered, c);
    // The defaults the docs give: t 0.8, k 2, w = r = 10 s, TTL 3r, half-life r, slow start r.
    let d = CapacityConfig::builder().build().expect("valid");
    assert_eq!(
        (d.target_utilisation(), d.safety_scaler(), d.window()),
        (0.8, 2.0, secs(10))
    );
    assert_eq!(
        (d.stale_ttl(), d.stale_half_life(), d.slow_start()),
        (secs(30), secs(10), secs(10))
    );
    assert_eq!(
        (d.ewma_alpha(), d.cost_alpha(), d.prior_cost()),
        (0.5, DEFAULT_COST_ALPHA, DEFAULT_PRIOR_COST)
    );
    assert_eq!(DEFAULT_COST_ALPHA, 0.1);
}

#[test]
fn ewma_alpha_and_prior_cost_out_of_range_are_refused_with_their_ranges() {
    for alpha in [0.0, -0.5, 1.5, 2.0, f64::NAN, f64::INFINITY] {
        let err = CapacityConfig::builder()
            .ewma_alpha(alpha)
            .build()
            .expect_err("out of range");
        assert_eq!((err.field(), err.allowed()), ("ewma_alpha", "(0, 1]"));
    }
    for alpha in [1.0, 0.5, 1e-6] {
        assert!(CapacityConfig::builder().ewma_alpha(alpha).build().is_ok());
    }
    for alpha in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let err = CapacityConfig::builder()
            .cost_alpha(alpha)
            .build()
            .expect_err("out of range");
        assert_eq!((err.field(), err.allowed()), ("cost_alpha", "(0, 1]"));
    }
    for alpha in [1.0, 0.1, 1e-6] {
        assert!(CapacityConfig::builder().cost_alpha(alpha).build().is_ok());
    }
    for prior in [0.0, 1e-10, -1.0, 2e9, f64::INFINITY, f64::NAN] {
        let err = CapacityConfig::builder()
            .prior_cost(prior)
            .build()
            .expect_err("out of range");
        assert_eq!((err.field(), err.allowed()), ("prior_cost", "[1e-9, 1e9]"));
    }
    for prior in [1e-9, 0.1, 1e9] {
        assert!(CapacityConfig::builder().prior_cost(prior).build().is_ok());
    }
    let err = CapacityConfig::new(0.0, 2.0, secs(10), secs(10)).expect_err("t = 0");
    assert_eq!(
        (err.field(), err.allowed()),
        ("target_utilisation", "(0, 1]")
    );
    assert!(
        err.to_string().contains("(0, 1]"),
        "the message names the range: {err}"
    );
}

/// Ten sessions whose busy utilisation alternates 0.02 / 0.18 report by report (three of
/// them happened to speak, then all of them): the learned cost averages the bursts, so the
/// headroom a balancer reads stays within a few percent, where charging each report to
/// itself (α = 1) swings it by 9× (a balancer's weights for its cold backends with it).
#[test]
fn the_learned_cost_averages_bursts_that_a_per_report_cost_follows() {
    let base = CapacityConfig::builder()
        .report_interval(secs(1))
        .window(secs(1));
    let spread = |alpha: f64| {
        let c = base.cost_alpha(alpha).build().unwrap();
        let mut b = BackendModel::new(Duration::ZERO);
        let mut seen = Vec::new();
        for i in 0..200u64 {
            let u = if i % 2 == 0 { 0.02 } else { 0.18 };
            b.report(&c, secs(i), 10, u);
            if i >= 100 {
                seen.push(b.cost_per_session(&c).unwrap());
            }
        }
        let (lo, hi) = seen
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        (lo, hi)
    };
    let (lo, hi) = spread(DEFAULT_COST_ALPHA);
    assert!(hi / lo < 1.2, "averaged: {lo}..{hi}");
    // The mean busy utilisation is 0.10 over 10 sessions and a 1 s window: 0.01 each.
    assert!(
        (lo - 0.01).abs() < 0.002 && (hi - 0.01).abs() < 0.002,
        "{lo}..{hi}"
    );
    let (lo, hi) = spread(1.0);
    assert!(
        (lo - 0.002).abs() < 1e-12 && (hi - 0.018).abs() < 1e-12,
        "{lo}..{hi}"
    );
}

/// w = r = 1 s, cost α `alpha`, the rest default.
fn one_second(alpha: f64) -> CapacityConfig {
    CapacityConfig::builder()
        .report_interval(secs(1))
        .window(secs(1))
        .cost_alpha(alpha)
        .build()
        .unwrap()
}

/// The cost is learned from the reports that had sessions only, and averaged over the
/// same reports in its numerator and denominator: 10 sessions at 0.2 then 30 at 0.6 is
/// 0.02 a session throughout, whatever α.
#[test]
fn the_learned_cost_divides_averaged_load_by_averaged_sessions() {
    let c = one_second(0.5);
    let mut b = BackendModel::new(Duration::ZERO);
    assert_eq!(b.cost_per_session(&c), None);
    b.report(&c, secs(0), 0, 0.0);
    assert_eq!(b.cost_per_session(&c), None, "no sessions: no cost");
    b.report(&c, secs(1), 10, 0.2);
    assert!((b.cost_per_session(&c).unwrap() - 0.02).abs() < 1e-12);
    b.report(&c, secs(2), 30, 0.6);
    // ū = 0.4, n̄ = 20: 0.02, where u ÷ n of the averaged u and the new n would be 0.0133.
    assert!((b.cost_per_session(&c).unwrap() - 0.02).abs() < 1e-12);
    b.report(&c, secs(3), 0, 0.0);
    assert!(
        (b.cost_per_session(&c).unwrap() - 0.02).abs() < 1e-12,
        "an empty report teaches the idle baseline, not the cost"
    );
    // The headroom is (t − u) ÷ cost ÷ k × r with the fast-smoothed u (α 0.5 over 0, 0.2,
    // 0.6, 0: 0.175), so (0.8 − 0.175) ÷ 0.02 ÷ 2 × 1 = 15.625.
    let e = b.estimate(&c, secs(3), None);
    assert!((e.headroom - 15.625).abs() < 1e-9, "{e:?}");
}

/// Sessions that cost less than the idle noise keep the last defined cost, and before
/// one was defined are charged the whole utilisation: never the fleet's prior, so the
/// weight does not jump as the busy share crosses the idle baseline.
#[test]
fn an_undefined_cost_above_idle_keeps_the_last_or_charges_the_whole() {
    let c = one_second(0.5);
    let mut b = BackendModel::new(Duration::ZERO);
    b.report(&c, secs(0), 0, 0.10); // idle 0.10
    b.report(&c, secs(1), 10, 0.05); // busy 0 above idle: ū ÷ n̄ whole
    assert!((b.cost_per_session(&c).unwrap() - 0.005).abs() < 1e-12);
    b.report(&c, secs(2), 10, 0.35); // ū 0.2: (0.2 − 0.1) ÷ 10
    assert!((b.cost_per_session(&c).unwrap() - 0.01).abs() < 1e-12);
    b.report(&c, secs(3), 0, 0.30); // a busier empty report: idle stays 0.10
    b.report(&c, secs(4), 10, 0.0); // ū 0.1: no busy share; the last defined stays
    assert!((b.cost_per_session(&c).unwrap() - 0.01).abs() < 1e-12);
    let e = b.estimate(&c, secs(4), Some(1.0));
    let own = b.estimate(&c, secs(4), None);
    assert_eq!(e.headroom, own.headroom, "the prior is not consulted");
}

/// A gap of g report intervals weighs the new report 1 − (1 − α)^g in the cost too.
#[test]
fn a_lost_report_weighs_the_next_one_more_in_the_cost() {
    let c = one_second(0.5);
    let mut b = BackendModel::new(Duration::ZERO);
    b.report(&c, secs(0), 10, 0.1);
    b.report(&c, secs(2), 10, 0.5); // weight 1 − 0.5² = 0.75: ū = 0.4
    assert!((b.cost_per_session(&c).unwrap() - 0.04).abs() < 1e-12);
}
