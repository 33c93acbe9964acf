//! [`ReportExporter`]: the SDK's collection plus the tracker's duration histogram, as one
//! OTLP request, sent with a bounded wait.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use livecount_session::DurationHistogram;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, ScopeMetrics, metric,
};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use tonic::transport::Channel;

use super::instruments::Cycle;
use super::names;
use crate::LoadReport;

/// Where requests go: the collector, or (in unit tests) a list.
#[derive(Debug)]
pub(crate) enum Sink {
    /// OTLP/gRPC `MetricsService/Export`, each call spawned on `runtime` and bounded by
    /// `timeout` (the reader's thread only waits for its result).
    Grpc {
        client: MetricsServiceClient<Channel>,
        runtime: tokio::runtime::Handle,
        timeout: Duration,
    },
    /// Every request, kept (tests).
    #[cfg(test)]
    Memory(Arc<Mutex<Vec<ExportMetricsServiceRequest>>>),
}

/// Turns each SDK collection into an OTLP request with the duration histogram added from
/// the same report, and sends it. Cumulative temporality: every value is a total since
/// `start` (the tracker's counts are totals since it began).
#[derive(Debug)]
pub(crate) struct ReportExporter {
    cycle: Arc<Cycle>,
    sink: Sink,
    start: SystemTime,
    stats: Arc<Stats>,
    shut_down: AtomicBool,
}

/// What an export has done so far: [`OtlpHandle::stats`](super::OtlpHandle::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportStats {
    /// Requests the receiver accepted whole.
    pub succeeded: u64,
    /// Requests that failed: refused, timed out, or partly rejected.
    pub failed: u64,
    /// The last failure, if any.
    pub last_error: Option<String>,
}

/// What the exports did, shared with the handle.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    succeeded: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Stats {
    pub(crate) fn read(&self) -> ExportStats {
        // Relaxed: two statistics, read for display; they order nothing.
        ExportStats {
            succeeded: self.succeeded.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    pub(crate) fn note(&self, result: &OTelSdkResult) {
        // Relaxed: see `read`.
        match result {
            Ok(()) => self.succeeded.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                self.failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

impl ReportExporter {
    pub(crate) fn new(cycle: Arc<Cycle>, sink: Sink, stats: Arc<Stats>) -> Self {
        ReportExporter {
            cycle,
            sink,
            start: SystemTime::now(),
            stats,
            shut_down: AtomicBool::new(false),
        }
    }

    /// The request for one collection: the SDK's metrics and the histogram of `report`.
    fn request(
        &self,
        metrics: &ResourceMetrics,
        report: &LoadReport,
    ) -> ExportMetricsServiceRequest {
        let mut request = ExportMetricsServiceRequest::from(metrics);
        let histogram = duration_metric(report, self.start, SystemTime::now());
        if let Some(resource) = request.resource_metrics.first_mut() {
            match resource
                .scope_metrics
                .iter_mut()
                .find(|s| s.scope.as_ref().is_some_and(|s| s.name == names::SCOPE))
            {
                Some(scope) => scope.metrics.push(histogram),
                None => resource.scope_metrics.push(ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: names::SCOPE.into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    metrics: vec![histogram],
                    schema_url: String::new(),
                }),
            }
        }
        request
    }
}

impl PushMetricExporter for ReportExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        // Relaxed: a flag set once; a late export is refused or sent, either is fine.
        if self.shut_down.load(Ordering::Relaxed) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let report = self.cycle.finish();
        let request = self.request(metrics, &report);
        let result = self.sink.send(request).await;
        self.stats.note(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(()) // nothing is buffered: each export is sent (or failed) before it returns
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // Relaxed: see `export`.
        self.shut_down.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

impl Sink {
    async fn send(&self, request: ExportMetricsServiceRequest) -> OTelSdkResult {
        match self {
            Sink::Grpc {
                client,
                runtime,
                timeout,
            } => {
                let mut client = client.clone();
                let response = super::grpc_call::bounded(runtime, *timeout, async move {
                    client.export(request).await
                })
                .await?;
                match response.partial_success {
                    Some(p) if p.rejected_data_points > 0 => {
                        Err(OTelSdkError::InternalFailure(format!(
                            "{} data points rejected: {}",
                            p.rejected_data_points, p.error_message
                        )))
                    }
                    _ => Ok(()),
                }
            }
            #[cfg(test)]
            Sink::Memory(kept) => {
                kept.lock().unwrap().push(request);
                Ok(())
            }
        }
    }
}

/// `livecount.session.duration`: the report's histogram per end reason, as it is
/// (cumulative since the tracker began; the bucket bounds in seconds; the counts per
/// bucket, not cumulative, as OTLP has them).
pub(crate) fn duration_metric(report: &LoadReport, start: SystemTime, now: SystemTime) -> Metric {
    let nanos = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    };
    let (start, now) = (nanos(start), nanos(now));
    let data_points = report
        .durations
        .iter()
        .map(|(reason, h)| HistogramDataPoint {
            attributes: vec![KeyValue {
                key: names::END_REASON.into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(reason.clone())),
                }),
                ..Default::default()
            }],
            start_time_unix_nano: start.min(now),
            time_unix_nano: now,
            count: h.count(),
            sum: Some(h.sum_secs()),
            bucket_counts: h.buckets().to_vec(),
            explicit_bounds: bounds_secs(),
            ..Default::default()
        })
        .collect();
    Metric {
        name: names::DURATION.into(),
        description: "How long ended sessions lasted, by end reason.".into(),
        unit: "s".into(),
        data: Some(metric::Data::Histogram(Histogram {
            data_points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        })),
        ..Default::default()
    }
}

/// [`DurationHistogram::BOUNDS`] in seconds: 0.1 … 3600, the Prometheus histogram's `le`s.
pub(crate) fn bounds_secs() -> Vec<f64> {
    DurationHistogram::BOUNDS
        .iter()
        .map(Duration::as_secs_f64)
        .collect()
}
