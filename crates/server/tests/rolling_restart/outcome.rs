//! What one run of the rolling-restart test measured, the assertions on it, and the report.

use std::fmt::Write as _;
use std::process::ExitStatus;
use std::time::Duration;

use livecount_report::LoadReport;

use crate::clients::{Ending, Record};
use crate::common::lb::Sample;

/// A session planned to end within this of its backend's deadline may end either way
/// (its `bye` and the cut cross on the wire); outside it, the ending is judged.
const MARGIN: f64 = 0.25;

/// One backend's restart, on the test's clock (seconds since the run began).
#[derive(Debug, Clone)]
pub(crate) struct Restart {
    pub(crate) backend: usize,
    pub(crate) term_at: f64,
    /// The first `/load` that said `draining`, and its `started`.
    pub(crate) draining_at: Option<f64>,
    started_at_drain: u64,
    refused_before: u64,
    refused_last: u64,
    /// When the balancer first showed it out, and as what.
    pub(crate) seen_at: Option<f64>,
    seen_state: String,
    sent_at_seen: u64,
    sent_last: u64,
    pub(crate) exited_at: f64,
    pub(crate) back_at: f64,
    status: Option<ExitStatus>,
    /// The agent's `drained in …` and `stopped; …` lines.
    drained: String,
    stopped: String,
    /// started, ended, active from the `stopped` line.
    counts: Option<(u64, u64, u64)>,
    /// Every change in the balancer's view of the whole fleet while this backend drained:
    /// when, and each backend's state and what it had been sent.
    views: Vec<(f64, String)>,
}

impl Restart {
    pub(crate) fn new(backend: usize, refused_before: u64) -> Restart {
        Restart {
            backend,
            term_at: 0.0,
            draining_at: None,
            started_at_drain: 0,
            refused_before,
            refused_last: refused_before,
            seen_at: None,
            seen_state: String::new(),
            sent_at_seen: 0,
            sent_last: 0,
            exited_at: 0.0,
            back_at: 0.0,
            status: None,
            drained: String::new(),
            stopped: String::new(),
            counts: None,
            views: Vec::new(),
        }
    }

    /// Notes the balancer's view of every backend, when it changed.
    pub(crate) fn saw_fleet(&mut self, states: String, t0: std::time::Instant) {
        if self.views.last().is_none_or(|(_, last)| *last != states) {
            self.views.push((t0.elapsed().as_secs_f64(), states));
        }
    }

    pub(crate) fn saw_report(&mut self, report: LoadReport, t0: std::time::Instant) {
        if !report.draining {
            return;
        }
        if self.draining_at.is_none() {
            self.draining_at = Some(t0.elapsed().as_secs_f64());
            self.started_at_drain = report.started;
        }
        self.refused_last = report.refused;
    }

    pub(crate) fn saw_balancer(
        &mut self,
        state: &str,
        out: bool,
        sent: u64,
        t0: std::time::Instant,
    ) {
        if out && self.seen_at.is_none() {
            self.seen_at = Some(t0.elapsed().as_secs_f64());
            self.seen_state = state.to_owned();
            self.sent_at_seen = sent;
        }
        if self.seen_at.is_some() {
            self.sent_last = sent;
        }
    }

    /// Reads the exit status and the agent's last two lines.
    pub(crate) fn exited(&mut self, status: ExitStatus, log: &str) {
        self.status = Some(status);
        let line = |needle: &str| log.lines().find(|l| l.contains(needle)).unwrap_or_default();
        self.drained = line(": drained in ").to_owned();
        self.stopped = line(": stopped; ").to_owned();
        let word = |after: &str| -> Option<u64> {
            let rest = self.stopped.split_once(after)?.1;
            rest.split_whitespace().next()?.parse().ok()
        };
        self.counts = word("started ")
            .zip(word("ended "))
            .zip(word("active "))
            .map(|((s, e), a)| (s, e, a));
    }

    /// Attempts the backend refused while draining (its `refused` rose by this).
    fn refused(&self) -> u64 {
        self.refused_last - self.refused_before
    }

    /// Sessions it started after its first draining report.
    fn started_after_drain(&self) -> Option<u64> {
        self.draining_at?;
        Some(self.counts?.0 - self.started_at_drain)
    }

    /// What the balancer sent it after showing it out, until it exited.
    fn sent_after_seen(&self) -> u64 {
        self.sent_last - self.sent_at_seen
    }

    fn ms(&self, at: Option<f64>) -> String {
        at.map_or("—".into(), |t| {
            format!("{:.0}", 1000.0 * (t - self.term_at))
        })
    }
}

/// One run's numbers.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) kind: &'static str,
    pub(crate) mode: &'static str,
    drain: f64,
    pub(crate) config: String,
    pub(crate) restarts: Vec<Restart>,
    records: Vec<Record>,
    pub(crate) samples: Vec<Sample>,
    last_words: Vec<(ExitStatus, String)>,
    sessions: usize,
    never_opened: usize,
    /// Ended by the server (`Shutdown` or lost) before the client's `bye`.
    cut: usize,
    /// Of those, planned to end before their backend's deadline (less the margin).
    cut_in_time: Vec<usize>,
    shutdown: usize,
    lost: usize,
    /// Open at their backend's SIGTERM and planned past its deadline (plus the margin).
    long_at_term: usize,
    long_not_shutdown: Vec<usize>,
    borderline: usize,
    hinted: usize,
    unhinted: Vec<String>,
    /// Opened (headers at the client) after their backend's first draining report.
    opened_on_draining: usize,
    /// The balancer's own counters at the end (Envoy: panics, retries, health checks).
    pub(crate) counters: String,
}

impl Outcome {
    #[allow(clippy::too_many_arguments)] // one run's every part, named at the one call
    pub(crate) fn new(
        kind: &str,
        mode: &'static str,
        drain: Duration,
        config: String,
        restarts: Vec<Restart>,
        records: Vec<Record>,
        samples: Vec<Sample>,
        last_words: Vec<(ExitStatus, String)>,
    ) -> Outcome {
        let kind = if kind == "envoy" { "Envoy" } else { "HAProxy" };
        let mut o = Outcome {
            kind,
            mode,
            drain: drain.as_secs_f64(),
            config,
            restarts,
            records,
            samples,
            last_words,
            sessions: 0,
            never_opened: 0,
            cut: 0,
            cut_in_time: Vec::new(),
            shutdown: 0,
            lost: 0,
            long_at_term: 0,
            long_not_shutdown: Vec::new(),
            borderline: 0,
            hinted: 0,
            unhinted: Vec::new(),
            opened_on_draining: 0,
            counters: String::new(),
        };
        o.count();
        o
    }

    fn count(&mut self) {
        for (i, s) in self.records.iter().enumerate() {
            for (hint, what) in &s.refusals {
                match hint {
                    true => self.hinted += 1,
                    false => self.unhinted.push(what.clone()),
                }
            }
            if s.ending == Ending::NeverOpened {
                self.never_opened += 1;
                continue;
            }
            self.sessions += 1;
            let r = &self.restarts[s.backend];
            // On the process that got the SIGTERM (the new one starts after it exited).
            let old = s.opened_at < r.exited_at;
            // Judged against the drain run's deadline in both modes: in a cut run, these
            // are the sessions a drain would have let finish.
            let deadline = if old {
                r.term_at + crate::DEADLINE.as_secs_f64()
            } else {
                f64::INFINITY
            };
            let cut = matches!(s.ending, Ending::Shutdown | Ending::Lost(_));
            self.cut += usize::from(cut);
            self.shutdown += usize::from(s.ending == Ending::Shutdown);
            self.lost += usize::from(matches!(s.ending, Ending::Lost(_)));
            if cut && s.planned_end() < deadline - MARGIN {
                self.cut_in_time.push(i);
            }
            if old && (s.planned_end() - deadline).abs() <= MARGIN {
                self.borderline += 1;
            }
            if old && s.opened_at < r.term_at && s.planned_end() > deadline + MARGIN {
                self.long_at_term += 1;
                if s.ending != Ending::Shutdown {
                    self.long_not_shutdown.push(i);
                }
            }
            if old && r.draining_at.is_some_and(|d| s.opened_at > d) {
                self.opened_on_draining += 1;
            }
        }
    }

    fn show(&self, which: &[usize]) -> String {
        let mut out = String::new();
        for &i in which.iter().take(10) {
            let s = &self.records[i];
            let r = &self.restarts[s.backend];
            let _ = writeln!(
                out,
                "  session {i} on b{}: opened {:.2}, planned end {:.2}, ended {:.2} {:?}; \
                 its backend's SIGTERM {:.2}, deadline {:.2}",
                s.backend + 1,
                s.opened_at,
                s.planned_end(),
                s.ended_at,
                s.ending,
                r.term_at,
                r.term_at + crate::DEADLINE.as_secs_f64()
            );
        }
        out
    }

    /// The sessions that never opened: when each attempt began and what refused it.
    fn show_never_opened(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.records.iter().enumerate() {
            if s.ending == Ending::NeverOpened {
                let _ = writeln!(
                    out,
                    "  session {i}: first attempt {:.2}, gave up {:.2}: {:?}",
                    s.first_attempt, s.ended_at, s.refusals
                );
            }
        }
        out
    }

    /// The assertions: every run's backends exit clean; a drain run also cuts nothing that
    /// ends in time, ends the long ones `Shutdown`, starts nothing on a draining backend,
    /// and every refusal a client saw carried its hint.
    pub(crate) fn check(&self, deadline: Duration) {
        let who = format!("{} {}", self.kind, self.mode);
        for r in &self.restarts {
            let status = r.status.unwrap();
            assert!(
                status.success(),
                "{who}: b{} exits 0: {status}",
                r.backend + 1
            );
            let (started, ended, active) = r
                .counts
                .unwrap_or_else(|| panic!("{who}: no counts in {:?}", r.stopped));
            assert_eq!((started, active), (ended, 0), "{who}: {}", r.stopped);
        }
        for (status, line) in &self.last_words {
            assert!(
                status.success() && line.contains("active 0"),
                "{who}: the new agents at the end: {status} {line}"
            );
        }
        if self.mode == "cut" {
            return;
        }
        assert_eq!(self.drain, deadline.as_secs_f64());
        assert_eq!(
            self.never_opened,
            0,
            "{who}: sessions never opened:\n{}\nthe balancer's view while each backend drained:\n{}\n{}",
            self.show_never_opened(),
            self.restarts
                .iter()
                .flat_map(|r| r
                    .views
                    .iter()
                    .map(move |(t, v)| format!("  b{} {t:.2}: {v}", r.backend + 1)))
                .collect::<Vec<_>>()
                .join("\n"),
            self.counters
        );
        assert!(
            self.unhinted.is_empty(),
            "{who}: refusals without a retry hint: {:?}",
            self.unhinted
        );
        assert!(
            self.cut_in_time.is_empty(),
            "{who}: {} sessions cut that were planned to end before the deadline:\n{}",
            self.cut_in_time.len(),
            self.show(&self.cut_in_time)
        );
        assert!(
            self.long_at_term > 0,
            "{who}: no session outlived a deadline: the workload tested nothing"
        );
        assert!(
            self.long_not_shutdown.is_empty(),
            "{who}: sessions open past the deadline that did not end Shutdown:\n{}",
            self.show(&self.long_not_shutdown)
        );
        for r in &self.restarts {
            let b = r.backend + 1;
            assert!(
                r.draining_at.is_some(),
                "{who}: b{b} never reported draining"
            );
            assert!(
                r.seen_at.is_some(),
                "{who}: the balancer never took b{b} out before it exited"
            );
            assert_eq!(
                r.started_after_drain(),
                Some(0),
                "{who}: b{b} started sessions after its first draining report"
            );
            // HAProxy's DRAIN state is final: nothing new reaches the server. Envoy was seen
            // sending a few calls to a host after its health check had failed (the agent
            // refused them, Envoy retried them elsewhere): measured and reported; the
            // guarantee that matters is the one above, none of them became a session.
            if self.kind == "HAProxy" {
                assert_eq!(
                    r.sent_after_seen(),
                    0,
                    "{who}: HAProxy sent b{b} work after it took it out: {r:?}"
                );
            }
        }
    }

    /// One line for the test's output.
    pub(crate) fn summary(&self) -> String {
        format!(
            "{} {}: sessions {} (never opened {}), cut {} (in time {}), Shutdown {}, lost {}, \
             long at SIGTERM {}, borderline {}, refusals hinted {} unhinted {:?}, opened on draining {}\n{}",
            self.kind,
            self.mode,
            self.sessions,
            self.never_opened,
            self.cut,
            self.cut_in_time.len(),
            self.shutdown,
            self.lost,
            self.long_at_term,
            self.borderline,
            self.hinted,
            self.unhinted,
            self.opened_on_draining,
            self.counters.trim_end()
        )
    }

    fn row(&self) -> String {
        let sum = |f: &dyn Fn(&Restart) -> u64| self.restarts.iter().map(f).sum::<u64>();
        let seen: Vec<String> = self.restarts.iter().map(|r| r.ms(r.seen_at)).collect();
        let started = self
            .restarts
            .iter()
            .filter_map(Restart::started_after_drain)
            .sum::<u64>();
        format!(
            "| {} | {} | {} | {} | **{}** | {} | {} | {} | {} / {} | {} | {} | {} |\n",
            self.kind,
            self.mode,
            self.sessions,
            self.cut,
            self.cut_in_time.len(),
            self.shutdown,
            self.lost,
            sum(&Restart::refused),
            self.hinted,
            self.unhinted.len(),
            sum(&Restart::sent_after_seen),
            started,
            seen.join(" / "),
        )
    }

    /// Per restart: the timings and counts.
    fn restart_rows(&self) -> String {
        let mut t = String::new();
        for r in &self.restarts {
            let _ = writeln!(
                t,
                "| {} {} | b{} | {} | {} (`{}`) | {:.0} | {:.0} | {} | {} | `{}` |",
                self.kind,
                self.mode,
                r.backend + 1,
                r.ms(r.draining_at),
                r.ms(r.seen_at),
                r.seen_state,
                1000.0 * (r.exited_at - r.term_at),
                1000.0 * (r.back_at - r.term_at),
                r.refused(),
                r.sent_after_seen(),
                r.drained.split_once(": ").map_or("", |(_, l)| l),
            );
        }
        t
    }

    /// Lost endings, grouped.
    fn lost_reasons(&self) -> String {
        let mut by: std::collections::BTreeMap<String, usize> = Default::default();
        for s in &self.records {
            if let Ending::Lost(why) = &s.ending {
                *by.entry(why.clone()).or_default() += 1;
            }
        }
        by.iter()
            .map(|(w, n)| format!("{n} × `{w}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The cut-vs-drain table, one row per run.
pub(crate) fn table(outcomes: &[Outcome]) -> String {
    let mut t = String::from(
        "| balancer | mode | sessions | cut (ended by the server before the client's bye) | of those, planned to end within 4 s of the SIGTERM (before a drain's deadline) | ended `Shutdown` (1012 / `UNAVAILABLE`) | other server-side ends | attempts refused by draining backends | refusals seen by clients (with hint / without) | sent to a backend after the balancer took it out | sessions started on a draining backend | balancer took the backend out after (ms; b1 / b2 / b3) |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for o in outcomes {
        t.push_str(&o.row());
    }
    t
}

/// The report's body.
pub(crate) fn body(
    outcomes: &[Outcome],
    table: &str,
    deadline: Duration,
    warm: Duration,
    seed: u64,
    secs: f64,
) -> String {
    let mut restarts = String::from(
        "| run | backend | first draining `/load` (ms after SIGTERM) | balancer took it out (ms) | exited (ms) | back in the balancer (ms) | attempts it refused | sent after taken out | the agent's line |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    let mut lost = String::new();
    for o in outcomes {
        restarts.push_str(&o.restart_rows());
        let reasons = o.lost_reasons();
        if !reasons.is_empty() {
            let _ = writeln!(lost, "* {} {}: {reasons}", o.kind, o.mode);
        }
    }
    if lost.is_empty() {
        lost.push_str("none.");
    } else {
        lost.insert(0, '\n');
    }
    let mut configs = String::new();
    for o in outcomes.iter().filter(|o| o.mode == "drain") {
        let lang = if o.kind == "Envoy" { "yaml" } else { "" };
        let _ = write!(configs, "### {}\n\n```{lang}\n{}```\n\n", o.kind, o.config);
    }
    format!(
        "Three agents (`--cores 1 --work-ms 1 --report-secs 0.5`), restarted one by one: \
         SIGTERM, wait for the exit, a new agent with the same options on the same ports, \
         wait until the balancer has it back, the next. Each balancer is run twice on the \
         same workload (seed {seed}): **cut** (`--drain-secs 0`: every open session ends \
         at the signal, as on a server that stops without draining) and **drain** \
         (`--drain-secs {d}`). The workload: a new session every 150 ms from {w} s before \
         the first SIGTERM until 1 s after the last backend is back, each planned to last \
         1–8 s (uniform), \
         a turn (speak 3 chunks, read them) every 700 ms; gRPC `Converse` through Envoy, \
         WebSocket through HAProxy. A client whose attempt is refused retries after 200 ms \
         (at most 5 attempts).\n\n\
         A session is *cut* when the server ended it before its client said `bye`; *planned \
         to end before the deadline* means its planned end came more than {m} s before its \
         backend's SIGTERM + {d} s (within ±{m} s the `bye` and the cut cross on the wire, \
         and either end is right).\n\n\
         ## Cut vs drain\n\n{table}\n\
         ## Each restart\n\n{restarts}\n\
         Other server-side ends, by what the client saw: {lost}\n\n\
         Test duration (all four runs) {secs:.0} s.\n\n\
         ## The configurations (drain runs; the cut runs are the same)\n\n{configs}",
        d = deadline.as_secs_f64(),
        w = warm.as_secs_f64(),
        m = MARGIN,
    )
}

/// Active sessions per backend over each run, a panel per run, SIGTERMs dashed.
pub(crate) fn plot(path: &std::path::Path, outcomes: &[Outcome]) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let colours = [BLUE, GREEN, RED];
    for (area, o) in root.split_evenly((2, 2)).iter().zip(outcomes) {
        let t_max = o.samples.last().map_or(1.0, |s| s.t).max(1.0);
        let top = o
            .samples
            .iter()
            .flat_map(|s| s.active.iter().copied())
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} {}: active sessions", o.kind, o.mode),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(36)
            .build_cartesian_2d(0.0..t_max, 0.0..top * 1.15)
            .unwrap();
        chart.configure_mesh().x_desc("seconds").draw().unwrap();
        for (i, c) in colours.iter().enumerate() {
            let line = o.samples.iter().map(|s| (s.t, s.active[i] as f64));
            chart
                .draw_series(LineSeries::new(line, c))
                .unwrap()
                .label(format!("b{}", i + 1))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
            let r = &o.restarts[i];
            let dashes = (0..12).map(|k| {
                let y = top * 1.15 * f64::from(k) / 12.0;
                PathElement::new(vec![(r.term_at, y), (r.term_at, y + top * 0.05)], c)
            });
            chart.draw_series(dashes).unwrap();
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .draw()
            .unwrap();
    }
    root.present().unwrap();
}
