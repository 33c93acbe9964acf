//! `Contender`: the one interface every workload drives, implemented for every livecount
//! counter, the peer crates a user would otherwise pick, and the ceiling.
//!
//! Every contender pays exactly the same harness overhead: a workload calls
//! [`Contender::start`] and [`Contender::end`] with a per-writer [`Contender::Local`] that was
//! made before the timed region, so no contender does setup inside it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped};

/// What a contender is, which decides whether the picker may recommend it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// A production `livecount` counter.
    Livecount,
    /// `livecount::Reference`: the `Mutex` oracle, measured but never recommended.
    Oracle,
    /// `std` atomics or a crate a user would otherwise pick.
    Peer,
    /// The physical limit of an update: not a counter anyone can import.
    Ceiling,
    /// Another language's counter (Java's `LongAdder`), measured beside livecount's as the
    /// anchor its targets name: shown, never recommended.
    Foreign,
}

/// A session gauge as the workloads see it: start returns a token, end consumes it.
pub trait Contender: Sync + Send + fmt::Debug + Sized + 'static {
    /// The name in tables, plots, JSON and criterion ids.
    const NAME: &'static str;
    /// What to write in `use` to get it.
    const IMPORT: &'static str;
    /// Whether it can be recommended.
    const KIND: Kind;
    /// What a started session carries until it ends.
    type Token: Send + 'static;
    /// Per-writer state made before the timed region (a cell index for the ceiling).
    type Local: Send + 'static;

    /// A fresh contender for up to `writers` concurrent writers (only the ceiling uses it: it
    /// gives each writer its own cell).
    fn new(writers: usize) -> Self;
    /// Per-writer state for one thread or task; called outside the timed region.
    fn local(&self) -> Self::Local;
    /// Counts a session as started.
    fn start(&self, local: &Self::Local) -> Self::Token;
    /// Counts the session behind `token` as ended.
    fn end(&self, local: &Self::Local, token: Self::Token);
    /// The current value as a signed number, so a peer that can dip below zero shows it.
    fn read(&self) -> i64;
}

/// Something done once per contender type, in the canonical order ([`for_each`]).
pub trait Visit {
    /// Called once per contender.
    fn visit<C: Contender>(&mut self);
}

/// Visits every contender: the ceiling, the livecount counters, then the peers.
pub fn for_each(v: &mut impl Visit) {
    v.visit::<Ceiling>();
    v.visit::<Live<PerThread>>();
    v.visit::<Live<PerCpu>>();
    v.visit::<Live<Sharded>>();
    v.visit::<Live<Striped>>();
    v.visit::<Live<Single>>();
    v.visit::<Live<Reference>>();
    v.visit::<PlainAtomic>();
    v.visit::<PaddedAtomic>();
    v.visit::<FastCounter>();
    v.visit::<Contatori>();
    v.visit::<PromIntGauge>();
    v.visit::<MetricsGauge>();
}

/// The ceiling's name.
pub(crate) const CEILING: &str = <Ceiling as Contender>::NAME;
/// The `AtomicI64` baseline every ratio is taken against.
pub(crate) const ATOMIC: &str = <PlainAtomic as Contender>::NAME;
/// `PerCpu`'s name.
pub(crate) const PER_CPU: &str = <PerCpu as LiveName>::NAME;
/// `PerThread`'s name.
pub(crate) const PER_THREAD: &str = <PerThread as LiveName>::NAME;
/// Peer crates (not `std` atomics) livecount's targets compare against.
pub(crate) const PEER_CRATES: [&str; 4] = [
    <FastCounter as Contender>::NAME,
    <Contatori as Contender>::NAME,
    <PromIntGauge as Contender>::NAME,
    <MetricsGauge as Contender>::NAME,
];

/// Name, import path and kind of one contender, as stored in results.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Info {
    /// [`Contender::NAME`].
    pub name: String,
    /// [`Contender::IMPORT`].
    pub import: String,
    /// [`Contender::KIND`].
    pub kind: Kind,
}

/// Every contender's [`Info`], in the canonical order.
pub fn all() -> Vec<Info> {
    struct Collect(Vec<Info>);
    impl Visit for Collect {
        fn visit<C: Contender>(&mut self) {
            self.0.push(Info {
                name: C::NAME.to_owned(),
                import: C::IMPORT.to_owned(),
                kind: C::KIND,
            });
        }
    }
    let mut c = Collect(Vec::new());
    for_each(&mut c);
    c.0
}

// === impl Ceiling ===

/// The ceiling: each writer does a plain load + store into its own cache-padded cell, with no
/// lookup at all (the cell index is handed out before the timed region). Nothing can count a
/// session start+end faster on this machine; its reads are not a gauge anyone should trust
/// (a session ended on another writer's cell makes the sum dip below zero).
///
/// The cell holds two words, starts and ends, like livecount's monotone pairs: with one signed
/// word every end would wait for the store of its own start (a store-to-load forwarding chain
/// through one address), and the "ceiling" would be slower than a counter that keeps starts
/// and ends apart.
#[derive(Debug)]
pub(crate) struct Ceiling {
    cells: Box<[CachePadded<[AtomicU64; 2]>]>,
    next: AtomicUsize,
}

impl Ceiling {
    #[inline]
    fn bump(&self, local: usize, half: usize) {
        let word = &self.cells[local][half];
        // Relaxed load + store, not an RMW: this writer is the cell's only writer.
        word.store(word.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

impl Contender for Ceiling {
    const NAME: &'static str = "ceiling";
    const IMPORT: &'static str = "(none: own cell per writer, plain load+store)";
    const KIND: Kind = Kind::Ceiling;
    type Token = ();
    type Local = usize;

    fn new(writers: usize) -> Self {
        Ceiling {
            cells: (0..writers.max(1))
                .map(|_| CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    fn local(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.cells.len()
    }

    #[inline]
    fn start(&self, local: &usize) {
        self.bump(*local, 0);
    }

    #[inline]
    fn end(&self, local: &usize, (): ()) {
        self.bump(*local, 1);
    }

    fn read(&self) -> i64 {
        let (mut started, mut ended) = (0u64, 0u64);
        for c in self.cells.iter() {
            ended = ended.wrapping_add(c[1].load(Ordering::Relaxed));
            started = started.wrapping_add(c[0].load(Ordering::Relaxed));
        }
        started.wrapping_sub(ended) as i64
    }
}

// === impl Live ===

/// A livecount counter, driven through its [`Counter`] trait.
#[derive(Debug, Default)]
pub struct Live<C>(pub C);

/// Names of the livecount counters (a foreign type cannot carry our constants otherwise).
pub trait LiveName: Counter + Default + 'static {
    /// The contender name.
    const NAME: &'static str;
    /// The import path.
    const IMPORT: &'static str;
    /// [`Kind::Livecount`] or [`Kind::Oracle`].
    const KIND: Kind = Kind::Livecount;
    /// The name of this counter behind a `livecount_session::SessionTracker`.
    const SESSION_NAME: &'static str;
}

macro_rules! live_name {
    ($ty:ident $(, $kind:expr)?) => {
        impl LiveName for $ty {
            const NAME: &'static str = stringify!($ty);
            const IMPORT: &'static str = concat!("livecount::", stringify!($ty));
            const SESSION_NAME: &'static str = concat!(stringify!($ty), "+session");
            $(const KIND: Kind = $kind;)?
        }
    };
}

live_name!(PerThread);
live_name!(PerCpu);
live_name!(Sharded);
live_name!(Striped);
live_name!(Single);
live_name!(Reference, Kind::Oracle);

impl<C: LiveName> Contender for Live<C> {
    const NAME: &'static str = C::NAME;
    const IMPORT: &'static str = C::IMPORT;
    const KIND: Kind = C::KIND;
    type Token = C::Token;
    type Local = ();

    fn new(_: usize) -> Self {
        Live(C::default())
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) -> C::Token {
        self.0.increment()
    }

    #[inline]
    fn end(&self, (): &(), token: C::Token) {
        self.0.decrement(token);
    }

    fn read(&self) -> i64 {
        // A gauge read is a `u64` that never wraps; saturate rather than hide a broken one.
        i64::try_from(self.0.load()).unwrap_or(i64::MAX)
    }
}

// === impl Tracked ===

/// A livecount counter behind `livecount_session::SessionTracker`: start is
/// `tracker.start()` (guard, registry slot, state word), end is
/// `session.end(EndReason::Completed)` and dropping the guard. Only the lifecycle workload
/// uses it, against the bare [`Live`] counter.
#[derive(Debug, Default)]
pub struct Tracked<C: LiveName>(pub livecount_session::SessionTracker<C>);

impl<C: LiveName> Contender for Tracked<C> {
    const NAME: &'static str = C::SESSION_NAME;
    const IMPORT: &'static str = "livecount_session::SessionTracker";
    const KIND: Kind = C::KIND;
    type Token = livecount_session::Session<C>;
    type Local = ();

    fn new(_: usize) -> Self {
        Tracked(livecount_session::SessionTracker::default())
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) -> Self::Token {
        self.0.start()
    }

    #[inline]
    fn end(&self, (): &(), session: Self::Token) {
        session.end(livecount_session::EndReason::Completed);
    }

    fn read(&self) -> i64 {
        i64::try_from(self.0.active()).unwrap_or(i64::MAX)
    }
}

// === impl PlainAtomic / PaddedAtomic ===

/// A bare `AtomicI64`: what most code writes first, sharing its line with its neighbours.
#[derive(Debug)]
pub(crate) struct PlainAtomic(AtomicI64);

/// An `AtomicI64` alone on its cache line (crossbeam `CachePadded`).
#[derive(Debug)]
pub(crate) struct PaddedAtomic(CachePadded<AtomicI64>);

/// The same orderings as `livecount::Single`, so the peers do no less work than it does.
macro_rules! signed_atomic {
    ($ty:ident, $name:literal, $import:literal, $new:expr) => {
        impl Contender for $ty {
            const NAME: &'static str = $name;
            const IMPORT: &'static str = $import;
            const KIND: Kind = Kind::Peer;
            type Token = ();
            type Local = ();

            fn new(_: usize) -> Self {
                $ty($new)
            }

            fn local(&self) {}

            #[inline]
            fn start(&self, (): &()) {
                // Relaxed: one location's modification order is total; nothing is published.
                self.0.fetch_add(1, Ordering::Relaxed);
            }

            #[inline]
            fn end(&self, (): &(), (): ()) {
                // Release: pairs with the Acquire in `read`, as in `Single::decrement`.
                self.0.fetch_sub(1, Ordering::Release);
            }

            fn read(&self) -> i64 {
                self.0.load(Ordering::Acquire)
            }
        }
    };
}

signed_atomic!(
    PlainAtomic,
    "AtomicI64",
    "std::sync::atomic::AtomicI64",
    AtomicI64::new(0)
);
signed_atomic!(
    PaddedAtomic,
    "CachePadded<AtomicI64>",
    "crossbeam_utils::CachePadded<AtomicI64>",
    CachePadded::new(AtomicI64::new(0))
);

// === impl FastCounter ===

/// `fast_counter::ConcurrentCounter` with one shard per CPU (as its README sizes it): signed
/// shards picked by a never-reused thread number, summed with Relaxed loads.
#[derive(Debug)]
pub(crate) struct FastCounter(fast_counter::ConcurrentCounter);

impl Contender for FastCounter {
    const NAME: &'static str = "fast-counter";
    const IMPORT: &'static str = "fast_counter::ConcurrentCounter";
    const KIND: Kind = Kind::Peer;
    type Token = ();
    type Local = ();

    fn new(_: usize) -> Self {
        FastCounter(fast_counter::ConcurrentCounter::new(crate::machine::cores()))
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) {
        self.0.add(1);
    }

    #[inline]
    fn end(&self, (): &(), (): ()) {
        self.0.add(-1);
    }

    fn read(&self) -> i64 {
        self.0.sum() as i64
    }
}

// === impl Contatori ===

/// `contatori::counters::signed::Signed`: 128 round-robin cache-padded signed shards, boxed
/// (it is 16 KiB inline).
#[derive(Debug)]
pub(crate) struct Contatori(Box<contatori::counters::signed::Signed>);

impl Contender for Contatori {
    const NAME: &'static str = "contatori";
    const IMPORT: &'static str = "contatori::counters::signed::Signed";
    const KIND: Kind = Kind::Peer;
    type Token = ();
    type Local = ();

    fn new(_: usize) -> Self {
        Contatori(Box::new(contatori::counters::signed::Signed::new()))
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) {
        self.0.add(1);
    }

    #[inline]
    fn end(&self, (): &(), (): ()) {
        self.0.sub(1);
    }

    fn read(&self) -> i64 {
        use contatori::counters::Observable;
        self.0.value().as_i64()
    }
}

// === impl PromIntGauge ===

/// `prometheus::IntGauge` (tikv's `prometheus` crate): one Relaxed `fetch_add` on a shared
/// `AtomicI64` per update.
#[derive(Debug)]
pub(crate) struct PromIntGauge(prometheus::IntGauge);

impl Contender for PromIntGauge {
    const NAME: &'static str = "prometheus::IntGauge";
    const IMPORT: &'static str = "prometheus::IntGauge";
    const KIND: Kind = Kind::Peer;
    type Token = ();
    type Local = ();

    fn new(_: usize) -> Self {
        PromIntGauge(
            prometheus::IntGauge::new("active_sessions", "sessions").expect("a valid metric name"),
        )
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) {
        self.0.inc();
    }

    #[inline]
    fn end(&self, (): &(), (): ()) {
        self.0.dec();
    }

    fn read(&self) -> i64 {
        self.0.get()
    }
}

// === impl MetricsGauge ===

/// The `metrics::Gauge` handle a `metrics-exporter-prometheus` user gets: that exporter's
/// registry stores a gauge as an `Arc<AtomicU64>` holding `f64` bits and hands out
/// `Gauge::from_arc(atomic)`, so every update runs `metrics`' own `GaugeFn for AtomicU64`
/// (a `fetch_update` CAS loop). We build exactly that handle without the exporter's HTTP stack.
#[derive(Debug)]
pub(crate) struct MetricsGauge {
    handle: metrics::Gauge,
    bits: Arc<AtomicU64>,
}

impl Contender for MetricsGauge {
    const NAME: &'static str = "metrics::Gauge";
    const IMPORT: &'static str = "metrics::Gauge (as metrics-exporter-prometheus hands it out)";
    const KIND: Kind = Kind::Peer;
    type Token = ();
    type Local = ();

    fn new(_: usize) -> Self {
        let bits = Arc::new(AtomicU64::new(0f64.to_bits()));
        MetricsGauge {
            handle: metrics::Gauge::from_arc(Arc::clone(&bits)),
            bits,
        }
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) {
        self.handle.increment(1.0);
    }

    #[inline]
    fn end(&self, (): &(), (): ()) {
        self.handle.decrement(1.0);
    }

    fn read(&self) -> i64 {
        // What the exporter renders: the f64 behind the handle.
        f64::from_bits(self.bits.load(Ordering::Acquire)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Check;
    impl Visit for Check {
        fn visit<C: Contender>(&mut self) {
            let c = C::new(2);
            let l = c.local();
            let a = c.start(&l);
            let b = c.start(&l);
            assert_eq!(c.read(), 2, "{}", C::NAME);
            c.end(&l, a);
            c.end(&l, b);
            assert_eq!(c.read(), 0, "{}", C::NAME);
        }
    }

    #[test]
    fn every_contender_counts() {
        for_each(&mut Check);
        let names: Vec<_> = all().into_iter().map(|i| i.name).collect();
        assert_eq!(names.len(), 13);
        assert_eq!(names[0], "ceiling");
    }
}

// === impl SlabFloor ===

/// The least a session tracker built on `sharded-slab` (the registry `livecount-session` had
/// before its slot table) does per session: the `PerThread` counter's increment and decrement
/// plus one slab `insert` and `remove` of an empty entry — no state word, no reasons, no
/// clock, no walkable journal. Only the lifecycle workload runs it, on threads, to show
/// whether a slab-based tracker could meet the tracker's cost target at all.
#[derive(Debug, Default)]
pub(crate) struct SlabFloor {
    counter: livecount::PerThread,
    slab: sharded_slab::Slab<()>,
}

impl Contender for SlabFloor {
    const NAME: &'static str = "PerThread+sharded-slab floor";
    const IMPORT: &'static str = "sharded_slab::Slab";
    const KIND: Kind = Kind::Peer;
    type Token = (usize, <livecount::PerThread as Counter>::Token);
    type Local = ();

    fn new(_: usize) -> Self {
        SlabFloor::default()
    }

    fn local(&self) {}

    #[inline]
    fn start(&self, (): &()) -> Self::Token {
        let key = self.slab.insert(()).expect("far below the slab's capacity");
        (key, self.counter.increment())
    }

    #[inline]
    fn end(&self, (): &(), (key, token): Self::Token) {
        self.slab.remove(key);
        self.counter.decrement(token);
    }

    fn read(&self) -> i64 {
        i64::try_from(self.counter.load()).unwrap_or(i64::MAX)
    }
}
