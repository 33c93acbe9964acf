//! Compile-time checks of the public API's auto traits: every counter and token can be
//! shared and sent between threads (a session may end on another thread than it started on).

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped, Token, Totals};
use livecount_support::check::{Op, Program};

fn assert_send_sync<T: Send + Sync>() {}

/// The counter and its token type, as the trait names it.
fn assert_counter<C: Counter + Send + Sync>() {
    assert_send_sync::<C>();
    assert_send_sync::<C::Token>();
}

#[test]
fn counters_and_tokens_are_send_and_sync() {
    assert_counter::<Single>();
    assert_counter::<Sharded>();
    assert_counter::<Striped>();
    assert_counter::<PerThread>();
    assert_counter::<PerCpu>();
    assert_counter::<Reference>();
    assert_send_sync::<Token<Single>>();
    assert_send_sync::<Token<Sharded>>();
    assert_send_sync::<Token<Striped>>();
    assert_send_sync::<Token<PerThread>>();
    assert_send_sync::<Token<PerCpu>>();
    assert_send_sync::<Token<Reference>>();
    assert_send_sync::<Totals>();
    assert_send_sync::<Program>();
    assert_send_sync::<Op>();
}

#[test]
fn counters_are_shareable_behind_dyn() {
    // A registry holds `Arc<dyn Counter<Token = …>>`; that needs object safety per token type.
    let counter: std::sync::Arc<dyn Counter<Token = Token<Sharded>>> =
        std::sync::Arc::new(Sharded::new());
    let token = counter.increment();
    assert_eq!(counter.load(), 1);
    counter.decrement(token);
    assert!(counter.is_idle());
}
