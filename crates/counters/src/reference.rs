//! [`Reference`]: a mutex around two integers, obviously correct, for cross-checking.

use crate::counter::Issuer;
use crate::sync::{self, Mutex};
use crate::{Counter, Token, Totals};

/// A `Mutex<Totals>`: every operation takes the lock. Obviously correct and slow.
///
/// Use it only as the oracle the other implementations are checked against (the proptest
/// suite, the fuzz targets and the model checkers compare every counter with it). Reads are
/// linearizable and totals exact.
///
/// # Performance characteristics
///
/// A lock acquire and release per update and per read; under contention threads queue on
/// the lock and may sleep. Never put it on a hot path.
///
/// # Examples
///
/// ```
/// use livecount::{Counter, Reference, Totals};
///
/// let oracle = Reference::new();
/// let token = oracle.increment();
/// assert_eq!(oracle.totals(), Some(Totals { started: 1, ended: 0 }));
/// oracle.decrement(token);
/// assert_eq!(oracle.load(), 0);
/// ```
#[derive(Debug)]
pub struct Reference {
    totals: Mutex<Totals>,
    /// This counter's identity, carried by its tokens (debug builds).
    issuer: Issuer,
}

impl Reference {
    /// An oracle with no sessions.
    ///
    /// ```
    /// use livecount::{Counter, Reference};
    /// assert_eq!(Reference::new().load(), 0);
    /// ```
    pub fn new() -> Self {
        Reference {
            totals: Mutex::new(Totals::default()),
            issuer: Issuer::new(),
        }
    }
}

impl Default for Reference {
    fn default() -> Self {
        Reference::new()
    }
}

impl Counter for Reference {
    type Token = Token<Reference>;

    fn increment(&self) -> Token<Reference> {
        sync::lock(&self.totals).started += 1;
        Token::new(&self.issuer)
    }

    fn decrement(&self, token: Token<Reference>) {
        token.redeem(&self.issuer);
        let mut totals = sync::lock(&self.totals);
        assert!(
            totals.ended < totals.started,
            "ended a session that never started"
        );
        totals.ended += 1;
    }

    fn load(&self) -> u64 {
        sync::lock(&self.totals).active()
    }

    fn totals(&self) -> Option<Totals> {
        Some(*sync::lock(&self.totals))
    }
}
