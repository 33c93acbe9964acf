//! ORCA out-of-band load reports as a tonic service:
//! `xds.service.orca.v3.OpenRcaService/StreamCoreMetrics`, so unmodified gRPC
//! `weighted_round_robin` and Envoy `client_side_weighted_round_robin` clients (with
//! out-of-band reporting enabled) weigh backends by their sessions.
//!
//! Each [`OrcaLoadReport`] is one [`LoadReport`], the same one `/load` serves:
//!
//! | ORCA field | from the load report |
//! | --- | --- |
//! | `rps_fractional` | `pretend_qps`: open sessions ÷ report window |
//! | `application_utilization` | `utilisation` (smoothed) |
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
//! The first report is sent at once, then one every `max(requested, report interval)`:
//! the board publishes once per report interval of its capacity configuration, so asking
//! for more often would only repeat reports. A request without an interval gets the
//! board's. Every stream ends (status OK) when the board starts draining.

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
use crate::{LoadBoard, LoadReport};

/// The `OpenRcaService` (ORCA out-of-band reporting) over a [`LoadBoard`].
///
/// ```no_run
/// # async fn run(board: std::sync::Arc<livecount_report::LoadBoard>) -> Result<(), tonic::transport::Error> {
/// tonic::transport::Server::builder()
///     .add_service(livecount_report::OrcaService::server(board))
///     .serve("127.0.0.1:50051".parse().unwrap())
///     .await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct OrcaService {
    board: Arc<LoadBoard>,
}

impl OrcaService {
    /// The service over `board`.
    pub fn new(board: Arc<LoadBoard>) -> Self {
        Self { board }
    }

    /// The service over `board`, wrapped for a tonic server.
    pub fn server(board: Arc<LoadBoard>) -> OpenRcaServiceServer<Self> {
        OpenRcaServiceServer::new(Self::new(board))
    }
}

/// A load report in ORCA's terms (see the [module docs](self) for the mapping).
///
/// ```
/// let mut report = livecount_report::LoadReport::empty("b");
/// (report.sequence, report.active, report.pretend_qps, report.utilisation) = (7, 4, 4.0, 0.5);
/// let orca = livecount_report::orca::orca_report(&report);
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
            self.board.config().report_interval(),
        );
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let state = (Arc::clone(&self.board), ticks, self.board.draining_signal());
        Ok(Response::new(Box::pin(stream::unfold(state, next_report))))
    }
}

type ReportState = (Arc<LoadBoard>, tokio::time::Interval, watch::Receiver<bool>);

/// Waits for the next tick (the first is immediate) and sends the latest report; ends
/// when the board drains.
async fn next_report(
    (board, mut ticks, mut draining): ReportState,
) -> Option<(Result<OrcaLoadReport, Status>, ReportState)> {
    tokio::select! {
        biased;
        _ = draining.wait_for(|d| *d) => return None,
        _ = ticks.tick() => {}
    }
    let report = orca_report(&board.latest());
    Some((Ok(report), (board, ticks, draining)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_at_least_the_boards() {
        let second = Duration::from_secs(1);
        let d = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
        assert_eq!(interval(None, second), second);
        assert_eq!(interval(d(0, 100_000_000), second), second);
        assert_eq!(interval(d(30, 0), second), Duration::from_secs(30));
        assert_eq!(interval(d(-5, 0), second), second);
        assert_eq!(interval(d(2, -3), second), Duration::from_secs(2));
    }

    #[test]
    fn every_field_comes_from_the_report() {
        let mut r = LoadReport::empty("b");
        (r.sequence, r.active, r.generating) = (9, 5, 2);
        (r.pretend_qps, r.utilisation, r.raw_utilisation) = (0.5, 0.25, 0.3);
        (r.effective_capacity, r.headroom) = (12.0, 7.0);
        let o = orca_report(&r);
        assert_eq!(
            (
                o.rps_fractional,
                o.application_utilization,
                o.cpu_utilization
            ),
            (0.5, 0.25, 0.3)
        );
        let m = |k: &str| o.named_metrics[k];
        assert_eq!(
            [
                m("active_sessions"),
                m("generating_sessions"),
                m("effective_capacity"),
                m("headroom"),
                m("report_sequence")
            ],
            [5.0, 2.0, 12.0, 7.0, 9.0]
        );
        assert_eq!(o.named_metrics.len(), 5);
    }
}
