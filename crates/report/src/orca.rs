//! ORCA out-of-band load reports as a tonic service:
//! `xds.service.orca.v3.OpenRcaService/StreamCoreMetrics`, so unmodified gRPC
//! `weighted_round_robin` and Envoy `client_side_weighted_round_robin` clients (with
//! out-of-band reporting enabled) weigh backends by their sessions.
//!
//! # What a stock weighted round robin reads
//!
//! Both balancers weigh a backend `rps_fractional ÷ application_utilization` (gRFC A58;
//! Envoy's CSWRR the same), and both **ignore a report whose qps or utilisation is not
//! positive** (Envoy: `QPS must be positive`, counted in `lb_orca_oob.report_errors`), leaving
//! the backend on a stale or average weight. Reporting sessions as QPS and CPU as
//! utilisation fails both ways on a session backend: an idle one reports qps 0 (ignored),
//! and one at 0.1 % CPU gets a weight of qps ÷ 0.001 that swings by orders of magnitude with
//! noise in the CPU reading.
//!
//! So the two fields are chosen for their quotient: **the WRR weight is the backend's
//! headroom, in thousandths of a session** — what the hybrid capacity model says may still
//! be sent there, the same quantity HAProxy's agent-check weight is a share of — floored at
//! [`MIN_WEIGHT_SESSIONS`] so a full backend's report stays valid. The thousandths
//! ([`WEIGHT_UNITS_PER_SESSION`]) are for Envoy, which truncates host weights to integers: in
//! sessions, an idle backend's headroom of about 2 (the model's first report interval) and a
//! hot backend's 0.01 would both become weight 1. gRPC uses only the weights' ratios. With
//! `n` open sessions and headroom `h = clamp(headroom, MIN_WEIGHT_SESSIONS,
//! MAX_WEIGHT_SESSIONS)`:
//!
//! * `application_utilization = (n + 1) ÷ (n + 1 + h)`: the share of what the backend can
//!   hold that is taken once one more session arrives. Always in (0, 1); for an idle
//!   backend `1 ÷ (1 + h)`, never 0.
//! * `rps_fractional = 1000 × application_utilization × h`: always > 0; about
//!   `1000 × (n + 1)` while the headroom is large against the load.
//!
//! and `rps_fractional ÷ application_utilization = 1000 h`, bounded by the backend's
//! `max_sessions` whatever the CPU reads (and by 10⁹, inside Envoy's 32-bit weights). For
//! example, with `max_sessions` 1 000:
//!
//! | backend | n | headroom | utilisation | qps | weight | share of new sessions |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | idle | 0 | 1 000 | 0.000 999 | 999 | 1 000 000 | 1 000 ÷ 2 000.01 = 50 % |
//! | 20 sessions, cold | 20 | 980 | 0.0210 | 20 560 | 980 000 | — |
//! | hot: 90 % CPU, target 80 % | 3 | 0 → 0.01 | 0.9975 | 9.98 | 10 | 0.01 ÷ 2 000.01 = 0.0005 % |
//!
//! (two idle backends and the hot one). Compare the old mapping (qps = sessions ÷ window,
//! utilisation = CPU): the idle backends' reports were rejected and the split between two
//! equal cold backends was set by CPU noise.
//!
//! The raw CPU stays visible as `cpu_utilization`, and the session share itself as the
//! named metric `session_utilization` (`n ÷ effective capacity`, 1 when the capacity is 0),
//! which Envoy's `metric_names_for_computing_utilization` can select — but Envoy uses a
//! positive `application_utilization` first, so the weight above is what it applies.
//!
//! | ORCA field | from the load report |
//! | --- | --- |
//! | `rps_fractional` | `(n + 1) h ÷ (n + 1 + h)` (see above) |
//! | `application_utilization` | `(n + 1) ÷ (n + 1 + h)` |
//! | `cpu_utilization` | `raw_utilisation` (the CPU, unsmoothed) |
//! | `named_metrics["session_utilization"]` ([`SESSION_UTILIZATION`]) | `active ÷ effective_capacity` |
//! | `named_metrics["active_sessions"]` ([`ACTIVE_SESSIONS`]) | `active` |
//! | `named_metrics["generating_sessions"]` ([`GENERATING_SESSIONS`]) | `generating` |
//! | `named_metrics["effective_capacity"]` ([`EFFECTIVE_CAPACITY`]) | `effective_capacity` |
//! | `named_metrics["headroom"]` ([`HEADROOM`]) | `headroom` |
//! | `named_metrics["report_sequence"]` ([`REPORT_SEQUENCE`]) | `sequence` (as a double) |
//! | `named_metrics["max_sessions"]` ([`MAX_SESSIONS`]) | `max_sessions`, only when it has one |
//! | `named_metrics["prequal_rif"]` ([`PREQUAL_RIF`]) | `prequal.rif`, only with a [`PrequalEstimator`](crate::PrequalEstimator) |
//! | `named_metrics["prequal_latency_ms"]` ([`PREQUAL_LATENCY_MS`]) | `prequal.latency_ms`, only when known |
//!
//! The keys are the constants named in the table, the one spelling the agent's
//! [`orca_report`] writes and `livecount-balance`'s `OrcaLoadSource` reads.
//!
//! The two `prequal_` metrics are the board's Prequal probe reply (see
//! [`LoadBoardBuilder::prequal`](crate::LoadBoardBuilder::prequal)); a board without an
//! estimator sends neither, and a latency it does not know is left out rather than sent
//! as 0, which a reader could not tell from a fast backend.
//!
//! A draining backend reports the floor (weight [`MIN_WEIGHT_SESSIONS`], 10 units) until its
//! streams end.
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

/// The named metric carrying `active ÷ effective_capacity` (1 when the capacity is 0): the
/// session share, selectable by Envoy's `metric_names_for_computing_utilization`.
pub const SESSION_UTILIZATION: &str = "session_utilization";

/// The named metric carrying the open sessions ([`LoadReport::active`]).
pub const ACTIVE_SESSIONS: &str = "active_sessions";

/// The named metric carrying the sessions generating a response ([`LoadReport::generating`]).
pub const GENERATING_SESSIONS: &str = "generating_sessions";

/// The named metric carrying [`LoadReport::effective_capacity`].
pub const EFFECTIVE_CAPACITY: &str = "effective_capacity";

/// The named metric carrying [`LoadReport::headroom`] (unclamped, unlike the weight).
pub const HEADROOM: &str = "headroom";

/// The named metric carrying [`LoadReport::max_sessions`], the most sessions the backend
/// admits; sent only by a backend with that hard limit.
pub const MAX_SESSIONS: &str = "max_sessions";

/// The named metric carrying [`LoadReport::sequence`], as a double (exact below 2⁵³).
pub const REPORT_SEQUENCE: &str = "report_sequence";

/// The named metric carrying the Prequal probe's requests in flight
/// ([`PrequalProbe::rif`](crate::PrequalProbe::rif)); sent only by a board with an estimator.
pub const PREQUAL_RIF: &str = "prequal_rif";

/// The named metric carrying the Prequal probe's latency in milliseconds
/// ([`PrequalProbe::latency_ms`](crate::PrequalProbe::latency_ms)); sent only when known.
pub const PREQUAL_LATENCY_MS: &str = "prequal_latency_ms";

/// The smallest weight a report carries, in sessions: a backend with no headroom still
/// sends a valid report (both balancers ignore a zero qps or utilisation), weighted 10⁵
/// times below a backend with 1 000 sessions of room.
pub const MIN_WEIGHT_SESSIONS: f64 = 0.01;

/// The largest weight a report carries, in sessions (10⁹ units: inside Envoy's 32-bit host
/// weights).
pub const MAX_WEIGHT_SESSIONS: f64 = 1e6;

/// Weight units per session of headroom: the ORCA weight is in thousandths of a session, so
/// Envoy's integer weights keep the floor (10) apart from an idle backend's few sessions.
pub const WEIGHT_UNITS_PER_SESSION: f64 = 1000.0;

/// The headroom, in sessions, that [`orca_report`] advertises for `report`: clamped to
/// [`MIN_WEIGHT_SESSIONS`]..=[`MAX_WEIGHT_SESSIONS`], the floor while draining or when it is
/// not a number.
///
/// ```
/// let mut report = livecount_report::LoadReport::empty("b");
/// report.headroom = 980.0;
/// assert_eq!(livecount_report::orca::advertised_headroom(&report), 980.0);
/// report.headroom = 0.0;
/// assert_eq!(livecount_report::orca::advertised_headroom(&report), 0.01);
/// ```
pub fn advertised_headroom(report: &LoadReport) -> f64 {
    let headroom = if report.draining {
        0.0
    } else {
        report.headroom
    };
    if headroom.is_nan() {
        MIN_WEIGHT_SESSIONS
    } else {
        headroom.clamp(MIN_WEIGHT_SESSIONS, MAX_WEIGHT_SESSIONS)
    }
}

/// The weight a stock WRR computes from [`orca_report`]`(report)`, `rps_fractional ÷
/// application_utilization`: [`advertised_headroom`] × [`WEIGHT_UNITS_PER_SESSION`].
///
/// ```
/// let mut report = livecount_report::LoadReport::empty("b");
/// report.headroom = 980.0;
/// assert_eq!(livecount_report::orca::wrr_weight(&report), 980_000.0);
/// report.headroom = 0.0;
/// assert_eq!(livecount_report::orca::wrr_weight(&report), 10.0);
/// ```
pub fn wrr_weight(report: &LoadReport) -> f64 {
    advertised_headroom(report) * WEIGHT_UNITS_PER_SESSION
}

/// A load report in ORCA's terms (see the [module docs](self) for the mapping): the
/// quotient `rps_fractional ÷ application_utilization` is [`wrr_weight`], and both are
/// positive and finite.
///
/// ```
/// let mut report = livecount_report::LoadReport::empty("b");
/// (report.sequence, report.active, report.headroom) = (7, 4, 45.0);
/// let orca = livecount_report::orca::orca_report(&report);
/// assert_eq!(orca.application_utilization, 5.0 / 50.0);
/// assert!((orca.rps_fractional / orca.application_utilization - 45_000.0).abs() < 1e-6);
/// assert_eq!(orca.named_metrics[livecount_report::orca::REPORT_SEQUENCE], 7.0);
/// ```
pub fn orca_report(report: &LoadReport) -> OrcaLoadReport {
    let headroom = advertised_headroom(report);
    let taken = report.active as f64 + 1.0;
    let utilization = taken / (taken + headroom);
    let session_utilization = if report.effective_capacity > 0.0 {
        report.active as f64 / report.effective_capacity
    } else {
        1.0
    };
    let mut named_metrics = HashMap::from([
        (SESSION_UTILIZATION.to_owned(), session_utilization),
        (ACTIVE_SESSIONS.to_owned(), report.active as f64),
        (GENERATING_SESSIONS.to_owned(), report.generating as f64),
        (EFFECTIVE_CAPACITY.to_owned(), report.effective_capacity),
        (HEADROOM.to_owned(), report.headroom),
        (REPORT_SEQUENCE.to_owned(), report.sequence as f64),
    ]);
    if let Some(max) = report.max_sessions {
        named_metrics.insert(MAX_SESSIONS.to_owned(), max as f64);
    }
    if let Some(probe) = &report.prequal {
        named_metrics.insert(PREQUAL_RIF.to_owned(), probe.rif as f64);
        if let Some(latency) = probe.latency_ms {
            named_metrics.insert(PREQUAL_LATENCY_MS.to_owned(), latency);
        }
    }
    OrcaLoadReport {
        cpu_utilization: report.raw_utilisation,
        rps_fractional: utilization * headroom * WEIGHT_UNITS_PER_SESSION,
        application_utilization: utilization,
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

    /// The keys are the wire contract: renaming a constant's value would silently cut every
    /// reader (Envoy's metric selection, `OrcaLoadSource`, dashboards) off its metric.
    #[test]
    fn the_named_metric_keys_are_the_documented_wire_names() {
        assert_eq!(
            [
                SESSION_UTILIZATION,
                ACTIVE_SESSIONS,
                GENERATING_SESSIONS,
                EFFECTIVE_CAPACITY,
                HEADROOM,
                REPORT_SEQUENCE,
                MAX_SESSIONS,
                PREQUAL_RIF,
                PREQUAL_LATENCY_MS,
            ],
            [
                "session_utilization",
                "active_sessions",
                "generating_sessions",
                "effective_capacity",
                "headroom",
                "report_sequence",
                "max_sessions",
                "prequal_rif",
                "prequal_latency_ms",
            ]
        );
    }

    #[test]
    fn every_field_comes_from_the_report() {
        let mut r = LoadReport::empty("b");
        (r.sequence, r.active, r.generating) = (9, 5, 2);
        (r.pretend_qps, r.utilisation, r.raw_utilisation) = (0.5, 0.25, 0.3);
        (r.effective_capacity, r.headroom) = (12.0, 7.0);
        let o = orca_report(&r);
        assert_eq!(o.application_utilization, 6.0 / 13.0);
        assert!((o.rps_fractional - 1000.0 * 6.0 * 7.0 / 13.0).abs() < 1e-9);
        assert_eq!(o.cpu_utilization, 0.3);
        let m = |k: &str| o.named_metrics[k];
        assert_eq!(
            [
                m(SESSION_UTILIZATION),
                m(ACTIVE_SESSIONS),
                m(GENERATING_SESSIONS),
                m(EFFECTIVE_CAPACITY),
                m(HEADROOM),
                m(REPORT_SEQUENCE)
            ],
            [5.0 / 12.0, 5.0, 2.0, 12.0, 7.0, 9.0]
        );
        assert_eq!(o.named_metrics.len(), 6);
        r.max_sessions = Some(40);
        let o = orca_report(&r);
        assert_eq!(o.named_metrics[MAX_SESSIONS], 40.0);
        assert_eq!(o.named_metrics.len(), 7);
    }

    #[test]
    fn the_prequal_probe_is_two_named_metrics_the_latency_only_when_known() {
        let mut r = LoadReport::empty("b");
        r.prequal = Some(crate::PrequalProbe {
            rif: 12,
            latency_ms: Some(41.5),
            samples: 64,
            samples_used: 16,
        });
        let o = orca_report(&r);
        assert_eq!(
            (
                o.named_metrics[PREQUAL_RIF],
                o.named_metrics[PREQUAL_LATENCY_MS]
            ),
            (12.0, 41.5)
        );
        assert_eq!(o.named_metrics.len(), 8);
        r.prequal = Some(crate::PrequalProbe::unknown_latency(3));
        let o = orca_report(&r);
        assert_eq!(o.named_metrics[PREQUAL_RIF], 3.0);
        assert!(!o.named_metrics.contains_key(PREQUAL_LATENCY_MS));
        assert_eq!(o.named_metrics.len(), 7);
    }

    /// The weight a WRR computes, qps ÷ utilisation, as gRFC A58 and Envoy do.
    fn weight(o: &OrcaLoadReport) -> f64 {
        o.rps_fractional / o.application_utilization
    }

    /// Every report a balancer reads is valid (qps and utilisation > 0, finite), and its
    /// weight is the headroom, floored: across idle, loaded, full, hot, draining and
    /// absurd inputs.
    #[test]
    fn every_report_is_valid_and_weighs_the_headroom() {
        let cases = [
            // (active, headroom, capacity, draining, expected weight)
            (0, 1000.0, 1000.0, false, 1000.0),
            (20, 980.0, 1000.0, false, 980.0),
            (1000, 0.0, 1000.0, false, MIN_WEIGHT_SESSIONS),
            (3, 0.0, 3.1, false, MIN_WEIGHT_SESSIONS),
            (0, 0.1, 0.1, false, 0.1),
            (0, 0.0, 0.0, false, MIN_WEIGHT_SESSIONS),
            (7, 500.0, 507.0, true, MIN_WEIGHT_SESSIONS),
            (0, f64::NAN, 0.0, false, MIN_WEIGHT_SESSIONS),
            (0, f64::INFINITY, 0.0, false, MAX_WEIGHT_SESSIONS),
            (0, 2e6, 2e6, false, MAX_WEIGHT_SESSIONS),
            (u64::MAX / 2, 1e15, 1e15, false, MAX_WEIGHT_SESSIONS),
        ];
        for (active, headroom, capacity, draining, expected) in cases {
            let mut r = LoadReport::empty("b");
            (r.active, r.headroom, r.effective_capacity, r.draining) =
                (active, headroom, capacity, draining);
            let o = orca_report(&r);
            let case = format!("{active} / {headroom} / {draining}: {o:?}");
            assert!(
                o.rps_fractional > 0.0 && o.rps_fractional.is_finite(),
                "{case}"
            );
            assert!(o.application_utilization > 0.0, "{case}");
            assert!(o.application_utilization < 1.0, "{case}");
            assert!(
                (weight(&o) / (1000.0 * expected) - 1.0).abs() < 1e-9,
                "{case}"
            );
            assert_eq!(advertised_headroom(&r), expected, "{case}");
            assert_eq!(wrr_weight(&r), 1000.0 * expected, "{case}");
            // Inside Envoy's 32-bit integer weights, and the floor is not truncated to 0.
            assert!(
                weight(&o) <= f64::from(u32::MAX) && weight(&o) >= 9.99,
                "{case}"
            );
            let s = o.named_metrics[SESSION_UTILIZATION];
            assert!(s.is_finite() && s >= 0.0, "{case}");
        }
    }

    /// The weights the module docs' table gives, and the shares they make.
    #[test]
    fn the_documented_table_holds() {
        let report = |active, headroom| {
            let mut r = LoadReport::empty("b");
            (r.active, r.headroom, r.effective_capacity) =
                (active, headroom, active as f64 + headroom);
            orca_report(&r)
        };
        let idle = report(0, 1000.0);
        assert!((idle.application_utilization - 1.0 / 1001.0).abs() < 1e-12);
        let cold = report(20, 980.0);
        assert!((cold.application_utilization - 21.0 / 1001.0).abs() < 1e-12);
        assert!((cold.rps_fractional - 1000.0 * 21.0 * 980.0 / 1001.0).abs() < 1e-6);
        let hot = report(3, 0.0);
        assert!((hot.application_utilization - 4.0 / 4.01).abs() < 1e-12);
        let total = 2.0 * weight(&idle) + weight(&hot);
        assert!((weight(&idle) / total - 0.5).abs() < 1e-5);
        assert!(weight(&hot) / total < 1e-5);
    }
}
