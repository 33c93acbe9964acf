//! `--otlp-*`: the agent's OpenTelemetry metrics export ([`OtlpArgs`] → [`OtlpConfig`]),
//! installed with `livecount_report::otlp` when the agent starts and flushed when it stops.

use std::sync::Arc;
use std::time::Duration;

use livecount_report::LoadBoard;
use livecount_report::otlp::{self, OtlpError, OtlpHandle};

use crate::flag_values::seconds;

/// Where and how often the agent pushes its load reports as OTLP metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's OTLP/gRPC endpoint, `http://host:port` (`--otlp-endpoint`).
    pub endpoint: String,
    /// Between exports (`--otlp-interval-secs`).
    pub interval: Duration,
    /// Bound on one export, connecting included (`--otlp-timeout-secs`).
    pub timeout: Duration,
}

impl OtlpConfig {
    /// Starts the export of `board`'s reports.
    pub(crate) fn install(&self, board: &Arc<LoadBoard>) -> Result<OtlpHandle, OtlpError> {
        otlp::builder(&self.endpoint)
            .interval(self.interval)
            .timeout(self.timeout)
            .install(board)
    }
}

/// The `--otlp-*` flags of `livecount-agent serve`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct OtlpArgs {
    /// Push OpenTelemetry metrics (sessions, ends, headroom, session durations) over
    /// OTLP/gRPC to this collector, http://HOST:PORT (usually port 4317) [default: off]
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
}

impl OtlpArgs {
    /// The export these flags ask for, if any.
    pub(crate) fn into_config(self) -> Option<OtlpConfig> {
        Some(OtlpConfig {
            endpoint: self.otlp_endpoint?,
            interval: self.otlp_interval,
            timeout: self.otlp_timeout,
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
        ] {
            let flag = bad.split_whitespace().next().unwrap();
            let e = parse(bad).unwrap_err();
            assert!(e.contains(&format!("'{flag} ")), "{bad}: {e}");
        }
        // An interval with nowhere to send is a mistake, said as one.
        let e = parse("--otlp-interval-secs 5").unwrap_err();
        assert!(e.contains("--otlp-endpoint"), "{e}");
    }
}
