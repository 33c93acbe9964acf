//! Session lifecycle traces on the `tracing` ecosystem (feature `tracing`): one span per
//! session of a tracker that [`trace_sessions`](crate::SessionTracker::trace_sessions) was
//! called on, with an event at each step of its life, and its end recorded exactly once.
//!
//! The span is created at the start, in the caller's context (its contextual parent, or the
//! OpenTelemetry context a layer attached: see `livecount-tower`'s `TraceContextLayer`), and
//! kept in the session's slot; the winner of the ending records the reason and the duration
//! on it and emits [`event::END`], so under any race of timeout, cancel, disconnect and
//! drop the end is recorded once (the same compare-and-swap that counts it once). The span
//! closes when the session's last holder lets it go: at once for a session whose guard ends
//! or drops; for a ghost the reaper ended while its task still holds the guard, when that
//! task lets go (its end already recorded).
//!
//! With the feature compiled in and no tracker traced, a start and an end read one flag
//! more; with a tracker traced and no subscriber interested, a start asks `tracing` once
//! (the callsite's cached interest) and stores an empty span.
//!
//! Names follow OpenTelemetry's conventions (`tracing-opentelemetry` maps `otel.name` to
//! the span's name, `otel.kind` to its kind, and each event's message to the event's name):
//!
//! ```
//! # #[cfg(feature = "tracing")] {
//! use livecount_session::{EndReason, Phase, SessionTracker, trace};
//!
//! let tracker = SessionTracker::new();
//! tracker.trace_sessions("b1");
//! let mut session = tracker.start(); // span `livecount.session`, `livecount.backend.name` = b1
//! session.set_phase(Phase::Generating); // event `livecount.session.phase`
//! session.note_first_chunk(); // event `livecount.session.first_chunk`
//! session.note_interrupt(); // event `livecount.session.interrupt`
//! session.end(EndReason::Completed); // event `livecount.session.end`, reason and duration recorded
//! assert_eq!(trace::SPAN, "livecount.session");
//! # }
//! ```

use std::time::Duration;

use tracing::Span;

use crate::phase::Phase;
use crate::reason::EndReason;
use crate::start_error::StartError;

/// The `tracing` target of every span and event here.
pub const TARGET: &str = "livecount::session";
/// The session span's name (`otel.name`); its kind is `server`.
pub const SPAN: &str = "livecount.session";
/// The name of the zero-length span a refused start leaves (`otel.name`).
pub const REFUSED_SPAN: &str = "livecount.session.refused";

/// Span and event attributes.
pub mod attr {
    /// The session's id ([`SessionId::as_u64`](crate::SessionId::as_u64)), a `u64`
    /// (`tracing-opentelemetry` exports it as its decimal string).
    pub const ID: &str = "livecount.session.id";
    /// A label the service gives the session ([`Session::trace_tag`](crate::Session::trace_tag)).
    pub const TAG: &str = "livecount.session.tag";
    /// `websocket`, `grpc` or `http`, recorded by the layer that started the session.
    pub const TRANSPORT: &str = "livecount.session.transport";
    /// The backend's name, as given to `trace_sessions`.
    pub const BACKEND: &str = "livecount.backend.name";
    /// How the session ended ([`EndReason::as_str`](crate::EndReason::as_str)), on the span and on [`event::END`](super::event::END).
    pub const END_REASON: &str = "livecount.session.end_reason";
    /// How long the session lasted, seconds (a float), on the span and on [`event::END`](super::event::END).
    pub const DURATION: &str = "livecount.session.duration";
    /// The phase entered ([`Phase::as_str`](crate::Phase::as_str)), on [`event::PHASE`](super::event::PHASE).
    pub const PHASE: &str = "livecount.session.phase";
    /// Seconds from the start to the first chunk sent, on [`event::FIRST_CHUNK`](super::event::FIRST_CHUNK).
    pub const TIME_TO_FIRST_CHUNK: &str = "livecount.session.time_to_first_chunk";
    /// Why a start was refused: `at_capacity`, `draining` or `full`, on [`REFUSED_SPAN`](super::REFUSED_SPAN).
    pub const REFUSAL: &str = "livecount.session.refusal";
}

/// Event names (each event's message).
pub mod event {
    /// The session entered a phase (listening ↔ generating).
    pub const PHASE: &str = "livecount.session.phase";
    /// The client interrupted a response (barge-in), as the service reported it.
    pub const INTERRUPT: &str = "livecount.session.interrupt";
    /// The first chunk of the session's first response went out (time to first stream).
    pub const FIRST_CHUNK: &str = "livecount.session.first_chunk";
    /// The backend began its drain while the session was open.
    pub const DRAIN: &str = "livecount.session.drain";
    /// The session ended (exactly once).
    pub const END: &str = "livecount.session.end";
}

/// The span of a session starting now, in the caller's context.
#[cold]
pub(crate) fn session_span(id: u64, backend: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "livecount.session",
        otel.name = SPAN,
        otel.kind = "server",
        livecount.session.id = id,
        livecount.backend.name = backend,
        livecount.session.tag = tracing::field::Empty,
        livecount.session.transport = tracing::field::Empty,
        livecount.session.end_reason = tracing::field::Empty,
        livecount.session.duration = tracing::field::Empty,
    )
}

/// A refused start: a zero-length span, closed on return.
#[cold]
pub(crate) fn refused(backend: &str, error: &StartError) {
    let refusal = match error {
        StartError::AtCapacity { .. } => "at_capacity",
        StartError::Draining => "draining",
        _ => "full",
    };
    let _span = tracing::info_span!(
        target: TARGET,
        "livecount.session.refused",
        otel.name = REFUSED_SPAN,
        otel.kind = "server",
        otel.status_code = "ERROR",
        livecount.backend.name = backend,
        livecount.session.refusal = refusal,
    );
}

/// Runs `emit` (an event whose parent is `span`) under `span`'s own subscriber: the session
/// may end, change phase or drain on a thread whose default subscriber is another (the
/// sweeper's, a walker's), and its events must reach the subscriber that holds its span.
fn on(span: &Span, emit: impl FnOnce()) {
    span.with_subscriber(|(_, dispatch)| tracing::dispatcher::with_default(dispatch, emit));
}

/// The end of a traced session, recorded by the one caller that ended it. Cold: an untraced
/// session's end tests its slot's `traced` flag and never calls this.
#[cold]
#[inline(never)]
pub(crate) fn ended(span: &Span, reason: EndReason, micros: u64) {
    if span.is_disabled() {
        return;
    }
    let seconds = Duration::from_micros(micros).as_secs_f64();
    span.record(attr::END_REASON, reason.as_str());
    span.record(attr::DURATION, seconds);
    on(span, || {
        tracing::event!(
            target: TARGET,
            parent: span,
            tracing::Level::INFO,
            livecount.session.end_reason = reason.as_str(),
            livecount.session.duration = seconds,
            "livecount.session.end"
        );
    });
}

/// A phase change that took effect.
pub(crate) fn phase(span: &Span, phase: Phase) {
    if span.is_disabled() {
        return;
    }
    on(span, || {
        tracing::event!(
            target: TARGET,
            parent: span,
            tracing::Level::INFO,
            livecount.session.phase = phase.as_str(),
            "livecount.session.phase"
        );
    });
}

/// An interrupt the service reported.
pub(crate) fn interrupt(span: &Span) {
    if span.is_disabled() {
        return;
    }
    on(span, || {
        tracing::info!(target: TARGET, parent: span, "livecount.session.interrupt");
    });
}

/// The first chunk, `after` the start.
pub(crate) fn first_chunk(span: &Span, after: Duration) {
    if span.is_disabled() {
        return;
    }
    on(span, || {
        tracing::event!(
            target: TARGET,
            parent: span,
            tracing::Level::INFO,
            livecount.session.time_to_first_chunk = after.as_secs_f64(),
            "livecount.session.first_chunk"
        );
    });
}

/// The drain began while the session was open.
pub(crate) fn drain(span: &Span) {
    if span.is_disabled() {
        return;
    }
    on(span, || {
        tracing::info!(target: TARGET, parent: span, "livecount.session.drain");
    });
}
