//! The future event list: a binary heap ordered by (time, insertion sequence), so events at
//! the same instant run in the order they were scheduled and every run is reproducible.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next arrival of the background process.
    Arrival,
    /// A burst of simultaneous arrivals.
    Burst,
    /// A session ends (its planned end; it may have ended earlier by a death).
    End(u32),
    /// A session switches between listening and speaking.
    Phase(u32),
    /// A backend takes and sends a load report, and schedules its next one.
    TakeReport(u32),
    /// A backend's first report as it (re)joins: one report, nothing scheduled.
    FirstReport(u32),
    /// A report reaches the balancer (index into the engine's in-flight reports).
    DeliverReport(u32),
    /// The fleet is sampled.
    Sample,
    /// A backend dies (index into the scenario's failures).
    Die(u32),
    /// A backend comes back.
    Revive(u32),
    /// The balancer's health check notices a backend's state.
    HealthCheck(u32),
    /// Every session starts speaking.
    WaveStart,
    /// The wave is over.
    WaveEnd,
    /// A probe reply reaches its proxy (index into the engine's in-flight probes).
    ProbeReply(u32),
    /// A session's first stream reaches its proxy (index into the in-flight latencies).
    FirstStream(u32),
}

#[derive(Debug)]
struct Entry {
    at: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed: `BinaryHeap` is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

/// Pending events, earliest first.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub(crate) fn push(&mut self, at: f64, event: Event) {
        debug_assert!(at.is_finite(), "event {event:?} at {at}");
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    pub(crate) fn pop(&mut self) -> Option<(f64, Event)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::default();
        q.push(2.0, Event::Sample);
        q.push(1.0, Event::End(1));
        q.push(1.0, Event::End(2));
        q.push(0.5, Event::Arrival);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (0.5, Event::Arrival),
                (1.0, Event::End(1)),
                (1.0, Event::End(2)),
                (2.0, Event::Sample)
            ]
        );
    }
}
