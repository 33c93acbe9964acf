//! The session table: reusable, generation-tagged slots in pages that never move, handed out
//! from per-thread free lists.
//!
//! A start takes a free slot from the calling thread's list for this tracker (a `Vec` in a
//! thread local: no atomic, no allocation), writes the session into it and publishes it with
//! one Release store of its state word; an end is the state word's CAS; dropping the last
//! reference pushes the slot back on the dropping thread's list. So a start + end touches
//! only the slot's own cache line, the counters and this thread's list: nothing shared by
//! all threads, no lock, no allocation.
//!
//! * **Pages.** Page `k` holds `BATCH << k` cache-padded slots and is allocated when the
//!   first slot in it is handed out (`carve`, a `fetch_add` on a cursor, once per `BATCH`
//!   new slots); pages are freed with the tracker. A slot's index never changes, so a
//!   [`SessionId`](crate::SessionId) is its index and the generation its state word records.
//! * **Free lists.** Each thread keeps, per tracker it used, a list of free slots. A list that
//!   runs dry takes a batch from the tracker's pool (a `crossbeam-queue` `SegQueue`) or
//!   carves new slots; one that grows past `2 × BATCH` (a thread that ends sessions others
//!   started) gives a batch back. A thread's lists go back to the pools when it exits.
//! * **Lifetime.** The tracker's state (`Shared`) counts references in `Header::refs`: one
//!   for the tracker handles together, one per slot out of the pool (in use or on a thread's
//!   list), one per thread list. The last release frees it. A slot's own references (the
//!   guard, its handles, a walker) live in its state word (see `lifecycle.rs`); a slot with
//!   references is out of the pool, so its tracker is alive.
//! * **Walks** (the reaper, `end_all`, `sessions()`) visit every slot handed out so far and
//!   take a reference to each live session (`try_acquire`, a CAS that fails on a free or
//!   ended slot): O(slots ever in use at once), never blocking a start or an end.
//!
//! A dropped tracker's memory goes once its last session and handle are gone, except for
//! slots cached on other threads' free lists: those go back when such a thread exits or
//! next starts a session on a tracker it has not used yet.
//!
//! Under `livecount_loom` there are no thread-local lists: every free goes straight to the
//! pool (a loom mutex) and every start takes from it, one slot per batch, so the models
//! reuse slots as eagerly as possible.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool as StdAtomicBool, Ordering as StdOrdering};

use crossbeam_utils::CachePadded;
use livecount::Counter;

use crate::clock::CoarseClock;
use crate::lifecycle::Lifecycle;
use crate::limits::SlotLimits;
use crate::reason::EndReason;
use crate::start_error::StartError;
use crate::sync::plain::{AtomicPtr, AtomicU64 as StdAtomicU64};
use crate::sync::{Ordering, UnsafeCell};
// `std` even under loom: the tracker state's counts are `Arc`'s protocol (Relaxed adds, a
// Release subtract and an Acquire fence at zero), and as loom atomics they multiplied the
// models' state space twentyfold while adding nothing the slot word's models do not check.
use crate::sync::plain::AtomicUsize;
use crate::tally::Tally;
use std::sync::atomic::fence;

/// Slots per batch (a refill, a give-back, a carve); page `k` holds `BATCH << k` slots.
const BATCH: usize = if cfg!(livecount_loom) { 1 } else { 32 };
/// Pages per tracker: `BATCH × (2^PAGES − 1)` slots in all (2 147 483 616 with batches of
/// 32), which keeps every index below 2^31.
const PAGES: usize = 26;
/// How many slots a tracker can hand out.
const CAPACITY: usize = BATCH * ((1 << PAGES) - 1);

/// One session's slot. Every `&Slot` this crate hands around is held by a reference holder
/// (the guard, a handle, a walker that acquired it), so its session cannot be freed, let
/// alone reused, while the reference is used.
#[repr(C)] // the words a start and an end touch first, the limits (rarely used) last
pub(crate) struct Slot<C: Counter, M> {
    pub(crate) life: Lifecycle<C>,
    /// The last activity, as a tracker clock reading (never before the start). `std` atomic,
    /// Relaxed: a hint for the reaper, not part of the ending protocol.
    last_activity: StdAtomicU64,
    index: u32,
    /// Whether `limits` was armed or claimed since the slot was last freed: beside the
    /// lifecycle word, so the free of a session without limits reads no other line.
    limits_dirty: StdAtomicBool,
    /// Written by the starter before the state word publishes the session; read by
    /// reference holders; cleared by whoever frees the slot.
    data: UnsafeCell<Data<M>>,
    /// The limits the tracker's sweeper holds the session to, and its traffic.
    pub(crate) limits: SlotLimits,
}

#[repr(C)] // what every start and end touches first, the span (traced sessions only) last
struct Data<M> {
    /// The start, as a tracker clock reading.
    started: u64,
    metadata: Option<M>,
    /// Whether `span` holds the session's span: the one thing an untraced session's end and
    /// free read of the tracing state, on the line they touch anyway (the span lies past it).
    #[cfg(feature = "tracing")]
    traced: bool,
    /// The session's span (an empty one unless its tracker traces sessions).
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

// SAFETY:
// - `data` is the only part not already `Sync`: it is written only by the thread that owns the
//   free slot (the starter before its Release store publishes the session, the freer after
//   the last reference is gone), and read only by reference holders in between, who
//   acquired the published word. `M` is read by reference from any thread and dropped by the
//   freer, hence `M: Send + Sync`.
#[allow(unsafe_code)]
unsafe impl<C: Counter, M: Send + Sync> Sync for Slot<C, M> {}

impl<C: Counter, M> Slot<C, M> {
    fn new(index: usize) -> Self {
        Slot {
            life: Lifecycle::new(),
            last_activity: StdAtomicU64::new(0),
            data: UnsafeCell::new(Data {
                started: 0,
                metadata: None,
                #[cfg(feature = "tracing")]
                traced: false,
                #[cfg(feature = "tracing")]
                span: tracing::Span::none(),
            }),
            index: u32::try_from(index).expect("slot indices stay below 2^31"),
            limits_dirty: StdAtomicBool::new(false),
            limits: SlotLimits::default(),
        }
    }

    /// The id of the session held: index and generation.
    pub(crate) fn id(&self) -> u64 {
        (u64::from(self.life.generation()) << 32) | u64::from(self.index)
    }

    /// The id the session this free slot is about to hold will have.
    #[cfg(feature = "tracing")]
    fn next_id(&self) -> u64 {
        (u64::from(self.life.next_generation()) << 32) | u64::from(self.index)
    }

    /// The start, as a tracker clock reading.
    #[allow(unsafe_code)]
    pub(crate) fn started(&self) -> u64 {
        // SAFETY:
        // - The caller holds a reference (see the type's docs): the data is written only by
        //   the starter before publishing and by the freer after the last reference is gone.
        self.data.with(|data| unsafe { (*data).started })
    }

    #[allow(unsafe_code)]
    pub(crate) fn metadata(&self) -> Option<&M> {
        // SAFETY:
        // - As in `started_at`; the borrow lives no longer than `&self`, that is, than the
        //   reference the caller holds.
        self.data.with(|data| unsafe { (*data).metadata.as_ref() })
    }

    /// Whether the session has a span (its tracker traced sessions when it started).
    #[cfg(feature = "tracing")]
    #[allow(unsafe_code)]
    #[inline]
    pub(crate) fn traced(&self) -> bool {
        // SAFETY: as in `metadata`.
        self.data.with(|data| unsafe { (*data).traced })
    }

    /// The session's span (empty unless its tracker traces sessions).
    #[cfg(feature = "tracing")]
    #[allow(unsafe_code)]
    pub(crate) fn span(&self) -> &tracing::Span {
        // SAFETY: as in `metadata`.
        self.data.with(|data| unsafe { &(*data).span })
    }

    /// Ends the session for `reason` (see [`Lifecycle::end`]), its duration measured to the
    /// clock reading `at`, or to now on `clock` if `None`. The caller holds a reference.
    #[inline]
    pub(crate) fn end(
        &self,
        reason: EndReason,
        tally: &Tally<C>,
        clock: &CoarseClock,
        at: Option<u64>,
    ) -> bool {
        self.life.end(reason, tally, || {
            let ended = at.unwrap_or_else(|| clock.now_nanos());
            // Zero for an end before its start (virtual instants only).
            let micros = ended.saturating_sub(self.started()) / 1_000;
            // The winner, and only it, gets here: the trace records the end once.
            #[cfg(feature = "tracing")]
            if self.traced() {
                crate::trace::ended(self.span(), reason, micros);
            }
            micros
        })
    }

    /// Arms the session's limits (the caller holds a reference); `false` if none is set.
    pub(crate) fn arm_limits(&self, limits: &crate::limits::Limits) -> bool {
        // Relaxed: read by the freer, after the last reference is gone.
        self.limits_dirty.store(true, StdOrdering::Relaxed);
        self.limits.arm(limits)
    }

    /// Claims the session's end for `cause` (see `SlotLimits::claim`).
    pub(crate) fn claim_end(&self, cause: crate::limits::EndCause) -> bool {
        // Relaxed: as in `arm_limits`.
        self.limits_dirty.store(true, StdOrdering::Relaxed);
        self.limits.claim(cause)
    }

    /// Records activity at clock reading `now`.
    pub(crate) fn touch(&self, now: u64) {
        // Relaxed: a monotone-enough hint; `fetch_max` so a late, older touch cannot undo a newer.
        self.last_activity.fetch_max(now, StdOrdering::Relaxed);
    }

    /// The last recorded activity (the start, if none), as a clock reading.
    pub(crate) fn last_activity(&self) -> u64 {
        self.last_activity.load(StdOrdering::Relaxed)
    }
}

/// The part of a tracker's state that the thread-local free lists see, whatever its types.
pub(crate) struct Header {
    /// One for the tracker handles together, one per slot out of the pool, one per thread
    /// free list. Freed at zero.
    refs: AtomicUsize,
    /// Live `SessionTracker` handles.
    handles: AtomicUsize,
    /// Puts a batch of free slots in the pool (without releasing their references).
    pool_push: unsafe fn(NonNull<Header>, Vec<NonNull<()>>),
    /// Frees the whole tracker state.
    destroy: unsafe fn(NonNull<Header>),
}

#[cfg(not(livecount_loom))] // only the thread-local free lists ask
impl Header {
    /// Whether every tracker handle is gone: no new session can start on this state, so
    /// free slots cached for it should go back and let it be freed.
    #[inline]
    fn is_dead(&self) -> bool {
        // Acquire: pairs with the last handle's AcqRel decrement.
        self.handles.load(Ordering::Acquire) == 0
    }
}

/// Releases `n` references to the tracker state behind `header`, freeing it at zero.
///
/// # Safety
///
/// The caller holds `n` references and gives them up: it must not use the state afterwards.
#[allow(unsafe_code)]
pub(crate) unsafe fn release_refs(header: NonNull<Header>, n: usize) {
    // SAFETY: the caller's references keep the header alive until this `fetch_sub`.
    let header_ref = unsafe { header.as_ref() };
    // Release, Acquire fence at zero: as `Arc`'s drop.
    if header_ref.refs.fetch_sub(n, Ordering::Release) == n {
        fence(Ordering::Acquire);
        // SAFETY:
        // - The count reached zero: no handle, no slot out of the pool, no free list refers
        //   to the state any more, and nothing can add a reference without holding one.
        unsafe { (header_ref.destroy)(header) };
    }
}

/// Free slots, type-erased so a thread-local free list needs no type parameters.
struct Batch(Vec<NonNull<()>>);

// SAFETY:
// - A batch is a list of pointers to free slots that move between threads only through the
//   pool, whose push / pop synchronise; whoever pops a batch owns its slots.
#[allow(unsafe_code)]
unsafe impl Send for Batch {}

#[cfg(not(livecount_loom))]
type Pool = crossbeam_queue::SegQueue<Batch>;

#[cfg(livecount_loom)]
struct Pool(crate::sync::Mutex<Vec<Batch>>);

#[cfg(livecount_loom)]
impl Default for Pool {
    fn default() -> Self {
        Pool(crate::sync::Mutex::new(Vec::new()))
    }
}

#[cfg(livecount_loom)]
impl Pool {
    fn push(&self, batch: Batch) {
        crate::sync::lock(&self.0).push(batch);
    }

    fn pop(&self) -> Option<Batch> {
        crate::sync::lock(&self.0).pop()
    }
}

/// Everything a tracker owns, shared by its handles and its sessions.
#[repr(C)] // `header` first: free lists keep a `NonNull<Header>` and cast it back.
pub(crate) struct Shared<C: Counter, M> {
    header: Header,
    pub(crate) tally: Tally<C>,
    /// The next snapshot's sequence number.
    pub(crate) sequence: StdAtomicU64,
    /// Start and activity instants, at tick precision.
    pub(crate) clock: CoarseClock,
    /// The backend's name once sessions are traced (`SessionTracker::trace_sessions`).
    #[cfg(feature = "tracing")]
    pub(crate) traced: std::sync::OnceLock<Box<str>>,
    /// The task that holds the sessions to their limits.
    #[cfg(feature = "tokio")]
    pub(crate) sweeper: crate::sweeper::Sweeper,
    pages: [AtomicPtr<CachePadded<Slot<C, M>>>; PAGES],
    /// The index of the first slot never handed out.
    carved: AtomicUsize,
    pool: Pool,
}

impl<C: Counter, M> Shared<C, M> {
    /// A new tracker state with one reference: the tracker handles'.
    pub(crate) fn new(tally: Tally<C>) -> NonNull<Self> {
        let shared = Box::new(Shared {
            header: Header {
                refs: AtomicUsize::new(1),
                handles: AtomicUsize::new(1),
                pool_push: pool_push::<C, M>,
                destroy: destroy::<C, M>,
            },
            tally,
            sequence: StdAtomicU64::new(1),
            clock: CoarseClock::new(),
            #[cfg(feature = "tracing")]
            traced: std::sync::OnceLock::new(),
            #[cfg(feature = "tokio")]
            sweeper: crate::sweeper::Sweeper::new(),
            pages: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
            carved: AtomicUsize::new(0),
            pool: Pool::default(),
        });
        NonNull::from(Box::leak(shared))
    }

    pub(crate) fn header(this: NonNull<Self>) -> NonNull<Header> {
        this.cast()
    }

    /// Counts one more tracker handle unless every handle is gone (the caller holds a
    /// session of the tracker, which keeps its state alive): `false` then.
    pub(crate) fn try_add_handle(&self) -> bool {
        // Relaxed, as `Arc::clone`; never from zero, which would revive released handles.
        let mut n = self.header.handles.load(Ordering::Relaxed);
        while n != 0 {
            match self.header.handles.compare_exchange_weak(
                n,
                n + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// Whether the caller's handle is the only one left.
    pub(crate) fn is_last_handle(&self) -> bool {
        // Acquire: as `Header::is_dead`.
        self.header.handles.load(Ordering::Acquire) == 1
    }

    /// Counts one more tracker handle (the caller holds one).
    pub(crate) fn add_handle(&self) {
        // Relaxed, as `Arc::clone`.
        self.header.handles.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops a tracker handle; the last one releases the handles' reference.
    ///
    /// # Safety
    ///
    /// The caller holds a handle and gives it up.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn drop_handle(this: NonNull<Self>) {
        // SAFETY: the caller's handle keeps the state alive until here.
        let header = unsafe { &this.as_ref().header };
        // AcqRel: free lists that see no handles left (Acquire) see everything before.
        if header.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the handles' reference, given up by the last handle.
            unsafe { release_refs(Self::header(this), 1) };
        }
    }

    /// Starts a session: refuses it while draining, admits it (a capped tracker), takes a free slot, fills it, counts
    /// and publishes it, started at the clock reading `at` (now if `None`). No session is
    /// counted on an error (a refusal at the cap is).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn start(
        this: NonNull<Self>,
        metadata: Option<M>,
        at: Option<u64>,
    ) -> Result<NonNull<Slot<C, M>>, StartError> {
        // SAFETY: the caller holds a tracker handle, so the state is alive.
        let shared = unsafe { this.as_ref() };
        if shared.tally.is_draining() {
            shared.tally.note_refused();
            return Err(shared.refused(StartError::Draining));
        }
        if let Some(cap) = &shared.tally.cap
            && !cap.admit()
        {
            shared.tally.note_refused();
            return Err(shared.refused(StartError::AtCapacity { max: cap.max() }));
        }
        let slot = match free_list::take(Self::header(this), || shared.refill()) {
            Ok(slot) => slot.cast::<Slot<C, M>>(),
            Err(full) => {
                if let Some(cap) = &shared.tally.cap {
                    cap.release(); // admitted, but never started
                }
                return Err(shared.refused(full));
            }
        };
        // SAFETY:
        // - The slot came from a free list, so it is free and ours: no reference to it
        //   exists, and `try_acquire` fails on it until `activate` publishes it.
        let slot_ref = unsafe { slot.as_ref() };
        let now = at.unwrap_or_else(|| shared.clock.now_nanos());
        // SAFETY: as above: nobody reads the data of a free slot.
        slot_ref.data.with_mut(|data| unsafe {
            (*data).started = now;
            (*data).metadata = metadata;
        });
        // An untraced session keeps the empty span its slot was freed with.
        #[cfg(feature = "tracing")]
        if let Some(backend) = shared.traced.get() {
            let span = crate::trace::session_span(slot_ref.next_id(), backend);
            // SAFETY: as above.
            slot_ref.data.with_mut(|data| unsafe {
                (*data).span = span;
                (*data).traced = true;
            });
        }
        slot_ref.last_activity.store(now, StdOrdering::Relaxed);
        slot_ref.life.activate(&shared.tally);
        Ok(slot)
    }

    /// `error`, after leaving its trace if sessions are traced.
    #[inline]
    fn refused(&self, error: StartError) -> StartError {
        #[cfg(feature = "tracing")]
        if let Some(backend) = self.traced.get() {
            crate::trace::refused(backend, &error);
        }
        error
    }

    /// A batch of free slots for a thread's list, now counted as out of the pool.
    #[cold]
    fn refill(&self) -> Result<Vec<NonNull<()>>, StartError> {
        let batch = match self.pool.pop() {
            Some(Batch(slots)) => slots,
            None => self.carve()?,
        };
        // Relaxed, as `Arc::clone`: the caller holds a tracker handle, so the count is not 0.
        self.header.refs.fetch_add(batch.len(), Ordering::Relaxed);
        Ok(batch)
    }

    /// `BATCH` slots never handed out before, allocating their page if it is new.
    #[allow(unsafe_code)]
    fn carve(&self) -> Result<Vec<NonNull<()>>, StartError> {
        // Relaxed: only hands out disjoint ranges; the page pointer publishes the slots.
        let first = self.carved.fetch_add(BATCH, StdOrdering::Relaxed);
        if first >= CAPACITY {
            return Err(StartError::Full);
        }
        let (page, offset) = locate(first);
        let base = self.page(page);
        Ok((offset..offset + BATCH)
            // SAFETY: `offset + BATCH <= BATCH << page`, the page's length (batches never
            // straddle pages: page boundaries are multiples of `BATCH`).
            .map(|i| NonNull::from(unsafe { &**base.add(i) }).cast())
            .collect())
    }

    /// Page `k`, allocated and installed if nobody has yet.
    fn page(&self, k: usize) -> *const CachePadded<Slot<C, M>> {
        // Acquire: sees the slots as their allocator initialised them.
        let existing = self.pages[k].load(StdOrdering::Acquire);
        if !existing.is_null() {
            return existing;
        }
        let first = BATCH * ((1 << k) - 1);
        let page: Box<[CachePadded<Slot<C, M>>]> = (0..BATCH << k)
            .map(|i| CachePadded::new(Slot::new(first + i)))
            .collect();
        let raw = Box::into_raw(page).cast::<CachePadded<Slot<C, M>>>();
        // AcqRel: Release publishes our slots; Acquire (also on failure) sees the winner's.
        match self.pages[k].compare_exchange(
            std::ptr::null_mut(),
            raw,
            StdOrdering::AcqRel,
            StdOrdering::Acquire,
        ) {
            Ok(_) => raw,
            Err(winner) => {
                // SAFETY: `raw` is the page we just leaked and never published.
                #[allow(unsafe_code)]
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(raw, BATCH << k)) });
                winner
            }
        }
    }

    /// The slot at `index`, if its page exists.
    #[allow(unsafe_code)]
    fn slot_at(&self, index: usize) -> Option<&Slot<C, M>> {
        if index >= CAPACITY {
            return None;
        }
        let (page, offset) = locate(index);
        // Acquire: as in `page`.
        let base = self.pages[page].load(StdOrdering::Acquire);
        // SAFETY: an installed page has `BATCH << page` slots and lives as long as `self`.
        (!base.is_null()).then(|| unsafe { &**base.add(offset) })
    }

    /// A reference to the live session `id`, if it is live.
    pub(crate) fn acquire(&self, id: u64) -> Option<&Slot<C, M>> {
        let slot = self.slot_at(usize::try_from(id & u64::from(u32::MAX)).ok()?)?;
        slot.life
            .try_acquire(Some((id >> 32) as u32))
            .then_some(slot)
    }

    /// Calls `f` with every session live when the walk reaches it (holding a reference to it
    /// meanwhile). Sessions started during the walk may be missed. Never blocks a start or
    /// an end.
    #[allow(unsafe_code)]
    pub(crate) fn for_each(this: NonNull<Self>, mut f: impl FnMut(&Slot<C, M>)) {
        // SAFETY: the caller holds a tracker handle.
        let shared = unsafe { this.as_ref() };
        let carved = shared.carved.load(StdOrdering::Relaxed).min(CAPACITY);
        for index in 0..carved {
            let Some(slot) = shared.slot_at(index) else {
                // A page a concurrent carve has reserved but not installed yet: nothing live.
                continue;
            };
            if !slot.life.try_acquire(None) {
                continue;
            }
            f(slot);
            if let Some(state) = slot.life.release() {
                // SAFETY: we dropped the slot's last reference, and hold a tracker handle.
                unsafe { Self::free(this, NonNull::from(slot), state) };
            }
        }
    }

    /// Frees a slot whose last reference the caller dropped (`state`: its final word):
    /// forgets its wakers and metadata and puts it on this thread's free list.
    ///
    /// # Safety
    ///
    /// The caller dropped the slot's last reference (`release` returned `state`). The tracker
    /// state may be freed by this call unless the caller holds another reference to it.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free(this: NonNull<Self>, slot: NonNull<Slot<C, M>>, state: u64) {
        // SAFETY: the slot is out of the pool (it had references), so the state is alive.
        let slot_ref = unsafe { slot.as_ref() };
        slot_ref.life.clear_for_reuse(state);
        // Relaxed: the freer is the only one left with the slot.
        if slot_ref.limits_dirty.load(StdOrdering::Relaxed) {
            slot_ref.limits.reset();
            slot_ref.limits_dirty.store(false, StdOrdering::Relaxed);
        }
        // SAFETY: the last reference is gone and the slot is not on a free list yet: ours.
        let metadata = slot_ref
            .data
            .with_mut(|data| unsafe { (*data).metadata.take() });
        // The span closes with the session's last reference (see `trace`), on a path of its
        // own: an untraced session's free moves no span around (a `Span` taken and dropped
        // here costs the untraced pair a quarter more).
        #[cfg(feature = "tracing")]
        if slot_ref.traced() {
            // SAFETY: this function's contract, passed on.
            unsafe { Self::free_traced(this, slot, metadata) };
            return;
        }
        // SAFETY: the slot counts as a reference to the state; the free list takes it over.
        unsafe { free_list::give(Self::header(this), slot.cast()) };
        // Last: the caller's `M` may do anything in its `Drop`, even start a session.
        drop(metadata);
    }

    /// The end of [`free`](Shared::free) for a slot whose session has a span: the span
    /// taken, the slot given back, then the metadata and the span dropped (the span closes).
    ///
    /// # Safety
    ///
    /// As [`free`](Shared::free), which has done everything before giving the slot back.
    #[cfg(feature = "tracing")]
    #[cold]
    #[inline(never)]
    #[allow(unsafe_code)]
    unsafe fn free_traced(this: NonNull<Self>, slot: NonNull<Slot<C, M>>, metadata: Option<M>) {
        // SAFETY: as in `free`: the state is alive and the slot ours until given back.
        let slot_ref = unsafe { slot.as_ref() };
        // SAFETY: as in `free`.
        let span = slot_ref.data.with_mut(|data| unsafe {
            (*data).traced = false;
            std::mem::replace(&mut (*data).span, tracing::Span::none())
        });
        // SAFETY: as in `free`.
        unsafe { free_list::give(Self::header(this), slot.cast()) };
        // Last: `M`'s `Drop` and the subscriber's close may do anything, even start a session.
        drop(metadata);
        drop(span);
    }
}

/// `Header::pool_push` for a `Shared<C, M>`.
#[allow(unsafe_code)]
unsafe fn pool_push<C: Counter, M>(header: NonNull<Header>, slots: Vec<NonNull<()>>) {
    // SAFETY: the caller holds references to the state (those of the slots pushed).
    let shared = unsafe { header.cast::<Shared<C, M>>().as_ref() };
    shared.pool.push(Batch(slots));
}

/// `Header::destroy` for a `Shared<C, M>`.
#[allow(unsafe_code)]
unsafe fn destroy<C: Counter, M>(header: NonNull<Header>) {
    // SAFETY: `Shared::new` leaked this box; the last reference is gone (`release_refs`).
    drop(unsafe { Box::from_raw(header.cast::<Shared<C, M>>().as_ptr()) });
}

impl<C: Counter, M> Drop for Shared<C, M> {
    fn drop(&mut self) {
        for (k, page) in self.pages.iter_mut().enumerate() {
            let base = *page.get_mut();
            if !base.is_null() {
                // SAFETY: `page` leaked this box with this length; nothing refers to it now.
                #[allow(unsafe_code)]
                drop(unsafe {
                    Box::from_raw(std::ptr::slice_from_raw_parts_mut(base, BATCH << k))
                });
            }
        }
    }
}

/// The page and offset of slot `index`: page `k` starts at `BATCH × (2^k − 1)`.
fn locate(index: usize) -> (usize, usize) {
    let q = index / BATCH + 1;
    let page = (usize::BITS - 1 - q.leading_zeros()) as usize;
    (page, index - BATCH * ((1 << page) - 1))
}

/// The thread-local free lists.
#[cfg(not(livecount_loom))]
mod free_list {
    use std::cell::{Cell, RefCell};
    use std::ptr::{self, NonNull};

    use super::{BATCH, Header, release_refs};
    use crate::start_error::StartError;
    use crate::sync::Ordering;

    /// This thread's one cached free slot, before any list: a start on the thread that just
    /// freed a slot of the same tracker (a service's usual pattern, and every back-to-back
    /// benchmark) takes it back with a compare and a store, and the free puts it there with a
    /// load and a store, with no lazy-initialisation check, no `RefCell` borrow and no `Vec`.
    ///
    /// The first word is the slot's tracker state, or a state of the cache itself: `EMPTY`
    /// (open, no slot), `UNREGISTERED` (the thread has not used `LISTS` yet, so no destructor
    /// would give a cached slot back at its exit: the slow path registers it first) or
    /// `CLOSED` (the thread is exiting: `LISTS` is gone). No real state is at address 1 or 2.
    /// A cached slot holds its reference to the state as a listed one does.
    struct One;

    const EMPTY: *const Header = ptr::null();
    const UNREGISTERED: *const Header = ptr::without_provenance(1);
    const CLOSED: *const Header = ptr::without_provenance(2);

    thread_local! {
        static ONE: Cell<(*const Header, Option<NonNull<()>>)> =
            const { Cell::new((UNREGISTERED, None)) };
    }

    impl One {
        /// The cached slot, if it is `header`'s.
        #[inline]
        fn take(header: NonNull<Header>) -> Option<NonNull<()>> {
            let (cached, slot) = ONE.get();
            if cached == header.as_ptr().cast_const() {
                ONE.set((EMPTY, None));
                slot
            } else {
                None
            }
        }

        /// Caches `slot` of `header` if the cache is open and empty; gives it back otherwise.
        #[inline]
        fn put(header: NonNull<Header>, slot: NonNull<()>) -> Result<(), NonNull<()>> {
            if ONE.get().0 == EMPTY {
                ONE.set((header.as_ptr().cast_const(), Some(slot)));
                Ok(())
            } else {
                Err(slot)
            }
        }

        /// `LISTS` is alive on this thread (its destructor will run): open the cache.
        fn open() {
            if ONE.get().0 == UNREGISTERED {
                ONE.set((EMPTY, None));
            }
        }

        /// Closes the cache (the thread exits) and gives its slot back, if any.
        #[allow(unsafe_code)]
        fn close() {
            if let (header, Some(slot)) = ONE.replace((CLOSED, None)) {
                // SAFETY: a cached slot holds a reference to its state, which `header` is.
                let header = unsafe { NonNull::new_unchecked(header.cast_mut()) };
                // SAFETY: the cached slot's reference, given up with it.
                unsafe { give_back(header, vec![slot], 0) };
            }
        }

        /// Gives the cached slot back if its tracker's handles are all gone.
        #[allow(unsafe_code)]
        fn sweep_dead() {
            if let (header, Some(slot)) = ONE.get() {
                // SAFETY: a cached slot holds a reference to its state.
                let header = unsafe { NonNull::new_unchecked(header.cast_mut()) };
                // SAFETY: as above: the state is alive.
                if unsafe { header.as_ref() }.is_dead() {
                    ONE.set((EMPTY, None));
                    // SAFETY: the cached slot's reference, given up with it.
                    unsafe { give_back(header, vec![slot], 0) };
                }
            }
        }
    }

    /// This thread's free slots of one tracker. Holds one reference to the tracker state for
    /// itself and one per slot.
    struct Local {
        header: NonNull<Header>,
        slots: Vec<NonNull<()>>,
    }

    struct Lists(Vec<Local>);

    thread_local! {
        static LISTS: RefCell<Lists> = const { RefCell::new(Lists(Vec::new())) };
    }

    impl Lists {
        /// This thread's list for `header`, made if it has none (the caller holds a
        /// reference to that tracker state). The last tracker used is first.
        #[inline]
        fn local(&mut self, header: NonNull<Header>) -> &mut Local {
            if self.0.first().is_some_and(|l| l.header == header) {
                return &mut self.0[0];
            }
            self.local_slow(header)
        }

        #[cold]
        #[allow(unsafe_code)]
        fn local_slow(&mut self, header: NonNull<Header>) -> &mut Local {
            if let Some(i) = self.0.iter().position(|l| l.header == header) {
                self.0.swap(0, i);
                return &mut self.0[0];
            }
            // A tracker this thread has not used yet: first give back the lists (and the
            // cached slot) of trackers whose handles are all gone, so their state can be freed.
            One::sweep_dead();
            self.0.retain_mut(|local| {
                // SAFETY: the list holds a reference to its tracker state.
                let dead = unsafe { local.header.as_ref() }.is_dead();
                if dead {
                    // SAFETY: the list's references, given up with it.
                    unsafe { give_back(local.header, std::mem::take(&mut local.slots), 1) };
                }
                !dead
            });
            // SAFETY: the caller holds a reference, so the state is alive.
            unsafe { header.as_ref() }
                .refs
                .fetch_add(1, Ordering::Relaxed);
            self.0.push(Local {
                header,
                slots: Vec::with_capacity(2 * BATCH),
            });
            let last = self.0.len() - 1;
            self.0.swap(0, last);
            &mut self.0[0]
        }
    }

    impl Drop for Lists {
        #[allow(unsafe_code)]
        fn drop(&mut self) {
            // The thread exits: the cached slot and every list go back.
            One::close();
            for local in self.0.drain(..) {
                // SAFETY: the list's references, given up with it.
                unsafe { give_back(local.header, local.slots, 1) };
            }
        }
    }

    /// Puts `slots` in the pool and releases their references, plus `extra`.
    ///
    /// # Safety
    ///
    /// The caller holds `slots.len() + extra` references and gives them up.
    #[cold]
    #[allow(unsafe_code)]
    unsafe fn give_back(header: NonNull<Header>, slots: Vec<NonNull<()>>, extra: usize) {
        let n = slots.len() + extra;
        if !slots.is_empty() {
            // SAFETY: the references we hold keep the state alive.
            unsafe { (header.as_ref().pool_push)(header, slots) };
        }
        // SAFETY: ours, given up.
        unsafe { release_refs(header, n) };
    }

    /// A free slot of the tracker behind `header`, from this thread's list, refilled by
    /// `refill` (which counts the slots it returns as references) when empty.
    #[inline]
    pub(super) fn take(
        header: NonNull<Header>,
        refill: impl FnOnce() -> Result<Vec<NonNull<()>>, StartError>,
    ) -> Result<NonNull<()>, StartError> {
        match One::take(header) {
            Some(slot) => Ok(slot),
            None => take_listed(header, refill),
        }
    }

    /// `take` past the cached slot: from this thread's list, refilled when empty.
    #[allow(unsafe_code)]
    fn take_listed(
        header: NonNull<Header>,
        refill: impl FnOnce() -> Result<Vec<NonNull<()>>, StartError>,
    ) -> Result<NonNull<()>, StartError> {
        #[cfg(test)]
        super::tests::LISTED.with(|n| n.set(n.get() + 1));
        let mut refill = Some(refill);
        let from_list = LISTS.try_with(|lists| {
            One::open();
            let mut lists = lists.try_borrow_mut().ok()?;
            let local = lists.local(header);
            if let Some(slot) = local.slots.pop() {
                return Some(Ok(slot));
            }
            let refill = refill.take().expect("called once");
            Some(refill().map(|batch| {
                local.slots.extend(batch);
                local.slots.pop().expect("a batch is never empty")
            }))
        });
        if let Ok(Some(taken)) = from_list {
            return taken;
        }
        // No list: the thread is exiting (its lists are gone) or this is a start from a
        // metadata `Drop` inside a free. Take a batch, keep one, give the rest back.
        let refill = refill.take().expect("not called above");
        let mut batch = refill()?;
        let slot = batch.pop().expect("a batch is never empty");
        if !batch.is_empty() {
            // SAFETY: `refill` counted these references for us; the caller holds another.
            unsafe { give_back(header, batch, 0) };
        }
        Ok(slot)
    }

    /// Puts a freed slot on this thread's list (giving a batch back if the list is long).
    ///
    /// # Safety
    ///
    /// The slot is free and the caller hands its reference over.
    #[inline]
    #[allow(unsafe_code)]
    pub(super) unsafe fn give(header: NonNull<Header>, slot: NonNull<()>) {
        // SAFETY: the slot's reference keeps the state alive.
        let dead = unsafe { header.as_ref() }.is_dead();
        let slot = if dead {
            slot
        } else {
            match One::put(header, slot) {
                Ok(()) => return,
                Err(slot) => slot,
            }
        };
        // SAFETY: the caller's, passed on.
        unsafe { give_listed(header, slot, dead) };
    }

    /// `give` past the cached slot: onto this thread's list (giving a batch back if it is
    /// long), or to the pool without a list or for a `dead` tracker.
    ///
    /// # Safety
    ///
    /// As `give`.
    #[allow(unsafe_code)]
    unsafe fn give_listed(header: NonNull<Header>, slot: NonNull<()>, dead: bool) {
        #[cfg(test)]
        super::tests::LISTED.with(|n| n.set(n.get() + 1));
        if !dead {
            let spilled = LISTS.try_with(|lists| {
                One::open();
                let mut lists = lists.try_borrow_mut().ok()?;
                let local = lists.local(header);
                local.slots.push(slot);
                Some((local.slots.len() >= 2 * BATCH).then(|| local.slots.split_off(BATCH)))
            });
            match spilled {
                Ok(Some(None)) => return,
                Ok(Some(Some(batch))) => {
                    // SAFETY: the list held these references; it keeps `BATCH` more.
                    unsafe { give_back(header, batch, 0) };
                    return;
                }
                _ => {}
            }
        }
        // SAFETY: the caller's, passed on.
        unsafe { give_to_pool(header, slot) };
    }

    /// `give` without a list, or for a tracker whose handles are gone: straight to the pool,
    /// so the state is freed as soon as its last session goes.
    ///
    /// # Safety
    ///
    /// As `give`.
    #[cold]
    #[allow(unsafe_code)]
    unsafe fn give_to_pool(header: NonNull<Header>, slot: NonNull<()>) {
        // SAFETY: the slot's reference, given up.
        unsafe { give_back(header, vec![slot], 0) };
    }
}

/// Under loom: no thread-local lists; every slot goes through the pool.
#[cfg(livecount_loom)]
mod free_list {
    use std::ptr::NonNull;

    use super::{Header, release_refs};
    use crate::start_error::StartError;

    pub(super) fn take(
        _header: NonNull<Header>,
        refill: impl FnOnce() -> Result<Vec<NonNull<()>>, StartError>,
    ) -> Result<NonNull<()>, StartError> {
        let mut batch = refill()?;
        debug_assert_eq!(batch.len(), 1);
        Ok(batch.pop().expect("a batch is never empty"))
    }

    #[allow(unsafe_code)]
    pub(super) unsafe fn give(header: NonNull<Header>, slot: NonNull<()>) {
        // SAFETY: the slot's reference keeps the state alive, then is given up.
        unsafe {
            (header.as_ref().pool_push)(header, vec![slot]);
            release_refs(header, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        /// Starts and frees on this thread that went past the cached slot to the lists.
        pub(super) static LISTED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Back-to-back sessions on one thread go through the cached slot alone: only the first
    /// start (which fills the list and opens the cache) reaches the lists; another tracker's session passes the cache by, and the first tracker's next
    /// session still finds it. The same slot comes back every time, with a new generation.
    #[cfg(not(livecount_loom))]
    #[test]
    fn back_to_back_sessions_take_the_cached_slot() {
        std::thread::spawn(|| {
            let tracker = crate::SessionTracker::new();
            drop(tracker.start());
            let listed = LISTED.with(std::cell::Cell::get);
            assert_eq!(
                listed, 1,
                "the first start fills the list and opens the cache"
            );
            let first = tracker.start().id();
            for _ in 0..1_000 {
                let session = tracker.start();
                assert_eq!(
                    session.id().as_u64() as u32,
                    first.as_u64() as u32,
                    "same slot"
                );
                assert_ne!(session.id(), first, "new generation");
            }
            assert_eq!(LISTED.with(std::cell::Cell::get), listed);
            // Another tracker on the same thread: its sessions use the lists, and leave the
            // first tracker's cached slot where it is.
            let other = crate::SessionTracker::new();
            drop(other.start());
            let after_other = LISTED.with(std::cell::Cell::get);
            assert!(after_other > listed);
            drop(tracker.start());
            assert_eq!(LISTED.with(std::cell::Cell::get), after_other);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pages_tile_the_indices() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(BATCH - 1), (0, BATCH - 1));
        assert_eq!(locate(BATCH), (1, 0));
        assert_eq!(locate(3 * BATCH - 1), (1, 2 * BATCH - 1));
        assert_eq!(locate(3 * BATCH), (2, 0));
        assert_eq!(
            locate(CAPACITY - 1),
            (PAGES - 1, (BATCH << (PAGES - 1)) - 1)
        );
        const { assert!(CAPACITY < 1 << 31) };
    }
}
