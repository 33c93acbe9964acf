//! `Sweeper`: the one task per tracker that holds its sessions to their [`Limits`] and reaps
//! its ghosts: every period it walks the session table and ends the armed sessions past a
//! limit, and (if reaping is on) the sessions untouched for too long, through the same
//! exactly-once end as every other ending. No timer, task or registry per session.
//!
//! [`Limits`]: crate::Limits

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use livecount::Counter;

use crate::limits::Limits;
use crate::tracker::SessionTracker;

/// The sweeper's period bounds: often enough for short test limits, rarely enough to cost
/// nothing with the defaults' seconds.
const MIN_PERIOD: Duration = Duration::from_millis(10);
const MAX_PERIOD: Duration = Duration::from_secs(1);

/// A tracker's sweeper state: whether its task runs, and how often it sweeps.
#[derive(Debug)]
pub(crate) struct Sweeper {
    running: AtomicBool,
    /// A quarter of the shortest limit ever armed on the tracker, in nanoseconds, clamped.
    period: AtomicU64,
    /// How long a session may go untouched before the sweeper reaps it, in nanoseconds
    /// (0: it does not reap).
    reap: AtomicU64,
}

impl Sweeper {
    pub(crate) fn new() -> Self {
        Sweeper {
            running: AtomicBool::new(false),
            period: AtomicU64::new(MAX_PERIOD.as_nanos() as u64),
            reap: AtomicU64::new(0),
        }
    }

    /// Shortens the period for `limits` if they need it (a write only then: the line stays
    /// shared, not written, in the steady state).
    pub(crate) fn fit(&self, limits: &Limits) {
        if let Some(shortest) = limits.shortest() {
            self.fit_to(shortest);
        }
    }

    /// Shortens the period for a limit of `shortest`, if it needs it.
    fn fit_to(&self, shortest: Duration) {
        let period = (shortest / 4).clamp(MIN_PERIOD, MAX_PERIOD).as_nanos() as u64;
        // Relaxed: a period the sweeper reads at its next sleep; a late view only delays.
        if period < self.period.load(Ordering::Relaxed) {
            self.period.fetch_min(period, Ordering::Relaxed);
        }
    }

    /// Reaps sessions untouched for longer than `idle` from the next sweep on; `None`
    /// stops reaping.
    pub(crate) fn reap_after(&self, idle: Option<Duration>) {
        if let Some(idle) = idle {
            self.fit_to(idle);
        }
        let nanos = idle.map_or(0, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
        });
        // Relaxed: a setting the sweeper reads at its next sweep.
        self.reap.store(nanos, Ordering::Relaxed);
    }

    /// The reaping limit, if the sweeper reaps.
    fn reap_limit(&self) -> Option<Duration> {
        // Relaxed: see `reap_after`.
        match self.reap.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    fn period(&self) -> Duration {
        // Relaxed: see `fit`.
        Duration::from_nanos(self.period.load(Ordering::Relaxed))
    }

    /// Whether a sweeper task runs.
    pub(crate) fn is_running(&self) -> bool {
        // Acquire: pairs with the Release in `Running::drop`, so a sweeper that stopped is
        // seen stopped and spawned anew.
        self.running.load(Ordering::Acquire)
    }

    /// Claims the right to spawn the task: `true` for the one caller that should.
    pub(crate) fn claim_start(&self) -> bool {
        // Acquire on success: orders this spawn after the previous sweeper's stop.
        self.running
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

/// The sweeper's hold on its tracker; marks the sweeper stopped when the task ends or is
/// dropped (its runtime shut down), so the next armed session spawns a new one.
struct Running<C: Counter, M>(SessionTracker<C, M>);

impl<C: Counter, M> Drop for Running<C, M> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire in `Sweeper::is_running` and `claim_start`.
        self.0.sweeper().running.store(false, Ordering::Release);
    }
}

/// Spawns `tracker`'s sweeper on the current runtime if none runs; `false` outside a runtime
/// (then nothing holds the limits).
pub(crate) fn ensure<C, M>(tracker: &SessionTracker<C, M>) -> bool
where
    C: Counter + Send + Sync + 'static,
    M: Send + Sync + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let sweeper = tracker.sweeper();
    if !sweeper.is_running() && sweeper.claim_start() {
        runtime.spawn(run(Running(tracker.clone())));
    }
    true
}

/// The task: a sweep every period, until the tracker's other handles are gone and no armed
/// session is left (a session left to reap then has nobody to count it for).
async fn run<C, M>(running: Running<C, M>)
where
    C: Counter + Send + Sync + 'static,
    M: Send + Sync + 'static,
{
    let tracker = &running.0;
    let base = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(tracker.sweeper().period()).await;
        let now = u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        // The reaper's clock is tokio's too, so a paused test runtime reaps by virtual time.
        let reap = tracker
            .sweeper()
            .reap_limit()
            .map(|idle| (tokio::time::Instant::now().into_std(), idle));
        let armed = tracker.sweep(now, reap);
        if armed == 0 && tracker.is_last_handle() {
            return;
        }
    }
}
