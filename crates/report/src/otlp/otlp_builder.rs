//! [`OtlpBuilder`], [`OtlpHandle`] and [`OtlpError`]: installing the export and stopping it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::instruments::{Cycle, register};
use super::report_exporter::{ExportStats, ReportExporter, Sink, Stats};
use super::{DEFAULT_INTERVAL, DEFAULT_TIMEOUT, MIN_INTERVAL, names};
use crate::LoadBoard;

/// Configures the OTLP export of a [`LoadBoard`]'s reports: [`super::builder`].
///
/// ```
/// use std::time::Duration;
/// let builder = livecount_report::otlp::builder("http://127.0.0.1:4317")
///     .interval(Duration::from_secs(5))
///     .timeout(Duration::from_secs(2));
/// # drop(builder);
/// ```
#[derive(Debug, Clone)]
pub struct OtlpBuilder {
    endpoint: String,
    interval: Duration,
    timeout: Duration,
    resource: Option<Resource>,
}

/// Why the export could not be installed or stopped cleanly.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpError {
    /// The endpoint is not an `http://host:port` URL (this build has no TLS).
    Endpoint(String),
    /// The interval is below [`MIN_INTERVAL`](super::MIN_INTERVAL), or the timeout is zero.
    Timing(String),
    /// [`OtlpBuilder::install`] was called outside a tokio runtime.
    NoRuntime,
    /// The final export (or a flush) failed or did not finish within its bound.
    Export(String),
}

impl fmt::Display for OtlpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtlpError::Endpoint(e) => write!(f, "OTLP endpoint: {e}"),
            OtlpError::Timing(e) => write!(f, "OTLP timing: {e}"),
            OtlpError::NoRuntime => f.write_str("OTLP export: install it inside a tokio runtime"),
            OtlpError::Export(e) => write!(f, "OTLP export: {e}"),
        }
    }
}

impl std::error::Error for OtlpError {}

/// Checks that `endpoint` is an `http://host:port` URL, as an OTLP/gRPC endpoint is given
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`): a scheme, a host, no path.
///
/// ```
/// use livecount_report::otlp::check_endpoint;
/// assert!(check_endpoint("http://127.0.0.1:4317").is_ok());
/// assert!(check_endpoint("http://collector:4317/").is_ok());
/// assert!(check_endpoint("127.0.0.1:4317").is_err()); // no scheme
/// assert!(check_endpoint("https://collector:4317").is_err()); // no TLS in this build
/// assert!(check_endpoint("http://collector:4317/v1/metrics").is_err()); // OTLP/HTTP's path
/// ```
pub fn check_endpoint(endpoint: &str) -> Result<(), OtlpError> {
    let bad = |why: &str| Err(OtlpError::Endpoint(format!("{endpoint:?}: {why}")));
    let Ok(uri) = endpoint.parse::<tonic::codegen::http::Uri>() else {
        return bad("not a URL");
    };
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => return bad("https needs TLS, which this build has not: use http://"),
        _ => return bad("expected http://host:port"),
    }
    if uri.host().is_none_or(str::is_empty) {
        return bad("no host");
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return bad("OTLP/gRPC takes no path (the port is usually 4317, not OTLP/HTTP's 4318)");
    }
    Ok(())
}

impl OtlpBuilder {
    pub(crate) fn new(endpoint: &str) -> Self {
        OtlpBuilder {
            endpoint: endpoint.to_owned(),
            interval: DEFAULT_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
            resource: None,
        }
    }

    /// Exports every `interval` (default [`DEFAULT_INTERVAL`](super::DEFAULT_INTERVAL);
    /// at least [`MIN_INTERVAL`](super::MIN_INTERVAL)).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Bounds each export, connecting included (default
    /// [`DEFAULT_TIMEOUT`](super::DEFAULT_TIMEOUT)). The SDK waits at most 5 s for the
    /// final export at shutdown, so a longer timeout can outlast it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The OpenTelemetry resource the metrics describe. The default is the SDK's (from
    /// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`), with `service.instance.id`
    /// set to the board's name unless those set it.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resource = Some(resource);
        self
    }

    /// Starts exporting `board`'s latest report: every instrument is read from it at each
    /// interval, on the SDK's reader thread; the requests go out on the current tokio
    /// runtime. Nothing is sent at once: the first export is one interval away (or
    /// [`OtlpHandle::flush`]).
    ///
    /// # Errors
    ///
    /// An endpoint or timing [`check_endpoint`] and the bounds refuse, or no tokio runtime.
    pub fn install(self, board: &Arc<LoadBoard>) -> Result<OtlpHandle, OtlpError> {
        check_endpoint(&self.endpoint)?;
        if self.interval < MIN_INTERVAL {
            let e = format!("interval {:?} is below {MIN_INTERVAL:?}", self.interval);
            return Err(OtlpError::Timing(e));
        }
        if self.timeout.is_zero() {
            return Err(OtlpError::Timing("the export timeout is zero".into()));
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| OtlpError::NoRuntime)?;
        let channel = super::grpc_call::channel(&self.endpoint, self.timeout, &runtime)?;
        let sink = Sink::Grpc {
            client: MetricsServiceClient::new(channel),
            runtime,
            timeout: self.timeout,
        };
        let resource = self
            .resource
            .unwrap_or_else(|| default_resource(board.name()));
        Ok(OtlpHandle::start(board, sink, resource, self.interval))
    }
}

/// The SDK's default resource, with `service.instance.id` = `name` unless it has one.
pub(crate) fn default_resource(name: &str) -> Resource {
    let detected = Resource::builder().build();
    if detected.get(&names::SERVICE_INSTANCE_ID.into()).is_some() {
        return detected;
    }
    Resource::builder()
        .with_attribute(KeyValue::new(names::SERVICE_INSTANCE_ID, name.to_owned()))
        .build()
}

/// The resource of a program that knows its own name: the SDK's (from `OTEL_SERVICE_NAME`
/// and `OTEL_RESOURCE_ATTRIBUTES`), with `service.name` = `service` unless the environment
/// names the service (the SDK's fallback is `unknown_service:<executable>`) and
/// `service.instance.id` = `instance` unless it sets one. For
/// [`OtlpBuilder::resource`] and `TracesBuilder::resource` (feature `otlp-traces`).
///
/// ```
/// use opentelemetry::Key;
///
/// let resource = livecount_report::otlp::named_resource("my-voice-service", "b1");
/// let service = resource.get(&Key::new("service.name")).unwrap();
/// # if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
/// assert_eq!(service.as_str(), "my-voice-service");
/// # }
/// ```
pub fn named_resource(service: &str, instance: &str) -> Resource {
    let detected = default_resource(instance);
    let key = opentelemetry::Key::new(names::SERVICE_NAME);
    let unnamed = detected
        .get(&key)
        .is_none_or(|v| v.as_str().starts_with("unknown_service"));
    if !unnamed {
        return detected;
    }
    let mut builder = Resource::builder_empty();
    for (k, v) in detected.iter() {
        builder = builder.with_attribute(KeyValue::new(k.clone(), v.clone()));
    }
    builder
        .with_attribute(KeyValue::new(names::SERVICE_NAME, service.to_owned()))
        .build()
}

/// A running OTLP export: [`shutdown`](OtlpHandle::shutdown) sends the last report and
/// stops it. Dropped without a shutdown, it stops on a thread of its own (the SDK's final
/// export, bounded), never blocking the dropping task.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::LoadBoard;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build()?));
/// // Nothing listens on port 1: every export fails, within its timeout, and is counted.
/// let otlp = livecount_report::otlp::builder("http://127.0.0.1:1")
///     .timeout(Duration::from_millis(200))
///     .install(&board)?;
/// assert!(otlp.flush().await.is_err());
/// let stats = otlp.stats();
/// assert_eq!((stats.succeeded, stats.failed), (0, 1));
/// assert!(otlp.shutdown().await.is_err()); // the last export failed too
/// # Ok(()) }
/// ```
#[must_use = "dropping the handle stops the export"]
pub struct OtlpHandle {
    provider: Option<SdkMeterProvider>,
    stats: Arc<Stats>,
}

impl OtlpHandle {
    /// The provider, its instruments and the exporter over `sink`.
    pub(crate) fn start(
        board: &Arc<LoadBoard>,
        sink: Sink,
        resource: Resource,
        interval: Duration,
    ) -> Self {
        let cycle = Arc::new(Cycle::new(Arc::clone(board)));
        let stats = Arc::new(Stats::default());
        let exporter = ReportExporter::new(Arc::clone(&cycle), sink, Arc::clone(&stats));
        let reader = PeriodicReader::builder(exporter)
            .with_interval(interval)
            .build();
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .build();
        let scope = InstrumentationScope::builder(names::SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        register(&provider.meter_with_scope(scope), &cycle);
        OtlpHandle {
            provider: Some(provider),
            stats,
        }
    }

    /// What the exports have done so far.
    pub fn stats(&self) -> ExportStats {
        self.stats.read()
    }

    /// Exports the latest report now (the interval goes on); returns once it is sent or
    /// has failed, within the export timeout.
    ///
    /// # Errors
    ///
    /// The export failed ([`OtlpError::Export`]).
    pub async fn flush(&self) -> Result<(), OtlpError> {
        let provider = self.provider.clone().expect("present until shutdown");
        blocking(move || provider.force_flush()).await
    }

    /// Sends the latest report one last time and stops; bounded (the SDK gives its final
    /// export 5 s). Call it after the last [`LoadBoard::publish`] so the collector sees the
    /// final counts (a drained backend's `draining` 1 and its last ends).
    ///
    /// # Errors
    ///
    /// The final export failed or did not finish in time ([`OtlpError::Export`]).
    pub async fn shutdown(mut self) -> Result<(), OtlpError> {
        let provider = self.provider.take().expect("present until shutdown");
        blocking(move || provider.shutdown()).await
    }
}

/// Runs the SDK's blocking `f` off the runtime's workers (the export it waits for is
/// spawned on them: a current-thread runtime would otherwise wait for itself).
pub(crate) async fn blocking(
    f: impl FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
) -> Result<(), OtlpError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(OtlpError::Export(e.to_string())),
        Err(e) => Err(OtlpError::Export(e.to_string())),
    }
}

impl Drop for OtlpHandle {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // The SDK's shutdown blocks (up to 5 s) for a final export spawned on the
            // runtime: never on the dropping thread, which may be one of its workers.
            let _ = std::thread::Builder::new()
                .name("livecount-otlp-shutdown".into())
                .spawn(move || drop(provider.shutdown()));
        }
    }
}

impl fmt::Debug for OtlpHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpHandle")
            .field("running", &self.provider.is_some())
            .field("stats", &self.stats.read())
            .finish()
    }
}
