//! End to end on loopback: a stock gRPC C-core client (Python `grpcio`, the
//! `weighted_round_robin` policy with `enableOobLoadReport: false`) balancing
//! `livecount.agent.v1.Agent/Converse` streams over three `livecount-agent` processes, one of
//! them hot, by the **per-call** (in-band) ORCA report each call's trailers carry
//! (`endpoint-load-metrics-bin`, the agent's default `--inband-orca auto`). C-core's own
//! trace (`weighted_round_robin_lb`) gives the weights it computed, as in `grpc_wrr_e2e`.
//!
//! 1. **Cold start, sessions only** (a fresh channel, 30 sessions of 2 s over 6 s): how
//!    long after the first call C-core's scheduler weighs the hot backend below a tenth of
//!    the cold ones, and how many sessions the hot backend took; then the same run with
//!    out-of-band reports on the same fleet, for comparison.
//! 2. **Steady state**: `Health/Check` calls on the same channel every 100 ms (not
//!    sessions; each call ends at once and reports) from the channel's start; 60 sessions
//!    over 6 s, 30 % cancelled: the hot backend takes at most 10 % (the cold ones' split is
//!    reported, not judged: see the assertion), C-core used every report, and the agents
//!    count every ending exactly.
//!
//! `#[ignore]`d: it needs `grpcio` in `.tools/venv` (`scripts/lb_tools.sh`), ~50 s.

use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::grpc_client::*;
use common::lb::{Fleet, Timeline, assert_hot_share, new_sessions, share_table, write_report};

/// The cold-start run's arguments (with `--no-oob` or not).
const COLD: [&str; 16] = [
    "--sessions",
    "30",
    "--ramp",
    "6",
    "--hold-min",
    "2",
    "--hold-max",
    "2",
    "--kill-share",
    "0",
    "--seed",
    "11",
    "--warmup",
    "0",
    "--call-timeout",
    "20",
];

/// Seconds from the run's first call (`first_call_at`, or `ready_at` with `from_ready`)
/// until C-core's first scheduler that weighed the hot backend at most a tenth of the
/// lighter cold one, with the weights then; `None` if it never did.
fn avoided_after(run: &Value, fleet: &Fleet, from_ready: bool) -> Option<(f64, String)> {
    let key = |i: usize| subchannel(fleet.backends[i].grpc);
    let start = run[if from_ready {
        "ready_at"
    } else {
        "first_call_at"
    }]
    .as_f64()?;
    run["weights"]["schedulers"]
        .as_array()?
        .iter()
        .find_map(|s| {
            let w = |i: usize| s["weights"][key(i)].as_f64();
            let cold = (0..fleet.backends.len())
                .filter(|&i| i != fleet.hot)
                .map(w)
                .collect::<Option<Vec<f64>>>()?;
            let lightest = cold.iter().copied().fold(f64::INFINITY, f64::min);
            let hot = w(fleet.hot)?;
            (hot * 10.0 <= lightest).then(|| {
                let at = s["at"].as_f64().unwrap_or(f64::NAN);
                (at - start, labelled(s, fleet).unwrap_or_default())
            })
        })
}

/// Runs `name` with `args` and returns its summary and the new sessions per backend.
async fn counted(
    client: &mut Client,
    fleet: &Fleet,
    name: &str,
    args: &[&str],
) -> (Value, Vec<u64>) {
    let before = fleet.loads().await;
    let run = client.run(name, args, Duration::from_secs(45)).await;
    let after = fleet.settled(&[0, 1, 2]).await;
    assert_eq!(count(&run, "failed"), 0, "{name}: {}", run["failures"]);
    assert_eq!(count(&run, "unfinished"), 0, "{name}");
    (run, new_sessions(&before, &after))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs grpcio (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn grpc_core_wrr_weighs_agents_by_per_call_reports() {
    let started = Instant::now();
    let fleet = Fleet::start("grpcpercall", 3, 2, &[]);
    let mut client = Client::for_fleet(&fleet);
    fleet.ready().await;
    let timeline = Timeline::record(&fleet);

    // 1. Cold start, per call: nothing is known until a call ends.
    let mut args = COLD.to_vec();
    args.push("--no-oob");
    let (cold, cold_new) = counted(&mut client, &fleet, "cold-inband", &args).await;
    let cold_avoid = avoided_after(&cold, &fleet, false);
    eprintln!("cold start, per call: new sessions {cold_new:?}; hot avoided after {cold_avoid:?}");
    assert_eq!(count(&cold, "closed"), 30);
    let (cold_avoid_s, cold_weights) =
        cold_avoid.expect("C-core weighs the hot backend down from per-call reports");
    // The same run, out-of-band, on the same fleet.
    let (oob, oob_new) = counted(&mut client, &fleet, "cold-oob", &COLD).await;
    let oob_avoid = avoided_after(&oob, &fleet, false);
    eprintln!("cold start, out-of-band: new sessions {oob_new:?}; hot avoided after {oob_avoid:?}");
    assert_eq!(count(&oob, "closed"), 30);

    // 2. Steady state: health calls keep per-call reports coming from the channel's start;
    // the cold backends are warmed first (one held session each, as in grpc_wrr_e2e).
    let warm = fleet.warm_cold_backends().await;
    let balance = balance_wave(
        &mut client,
        &fleet,
        warm,
        &["--no-oob", "--health-every", "0.1"],
    )
    .await;
    let (run, new) = (&balance.run, &balance.new);
    let samples = timeline.stop();
    let health = &run["health_calls"];
    eprintln!("health calls {health}");
    assert_eq!(health["failed"], serde_json::json!({}), "{health}");
    // The hot backend is judged; the split between the cold ones is reported, not judged:
    // per-call weights change only when a call ends, and one run (after a warm-up within
    // 1.02×) split 23 / 37 where the out-of-band test's 1.5× bound
    // holds. Why C-core's per-call weights drift apart is not known yet.
    assert_hot_share("grpc per-call", new, fleet.hot);
    eprintln!("grpc per-call: cold split {new:?} (not judged)");
    // C-core logs "not updating" for every call that ended without a report: here only the
    // cancelled ones (a reset call gets no trailers). A report of ours always has qps and
    // utilisation above 0, so none of ours may be among them.
    let ignored = run["weights"]["not_updating"].as_array().unwrap();
    let unreported = |e: &Value| e["qps"] == 0.0 && e["utilization"] == 0.0;
    assert!(
        ignored.iter().all(unreported),
        "C-core ignored reports: {ignored:?}"
    );
    assert!(
        ignored.len() as u64 <= balance.cancelled,
        "{} calls without a report, {} cancelled",
        ignored.len(),
        balance.cancelled
    );
    let weights = hot_weighs_least(run, &fleet);
    let steady_avoid = avoided_after(run, &fleet, true);
    let schedulers = schedulers(run, &fleet);
    let last_weights = schedulers.last().cloned().unwrap_or_default();

    let elapsed = started.elapsed().as_secs_f64();
    let balance_samples: Vec<_> = samples
        .iter()
        .filter(|s| s.t >= samples.last().map_or(0.0, |l| l.t) - balance.secs)
        .cloned()
        .collect();
    let table = share_table(&fleet, new, &balance_samples);
    let weight_table = weight_table(&fleet, &weights, "per-call reports");
    let fmt_avoid = |a: &Option<(f64, String)>| {
        a.as_ref()
            .map_or("never".to_owned(), |(s, w)| format!("{s:.2} s ({w})"))
    };
    let options = serde_json::to_string_pretty(&run["options"]).unwrap();
    let body = format!(
        "A stock gRPC C-core client (Python `grpcio` 1.85, `tests/lb/grpc_wrr_client.py \
         --no-oob`) on one channel to `ipv4:` + the three agents' `--grpc` addresses, \
         `weighted_round_robin` with `enableOobLoadReport: false`: each weight comes from the \
         report in a call's trailers (`endpoint-load-metrics-bin`, the agents' default \
         `--inband-orca auto`; the same fields as the out-of-band stream). b3 burns 90 % of its \
         core. See `docs/lb/in-band-orca.md`.\n\n\
         Channel options:\n\n```json\n{options}\n```\n\n\
         ## How fast the hot backend was avoided (same fleet, same run)\n\n\
         A fresh channel, 30 sessions of 2 s over 6 s, no other calls. C-core's first \
         scheduler with the hot backend at most a tenth of the lighter cold one, counted from \
         the first call:\n\n\
         | reports | hot avoided after (weights then) | new sessions b1 / b2 / b3 (hot) |\n\
         | --- | --- | --- |\n\
         | per call (in-band) | {cold_avoid_s:.2} s ({cold_weights}) | {c0} / {c1} / {c2} |\n\
         | out-of-band | {oob_avoid} | {o0} / {o1} / {o2} |\n\n\
         Per call, a backend reports only when a call on it ends: until the first 2 s sessions \
         ended and the 1 s blackout period passed, C-core placed sessions round robin.\n\n\
         ## Steady state: new sessions\n\n\
         `Health/Check` on the same channel about every 100 ms (jittered 50–150 ms) from the \
         channel's start \
         ({health_ok} calls, none failed; not sessions: each ends at once and carries a report), \
         2.5 s before the first session; one session held straight on each cold backend. \
         60 `Converse` sessions over 6 s, each held 4–6 s, 30 % cancelled abruptly. The hot \
         backend was avoided {steady_avoid} after the channel was ready.\n\n{table}\n\
         {client}\n\n\
         ## Weights C-core computed\n\n\
         From C-core's `weighted_round_robin_lb` trace: each per-call report's \
         `rps_fractional ÷ application_utilization` (the backend's headroom in thousandths of \
         a session). Reports C-core ignored (qps or utilisation not positive): 0; calls that \
         ended without one (C-core logs them \"not updating\" with qps and utilisation 0): \
         {ignored}, all of them cancelled sessions ({cancelled} cancelled: a reset call gets no \
         trailers). The last scheduler: {last_weights}.\n\n{weight_table}\n\
         Test duration: {elapsed:.1} s.",
        c0 = cold_new[0],
        c1 = cold_new[1],
        c2 = cold_new[2],
        oob_avoid = fmt_avoid(&oob_avoid),
        o0 = oob_new[0],
        o1 = oob_new[1],
        o2 = oob_new[2],
        health_ok = health["ok"],
        steady_avoid = fmt_avoid(&steady_avoid),
        ignored = ignored.len(),
        cancelled = balance.cancelled,
        client = balance.summary(),
    );
    let dir = write_report(
        "grpc-percall",
        "gRPC C-core weighted_round_robin with per-call (in-band) ORCA",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}", dir.join("REPORT.md").display());
}
