//! `--otlp-*`: the agent's OpenTelemetry export ([`OtlpArgs`] → [`OtlpConfig`]): the load
//! report as metrics and each session as a span, installed with `livecount_report::otlp`
//! when the agent starts and flushed when it stops.

use std::sync::Arc;
use std::time::Duration;

use livecount_report::LoadBoard;
use livecount_report::otlp::{self, OtlpError, OtlpHandle, TracesBuilder};

use crate::flag_values::{seconds, share};

/// The agent's `service.name`, unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES`
/// name it otherwise; `service.instance.id` is the backend's name.
pub(crate) const SERVICE_NAME: &str = "livecount-agent";

/// Where and how often the agent pushes its load reports as OTLP metrics and its sessions'
/// spans.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// The collector's OTLP/gRPC endpoint, `http://host:port` (`--otlp-endpoint`).
    pub endpoint: String,
    /// Between exports (`--otlp-interval-secs`).
    pub interval: Duration,
    /// Bound on one export, connecting included (`--otlp-timeout-secs`).
    pub timeout: Duration,
    /// The share of new traces sampled (`--otlp-trace-ratio`), or `None` for no traces
    /// (`--no-otlp-traces`).
    pub trace_ratio: Option<f64>,
}

impl OtlpConfig {
    /// Starts the export of `board`'s reports.
    pub(crate) fn install(&self, board: &Arc<LoadBoard>) -> Result<OtlpHandle, OtlpError> {
        otlp::builder(&self.endpoint)
            .interval(self.interval)
            .timeout(self.timeout)
            .resource(otlp::named_resource(SERVICE_NAME, board.name()))
            .install(board)
    }

    /// The session traces these flags ask for, to the same endpoint, batched every
    /// interval, with the same timeout.
    pub(crate) fn traces(&self, name: &str) -> Option<TracesBuilder> {
        let ratio = self.trace_ratio?;
        Some(
            otlp::traces(&self.endpoint)
                .sample_ratio(ratio)
                .interval(self.interval)
                .timeout(self.timeout)
                .resource(otlp::named_resource(SERVICE_NAME, name)),
        )
    }
}

/// The `--otlp-*` flags of `livecount-agent serve`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct OtlpArgs {
    /// Push OpenTelemetry metrics (sessions, ends, headroom, session durations) and a span
    /// per session over OTLP/gRPC to this collector, http://HOST:PORT (usually port 4317)
    /// [default: off]
    #[arg(long, value_name = "URL", value_parser = endpoint)]
    otlp_endpoint: Option<String>,
    /// Seconds between OTLP exports, 0.1..=3600
    #[arg(long = "otlp-interval-secs", value_name = "S", default_value = "10",
          allow_negative_numbers = true, requires = "otlp_endpoint",
          value_parser = seconds(0.1, 3600.0))]
    otlp_interval: Duration,
    /// Bound on one OTLP export, connecting included, seconds, 0.01..=5 (the last export
    /// at shutdown gets at most 5 s)
    #[arg(long = "otlp-timeout-secs", value_name = "S", default_value = "3",
          allow_negative_numbers = true, requires = "otlp_endpoint",
          value_parser = seconds(0.01, 5.0))]
    otlp_timeout: Duration,
    /// Share of new session traces sampled, 0..=1; a caller's sampled `traceparent` is
    /// always followed
    #[arg(long = "otlp-trace-ratio", value_name = "R", default_value = "1",
          allow_negative_numbers = true, requires = "otlp_endpoint", value_parser = share)]
    otlp_trace_ratio: f64,
    /// Metrics only: no session spans
    #[arg(
        long = "no-otlp-traces",
        requires = "otlp_endpoint",
        conflicts_with = "otlp_trace_ratio"
    )]
    no_otlp_traces: bool,
}

impl OtlpArgs {
    /// The export these flags ask for, if any.
    pub(crate) fn into_config(self) -> Option<OtlpConfig> {
        Some(OtlpConfig {
            endpoint: self.otlp_endpoint?,
            interval: self.otlp_interval,
            timeout: self.otlp_timeout,
            trace_ratio: (!self.no_otlp_traces).then_some(self.otlp_trace_ratio),
        })
    }
}

/// An OTLP/gRPC endpoint `livecount_report::otlp` accepts.
fn endpoint(text: &str) -> Result<String, String> {
    otlp::check_endpoint(text.trim())
        .map(|()| text.trim().to_owned())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use crate::AgentConfig;

    fn parse(s: &str) -> Result<AgentConfig, String> {
        let args: Vec<String> = s.split_whitespace().map(String::from).collect();
        AgentConfig::from_args(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn off_by_default_and_on_with_an_endpoint() {
        assert_eq!(parse("").unwrap().otlp, None);
        let c = parse("--otlp-endpoint http://127.0.0.1:4317 --otlp-interval-secs 0.5")
            .unwrap()
            .otlp
            .unwrap();
        assert_eq!(c.endpoint, "http://127.0.0.1:4317");
        assert_eq!(c.interval, std::time::Duration::from_millis(500));
        assert_eq!(c.timeout, std::time::Duration::from_secs(3));
        assert_eq!(c.trace_ratio, Some(1.0), "traces on, every one, by default");
        let c = parse("--otlp-endpoint http://h:4317 --otlp-trace-ratio 0.25").unwrap();
        assert_eq!(c.otlp.unwrap().trace_ratio, Some(0.25));
        let c = parse("--otlp-endpoint http://h:4317 --no-otlp-traces").unwrap();
        assert_eq!(c.otlp.unwrap().trace_ratio, None);
    }

    #[test]
    fn absurd_values_name_their_flag() {
        for bad in [
            "--otlp-endpoint nowhere",
            "--otlp-endpoint 127.0.0.1:4317",
            "--otlp-endpoint https://collector:4317",
            "--otlp-endpoint http://collector:4318/v1/metrics",
            "--otlp-interval-secs 0 --otlp-endpoint http://h:4317",
            "--otlp-interval-secs 1e19 --otlp-endpoint http://h:4317",
            "--otlp-interval-secs NaN --otlp-endpoint http://h:4317",
            "--otlp-interval-secs -1 --otlp-endpoint http://h:4317",
            "--otlp-timeout-secs 0 --otlp-endpoint http://h:4317",
            "--otlp-timeout-secs 60 --otlp-endpoint http://h:4317",
            "--otlp-trace-ratio 1.5 --otlp-endpoint http://h:4317",
            "--otlp-trace-ratio -0.1 --otlp-endpoint http://h:4317",
            "--otlp-trace-ratio NaN --otlp-endpoint http://h:4317",
        ] {
            let flag = bad.split_whitespace().next().unwrap();
            let e = parse(bad).unwrap_err();
            assert!(e.contains(&format!("'{flag} ")), "{bad}: {e}");
        }
        // An interval with nowhere to send is a mistake, said as one.
        let e = parse("--otlp-interval-secs 5").unwrap_err();
        assert!(e.contains("--otlp-endpoint"), "{e}");
        let e = parse("--otlp-trace-ratio 0.5").unwrap_err();
        assert!(e.contains("--otlp-endpoint"), "{e}");
        let e = parse("--otlp-endpoint http://h:4317 --no-otlp-traces --otlp-trace-ratio 0.5")
            .unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }
}
