//! [`Watcher`]: one sweeper task per layer over the live requests' [`Watch`]es, ending those
//! past a limit even while nobody polls them (a reader that stopped reading).
//!
//! The request's side of the bargain is cheap: its response body and request body bump
//! counters on a line only that request writes (no clock read, no lock); the sweeper keeps,
//! per request, when it last saw them change, in sweeps ("ticks") instead of instants.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use livecount::Counter;
use livecount_session::{EndHandle, EndReason, Session};

use crate::limits::{Limit, StreamLimits};

/// What a request shares with the sweeper: a handle to end its session, and the counters its
/// bodies bump.
pub(crate) struct Watch<C: Counter, M> {
    handle: EndHandle<C, M>,
    /// Frames seen in either direction; bumped by the request body and the response body,
    /// which may run on different tasks.
    activity: AtomicU64,
    /// `polls << 1 | holding`: the response body's polls, and whether the frame it yielded
    /// last is still with the transport (not polled since). Written only by the response body.
    response: AtomicU64,
    /// Whether the client has sent anything: a request frame, or the end of its request.
    /// Written by the request body (and `call`, for a request complete at once).
    heard: AtomicBool,
    /// The first limit to claim the session's end (a `Limit` as `u8`, 0 for none).
    cause: AtomicU8,
}

impl<C: Counter, M> Watch<C, M> {
    fn new(handle: EndHandle<C, M>) -> Self {
        Watch {
            handle,
            activity: AtomicU64::new(0),
            response: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            cause: AtomicU8::new(0),
        }
    }

    /// A frame passed, in either direction.
    #[inline]
    pub(crate) fn active(&self) {
        // Relaxed: a count the sweeper compares with its last reading; a late view only
        // delays an idle end, never causes one.
        self.activity.fetch_add(1, Ordering::Relaxed);
    }

    /// The client sent something (a request frame, or the end of its request): the
    /// first-frame timeout no longer applies.
    #[inline]
    pub(crate) fn heard(&self) {
        // Relaxed, load before store: the flag is set once and then only read, so later
        // frames do not write the line again. The sweeper reads it at most every 10 ms and
        // judges it only at the limit (seconds): a frame that arrives as the limit passes
        // may lose that race, as it would to any timer.
        if !self.heard.load(Ordering::Relaxed) {
            self.heard.store(true, Ordering::Relaxed);
        }
    }

    /// The response body is being polled: the transport took its last frame.
    #[inline]
    pub(crate) fn polled(&self) {
        // Relaxed, load + store: the response body is this word's only writer; a stale view
        // makes the sweeper see a hold start one sweep later, never a stall early.
        let polls = self.response.load(Ordering::Relaxed) >> 1;
        self.response.store((polls + 1) << 1, Ordering::Relaxed);
    }

    /// The response body handed a frame to the transport.
    #[inline]
    pub(crate) fn yielded(&self) {
        // Relaxed: as in `polled`.
        let word = self.response.load(Ordering::Relaxed);
        self.response.store(word | 1, Ordering::Relaxed);
        self.active();
    }

    /// Ends the session for `limit`, if no other limit claimed it first; `true` if this
    /// ended it.
    pub(crate) fn end(&self, limit: Limit) -> bool {
        // Relaxed: the claim is published by the session's end (a Release CAS), which a
        // reader's `reason()` (Acquire) sees before it reads the cause.
        let claimed = self
            .cause
            .compare_exchange(0, limit as u8, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        claimed && self.handle.end(limit.reason())
    }

    /// The limit that ended the session, if one did: its claim, confirmed by the reason the
    /// session ended with (a claim whose end lost to another ending is no limit's ending).
    pub(crate) fn ended_by(&self, reason: Option<EndReason>) -> Option<Limit> {
        let reason = reason?;
        // Relaxed: see `end`.
        match Limit::from_u8(self.cause.load(Ordering::Relaxed)) {
            Some(limit) if limit.reason() == reason => Some(limit),
            // Ended `Shutdown` from elsewhere (a drain's deadline): cut with `UNAVAILABLE`,
            // so the client reconnects elsewhere.
            _ if reason == EndReason::Shutdown => Some(Limit::Shutdown),
            _ => None,
        }
    }
}

impl<C: Counter, M> fmt::Debug for Watch<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("handle", &self.handle)
            .field("activity", &self.activity)
            .field("response", &self.response)
            .finish_non_exhaustive()
    }
}

/// The sweeper's record of one request.
struct Entry<C: Counter, M> {
    watch: Weak<Watch<C, M>>,
    /// The tick when `call` ran.
    started: u64,
    /// Ticks after `started` when the session is over, and the limit that says so: the
    /// earlier of the maximum length and the request's `grpc-timeout`.
    ends: Option<(u64, Limit)>,
    /// The activity count last seen, and the tick it was first seen at.
    activity: (u64, u64),
    /// The `response` word last seen, and the tick a hold was first seen at.
    response: (u64, Option<u64>),
}

/// Limits as sweep counts (the maximum length is per request: see `Entry::ends`).
#[derive(Clone, Copy, Debug)]
struct Ticks {
    idle: Option<u64>,
    first_frame: Option<u64>,
    write: Option<u64>,
}

/// One lock's worth of the registry, on its own cache line.
type Shard<C, M> = CachePadded<Mutex<Vec<Entry<C, M>>>>;

/// The registry of a layer's live requests and its sweeper.
pub(crate) struct Watcher<C: Counter, M> {
    max_session: Option<Duration>,
    ticks: Ticks,
    period: Duration,
    /// Sweeps so far. Written by the sweeper only.
    tick: AtomicU64,
    /// Whether a sweeper task runs.
    running: AtomicBool,
    shards: Box<[Shard<C, M>]>,
}

/// The sweeper's period bounds: often enough for short test limits, rarely enough to cost
/// nothing with the defaults' seconds.
const MIN_PERIOD: Duration = Duration::from_millis(10);
const MAX_PERIOD: Duration = Duration::from_secs(1);

impl<C: Counter, M> Watcher<C, M> {
    /// A watcher for `limits`; `None` if no limit needs one.
    pub(crate) fn new(limits: &StreamLimits) -> Option<Arc<Self>> {
        if !limits.timed() && limits.max_request_message.is_none() {
            return None;
        }
        let shortest = [
            limits.max_session,
            limits.idle_timeout,
            limits.first_frame_timeout,
            limits.write_timeout,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(MAX_PERIOD);
        let period = (shortest / 4).clamp(MIN_PERIOD, MAX_PERIOD);
        let in_ticks = |limit: Option<Duration>| limit.map(|d| in_ticks(d, period));
        let shards = std::thread::available_parallelism()
            .map_or(4, usize::from)
            .next_power_of_two()
            .min(64);
        Some(Arc::new(Watcher {
            max_session: limits.max_session,
            ticks: Ticks {
                idle: in_ticks(limits.idle_timeout),
                first_frame: in_ticks(limits.first_frame_timeout),
                write: in_ticks(limits.write_timeout),
            },
            period,
            tick: AtomicU64::new(0),
            running: AtomicBool::new(false),
            shards: (0..shards)
                .map(|_| CachePadded::new(Mutex::default()))
                .collect(),
        }))
    }
}

impl<C: Counter + 'static, M: Send + Sync + 'static> Watcher<C, M> {
    /// Registers the request of `session`, whose client set `grpc_timeout` (if any) as its
    /// deadline; `None` (no limits for it) outside a tokio runtime.
    pub(crate) fn watch(
        self: &Arc<Self>,
        session: &Session<C, M>,
        grpc_timeout: Option<Duration>,
    ) -> Option<Arc<Watch<C, M>>> {
        // Acquire: pairs with the Release in `Running::drop`, so a sweeper that stopped is
        // seen stopped and spawned anew.
        if !self.running.load(Ordering::Acquire) && !self.spawn() {
            return None;
        }
        let watch = Arc::new(Watch::new(session.handle()));
        // Relaxed: the tick only has to be one the sweeper published; see `sweep_entry`.
        let now = self.tick.load(Ordering::Relaxed);
        let entry = Entry {
            watch: Arc::downgrade(&watch),
            started: now,
            ends: self.ends(grpc_timeout),
            activity: (0, now),
            response: (0, None),
        };
        self.shard().push(entry);
        Some(watch)
    }

    /// When a request with `grpc_timeout` is over, in ticks: the earlier limit wins (the
    /// maximum length on a tie, compared as durations, not as rounded ticks).
    fn ends(&self, grpc_timeout: Option<Duration>) -> Option<(u64, Limit)> {
        let limit = match (self.max_session, grpc_timeout) {
            (Some(max), Some(deadline)) if deadline < max => (deadline, Limit::GrpcTimeout),
            (Some(max), _) => (max, Limit::MaxSession),
            (None, Some(deadline)) => (deadline, Limit::GrpcTimeout),
            (None, None) => return None,
        };
        Some((in_ticks(limit.0, self.period), limit.1))
    }

    /// This thread's shard, locked.
    fn shard(&self) -> std::sync::MutexGuard<'_, Vec<Entry<C, M>>> {
        thread_local! {
            static SHARD: usize = {
                static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                // Relaxed: any spread of threads over shards is correct.
                NEXT.fetch_add(1, Ordering::Relaxed)
            };
        }
        let index = SHARD.with(|s| *s) & (self.shards.len() - 1);
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns the sweeper on the current runtime; `false` outside one.
    fn spawn(self: &Arc<Self>) -> bool {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        // Acquire on success: orders this spawn after the previous sweeper's stop.
        if self
            .running
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            runtime.spawn(sweep(Running(Arc::clone(self))));
        }
        true
    }

    /// One sweep: ends what is past a limit and forgets what has ended. Each shard is taken
    /// out under its lock and put back after, so requests starting meanwhile wait for two
    /// swaps, not for the walk.
    fn sweep(&self) -> bool {
        // Relaxed: this task is the tick's only writer; see `watch` for the readers.
        let now = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let mut live = false;
        for shard in self.shards.iter() {
            let mut entries =
                std::mem::take(&mut *shard.lock().unwrap_or_else(PoisonError::into_inner));
            entries.retain_mut(|entry| self.sweep_entry(entry, now));
            live |= !entries.is_empty();
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            if shard.is_empty() {
                *shard = entries; // keeps the larger allocation
            } else {
                shard.append(&mut entries);
            }
        }
        live
    }

    /// Checks one request at tick `now`; `false` to forget it (ended, or its bodies gone).
    ///
    /// A change first seen at tick `t` happened before it, so "nothing since `t` for `k`
    /// ticks" is never early. `started` was read at `call`, up to a tick before the first
    /// sweep that could see the request, hence its extra tick.
    fn sweep_entry(&self, entry: &mut Entry<C, M>, now: u64) -> bool {
        let Some(watch) = entry.watch.upgrade() else {
            return false;
        };
        if watch.handle.is_ended() {
            return false;
        }
        // Relaxed: see `Watch::active` and `Watch::polled`.
        let activity = watch.activity.load(Ordering::Relaxed);
        if activity != entry.activity.0 {
            entry.activity = (activity, now);
        }
        let response = watch.response.load(Ordering::Relaxed);
        let holding = response & 1 == 1;
        if response != entry.response.0 || !holding {
            entry.response = (response, holding.then_some(now));
        }
        let past =
            |since: u64, limit: Option<u64>| limit.is_some_and(|k| now.saturating_sub(since) >= k);
        let over = entry
            .ends
            .filter(|&(k, _)| past(entry.started + 1, Some(k)));
        let limit = if let Some((_, limit)) = over {
            limit
        } else if entry
            .response
            .1
            .is_some_and(|since| past(since, self.ticks.write))
        {
            Limit::Stall
        } else if past(entry.activity.1, self.ticks.idle) {
            Limit::Idle
        } else if !watch.heard.load(Ordering::Relaxed)
            && past(entry.started + 1, self.ticks.first_frame)
        {
            // Relaxed: see `Watch::heard`.
            Limit::FirstFrame
        } else {
            return true;
        };
        watch.end(limit);
        false
    }
}

/// `limit` in sweeps of `period`, rounded up (never early), at least one.
fn in_ticks(limit: Duration, period: Duration) -> u64 {
    let ticks = limit.as_nanos().div_ceil(period.as_nanos()).max(1);
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

/// The sweeper's hold on its watcher; marks it stopped when the task ends or is dropped
/// (its runtime shut down), so the next request spawns a new one.
struct Running<C: Counter, M>(Arc<Watcher<C, M>>);

impl<C: Counter, M> Drop for Running<C, M> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire in `watch` and `spawn`.
        self.0.running.store(false, Ordering::Release);
    }
}

/// The sweeper: a sweep every period, until nothing but itself holds the watcher (the layer
/// and its services are gone) and no request is left to watch.
async fn sweep<C: Counter + 'static, M: Send + Sync + 'static>(running: Running<C, M>) {
    let mut interval = tokio::time::interval(running.0.period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await; // the first tick is immediate
    loop {
        interval.tick().await;
        let live = running.0.sweep();
        if !live && Arc::strong_count(&running.0) == 1 {
            return;
        }
    }
}

impl<C: Counter, M> fmt::Debug for Watcher<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watcher")
            .field("ticks", &self.ticks)
            .field("period", &self.period)
            .field("tick", &self.tick)
            .finish_non_exhaustive()
    }
}
