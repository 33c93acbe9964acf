//! Hand-computed cases of the HPA's arithmetic (each figure worked out in its comment).

use super::PodMetric::{Missing, NotReady, Value};
use super::*;
use crate::autoscaler::config::ScalingPolicy;

fn hpa(min: u32, max: u32) -> Hpa {
    Hpa::new(
        min,
        max,
        ScalingRules::default_up(),
        ScalingRules::default_down(),
    )
}

fn rules(
    stabilization_s: f64,
    select: SelectPolicy,
    policies: &[(PolicyKind, u32, f64)],
) -> ScalingRules {
    ScalingRules {
        stabilization_s,
        select,
        policies: policies
            .iter()
            .map(|&(kind, value, period_s)| ScalingPolicy {
                kind,
                value,
                period_s,
            })
            .collect(),
    }
}

#[test]
fn the_ratio_and_its_tolerance() {
    // 65 ÷ 60 = 1.083: within 0.1, no change; 67 ÷ 60 = 1.117: ceil(2 × 1.117) = 3.
    assert_eq!(
        replicas_for_pods(2, &[Value(65.0), Value(65.0)], 60.0, 0.1),
        2
    );
    assert_eq!(
        replicas_for_pods(2, &[Value(67.0), Value(67.0)], 60.0, 0.1),
        3
    );
    // Down: 55 ÷ 60 = 0.917, within; 45 ÷ 60 = 0.75: ceil(4 × 0.75) = 3.
    assert_eq!(replicas_for_pods(4, &[Value(55.0); 4], 60.0, 0.1), 4);
    assert_eq!(replicas_for_pods(4, &[Value(45.0); 4], 60.0, 0.1), 3);
    // A tolerance of 0 acts on any difference.
    assert_eq!(replicas_for_pods(2, &[Value(61.0); 2], 60.0, 0.0), 3);
    // No pod with a metric: no change.
    assert_eq!(
        replicas_for_pods(3, &[Missing, NotReady, Missing], 60.0, 0.1),
        3
    );
}

#[test]
fn missing_metrics_count_at_the_target_down_and_at_zero_up() {
    // Down: 30, 30 and one missing (ratio 0.5): the missing one counts as 60, mean 40,
    // ratio 0.667: ceil(3 × 0.667) = 2.
    assert_eq!(
        replicas_for_pods(3, &[Value(30.0), Value(30.0), Missing], 60.0, 0.1),
        2
    );
    // Up: 150, 150 and one missing (ratio 3 against 50): the missing one counts as 0,
    // mean 100, ratio 2: ceil(3 × 2) = 6.
    assert_eq!(
        replicas_for_pods(3, &[Value(150.0), Value(150.0), Missing], 50.0, 0.1),
        6
    );
    // Up: 120 and one missing against 60: mean 60 once it counts, ratio 1: no change.
    assert_eq!(replicas_for_pods(2, &[Value(120.0), Missing], 60.0, 0.1), 2);
    // Down: 10, 10 and one missing against 60 (ratio 0.167): the missing one at 60 gives
    // mean 26.7, ratio 0.444: ceil(3 × 0.444) = 2 (without it: ceil(2 × 0.167) = 1).
    assert_eq!(
        replicas_for_pods(3, &[Value(10.0), Value(10.0), Missing], 60.0, 0.1),
        2
    );
}

#[test]
fn pods_not_ready_damp_a_scale_up_only() {
    // Up: 130 and one starting (ratio 2.17): the starting one counts as 0, mean 65,
    // ratio 1.083, within the tolerance: no change (without the rule: ceil(2.17) = 3).
    assert_eq!(
        replicas_for_pods(2, &[Value(130.0), NotReady], 60.0, 0.1),
        2
    );
    // Down: 30, 30 and one starting (ratio 0.5): set aside: ceil(2 × 0.5) = 1.
    assert_eq!(
        replicas_for_pods(3, &[Value(30.0), Value(30.0), NotReady], 60.0, 0.1),
        1
    );
    // Up, reversed: 70 and two starting (ratio 1.17 → 70 ÷ 3 ÷ 60 = 0.39): no change.
    assert_eq!(
        replicas_for_pods(3, &[Value(70.0), NotReady, NotReady], 60.0, 0.1),
        3
    );
}

#[test]
fn a_fleet_wide_value_scales_the_ready_pods() {
    // 0.9 against 0.7 = 1.29: ceil(4 × 1.29) = ceil(5.14) = 6; with 3 ready, 4.
    assert_eq!(replicas_for_value(4, 4, 0.9, 0.7, 0.1), 6);
    assert_eq!(replicas_for_value(4, 3, 0.9, 0.7, 0.1), 4);
    // 0.75 ÷ 0.7 = 1.071: within the tolerance.
    assert_eq!(replicas_for_value(4, 4, 0.75, 0.7, 0.1), 4);
    // 0.35 ÷ 0.7 = 0.5: ceil(4 × 0.5) = 2.
    assert_eq!(replicas_for_value(4, 4, 0.35, 0.7, 0.1), 2);
    // From zero replicas: ceil(ratio).
    assert_eq!(replicas_for_value(0, 0, 1.5, 0.7, 0.1), 3);
}

#[test]
fn scale_up_is_limited_to_the_larger_of_100_percent_and_4_pods_per_15_s() {
    let mut h = hpa(1, 100);
    // 3 → max(ceil(3 × 2), 3 + 4) = 7.
    assert_eq!(h.sync(0.0, 3, 50), 7);
    // 10 s later the +4 is inside the 15 s period: the period started at 3, so still 7.
    assert_eq!(h.sync(10.0, 7, 50), 7);
    // At 15 s the event at 0 is out of (0, 15]: from 7, max(14, 11) = 14.
    assert_eq!(h.sync(15.0, 7, 50), 14);
    // At 30: 28 (100 % beats 4 pods once past 4 replicas).
    assert_eq!(h.sync(30.0, 14, 50), 28);
    // maxReplicas caps it: 56 at 45 s, then 100 (not 112).
    assert_eq!(h.sync(45.0, 28, 500), 56);
    assert_eq!(h.sync(60.0, 56, 500), 100);
    // `select = min`: min(ceil(3 × 2), 3 + 4) = 6.
    let up = rules(
        0.0,
        SelectPolicy::Min,
        &[
            (PolicyKind::Percent, 100, 15.0),
            (PolicyKind::Pods, 4, 15.0),
        ],
    );
    let mut h = Hpa::new(1, 100, up, ScalingRules::default_down());
    assert_eq!(h.sync(0.0, 3, 50), 6);
}

#[test]
fn scale_down_waits_for_the_highest_recommendation_of_the_300_s_window() {
    let mut h = hpa(1, 100);
    assert_eq!(h.sync(0.0, 7, 7), 7);
    // Every sync from 15 s proposes 2; the window (now − 300, now] still holds the 7 of
    // t = 0 (and the seed) until t = 300.
    for k in 1..20 {
        let t = 15.0 * f64::from(k);
        assert_eq!(h.sync(t, 7, 2), 7, "t = {t}");
    }
    // At 300 s the window is (0, 300]: all 2. 100 % per 15 s allows it at once.
    assert_eq!(h.sync(300.0, 7, 2), 2);
}

#[test]
fn scale_down_follows_the_window_maximum_as_it_slides() {
    let mut h = hpa(1, 100);
    assert_eq!(h.sync(0.0, 9, 9), 9);
    // Proposals 5 at 15 s, 3 from 30 s: at 300 s the 9 of t = 0 is out, the 5 of 15 s is
    // in: 5. At 315 s the 5 is out too: 3.
    assert_eq!(h.sync(15.0, 9, 5), 9);
    let mut current = 9;
    for k in 2..=21 {
        let t = 15.0 * f64::from(k);
        current = h.sync(t, current, 3);
        let want = match k {
            ..=19 => 9,
            20 => 5,
            _ => 3,
        };
        assert_eq!(current, want, "t = {t}");
    }
}

#[test]
fn a_scale_down_policy_in_pods_per_period() {
    // One pod per 60 s, no stabilization: 5 → 4 at 0; the period (0, 60] sees that event,
    // so 15 … 45 s stay at 4; at 60 s the event at 0 is out: 3.
    let down = rules(0.0, SelectPolicy::Max, &[(PolicyKind::Pods, 1, 60.0)]);
    let mut h = Hpa::new(1, 100, ScalingRules::default_up(), down);
    assert_eq!(h.sync(0.0, 5, 1), 4);
    for t in [15.0, 30.0, 45.0] {
        assert_eq!(h.sync(t, 4, 1), 4, "t = {t}");
    }
    assert_eq!(h.sync(60.0, 4, 1), 3);
    // Percent truncates: 50 % of 3 leaves 1.5 → 1.
    let down = rules(0.0, SelectPolicy::Max, &[(PolicyKind::Percent, 50, 15.0)]);
    let mut h = Hpa::new(1, 100, ScalingRules::default_up(), down);
    assert_eq!(h.sync(0.0, 3, 1), 1);
    // minReplicas is a floor.
    let down = rules(0.0, SelectPolicy::Max, &[(PolicyKind::Percent, 100, 15.0)]);
    let mut h = Hpa::new(2, 100, ScalingRules::default_up(), down);
    assert_eq!(h.sync(0.0, 6, 0), 2);
}

#[test]
fn a_scale_up_stabilization_window_ignores_a_one_sync_spike() {
    // Up window 30 s: the lowest recommendation of (now − 30, now] counts.
    let up = rules(30.0, SelectPolicy::Max, &[(PolicyKind::Percent, 100, 15.0)]);
    let mut h = Hpa::new(1, 100, up, ScalingRules::default_down());
    assert_eq!(h.sync(0.0, 4, 4), 4);
    assert_eq!(h.sync(15.0, 4, 8), 4, "min(4 of t = 0, 8)");
    assert_eq!(h.sync(30.0, 4, 4), 4, "the spike is over");
    assert_eq!(h.sync(45.0, 4, 8), 4, "min(4 of 30 s, 8)");
    assert_eq!(h.sync(60.0, 4, 8), 8, "8 at 45 and 60: the window agrees");
}

#[test]
fn disabled_directions_and_bounds() {
    let off = rules(
        0.0,
        SelectPolicy::Disabled,
        &[(PolicyKind::Percent, 100, 15.0)],
    );
    let mut h = Hpa::new(1, 100, off.clone(), off);
    assert_eq!(h.sync(0.0, 4, 9), 4);
    assert_eq!(h.sync(15.0, 4, 1), 4);
    // Outside [min, max] the bound is set whatever the metric says.
    let mut h = hpa(2, 10);
    assert_eq!(h.sync(0.0, 12, 12), 10);
    assert_eq!(h.sync(15.0, 1, 1), 2);
}
