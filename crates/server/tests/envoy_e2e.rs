//! End to end on loopback: a real Envoy (1.40, `client_side_weighted_round_robin` with
//! ORCA out-of-band load reports) in front of three `livecount-agent` processes, one of them
//! hot. gRPC sessions (`livecount.agent.v1.Agent/Converse`) go through Envoy's listener;
//! Envoy weighs each backend by the ORCA reports it streams from the agent's `--grpc` port,
//! whose `rps_fractional ÷ application_utilization` is the backend's headroom in thousandths of a session.
//!
//! Checked: every report is accepted (`lb_orca_oob.report_errors` = 0), the hot backend
//! gets almost nothing and the cold ones even shares, killed and closed clients are counted
//! exactly by their backends, and a backend SIGTERM'd under load ends its sessions
//! `Shutdown`, exits 0 and gets no new sessions afterwards.
//!
//! `#[ignore]`d (it needs the Envoy binary from `scripts/lb_tools.sh`, ~25 s):
//! `scripts/test.sh` runs it. The config is `deploy/envoy/envoy.yaml.in`.

use std::time::{Duration, Instant};

mod common;

use common::envoy::*;
use common::lb::*;

/// The config the test runs (and the one `docs/lb/envoy.md` shows).
const TEMPLATE: &str = include_str!("../../../deploy/envoy/envoy.yaml.in");

/// The cluster's ORCA counters from `/stats`: (reports_received, report_errors,
/// stream_failures, active_sessions).
async fn orca_stats(envoy: &Envoy) -> (u64, u64, u64, u64) {
    let body = admin_get(&envoy.admin_addr(), "/stats?filter=lb_orca_oob")
        .await
        .expect("Envoy's /stats answers");
    let stat = |name: &str| -> u64 {
        let key = format!("cluster.{CLUSTER}.lb_orca_oob.{name}: ");
        body.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /stats: {body}"))
    };
    (
        stat("reports_received"),
        stat("report_errors"),
        stat("stream_failures"),
        stat("active_sessions"),
    )
}

/// Waits until Envoy is ready and uses ORCA weights: `/ready` answers, every host is
/// healthy with an ORCA stream open, and at least three reports per host have arrived
/// (one a second: the 1 s blackout period has passed). Returns the ORCA stats then.
async fn wait_for_weights(envoy: &Envoy, fleet: &Fleet) -> (u64, u64, u64, u64) {
    let start = Instant::now();
    let n = fleet.backends.len() as u64;
    loop {
        if admin_get(&envoy.admin_addr(), "/ready").await.is_some() {
            let stats = orca_stats(envoy).await;
            let hosts = hosts(envoy, fleet).await.unwrap_or_default();
            let healthy =
                hosts.len() == fleet.backends.len() && hosts.iter().all(|h| h.health == "healthy");
            if stats.0 >= 3 * n && stats.3 == n && healthy {
                return stats;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "Envoy never applied ORCA weights: stats {stats:?}, hosts {hosts:?}\n{}",
                envoy_log(envoy)
            );
        } else {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "Envoy's admin /ready never answered 200\n{}",
                envoy_log(envoy)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs envoy (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn envoy_weighs_backends_by_orca_and_counts_return_to_zero() {
    let t0 = Instant::now();
    let mut fleet = Fleet::start("envoy", 3, 2, &[]);
    let (envoy, config) = start_envoy(&mut fleet, TEMPLATE, "envoy");
    let front = envoy.front();
    let ready = wait_for_weights(&envoy, &fleet).await;
    fleet.ready().await;
    eprintln!(
        "envoy ready after {:.1} s; ORCA (received, errors, stream failures, streams) {ready:?}",
        t0.elapsed().as_secs_f64()
    );
    // Steady state first: one session straight on each cold backend (held through the
    // wave, outside its counts). An idle agent advertises only its capacity model's prior
    // (about 2 sessions of headroom, weight ~2 000), and its first session raises that to
    // tens or hundreds of sessions: without this, the first cold backend whose loaded
    // report Envoy applies takes every new session for up to a report period (see
    // docs/lb/envoy.md). Loaded: above `WARM_LOADED` sessions of headroom.
    let warm = fleet.warm_cold_backends().await;
    wait_for_loaded_weights(&envoy, &fleet, |view| view.len() == fleet.backends.len()).await;

    // Phase 1: 60 sessions over 6 s, each held 4–6 s and speaking every 700 ms; 30 % of
    // the clients are killed (connection cut with the stream open), the rest say bye.
    let timeline = Timeline::record(&fleet);
    let steady = steady_wave(&envoy, &fleet, warm, timeline, None).await;
    let table = share_table(&fleet, &steady.new, &steady.samples);
    let envoy_mean = mean_weights(&steady.envoy_weights, fleet.backends.len());
    for (s, w) in steady.samples.iter().zip(&steady.envoy_weights).step_by(4) {
        eprintln!(
            "t={:4.1} active {:?} orca {:.1?} envoy {:?}",
            s.t, s.active, s.orca_weight, w
        );
    }
    assert_shares("envoy", &steady.new, fleet.hot);
    let (received, errors, stream_failures, streams) = orca_stats(&envoy).await;
    eprintln!(
        "ORCA at Envoy: reports_received {received}, report_errors {errors}, \
         stream_failures {stream_failures}, active_sessions {streams}"
    );
    assert!(received > ready.0, "reports kept arriving: {received}");
    assert_eq!(
        errors,
        0,
        "Envoy rejected ORCA reports\n{}",
        envoy_log(&envoy)
    );
    eprintln!(
        "{table}Envoy host weights (mean of {}): {envoy_mean:.1?}",
        steady.envoy_weights.len()
    );

    // Phase 2: 12 held sessions, SIGTERM b1 under them; then new sessions go to b2/b3.
    let plans = vec![
        Plan {
            hold: Duration::from_secs(6),
            speak_every: Duration::from_millis(700),
            kill: false,
        };
        12
    ];
    let held = tokio::spawn(wave(front, plans, Duration::from_millis(40), 3));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on_b1 = load_of(&fleet.backends[0].http_addr()).await.active;
    assert!(on_b1 > 0, "b1 holds some of the 12 sessions");
    let last = fleet.sigterm_drained(0, on_b1).await;
    // Envoy's connect-only health check takes the exited b1 out (interval 0.5 s).
    let out = Instant::now();
    loop {
        let view = hosts(&envoy, &fleet).await.unwrap_or_default();
        if view
            .first()
            .is_some_and(|h| h.health.contains("failed_active_hc"))
        {
            break;
        }
        assert!(
            out.elapsed() < Duration::from_secs(5),
            "Envoy did not mark b1 unhealthy within 5 s: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b1_out_ms = out.elapsed().as_millis();
    let mid = [
        load_of(&fleet.backends[1].http_addr()).await,
        load_of(&fleet.backends[2].http_addr()).await,
    ];
    let plans = vec![
        Plan {
            hold: Duration::from_secs(1),
            speak_every: Duration::from_millis(300),
            kill: false,
        };
        10
    ];
    let fresh = wave(front, plans, Duration::from_millis(100), 1).await;
    assert_eq!((fresh.opened, fresh.closed), (10, 10), "{fresh:?}");
    let held = tokio::time::timeout(Duration::from_secs(20), held)
        .await
        .expect("the held sessions end")
        .unwrap();
    eprintln!("phase 2: held {held:?}; new after SIGTERM {fresh:?}");
    assert_eq!(held.opened, 12, "{held:?}");
    assert_eq!(
        held.ended_by_server, on_b1,
        "b1's clients see UNAVAILABLE: {held:?}"
    );
    assert_eq!(held.closed + held.ended_by_server, 12, "{held:?}");
    let end = fleet.settled(&[1, 2]).await;
    let late = [
        end[0].started - mid[0].started,
        end[1].started - mid[1].started,
    ];
    eprintln!(
        "new sessions after b1 left: b2 {}, b3 (hot) {}",
        late[0], late[1]
    );
    assert_eq!(
        late[0] + late[1],
        10,
        "all of them on b2/b3, none lost: {late:?}"
    );
    assert!(late[1] <= 3, "the hot b3 takes at most a few: {late:?}");

    // The report.
    let secs = t0.elapsed().as_secs_f64();
    let mean = |i: usize| {
        steady.samples.iter().map(|s| s.orca_weight[i]).sum::<f64>()
            / steady.samples.len().max(1) as f64
    };
    let body = format!(
        "Three agents (`--cores 1 --work-ms 1 --report-secs 0.5`; b3 burns 90 % of its core) \
         behind Envoy 1.40, `client_side_weighted_round_robin` with ORCA out-of-band \
         reports (`crates/report/src/orca.rs`: weight = headroom in thousandths of a session). 60 gRPC \
         `Converse` sessions over 6 s, each held 4–6 s; {killed} clients killed \
         (connection cut), {closed} closed with `bye`. Before the wave, one session was \
         opened straight on each cold backend and held through it (steady state: an idle \
         agent advertises only its model's prior, see `docs/lb/envoy.md`); the counts \
         below are the wave's.\n\n\
         ## New sessions per backend\n\n{table}\n\
         Envoy's own host weights (mean of {n} samples of `/clusters` during the wave; \
         Envoy truncates qps ÷ utilisation to an integer, at least 1): \
         b1 {e0:.1}, b2 {e1:.1}, b3 (hot) {e2:.1}. Mean ORCA weight advertised: \
         b1 {m0:.1}, b2 {m1:.1}, b3 {m2:.2}.\n\n\
         ## ORCA at Envoy\n\n\
         | stat | value |\n| --- | ---: |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.reports_received` | {received} |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.report_errors` | {errors} |\n\
         | `cluster.{CLUSTER}.lb_orca_oob.stream_failures` | {stream_failures} |\n\n\
         ## Endings\n\n\
         Backends counted {disconnected} `disconnected` (= killed clients: Envoy resets \
         the upstream stream with `RST_STREAM` `INTERNAL_ERROR`, a failed request body to \
         the backend), {completed} `completed` (= closes, plus the {warmed} warm-up sessions), 0 `cancelled`; every backend \
         settled at active 0, started = ended.\n\n\
         ## SIGTERM\n\n\
         b1 was SIGTERM'd with {on_b1} of 12 held sessions open: it exited 0, last line \
         `{last}`. Envoy's health check took it out {b1_out_ms} ms after it exited; the \
         next 10 sessions all succeeded, b2 {l0} and b3 (hot) {l1}.\n\n\
         Test duration {secs:.1} s.\n\n\
         ## Config (`deploy/envoy/envoy.yaml.in`, as rendered)\n\n```yaml\n{config}```\n",
        warmed = steady.warmed,
        killed = steady.tally.killed,
        closed = steady.tally.closed,
        n = steady.envoy_weights.len(),
        e0 = envoy_mean[0],
        e1 = envoy_mean[1],
        e2 = envoy_mean[2],
        m0 = mean(0),
        m1 = mean(1),
        m2 = mean(2),
        disconnected = ended_by(&steady.before, &steady.after, "disconnected"),
        completed = ended_by(&steady.before, &steady.after, "completed"),
        l0 = late[0],
        l1 = late[1],
    );
    let dir = write_report(
        "envoy",
        "Envoy client-side WRR with ORCA",
        &body,
        &fleet,
        &steady.samples,
    );
    eprintln!("report: {}; test took {secs:.1} s", dir.display());
}
