//! Session traces over OTLP/gRPC (feature `otlp-traces`): the spans `livecount-session`
//! makes for a traced tracker (`SessionTracker::trace_sessions`), through
//! `tracing-opentelemetry` and the OpenTelemetry SDK's batch processor, to a collector.
//!
//! ```no_run
//! use std::time::Duration;
//! use livecount_session::SessionTracker;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tracker: SessionTracker = SessionTracker::default();
//! tracker.trace_sessions("b1");
//! let traces = livecount_report::otlp::traces("http://127.0.0.1:4317")
//!     .sample_ratio(0.25)
//!     .install("b1")?;
//! traces.set_global_default()?; // or compose `traces.layer()` into your own subscriber
//! // ... serve; at shutdown, after the drain:
//! traces.shutdown().await?; // exports what is left (bounded)
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, SpanData,
    SpanExporter,
};
use tonic::transport::Channel;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;

use super::otlp_builder::{blocking, default_resource};
use super::report_exporter::{ExportStats, Stats};
use super::{DEFAULT_TIMEOUT, MIN_INTERVAL, OtlpError, check_endpoint, names};

/// Default delay between batches of finished spans: 5 s (the SDK's and OpenTelemetry's
/// `OTEL_BSP_SCHEDULE_DELAY` default).
pub const DEFAULT_TRACE_INTERVAL: Duration = Duration::from_secs(5);
/// Default share of new traces sampled: all. A session is long and rare next to a
/// request, so a trace of each costs little; lower it for very high start rates. Sampling
/// is parent-based: a caller's `traceparent` decision wins.
pub const DEFAULT_SAMPLE_RATIO: f64 = 1.0;

/// Configures a trace export to `endpoint` (`http://host:4317`); see [`TracesBuilder`].
pub fn traces(endpoint: &str) -> TracesBuilder {
    TracesBuilder {
        endpoint: endpoint.to_owned(),
        ratio: DEFAULT_SAMPLE_RATIO,
        interval: DEFAULT_TRACE_INTERVAL,
        timeout: DEFAULT_TIMEOUT,
        resource: None,
    }
}

/// How session traces are exported: [`traces`] makes one.
#[derive(Debug, Clone)]
pub struct TracesBuilder {
    endpoint: String,
    ratio: f64,
    interval: Duration,
    timeout: Duration,
    resource: Option<Resource>,
}

impl TracesBuilder {
    /// The share of new traces sampled, 0 to 1 (default [`DEFAULT_SAMPLE_RATIO`]), by trace
    /// id; a session whose caller sent a `traceparent` follows the caller's decision.
    pub fn sample_ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }

    /// The delay between batches of finished spans (default [`DEFAULT_TRACE_INTERVAL`],
    /// at least [`MIN_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Bounds each export, connecting included (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The resource the spans describe; the default is the SDK's (`OTEL_SERVICE_NAME`,
    /// `OTEL_RESOURCE_ATTRIBUTES`) with `service.instance.id` = the backend's name.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resource = Some(resource);
        self
    }

    /// Starts the export for the backend `name`; the spans go out on the current tokio
    /// runtime. Nothing is traced until the returned export's [`layer`](TraceExport::layer)
    /// is part of a subscriber (or [`set_global_default`](TraceExport::set_global_default)).
    ///
    /// # Errors
    ///
    /// An endpoint [`check_endpoint`] refuses, a ratio outside 0..=1, an interval below
    /// [`MIN_INTERVAL`], a zero timeout, or no tokio runtime.
    pub fn install(self, name: &str) -> Result<TraceExport, OtlpError> {
        check_endpoint(&self.endpoint)?;
        if !(0.0..=1.0).contains(&self.ratio) {
            let e = format!("sample ratio {} is not within 0..=1", self.ratio);
            return Err(OtlpError::Timing(e));
        }
        if self.interval < MIN_INTERVAL {
            let e = format!("interval {:?} is below {MIN_INTERVAL:?}", self.interval);
            return Err(OtlpError::Timing(e));
        }
        if self.timeout.is_zero() {
            return Err(OtlpError::Timing("the export timeout is zero".into()));
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let channel = super::grpc_call::channel(&self.endpoint, self.timeout, &runtime)?;
        let stats = Arc::new(Stats::default());
        let exporter = GrpcSpanExporter {
            client: TraceServiceClient::new(channel),
            runtime,
            timeout: self.timeout,
            resource: ResourceAttributesWithSchema::default(),
            stats: Arc::clone(&stats),
            shut_down: AtomicBool::new(false),
        };
        let batches = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(self.interval)
                    .build(),
            )
            .build();
        let resource = self.resource.unwrap_or_else(|| default_resource(name));
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                self.ratio,
            ))))
            .with_resource(resource)
            .with_span_processor(batches)
            .build();
        Ok(TraceExport {
            provider: Some(provider),
            stats,
        })
    }
}

/// A running trace export. [`shutdown`](TraceExport::shutdown) exports the spans still
/// queued and stops; dropped without one, it stops on a thread of its own (bounded).
#[must_use = "dropping the export stops it"]
pub struct TraceExport {
    provider: Option<SdkTracerProvider>,
    stats: Arc<Stats>,
}

impl TraceExport {
    /// The `tracing` layer that turns the sessions' spans into OpenTelemetry spans for
    /// this export (`tracing-opentelemetry`, without its thread, location, target and timing
    /// attributes), filtered to `livecount`'s targets at `INFO`. Compose it into your
    /// subscriber beside your own layers.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        use tracing_subscriber::Layer as _;
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer())
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_filter(Targets::new().with_target("livecount", LevelFilter::INFO))
    }

    /// Installs a registry with [`layer`](TraceExport::layer) as the process's global
    /// `tracing` subscriber.
    ///
    /// # Errors
    ///
    /// A global subscriber was already set ([`OtlpError::Export`]): compose the layer
    /// into that one instead.
    pub fn set_global_default(&self) -> Result<(), OtlpError> {
        let subscriber = tracing_subscriber::registry().with(self.layer());
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|e| OtlpError::Export(format!("tracing subscriber: {e}")))
    }

    /// The SDK tracer the layer records into.
    pub fn tracer(&self) -> SdkTracer {
        let provider = self.provider.as_ref().expect("present until shutdown");
        provider.tracer_with_scope(
            opentelemetry::InstrumentationScope::builder(names::SCOPE)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        )
    }

    /// What the exports have done so far.
    pub fn stats(&self) -> ExportStats {
        self.stats.read()
    }

    /// Exports the finished spans queued now; returns once they are sent or failed.
    ///
    /// # Errors
    ///
    /// The export failed ([`OtlpError::Export`]).
    pub async fn flush(&self) -> Result<(), OtlpError> {
        let provider = self.provider.clone().expect("present until shutdown");
        blocking(move || provider.force_flush()).await
    }

    /// Exports what is queued and stops; bounded (the SDK gives it 5 s). Spans still open
    /// then (sessions not yet ended) are not exported: end the sessions first (the drain).
    ///
    /// # Errors
    ///
    /// The last export failed or did not finish in time ([`OtlpError::Export`]).
    pub async fn shutdown(mut self) -> Result<(), OtlpError> {
        let provider = self.provider.take().expect("present until shutdown");
        blocking(move || provider.shutdown()).await
    }
}

impl Drop for TraceExport {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // The SDK's shutdown blocks for its last export: never on the dropping thread.
            let _ = std::thread::Builder::new()
                .name("livecount-otlp-traces-shutdown".into())
                .spawn(move || drop(provider.shutdown()));
        }
    }
}

impl fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceExport")
            .field("running", &self.provider.is_some())
            .field("stats", &self.stats.read())
            .finish()
    }
}

/// Each batch as one `TraceService/Export` request, through the official protobufs' client
/// and the same bounded call as the metrics.
struct GrpcSpanExporter {
    client: TraceServiceClient<Channel>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
    resource: ResourceAttributesWithSchema,
    stats: Arc<Stats>,
    shut_down: AtomicBool,
}

impl fmt::Debug for GrpcSpanExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcSpanExporter")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SpanExporter for GrpcSpanExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        // Relaxed: a flag set once; a late export is refused or sent, either is fine.
        if self.shut_down.load(Ordering::Relaxed) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &self.resource),
        };
        let mut client = self.client.clone();
        let result = super::grpc_call::bounded(&self.runtime, self.timeout, async move {
            client.export(request).await
        })
        .await
        .and_then(|response| match response.partial_success {
            Some(p) if p.rejected_spans > 0 => Err(OTelSdkError::InternalFailure(format!(
                "{} spans rejected: {}",
                p.rejected_spans, p.error_message
            ))),
            _ => Ok(()),
        });
        self.stats.note(&result);
        result
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // Relaxed: see `export`.
        self.shut_down.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}
