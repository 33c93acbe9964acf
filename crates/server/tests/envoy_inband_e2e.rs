//! End to end on loopback: a real Envoy (1.40, `client_side_weighted_round_robin` with
//! `enable_oob_load_report: false`) in front of three `livecount-agent` processes, one of
//! them hot, weighing each backend only by the in-band ORCA report its responses carry
//! (`endpoint-load-metrics-bin` in every gRPC call's trailers: the agent's default
//! `--inband-orca auto`). The config is `deploy/envoy/envoy-inband.yaml.in`.
//!
//! 1. **Cold start, sessions only.** A fresh Envoy has no report from anyone: 30 sessions
//!    (2 s each) go through it and the test measures how long after the first one Envoy's
//!    host weights put the hot backend below a tenth of the cold ones, and how many
//!    sessions it took meanwhile (a session reports only when it ends).
//! 2. **Steady state.** Health `Check` calls through Envoy every 100 ms (not sessions;
//!    each ends at once and reports) keep the weights fresh; 60 sessions over 6 s, 30 %
//!    killed: the hot backend takes at most 10 %, the cold ones split as Envoy's weights
//!    ask within 3.29 × the split's measured spread ([`COLD_SPLIT_SD`]), every
//!    backend counts its sessions back to 0 by the right reasons.
//! 3. **Against out-of-band, same fleet.** An Envoy with the out-of-band config
//!    (`deploy/envoy/envoy.yaml.in`) started on the same agents: how long from its start
//!    until its weights put the hot backend below a tenth of the cold ones (it needs no
//!    traffic).
//!
//! Envoy 1.40 has no in-band counterpart of the `lb_orca_oob.*` stats: its `/clusters` host
//! weights (sampled every 100–250 ms) are what shows the in-band reports arriving.
//!
//! `#[ignore]`d (it needs the Envoy binary from `scripts/lb_tools.sh`, ~45 s):
//! `scripts/test.sh` runs it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod common;

use common::envoy::*;
use common::lb::*;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The in-band config the test runs (and `docs/lb/in-band-orca.md` shows).
const TEMPLATE: &str = include_str!("../../../deploy/envoy/envoy-inband.yaml.in");

/// The out-of-band config, for the comparison on the same fleet.
const OOB_TEMPLATE: &str = include_str!("../../../deploy/envoy/envoy.yaml.in");

/// "Avoided": Envoy weighs the hot backend at most a tenth of the lighter cold one, and
/// the cold ones above Envoy's default weight of 1 (so from reports).
fn avoided(view: &[HostView], hot: usize) -> bool {
    let cold = view
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != hot)
        .map(|(_, h)| h.weight)
        .min()
        .unwrap_or(0);
    view.len() > hot && cold > 1 && u64::from(view[hot].weight) * 10 <= u64::from(cold)
}

/// Polls Envoy's `/clusters` every 100 ms until the hot backend is [`avoided`] or `limit`
/// passes; returns when (since `since`) and the weights then.
async fn until_avoided(
    envoy: &Envoy,
    fleet: &Fleet,
    since: Instant,
    limit: Duration,
) -> Option<(Duration, Vec<u32>)> {
    while since.elapsed() < limit {
        let view = hosts(envoy, fleet).await.unwrap_or_default();
        if avoided(&view, fleet.hot) {
            return Some((since.elapsed(), view.iter().map(|h| h.weight).collect()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Waits until Envoy's admin answers `/ready` and every host is healthy.
async fn wait_ready(envoy: &Envoy, fleet: &Fleet) {
    let start = Instant::now();
    loop {
        if admin_get(&envoy.admin_addr(), "/ready").await.is_some() {
            let view = hosts(envoy, fleet).await.unwrap_or_default();
            if view.len() == fleet.backends.len() && view.iter().all(|h| h.health == "healthy") {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "Envoy never became ready\n{}",
            envoy_log(envoy)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run-to-run standard deviation of the first cold backend's share of the wave's cold
/// sessions, measured: eight runs (one in CI and seven in a row on 3b3f8e3,
/// 2026-12-03) split 36/24, 43/17, 29/31, 24/36, 36/24, 23/37, 29/31, 37/23 at Envoy
/// weights within 4 % of each other: ±6.9 sessions of 60, 0.115 of the share, nearly twice
/// a binomial's 3.9. The probes share Envoy's scheduler with the sessions, and it restarts
/// its pick order at every weight update (docs/lb/envoy.md, "Scheduler rebuilds"), so the
/// picks come in correlated runs, not as independent coins. The out-of-band test, with no
/// probes, holds the tighter 1.5× bound.
const COLD_SPLIT_SD: f64 = 0.115;

/// Health `Check` calls through Envoy about every `every` until aborted; each one's
/// trailers carry its backend's report to Envoy. Returns the count of answered calls and
/// the task.
fn probe(
    front: SocketAddr,
    every: Duration,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    tokio::task::JoinHandle<()>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let calls = std::sync::Arc::new(AtomicU64::new(0));
    let count = std::sync::Arc::clone(&calls);
    let task = tokio::spawn(async move {
        let mut client = HealthClient::new(channel(front).await);
        let mut rng = fastrand::Rng::with_seed(5);
        loop {
            // Jittered (0.5–1.5 × `every`): probes at the sessions' own fixed cadence would
            // interleave with them in Envoy's scheduler, one host getting every probe and the
            // other every session (seen at 100 ms each: 46 / 14).
            tokio::time::sleep(every.mul_f64(0.5 + rng.f64())).await;
            let call = client.check(HealthCheckRequest::default());
            let answered = tokio::time::timeout(STEP, call).await;
            assert!(
                matches!(answered, Ok(Ok(_))),
                "a Health/Check through Envoy failed: {answered:?}"
            );
            // Relaxed: a count read after the task is aborted.
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    (calls, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn envoy_weighs_backends_by_inband_orca_reports() {
    let t0 = Instant::now();
    let mut fleet = Fleet::start("envoy-inband", 3, 2, &[]);
    let (envoy, config) = start_envoy(&mut fleet, TEMPLATE, "envoy-inband");
    let front = envoy.front();
    wait_ready(&envoy, &fleet).await;
    fleet.ready().await;
    let view = hosts(&envoy, &fleet).await.unwrap_or_default();
    eprintln!(
        "envoy ready after {:.1} s; no reports yet: {view:?}",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        !avoided(&view, fleet.hot),
        "no weights before any response: {view:?}"
    );

    // 1. Cold start: sessions only, 30 over 6 s, each 2 s.
    let before = fleet.loads().await;
    let timeline = Timeline::record(&fleet);
    let first = Instant::now();
    let cold_start = tokio::spawn(wave(
        front,
        plans(30, |_| Duration::from_secs(2), |_| false),
        Duration::from_millis(200),
        2,
    ));
    let seen = until_avoided(&envoy, &fleet, first, Duration::from_secs(15)).await;
    let hot_at_avoidance = load_of(&fleet.backends[fleet.hot].http_addr())
        .await
        .started
        - before[fleet.hot].started;
    let cold_tally = cold_start.await.unwrap();
    let after_cold = fleet.settled(&[0, 1, 2]).await;
    let cold_new = new_sessions(&before, &after_cold);
    let (inband_avoid, inband_weights) =
        seen.expect("Envoy weighs the hot backend down from in-band reports within 15 s");
    eprintln!(
        "cold start: {cold_tally:?}; new sessions {cold_new:?}; hot avoided {:.2} s after the \
         first session (weights {inband_weights:?}), having taken {hot_at_avoidance}",
        inband_avoid.as_secs_f64()
    );
    assert_eq!(cold_tally.closed, 30, "{cold_tally:?}");
    assert_eq!(cold_new.iter().sum::<u64>(), 30);

    // 2. Steady state: probes keep the weights fresh; the cold backends are warmed first
    // (one held session each, as in the out-of-band test: an idle agent advertises only
    // its model's prior).
    let (probes, probing) = probe(front, Duration::from_millis(100));
    let warm = fleet.warm_cold_backends().await;
    wait_for_loaded_weights(&envoy, &fleet, |view| avoided(view, fleet.hot)).await;
    let wave_start = first.elapsed().as_secs_f64();
    let steady = steady_wave(&envoy, &fleet, warm, timeline, Some(probing)).await;
    let probes = probes.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("steady: {probes} probes");
    let wave_samples: Vec<Sample> = steady
        .samples
        .iter()
        .filter(|s| s.t >= wave_start)
        .cloned()
        .collect();
    let table = share_table(&fleet, &steady.new, &wave_samples);
    let envoy_mean = mean_weights(&steady.envoy_weights, fleet.backends.len());
    eprintln!(
        "{table}Envoy host weights (mean of {}): {envoy_mean:.1?}",
        steady.envoy_weights.len()
    );
    let envoy_offset = wave_samples
        .len()
        .saturating_sub(steady.envoy_weights.len());
    for (k, s) in wave_samples.iter().enumerate().step_by(2) {
        let envoy_now = k
            .checked_sub(envoy_offset)
            .and_then(|j| steady.envoy_weights.get(j));
        eprintln!(
            "t={:4.1} active {:?} advertised {:.0?} envoy {:?}",
            s.t, s.active, s.orca_weight, envoy_now
        );
    }
    assert_shares_within(
        "envoy in-band",
        &steady.new,
        fleet.hot,
        &envoy_mean,
        Z_999 * COLD_SPLIT_SD,
    );

    // 3. Out-of-band on the same fleet: how long until its weights avoid the hot backend.
    let (oob, _) = start_envoy(&mut fleet, OOB_TEMPLATE, "envoy-oob");
    let oob_start = Instant::now();
    let (oob_avoid, oob_weights) = until_avoided(&oob, &fleet, oob_start, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the out-of-band Envoy never avoided the hot backend\n{}",
                envoy_log(&oob)
            )
        });
    eprintln!(
        "out-of-band Envoy: hot avoided {:.2} s after Envoy started, no traffic (weights {oob_weights:?})",
        oob_avoid.as_secs_f64()
    );

    let secs = t0.elapsed().as_secs_f64();
    let body = format!(
        "Three agents (`--cores 1 --work-ms 1 --report-secs 0.5`, default `--inband-orca auto`; \
         b3 burns 90 % of its core) behind Envoy 1.40, `client_side_weighted_round_robin` with \
         `enable_oob_load_report: false`: every weight comes from the in-band report in a \
         response's trailers (`endpoint-load-metrics-bin`, the same fields as the out-of-band \
         stream: `crates/report/src/inband.rs`). See `docs/lb/in-band-orca.md`.\n\n\
         ## How fast the hot backend was avoided\n\n\
         | | in-band (this config) | out-of-band (`deploy/envoy/envoy.yaml.in`, same fleet, same run) |\n\
         | --- | --- | --- |\n\
         | what starts the clock | the first session through a fresh Envoy | Envoy's start (no traffic needed) |\n\
         | hot weighted below a tenth of the cold ones after | {ia:.2} s | {oa:.2} s |\n\
         | Envoy's host weights then (b1, b2, b3 hot) | {inband_weights:?} | {oob_weights:?} |\n\
         | sessions the hot backend took before that | {hot_at_avoidance} of the first sessions (30 over 6 s, 2 s each) | 0 (weights exist before the first session; the out-of-band test's wave: 0 of 60) |\n\n\
         In-band, nothing is known until a response ends: a session reports once, when it \
         ends, so the first 2 s of sessions were placed round robin, then the 1 s blackout \
         period and the 1 s weight update period passed. The cold start placed \
         {c0} / {c1} / {c2} of 30 sessions (b1 / b2 / b3 hot).\n\n\
         ## Steady state: new sessions per backend\n\n\
         Health `Check` calls through Envoy about every 100 ms (jittered 50–150 ms: at the \
         sessions' own 100 ms cadence they interleaved with them in Envoy's scheduler and one \
         cold backend got most sessions; {probes} in all; not sessions, each \
         ends at once and carries a report) kept the weights fresh. Before the wave, one \
         session was opened straight on each cold backend and held through it (as in the \
         out-of-band test). 60 gRPC `Converse` sessions over 6 s, each held 4–6 s; \
         {killed} clients killed (connection cut), {closed} closed with `bye`.\n\n{table}\n\
         Envoy's own host weights (mean of {n} samples of `/clusters` during the wave): \
         b1 {e0:.1}, b2 {e1:.1}, b3 (hot) {e2:.1}.\n\n\
         Backends counted {disconnected} `disconnected` (= killed clients), {completed} \
         `completed` (= closes, plus the {warmed} warm-up sessions), 0 `cancelled`, 0 `failed`; \
         every backend settled at active 0, started = ended.\n\n\
         Test duration {secs:.1} s.\n\n\
         ## Config (`deploy/envoy/envoy-inband.yaml.in`, as rendered)\n\n```yaml\n{config}```\n",
        ia = inband_avoid.as_secs_f64(),
        oa = oob_avoid.as_secs_f64(),
        c0 = cold_new[0],
        c1 = cold_new[1],
        c2 = cold_new[2],
        warmed = steady.warmed,
        killed = steady.tally.killed,
        closed = steady.tally.closed,
        n = steady.envoy_weights.len(),
        e0 = envoy_mean[0],
        e1 = envoy_mean[1],
        e2 = envoy_mean[2],
        disconnected = ended_by(&steady.before, &steady.after, "disconnected"),
        completed = ended_by(&steady.before, &steady.after, "completed"),
    );
    let dir = write_report(
        "envoy-inband",
        "Envoy client-side WRR with in-band ORCA",
        &body,
        &fleet,
        &steady.samples,
    );
    eprintln!("report: {}; test took {secs:.1} s", dir.display());
}
