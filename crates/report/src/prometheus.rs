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
    durations(&mut s, report);
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_refused_total Sessions refused before they started.\n\
         # TYPE livecount_sessions_refused_total counter\n\
         livecount_sessions_refused_total {}",
        report.refused
    );
    s
}

/// The histogram `livecount_session_duration_seconds{reason}`: cumulative `_bucket{le}`
/// series ending in `+Inf`, then `_sum` (seconds) and `_count`, per reason. Left out when
/// the report has none (an agent that predates it).
fn durations(s: &mut String, report: &LoadReport) {
    const NAME: &str = "livecount_session_duration_seconds";
    if report.durations.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "# HELP {NAME} How long ended sessions lasted, by end reason.\n# TYPE {NAME} histogram"
    );
    for (reason, h) in &report.durations {
        let reason = escape_label(reason);
        for (bound, n) in h.cumulative() {
            // `le` as Go's client formats it (shortest round-trip float: 0.1, 1, 2.5, 3600),
            // so fleets mixing exporters share bucket labels.
            let le = bound.map_or_else(|| "+Inf".to_owned(), |b| b.as_secs_f64().to_string());
            let _ = writeln!(s, "{NAME}_bucket{{reason=\"{reason}\",le=\"{le}\"}} {n}");
        }
        let sum = h.sum_secs();
        let _ = writeln!(s, "{NAME}_sum{{reason=\"{reason}\"}} {sum}");
        let _ = writeln!(s, "{NAME}_count{{reason=\"{reason}\"}} {}", h.count());
    }
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
        (r.refused, r.max_sessions, r.sequence) = (5, Some(10), 42);
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
            ("livecount_sessions_refused_total", 5.0),
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

    /// The duration histogram follows the text format's rules for a histogram: one `TYPE
    /// histogram` for the family; per label set, `_bucket` series with ascending `le`
    /// values, cumulative counts that never decrease, the last `le="+Inf"` equal to
    /// `_count`; and a `_sum`. The values are the report's.
    #[test]
    fn the_duration_histogram_is_a_valid_prometheus_histogram() {
        use livecount_session::DurationHistogram;
        use std::time::Duration;

        let mut r = LoadReport::empty("b");
        let mut completed = DurationHistogram::default();
        for secs in [0.05, 3.0, 3.0, 42.0, 5000.0] {
            completed.record(Duration::from_secs_f64(secs));
        }
        r.durations.insert("completed".into(), completed);
        r.durations
            .insert("failed".into(), DurationHistogram::default());
        let text = render(&r);
        let name = "livecount_session_duration_seconds";
        assert_eq!(
            text.matches(&format!("# TYPE {name} histogram\n")).count(),
            1
        );
        assert_eq!(text.matches(&format!("# HELP {name} ")).count(), 1);
        let got = samples(&text);
        for (reason, h) in &r.durations {
            let labels = format!("reason=\"{reason}\"");
            let buckets: Vec<(f64, f64)> = got
                .iter()
                .filter_map(|(series, v)| {
                    let rest = series.strip_prefix(&format!("{name}_bucket{{{labels},le=\""))?;
                    let le = rest.strip_suffix("\"}")?;
                    let le = if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().unwrap()
                    };
                    Some((le, *v))
                })
                .collect();
            assert_eq!(buckets.len(), DurationHistogram::BUCKETS, "{reason}");
            assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0), "le ascends");
            assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
            let value = |suffix: &str| {
                let series = format!("{name}_{suffix}{{{labels}}}");
                got.iter().find(|(s, _)| *s == series).map(|(_, v)| *v)
            };
            let count = value("count").expect("a _count");
            assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, count));
            assert_eq!(count, h.count() as f64);
            assert_eq!(value("sum"), Some(h.sum_secs()));
        }
        // The report's buckets, cumulated: 0.05 s ≤ 0.1; two 3 s ≤ 5; 42 s ≤ 60; 5000 s only +Inf.
        for (series, want) in [
            ("le=\"0.1\"", 1.0),
            ("le=\"2.5\"", 1.0),
            ("le=\"5\"", 3.0),
            ("le=\"60\"", 4.0),
            ("le=\"3600\"", 4.0),
            ("le=\"+Inf\"", 5.0),
        ] {
            let series = format!("{name}_bucket{{reason=\"completed\",{series}}}");
            assert!(got.contains(&(series.clone(), want)), "{series} {want}");
        }
        assert!(got.contains(&(format!("{name}_sum{{reason=\"completed\"}}"), 5048.05)));
        // A report without durations (an older agent's) renders no histogram at all.
        assert!(!render(&LoadReport::empty("b")).contains(name));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
