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
    /// A session ends (its planned end; it may have ended earlier by a death): its slot
    /// and the slot's generation when it was scheduled (slots are reused).
    End(u32, u32),
    /// A session switches between listening and speaking (slot, generation).
    Phase(u32, u32),
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

/// Buckets per simulated second, and buckets in the ring (a horizon of 4 096 s).
const PER_S: f64 = 16.0;
const RING: u64 = 1 << 16;

fn bucket(at: f64) -> u64 {
    (at * PER_S) as u64 // saturates: negative → 0, huge → u64::MAX
}

/// Pending events, earliest first: a calendar queue. Events in the current bucket (1/16 s)
/// sit in a small binary heap; later ones within the ring's horizon are appended to their
/// bucket's vector and heapified when time reaches it; the rest wait in an overflow heap.
/// A pop touches a heap of one bucket's events, not of every pending one (a million at
/// scale, where one big heap spends most of the run in cache misses). The order is exactly
/// the (time, insertion sequence) order of one heap.
#[derive(Debug)]
pub(crate) struct EventQueue {
    seq: u64,
    /// Events of bucket `cur` (and any scheduled before it).
    current: BinaryHeap<Entry>,
    cur: u64,
    /// `ring[b % RING]` holds bucket b for `cur < b < cur + RING`.
    ring: Vec<Vec<Entry>>,
    in_ring: usize,
    /// Buckets from `cur + RING` on.
    far: BinaryHeap<Entry>,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            seq: 0,
            current: BinaryHeap::new(),
            cur: 0,
            ring: (0..RING).map(|_| Vec::new()).collect(),
            in_ring: 0,
            far: BinaryHeap::new(),
        }
    }
}

impl EventQueue {
    pub(crate) fn push(&mut self, at: f64, event: Event) {
        debug_assert!(at.is_finite(), "event {event:?} at {at}");
        self.seq += 1;
        let entry = Entry {
            at,
            seq: self.seq,
            event,
        };
        let b = bucket(at);
        if b <= self.cur {
            self.current.push(entry);
        } else if b - self.cur < RING {
            self.ring[(b % RING) as usize].push(entry);
            self.in_ring += 1;
        } else {
            self.far.push(entry);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<(f64, Event)> {
        loop {
            if let Some(e) = self.current.pop() {
                return Some((e.at, e.event));
            }
            if self.in_ring == 0 && self.far.is_empty() {
                return None;
            }
            self.advance();
        }
    }

    /// Moves to the next bucket holding anything: it becomes the current heap (its
    /// vector heapified in O(k)), with the overflow events that now fall in it.
    fn advance(&mut self) {
        let next = if self.in_ring == 0 {
            // Only far events left: jump straight to the first of them.
            let first = self.far.peek().map_or(self.cur + 1, |e| bucket(e.at));
            first.max(self.cur + 1)
        } else {
            self.cur + 1
        };
        let spent = std::mem::take(&mut self.current).into_vec();
        self.ring[(self.cur % RING) as usize] = spent; // empty; keeps its allocation
        // Buckets skipped by a jump are empty (in_ring was 0), so only `next`'s slot holds
        // anything.
        self.cur = next;
        let slot = std::mem::take(&mut self.ring[(next % RING) as usize]);
        self.in_ring -= slot.len();
        self.current = BinaryHeap::from(slot);
        while self.far.peek().is_some_and(|e| bucket(e.at) < next + RING) {
            let e = self.far.pop().expect("peeked");
            let b = bucket(e.at);
            if b <= next {
                self.current.push(e);
            } else {
                self.ring[(b % RING) as usize].push(e);
                self.in_ring += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: one binary heap of every pending event.
    #[derive(Default)]
    struct OneHeap {
        heap: BinaryHeap<Entry>,
        seq: u64,
    }

    impl OneHeap {
        fn push(&mut self, at: f64, event: Event) {
            self.seq += 1;
            let seq = self.seq;
            self.heap.push(Entry { at, seq, event });
        }
        fn pop(&mut self) -> Option<(f64, Event)> {
            self.heap.pop().map(|e| (e.at, e.event))
        }
    }

    proptest! {
        /// Pushes at or after the last popped time (as the engine does): within a bucket,
        /// a few buckets on, past the ring's horizon, or far beyond it, with ties; every
        /// pop matches one big heap's.
        #[test]
        fn calendar_queue_pops_in_the_order_of_one_heap(
            ops in prop::collection::vec(
                (0u8..6, prop_oneof![
                    Just(0.0), 0.0..0.06f64, 0.0..3.0f64, 4000.0..5000.0f64, 1e5..1e7f64,
                ]),
                1..400,
            )
        ) {
            let (mut q, mut r) = (EventQueue::default(), OneHeap::default());
            let mut now = 0.0;
            for (i, (op, dt)) in ops.into_iter().enumerate() {
                if op == 0 {
                    let (a, b) = (q.pop(), r.pop());
                    prop_assert_eq!(a, b);
                    if let Some((t, _)) = a {
                        now = t;
                    }
                } else {
                    q.push(now + dt, Event::End(i as u32, 0));
                    r.push(now + dt, Event::End(i as u32, 0));
                }
            }
            loop {
                let (a, b) = (q.pop(), r.pop());
                prop_assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
        }
    }

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::default();
        q.push(2.0, Event::Sample);
        q.push(1.0, Event::End(1, 0));
        q.push(1.0, Event::End(2, 0));
        q.push(0.5, Event::Arrival);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (0.5, Event::Arrival),
                (1.0, Event::End(1, 0)),
                (1.0, Event::End(2, 0)),
                (2.0, Event::Sample)
            ]
        );
    }
}
