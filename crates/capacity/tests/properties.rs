//! Properties of the hybrid capacity model.

use std::time::Duration;

use livecount_capacity::{BackendModel, CapacityConfig, Estimate, MIN_MEASURABLE_UTILISATION};
use proptest::prelude::*;

/// Relative tolerance for comparisons of values computed along different float paths.
fn le(a: f64, b: f64) -> bool {
    a <= b + 1e-9 * b.abs().max(1.0)
}

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        -2.0..3.0f64,
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        proptest::num::f64::ANY,
    ]
}

prop_compose! {
    fn config()(
        t in 0.01..=1.0f64,
        k in 1.0..10.0f64,
        w_ms in 1u64..120_000,
        r_ms in 1u64..120_000,
    ) -> CapacityConfig {
        CapacityConfig::new(t, k, Duration::from_millis(w_ms), Duration::from_millis(r_ms)).unwrap()
    }
}

fn finite_non_negative(e: &Estimate) -> bool {
    [e.effective_capacity, e.headroom, e.weight]
        .iter()
        .all(|x| x.is_finite() && *x >= 0.0)
}

proptest! {
    #[test]
    fn outputs_are_finite_and_non_negative(
        c in config(), n in any::<u64>(), u in any_f64(), prior in any_f64(),
    ) {
        let e = Estimate::compute(&c, n, u, Some(prior));
        prop_assert!(finite_non_negative(&e), "{e:?}");
        prop_assert!(e.effective_capacity >= n as f64);
    }

    #[test]
    fn backend_outputs_are_finite_and_non_negative(
        c in config(), n in any::<u64>(), u in any_f64(), prior in any_f64(),
        seen in any::<u32>(), at in any::<u32>(), now in any::<u32>(),
    ) {
        let mut b = BackendModel::new(Duration::from_millis(seen.into()));
        b.report(&c, Duration::from_millis(at.into()), n, u);
        let e = b.estimate(&c, Duration::from_millis(now.into()), Some(prior));
        prop_assert!(finite_non_negative(&e), "{e:?}");
    }

    #[test]
    fn above_idle_outputs_are_finite_and_equal_compute_at_zero_idle(
        c in config(), n in any::<u64>(), u in any_f64(), idle in any_f64(), prior in any_f64(),
    ) {
        let e = Estimate::compute_above_idle(&c, n, u, idle, Some(prior));
        prop_assert!(finite_non_negative(&e), "{e:?}");
        prop_assert_eq!(
            Estimate::compute_above_idle(&c, n, u, 0.0, Some(prior)),
            Estimate::compute(&c, n, u, Some(prior))
        );
    }

    /// At a fixed idle baseline, more utilisation never offers more headroom (within one
    /// regime: the session-attributable part measurable at both points, or at neither).
    #[test]
    fn above_idle_non_increasing_in_utilisation(
        c in config(), n in 1u64..1_000_000, idle in 0.0..0.5f64, a in 0.0..=1.0f64, b in 0.0..=1.0f64,
    ) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let measurable = |u: f64| u - idle.min(u) >= MIN_MEASURABLE_UTILISATION;
        prop_assume!(measurable(lo) == measurable(hi));
        let el = Estimate::compute_above_idle(&c, n, lo, idle, None);
        let eh = Estimate::compute_above_idle(&c, n, hi, idle, None);
        prop_assert!(le(eh.headroom, el.headroom), "{el:?} {eh:?}");
    }

    /// Capacity, headroom and weight are non-increasing in utilisation, within the measured
    /// regime and within the prior regime.
    #[test]
    fn non_increasing_in_utilisation(
        c in config(), n in 0u64..1_000_000, a in 0.0..=1.0f64, b in 0.0..=1.0f64,
    ) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let same_regime = (lo >= MIN_MEASURABLE_UTILISATION) == (hi >= MIN_MEASURABLE_UTILISATION);
        prop_assume!(same_regime || n == 0);
        let (el, eh) = (Estimate::compute(&c, n, lo, None), Estimate::compute(&c, n, hi, None));
        prop_assert!(le(eh.effective_capacity, el.effective_capacity), "{el:?} {eh:?}");
        prop_assert!(le(eh.headroom, el.headroom));
        prop_assert!(le(eh.weight, el.weight));
    }

    /// In active sessions, headroom and weight are non-increasing at fixed cost per
    /// session (utilisation then grows with n) — the reading of "more sessions never
    /// admits more" that holds for this formula.
    #[test]
    fn headroom_non_increasing_in_sessions_at_fixed_cost(
        c in config(), cost in 1e-4..1.0f64, a in 1u64..100_000, b in 1u64..100_000,
    ) {
        let (lo, hi) = (a.min(b), a.max(b));
        let w = c.window().as_secs_f64();
        let u = |n: u64| (cost * n as f64 / w).min(1.0);
        let (el, eh) = (
            Estimate::compute(&c, lo, u(lo), Some(cost)),
            Estimate::compute(&c, hi, u(hi), Some(cost)),
        );
        prop_assert!(le(eh.headroom, el.headroom), "{el:?} {eh:?}");
        prop_assert!(le(eh.weight, el.weight));
    }

    /// Documented behaviour, not a bug: at fixed *utilisation*, more sessions means a lower
    /// cost per session, so effective capacity and headroom do not decrease with n.
    #[test]
    fn at_fixed_utilisation_capacity_grows_with_sessions(
        c in config(), u in MIN_MEASURABLE_UTILISATION..=1.0f64,
        a in 1u64..1_000_000, b in 1u64..1_000_000,
    ) {
        let (lo, hi) = (a.min(b), a.max(b));
        let (el, eh) = (Estimate::compute(&c, lo, u, None), Estimate::compute(&c, hi, u, None));
        prop_assert!(le(el.headroom, eh.headroom), "{el:?} {eh:?}");
        prop_assert!(le(el.effective_capacity, eh.effective_capacity));
    }

    #[test]
    fn larger_safety_scaler_never_admits_more(
        t in 0.01..=1.0f64, k1 in 1.0..10.0f64, k2 in 1.0..10.0f64,
        n in any::<u64>(), u in any_f64(), prior in any_f64(),
    ) {
        let (small, large) = (k1.min(k2), k1.max(k2));
        let cfg = |k| CapacityConfig::builder().target_utilisation(t).safety_scaler(k).build().unwrap();
        let es = Estimate::compute(&cfg(small), n, u, Some(prior));
        let el = Estimate::compute(&cfg(large), n, u, Some(prior));
        prop_assert!(le(el.effective_capacity, es.effective_capacity), "{es:?} {el:?}");
        prop_assert!(le(el.weight, es.weight));
    }

    /// A stale report never yields more capacity or weight than the same report fresh, and
    /// ageing further never raises it.
    #[test]
    fn stale_reports_never_raise_capacity(
        c in config(), n in 0u64..1_000_000, u in any_f64(),
        age1 in 0u64..1_000_000, age2 in 0u64..1_000_000,
    ) {
        let mut b = BackendModel::new(Duration::ZERO);
        let at = Duration::from_secs(1_000);
        b.report(&c, at, n, u);
        let fresh = b.estimate(&c, at + c.stale_ttl(), None);
        let (young, old) = (age1.min(age2), age1.max(age2));
        let ey = b.estimate(&c, at + Duration::from_millis(young), None);
        let eo = b.estimate(&c, at + Duration::from_millis(old), None);
        prop_assert!(le(ey.effective_capacity, fresh.effective_capacity));
        prop_assert!(le(eo.effective_capacity, ey.effective_capacity), "{ey:?} {eo:?}");
        prop_assert!(le(eo.weight, ey.weight.max(fresh.weight)));
        prop_assert!(eo.effective_capacity >= n as f64);
    }

    #[test]
    fn bad_config_is_rejected(
        t in any_f64(), k in any_f64(), w_ms in 0u64..3, r_ms in 0u64..3, alpha in any_f64(),
    ) {
        let result = CapacityConfig::builder()
            .target_utilisation(t)
            .safety_scaler(k)
            .window(Duration::from_millis(w_ms))
            .report_interval(Duration::from_millis(r_ms))
            .ewma_alpha(alpha)
            .build();
        let valid = t > 0.0 && t <= 1.0 && (1.0..=1e9).contains(&k) && w_ms > 0 && r_ms > 0
            && alpha > 0.0 && alpha <= 1.0;
        prop_assert_eq!(result.is_ok(), valid, "{:?}", result);
        if let Err(e) = result {
            prop_assert!(e.to_string().contains(e.field()));
            prop_assert!(e.to_string().contains(e.allowed()));
        }
    }
}

#[test]
fn each_bad_field_is_named() {
    let b = CapacityConfig::builder;
    let cases = [
        (b().target_utilisation(0.0).build(), "target_utilisation"),
        (b().target_utilisation(1.01).build(), "target_utilisation"),
        (b().safety_scaler(0.99).build(), "safety_scaler"),
        (b().window(Duration::ZERO).build(), "window"),
        (
            b().report_interval(Duration::ZERO).build(),
            "report_interval",
        ),
        (b().stale_ttl(Duration::ZERO).build(), "stale_ttl"),
        (
            b().stale_half_life(Duration::ZERO).build(),
            "stale_half_life",
        ),
        (b().ewma_alpha(0.0).build(), "ewma_alpha"),
        (b().prior_cost(f64::NAN).build(), "prior_cost"),
    ];
    for (result, field) in cases {
        assert_eq!(result.unwrap_err().field(), field);
    }
}

proptest! {
    /// The learned cost against a plain reference: two EWMAs over the reports with sessions,
    /// each new report weighted 1 − (1 − α)^(gap / r), the idle baseline the smallest
    /// utilisation of an empty report; when the cost above idle is undefined, the last
    /// defined one, else ū ÷ n̄ whole.
    #[test]
    fn learned_cost_matches_a_reference(
        alpha in 0.01..=1.0f64,
        reports in proptest::collection::vec((0u64..3_000, 0u64..50, 0.0..=1.0f64), 1..40),
    ) {
        let r = Duration::from_millis(500);
        let c = CapacityConfig::builder()
            .report_interval(r)
            .window(Duration::from_secs(1))
            .cost_alpha(alpha)
            .build()
            .unwrap();
        let mut b = BackendModel::new(Duration::ZERO);
        let (mut at, mut idle, mut avg) = (0u64, None::<f64>, None::<(u64, f64, f64)>);
        let mut last = None::<f64>;
        for (gap_ms, n, u) in reports {
            at += gap_ms;
            b.report(&c, Duration::from_millis(at), n, u);
            if n == 0 {
                idle = Some(idle.map_or(u, |i: f64| i.min(u)));
            } else {
                avg = Some(match avg {
                    None => (at, u, n as f64),
                    Some((prev, au, an)) => {
                        let g = (at - prev) as f64 / 500.0;
                        let a = 1.0 - (1.0 - alpha).powf(g);
                        (at, a * u + (1.0 - a) * au, a * n as f64 + (1.0 - a) * an)
                    }
                });
            }
            let above = avg.and_then(|(_, au, an)| {
                let busy = au - idle.unwrap_or(0.0).min(au);
                (busy >= MIN_MEASURABLE_UTILISATION).then_some(busy * 1.0 / an)
            });
            let whole = avg.and_then(|(_, au, an)| {
                (au >= MIN_MEASURABLE_UTILISATION).then_some(au * 1.0 / an)
            });
            last = above.or(last);
            let expected = above.or(last).or(whole);
            match (b.cost_per_session(&c), expected) {
                (Some(got), Some(want)) => prop_assert!((got - want).abs() <= 1e-9 * want.max(1e-9), "{got} vs {want}"),
                (got, want) => prop_assert_eq!(got, want),
            }
        }
    }
}
