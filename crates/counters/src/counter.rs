//! The [`Counter`] trait, its [`Token`] and the [`Totals`] a read returns.

use std::fmt;
use std::marker::PhantomData;

/// An active-session gauge: up at every session start, down at every session end, read
/// periodically by a reporter or a load balancer.
///
/// # Contract
///
/// * [`increment`](Counter::increment) counts one session as started and returns a
///   [`Token`] for it. The token is the only way to end that session's count: it is neither
///   `Clone` nor `Copy`, so ending the same session twice does not compile, and it is `Send`,
///   so the session may end on another thread than it started on (a tokio task that migrated,
///   a disconnect detector, a reaper).
/// * [`decrement`](Counter::decrement) consumes the token and counts the session as ended.
///   Pass a token only to the counter that issued it. Dropping a token without decrementing
///   leaves the session counted forever (a *ghost*), which is why tokens are `#[must_use]`.
///
///   **Misuse in debug builds** (`debug_assertions`) panics at the misuse: a token passed to
///   another counter than the one that issued it (even one of the same type), and a token
///   dropped without `decrement`. A token that is `mem::forget`-ten cannot be seen; it is a
///   ghost like a dropped one (the session tracker's reaper is the remedy for sessions).
///   **In release builds** tokens are zero-sized and nothing is checked: a token ended on
///   the wrong counter counts an end there and none here, so both are wrong from then on —
///   this one keeps a ghost, and the wrong one is a session short (the pair counters'
///   reads saturate at 0; `Single`, one word, wraps around) — and a dropped token is a
///   ghost. Debug builds exist to catch both before they ship.
/// * [`load`](Counter::load) returns the number of active sessions. When no update runs
///   concurrently it is exact: the number of tokens issued and not yet consumed. Under
///   concurrent updates each implementation documents its guarantee; every implementation in
///   this crate promises at least the **gauge read guarantee**:
///   1. the value is never negative (it is a `u64` and never wraps): every end the read
///      counts, it also counts that session's start;
///   2. every session whose `increment` happened-before the read started and whose
///      `decrement` did not happen before the read returned is counted, so the value is never
///      below the number of sessions that were open during the whole read;
///   3. the value never exceeds the number of sessions started before the read returned.
///
///   So a load balancer may over-estimate a backend's load by the sessions that started
///   during the read, and never under-estimate it. Implementations that sum cells keep that
///   over-estimate small: a read that saw many sessions start while it ran (a reader
///   preempted mid-read) is retried a bounded number of times and the tightest is kept.
/// * [`totals`](Counter::totals) returns monotone started / ended counts where the
///   implementation keeps them, read with the same guarantee (`started >= ended`).
/// * [`is_idle`](Counter::is_idle) is `load() == 0`: if it returns `true`, there was a
///   moment during the call when no session was active.
///
/// # Examples
///
/// ```
/// use livecount::{Counter, Sharded};
///
/// let sessions = Sharded::new();
/// let token = sessions.increment();
/// assert_eq!(sessions.load(), 1);
/// sessions.decrement(token);
/// assert!(sessions.is_idle());
/// ```
///
/// A token cannot end a session twice:
///
/// ```compile_fail,E0382
/// use livecount::{Counter, Striped};
///
/// let sessions = Striped::new();
/// let token = sessions.increment();
/// sessions.decrement(token);
/// sessions.decrement(token); // error[E0382]: use of moved value
/// ```
///
/// and it cannot be copied to try:
///
/// ```compile_fail,E0599
/// use livecount::{Counter, PerThread};
///
/// let sessions = PerThread::new();
/// let token = sessions.increment();
/// let copy = token.clone(); // error[E0599]: no method named `clone`
/// ```
pub trait Counter: Send + Sync + fmt::Debug {
    /// Proof that one session is counted as started and not yet as ended.
    type Token: Send + Sync + fmt::Debug + 'static;

    /// Counts one session as started.
    #[must_use = "dropping the token leaves the session counted forever; pass it to `decrement`"]
    fn increment(&self) -> Self::Token;

    /// Counts the session behind `token` as ended. `token` must come from this counter.
    fn decrement(&self, token: Self::Token);

    /// The number of active sessions, with the guarantee described on [`Counter`].
    fn load(&self) -> u64;

    /// Monotone totals of sessions started and ended, if this implementation keeps them.
    fn totals(&self) -> Option<Totals>;

    /// Whether no session is active: if `true`, at some moment during the call none was.
    fn is_idle(&self) -> bool {
        self.load() == 0
    }
}

/// Proof that one session of a `C` counter is open; consumed by [`Counter::decrement`].
///
/// Zero-sized in release builds: it costs nothing to carry, store in a session guard or send
/// to another thread. In debug builds it carries the identity of the counter that issued it,
/// and ending it on another counter, or dropping it unended, panics (see [`Counter`]).
///
/// ```
/// use livecount::{Counter, Token, PerThread};
///
/// if !cfg!(debug_assertions) {
///     assert_eq!(std::mem::size_of::<Token<PerThread>>(), 0);
/// }
/// let sessions = PerThread::new();
/// let token = sessions.increment();
/// // End it on another thread: tokens are `Send`.
/// std::thread::scope(|s| {
///     s.spawn(|| sessions.decrement(token));
/// });
/// assert_eq!(sessions.load(), 0);
/// ```
#[must_use = "dropping the token leaves the session counted forever; pass it to `decrement`"]
pub struct Token<C: ?Sized> {
    // `fn() -> C`: zero-sized, `Send` and `Sync` whatever `C` is, and carries the counter type
    // so a token of one implementation cannot be passed to another.
    _counter: PhantomData<fn() -> C>,
    /// The issuing counter, checked by `redeem` (debug builds only).
    #[cfg(debug_assertions)]
    issuer: Issuer,
}

impl<C: ?Sized> Token<C> {
    /// Mints a token for a session of the counter `issuer` identifies; only counters inside
    /// this crate do, as the result of an increment.
    #[inline]
    pub(crate) fn new(issuer: &Issuer) -> Self {
        let _ = issuer;
        Token {
            _counter: PhantomData,
            #[cfg(debug_assertions)]
            issuer: *issuer,
        }
    }

    /// Consumes the token at `decrement` on the counter `by` identifies; in debug builds,
    /// panics if another counter issued it.
    #[inline]
    pub(crate) fn redeem(self, by: &Issuer) {
        let _ = by;
        #[cfg(debug_assertions)]
        {
            let issuer = self.issuer;
            // Consumed: the drop check below must not fire, panic or not.
            std::mem::forget(self);
            assert!(
                issuer == *by,
                "livecount: a token was passed to `decrement` on another counter than the \
                 one that issued it (counter #{} issued it, counter #{} got it)",
                issuer.0,
                by.0
            );
        }
    }
}

#[cfg(debug_assertions)]
impl<C: ?Sized> Drop for Token<C> {
    fn drop(&mut self) {
        // Not while unwinding: a second panic would abort, and the first one says more.
        if !std::thread::panicking() {
            panic!(
                "livecount: a token of counter #{} was dropped without `decrement`: its \
                 session stays counted forever (a ghost)",
                self.issuer.0
            );
        }
    }
}

impl<C: ?Sized> fmt::Debug for Token<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token")
    }
}

/// A counter's identity, carried by its tokens in debug builds (zero-sized in release).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Issuer(#[cfg(debug_assertions)] u64);

impl Issuer {
    /// A fresh identity: unique in the process (debug builds), nothing (release).
    pub(crate) fn new() -> Self {
        #[cfg(debug_assertions)]
        {
            // `std`, not the model checkers' atomics: an identity is not part of any
            // protocol under test, only unique. Relaxed: uniqueness needs only atomicity.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            Issuer(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        }
        #[cfg(not(debug_assertions))]
        Issuer()
    }
}

/// Monotone started / ended counts, as read by [`Counter::totals`].
///
/// ```
/// use livecount::{Counter, Striped, Totals};
///
/// let sessions = Striped::new();
/// let a = sessions.increment();
/// let b = sessions.increment();
/// sessions.decrement(a);
/// assert_eq!(sessions.totals(), Some(Totals { started: 2, ended: 1 }));
/// assert_eq!(sessions.totals().unwrap().active(), 1);
/// # sessions.decrement(b);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Totals {
    /// Sessions counted as started.
    pub started: u64,
    /// Sessions counted as ended.
    pub ended: u64,
}

impl Totals {
    /// Sessions started and not ended. Never wraps: a misuse that ends more than it started
    /// (a token passed to the wrong counter) reads as zero.
    #[inline]
    pub fn active(&self) -> u64 {
        self.started.saturating_sub(self.ended)
    }
}
