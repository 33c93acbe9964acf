//! Prometheus text exposition (format 0.0.4) of a [`LoadReport`].

use std::fmt::Write;

use crate::LoadReport;

/// Renders `report` for a `/metrics` scrape: one coherent snapshot, every series from it.
///
/// ```
/// # use livecount_server::{LoadReport, prometheus_text};
/// # let report = LoadReport { name: "b1".into(), sequence: 7, taken_at_unix_ms: 0, active: 3,
/// #     listening: 2, generating: 1, started: 5, ended: 2, ended_by_reason: Default::default(),
/// #     rejected: 0, pretend_qps: 0.3, utilisation: 0.1, raw_utilisation: 0.1,
/// #     effective_capacity: 40.0, headroom: 37.0, weight_percent: 93, draining: false };
/// let text = prometheus_text::render(&report);
/// assert!(text.contains("livecount_active_sessions 3\n"));
/// assert!(text.contains("livecount_sessions{state=\"generating\"} 1\n"));
/// ```
pub fn render(report: &LoadReport) -> String {
    let mut s = String::new();
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
        "Active sessions divided by the window (ORCA rps_fractional).",
        report.pretend_qps,
    );
    gauge(
        "livecount_utilisation",
        "Process CPU over the last interval per core, smoothed.",
        report.utilisation,
    );
    gauge(
        "livecount_effective_capacity",
        "Sessions the backend can hold by the next report (hybrid model).",
        report.effective_capacity,
    );
    gauge(
        "livecount_headroom",
        "Effective capacity minus active sessions.",
        report.headroom,
    );
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
        "# HELP livecount_sessions Open sessions by state.\n# TYPE livecount_sessions gauge"
    );
    let _ = writeln!(
        s,
        "livecount_sessions{{state=\"listening\"}} {}",
        report.listening
    );
    let _ = writeln!(
        s,
        "livecount_sessions{{state=\"generating\"}} {}",
        report.generating
    );
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_started_total Sessions started.\n# TYPE livecount_sessions_started_total counter"
    );
    let _ = writeln!(s, "livecount_sessions_started_total {}", report.started);
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_ended_total Sessions ended, by reason.\n# TYPE livecount_sessions_ended_total counter"
    );
    for (reason, n) in &report.ended_by_reason {
        let _ = writeln!(
            s,
            "livecount_sessions_ended_total{{reason=\"{reason}\"}} {n}"
        );
    }
    let _ = writeln!(
        s,
        "# HELP livecount_sessions_rejected_total Sessions refused before they started.\n# TYPE livecount_sessions_rejected_total counter"
    );
    let _ = writeln!(s, "livecount_sessions_rejected_total {}", report.rejected);
    s
}
