//! End to end on loopback: the agent's OTLP metrics export (`--otlp-endpoint`) into a real
//! OTLP/gRPC receiver, `tests/lb/otlp_receiver.py`: grpcio serving
//! `opentelemetry.proto.collector.metrics.v1.MetricsService/Export` on the official
//! protobufs (PyPI `opentelemetry-proto`), which decodes every request and writes it down
//! as JSON. No OpenTelemetry Collector is packaged on the registries this project installs
//! from (Debian, PyPI: see `docs/otel.md`), so this is the receiver.
//!
//! 1. Sessions on the agent's tracker with known durations (virtual instants: 50 ms to
//!    5000 s) and end reasons, three left open (one generating), one refusal: once the
//!    agent publishes, the receiver's decoded requests say exactly what the tracker says —
//!    active by phase, starts, ends by reason, each reason's duration histogram (counts
//!    per bucket, count, sum, the bounds), refusals, headroom and effective capacity of
//!    that report, `draining` 0 — under the documented names, units and temporality.
//! 2. The agent drains (SIGTERM's path, no grace): the open sessions end `Shutdown` and the
//!    export's last request, sent at shutdown, is the agent's last report (`draining` 1,
//!    nothing open, three more `shutdown` ends).
//!
//! `#[ignore]`d: it needs `opentelemetry-proto` and `grpcio` in `.tools/venv`
//! (`scripts/lb_tools.sh`); about 5 s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use livecount_report::LoadReport;
use livecount_report::otlp::names;
use livecount_session::{EndReason, Phase};
use serde_json::Value;

mod common;

use common::otlp::{Receiver, num};

/// What one request says, in the tracker's terms.
#[derive(Debug, Clone, PartialEq, Default)]
struct Seen {
    active: BTreeMap<String, u64>,
    starts: u64,
    ends: BTreeMap<String, u64>,
    /// Per reason: counts per bucket, count, sum (s).
    durations: BTreeMap<String, (Vec<u64>, u64, f64)>,
    bounds: Vec<f64>,
    refusals: u64,
    headroom: f64,
    effective: f64,
    draining: u64,
}

/// A data point's one attribute value, or "".
fn attribute(point: &Value, key: &str) -> String {
    let attributes = point["attributes"].as_array().cloned().unwrap_or_default();
    match attributes.as_slice() {
        [] => String::new(),
        [kv] => {
            assert_eq!(kv["key"], key, "{point}");
            kv["value"]["string_value"].as_str().unwrap().to_owned()
        }
        more => panic!("one attribute at most: {more:?}"),
    }
}

/// Checks a metric's unit and kind; returns its points by attribute value.
fn points(metric: &Value, unit: &str, kind: &str) -> BTreeMap<String, Value> {
    assert_eq!(metric["unit"], unit, "{metric}");
    let data = &metric[kind];
    assert!(data.is_object(), "{} is not a {kind}", metric["name"]);
    if kind != "gauge" {
        let temporality = &data["aggregation_temporality"];
        assert_eq!(
            temporality, "AGGREGATION_TEMPORALITY_CUMULATIVE",
            "{metric}"
        );
    }
    let key = match metric["name"].as_str().unwrap() {
        names::ACTIVE => names::PHASE,
        _ => names::END_REASON,
    };
    data["data_points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (attribute(p, key), p.clone()))
        .collect()
}

fn seen(request: &Value) -> Seen {
    let resource = &request["resource_metrics"][0];
    let instance = resource["resource"]["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|kv| kv["key"] == names::SERVICE_INSTANCE_ID)
        .map(|kv| kv["value"]["string_value"].clone());
    assert_eq!(instance, Some("otlp".into()), "the board's name");
    let scopes = resource["scope_metrics"].as_array().unwrap();
    assert_eq!(scopes.len(), 1);
    assert_eq!(scopes[0]["scope"]["name"], names::SCOPE);
    let metrics: BTreeMap<&str, &Value> = scopes[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m))
        .collect();
    let one = |name: &str, unit: &str, kind: &str, field: &str| {
        num(&points(metrics[name], unit, kind)[""][field])
    };
    let counter = |name: &str| {
        let m = metrics[name];
        assert_eq!(m["sum"]["is_monotonic"], true, "{name} is a counter");
        points(m, "{session}", "sum")
    };
    let mut s = Seen {
        starts: num(&counter(names::STARTS)[""]["as_int"]) as u64,
        refusals: num(&counter(names::REFUSALS)[""]["as_int"]) as u64,
        headroom: one(names::HEADROOM, "{session}", "gauge", "as_double"),
        effective: one(names::EFFECTIVE_CAPACITY, "{session}", "gauge", "as_double"),
        draining: one(names::DRAINING, "1", "gauge", "as_int") as u64,
        ..Seen::default()
    };
    let active = metrics[names::ACTIVE];
    assert_ne!(active["sum"]["is_monotonic"], true, "an UpDownCounter");
    for (phase, p) in points(active, "{session}", "sum") {
        s.active.insert(phase, num(&p["as_int"]) as u64);
    }
    for (reason, p) in counter(names::ENDS) {
        s.ends.insert(reason, num(&p["as_int"]) as u64);
    }
    for (reason, p) in points(metrics[names::DURATION], "s", "histogram") {
        let buckets = p["bucket_counts"].as_array().unwrap();
        let buckets = buckets.iter().map(|n| num(n) as u64).collect();
        s.durations
            .insert(reason, (buckets, num(&p["count"]) as u64, num(&p["sum"])));
        s.bounds = p["explicit_bounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(num)
            .collect();
    }
    s
}

/// What `report` says, in the same terms (the truth the export must carry).
fn truth(report: &LoadReport) -> Seen {
    let durations = report.durations.iter().map(|(reason, h)| {
        let v = (h.buckets().to_vec(), h.count(), h.sum_secs());
        (reason.clone(), v)
    });
    Seen {
        active: [
            ("listening".to_owned(), report.listening),
            ("generating".to_owned(), report.generating),
        ]
        .into(),
        starts: report.started,
        ends: report.ended_by_reason.clone(),
        durations: durations.collect(),
        bounds: livecount_session::DurationHistogram::BOUNDS
            .iter()
            .map(Duration::as_secs_f64)
            .collect(),
        refusals: report.refused,
        headroom: report.headroom,
        effective: report.effective_capacity,
        draining: u64::from(report.draining),
    }
}

/// Waits (at most 15 s) for the last request to equal `want()`, the truth (read again at
/// each poll: the board's latest report); panics with the last one seen.
async fn wait_for(receiver: &Receiver, want: impl Fn() -> Seen, what: &str) -> usize {
    let start = Instant::now();
    loop {
        let requests = receiver.metrics();
        let last = requests.last().map(seen);
        let want = want();
        if last.as_ref() == Some(&want) {
            eprintln!(
                "{what}: request {} decoded = truth: {want:?}",
                requests.len()
            );
            return requests.len();
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{what}: after 15 s and {} requests the last decoded is\n{last:?}\nnot the truth\n{want:?}",
            requests.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs opentelemetry-proto and grpcio (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn the_collector_receives_the_trackers_truth() {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("livecount-otlp-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let receiver = Receiver::start(&dir);
    let endpoint = receiver.endpoint();
    // Reports only at start (the agent's and the publisher's first tick, in either order)
    // and when the test publishes: the publisher's next tick is 30 s away.
    let running = common::agent(&[
        "--name",
        "otlp",
        "--report-secs",
        "30",
        "--drain-secs",
        "0",
        "--otlp-endpoint",
        &endpoint,
        "--otlp-interval-secs",
        "0.3",
    ])
    .await;
    let agent = std::sync::Arc::clone(&running.agent);

    // 1. Known durations and reasons; three open, one generating; one refusal.
    let tracker = &agent.tracker();
    let t0 = Instant::now();
    let ends: [(EndReason, f64); 10] = [
        (EndReason::Completed, 0.05),
        (EndReason::Completed, 3.0),
        (EndReason::Completed, 3.0),
        (EndReason::Completed, 42.0),
        (EndReason::Completed, 5000.0),
        (EndReason::TimedOut, 1200.0),
        (EndReason::Cancelled, 0.1),
        (EndReason::Cancelled, 0.7),
        (EndReason::Disconnected, 61.0),
        (EndReason::Failed, 2.5),
    ];
    for (reason, secs) in ends {
        let s = tracker.try_start_at(t0).unwrap();
        assert!(s.end_at(reason, t0 + Duration::from_secs_f64(secs)));
    }
    let mut open: Vec<_> = (0..3).map(|_| tracker.try_start_at(t0).unwrap()).collect();
    open[0].set_phase(Phase::Generating);
    tracker.note_refused();
    let report = agent.publish();
    let snapshot = tracker.snapshot();
    assert_eq!((report.active, report.generating), (3, 1));
    assert_eq!(
        (report.started, report.ended),
        (snapshot.started, snapshot.ended)
    );
    for (reason, h) in snapshot.durations.iter() {
        assert_eq!(report.durations[reason.as_str()], h, "{reason}");
        assert_eq!(
            report.ended_by_reason[reason.as_str()],
            snapshot.ended_by(reason)
        );
    }
    let want = truth(&report);
    assert_eq!(want.durations["completed"].0[7], 1, "42 s: up to 60 s");
    assert_eq!(
        want.durations["completed"].0[13], 1,
        "5000 s: above an hour"
    );
    // The publisher's first tick may land after this publish: a report of the same
    // snapshot counts, with its own utilisation sample (so its own headroom).
    let latest = || {
        let latest = agent.board().latest();
        assert_eq!(truth(&latest).durations, want.durations);
        assert_eq!(
            (latest.started, latest.ended),
            (report.started, report.ended)
        );
        truth(&latest)
    };
    wait_for(&receiver, latest, "running").await;

    // 2. The drain: the open sessions end Shutdown; the last export is the last report.
    let (last, _) = running.drain(std::future::ready(())).await.unwrap();
    assert!(last.draining && last.active == 0);
    assert_eq!(last.ended_by_reason["shutdown"], 3);
    let received = receiver.metrics().len();
    wait_for(&receiver, || truth(&last), "drained").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.metrics().len(),
        received,
        "the last export went out before the drain returned, and none after it"
    );
    drop(open);
    eprintln!("otlp e2e: {:.1} s", started.elapsed().as_secs_f64());
    assert!(started.elapsed() < Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&dir);
}
