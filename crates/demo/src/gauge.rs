//! `Gauge`: the one interface the workload drives, implemented for the livecount counters and
//! for the `AtomicI64` peers, so every contender pays exactly the same harness overhead.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};

use crossbeam_utils::CachePadded;
use livecount::Counter;

/// A session gauge as the workload sees it: start returns a token, end consumes it.
pub(crate) trait Gauge: Sync + fmt::Debug {
    /// What a started session carries until it ends (zero-sized for every contender here).
    type Token: Send;

    /// Counts a session as started.
    fn start(&self) -> Self::Token;

    /// Counts the session behind `token` as ended.
    fn end(&self, token: Self::Token);

    /// The current value as a signed number, so a peer that can dip below zero shows it.
    fn read(&self) -> i64;
}

// === impl Live ===

/// A livecount counter, driven through its [`Counter`] trait.
#[derive(Debug, Default)]
pub(crate) struct Live<C>(pub(crate) C);

impl<C: Counter> Gauge for Live<C> {
    type Token = C::Token;

    #[inline]
    fn start(&self) -> C::Token {
        self.0.increment()
    }

    #[inline]
    fn end(&self, token: C::Token) {
        self.0.decrement(token);
    }

    fn read(&self) -> i64 {
        // A gauge read is a `u64` that never wraps; saturate rather than hide a broken one.
        i64::try_from(self.0.load()).unwrap_or(i64::MAX)
    }
}

// === impl Plain / Padded ===

/// A bare `AtomicI64`: what most code writes first. It shares its cache line with whatever
/// the allocator puts next to it.
#[derive(Debug, Default)]
pub(crate) struct Plain(AtomicI64);

/// An `AtomicI64` alone on its cache line (crossbeam `CachePadded`).
#[derive(Debug, Default)]
pub(crate) struct Padded(CachePadded<AtomicI64>);

/// The same orderings as `livecount::Single`, so the peers do no less work than it does.
macro_rules! signed_gauge {
    ($ty:ty) => {
        impl Gauge for $ty {
            type Token = ();

            #[inline]
            fn start(&self) {
                // Relaxed: one location's modification order is total; nothing is published.
                self.0.fetch_add(1, Ordering::Relaxed);
            }

            #[inline]
            fn end(&self, (): ()) {
                // Release: pairs with the Acquire in `read`, as in `Single::decrement`.
                self.0.fetch_sub(1, Ordering::Release);
            }

            fn read(&self) -> i64 {
                self.0.load(Ordering::Acquire)
            }
        }
    };
}

signed_gauge!(Plain);
signed_gauge!(Padded);
