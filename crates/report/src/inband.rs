//! In-band ORCA: the latest load report as a response header or trailer, encoded once per
//! published report ([`InbandOrca`]), in the three forms balancers read.
//!
//! Out-of-band ORCA ([`OrcaService`](crate::OrcaService)) needs the balancer to hold a
//! stream open to every backend. In-band, each response carries the report instead: what
//! Envoy's `client_side_weighted_round_robin` reads with `enable_oob_load_report: false`,
//! what gRPC's `weighted_round_robin` reads per call when out-of-band reporting is off
//! (gRFC A51 and A58), what Google Cloud's Application Load Balancer reads as custom
//! metrics, and what vLLM, Triton and Dynamo send. The fields are exactly the out-of-band
//! stream's: [`orca_report`] builds the report (so `rps_fractional ÷
//! application_utilization` is the headroom in thousandths of a session, see the
//! [`orca`](crate::orca) module), and this module only encodes it.
//!
//! # The three forms
//!
//! | form | header | value |
//! | --- | --- | --- |
//! | [`InbandFormat::Text`] | `endpoint-load-metrics` | `TEXT cpu_utilization=0.3, application_utilization=0.5, rps_fractional=45000, named_metrics.active_sessions=4, …` |
//! | [`InbandFormat::Json`] | `endpoint-load-metrics` | `JSON {"cpu_utilization":0.3,"application_utilization":0.5,"rps_fractional":45000,"named_metrics":{"active_sessions":4,…}}` |
//! | [`InbandFormat::Bin`] | `endpoint-load-metrics-bin` | the serialized `xds.data.orca.v3.OrcaLoadReport`, base64 (standard alphabet, padded) |
//!
//! Where these come from:
//!
//! * Envoy's parser (`source/common/orca/orca_parser.cc`, `parseOrcaLoadReportHeaders`)
//!   reads `endpoint-load-metrics-bin` first (base64 of the serialized proto, "legacy header
//!   from gRPC implementation"), else `endpoint-load-metrics` whose value starts with a
//!   format prefix, `BIN `, `TEXT ` or `JSON `. `TEXT` is a comma-separated list of
//!   `name=value` (older releases split on `:`; current ones accept both), the names
//!   `cpu_utilization`, `mem_utilization`, `application_utilization`, `eps`,
//!   `rps_fractional`, and `named_metrics.<key>` / `utilization.<key>` for the maps; a
//!   duplicate name, an empty key, an unknown name, a NaN, an infinity or (current
//!   releases) a negative value rejects the whole header. `JSON` is the proto's JSON
//!   mapping, read with unknown fields refused. The router reads the report from the
//!   response headers, or from the trailers if the headers had none, once per response.
//! * gRPC (gRFC A51, "Custom Backend Metrics"): the server sends the serialized
//!   `OrcaLoadReport` as the binary trailing metadata `endpoint-load-metrics-bin`; C-core's
//!   `weighted_round_robin` reads it when each call ends, when `enable_oob_load_report` is
//!   false. Binary metadata (`-bin`) travels base64-encoded on the wire; padding may be
//!   left out, and Envoy and gRPC accept it either way.
//! * Google Cloud Application Load Balancer custom metrics read the `endpoint-load-metrics`
//!   header in the `TEXT` or `JSON` form (or `BIN`), named metrics as `named_metrics.<key>`.
//!
//! # What is encoded
//!
//! [`sanitized`] of [`orca_report`]: a value a strict reader would reject (not finite, or
//! negative) is left out — a top-level field as 0 (the proto default, "not reported"), a
//! named metric entirely — so one odd figure can never invalidate the whole header. A
//! report the [`LoadBoard`] publishes has none: every field is finite
//! and non-negative. Named-metric keys are this crate's constants (ASCII letters and
//! underscores); a key with a character outside `[A-Za-z0-9_.-]` is left out of every form.
//!
//! `TEXT` writes each number as Rust's shortest round-trip decimal (never an exponent), so
//! the value a reader parses is the exact `f64`; `JSON` writes the same digits. The order is
//! the proto's field order, then the named metrics sorted by key: two `TEXT` or `JSON`
//! encodings of one report are byte-identical (`BIN` writes the map in prost's order).

use std::fmt::Write as _;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use base64::Engine as _;
use prost::Message as _;
use tonic::codegen::http::HeaderValue;

use crate::generated::xds::data::orca::v3::OrcaLoadReport;
use crate::orca::orca_report;
use crate::{LoadBoard, LoadReport};

/// The header (or trailer) carrying a `TEXT` or `JSON` report: `endpoint-load-metrics`.
pub const ENDPOINT_LOAD_METRICS: &str = "endpoint-load-metrics";

/// The binary header (or trailer) carrying a serialized report, base64:
/// `endpoint-load-metrics-bin`.
pub const ENDPOINT_LOAD_METRICS_BIN: &str = "endpoint-load-metrics-bin";

/// The `TEXT` form's prefix, as Envoy's parser expects it.
pub const TEXT_PREFIX: &str = "TEXT ";

/// The `JSON` form's prefix, as Envoy's parser expects it.
pub const JSON_PREFIX: &str = "JSON ";

/// Which form of in-band report to send.
///
/// ```
/// use livecount_report::inband::InbandFormat;
/// assert_eq!("bin".parse(), Ok(InbandFormat::Bin));
/// assert_eq!(InbandFormat::Text.header_name(), "endpoint-load-metrics");
/// assert_eq!(InbandFormat::Bin.header_name(), "endpoint-load-metrics-bin");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InbandFormat {
    /// `endpoint-load-metrics: TEXT name=value, …`: readable, and what Google Cloud's
    /// custom metrics documentation shows first.
    Text,
    /// `endpoint-load-metrics: JSON {…}`: the proto's JSON mapping.
    Json,
    /// `endpoint-load-metrics-bin: <base64>`: the serialized proto, gRPC's own form (the
    /// only one gRPC clients read) and the one Envoy reads first.
    Bin,
}

impl InbandFormat {
    /// Every form, in declaration order.
    pub const ALL: [InbandFormat; 3] = [InbandFormat::Text, InbandFormat::Json, InbandFormat::Bin];

    /// The header this form travels in.
    pub fn header_name(self) -> &'static str {
        match self {
            InbandFormat::Text | InbandFormat::Json => ENDPOINT_LOAD_METRICS,
            InbandFormat::Bin => ENDPOINT_LOAD_METRICS_BIN,
        }
    }

    /// The form's name as [`FromStr`](std::str::FromStr) reads it: `text`, `json`, `bin`.
    pub fn as_str(self) -> &'static str {
        match self {
            InbandFormat::Text => "text",
            InbandFormat::Json => "json",
            InbandFormat::Bin => "bin",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::str::FromStr for InbandFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        InbandFormat::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown in-band ORCA format {s:?}: text, json or bin"))
    }
}

impl std::fmt::Display for InbandFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `report` with every value a strict reader would refuse left out: a top-level field that
/// is not finite or is negative becomes 0 (not reported), and such a named metric, or one
/// whose key is not ASCII letters, digits, `_`, `-` or `.`, is dropped. The identity on
/// every report [`orca_report`] makes from a published [`LoadReport`].
///
/// ```
/// use livecount_report::inband::sanitized;
/// let mut orca = livecount_report::orca::orca_report(&livecount_report::LoadReport::empty("b"));
/// assert_eq!(sanitized(&orca), orca);
/// orca.cpu_utilization = f64::NAN;
/// orca.named_metrics.insert("bad key".into(), 1.0);
/// let clean = sanitized(&orca);
/// assert_eq!(clean.cpu_utilization, 0.0);
/// assert!(!clean.named_metrics.contains_key("bad key"));
/// ```
pub fn sanitized(report: &OrcaLoadReport) -> OrcaLoadReport {
    let ok = |v: f64| if valid_value(v) { v } else { 0.0 };
    OrcaLoadReport {
        cpu_utilization: ok(report.cpu_utilization),
        mem_utilization: ok(report.mem_utilization),
        rps_fractional: ok(report.rps_fractional),
        eps: ok(report.eps),
        application_utilization: ok(report.application_utilization),
        named_metrics: report
            .named_metrics
            .iter()
            .filter(|(k, v)| valid_key(k) && valid_value(**v))
            .map(|(k, v)| (k.clone(), *v))
            .collect(),
        ..OrcaLoadReport::default()
    }
}

fn valid_value(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The top-level fields in the proto's field order, with their names; 0 is "not reported"
/// (proto3 has no presence for them) and is left out of `TEXT` and `JSON`.
fn fields(report: &OrcaLoadReport) -> [(&'static str, f64); 5] {
    [
        ("cpu_utilization", report.cpu_utilization),
        ("mem_utilization", report.mem_utilization),
        ("rps_fractional", report.rps_fractional),
        ("eps", report.eps),
        ("application_utilization", report.application_utilization),
    ]
}

/// The named metrics sorted by key (a `HashMap`'s order would differ run to run).
fn sorted_named(report: &OrcaLoadReport) -> Vec<(&str, f64)> {
    let mut named: Vec<(&str, f64)> = report
        .named_metrics
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    named
}

/// The `TEXT` form of [`sanitized`]`(report)`, prefix included.
///
/// ```
/// use livecount_report::inband::encode_text;
/// let mut orca = livecount_report::generated::xds::data::orca::v3::OrcaLoadReport::default();
/// (orca.cpu_utilization, orca.rps_fractional) = (0.25, 1500.0);
/// orca.named_metrics.insert("active_sessions".into(), 3.0);
/// assert_eq!(
///     encode_text(&orca),
///     "TEXT cpu_utilization=0.25, rps_fractional=1500, named_metrics.active_sessions=3"
/// );
/// ```
pub fn encode_text(report: &OrcaLoadReport) -> String {
    let report = sanitized(report);
    let mut out = String::from(TEXT_PREFIX);
    let mut sep = "";
    for (name, value) in fields(&report) {
        if value != 0.0 {
            let _ = write!(out, "{sep}{name}={value}");
            sep = ", ";
        }
    }
    for (key, value) in sorted_named(&report) {
        let _ = write!(out, "{sep}named_metrics.{key}={value}");
        sep = ", ";
    }
    out
}

/// The `JSON` form of [`sanitized`]`(report)`, prefix included: the proto's JSON mapping
/// with its original (snake_case) field names, which proto JSON parsers accept alongside
/// the camelCase ones, as Envoy's own tests and Google Cloud's examples write them.
///
/// ```
/// use livecount_report::inband::encode_json;
/// let mut orca = livecount_report::generated::xds::data::orca::v3::OrcaLoadReport::default();
/// orca.application_utilization = 0.5;
/// orca.named_metrics.insert("headroom".into(), 7.0);
/// assert_eq!(
///     encode_json(&orca),
///     r#"JSON {"application_utilization":0.5,"named_metrics":{"headroom":7}}"#
/// );
/// ```
pub fn encode_json(report: &OrcaLoadReport) -> String {
    let report = sanitized(report);
    let mut out = String::from(JSON_PREFIX);
    out.push('{');
    let mut sep = "";
    for (name, value) in fields(&report) {
        if value != 0.0 {
            let _ = write!(out, "{sep}\"{name}\":{value}");
            sep = ",";
        }
    }
    let named = sorted_named(&report);
    if !named.is_empty() {
        let _ = write!(out, "{sep}\"named_metrics\":{{");
        let mut inner = "";
        // Keys are ASCII letters, digits, `_`, `-`, `.` (see `sanitized`): no escaping.
        for (key, value) in named {
            let _ = write!(out, "{inner}\"{key}\":{value}");
            inner = ",";
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// The `BIN` form of [`sanitized`]`(report)`: the serialized proto, base64 (standard
/// alphabet, padded), as gRPC sends binary metadata over HTTP/2 and HTTP/1 alike.
///
/// ```
/// use base64::Engine as _;
/// use prost::Message as _;
/// use livecount_report::generated::xds::data::orca::v3::OrcaLoadReport;
///
/// let mut orca = OrcaLoadReport::default();
/// orca.rps_fractional = 45_000.0;
/// let text = livecount_report::inband::encode_bin(&orca);
/// let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
/// assert_eq!(OrcaLoadReport::decode(&bytes[..]).unwrap(), orca);
/// ```
pub fn encode_bin(report: &OrcaLoadReport) -> String {
    let bytes = sanitized(report).encode_to_vec();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The encoding of one form.
pub fn encode(format: InbandFormat, report: &OrcaLoadReport) -> String {
    match format {
        InbandFormat::Text => encode_text(report),
        InbandFormat::Json => encode_json(report),
        InbandFormat::Bin => encode_bin(report),
    }
}

/// One published report's three in-band encodings, ready to insert as header values.
#[derive(Debug)]
pub struct EncodedReport {
    /// The board's generation they were made at (see [`InbandOrca::is_current`]).
    generation: u64,
    /// The report they encode.
    report: Arc<LoadReport>,
    /// By [`InbandFormat`] index.
    values: [HeaderValue; 3],
}

impl EncodedReport {
    /// Encodes `report` in every form.
    fn new(generation: u64, report: Arc<LoadReport>) -> Self {
        let orca = orca_report(&report);
        let values = InbandFormat::ALL.map(|f| {
            // Every form is printable ASCII by construction (digits, names, base64).
            HeaderValue::try_from(encode(f, &orca)).expect("in-band encodings are ASCII")
        });
        EncodedReport {
            generation,
            report,
            values,
        }
    }

    /// The report these values encode.
    pub fn report(&self) -> &Arc<LoadReport> {
        &self.report
    }

    /// The report's sequence number.
    pub fn sequence(&self) -> u64 {
        self.report.sequence
    }

    /// The header value of `format` (its header name is [`InbandFormat::header_name`]).
    /// Cloning it is a reference-count increment, not a copy.
    pub fn value(&self, format: InbandFormat) -> &HeaderValue {
        &self.values[format.index()]
    }
}

/// The in-band encodings of a [`LoadBoard`]'s latest report, encoded once per published
/// report: the board counts its publishes, and [`current`](InbandOrca::current) encodes
/// only when that count moved since the cached encodings were made, so attaching a report
/// to a response is a load, a comparison, a reference-count increment and the header
/// insert.
///
/// ```
/// use std::sync::Arc;
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::LoadBoard;
/// use livecount_report::inband::{InbandFormat, InbandOrca};
/// use livecount_session::SessionTracker;
///
/// let tracker: SessionTracker = SessionTracker::default();
/// let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build()?));
/// let inband = InbandOrca::new(Arc::clone(&board));
/// let first = inband.current();
/// assert!(Arc::ptr_eq(&first, &inband.current())); // nothing published: the same encoding
/// let _session = tracker.start();
/// board.publish(tracker.snapshot());
/// assert!(!inband.is_current(&first));
/// let second = inband.current();
/// assert_eq!(second.report().active, 1);
/// let text = second.value(InbandFormat::Text).to_str().unwrap();
/// assert!(text.starts_with("TEXT ") && text.contains("named_metrics.active_sessions=1"));
/// # Ok::<(), livecount_capacity::ConfigError>(())
/// ```
///
/// # Performance characteristics
///
/// [`value`](InbandOrca::value) is wait-free while no report is published: an atomic load
/// of the board's publish count, an arc-swap load of the cached encodings and the value's
/// reference-count increment. [`is_current`](InbandOrca::is_current) is the load alone,
/// for a caller that keeps an [`EncodedReport`] of its own (`livecount-tower`'s layer keeps
/// one per service). The first call after a publish encodes the three forms (a few
/// microseconds) and caches them with a compare-and-swap, so concurrent callers never put
/// an older encoding over a newer one. `benches/benches/inband_orca.rs` measures it.
#[derive(Debug)]
pub struct InbandOrca {
    board: Arc<LoadBoard>,
    cached: ArcSwapOption<EncodedReport>,
}

impl InbandOrca {
    /// The encodings of `board`'s reports (nothing is encoded until the first
    /// [`current`](InbandOrca::current)).
    pub fn new(board: Arc<LoadBoard>) -> Self {
        InbandOrca {
            board,
            cached: ArcSwapOption::empty(),
        }
    }

    /// The board whose reports are encoded.
    pub fn board(&self) -> &Arc<LoadBoard> {
        &self.board
    }

    /// Whether `encoded` encodes the board's latest report (no report published since it
    /// was made): one atomic load.
    pub fn is_current(&self, encoded: &EncodedReport) -> bool {
        encoded.generation == self.board.generation()
    }

    /// The encodings of the board's latest report: the cached ones while no report has been
    /// published since they were made, else fresh ones (cached for the next call).
    pub fn current(&self) -> Arc<EncodedReport> {
        let generation = self.board.generation();
        let cached = self.cached.load();
        match cached.as_ref() {
            Some(encoded) if encoded.generation == generation => Arc::clone(encoded),
            _ => self.refresh(&cached, generation),
        }
    }

    /// The header value of `format` for the board's latest report: [`current`]'s value,
    /// without a reference count on the encodings when they are cached.
    ///
    /// [`current`]: InbandOrca::current
    pub fn value(&self, format: InbandFormat) -> HeaderValue {
        let generation = self.board.generation();
        let cached = self.cached.load();
        match cached.as_ref() {
            Some(encoded) if encoded.generation == generation => encoded.value(format).clone(),
            _ => self.refresh(&cached, generation).value(format).clone(),
        }
    }

    /// Encodes the latest report for `generation` and caches it unless another caller
    /// replaced `seen` meanwhile. The report is read after `generation` was (Acquire), so it
    /// is that generation's report or a newer one: never older than its tag says (a newer
    /// one is only encoded again at the next call).
    fn refresh(&self, seen: &Option<Arc<EncodedReport>>, generation: u64) -> Arc<EncodedReport> {
        let fresh = Arc::new(EncodedReport::new(generation, self.board.latest()));
        let _ = self.cached.compare_and_swap(seen, Some(Arc::clone(&fresh)));
        fresh
    }
}

#[cfg(test)]
mod tests;
