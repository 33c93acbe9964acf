//! Session spans (feature `tracing`), read back from a recording subscriber: one span per
//! session of a traced tracker, its events in order, its end recorded once whichever ender
//! wins, closed once when its last holder lets go; refusals; nothing from an untraced tracker.

#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livecount_session::{EndReason, Phase, SessionTracker, trace};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// What the subscriber saw of one span.
#[derive(Debug, Default, Clone)]
struct SpanRec {
    name: String,
    fields: BTreeMap<String, String>,
    /// Each event: its message and fields.
    events: Vec<(String, BTreeMap<String, String>)>,
    /// How many times a value was recorded for the end reason.
    end_records: usize,
    closed: usize,
    parent: Option<u64>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<SpanRec>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut rec = SpanRec {
            name: attrs.metadata().name().into(),
            ..SpanRec::default()
        };
        attrs.record(&mut Fields(&mut rec.fields));
        rec.parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .map(|p| p.id().into_u64());
        let mut spans = self.0.lock().unwrap();
        spans.push(rec);
        let index = spans.len() - 1;
        ctx.span(id).unwrap().extensions_mut().insert(index);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let index = *ctx.span(id).unwrap().extensions().get::<usize>().unwrap();
        let mut fields = BTreeMap::new();
        values.record(&mut Fields(&mut fields));
        let mut spans = self.0.lock().unwrap();
        if fields.contains_key(trace::attr::END_REASON) {
            spans[index].end_records += 1;
        }
        spans[index].fields.extend(fields);
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let index = *span.extensions().get::<usize>().unwrap();
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        self.0.lock().unwrap()[index].events.push((message, fields));
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let index = *ctx.span(&id).unwrap().extensions().get::<usize>().unwrap();
        self.0.lock().unwrap()[index].closed += 1;
    }
}

impl Recorder {
    fn spans(&self) -> Vec<SpanRec> {
        self.0.lock().unwrap().clone()
    }
}

/// Runs `f` with a fresh recorder as the thread's default subscriber.
fn recorded(f: impl FnOnce()) -> Vec<SpanRec> {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    tracing::subscriber::with_default(subscriber, f);
    recorder.spans()
}

fn event_names(rec: &SpanRec) -> Vec<&str> {
    rec.events.iter().map(|(m, _)| m.as_str()).collect()
}

#[test]
fn a_session_is_one_span_with_its_life_as_events() {
    let mut id = 0;
    let spans = recorded(|| {
        let tracker = SessionTracker::new();
        assert!(tracker.trace_sessions("b1"));
        let mut session = tracker.start();
        id = session.id().as_u64();
        session.trace_tag("tenant-7");
        session.trace_transport("websocket");
        assert!(session.set_phase(Phase::Generating));
        assert!(
            session.set_phase(Phase::Generating),
            "live, but no change: no event"
        );
        session.note_first_chunk();
        session.note_interrupt();
        session.handle().note_interrupt();
        assert!(session.set_phase(Phase::Listening));
        assert!(session.end(EndReason::Completed));
        assert!(!session.end(EndReason::Disconnected));
        assert!(!session.span().is_disabled());
    });
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0];
    assert_eq!(span.name, trace::SPAN);
    let field = |k: &str| span.fields.get(k).map(String::as_str);
    assert_eq!(field("otel.name"), Some(trace::SPAN));
    assert_eq!(field("otel.kind"), Some("server"));
    assert_eq!(field(trace::attr::ID), Some(id.to_string().as_str()));
    assert_eq!(field(trace::attr::BACKEND), Some("b1"));
    assert_eq!(field(trace::attr::TAG), Some("tenant-7"));
    assert_eq!(field(trace::attr::TRANSPORT), Some("websocket"));
    assert_eq!(field(trace::attr::END_REASON), Some("completed"));
    assert!(field(trace::attr::DURATION).is_some());
    assert_eq!(
        event_names(span),
        [
            trace::event::PHASE,
            trace::event::FIRST_CHUNK,
            trace::event::INTERRUPT,
            trace::event::INTERRUPT,
            trace::event::PHASE,
            trace::event::END,
        ]
    );
    let phases: Vec<_> = span
        .events
        .iter()
        .filter(|(m, _)| m == trace::event::PHASE)
        .map(|(_, f)| f[trace::attr::PHASE].clone())
        .collect();
    assert_eq!(phases, ["generating", "listening"]);
    assert!(
        span.events[1]
            .1
            .contains_key(trace::attr::TIME_TO_FIRST_CHUNK)
    );
    assert_eq!(span.events[5].1[trace::attr::END_REASON], "completed");
    assert_eq!((span.end_records, span.closed), (1, 1));
}

#[test]
fn the_end_is_recorded_once_when_enders_race_on_other_threads() {
    for round in 0..50 {
        let spans = recorded(|| {
            let tracker = SessionTracker::new();
            tracker.trace_sessions("b1");
            let session = tracker.start();
            let handles: Vec<_> = [
                EndReason::TimedOut,
                EndReason::Cancelled,
                EndReason::Disconnected,
            ]
            .into_iter()
            .map(|reason| {
                let handle = session.handle();
                // These threads have no default subscriber: the end must still reach
                // the span's.
                std::thread::spawn(move || handle.end(reason))
            })
            .collect();
            let won: usize = handles
                .into_iter()
                .map(|h| usize::from(h.join().unwrap()))
                .sum();
            assert_eq!(won, 1);
            let reason = session.reason().unwrap();
            drop(session);
            assert_eq!(tracker.snapshot().ended_by(reason), 1);
        });
        assert_eq!(spans.len(), 1, "round {round}");
        let span = &spans[0];
        assert_eq!(
            (span.end_records, span.closed),
            (1, 1),
            "round {round}: {span:#?}"
        );
        assert_eq!(event_names(span), [trace::event::END], "round {round}");
        assert_eq!(
            span.events[0].1[trace::attr::END_REASON],
            span.fields[trace::attr::END_REASON]
        );
    }
}

#[test]
fn the_span_closes_with_the_last_holder_and_the_drop_ends_it() {
    let spans = recorded(|| {
        let tracker = SessionTracker::new();
        tracker.trace_sessions("b1");
        let session = tracker.start();
        let handle = session.handle();
        drop(session); // ends it (Dropped); the handle still holds the slot
        assert_eq!(handle.reason(), Some(EndReason::Dropped));
    });
    let span = &spans[0];
    assert_eq!(span.fields[trace::attr::END_REASON], "dropped");
    assert_eq!((span.end_records, span.closed), (1, 1));

    // A ghost: reaped while its guard is held; the end is recorded at the reaping, the span
    // closes when the guard goes.
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    tracing::subscriber::with_default(subscriber, || {
        let tracker = SessionTracker::new();
        tracker.trace_sessions("b1");
        let t0 = Instant::now() + Duration::from_secs(1);
        let ghost = tracker.try_start_at(t0).unwrap();
        let reaped = tracker.reap_at(t0 + Duration::from_secs(60), Duration::from_secs(30));
        assert_eq!(reaped.len(), 1);
        let seen = &recorder.spans()[0];
        assert_eq!(
            (seen.end_records, seen.closed),
            (1, 0),
            "recorded, still held"
        );
        assert_eq!(seen.fields[trace::attr::END_REASON], "reaped");
        assert_eq!(seen.fields[trace::attr::DURATION], "60.0");
        drop(ghost);
    });
    assert_eq!(recorder.spans()[0].closed, 1);
}

#[test]
fn refusals_leave_a_zero_length_span_and_the_drain_an_event_on_open_sessions() {
    let spans = recorded(|| {
        let tracker = SessionTracker::with_max_sessions(1);
        tracker.trace_sessions("b1");
        let open = tracker.start();
        assert!(tracker.try_start().is_err());
        assert!(tracker.begin_drain());
        assert!(!tracker.begin_drain(), "the second call is no drain");
        assert!(tracker.try_start().is_err());
        open.end(EndReason::Shutdown);
    });
    let names: Vec<_> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [trace::SPAN, trace::REFUSED_SPAN, trace::REFUSED_SPAN]
    );
    assert_eq!(spans[1].fields[trace::attr::REFUSAL], "at_capacity");
    assert_eq!(spans[2].fields[trace::attr::REFUSAL], "draining");
    assert_eq!(spans[1].fields["otel.status_code"], "ERROR");
    assert!(
        spans[1..]
            .iter()
            .all(|s| s.closed == 1 && s.events.is_empty())
    );
    assert_eq!(
        event_names(&spans[0]),
        [trace::event::DRAIN, trace::event::END]
    );
    assert_eq!(spans[0].fields[trace::attr::END_REASON], "shutdown");
}

#[test]
fn a_session_span_is_a_child_of_the_callers_span() {
    let spans = recorded(|| {
        let tracker = SessionTracker::new();
        tracker.trace_sessions("b1");
        let request = tracing::info_span!("request");
        let session = request.in_scope(|| tracker.start());
        drop(session);
    });
    assert_eq!(spans[0].name, "request");
    assert_eq!(spans[1].name, trace::SPAN);
    assert!(spans[1].parent.is_some());
}

#[test]
fn an_untraced_tracker_or_no_subscriber_leaves_nothing() {
    let spans = recorded(|| {
        let tracker = SessionTracker::new();
        let mut session = tracker.start();
        session.set_phase(Phase::Generating);
        session.note_interrupt();
        session.note_first_chunk();
        session.trace_transport("grpc");
        assert!(session.span().is_disabled());
        tracker.begin_drain();
        let _ = tracker.try_start();
    });
    assert!(spans.is_empty(), "{spans:#?}");

    // Traced, but no subscriber: the span is empty and everything still counts.
    let tracker = SessionTracker::new();
    tracker.trace_sessions("b1");
    // (In this test binary other threads install subscribers, so `tracing`'s cached interest
    // may hand out a span bound to no subscriber; the benchmark measures a process with none.)
    let session = tracker.start();
    assert!(session.end(EndReason::Completed));
    assert_eq!(tracker.snapshot().ended_by(EndReason::Completed), 1);
}

#[test]
fn reused_slots_carry_each_sessions_own_span() {
    let spans = recorded(|| {
        let tracker = SessionTracker::new();
        tracker.trace_sessions("b1");
        for reason in [
            EndReason::Completed,
            EndReason::Failed,
            EndReason::Cancelled,
        ] {
            let session = tracker.start();
            session.end(reason);
        }
        // The slot is reused: a fourth session, untouched by the three before.
        let last = tracker.start();
        drop(last);
    });
    let reasons: Vec<_> = spans
        .iter()
        .map(|s| s.fields[trace::attr::END_REASON].as_str())
        .collect();
    assert_eq!(reasons, ["completed", "failed", "cancelled", "dropped"]);
    let ids: std::collections::BTreeSet<_> = spans
        .iter()
        .map(|s| s.fields[trace::attr::ID].clone())
        .collect();
    assert_eq!(ids.len(), 4, "each session its own id");
    assert!(
        spans
            .iter()
            .all(|s| s.end_records == 1 && s.closed == 1 && s.events.len() == 1)
    );
}
