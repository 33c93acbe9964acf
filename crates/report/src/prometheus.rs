//! Prometheus text exposition (format 0.0.4) of a [`LoadReport`].

use std::fmt::Write;

use crate::LoadReport;

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders `report` for a `/metrics` scrape: every series from one coherent report, so a
/// scrape never mixes two moments (no counter is read twice).
///
/// ```
/// let mut report = livecount_report::LoadReport::empty("b1");
/// report.active = 3;
/// report.generating = 1;
/// report.listening = 2;
/// let text = livecount_report::prometheus::render(&report);
/// assert!(text.contains("livecount_active_sessions 3\n"));
/// assert!(text.contains("livecount_sessions{state=\"generating\"} 1\n"));
/// ```
pub fn render(report: &LoadReport) -> String {
    let mut s = String::with_capacity(2048);
    let mut gauge = |name: &str, help: &str, value: f64| {
        let _ = writeln!(
            s,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    };
    gauge(
        "livecount_active_sessions",
        "Sessions open now.",
        report.active as f64,
    );
    gauge(
        "livecount_pretend_qps",
        "Active sessions divided by the window: the session count as a request rate.",
        report.pretend_qps,
    );
    gauge(
        "livecount_utilisation",
        "Utilisation over the last interval (process CPU per core), smoothed.",
        report.utilisation,
    );
    gauge(
        "livecount_utilisation_measured",
        "1 if utilisation was measured, 0 if the platform gave none.",
        f64::from(u8::from(report.utilisation_measured)),
    );
    gauge(
        "livecount_effective_capacity",
        "Sessions the backend can hold by the next report (hybrid model, at most max_sessions).",
        report.effective_capacity,
    );
    gauge(
        "livecount_headroom",
        "Effective capacity minus active sessions.",
        report.headroom,
    );
    if let Some(max) = report.max_sessions {
        gauge(
            "livecount_max_sessions",
            "Sessions above this are refused.",
            max as f64,
        );
    }
    gauge(
        "livecount_agent_weight_percent",
        "Weight given to HAProxy agent-check.",
        f64::from(report.weight_percent),
    );
    gauge(
        "livecount_draining",
        "1 while shutting down.",
        f64::from(u8::from(report.draining)),
    );
    gauge(
        "livecount_report_sequence",
        "Sequence number of the snapshot behind these numbers.",
        report.sequence as f64,
    );
    let _ = writeln!(
        s,
        "# HELP livecount_sessions Open sessions by state.\n# TYPE livecount_sessions gauge\n\
         livecount_sessions{{state=\"listening\"}} {}\n\
         livecount_sessions{{state=\"generating\"}} {}",
        report.listening, report.generating
    );
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_started_total Sessions started.\n\
         # TYPE livecount_sessions_started_total counter\n\
         livecount_sessions_started_total {}",
        report.started
    );
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_ended_total Sessions ended, by reason.\n\
         # TYPE livecount_sessions_ended_total counter"
    );
    for (reason, n) in &report.ended_by_reason {
        let _ = writeln!(
            s,
            "livecount_sessions_ended_total{{reason=\"{}\"}} {n}",
            escape_label(reason)
        );
    }
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_rejected_total Sessions refused before they started.\n\
         # TYPE livecount_sessions_rejected_total counter\n\
         livecount_sessions_rejected_total {}",
        report.rejected
    );
    s
}

/// A label value with `\`, `"` and newlines escaped, as the text format requires.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample line as (series, value).
    fn samples(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("series value");
                (series.to_owned(), value.parse().expect("a number"))
            })
            .collect()
    }

    #[test]
    fn every_series_is_from_the_report_and_each_has_help_and_type() {
        let mut r = LoadReport::empty("b");
        (r.active, r.listening, r.generating, r.started, r.ended) = (3, 2, 1, 9, 6);
        r.ended_by_reason = [("completed".into(), 4), ("failed".into(), 2)].into();
        (r.rejected, r.max_sessions, r.sequence) = (5, Some(10), 42);
        (
            r.pretend_qps,
            r.utilisation,
            r.effective_capacity,
            r.headroom,
        ) = (0.3, 0.25, 8.5, 5.5);
        r.weight_percent = 55;
        let text = render(&r);
        let got = samples(&text);
        let want = [
            ("livecount_active_sessions", 3.0),
            ("livecount_pretend_qps", 0.3),
            ("livecount_utilisation", 0.25),
            ("livecount_utilisation_measured", 0.0),
            ("livecount_effective_capacity", 8.5),
            ("livecount_headroom", 5.5),
            ("livecount_max_sessions", 10.0),
            ("livecount_agent_weight_percent", 55.0),
            ("livecount_draining", 0.0),
            ("livecount_report_sequence", 42.0),
            ("livecount_sessions{state=\"listening\"}", 2.0),
            ("livecount_sessions{state=\"generating\"}", 1.0),
            ("livecount_sessions_started_total", 9.0),
            ("livecount_sessions_ended_total{reason=\"completed\"}", 4.0),
            ("livecount_sessions_ended_total{reason=\"failed\"}", 2.0),
            ("livecount_sessions_rejected_total", 5.0),
        ];
        let want: Vec<_> = want.iter().map(|(s, v)| (s.to_string(), *v)).collect();
        assert_eq!(got, want);
        for (series, _) in &got {
            let name = series.split('{').next().unwrap();
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} has no TYPE"
            );
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP"
            );
        }
        r.max_sessions = None;
        assert!(!render(&r).contains("livecount_max_sessions"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
