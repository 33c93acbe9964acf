//! loom models of the session span's end (feature `tracing`): whichever of timeout, cancel,
//! disconnect, the reaper's end by id and the guard's drop wins, the span gets the end's
//! reason and duration recorded once and one `livecount.session.end` event, with the reason
//! the session ended with; and it closes exactly once, when the last holder lets go — never
//! while a handle still holds the session.
//!
//! The span lives in the slot's data (a loom `UnsafeCell`, which reports any access that
//! is not exclusive) and is recorded on by the winner of the ending's compare-and-swap, so
//! loom explores exactly the interleavings the counts' models do, with the subscriber's
//! calls on top. The subscriber is a counting one built per execution; its own state is
//! behind a `std` mutex (single steps to loom). Run with `scripts/loom.sh`.
#![cfg(all(livecount_loom, feature = "tracing"))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use livecount::Single;
use livecount_session::{EndReason, Phase, SessionTracker, trace};
use loom::thread;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Per span id: values recorded for the end reason, `end` events and their reasons, phase
/// events, references and closes.
#[derive(Debug, Default, Clone)]
struct Seen {
    end_records: Vec<String>,
    end_events: Vec<String>,
    phase_events: usize,
    refs: usize,
    closes: usize,
}

#[derive(Clone, Default)]
struct Counting {
    next: Arc<AtomicU64>,
    spans: Arc<Mutex<HashMap<u64, Seen>>>,
}

#[derive(Default)]
struct Strings(HashMap<&'static str, String>);

impl Visit for Strings {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.into());
    }
}

impl Subscriber for Counting {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // loom traces itself: only the sessions' spans and events.
        metadata.target() == trace::TARGET
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.spans.lock().unwrap().insert(
            id,
            Seen {
                refs: 1,
                ..Seen::default()
            },
        );
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Strings::default();
        values.record(&mut fields);
        if let Some(reason) = fields.0.remove(trace::attr::END_REASON) {
            let mut spans = self.spans.lock().unwrap();
            spans
                .get_mut(&span.into_u64())
                .unwrap()
                .end_records
                .push(reason);
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Strings::default();
        event.record(&mut fields);
        let parent = event
            .parent()
            .unwrap_or_else(|| panic!("session events name their span: {event:?}"))
            .into_u64();
        let mut spans = self.spans.lock().unwrap();
        let seen = spans.get_mut(&parent).unwrap();
        match fields.0.get("message").map(String::as_str) {
            Some(trace::event::END) => seen
                .end_events
                .push(fields.0[trace::attr::END_REASON].clone()),
            Some(trace::event::PHASE) => seen.phase_events += 1,
            other => panic!("unexpected event {other:?}"),
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
    fn clone_span(&self, id: &Id) -> Id {
        self.spans
            .lock()
            .unwrap()
            .get_mut(&id.into_u64())
            .unwrap()
            .refs += 1;
        id.clone()
    }
    fn try_close(&self, id: Id) -> bool {
        let mut spans = self.spans.lock().unwrap();
        let seen = spans.get_mut(&id.into_u64()).unwrap();
        seen.refs -= 1;
        if seen.refs == 0 {
            seen.closes += 1;
            return true;
        }
        false
    }
}

impl Counting {
    /// The one span seen so far.
    fn only(&self) -> Seen {
        let spans = self.spans.lock().unwrap();
        assert_eq!(spans.len(), 1, "{spans:?}");
        spans.values().next().unwrap().clone()
    }
}

fn model(default_bound: usize, f: impl Fn() + Sync + Send + 'static) {
    livecount::loom_model::bounded(default_bound, f);
}

/// Timeout, cancel and disconnect on their own threads race the guard's drop: the span
/// records one end, the winner's, and closes only when the observer's handle goes.
#[test]
fn three_enders_race_the_drop_and_the_span_ends_once() {
    model(3, || {
        let subscriber = Counting::default();
        let tracker = SessionTracker::<Single>::default();
        tracker.trace_sessions("b1");
        let session = tracing::subscriber::with_default(subscriber.clone(), || tracker.start());
        let enders: Vec<_> = [
            EndReason::TimedOut,
            EndReason::Cancelled,
            EndReason::Disconnected,
        ]
        .into_iter()
        .map(|reason| {
            let handle = session.handle();
            thread::spawn(move || handle.end(reason))
        })
        .collect();
        let observer = session.handle();
        drop(session);
        for e in enders {
            e.join().unwrap();
        }
        let reason = observer.reason().expect("ended").as_str().to_owned();
        let seen = subscriber.only();
        assert_eq!(seen.end_records, [reason.clone()], "{seen:?}");
        assert_eq!(seen.end_events, [reason], "{seen:?}");
        assert_eq!(seen.closes, 0, "closed while a handle holds the session");
        drop(observer);
        assert_eq!(subscriber.only().closes, 1);
    });
}

/// The reaper's end by id (a walker's reference) and a handle's end race a phase change and
/// the guard's drop: one end recorded, a phase event only for a change that took effect
/// before the end, the span closed once after every holder, walker included, let go.
#[test]
fn an_end_by_id_races_a_handle_a_phase_change_and_the_drop() {
    model(2, || {
        let subscriber = Counting::default();
        let tracker = SessionTracker::<Single>::default();
        tracker.trace_sessions("b1");
        let mut session = tracing::subscriber::with_default(subscriber.clone(), || tracker.start());
        let id = session.id();
        let by_id = {
            let tracker = tracker.clone();
            thread::spawn(move || tracker.end(id, EndReason::Reaped))
        };
        let handle = session.handle();
        let by_handle = thread::spawn(move || handle.end(EndReason::Cancelled));
        let changed = session.set_phase(Phase::Generating);
        drop(session);
        let won = usize::from(by_id.join().unwrap()) + usize::from(by_handle.join().unwrap());
        assert!(won <= 1);
        let seen = subscriber.only();
        assert_eq!(seen.end_records.len(), 1, "{seen:?}");
        assert_eq!(seen.end_events, seen.end_records, "{seen:?}");
        assert!(seen.phase_events <= usize::from(changed), "{seen:?}");
        assert_eq!(seen.closes, 1, "{seen:?}");
        assert_eq!(tracker.active(), 0);
    });
}
