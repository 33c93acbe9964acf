//! Conservation laws: every arrival (and every client reconnecting after a rolling restart
//! or a scale-in cut it) is assigned, rejected or dropped exactly once, every assigned session (a
//! reconnected one's second part too) ends exactly once, and the exactly-once (tracked)
//! counter never drifts from the truth. Checked on the bundled scenarios (shortened) and on
//! random small ones.

use std::fmt::Write as _;
use std::path::Path;

use livecount_sim::{PolicyResult, Scenario, policy, run};
use proptest::prelude::*;

fn check_conservation(p: &PolicyResult) {
    let m = &p.summary;
    let reconnects =
        m.restart.map_or(0, |r| r.reconnects) + m.autoscale.map_or(0, |a| a.reconnects);
    assert_eq!(
        m.arrivals + reconnects,
        m.assigned + m.rejected + m.dropped,
        "{}: arrivals and reconnects not conserved: {m:?}",
        p.policy
    );
    if let Some(r) = m.restart {
        // Only a cut client reconnects, at most once per cut.
        assert!(r.reconnects <= r.cut, "{}: {r:?}", p.policy);
        assert_eq!(r.cut, m.ended["shutdown"], "{}: {m:?}", p.policy);
    }
    if let Some(a) = m.autoscale {
        assert!(a.reconnects <= a.cut, "{}: {a:?}", p.policy);
        assert_eq!(a.cut, m.ended["shutdown"], "{}: {m:?}", p.policy);
    }
    assert_eq!(
        m.ended.values().sum::<u64>(),
        m.assigned,
        "{}: ended != assigned: {m:?}",
        p.policy
    );
    assert_eq!(m.counter.tracked_final_error, 0, "{}: {m:?}", p.policy);
    assert_eq!(m.counter.tracked_max_error, 0, "{}: {m:?}", p.policy);
}

fn all_policies() -> Vec<String> {
    policy::NAMES.iter().map(|s| (*s).to_owned()).collect()
}

/// A bundled scenario with its duration and every instant in it scaled by 1/5.
fn shortened(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    let mut s = Scenario::load(&path).expect("bundled scenarios load");
    let k = 0.2;
    s.duration_s *= k;
    for f in &mut s.failures {
        f.at_s *= k;
    }
    for w in &mut s.waves {
        w.at_s *= k;
    }
    for st in &mut s.reports.stale {
        st.from_s *= k;
    }
    if let Some(at) = &mut s.arrivals.at_s {
        *at *= k;
    }
    if let Some(r) = &mut s.rolling_restart {
        r.start_s *= k;
        r.restart_s *= k;
        r.gap_s *= k;
        r.drain_deadline_s = r.drain_deadline_s.map(|d| d * k);
    }
    s
}

macro_rules! bundled {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let s = shortened(stringify!($name));
            let result = run(&s, &all_policies(), &mut |_, _| {});
            assert_eq!(result.policies.len(), policy::NAMES.len());
            assert!(result.policies[0].summary.arrivals > 0, "no workload");
            for p in &result.policies {
                check_conservation(p);
            }
        }
    )*};
}

mod bundled_scenario_shortened {
    use super::*;

    bundled!(
        backend_failure,
        diurnal,
        flash_crowd,
        ghosts_naive_counter,
        ghosts_tracked_counter,
        heterogeneous_fleet,
        high_variance_costs,
        long_vs_short,
        multi_proxy,
        rolling_restart,
        rolling_restart_cut,
        silent_then_speaking,
        silent_wake_together,
        slow_backends,
        stale_reports,
    );
}

/// The autoscaled bundled scenarios, shortened (and with a tenth of their sessions):
/// every signal × scale-in variant conserves arrivals, reconnects and ends, and a drain
/// never cuts before its deadline.
#[test]
fn bundled_autoscaled_scenarios_shortened() {
    for name in [
        "autoscale_steady",
        "autoscale_diurnal_silent",
        "autoscale_flash_crowd",
        "autoscale_long_sessions",
        "autoscale_long_slow_scale_in",
        "autoscale_share_with_draining",
    ] {
        let mut s = shortened(name);
        s.arrivals.target_concurrent = s.arrivals.target_concurrent.map(|n| n / 10.0);
        let a = s.autoscaler.as_ref().expect("autoscaled");
        let (variants, deadline) = (a.variants().len(), a.drain_deadline_s);
        let result = run(&s, &["p2c_sessions".to_owned()], &mut |_, _| {});
        assert_eq!(result.policies.len(), variants, "{name}");
        for p in &result.policies {
            check_conservation(p);
            let scaled = p.summary.autoscale.expect("an autoscale summary");
            if let (Some(w), Some(d)) = (scaled.shortest_drain_before_cut_s, deadline) {
                assert!(
                    w >= d - 1e-9,
                    "{name} {}: cut after {w} s of drain",
                    p.policy
                );
            }
        }
    }
}

/// The knobs of a small random scenario.
#[derive(Debug, Clone)]
struct Params {
    seed: u64,
    duration_s: f64,
    pattern: u8,
    rate: f64,
    backends: Vec<(f64, u32)>,
    dist: &'static str,
    mean_s: f64,
    max_s: f64,
    short_share: f64,
    speaking_mean_s: f64,
    cancel: f64,
    disconnect: f64,
    loss: f64,
    delay_s: f64,
    interval_s: f64,
    health_check_s: f64,
    failures: Vec<(u32, f64, Option<f64>)>,
    waves: Vec<(f64, f64)>,
    naive: bool,
    policy: usize,
    proxies: u32,
    /// Skewed arrivals over the proxies (shares 1, 2, …) instead of in turn.
    skewed: bool,
    /// A reload of the last proxy at this fraction of the run.
    reload_at: Option<f64>,
    probe_delay_s: f64,
    probe_loss: f64,
    cost_sigma: f64,
    slowdown: f64,
}

fn params() -> impl Strategy<Value = Params> {
    let workload = (
        any::<u64>(),
        5.0..120.0f64,
        0u8..4,
        0.05..4.0f64,
        prop::collection::vec((0.25..4.0f64, 1u32..40), 1..=6),
        prop::sample::select(vec!["fixed", "exponential", "lognormal", "pareto"]),
        0.5..60.0f64,
        0.5..120.0f64,
        prop_oneof![Just(0.0), 0.0..=1.0f64],
        prop_oneof![Just(0.0), 0.1..10.0f64],
    );
    let ends_and_reports = (
        0.0..=1.0f64,
        0.0..1.0f64,
        prop_oneof![Just(0.0), 0.0..=1.0f64],
        prop_oneof![Just(0.0), 0.0..5.0f64],
        0.5..20.0f64,
        0.1..10.0f64,
    );
    let failure = (any::<u32>(), 0.0..150.0f64, prop::option::of(0.5..60.0f64));
    let rest = (
        prop::collection::vec(failure, 0..3),
        prop::collection::vec((0.0..120.0f64, 0.1..30.0f64), 0..3),
        any::<bool>(),
        0..policy::NAMES.len(),
    );
    let balancer = (
        1u32..5,
        0.0..0.5f64,
        prop_oneof![Just(0.0), 0.0..=1.0f64],
        prop_oneof![Just(0.0), 0.0..2.0f64],
        prop_oneof![Just(1.0), 1.0..10.0f64],
        any::<bool>(),
        prop::option::of(0.0..1.0f64),
    );
    (workload, ends_and_reports, rest, balancer).prop_map(|(w, e, r, b)| {
        let (cancel, d, loss, delay_s, interval_s, health_check_s) = e;
        Params {
            seed: w.0,
            duration_s: w.1,
            pattern: w.2,
            rate: w.3,
            backends: w.4,
            dist: w.5,
            mean_s: w.6,
            max_s: w.7,
            short_share: w.8,
            speaking_mean_s: w.9,
            cancel,
            // cancel + disconnect ≤ 1, with room for rounding.
            disconnect: d * (1.0 - cancel) * 0.999,
            loss,
            delay_s,
            interval_s,
            health_check_s,
            failures: r.0,
            waves: r.1,
            naive: r.2,
            policy: r.3,
            proxies: b.0,
            skewed: b.5,
            reload_at: b.6,
            probe_delay_s: b.1,
            probe_loss: b.2,
            cost_sigma: b.3,
            slowdown: b.4,
        }
    })
}

fn to_toml(p: &Params) -> String {
    let mut t = String::new();
    let counter = if p.naive { "naive" } else { "tracked" };
    let _ = writeln!(
        t,
        "description = \"random\"\nseed = {}\nduration_s = {:?}\ncounter = \"{counter}\"",
        p.seed, p.duration_s
    );
    let _ = writeln!(t, "[arrivals]\nrate_per_s = {:?}", p.rate);
    let _ = match p.pattern {
        0 => writeln!(t, "pattern = \"poisson\""),
        1 => writeln!(
            t,
            "pattern = \"bursts\"\nburst_every_s = {:?}\nburst_size = 5",
            p.duration_s / 4.0
        ),
        2 => writeln!(
            t,
            "pattern = \"diurnal\"\nperiod_s = {:?}\nmin_factor = 0.3",
            p.duration_s / 2.0
        ),
        _ => writeln!(
            t,
            "pattern = \"flash_crowd\"\nat_s = {:?}\nfor_s = {:?}\nfactor = 4",
            p.duration_s / 3.0,
            p.duration_s / 5.0
        ),
    };
    let _ = writeln!(
        t,
        "[sessions]\nduration = \"{}\"\nmean_s = {:?}\nmax_s = {:?}\nshort_share = {:?}\n\
         speaking_mean_s = {:?}\nidle_mean_s = 3\ncancel_share = {:?}\ndisconnect_share = {:?}\n\
         cost_sigma = {:?}",
        p.dist,
        p.mean_s,
        p.max_s,
        p.short_share,
        p.speaking_mean_s,
        p.cancel,
        p.disconnect,
        p.cost_sigma
    );
    for (i, (size, max)) in p.backends.iter().enumerate() {
        // Every other backend is slow in a way its CPU does not show.
        let slowdown = if i % 2 == 1 { p.slowdown } else { 1.0 };
        let _ = writeln!(
            t,
            "[[backends]]\ncount = 1\nsize = {size:?}\nmax_sessions = {max}\nslowdown = {slowdown:?}"
        );
    }
    let _ = writeln!(
        t,
        "[balancer]\nproxies = {}\nprobe_delay_s = {:?}\nprobe_loss = {:?}",
        p.proxies, p.probe_delay_s, p.probe_loss
    );
    if let Some(at) = p.reload_at {
        // The last proxy restarts part-way (a fraction of the run, so always in range).
        let _ = writeln!(
            t,
            "reloads = [{{ proxy = {}, at_s = {:?} }}]",
            p.proxies - 1,
            at * p.duration_s
        );
    }
    if p.skewed {
        let shares: Vec<String> = (1..=p.proxies).map(|i| format!("{i}.0")).collect();
        let _ = writeln!(t, "proxy_shares = [{}]", shares.join(", "));
    }
    let _ = writeln!(
        t,
        "[reports]\ninterval_s = {:?}\nwindow_s = {:?}\nloss = {:?}\ndelay_s = {:?}\n\
         health_check_s = {:?}",
        p.interval_s, p.interval_s, p.loss, p.delay_s, p.health_check_s
    );
    let n = p.backends.len() as u32;
    for (b, at, down) in &p.failures {
        let _ = writeln!(t, "[[failures]]\nbackend = {}\nat_s = {at:?}", b % n);
        if let Some(d) = down {
            let _ = writeln!(t, "down_for_s = {d:?}");
        }
    }
    for (at, len) in &p.waves {
        let _ = writeln!(t, "[[waves]]\nat_s = {at:?}\nfor_s = {len:?}");
    }
    t
}

fn run_params(p: &Params) -> PolicyResult {
    let text = to_toml(p);
    let s = Scenario::from_toml_str(&text, "random.toml")
        .unwrap_or_else(|e| panic!("generated an invalid scenario: {e}\n{text}"));
    let mut result = run(&s, &[policy::NAMES[p.policy].to_owned()], &mut |_, _| {});
    result.policies.remove(0)
}

proptest! {
    // 64 cases unless PROPTEST_CASES says otherwise.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn random_scenarios_conserve_sessions(p in params()) {
        let r = run_params(&p);
        check_conservation(&r);
        let m = &r.summary;
        let disconnected = m.ended.get("disconnected").copied().unwrap_or(0);
        prop_assert!(
            m.counter.naive_final_error <= disconnected,
            "naive ghosts {} > disconnected {disconnected}: {m:?}",
            m.counter.naive_final_error
        );
    }

    #[test]
    fn random_rolling_restarts_conserve_sessions(
        p in params(),
        drain in any::<bool>(),
        shares in (0.05..=1.0f64, 0.05..=1.0f64, 0.0..=1.0f64),
        reconnect in (prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64], 0.0..=5.0f64),
    ) {
        // Each backend gets at most 3 units (deadline, away, gap), all of them 80 % of the
        // run after its first tenth: the restart always fits.
        let n = p.backends.len() as f64;
        let unit = 0.8 * p.duration_s / (3.0 * n);
        let mut text = to_toml(&Params { failures: Vec::new(), ..p.clone() });
        let mode = if drain { "drain" } else { "cut" };
        let _ = writeln!(
            text,
            "[rolling_restart]\nstart_s = {:?}\nmode = \"{mode}\"\nrestart_s = {:?}\ngap_s = {:?}\n\
             reconnect_share = {:?}\nreconnect_after_s = {:?}",
            0.1 * p.duration_s,
            unit * shares.1,
            unit * shares.2,
            reconnect.0,
            reconnect.1,
        );
        if drain {
            let _ = writeln!(text, "drain_deadline_s = {:?}", unit * shares.0);
        }
        let s = Scenario::from_toml_str(&text, "random.toml")
            .unwrap_or_else(|e| panic!("generated an invalid scenario: {e}\n{text}"));
        let mut result = run(&s, &[policy::NAMES[p.policy].to_owned()], &mut |_, _| {});
        let r = result.policies.remove(0);
        check_conservation(&r);
        let restart = r.summary.restart.expect("a rolling restart ran");
        prop_assert_eq!(restart.cut, r.summary.ended["shutdown"]);
        match reconnect.0 {
            0.0 => prop_assert_eq!(restart.reconnects, 0),
            1.0 => prop_assert_eq!(restart.reconnects, restart.cut),
            _ => prop_assert!(restart.reconnects <= restart.cut),
        }
        prop_assert!(restart.refused <= r.summary.rejected);
        prop_assert!(restart.window_overloaded <= restart.window_assigned);
    }

    #[test]
    fn without_disconnects_or_deaths_the_naive_counter_is_exact_at_the_end(p in params()) {
        let p = Params { disconnect: 0.0, failures: Vec::new(), ..p };
        let r = run_params(&p);
        check_conservation(&r);
        prop_assert_eq!(r.summary.counter.naive_final_error, 0);
        prop_assert_eq!(r.summary.counter.naive_max_error, 0);
    }
}
