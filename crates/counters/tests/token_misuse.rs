//! Token misuse that compiles: in debug builds, a token ended on another counter than the one
//! that issued it (even of the same type) and a token dropped without `decrement` panic at
//! the misuse; `mem::forget` cannot be seen; correct use, across threads and moves, never
//! panics. In release builds tokens are zero-sized and unchecked, and a token ended on the
//! wrong counter leaves that counter reading 0 (never a wrapped count), whichever counter.

// The misuse checks exist in debug builds only; release builds run the tests below the
// `#[cfg(not(debug_assertions))]` line instead: zero-sized tokens, and reads that saturate at
// 0 after a token is ended on the wrong counter.
#![cfg_attr(
    not(debug_assertions),
    allow(dead_code, unused_imports, clippy::forget_non_drop)
)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped, Token};

/// The panic message of `f`, or `None` if it returned.
fn panic_of(f: impl FnOnce()) -> Option<String> {
    let err = catch_unwind(AssertUnwindSafe(f)).err()?;
    Some(
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default(),
    )
}

/// Every misuse check for one counter type, built by `new`.
fn misuse<C: Counter<Token = Token<C>>>(new: impl Fn() -> C) {
    let (a, b) = (new(), new());
    // Another counter of the same type: panics, and neither count moves.
    let token = a.increment();
    let message = panic_of(|| b.decrement(token));
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("on another counter than the one that issued it")),
        "{message:?}"
    );
    assert_eq!((a.load(), b.load()), (1, 0), "the misuse changed no count");

    // Dropped without `decrement`: panics at the drop.
    let message = panic_of(|| drop(a.increment()));
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("dropped without `decrement`")),
        "{message:?}"
    );

    // `mem::forget` cannot be seen: a ghost, documented, no panic.
    let c = new();
    std::mem::forget(c.increment());
    assert_eq!(c.load(), 1);

    // Correct use: moved counter, another thread, no panic and exact.
    let d = new();
    let token = d.increment();
    let moved = d; // the identity is not the address
    std::thread::scope(|s| {
        s.spawn(|| moved.decrement(token));
    });
    assert_eq!(moved.load(), 0);
}

#[test]
#[cfg(debug_assertions)]
fn misuse_panics_in_debug_builds_for_every_counter() {
    misuse(Single::new);
    misuse(Sharded::new);
    misuse(Striped::new);
    misuse(PerThread::new);
    misuse(PerCpu::new);
    misuse(Reference::new);
}

/// A drop while the thread is already panicking stays quiet: a second panic would abort.
#[test]
#[cfg(debug_assertions)]
fn a_token_dropped_while_unwinding_does_not_abort() {
    let counter = Sharded::new();
    let message = panic_of(|| {
        let _token = counter.increment();
        panic!("the first panic");
    });
    assert_eq!(message.as_deref(), Some("the first panic"));
}

#[test]
#[cfg(not(debug_assertions))]
#[ignore = "release builds only: run by scripts/test.sh's heavy phase"]
fn tokens_are_zero_sized_and_unchecked_in_release_builds() {
    assert_eq!(std::mem::size_of::<Token<PerThread>>(), 0);
    assert_eq!(std::mem::size_of::<Token<PerCpu>>(), 0);
    assert_eq!(std::mem::size_of::<Token<Single>>(), 0);
    // Ended on the wrong counter of the same type: no panic; that one counts an end it never
    // started (its read saturates at 0), this one keeps a ghost. Documented, not checked.
    let (a, b) = (Sharded::new(), Sharded::new());
    let token = a.increment();
    b.decrement(token);
    assert_eq!((a.load(), b.load()), (1, 0));
    assert_eq!(b.totals().unwrap().ended, 1);
    // Dropped: no panic, a ghost.
    drop(a.increment());
    assert_eq!(a.load(), 2);
}

/// Every counter, release build: a token ended on another counter of its type (unchecked
/// there) reads as 0 on that counter, never as a wrapped count near 2^64, and the issuer keeps
/// its session. Debug builds panic at the misuse instead (above).
#[cfg(not(debug_assertions))]
fn a_foreign_token_reads_zero<C: Counter<Token = Token<C>>>(new: impl Fn() -> C) {
    let (a, b) = (new(), new());
    let token = a.increment();
    b.decrement(token);
    assert_eq!((a.load(), b.load()), (1, 0));
    assert!(b.is_idle());
    // Two more foreign ends, and `b`'s own session afterwards: still never above the truth
    // by a wrap (the misuse's end cancels a start, as on every counter).
    for _ in 0..2 {
        b.decrement(a.increment());
    }
    let own = b.increment();
    assert_eq!(b.load(), 0);
    b.decrement(own);
    assert_eq!(b.load(), 0);
}

macro_rules! foreign_token_reads_zero {
    ($($test:ident: $counter:ident,)*) => {$(
        #[test]
        #[cfg(not(debug_assertions))]
        #[ignore = "release builds only: run by scripts/test.sh's heavy phase"]
        fn $test() {
            a_foreign_token_reads_zero($counter::new);
        }
    )*};
}

foreign_token_reads_zero! {
    a_foreign_token_leaves_single_reading_zero: Single,
    a_foreign_token_leaves_sharded_reading_zero: Sharded,
    a_foreign_token_leaves_striped_reading_zero: Striped,
    a_foreign_token_leaves_per_thread_reading_zero: PerThread,
    a_foreign_token_leaves_per_cpu_reading_zero: PerCpu,
}

/// The oracle refuses, in every build, to end more sessions than it started (it checks the
/// programs the other counters are compared on): the foreign end panics before it counts,
/// and the read stays 0.
#[test]
#[cfg(not(debug_assertions))]
#[ignore = "release builds only: run by scripts/test.sh's heavy phase"]
fn a_foreign_token_on_an_idle_reference_panics_and_it_reads_zero() {
    let (a, b) = (Reference::new(), Reference::new());
    let token = a.increment();
    let message = panic_of(|| b.decrement(token));
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("ended a session that never started")),
        "{message:?}"
    );
    assert_eq!((a.load(), b.load()), (1, 0));
    assert_eq!(b.totals().unwrap().ended, 0);
}
