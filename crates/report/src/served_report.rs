//! [`ServedReport`]: the `/load` JSON, the one definition both its encoder (the agent's
//! [`router`](crate::router)) and its decoders (`livecount-balance`'s `HttpLoadSource`) use.

use serde::{Deserialize, Serialize};

use crate::LoadReport;

/// The body of `GET /load`: a [`LoadReport`]'s fields at the top level of one JSON object,
/// plus `age_ms`, how old the report was when served.
///
/// The agent's [`router`](crate::router) encodes it with [`ServedReport::of`];
/// `livecount-balance`'s `HttpLoadSource` decodes it and routes on the fields it needs. Both
/// sides compile against this one type, so a field renamed or retyped here changes both.
///
/// # Compatibility: which bodies parse
///
/// Agents and balancers are upgraded one at a time, so a balancer reads bodies from agents
/// both older and newer than itself:
///
/// * **Unknown fields are ignored**: a newer agent may add fields, and an older balancer
///   still reads the ones it knows.
/// * **Fields added after the first release have defaults**, so an older agent's body
///   still parses: `age_ms` (absent: 0, a fresh report), `prequal` (absent: `None`) and
///   `durations` (absent: none).
///   `max_sessions` may be absent or `null` (`None`, no limit). Every later field must be
///   added the same way.
/// * **A renamed field still reads under its old name**: `refused` was `rejected` in
///   older agents (a serde alias). The rename goes one way only: a balancer older than it
///   requires `rejected` and refuses a newer agent's body (keeping its last good report
///   until that goes stale), so upgrade balancers before agents across it.
/// * **Every other field is required**, and a body missing one is an error, not a report.
///   In particular a body without `sequence`, `active`, `effective_capacity`, `headroom`
///   or `draining` must never read as an idle backend with room (0 active, free
///   capacity): a balancer keeps the last good report until it goes stale instead. A
///   `/load` served by something other than a livecount agent has to send every field.
///
/// # Examples
///
/// ```
/// use livecount_report::{LoadReport, ServedReport};
///
/// let mut report = LoadReport::empty("b1");
/// (report.sequence, report.active, report.headroom) = (7, 30, 90.0);
/// let json = serde_json::to_string(&ServedReport::of(&report)).unwrap();
/// assert!(json.starts_with(r#"{"name":"b1","sequence":7,"#) && json.contains(r#""age_ms":"#));
///
/// let back: ServedReport = serde_json::from_str(&json).unwrap();
/// assert_eq!(back.report, report);
/// ```
///
/// A body without a routing field is refused, and a field from a newer agent is ignored:
///
/// ```
/// # use livecount_report::{LoadReport, ServedReport};
/// let mut body = serde_json::to_value(ServedReport::of(&LoadReport::empty("b1"))).unwrap();
/// body["from_a_newer_agent"] = 1.into();
/// assert!(serde_json::from_value::<ServedReport>(body.clone()).is_ok());
/// body.as_object_mut().unwrap().remove("headroom");
/// assert!(serde_json::from_value::<ServedReport>(body).is_err());
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedReport {
    /// The report, its fields flattened into the body.
    #[serde(flatten)]
    pub report: LoadReport,
    /// Milliseconds between the report's snapshot and the response, by the agent's wall
    /// clock (0 when absent).
    #[serde(default)]
    pub age_ms: u64,
}

impl ServedReport {
    /// The path the agent's [`router`](crate::router) serves it at, and `HttpLoadSource`
    /// polls by default.
    pub const PATH: &'static str = "/load";

    /// `report` as served now: its [`age_ms`](LoadReport::age_ms) read from the wall clock.
    ///
    /// ```
    /// let report = livecount_report::LoadReport::empty("b1");
    /// let served = livecount_report::ServedReport::of(&report);
    /// assert!(served.age_ms < 60_000 && served.report == report);
    /// ```
    pub fn of(report: &LoadReport) -> Self {
        Self::with_age(report.clone(), report.age_ms())
    }

    /// `report` as served `age_ms` after it was taken (a test, a relay that knows better).
    ///
    /// ```
    /// let served = livecount_report::ServedReport::with_age(livecount_report::LoadReport::empty("b1"), 40);
    /// assert_eq!(served.age_ms, 40);
    /// ```
    pub fn with_age(report: LoadReport, age_ms: u64) -> Self {
        ServedReport { report, age_ms }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn full() -> LoadReport {
        let mut r = LoadReport::empty("b1");
        // A fixed stamp: `empty` reads the wall clock, and two reports built a tick apart
        // must still compare equal.
        r.taken_at_unix_ms = 1_796_000_000_000;
        (r.sequence, r.active, r.listening, r.generating) = (9, 5, 3, 2);
        (r.started, r.ended, r.refused) = (12, 7, 1);
        r.ended_by_reason.insert("completed".into(), 7);
        let mut completed = livecount_session::DurationHistogram::default();
        completed.record(std::time::Duration::from_secs(30));
        r.durations.insert("completed".into(), completed);
        (r.max_sessions, r.pretend_qps) = (Some(100), 0.5);
        (r.utilisation, r.raw_utilisation, r.utilisation_measured) = (0.25, 0.3, true);
        (r.effective_capacity, r.headroom, r.weight_percent) = (12.0, 7.0, 40);
        r.prequal = Some(crate::PrequalProbe::unknown_latency(5));
        r
    }

    /// The body is one flat object: every field of the report at the top level, beside
    /// `age_ms` (a nested `report` object would break every reader of the JSON).
    #[test]
    fn the_body_is_the_reports_fields_at_the_top_level_plus_age_ms() {
        let report = full();
        let body = serde_json::to_value(ServedReport::with_age(report.clone(), 40)).unwrap();
        let mut expected = serde_json::to_value(&report).unwrap();
        expected["age_ms"] = 40.into();
        assert_eq!(body, expected);
        assert_eq!(body["sequence"], 9);
        assert!(body.get("report").is_none());
        let back: ServedReport = serde_json::from_value(body).unwrap();
        assert_eq!(back, ServedReport::with_age(report, 40));
    }

    /// An older agent's body (no `age_ms`, no `prequal`, no `durations`, `max_sessions`
    /// left out) parses with their defaults.
    #[test]
    fn fields_added_later_default_when_absent() {
        let mut body = serde_json::to_value(ServedReport::with_age(full(), 40)).unwrap();
        let object = body.as_object_mut().unwrap();
        for added_later in ["age_ms", "prequal", "max_sessions", "durations"] {
            object.remove(added_later);
        }
        let back: ServedReport = serde_json::from_value(body).unwrap();
        assert_eq!((back.age_ms, back.report.prequal), (0, None));
        assert!(back.report.durations.is_empty());
        assert_eq!(back.report.max_sessions, None);
        assert_eq!(back.report.sequence, 9);
    }

    /// An older agent's body names the refusal count `rejected`: it reads as `refused`.
    #[test]
    fn an_older_agents_rejected_reads_as_refused() {
        let mut body = serde_json::to_value(ServedReport::with_age(full(), 40)).unwrap();
        let object = body.as_object_mut().unwrap();
        let count = object.remove("refused").expect("served as `refused`");
        assert!(object.get("rejected").is_none(), "one name on the wire");
        object.insert("rejected".into(), count);
        let back: ServedReport = serde_json::from_value(body).unwrap();
        assert_eq!(back, ServedReport::with_age(full(), 40));
    }

    /// Each field of the first release is required: without any one of them the body is
    /// refused, never read with a made-up value.
    #[test]
    fn every_original_field_is_required() {
        let body = serde_json::to_value(ServedReport::with_age(full(), 40)).unwrap();
        let Value::Object(fields) = &body else {
            panic!("not an object: {body}")
        };
        let optional = ["age_ms", "prequal", "max_sessions", "durations"];
        let required: Vec<&String> = fields
            .keys()
            .filter(|k| !optional.contains(&k.as_str()))
            .collect();
        assert_eq!(required.len(), 18, "{required:?}");
        for field in required {
            let mut without = body.clone();
            without.as_object_mut().unwrap().remove(field);
            assert!(
                serde_json::from_value::<ServedReport>(without).is_err(),
                "a body without {field} parsed"
            );
        }
    }

    /// A newer agent's extra fields are skipped, and the known ones still read.
    #[test]
    fn unknown_fields_are_ignored() {
        let mut body = serde_json::to_value(ServedReport::with_age(full(), 40)).unwrap();
        body["added_by_a_newer_agent"] = json!({"nested": [1, 2]});
        let back: ServedReport = serde_json::from_value(body).unwrap();
        assert_eq!(back, ServedReport::with_age(full(), 40));
    }
}
