//! The future event list, ordered by (time, insertion sequence), so events at the same
//! instant run in the order they were scheduled and every run is reproducible.

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
    /// A backend is told to restart (the rolling restart's next one).
    Restart(u32),
    /// A draining backend's deadline: the sessions still open end, it exits.
    DrainDeadline(u32),
    /// A restarted backend's replacement is ready.
    Restarted(u32),
    /// A client cut by a restart or a scale-in comes back (index into the engine's
    /// pending reconnects).
    Reconnect(u32),
    /// A proxy restarts (index into the scenario's reloads).
    Reload(u32),
    /// The autoscaler's controller syncs.
    AutoscaleSync,
    /// A backend the autoscaler started is ready.
    Ready(u32),
}

#[derive(Debug, Clone)]
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

/// Buckets per simulated second (a bucket is 1/16 s), and per coarse bucket (one second).
const PER_S: f64 = 16.0;
const SPAN_SHIFT: u32 = 4;
/// Coarse buckets (seconds) held as fine buckets ahead of the current one, and the fine
/// ring's size: every fine bucket lies within it ahead of `cur`.
const NEAR: u64 = 4;
const FINE: u64 = NEAR << SPAN_SHIFT;
/// Coarse buckets in their ring (a horizon of 4 096 s past the fine ones).
const COARSE: u64 = 1 << 12;

fn bucket(at: f64) -> u64 {
    (at * PER_S) as u64 // saturates: negative → 0, huge → u64::MAX
}

fn coarse(bucket: u64) -> u64 {
    bucket >> SPAN_SHIFT
}

/// Pending events, earliest first: a two-level calendar queue. The next few seconds are
/// fine buckets (1/16 s each), the next 4 096 s coarse ones (a second each), and the rest
/// wait in an overflow heap; a push appends to its bucket's vector. As time reaches a
/// second, its coarse bucket is dealt into fine ones; as it reaches a fine bucket, that
/// vector is sorted once and its events taken from the end; the few scheduled into the
/// current bucket after that wait in a small heap beside it.
///
/// Why so: at scale a million events are pending. One heap of them spends the run in
/// cache misses; one level of fine buckets over the whole horizon has thousands of vectors
/// being appended to at random, each append a miss. Here pushes land on a few hundred
/// vector ends, which stay in cache, and the sorted bucket tells the engine what comes
/// next ([`EventQueue::ahead`]), so it can fetch those events' sessions before it needs
/// them. The order is exactly the (time, insertion sequence) order of one heap.
#[derive(Debug)]
pub(crate) struct EventQueue {
    seq: u64,
    /// Events of bucket `cur` as it was opened, sorted latest first (the next is the last).
    current: Vec<Entry>,
    /// Events scheduled into bucket `cur` (or before it) after it was opened.
    late: BinaryHeap<Entry>,
    cur: u64,
    /// `fine[b % FINE]` holds bucket b for `cur < b` and `coarse(b) < fine_end`.
    fine: Vec<Vec<Entry>>,
    in_fine: usize,
    /// `coarse(cur) + NEAR` after every advance.
    fine_end: u64,
    /// `coarse_ring[c % COARSE]` holds the buckets of second c for
    /// `fine_end ≤ c < fine_end + COARSE`.
    coarse_ring: Vec<Vec<Entry>>,
    in_coarse: usize,
    /// Emptied coarse vectors, with their allocations, for the next seconds to fill. (A
    /// coarse slot is used once per horizon, so a vector left in its slot would hold its
    /// memory unused for the rest of a run: at scale, a gigabyte of fresh pages.)
    spare: Vec<Vec<Entry>>,
    /// Seconds from `fine_end + COARSE` on.
    far: BinaryHeap<Entry>,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            seq: 0,
            current: Vec::new(),
            late: BinaryHeap::new(),
            cur: 0,
            fine: (0..FINE).map(|_| Vec::new()).collect(),
            in_fine: 0,
            fine_end: NEAR,
            coarse_ring: (0..COARSE).map(|_| Vec::new()).collect(),
            in_coarse: 0,
            spare: Vec::new(),
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
            self.late.push(entry);
        } else {
            self.place(b, entry);
        }
    }

    /// Files an event of a bucket after the current one in the fine ring, the coarse ring
    /// or the overflow heap.
    fn place(&mut self, b: u64, entry: Entry) {
        debug_assert!(b > self.cur);
        let c = coarse(b);
        if c < self.fine_end {
            self.fine[(b % FINE) as usize].push(entry);
            self.in_fine += 1;
        } else if c - self.fine_end < COARSE {
            let second = &mut self.coarse_ring[(c % COARSE) as usize];
            if second.capacity() == 0
                && let Some(spare) = self.spare.pop()
            {
                *second = spare;
            }
            second.push(entry);
            self.in_coarse += 1;
        } else {
            self.far.push(entry);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<(f64, Event)> {
        loop {
            // `Entry`'s order is reversed: the greater is the earlier.
            let late_first = match (self.current.last(), self.late.peek()) {
                (Some(c), Some(l)) => l > c,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => {
                    if self.in_fine == 0 && self.in_coarse == 0 && self.far.is_empty() {
                        return None;
                    }
                    self.advance();
                    continue;
                }
            };
            let e = if late_first {
                self.late.pop()
            } else {
                self.current.pop()
            }
            .expect("peeked");
            return Some((e.at, e.event));
        }
    }

    /// The event `k` places after the next one of the current bucket as it was opened
    /// (events scheduled into it since may come between): a hint of what is coming, for
    /// prefetching, never an order.
    pub(crate) fn ahead(&self, k: usize) -> Option<&Event> {
        let i = self.current.len().checked_sub(k + 1)?;
        Some(&self.current[i].event)
    }

    /// Moves to the next bucket (straight to the first overflow event's when nothing else
    /// is pending), deals the seconds that come within [`NEAR`] into fine buckets, takes
    /// in the overflow events that come within the coarse horizon, and sorts the new
    /// current bucket. Called only with the current bucket and the late heap empty.
    fn advance(&mut self) {
        debug_assert!(self.current.is_empty() && self.late.is_empty());
        let next = if self.in_fine == 0 && self.in_coarse == 0 {
            let first = self.far.peek().map_or(self.cur + 1, |e| bucket(e.at));
            first.max(self.cur + 1)
        } else {
            self.cur + 1
        };
        let spent = std::mem::take(&mut self.current);
        self.fine[(self.cur % FINE) as usize] = spent; // empty; keeps its allocation
        self.cur = next;
        let fine_end = coarse(next) + NEAR;
        if self.in_coarse == 0 {
            // A jump (or an empty coarse ring): no second to deal.
            self.fine_end = self.fine_end.max(fine_end);
        }
        while self.fine_end < fine_end {
            // Stepping one bucket on moves the end by at most one second, past `next`'s:
            // every event dealt here lies after `next`, within the fine ring.
            let c = self.fine_end;
            let mut second = std::mem::take(&mut self.coarse_ring[(c % COARSE) as usize]);
            self.in_coarse -= second.len();
            self.fine_end += 1;
            for e in second.drain(..) {
                let b = bucket(e.at);
                self.fine[(b % FINE) as usize].push(e);
                self.in_fine += 1;
            }
            if second.capacity() > 0 {
                self.spare.push(second);
            }
        }
        let mut slot = std::mem::take(&mut self.fine[(next % FINE) as usize]);
        self.in_fine -= slot.len();
        while self
            .far
            .peek()
            .is_some_and(|e| coarse(bucket(e.at)) < self.fine_end + COARSE)
        {
            let e = self.far.pop().expect("peeked");
            let b = bucket(e.at);
            if b <= next {
                slot.push(e);
            } else {
                self.place(b, e);
            }
        }
        // Ascending in `Entry`'s reversed order: latest first, the next event last. Every
        // key is distinct (the sequence number), so an unstable sort is exact.
        slot.sort_unstable();
        self.current = slot;
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
        /// a few buckets on (fine), seconds on (coarse), past the coarse horizon, or far
        /// beyond it, with ties; every pop matches one big heap's, and while nothing was
        /// scheduled into the open bucket, `ahead(k)` is the event k pops after the next.
        #[test]
        fn calendar_queue_pops_in_the_order_of_one_heap(
            ops in prop::collection::vec(
                (0u8..6, prop_oneof![
                    Just(0.0), 0.0..0.06f64, 0.0..3.0f64, 3.0..300.0f64, 4000.0..5000.0f64,
                    1e5..1e7f64,
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
                if q.late.is_empty() {
                    let mut coming = r.heap.clone();
                    for k in 0..3 {
                        if let Some(hint) = q.ahead(k) {
                            prop_assert_eq!(Some(*hint), coming.pop().map(|e| e.event));
                        }
                    }
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
    fn ahead_names_the_events_after_the_next_in_the_open_bucket() {
        let mut q = EventQueue::default();
        for id in 0..4 {
            q.push(1.0 + f64::from(id) / 100.0, Event::End(id, 0));
        }
        q.push(9.0, Event::Sample); // another bucket
        assert_eq!(q.ahead(0), None, "no bucket open before the first pop");
        assert_eq!(q.pop(), Some((1.0, Event::End(0, 0))));
        assert_eq!(q.ahead(0), Some(&Event::End(1, 0)));
        assert_eq!(q.ahead(2), Some(&Event::End(3, 0)));
        assert_eq!(q.ahead(3), None, "the next bucket is not looked into");
        // Scheduled into the open bucket: it comes first, and the hint does not know it.
        q.push(1.005, Event::Arrival);
        assert_eq!(q.ahead(0), Some(&Event::End(1, 0)));
        assert_eq!(q.pop(), Some((1.005, Event::Arrival)));
        assert_eq!(q.pop(), Some((1.01, Event::End(1, 0))));
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
