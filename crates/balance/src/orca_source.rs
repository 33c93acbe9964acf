//! [`OrcaLoadSource`]: a backend's load from its ORCA out-of-band stream
//! (`xds.service.orca.v3.OpenRcaService/StreamCoreMetrics`), held open over a tonic channel.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
use livecount_report::generated::xds::service::orca::v3::OrcaLoadReportRequest;
use livecount_report::generated::xds::service::orca::v3::open_rca_service_client::OpenRcaServiceClient;
use livecount_report::orca::{
    ACTIVE_SESSIONS, EFFECTIVE_CAPACITY, HEADROOM, MAX_SESSIONS, REPORT_SEQUENCE,
    WEIGHT_UNITS_PER_SESSION,
};
use tonic::Streaming;
use tonic::transport::Endpoint;

use crate::backend_load::BackendLoad;
use crate::source::LoadSource;
use crate::source::invalid;

/// The first wait before reconnecting after a failed or ended stream.
const DEFAULT_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait before reconnecting: the backoff doubles up to this.
const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A backend's load reports from its ORCA out-of-band stream: one `StreamCoreMetrics` call
/// held open, each report turned into a [`BackendLoad`].
///
/// * **Fields** (the named metrics the livecount agent's `OrcaService` sends, keyed by the
///   constants of [`livecount_report::orca`]): `report_sequence` →
///   [`sequence`](BackendLoad::sequence), `active_sessions` →
///   [`active`](BackendLoad::active), `effective_capacity`, `headroom`, `max_sessions` (sent
///   by a backend with a hard limit) → [`max_sessions`](BackendLoad::max_sessions). A
///   report without
///   `headroom` takes `rps_fractional ÷ application_utilization` ÷
///   [`WEIGHT_UNITS_PER_SESSION`](livecount_report::orca::WEIGHT_UNITS_PER_SESSION)
///   (livecount's ORCA weight is the headroom in thousandths of a session); without `effective_capacity`, `active + headroom`;
///   without `report_sequence`, a count of the reports received on this source. A report
///   without `active_sessions` is an [`InvalidData`](io::ErrorKind::InvalidData) error
///   (the stream stays open). ORCA carries no report age: `age_ms` is 0.
/// * **Draining**: livecount ends every ORCA stream with status OK when its board starts
///   draining, so a stream that ends OK yields the last report again marked
///   [`draining`](BackendLoad::draining), with sequence
///   [`DRAINING_SEQUENCE`](OrcaLoadSource::DRAINING_SEQUENCE); the next real report (after
///   a reconnect) undoes it.
/// * **Reconnecting**: a stream that fails, ends, or stays silent is dropped and opened
///   again on a fresh connection after a backoff that starts at 100 ms and doubles up to
///   5 s ([`backoff`](OrcaLoadSource::backoff)); a report resets it. Each failure is one
///   error from [`next_report`](LoadSource::next_report), so a
///   [`LoadFeed`](crate::LoadFeed) keeps the last report until it goes stale.
/// * **Bounds**: connecting and opening the call are bounded by the
///   [`timeout`](OrcaLoadSource::timeout) (default: the interval), and each wait for a
///   report by the interval plus the timeout; a `next_report` returns within the longest
///   backoff plus twice the timeout plus the interval, whatever the network does.
///
/// The interval asked for is a request: livecount's agent reports no more often than it
/// publishes (its `--report-secs`). Ask for at least that, or raise the timeout to cover
/// the difference, else the reads time out and the stream is reopened each time.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_balance::{LoadFeed, LoadSignal, OrcaLoadSource, SessionLoad};
/// use std::time::Duration;
///
/// let grpc = "10.0.0.1:50051".parse().unwrap(); // the backend's gRPC port, serving ORCA
/// let source = OrcaLoadSource::new(grpc, Duration::from_millis(500))
///     .timeout(Duration::from_secs(1))
///     .backoff(Duration::from_millis(50), Duration::from_secs(2));
/// let feed = LoadFeed::spawn(source, LoadSignal::Occupancy, Duration::from_secs(2));
/// let backend = SessionLoad::new(tower::service_fn(|r: u32| async move { Ok::<_, ()>(r) }), feed);
/// # let _ = backend;
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "orca")))]
pub struct OrcaLoadSource {
    endpoint: Endpoint,
    interval: Duration,
    timeout: Duration,
    backoff_min: Duration,
    backoff_max: Duration,
    /// The wait before the next connect: `None` after a report (connect at once).
    retry_in: Option<Duration>,
    stream: Option<Streaming<OrcaLoadReport>>,
    /// The last report made, repeated as draining when a stream ends OK.
    last: Option<BackendLoad>,
    /// Reports received: the sequence of a report without `report_sequence`.
    received: u64,
}

impl OrcaLoadSource {
    /// The sequence number of the report the source makes up when a stream ends OK (a
    /// draining backend): one no backend's report carries, so a
    /// [`LoadFeed`](crate::LoadFeed) takes it as news, and the next real report (lower) as a
    /// restarted backend.
    ///
    /// ```
    /// use livecount_balance::OrcaLoadSource;
    /// assert_eq!(OrcaLoadSource::DRAINING_SEQUENCE, u64::MAX);
    /// ```
    pub const DRAINING_SEQUENCE: u64 = u64::MAX;

    /// Streams the reports of the ORCA service at `http://{addr}`, asking for one every
    /// `interval`; each connect is bounded by `interval` too unless
    /// [`timeout`](OrcaLoadSource::timeout) says otherwise. Nothing connects until the
    /// first [`next_report`](LoadSource::next_report).
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    pub fn new(addr: SocketAddr, interval: Duration) -> Self {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .expect("a socket address makes a valid URI");
        Self::from_endpoint(endpoint, interval)
    }

    /// As [`new`](OrcaLoadSource::new), on a tonic `endpoint` configured by the caller
    /// (its URI, keep-alives, window sizes); its connect timeout is set by
    /// [`timeout`](OrcaLoadSource::timeout).
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    pub fn from_endpoint(endpoint: Endpoint, interval: Duration) -> Self {
        assert!(
            !interval.is_zero(),
            "OrcaLoadSource: the report interval must be above zero"
        );
        OrcaLoadSource {
            endpoint: endpoint.connect_timeout(interval),
            interval,
            timeout: interval,
            backoff_min: DEFAULT_BACKOFF_MIN,
            backoff_max: DEFAULT_BACKOFF_MAX,
            retry_in: None,
            stream: None,
            last: None,
            received: 0,
        }
    }

    /// Bounds each connect and call set-up by `timeout`, and each wait for a report by the
    /// interval plus `timeout`.
    ///
    /// # Panics
    ///
    /// If `timeout` is zero.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        assert!(
            !timeout.is_zero(),
            "OrcaLoadSource: the timeout must be above zero"
        );
        self.timeout = timeout;
        self.endpoint = self.endpoint.connect_timeout(timeout);
        self
    }

    /// Waits `min` before the first reconnect after a failure, doubling on each failure in
    /// a row up to `max` (`max` is raised to `min` if below it).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max.max(min);
        self
    }

    /// The stream, or an error once the connect or the call failed or timed out.
    async fn open(&self) -> io::Result<Streaming<OrcaLoadReport>> {
        let setup = async {
            let channel = self.endpoint.connect().await.map_err(io::Error::other)?;
            let request = OrcaLoadReportRequest {
                // Every `Duration` of a report interval fits (its seconds fit an i64).
                report_interval: self.interval.try_into().ok(),
                request_cost_names: Vec::new(),
            };
            let response = OpenRcaServiceClient::new(channel)
                .stream_core_metrics(request)
                .await
                .map_err(status_error)?;
            Ok(response.into_inner())
        };
        tokio::time::timeout(self.timeout, setup)
            .await
            .unwrap_or_else(|_| Err(timed_out("connecting to the ORCA service")))
    }

    /// Drops the stream and lengthens the wait before the next connect.
    fn lost(&mut self) {
        self.stream = None;
        self.retry_in = Some(match self.retry_in {
            None => self.backoff_min,
            Some(wait) => wait.saturating_mul(2).min(self.backoff_max),
        });
    }

    /// `report` as a [`BackendLoad`].
    fn convert(&mut self, report: &OrcaLoadReport) -> io::Result<BackendLoad> {
        self.received += 1;
        let named = |key: &str| report.named_metrics.get(key).copied();
        let active = named(ACTIVE_SESSIONS)
            .filter(|a| a.is_finite() && *a >= 0.0)
            .ok_or_else(|| invalid("an ORCA report without active_sessions"))?
            as u64;
        let headroom = named(HEADROOM).unwrap_or_else(|| {
            if report.application_utilization > 0.0 {
                report.rps_fractional / report.application_utilization / WEIGHT_UNITS_PER_SESSION
            } else {
                0.0
            }
        });
        let effective_capacity =
            named(EFFECTIVE_CAPACITY).unwrap_or(active as f64 + headroom.max(0.0));
        let sequence = named(REPORT_SEQUENCE)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(self.received, |s| s as u64);
        let max_sessions = named(MAX_SESSIONS)
            .filter(|m| m.is_finite() && *m >= 0.0)
            .map(|m| m as u64);
        Ok(BackendLoad {
            sequence,
            active,
            effective_capacity,
            headroom,
            age_ms: 0,
            draining: false,
            max_sessions,
        })
    }
}

impl LoadSource for OrcaLoadSource {
    async fn next_report(&mut self) -> Option<io::Result<BackendLoad>> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => {
                if let Some(wait) = self.retry_in {
                    tokio::time::sleep(wait).await;
                }
                match self.open().await {
                    Ok(stream) => self.stream.insert(stream),
                    Err(e) => {
                        self.lost();
                        return Some(Err(e));
                    }
                }
            }
        };
        let read = tokio::time::timeout(self.interval + self.timeout, stream.message()).await;
        Some(match read {
            Ok(Ok(Some(report))) => {
                let load = self.convert(&report);
                if let Ok(load) = &load {
                    self.retry_in = None;
                    self.last = Some(load.clone());
                }
                load
            }
            Ok(Ok(None)) => {
                self.lost();
                let last = self.last.clone();
                let report = last.unwrap_or_else(|| BackendLoad::new(0, 0, 0.0));
                Ok(BackendLoad {
                    sequence: Self::DRAINING_SEQUENCE,
                    ..report.draining()
                })
            }
            Ok(Err(status)) => {
                self.lost();
                Err(status_error(status))
            }
            Err(_) => {
                self.lost();
                Err(timed_out("waiting for an ORCA report"))
            }
        })
    }
}

impl fmt::Debug for OrcaLoadSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrcaLoadSource")
            .field("uri", self.endpoint.uri())
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("backoff", &(self.backoff_min..=self.backoff_max))
            .field("connected", &self.stream.is_some())
            .field("last", &self.last)
            .finish()
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("timed out {what}"))
}

/// A gRPC status as an I/O error: `UNAVAILABLE` is a refused or lost connection.
fn status_error(status: tonic::Status) -> io::Error {
    let kind = match status.code() {
        tonic::Code::Unavailable => io::ErrorKind::ConnectionRefused,
        tonic::Code::DeadlineExceeded => io::ErrorKind::TimedOut,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn source() -> OrcaLoadSource {
        OrcaLoadSource::new("127.0.0.1:1".parse().unwrap(), Duration::from_secs(1))
    }

    fn report(named: &[(&str, f64)]) -> OrcaLoadReport {
        OrcaLoadReport {
            named_metrics: named.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..OrcaLoadReport::default()
        }
    }

    #[test]
    fn a_livecount_report_converts_field_by_field() {
        let r = report(&[
            (REPORT_SEQUENCE, 9.0),
            (ACTIVE_SESSIONS, 4.0),
            (EFFECTIVE_CAPACITY, 12.0),
            (HEADROOM, 7.5),
        ]);
        let load = source().convert(&r).unwrap();
        assert_eq!(
            (
                load.sequence,
                load.active,
                load.effective_capacity,
                load.headroom
            ),
            (9, 4, 12.0, 7.5)
        );
        assert!(!load.draining);
    }

    #[test]
    fn missing_fields_fall_back_and_no_active_is_an_error() {
        let mut s = source();
        let r = OrcaLoadReport {
            rps_fractional: 3000.0,
            application_utilization: 0.25,
            named_metrics: HashMap::from([(ACTIVE_SESSIONS.to_owned(), 2.0)]),
            ..OrcaLoadReport::default()
        };
        let load = s.convert(&r).unwrap();
        assert_eq!(
            (
                load.sequence,
                load.active,
                load.effective_capacity,
                load.headroom
            ),
            (1, 2, 14.0, 12.0)
        );
        assert_eq!(s.convert(&r).unwrap().sequence, 2, "counted");
        let err = s.convert(&report(&[(HEADROOM, 1.0)])).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let nan = s.convert(&report(&[(ACTIVE_SESSIONS, f64::NAN)]));
        assert_eq!(nan.unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    /// Counts that are not counts are refused or ignored, never read as 0 or `u64::MAX`: a
    /// negative or infinite `active_sessions` is invalid data, and such a `report_sequence`
    /// falls back to the reports received.
    #[test]
    fn negative_or_infinite_counts_are_not_taken() {
        let mut s = source();
        for bad in [-3.0, -0.5, f64::INFINITY, f64::NEG_INFINITY] {
            let err = s.convert(&report(&[(ACTIVE_SESSIONS, bad)])).unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::InvalidData,
                "active_sessions {bad}"
            );
        }
        assert_eq!(
            s.convert(&report(&[(ACTIVE_SESSIONS, 0.0)]))
                .unwrap()
                .active,
            0
        );
        let received = s.received;
        for (i, bad) in [-1.0, f64::INFINITY, f64::NAN].into_iter().enumerate() {
            let r = report(&[(ACTIVE_SESSIONS, 1.0), (REPORT_SEQUENCE, bad)]);
            let load = s.convert(&r).unwrap();
            assert_eq!(
                load.sequence,
                received + 1 + i as u64,
                "report_sequence {bad}"
            );
        }
        let r = report(&[(ACTIVE_SESSIONS, 1.0), (REPORT_SEQUENCE, 0.0)]);
        assert_eq!(s.convert(&r).unwrap().sequence, 0, "0 is a sequence number");
    }

    /// Without a `headroom` metric and with no utilisation reported, the headroom is 0 (not
    /// the ∞ or NaN of dividing by it), and the capacity is what is active.
    #[test]
    fn no_utilisation_means_no_derived_headroom() {
        let r = OrcaLoadReport {
            rps_fractional: 3000.0,
            application_utilization: 0.0,
            named_metrics: HashMap::from([(ACTIVE_SESSIONS.to_owned(), 2.0)]),
            ..OrcaLoadReport::default()
        };
        let load = source().convert(&r).unwrap();
        assert_eq!((load.headroom, load.effective_capacity), (0.0, 2.0));
        let idle = OrcaLoadReport {
            rps_fractional: 0.0,
            ..r
        };
        let load = source().convert(&idle).unwrap();
        assert_eq!((load.headroom, load.effective_capacity), (0.0, 2.0));
    }

    /// gRPC statuses map onto the I/O errors a caller can act on: a refused or lost
    /// connection, a timeout, anything else.
    #[test]
    fn statuses_become_the_io_errors_they_mean() {
        let kind = |status| status_error(status).kind();
        assert_eq!(
            kind(tonic::Status::unavailable("down")),
            io::ErrorKind::ConnectionRefused
        );
        assert_eq!(
            kind(tonic::Status::deadline_exceeded("slow")),
            io::ErrorKind::TimedOut
        );
        assert_eq!(kind(tonic::Status::internal("bug")), io::ErrorKind::Other);
        assert_eq!(
            kind(tonic::Status::unimplemented("no ORCA")),
            io::ErrorKind::Other
        );
    }

    #[test]
    fn the_backoff_doubles_up_to_its_bound() {
        let mut s = source().backoff(Duration::from_millis(100), Duration::from_millis(350));
        let mut waits = Vec::new();
        for _ in 0..4 {
            s.lost();
            waits.push(s.retry_in.unwrap().as_millis());
        }
        assert_eq!(waits, [100, 200, 350, 350]);
    }

    #[test]
    #[should_panic(expected = "above zero")]
    fn a_zero_interval_panics_at_the_call() {
        let _ = OrcaLoadSource::new("127.0.0.1:1".parse().unwrap(), Duration::ZERO);
    }
}
