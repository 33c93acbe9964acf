//! ORCA out-of-band load reports: `xds.service.orca.v3.OpenRcaService/StreamCoreMetrics`,
//! so unmodified gRPC `weighted_round_robin` and Envoy `client_side_weighted_round_robin`
//! clients (with out-of-band reporting enabled) weigh backends by their sessions.
//!
//! Each [`OrcaLoadReport`] is one [`LoadReport`], the same one `/load` serves:
//!
//! | ORCA field | from the load report |
//! | --- | --- |
//! | `rps_fractional` | `pretend_qps`: open sessions ÷ report window |
//! | `application_utilization` | `utilisation` (smoothed process CPU ÷ cores) |
//! | `cpu_utilization` | `raw_utilisation` (the same, unsmoothed) |
//! | `named_metrics["active_sessions"]` | `active` |
//! | `named_metrics["generating_sessions"]` | `generating` |
//! | `named_metrics["effective_capacity"]` | `effective_capacity` |
//! | `named_metrics["headroom"]` | `headroom` |
//! | `named_metrics["report_sequence"]` | `sequence` (as a double) |
//!
//! WRR then weighs a backend `rps_fractional ÷ application_utilization`.
//!
//! # Reporting interval
//!
//! The first report is sent at once, then one every `max(requested, --report-secs)`:
//! the agent publishes a new report once per `--report-secs`, so asking for more often
//! would only repeat reports. A request without an interval gets `--report-secs`. The
//! stream ends (OK) when the agent shuts down.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, stream};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::generated::xds::data::orca::v3::OrcaLoadReport;
use crate::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use crate::generated::xds::service::orca::v3::open_rca_service_server::{
    OpenRcaService, OpenRcaServiceServer,
};
use crate::{Agent, LoadReport};

/// The `OpenRcaService` (ORCA out-of-band reporting) of one [`Agent`].
#[derive(Debug, Clone)]
pub struct OrcaService {
    agent: Arc<Agent>,
}

impl OrcaService {
    /// The service for `agent`, wrapped for a tonic server.
    pub fn server(agent: Arc<Agent>) -> OpenRcaServiceServer<Self> {
        OpenRcaServiceServer::new(Self { agent })
    }
}

/// A load report in ORCA's terms (see the [module docs](self) for the mapping).
///
/// ```
/// # use livecount_server::LoadReport;
/// # let report = LoadReport { name: "b".into(), sequence: 7, taken_at_unix_ms: 0, active: 4,
/// #     listening: 3, generating: 1, started: 4, ended: 0, ended_by_reason: Default::default(),
/// #     rejected: 0, pretend_qps: 4.0, utilisation: 0.5, raw_utilisation: 0.6,
/// #     effective_capacity: 8.0, headroom: 4.0, weight_percent: 50, draining: false };
/// let orca = livecount_server::orca::orca_report(&report);
/// assert_eq!((orca.rps_fractional, orca.application_utilization), (4.0, 0.5));
/// assert_eq!(orca.named_metrics["report_sequence"], 7.0);
/// ```
pub fn orca_report(report: &LoadReport) -> OrcaLoadReport {
    let named_metrics = HashMap::from([
        ("active_sessions".to_owned(), report.active as f64),
        ("generating_sessions".to_owned(), report.generating as f64),
        ("effective_capacity".to_owned(), report.effective_capacity),
        ("headroom".to_owned(), report.headroom),
        ("report_sequence".to_owned(), report.sequence as f64),
    ]);
    OrcaLoadReport {
        cpu_utilization: report.raw_utilisation,
        rps_fractional: report.pretend_qps,
        application_utilization: report.utilisation,
        named_metrics,
        ..OrcaLoadReport::default()
    }
}

/// The interval a stream reports at: the requested one, no shorter than `minimum`.
fn interval(requested: Option<prost_types::Duration>, minimum: Duration) -> Duration {
    let requested = requested.map_or(Duration::ZERO, |d| {
        let secs = u64::try_from(d.seconds).unwrap_or(0);
        let nanos = u32::try_from(d.nanos).unwrap_or(0).min(999_999_999);
        Duration::new(secs, nanos)
    });
    requested.max(minimum)
}

/// A stream of reports.
type Reports = Pin<Box<dyn Stream<Item = Result<OrcaLoadReport, Status>> + Send>>;

#[tonic::async_trait]
impl OpenRcaService for OrcaService {
    type StreamCoreMetricsStream = Reports;

    async fn stream_core_metrics(
        &self,
        request: Request<OrcaLoadReportRequest>,
    ) -> Result<Response<Reports>, Status> {
        let every = interval(
            request.into_inner().report_interval,
            self.agent.config.report_interval,
        );
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let state = (Arc::clone(&self.agent), ticks, self.agent.shutdown_signal());
        Ok(Response::new(Box::pin(stream::unfold(state, next_report))))
    }
}

type ReportState = (Arc<Agent>, tokio::time::Interval, watch::Receiver<bool>);

/// Waits for the next tick (the first is immediate) and sends the latest report; ends
/// on shutdown.
async fn next_report(
    (agent, mut ticks, mut shutdown): ReportState,
) -> Option<(Result<OrcaLoadReport, Status>, ReportState)> {
    tokio::select! {
        biased;
        _ = shutdown.wait_for(|stopping| *stopping) => return None,
        _ = ticks.tick() => {}
    }
    let report = orca_report(&agent.board.latest());
    Some((Ok(report), (agent, ticks, shutdown)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_at_least_the_agents() {
        let second = Duration::from_secs(1);
        let d = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
        assert_eq!(interval(None, second), second);
        assert_eq!(interval(d(0, 100_000_000), second), second);
        assert_eq!(interval(d(30, 0), second), Duration::from_secs(30));
        assert_eq!(interval(d(-5, 0), second), second);
    }
}
