//! `Lifecycle`: the per-session state word and counter tokens, and the exactly-once ending
//! protocol over them. Nothing here knows about the registry, so the protocol can be reasoned
//! about (and model-checked) on its own.
//!
//! # The state word
//!
//! ```text
//!  bit 0      PHASE   0 = Listening, 1 = Generating
//!  bit 1      BUSY    a phase transition holds the phase token
//!  bit 2      ENDED   terminal: set once, by the winning `end`
//!  bits 3..6  REASON  EndReason index, valid once ENDED is set
//! ```
//!
//! * `end(reason)` CASes `ENDED | reason` in; the one CAS that sees ENDED clear is the winner,
//!   and only the winner touches the `total` token, bumps a reason and decrements `total`.
//! * `set_phase` CASes BUSY in (from neither BUSY nor ENDED), swaps the phase token on the
//!   `generating` counter, then CASes BUSY out with the new phase. If an `end` won in the
//!   meantime, the end left the phase token alone, and the BUSY holder releases it: whoever
//!   holds the phase token last gives it back ("helping"). So `end` never waits, and the
//!   phase token is returned exactly once.

use livecount::Counter;

use crate::phase::Phase;
use crate::reason::EndReason;
use crate::sync::{AtomicU64, Ordering, UnsafeCell};
use crate::tally::Tally;

const PHASE: u64 = 0b001;
const BUSY: u64 = 0b010;
const ENDED: u64 = 0b100;
const REASON_SHIFT: u32 = 3;

/// One session's state word and counter tokens.
pub(crate) struct Lifecycle<C: Counter> {
    state: AtomicU64,
    /// The `total` token. Written before the lifecycle is shared; taken only by the winner of
    /// the ENDED CAS.
    total_token: UnsafeCell<Option<C::Token>>,
    /// The `generating` token while the session is generating. Accessed only by the holder of
    /// BUSY, or by the `end` winner if BUSY was clear when it won (see the module docs).
    phase_token: UnsafeCell<Option<C::Token>>,
}

// SAFETY:
// - The cells are the only `!Sync` parts; their contents are `C::Token: Send + Sync`.
// - `total_token` is written in `start` before the value can be shared, and afterwards
//   touched only by the single thread whose CAS set ENDED (ENDED is never cleared, so at most
//   one CAS sees it clear and sets it).
// - `phase_token` is touched only by a thread holding BUSY (set by a CAS from a state with
//   neither BUSY nor ENDED, so one holder at a time), or by the `end` winner when the state it
//   replaced had BUSY clear (after which BUSY can never be set again). Each handover is a
//   Release CAS read by an Acquire CAS on the same word.
unsafe impl<C: Counter> Sync for Lifecycle<C> {}

impl<C: Counter> Lifecycle<C> {
    /// Counts a new session (in `Listening`) and returns its lifecycle.
    pub(crate) fn start(tally: &Tally<C>) -> Self {
        Lifecycle {
            state: AtomicU64::new(Phase::Listening.bit()),
            total_token: UnsafeCell::new(Some(tally.total.increment())),
            phase_token: UnsafeCell::new(None),
        }
    }

    /// Ends the session for `reason` if nothing ended it yet; `true` for the one call that did.
    pub(crate) fn end(&self, reason: EndReason, tally: &Tally<C>) -> bool {
        let ended = ENDED | ((reason.index() as u64) << REASON_SHIFT);
        // Acquire (here and on CAS failure): sees the phase token a BUSY holder left behind.
        let mut state = self.state.load(Ordering::Acquire);
        let replaced = loop {
            if state & ENDED != 0 {
                return false;
            }
            // AcqRel: Acquire as above; Release so a BUSY holder that later sees ENDED also
            // sees everything this thread did before ending.
            match self.state.compare_exchange_weak(
                state,
                state | ended,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(replaced) => break replaced,
                Err(now) => state = now,
            }
        };
        // We won: the only thread that will ever get here for this session.
        if replaced & BUSY == 0 {
            // No transition in progress, and none can start now: the phase token is ours.
            self.release_phase_token(tally);
        }
        tally.reasons.bump(reason);
        // SAFETY:
        // - We set ENDED, which no other CAS can do again, so no other thread touches
        //   `total_token` (see the `Sync` impl); `start` wrote it before sharing.
        let token = self.total_token.with_mut(|cell| unsafe { (*cell).take() });
        if let Some(token) = token {
            tally.total.decrement(token);
        }
        true
    }

    /// Moves a live session to `phase`. `false` if the session has ended (or, never through the
    /// public API, if another transition holds BUSY).
    pub(crate) fn set_phase(&self, phase: Phase, tally: &Tally<C>) -> bool {
        // Acquire: sees the phase token as the last BUSY holder left it.
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & (ENDED | BUSY) != 0 {
                return false;
            }
            if Phase::from_bit(state & PHASE) == phase {
                return true;
            }
            match self.state.compare_exchange_weak(
                state,
                state | BUSY,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        // We hold BUSY: the phase token is ours until we clear it.
        match phase {
            Phase::Generating => {
                let token = tally.generating.increment();
                // SAFETY:
                // - We hold BUSY (our CAS set it from a state without BUSY or ENDED), so no
                //   other thread touches `phase_token` until we release it.
                self.phase_token
                    .with_mut(|cell| unsafe { *cell = Some(token) });
            }
            Phase::Listening => self.release_phase_token(tally),
        }
        self.release_busy(state | BUSY, phase, tally)
    }

    /// Clears BUSY, publishing `phase`; if an `end` won meanwhile, returns the phase token
    /// on its behalf instead and reports `false`.
    fn release_busy(&self, mut state: u64, phase: Phase, tally: &Tally<C>) -> bool {
        loop {
            if state & ENDED != 0 {
                // The winner saw BUSY and left the phase token to us: help it finish.
                self.release_phase_token(tally);
                // Release: the next reader of the word sees the token gone. Nobody else can
                // change the word after ENDED, so a plain clear suffices.
                self.state.fetch_and(!BUSY, Ordering::Release);
                return false;
            }
            let next = (state & !(BUSY | PHASE)) | phase.bit();
            // Release: hands the phase token to the next BUSY holder or to an `end` winner.
            // Acquire on failure: the failure is an `end`, whose Release we pair with.
            match self.state.compare_exchange_weak(
                state,
                next,
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Decrements `generating` if the session holds a phase token. The caller must own the
    /// phase token: hold BUSY, or have won `end` from a state without BUSY.
    fn release_phase_token(&self, tally: &Tally<C>) {
        // SAFETY:
        // - The caller owns the phase token (documented above; both callers argue it), so no
        //   other thread accesses the cell concurrently.
        let token = self.phase_token.with_mut(|cell| unsafe { (*cell).take() });
        if let Some(token) = token {
            tally.generating.decrement(token);
        }
    }

    /// The current phase, or `None` once ended.
    pub(crate) fn phase(&self) -> Option<Phase> {
        // Acquire: a caller that sees the phase also sees what happened before it was set.
        let state = self.state.load(Ordering::Acquire);
        (state & ENDED == 0).then(|| Phase::from_bit(state & PHASE))
    }

    /// Why the session ended, or `None` while it is live.
    pub(crate) fn reason(&self) -> Option<EndReason> {
        // Acquire: pairs with the winner's Release, for callers that act on the reason.
        let state = self.state.load(Ordering::Acquire);
        if state & ENDED == 0 {
            return None;
        }
        EndReason::from_index((state >> REASON_SHIFT) as usize & 0xF)
    }
}

impl<C: Counter> std::fmt::Debug for Lifecycle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("phase", &self.phase())
            .field("reason", &self.reason())
            .finish_non_exhaustive()
    }
}
