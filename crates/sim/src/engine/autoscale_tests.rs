//! The autoscaler in the engine: a start's delay, the cost, the scale-in variants, and
//! the drain's promise (no session cut before its deadline) over many seeded runs.

use super::super::scaler::Slot;
use super::*;
use crate::autoscaler::Variant;
use crate::{Scenario, Signal};

/// Load rising then falling over 20 min (a diurnal cycle), sessions of about 2 min, a
/// pool of 16, replicas 1–12 on any signal; a 60 s scale-down window so scale-ins happen.
const CYCLE: &str = r#"
description = "a cycle"
duration_s = 1200
[arrivals]
pattern = "diurnal"
target_concurrent = 400
period_s = 1200
min_factor = 0.1
[sessions]
duration = "exponential"
mean_s = 120
[[backends]]
count = 16
[autoscaler]
min_replicas = 1
max_replicas = 12
startup_s = 30
drain_deadline_s = 60
sessions_target = 40
cpu_target = 0.5
capacity_target = 0.7
[autoscaler.scale_down]
stabilization_s = 60
"#;

fn cycle(seed: u64) -> Scenario {
    let mut s = Scenario::from_toml_str(CYCLE, "cycle.toml").expect("valid");
    s.seed = seed;
    s
}

fn variant(signal: Signal, scale_in: ScaleIn) -> Option<Variant> {
    Some(Variant { signal, scale_in })
}

fn finished(sc: &Scenario, v: Option<Variant>) -> crate::Summary {
    let mut e = Engine::with_variant(sc, "p2c_sessions", v);
    e.run(&mut |_| {});
    e.finish().0
}

/// A backend the HPA starts is a replica (and a cost) at once, ready `startup_s` later,
/// and the balancer sends it sessions only after its health check.
#[test]
fn a_started_backend_is_ready_after_the_startup_delay() {
    let sc = cycle(1);
    let mut e = Engine::with_variant(
        &sc,
        "p2c_sessions",
        variant(Signal::Sessions, ScaleIn::Drain),
    );
    assert_eq!(e.scaler.as_ref().unwrap().replicas(), 1);
    assert!(!e.backends[1].alive && !e.proxies[0].views[1].alive);
    // Run until the first scale-up.
    while e.scaler.as_ref().unwrap().replicas() == 1 {
        let (at, event) = e.queue.pop().expect("events");
        e.now = at;
        e.handle(event);
    }
    let started_at = e.now;
    let Slot::Starting { ready_at } = e.scaler.as_ref().unwrap().slots[1] else {
        panic!("slot 1 starting: {:?}", e.scaler.as_ref().unwrap().slots[1]);
    };
    assert_eq!(ready_at, started_at + 30.0);
    assert!(!e.backends[1].alive, "not ready yet");
    while e.now < ready_at {
        let (at, event) = e.queue.pop().expect("events");
        e.now = at;
        e.handle(event);
        if e.now < ready_at {
            assert!(!e.backends[1].alive, "ready early at {}", e.now);
            assert_eq!(e.backends[1].open, 0);
        }
    }
    assert!(e.backends[1].alive, "ready at {ready_at}");
    assert!(!e.proxies[0].views[1].alive, "the health check has not run");
    assert_eq!(e.scaler.as_ref().unwrap().slots[1], Slot::Ready);
}

/// The drained variant cuts a session only at a drain's deadline: over 20 seeds of a
/// cycle whose 2-minute sessions often outlive the 60 s drain, every cut came at least
/// 60 s after its drain began, and some did (the property is not vacuous).
#[test]
fn the_drained_variant_never_cuts_a_session_before_the_deadline() {
    let mut cuts = 0;
    for seed in 0..20 {
        for signal in [Signal::Cpu, Signal::Sessions, Signal::Capacity] {
            let s = finished(&cycle(seed), variant(signal, ScaleIn::Drain));
            let a = s.autoscale.expect("autoscaled");
            assert_eq!(a.cut, s.ended["shutdown"], "seed {seed}");
            cuts += a.cut;
            if let Some(w) = a.shortest_drain_before_cut_s {
                assert!(
                    w >= 60.0 - 1e-9,
                    "seed {seed} {signal:?}: cut after {w} s of drain"
                );
            }
        }
    }
    assert!(
        cuts > 0,
        "no drain ever reached its deadline: the test proves nothing"
    );
}

/// Cut at once, a scale-in ends every open session of its backend; the books balance:
/// every arrival and reconnect placed once, every session ended once, the cuts are the
/// `shutdown` ends, the cost lies between the floor and the ceiling of the fleet.
#[test]
fn scale_in_variants_balance_their_books() {
    for scale_in in [ScaleIn::Random, ScaleIn::Emptiest, ScaleIn::Drain] {
        let sc = cycle(3);
        let s = finished(&sc, variant(Signal::Sessions, scale_in));
        let a = s.autoscale.expect("autoscaled");
        assert_eq!(
            s.arrivals + a.reconnects,
            s.assigned + s.rejected + s.dropped
        );
        assert_eq!(s.ended.values().sum::<u64>(), s.assigned);
        assert_eq!(a.cut, s.ended["shutdown"], "{scale_in:?}");
        assert!(a.scale_ups > 0 && a.scale_downs > 0, "{scale_in:?}: {a:?}");
        assert!(a.peak_backends > 1 && a.peak_backends <= 16);
        assert!(a.backend_seconds >= 1200.0 && a.backend_seconds <= 16.0 * 1200.0);
        assert!((a.mean_backends - a.backend_seconds / 1200.0).abs() < 1e-9);
        if scale_in != ScaleIn::Drain {
            assert!(a.cut > 0, "{scale_in:?} cut nothing: {a:?}");
            assert_eq!(a.shortest_drain_before_cut_s, None);
        }
    }
}

/// A fleet the HPA never resizes costs its size × the arrival window.
#[test]
fn a_fleet_that_never_scales_costs_its_size_times_the_window() {
    let text = CYCLE
        .replace("min_replicas = 1", "min_replicas = 3")
        .replace("max_replicas = 12", "max_replicas = 3");
    let sc = Scenario::from_toml_str(&text, "fixed.toml").unwrap();
    let s = finished(&sc, variant(Signal::Cpu, ScaleIn::Random));
    let a = s.autoscale.unwrap();
    assert_eq!((a.scale_ups, a.scale_downs, a.cut), (0, 0, 0));
    assert!((a.backend_seconds - 3.0 * 1200.0).abs() < 1e-6, "{a:?}");
    assert_eq!(a.peak_backends, 3);
}

/// The emptiest scale-in removes the ready backend with the fewest sessions (the newest
/// on a tie); a backend still starting goes before any ready one.
#[test]
fn the_emptiest_ready_backend_goes_and_starting_ones_first() {
    let sc = cycle(1);
    let mut e = Engine::with_variant(
        &sc,
        "p2c_sessions",
        variant(Signal::Sessions, ScaleIn::Emptiest),
    );
    let s = e.scaler.as_mut().unwrap();
    for b in 1..4 {
        s.set(b, Slot::Ready, 0.0);
    }
    let mut open = vec![0u64; 16];
    open[..4].copy_from_slice(&[9, 2, 7, 2]);
    assert_eq!(s.victim(&open), Some(3), "2 sessions, the newer of the two");
    s.set(5, Slot::Starting { ready_at: 40.0 }, 10.0);
    s.set(6, Slot::Starting { ready_at: 45.0 }, 15.0);
    assert_eq!(s.newest_starting(), Some(6));
    assert_eq!(s.replicas(), 6);
    assert_eq!(s.provisioned(), 6);
}

/// A slot drained, emptied at once, started again and drained a second time ignores the
/// first drain's deadline: its session is cut at the second one, a full deadline later.
#[test]
fn a_reused_slot_ignores_an_earlier_drains_deadline() {
    use crate::session_plan::{EndReason, SessionPlan};
    let sc = cycle(1);
    let mut e = Engine::with_variant(
        &sc,
        "p2c_sessions",
        variant(Signal::Sessions, ScaleIn::Drain),
    );
    crate::engine::tests::drain_queue(&mut e);
    e.now = 100.0;
    e.begin_drain(0);
    assert_eq!(
        e.scaler.as_ref().unwrap().slots[0],
        Slot::Off,
        "empty: exits at once"
    );
    e.now = 110.0;
    e.scale_up(1);
    e.now = 140.0;
    e.backend_ready(0);
    assert!(e.backends[0].alive);
    let plan = SessionPlan {
        short: false,
        length: 1000.0,
        reason: EndReason::Completed,
        weight: 1.0,
    };
    e.accept(0, 0, plan, crate::SimRng::new(5));
    e.now = 150.0;
    e.begin_drain(0);
    e.now = 160.0;
    e.drain_deadline(0);
    assert_eq!(
        e.backends[0].open, 1,
        "the first drain's deadline cut the second's session"
    );
    e.now = 210.0;
    e.drain_deadline(0);
    assert_eq!(e.backends[0].open, 0);
    let a = e.scaler.as_ref().unwrap().summary;
    assert_eq!((a.cut, a.shortest_drain_before_cut_s), (1, Some(60.0)));
}

/// The per-pod signals read ready pods (starting ones count as not ready, ready ones
/// without a scrape as missing, draining ones not at all); the capacity share sums the
/// ready pods, and the draining ones too with `share_includes_draining`.
#[test]
fn what_each_signal_reads_from_the_pool() {
    let sc = cycle(1);
    let mut e = Engine::with_variant(
        &sc,
        "p2c_sessions",
        variant(Signal::Sessions, ScaleIn::Drain),
    );
    let s = e.scaler.as_mut().unwrap();
    s.set(1, Slot::Ready, 0.0);
    s.set(2, Slot::Starting { ready_at: 50.0 }, 20.0);
    s.set(
        3,
        Slot::Draining {
            since: 10.0,
            deadline: 70.0,
        },
        10.0,
    );
    s.scrape(0, 30.0, 90, 0.5);
    s.scrape(1, 30.0, 90, 0.5);
    s.scrape(3, 30.0, 500, 0.5);
    // Sessions: 90, 90 and one starting against 60: the starting one counts 0 on the way
    // up, mean 60, ratio 1: no change from 3. The draining pod's 500 are not read.
    assert_eq!(s.proposal(3, 60.0, 0.1), 3);
    // Without the starting pod: ceil(2 × 90 ÷ 60) = 3.
    s.set(2, Slot::Off, 30.0);
    assert_eq!(s.proposal(2, 60.0, 0.1), 3);
    // Capacity, fresh models (each pod's first report): two ready pods at 0.95, past the
    // 0.8 target, so their capacity is their 90: share 1 against 0.78, ceil(2 ÷ 0.78) = 3.
    s.variant = variant(Signal::Capacity, ScaleIn::Drain).unwrap();
    for (b, active, u) in [(0, 90, 0.95), (1, 90, 0.95), (3, 10, 0.05)] {
        s.forget(b, 40.0);
        s.scrape(b, 40.0, active, u);
    }
    assert_eq!(s.proposal(2, 0.78, 0.1), 3);
    // Counting the draining one too (10 sessions at 0.05: cost 0.05 ÷ (10 ÷ 10 s), headroom
    // (0.8 − 0.05) ÷ 0.05 ÷ 2 × 10 s = 75, capacity 85): share 190 ÷ 265 = 0.717, ratio
    // 0.92, within the tolerance: no change.
    let mut with = cycle(1);
    with.autoscaler.as_mut().unwrap().share_includes_draining = true;
    let mut e = Engine::with_variant(
        &with,
        "p2c_sessions",
        variant(Signal::Capacity, ScaleIn::Drain),
    );
    let s = e.scaler.as_mut().unwrap();
    s.set(1, Slot::Ready, 0.0);
    s.set(
        3,
        Slot::Draining {
            since: 10.0,
            deadline: 70.0,
        },
        10.0,
    );
    for (b, active, u) in [(0, 90, 0.95), (1, 90, 0.95), (3, 10, 0.05)] {
        s.forget(b, 40.0);
        s.scrape(b, 40.0, active, u);
    }
    assert_eq!(s.proposal(2, 0.78, 0.1), 2);
}

/// `run` expands an autoscaled scenario into one row per policy and variant: labelled by
/// the variant alone for one policy, prefixed with the policy for several.
#[test]
fn run_labels_every_variant() {
    let text = CYCLE
        .replace(
            "[autoscaler]",
            "[autoscaler]\nsignals = [\"cpu\", \"sessions\"]\nscale_in = [\"drain\"]",
        )
        .replace("capacity_target = 0.7\n", "")
        .replace("duration_s = 1200", "duration_s = 120");
    let sc = Scenario::from_toml_str(&text, "labels.toml").expect("valid");
    let labels = |policies: &[&str]| -> Vec<String> {
        let names: Vec<String> = policies.iter().map(|p| (*p).to_owned()).collect();
        crate::run(&sc, &names, &mut |_, _| {})
            .policies
            .into_iter()
            .map(|p| p.policy)
            .collect()
    };
    assert_eq!(labels(&["random"]), ["cpu/drain", "sessions/drain"]);
    assert_eq!(
        labels(&["random", "p2c_sessions"]),
        [
            "random:cpu/drain",
            "random:sessions/drain",
            "p2c_sessions:cpu/drain",
            "p2c_sessions:sessions/drain"
        ]
    );
}
