//! One OTLP/gRPC call, bounded: the metrics' and the traces' exporters both send this way.

use std::future::Future;
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkError;
use tonic::transport::{Channel, Endpoint};

use super::OtlpError;

/// A lazily connected channel to `endpoint` whose connecting and calls are bounded by
/// `timeout`, its worker spawned on `runtime`.
pub(crate) fn channel(
    endpoint: &str,
    timeout: Duration,
    runtime: &tokio::runtime::Handle,
) -> Result<Channel, OtlpError> {
    let endpoint = Endpoint::from_shared(endpoint.to_owned())
        .map_err(|e| OtlpError::Endpoint(format!("{endpoint:?}: {e}")))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let _inside = runtime.enter(); // the channel's worker is spawned on it
    Ok(endpoint.connect_lazy())
}

/// Runs `call` on `runtime` (tonic needs its reactor and timers) within `timeout`; the SDK
/// thread that awaits this only waits for the outcome.
pub(crate) async fn bounded<T, F>(
    runtime: &tokio::runtime::Handle,
    timeout: Duration,
    call: F,
) -> Result<T, OTelSdkError>
where
    F: Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'static,
    T: Send + 'static,
{
    let task = runtime.spawn(async move { tokio::time::timeout(timeout, call).await });
    match task.await {
        Ok(Ok(Ok(response))) => Ok(response.into_inner()),
        Ok(Ok(Err(status))) => Err(OTelSdkError::InternalFailure(format!(
            "OTLP export: {}: {}",
            status.code(),
            status.message()
        ))),
        Ok(Err(_elapsed)) => Err(OTelSdkError::Timeout(timeout)),
        Err(join) => Err(OTelSdkError::InternalFailure(format!(
            "OTLP export task: {join}"
        ))),
    }
}
