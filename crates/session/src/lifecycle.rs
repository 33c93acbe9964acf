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
//!  bit 7      OWNER_WAITS   the owner's poll registered a waker in the signal's slot
//!  bit 8      HANDLES_WAIT  `EndHandle::ended` futures registered wakers in its list
//!  bits 9..32  REFS   references to the slot: the guard, each `EndHandle`, each walker
//!  bits 32..64 GEN    the slot's generation: bumped by every start that reuses the slot
//! ```
//!
//! The word lives in a reusable slot (see `slots.rs`). A free slot has ENDED set and no
//! references. `activate` (by the one thread that took the free slot) bumps GEN and
//! publishes a live session with one reference, the guard's. References are only ever
//! *added* by a holder of one (`add_ref`: a handle cloned) or by `try_acquire`, a CAS that
//! requires the session to be live and, for a lookup by id, the generation to match — so a
//! stale id never finds a newer session, and nobody gains a reference to an ended session
//! they did not already hold. Whoever drops the last reference (`release`) owns the slot
//! and frees it for reuse; since the guard holds a reference until it is dropped, and its
//! drop ends the session first, a slot is only ever freed ended.
//!
//! * `end(reason)` CASes `ENDED | reason` in; the one CAS that sees ENDED clear is the winner,
//!   and only the winner touches the `total` token, records its reason and duration and
//!   decrements `total`.
//! * `set_phase` CASes BUSY in (from neither BUSY nor ENDED), swaps the phase token on the
//!   `generating` counter, then CASes BUSY out with the new phase. If an `end` won in the
//!   meantime, the end left the phase token alone, and the BUSY holder releases it: whoever
//!   holds the phase token last gives it back ("helping"). So `end` never waits, and the
//!   phase token is returned exactly once. A transition that finds BUSY set (two callers
//!   racing, possible since `EndHandle::set_phase`) does nothing and reports success: it is
//!   linearised just before the one in progress, which then overrides it.
//! * Waiting for the end: a poller registers its waker in the [`EndSignal`] *first*, then
//!   sets its WAITS bit with a `fetch_or`. Both that `fetch_or` and the winning `end`'s CAS
//!   are read-modify-writes of this word, so one comes first: if the `fetch_or`, the CAS sees
//!   the bit and wakes the registered waker; if the CAS, the `fetch_or` returns ENDED and the
//!   poller sees the end itself. No wake-up is lost, and an `end` nobody waits on pays nothing
//!   (it tests bits of the word its CAS already returned).

use std::task::{Context, Poll};

use livecount::Counter;

use crate::end_signal::EndSignal;
use crate::phase::Phase;
use crate::reason::EndReason;
use crate::sync::{AtomicU64, Ordering, UnsafeCell, fence};
use crate::tally::Tally;

const PHASE: u64 = 0b001;
const BUSY: u64 = 0b010;
const ENDED: u64 = 0b100;
const REASON_SHIFT: u32 = 3;
const REASON_MASK: u64 = 0xF;
const OWNER_WAITS: u64 = 1 << 7;
const HANDLES_WAIT: u64 = 1 << 8;
const REFS_SHIFT: u32 = 9;
const REF: u64 = 1 << REFS_SHIFT;
const GEN_SHIFT: u32 = 32;
/// The most references a slot can hold (2^23 − 1): past it, like `Arc`, the process aborts.
const REFS_MAX: u64 = (1 << (GEN_SHIFT - REFS_SHIFT)) - 1;

/// The references a state word records.
#[inline]
pub(crate) fn refs(state: u64) -> u64 {
    (state >> REFS_SHIFT) & REFS_MAX
}

/// The generation a state word records.
#[inline]
pub(crate) fn generation(state: u64) -> u32 {
    (state >> GEN_SHIFT) as u32
}

/// The generation after `state`'s. Generation 0 names no session: skipped when the 32 bits wrap.
fn next_generation(state: u64) -> u32 {
    generation(state).wrapping_add(1).max(1)
}

/// What a [`Lifecycle::change_phase`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PhaseChange {
    /// The session had ended (or ended meanwhile): nothing changed.
    Ended,
    /// It was in that phase already, or lost to a racing transition linearised after it.
    Same,
    /// It entered the phase.
    Changed,
}

/// One session's state word and counter tokens.
pub(crate) struct Lifecycle<C: Counter> {
    state: AtomicU64,
    /// The `total` token. Written before the lifecycle is shared; taken only by the winner of
    /// the ENDED CAS.
    total_token: UnsafeCell<Option<C::Token>>,
    /// The `generating` token while the session is generating. Accessed only by the holder of
    /// BUSY, or by the `end` winner if BUSY was clear when it won (see the module docs).
    phase_token: UnsafeCell<Option<C::Token>>,
    /// Wakers of the tasks waiting for the end; woken by the `end` winner.
    signal: EndSignal,
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
#[allow(unsafe_code)]
unsafe impl<C: Counter> Sync for Lifecycle<C> {}

impl<C: Counter> Lifecycle<C> {
    /// A free slot's lifecycle: ended, no references, generation 0 (no id names it).
    pub(crate) fn new() -> Self {
        Lifecycle {
            state: AtomicU64::new(ENDED),
            total_token: UnsafeCell::new(None),
            phase_token: UnsafeCell::new(None),
            signal: EndSignal::new(),
        }
    }

    /// Counts a new session (in `Listening`) in this free slot, with one reference (the
    /// guard's), and returns its generation. The caller owns the free slot: it took it from
    /// a free list, which it was put on by the thread that dropped its last reference.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn activate(&self, tally: &Tally<C>) -> u32 {
        // Relaxed: nobody else touches a free slot's word; how the slot reached us (a free
        // list of this thread, or the tracker's pool, which synchronises) orders the rest.
        let old = self.state.load(Ordering::Relaxed);
        debug_assert!(
            old & ENDED != 0 && refs(old) == 0,
            "activating a slot in use"
        );
        let generation = next_generation(old);
        let token = tally.total.increment();
        // SAFETY:
        // - The slot is free and ours (see above): no other thread accesses its cells until
        //   the store below publishes the session.
        self.total_token
            .with_mut(|cell| unsafe { *cell = Some(token) });
        // Release: whoever acquires the live word (an ender, a walker's `try_acquire`) also
        // sees the token and everything the starter wrote into the slot before.
        self.state.store(
            (u64::from(generation) << GEN_SHIFT) | REF | Phase::Listening.bit(),
            Ordering::Release,
        );
        generation
    }

    /// The generation the next [`activate`](Lifecycle::activate) of this free slot gives.
    #[cfg(feature = "tracing")]
    pub(crate) fn next_generation(&self) -> u32 {
        // Relaxed: as in `activate`, whose caller owns the free slot.
        next_generation(self.state.load(Ordering::Relaxed))
    }

    /// The generation of the session a reference holder holds.
    pub(crate) fn generation(&self) -> u32 {
        // Relaxed: a reference holder's generation cannot change under it.
        generation(self.state.load(Ordering::Relaxed))
    }

    /// Takes a reference to the live session in this slot, if there is one (of `expected`
    /// generation, if given). `false` for a free slot, an ended session or another
    /// generation; nothing changes then.
    pub(crate) fn try_acquire(&self, expected: Option<u32>) -> bool {
        // Acquire (load, CAS and its failure): a reference taken sees the slot as its starter
        // published it.
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & ENDED != 0 || refs(state) == 0 {
                return false;
            }
            if expected.is_some_and(|g| g != generation(state)) {
                return false;
            }
            if refs(state) == REFS_MAX {
                std::process::abort();
            }
            match self.state.compare_exchange_weak(
                state,
                state + REF,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Adds a reference, for a holder of one (a handle being cloned).
    pub(crate) fn add_ref(&self) {
        // Relaxed, as `Arc::clone`: the new reference is made from one the caller holds, so
        // the slot cannot be freed meanwhile, and handing it to another thread synchronises.
        let old = self.state.fetch_add(REF, Ordering::Relaxed);
        if refs(old) >= REFS_MAX - 1 {
            // As `Arc`: billions of leaked handles, a bug; aborting beats corrupting GEN.
            std::process::abort();
        }
    }

    /// Drops a reference. `Some(state)` if it was the last: the caller now owns the slot,
    /// whose final state word (ended, no references) is returned.
    #[inline]
    pub(crate) fn release(&self) -> Option<u64> {
        // Release: everything this holder did with the slot happens before it is freed.
        let old = self.state.fetch_sub(REF, Ordering::Release);
        if refs(old) != 1 {
            return None;
        }
        // Acquire, as `Arc`'s drop: the freer sees everything every other holder did.
        fence(Ordering::Acquire);
        debug_assert!(
            old & ENDED != 0,
            "the last reference to a live session dropped"
        );
        Some(old - REF)
    }

    /// The guard's [`release`](Self::release) once the session has ended: when the guard
    /// holds the only reference, nobody else can take one (references to an ended session
    /// are only ever cloned from a held one), so no read-modify-write is needed.
    #[inline]
    pub(crate) fn release_ended(&self) -> Option<u64> {
        // Acquire: pairs with the Release of the last other holder's `release`, and with the
        // ender's CAS, so the freer sees what they did.
        let state = self.state.load(Ordering::Acquire);
        debug_assert!(state & ENDED != 0, "release_ended on a live session");
        if refs(state) == 1 {
            // Relaxed: the word is ours; the next starter reads it after taking the slot
            // through a free list, which orders it.
            self.state.store(state - REF, Ordering::Relaxed);
            Some(state - REF)
        } else {
            self.release()
        }
    }

    /// Drops every waker a freed slot's signal may hold, if its final `state` says some
    /// were registered. The caller owns the slot (it dropped the last reference).
    #[inline]
    pub(crate) fn clear_for_reuse(&self, state: u64) {
        if state & (OWNER_WAITS | HANDLES_WAIT) != 0 {
            self.signal.clear();
        }
    }

    /// Ends the session for `reason` if nothing ended it yet; `true` for the one call that did.
    /// The winner, and only it, calls `elapsed_micros` for the session's duration and records
    /// it with the reason.
    #[inline]
    pub(crate) fn end(
        &self,
        reason: EndReason,
        tally: &Tally<C>,
        elapsed_micros: impl FnOnce() -> u64,
    ) -> bool {
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
        tally.ends.record(reason, elapsed_micros());
        // SAFETY:
        // - We set ENDED, which no other CAS can do again, so no other thread touches
        //   `total_token` (see the `Sync` impl); `start` wrote it before sharing.
        #[allow(unsafe_code)]
        let token = self.total_token.with_mut(|cell| unsafe { (*cell).take() });
        if let Some(token) = token {
            tally.total.decrement(token);
        }
        if let Some(cap) = &tally.cap {
            // After the decrement: the room this end frees is never taken by a start that
            // could be counted while this session still is.
            cap.release();
        }
        // Last, so a woken task already sees the counts without this session. An end nobody
        // waits on wakes nothing (`wake` tests the two bits this CAS already read).
        self.signal
            .wake(replaced & OWNER_WAITS != 0, replaced & HANDLES_WAIT != 0);
        true
    }

    /// The owner's wait for the end: `Ready(reason)` once ended, else registers `cx`'s waker
    /// in the single owner slot (the last registrant wins) to be woken by the `end` winner.
    pub(crate) fn poll_end_owner(&self, cx: &mut Context<'_>) -> Poll<EndReason> {
        if let Some(reason) = self.reason() {
            return Poll::Ready(reason);
        }
        self.signal.register_owner(cx.waker());
        self.announce(OWNER_WAITS)
    }

    /// An `EndHandle::ended` future's wait: like [`poll_end_owner`](Self::poll_end_owner),
    /// with a place of its own (`slot`) in the waiter list.
    pub(crate) fn poll_end_waiter(
        &self,
        slot: &mut Option<usize>,
        cx: &mut Context<'_>,
    ) -> Poll<EndReason> {
        if let Some(reason) = self.reason() {
            return Poll::Ready(reason);
        }
        self.signal.register_waiter(slot, cx.waker());
        self.announce(HANDLES_WAIT)
    }

    /// Gives up a waiter's place (an `ended` future dropped before the end).
    pub(crate) fn forget_waiter(&self, slot: Option<usize>) {
        self.signal.forget_waiter(slot);
    }

    /// Sets a WAITS bit after registering a waker; `Ready` if the session ended first.
    fn announce(&self, waits: u64) -> Poll<EndReason> {
        // AcqRel: Release so the `end` whose CAS reads this bit also sees the waker registered
        // before it; Acquire so, if that CAS came first, we see what the ender did.
        let state = self.state.fetch_or(waits, Ordering::AcqRel);
        match reason_of(state) {
            Some(reason) => Poll::Ready(reason),
            None => Poll::Pending,
        }
    }

    /// Moves a live session to `phase`: [`PhaseChange::Ended`] if the session has ended.
    /// Concurrent transitions are linearised: one that finds another in flight returns
    /// [`PhaseChange::Same`] without changing anything (it took effect and was at once
    /// overridden).
    #[allow(unsafe_code)]
    pub(crate) fn change_phase(&self, phase: Phase, tally: &Tally<C>) -> PhaseChange {
        // Acquire: sees the phase token as the last BUSY holder left it.
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & ENDED != 0 {
                return PhaseChange::Ended;
            }
            if state & BUSY != 0 {
                // Another transition is in flight (a handle racing the owner): linearise this
                // one just before it, so the other one's phase is the one that stays.
                return PhaseChange::Same;
            }
            if Phase::from_bit(state & PHASE) == phase {
                return PhaseChange::Same;
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
        match self.release_busy(state | BUSY, phase, tally) {
            true => PhaseChange::Changed,
            false => PhaseChange::Ended,
        }
    }

    /// Clears BUSY, publishing `phase`; if an `end` won meanwhile, returns the phase token
    /// on its behalf instead and reports `false`.
    fn release_busy(&self, mut state: u64, phase: Phase, tally: &Tally<C>) -> bool {
        debug_assert!(
            state & BUSY != 0,
            "release_busy expects a word with BUSY set"
        );
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
        #[allow(unsafe_code)]
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
        reason_of(self.state.load(Ordering::Acquire))
    }
}

/// The reason a state word records, or `None` if it is not ENDED.
fn reason_of(state: u64) -> Option<EndReason> {
    if state & ENDED == 0 {
        return None;
    }
    EndReason::from_index(((state >> REASON_SHIFT) & REASON_MASK) as usize)
}

impl<C: Counter> std::fmt::Debug for Lifecycle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("phase", &self.phase())
            .field("reason", &self.reason())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(livecount_loom)))]
mod tests {
    use livecount::Single;

    use super::*;

    fn tally() -> Tally<Single> {
        Tally::new(Single::new(), Single::new(), None)
    }

    fn word<C: Counter>(life: &Lifecycle<C>) -> u64 {
        life.state.load(Ordering::Relaxed)
    }

    #[test]
    fn a_free_slot_is_ended_unreferenced_and_of_no_generation() {
        let life = Lifecycle::<Single>::new();
        assert_eq!(
            (
                word(&life) & ENDED,
                refs(word(&life)),
                generation(word(&life))
            ),
            (ENDED, 0, 0)
        );
        assert!(!life.try_acquire(None), "a free slot was acquired");
        assert!(!life.try_acquire(Some(0)));
    }

    #[test]
    fn activation_publishes_one_reference_and_the_next_generation() {
        let tally = tally();
        let life = Lifecycle::new();
        assert_eq!(life.activate(&tally), 1);
        let state = word(&life);
        assert_eq!((refs(state), generation(state), state & ENDED), (1, 1, 0));
        assert_eq!(life.phase(), Some(Phase::Listening));
        assert_eq!(life.generation(), 1);
        assert_eq!(tally.total.load(), 1);
        // End it, free it, reuse it: the generation moves on.
        assert!(life.end(EndReason::Completed, &tally, || 0));
        let freed = life.release_ended().expect("the only reference");
        assert_eq!(
            (refs(freed), refs(word(&life))),
            (0, 0),
            "the freed word keeps a reference"
        );
        assert_eq!(life.activate(&tally), 2);
        assert_eq!(refs(word(&life)), 1);
        assert!(life.end(EndReason::Completed, &tally, || 0)); // its counter token goes back
    }

    #[test]
    fn the_generation_skips_zero_when_it_wraps() {
        let tally = tally();
        let life = Lifecycle::<Single>::new();
        life.state.store(
            (u64::from(u32::MAX) << GEN_SHIFT) | ENDED,
            Ordering::Relaxed,
        );
        assert_eq!(life.activate(&tally), 1, "generation 0 names no session");
        assert!(life.end(EndReason::Completed, &tally, || 0)); // its counter token goes back
    }

    #[test]
    fn references_count_one_by_one_and_the_last_release_frees() {
        let tally = tally();
        let life = Lifecycle::new();
        life.activate(&tally);
        life.add_ref();
        assert_eq!(refs(word(&life)), 2);
        assert!(life.try_acquire(Some(1)));
        assert_eq!(refs(word(&life)), 3);
        assert!(
            !life.try_acquire(Some(2)),
            "another generation's id acquired the slot"
        );
        assert_eq!(refs(word(&life)), 3);
        assert_eq!(life.release(), None);
        assert_eq!(refs(word(&life)), 2);
        assert!(life.end(EndReason::Failed, &tally, || 0));
        assert!(!life.try_acquire(None), "an ended session was acquired");
        assert_eq!(life.release_ended(), None, "freed with a reference left");
        assert_eq!(refs(word(&life)), 1);
        let last = life.release().expect("the last reference");
        assert_eq!((refs(last), last & ENDED), (0, ENDED));
        assert_eq!(reason_of(last), Some(EndReason::Failed));
        assert_eq!(refs(word(&life)), 0);
    }

    /// An end nobody waits on wakes nothing and takes no lock; an owner's registration makes
    /// the end wake the owner's slot only.
    #[test]
    fn only_registered_waiters_are_woken() {
        let tally = tally();
        let life = Lifecycle::new();
        life.activate(&tally);
        let before = crate::end_signal::wake_calls();
        assert!(life.end(EndReason::Completed, &tally, || 0));
        assert_eq!(
            crate::end_signal::wake_calls(),
            before,
            "an end nobody waits on woke"
        );
        life.release_ended();
        life.activate(&tally);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(life.poll_end_owner(&mut cx).is_pending());
        assert!(life.end(EndReason::Completed, &tally, || 0));
        let after = crate::end_signal::wake_calls();
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0));
        // A handle's waiter: the end wakes the waiter list only.
        life.release_ended();
        life.activate(&tally);
        let mut place = None;
        assert!(life.poll_end_waiter(&mut place, &mut cx).is_pending());
        assert!(life.end(EndReason::Completed, &tally, || 0));
        let last = crate::end_signal::wake_calls();
        assert_eq!((last.0 - after.0, last.1 - after.1), (0, 1));
        life.forget_waiter(place);
    }

    #[test]
    fn the_state_word_helpers_read_their_fields() {
        let state = (7u64 << GEN_SHIFT) | (3 * REF) | ENDED | (2 << REASON_SHIFT) | PHASE;
        assert_eq!((generation(state), refs(state)), (7, 3));
        assert_eq!(reason_of(state), EndReason::from_index(2));
        assert_eq!(reason_of(state & !ENDED), None);
        assert_eq!(refs(REFS_MAX << REFS_SHIFT), REFS_MAX);
        assert_eq!(
            generation(REFS_MAX << REFS_SHIFT),
            0,
            "the references spill into GEN"
        );
    }
}
