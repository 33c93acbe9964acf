//! The observable instruments and the one report each export reads ([`Cycle`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter};

use crate::{LoadBoard, LoadReport};

use super::names;

/// The report one collection reads: the first callback of a collection pins the board's
/// latest report, the other callbacks and the exporter's duration histogram read the same
/// one, and the exporter unpins it ([`finish`](Cycle::finish)), so the values of one
/// export are one report's (as `/metrics` serves one report per scrape).
///
/// The SDK's periodic reader collects (every callback, in turn, on its thread) and then
/// exports, one collection at a time. A pin older than [`PIN_FOR`] is not reused: if a
/// collection ever ends without an export, the next one still reads a fresh report.
#[derive(Debug)]
pub(crate) struct Cycle {
    board: Arc<LoadBoard>,
    pinned: Mutex<Option<(Instant, Arc<LoadReport>)>>,
}

/// How long a pinned report serves a collection's callbacks (they run in microseconds).
const PIN_FOR: Duration = Duration::from_millis(50);

impl Cycle {
    pub(crate) fn new(board: Arc<LoadBoard>) -> Self {
        Cycle {
            board,
            pinned: Mutex::new(None),
        }
    }

    /// The report of the collection under way (pinning the board's latest if none is).
    pub(crate) fn report(&self) -> Arc<LoadReport> {
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        match &*pinned {
            Some((at, report)) if at.elapsed() < PIN_FOR => Arc::clone(report),
            _ => {
                let report = self.board.latest();
                *pinned = Some((Instant::now(), Arc::clone(&report)));
                report
            }
        }
    }

    /// The report the collection read, unpinned: the next collection reads a new one.
    pub(crate) fn finish(&self) -> Arc<LoadReport> {
        let pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner()).take();
        match pinned {
            Some((at, report)) if at.elapsed() < PIN_FOR => report,
            _ => self.board.latest(),
        }
    }
}

/// Registers every instrument but the duration histogram (which the exporter adds, see
/// the module docs) on `meter`, each reading `cycle`'s report. The SDK keeps the
/// callbacks for the provider's life.
pub(crate) fn register(meter: &Meter, cycle: &Arc<Cycle>) {
    register_sessions(meter, cycle);
    register_limits(meter, cycle);
    register_capacity(meter, cycle);
}

/// A callback observing `f` of the collection's report.
fn reading<T: 'static>(
    cycle: &Arc<Cycle>,
    f: fn(&LoadReport, &dyn AsyncInstrument<T>),
) -> impl Fn(&dyn AsyncInstrument<T>) + Send + Sync + 'static {
    let cycle = Arc::clone(cycle);
    move |o: &dyn AsyncInstrument<T>| f(&cycle.report(), o)
}

/// Open sessions by phase; starts, ends by reason and refusals as counters.
fn register_sessions(meter: &Meter, cycle: &Arc<Cycle>) {
    meter
        .i64_observable_up_down_counter(names::ACTIVE)
        .with_unit("{session}")
        .with_description("Sessions open now, by phase (listening or generating).")
        .with_callback(reading(cycle, |r, o| {
            let phase = |p: &'static str| [KeyValue::new(names::PHASE, p)];
            o.observe(signed(r.listening), &phase("listening"));
            o.observe(signed(r.generating), &phase("generating"));
        }))
        .build();
    meter
        .u64_observable_counter(names::STARTS)
        .with_unit("{session}")
        .with_description("Sessions started (arrivals) since the tracker began.")
        .with_callback(reading(cycle, |r, o| o.observe(r.started, &[])))
        .build();
    meter
        .u64_observable_counter(names::ENDS)
        .with_unit("{session}")
        .with_description("Sessions ended since the tracker began, by end reason.")
        .with_callback(reading(cycle, |r, o| {
            for (reason, n) in &r.ended_by_reason {
                o.observe(*n, &[KeyValue::new(names::END_REASON, reason.clone())]);
            }
        }))
        .build();
    meter
        .u64_observable_counter(names::REFUSALS)
        .with_unit("{session}")
        .with_description("Sessions refused before they started (at capacity, or draining).")
        .with_callback(reading(cycle, |r, o| o.observe(r.refused, &[])))
        .build();
}

/// The session limit and the drain, as gauges.
fn register_limits(meter: &Meter, cycle: &Arc<Cycle>) {
    meter
        .u64_observable_gauge(names::DRAINING)
        .with_unit("1")
        .with_description("1 while the backend drains (shutting down), else 0.")
        .with_callback(reading(cycle, |r, o| o.observe(u64::from(r.draining), &[])))
        .build();
    meter
        .u64_observable_gauge(names::LIMIT)
        .with_unit("{session}")
        .with_description("The most sessions the backend admits (absent without a limit).")
        .with_callback(reading(cycle, |r, o| {
            if let Some(max) = r.max_sessions {
                o.observe(max, &[]);
            }
        }))
        .build();
}

/// The capacity model's figures, as `f64` gauges.
fn register_capacity(meter: &Meter, cycle: &Arc<Cycle>) {
    meter
        .f64_observable_gauge(names::HEADROOM)
        .with_unit("{session}")
        .with_description(
            "Sessions the backend can still take by the next report (never negative).",
        )
        .with_callback(reading(cycle, |r, o| o.observe(r.headroom, &[])))
        .build();
    meter
        .f64_observable_gauge(names::EFFECTIVE_CAPACITY)
        .with_unit("{session}")
        .with_description("Sessions the backend can hold by the next report (hybrid model).")
        .with_callback(reading(cycle, |r, o| o.observe(r.effective_capacity, &[])))
        .build();
    meter
        .f64_observable_gauge(names::UTILIZATION)
        .with_unit("1")
        .with_description("Utilisation the capacity model read, smoothed (absent if unmeasured).")
        .with_callback(reading(cycle, |r, o| {
            if r.utilisation_measured {
                o.observe(r.utilisation, &[]);
            }
        }))
        .build();
}

/// A session count as the `i64` an UpDownCounter takes (saturating: never wraps).
fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
