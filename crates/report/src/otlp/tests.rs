//! The whole pipeline (SDK provider, observable callbacks, exporter) into a list, checked
//! against the tracker; the duration histogram against a plain reference by proptest.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livecount_capacity::CapacityConfig;
use livecount_session::{DurationHistogram, EndReason, Phase, SessionTracker};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, HistogramDataPoint, Metric, NumberDataPoint, metric, number_data_point,
};
use opentelemetry_sdk::Resource;
use proptest::prelude::*;

use super::instruments::Cycle;
use super::report_exporter::{Sink, bounds_secs};
use super::*;
use crate::{LoadBoard, LoadReport, ManualUtilisation};

type Kept = Arc<Mutex<Vec<ExportMetricsServiceRequest>>>;

fn board() -> Arc<LoadBoard> {
    let ten = Duration::from_secs(10);
    let (cpu, set) = ManualUtilisation::new();
    set.set(0.25);
    let config = CapacityConfig::new(0.8, 2.0, ten, ten).unwrap();
    Arc::new(
        LoadBoard::builder("b1", config)
            .max_sessions(50)
            .utilisation(cpu)
            .build(),
    )
}

/// An export into a list, as `install` wires it but for the sink.
fn start(board: &Arc<LoadBoard>) -> (OtlpHandle, Kept) {
    let kept = Kept::default();
    let sink = Sink::Memory(Arc::clone(&kept));
    let resource = Resource::builder_empty().build();
    let handle = OtlpHandle::start(board, sink, resource, Duration::from_secs(3600));
    (handle, kept)
}

fn metric<'a>(request: &'a ExportMetricsServiceRequest, name: &str) -> &'a Metric {
    let scopes = &request.resource_metrics[0].scope_metrics;
    assert_eq!(
        scopes.len(),
        1,
        "one scope: the SDK's and the histogram together"
    );
    assert_eq!(scopes[0].scope.as_ref().unwrap().name, names::SCOPE);
    let found: Vec<_> = scopes[0]
        .metrics
        .iter()
        .filter(|m| m.name == name)
        .collect();
    assert_eq!(found.len(), 1, "{name} once");
    found[0]
}

fn attr(
    attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> Option<(String, String)> {
    let kv = attributes.first()?;
    let Some(Any::StringValue(v)) = kv.value.as_ref()?.value.clone() else {
        panic!("{kv:?}")
    };
    Some((kv.key.clone(), v))
}

/// Every point of a gauge or sum as (attribute value or "", value as f64).
fn points(m: &Metric) -> BTreeMap<String, f64> {
    let (points, monotonic): (&[NumberDataPoint], Option<bool>) = match m.data.as_ref().unwrap() {
        metric::Data::Gauge(g) => (&g.data_points, None),
        metric::Data::Sum(s) => {
            assert_eq!(
                s.aggregation_temporality,
                AggregationTemporality::Cumulative as i32
            );
            (&s.data_points, Some(s.is_monotonic))
        }
        other => panic!("{other:?}"),
    };
    let _ = monotonic;
    points
        .iter()
        .map(|p| {
            let value = match p.value.unwrap() {
                number_data_point::Value::AsDouble(x) => x,
                number_data_point::Value::AsInt(n) => n as f64,
            };
            (attr(&p.attributes).map_or(String::new(), |(_, v)| v), value)
        })
        .collect()
}

fn histograms(m: &Metric) -> BTreeMap<String, HistogramDataPoint> {
    let Some(metric::Data::Histogram(h)) = &m.data else {
        panic!("{m:?}")
    };
    assert_eq!(
        h.aggregation_temporality,
        AggregationTemporality::Cumulative as i32
    );
    assert_eq!(m.unit, "s");
    h.data_points
        .iter()
        .map(|p| {
            let (key, reason) = attr(&p.attributes).unwrap();
            assert_eq!(key, names::END_REASON);
            (reason, p.clone())
        })
        .collect()
}

/// Checks `request` says exactly what `report` says.
fn assert_is(request: &ExportMetricsServiceRequest, r: &LoadReport) {
    let active = points(metric(request, names::ACTIVE));
    assert_eq!(active["listening"] as u64, r.listening);
    assert_eq!(active["generating"] as u64, r.generating);
    assert_eq!(points(metric(request, names::STARTS))[""] as u64, r.started);
    let ends = points(metric(request, names::ENDS));
    let want: BTreeMap<_, _> = r
        .ended_by_reason
        .iter()
        .map(|(k, n)| (k.clone(), *n as f64))
        .collect();
    assert_eq!(ends, want);
    assert_eq!(
        points(metric(request, names::REFUSALS))[""] as u64,
        r.refused
    );
    assert_eq!(points(metric(request, names::HEADROOM))[""], r.headroom);
    assert_eq!(
        points(metric(request, names::EFFECTIVE_CAPACITY))[""],
        r.effective_capacity
    );
    assert_eq!(
        points(metric(request, names::UTILIZATION))[""],
        r.utilisation
    );
    assert_eq!(
        points(metric(request, names::DRAINING))[""],
        f64::from(u8::from(r.draining))
    );
    assert_eq!(
        points(metric(request, names::LIMIT))[""] as u64,
        r.max_sessions.unwrap()
    );
    let durations = histograms(metric(request, names::DURATION));
    assert_eq!(durations.len(), r.durations.len());
    for (reason, h) in &r.durations {
        let p = &durations[reason];
        assert_eq!(p.bucket_counts, h.buckets().to_vec(), "{reason}");
        assert_eq!(
            (p.count, p.sum),
            (h.count(), Some(h.sum_secs())),
            "{reason}"
        );
        assert_eq!(p.explicit_bounds, bounds_secs());
        assert_eq!(
            p.count, r.ended_by_reason[reason],
            "the histogram counts the ends"
        );
        assert!(p.start_time_unix_nano <= p.time_unix_nano);
    }
}

#[tokio::test]
async fn an_export_is_the_latest_report_whole() {
    let tracker: SessionTracker = SessionTracker::default();
    let board = board();
    let (otlp, kept) = start(&board);
    let t0 = Instant::now();
    let secs = |s: f64| t0 + Duration::from_secs_f64(s);
    let mut open: Vec<_> = (0..5).map(|_| tracker.try_start_at(t0).unwrap()).collect();
    open[0].set_phase(Phase::Generating);
    for (reason, at) in [
        (EndReason::Completed, 42.0),
        (EndReason::Completed, 0.05),
        (EndReason::TimedOut, 5000.0),
        (EndReason::Cancelled, 2.5),
    ] {
        tracker.try_start_at(t0).unwrap().end_at(reason, secs(at));
    }
    tracker.note_refused();
    let report = board.publish(tracker.snapshot());
    otlp.flush().await.unwrap();
    let requests = kept.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_is(&requests[0], &report);
    assert_eq!((report.active, report.generating, report.ended), (5, 1, 4));
    // 42 s in the bucket up to 60 s; 5000 s above the last bound; 2.5 s on its bound.
    let d = histograms(metric(&requests[0], names::DURATION));
    assert_eq!(d["completed"].bucket_counts[0], 1);
    assert_eq!(d["completed"].bucket_counts[7], 1);
    assert_eq!(d["timed_out"].bucket_counts[13], 1);
    assert_eq!(d["cancelled"].bucket_counts[3], 1);
    assert_eq!(d["completed"].sum, Some(42.05));

    // Later exports carry the new totals (cumulative), and the drain.
    open.pop().unwrap().end_at(EndReason::Failed, secs(0.3));
    let report = {
        tracker.begin_drain();
        board.publish(tracker.snapshot())
    };
    otlp.flush().await.unwrap();
    assert_is(kept.lock().unwrap().last().unwrap(), &report);
    assert_eq!(otlp.stats().succeeded, 2);
    otlp.shutdown().await.unwrap();
    assert_eq!(
        kept.lock().unwrap().len(),
        3,
        "shutdown sends the last report"
    );
    drop(open);
}

#[tokio::test]
async fn unmeasured_utilisation_and_no_limit_are_left_out_not_zero() {
    let (cpu, _never) = ManualUtilisation::new();
    let config = CapacityConfig::builder().build().unwrap();
    let board = Arc::new(LoadBoard::builder("b", config).utilisation(cpu).build());
    let (otlp, kept) = start(&board);
    otlp.flush().await.unwrap();
    let request = kept.lock().unwrap()[0].clone();
    for name in [names::UTILIZATION, names::LIMIT] {
        let scope = &request.resource_metrics[0].scope_metrics[0];
        assert!(
            scope.metrics.iter().all(|m| m.name != name),
            "{name} present"
        );
    }
    otlp.shutdown().await.unwrap();
}

#[test]
fn one_collection_reads_one_report() {
    let tracker: SessionTracker = SessionTracker::default();
    let board = board();
    let cycle = Cycle::new(Arc::clone(&board));
    let first = cycle.report();
    let _s = tracker.start();
    board.publish(tracker.snapshot());
    assert!(
        Arc::ptr_eq(&cycle.report(), &first),
        "pinned for the collection"
    );
    assert!(
        Arc::ptr_eq(&cycle.finish(), &first),
        "the exporter reads it too"
    );
    assert_eq!(
        cycle.report().active,
        1,
        "the next collection reads the new report"
    );
    assert_eq!(cycle.finish().active, 1);
    // Nothing pinned (a collection without callbacks): the latest.
    assert_eq!(cycle.finish().active, 1);
}

#[test]
fn endpoints_and_timings_are_checked() {
    for bad in [
        "",
        "localhost:4317",
        "grpc://h:4317",
        "http://",
        "https://h:4317",
        "http://h:4318/v1/metrics",
    ] {
        assert!(
            matches!(check_endpoint(bad), Err(OtlpError::Endpoint(_))),
            "{bad}"
        );
    }
    check_endpoint(DEFAULT_ENDPOINT).unwrap();
    let board = board();
    let short = builder(DEFAULT_ENDPOINT)
        .interval(Duration::from_millis(99))
        .install(&board);
    assert!(matches!(short, Err(OtlpError::Timing(_))));
    let zero = builder(DEFAULT_ENDPOINT)
        .timeout(Duration::ZERO)
        .install(&board);
    assert!(matches!(zero, Err(OtlpError::Timing(_))));
    let outside = install(&board, DEFAULT_ENDPOINT, DEFAULT_INTERVAL);
    assert_eq!(outside.unwrap_err(), OtlpError::NoRuntime);
}

/// Nothing listens: each export fails within its timeout, is counted, and the next one
/// tries again; shutdown returns within its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_collector_costs_one_bounded_failure_per_export() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: connections are refused
    let board = board();
    let otlp = builder(&format!("http://127.0.0.1:{port}"))
        .timeout(Duration::from_millis(500))
        .install(&board)
        .unwrap();
    let t = Instant::now();
    assert!(matches!(otlp.flush().await, Err(OtlpError::Export(_))));
    assert!(otlp.flush().await.is_err());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let stats = otlp.stats();
    assert_eq!((stats.succeeded, stats.failed), (0, 2));
    assert!(stats.last_error.is_some());
    let t = Instant::now();
    assert!(otlp.shutdown().await.is_err());
    assert!(t.elapsed() < Duration::from_secs(6));
}

/// Ends with random reasons and durations, phases: the exported histograms and counts
/// equal a plain reference built from the same list.
fn reference(ends: &[(usize, u64)]) -> BTreeMap<&'static str, (Vec<u64>, u64)> {
    let mut out = BTreeMap::new();
    for &(reason, micros) in ends {
        let (buckets, sum) = out
            .entry(EndReason::ALL[reason].as_str())
            .or_insert_with(|| (vec![0u64; DurationHistogram::BUCKETS], 0u64));
        let bucket = bounds_secs()
            .iter()
            .position(|&b| micros as f64 / 1e6 <= b)
            .unwrap_or(DurationHistogram::BUCKETS - 1);
        buckets[bucket] += 1;
        *sum += micros;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn exported_durations_equal_a_reference(
        ends in prop::collection::vec((0..EndReason::COUNT, 0u64..8_000_000_000), 0..40),
        open in 0usize..6,
        generating in 0usize..6,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let tracker: SessionTracker = SessionTracker::default();
        let board = board();
        let _inside = runtime.enter();
        let (otlp, kept) = start(&board);
        let t0 = Instant::now();
        for &(reason, micros) in &ends {
            let s = tracker.try_start_at(t0).unwrap();
            s.end_at(EndReason::ALL[reason], t0 + Duration::from_micros(micros));
        }
        let mut held: Vec<_> = (0..open).map(|_| tracker.start()).collect();
        for s in held.iter_mut().take(generating) {
            s.set_phase(Phase::Generating);
        }
        let report = board.publish(tracker.snapshot());
        runtime.block_on(otlp.flush()).unwrap();
        let request = kept.lock().unwrap()[0].clone();
        assert_is(&request, &report);
        let got = histograms(metric(&request, names::DURATION));
        for (reason, (buckets, sum)) in reference(&ends) {
            prop_assert_eq!(&got[reason].bucket_counts, &buckets);
            prop_assert_eq!(got[reason].sum, Some(sum as f64 / 1e6));
        }
        let counted: u64 = got.values().map(|p| p.count).sum();
        prop_assert_eq!(counted, ends.len() as u64);
        let active = points(metric(&request, names::ACTIVE));
        prop_assert_eq!(active["generating"] as usize, generating.min(open));
        prop_assert_eq!((active["listening"] + active["generating"]) as usize, open);
        runtime.block_on(otlp.shutdown()).unwrap();
    }
}
