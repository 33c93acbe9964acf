//! A proptest state machine: random programs of start / set-phase (by the guard or a handle) /
//! touch / end (by the guard, a handle, or the id — also the id of a session long gone, whose
//! slot a later start may have reused) / clone-handle / drop / forget / advance-the-clock /
//! reap / snapshot, run against the tracker and against a plain model, for every counter,
//! uncapped and capped at 0 to 5 live sessions (a start past the cap, or once draining, is refused and counted).
//!
//! Checked after every step: the snapshot equals the model's counts (so `active = started -
//! ended`, phases sum to `active`, reasons sum to `ended`), every `end` returns `true` exactly
//! when the model had the session live (nothing ends twice), reaping ends exactly the sessions
//! the model says are idle, the registry lists exactly the live sessions, no two sessions
//! ever had the same id (a reused slot's id is new), a start is refused exactly when the model
//! is at its cap, the exact admitted count is the model's live count, and every reason's
//! duration histogram (buckets and sum) is the model's: each end recorded once, with its
//! reason, its duration on the virtual clock in the right bucket.
//!
//! Durations: sessions start at virtual instants (`try_start_at`); the guard's and the
//! handles' ends and the reaper end at the virtual now (`end_at`, `reap_at`), so their
//! durations are the virtual time between. The virtual clock runs an hour ahead of the real
//! one, so the ends that read the real clock (a drop, an end by id, `end_all`) come before
//! their session's virtual start and last exactly zero.
//!
//! Cases: `PROPTEST_CASES` (default 256), read here because `Config::with_cases` ignores it.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread, Reference, Sharded, Single, Striped};
use livecount_session::{
    DurationHistogram, EndHandle, EndReason, Phase, Session, SessionTracker, StartError,
};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

/// One session as the model sees it.
#[derive(Clone, Debug)]
struct ModelSession {
    ended: Option<EndReason>,
    /// Virtual seconds of the start.
    started: u64,
    phase: Phase,
    /// Virtual seconds of the last touch.
    last_activity: u64,
    /// Whether the guard is still held (not dropped, not forgotten).
    guard: bool,
}

#[derive(Clone, Debug, Default)]
struct Model {
    sessions: Vec<ModelSession>,
    /// For every cloned handle: the session it ends.
    handles: Vec<usize>,
    /// Virtual seconds since the test's base instant.
    now: u64,
    /// What the last transition must return: `end`'s result, or the sessions a reap ended.
    expect_end: bool,
    expect_reaped: BTreeSet<usize>,
    /// The tracker's cap, if it has one.
    max: Option<u64>,
    /// Starts refused at the cap so far, and whether the last step was one.
    refused: u64,
    expect_refused: bool,
    /// Whether `begin_drain` was called, and what the last `begin_drain` / `end_all` returns.
    draining: bool,
    expect_first_drain: bool,
    expect_ended_all: usize,
    /// Ends per reason (in `EndReason::ALL` order) and duration bucket, bucketed here
    /// (not by `DurationHistogram`), and their durations' sums in seconds.
    buckets: [[u64; DurationHistogram::BUCKETS]; EndReason::COUNT],
    sums: [u64; EndReason::COUNT],
}

impl Model {
    fn live(&self) -> u64 {
        self.sessions.iter().filter(|s| s.ended.is_none()).count() as u64
    }
}

#[derive(Clone, Debug)]
enum Step {
    Start,
    SetPhase(usize, Phase),
    SetPhaseByHandle(usize, Phase),
    Touch(usize),
    TouchByHandle(usize),
    End(usize, EndReason),
    EndByHandle(usize, EndReason),
    EndById(usize, EndReason),
    CloneHandle(usize),
    Drop(usize),
    Forget(usize),
    Advance(u64),
    Reap(u64),
    Snapshot,
    BeginDrain,
    EndAll(EndReason),
}

fn reason() -> impl Strategy<Value = EndReason> {
    prop::sample::select(EndReason::ALL.to_vec())
}

impl ReferenceStateMachine for Model {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        prop_oneof![Just(None), (0..6u64).prop_map(Some)]
            .prop_map(|max| Model {
                max,
                ..Model::default()
            })
            .boxed()
    }

    fn transitions(state: &Model) -> BoxedStrategy<Step> {
        let n = state.sessions.len().max(1);
        let h = state.handles.len().max(1);
        let phase = prop::sample::select(Phase::ALL.to_vec());
        prop_oneof![
            3 => Just(Step::Start),
            2 => (0..n, phase.clone()).prop_map(|(i, p)| Step::SetPhase(i, p)),
            2 => (0..h, phase).prop_map(|(i, p)| Step::SetPhaseByHandle(i, p)),
            1 => (0..n).prop_map(Step::Touch),
            1 => (0..h).prop_map(Step::TouchByHandle),
            2 => (0..n, reason()).prop_map(|(i, r)| Step::End(i, r)),
            2 => (0..h, reason()).prop_map(|(i, r)| Step::EndByHandle(i, r)),
            2 => (0..n, reason()).prop_map(|(i, r)| Step::EndById(i, r)),
            2 => (0..n).prop_map(Step::CloneHandle),
            1 => (0..n).prop_map(Step::Drop),
            1 => (0..n).prop_map(Step::Forget),
            2 => (1..120u64).prop_map(Step::Advance),
            1 => (0..120u64).prop_map(Step::Reap),
            1 => Just(Step::Snapshot),
            1 => Just(Step::BeginDrain),
            1 => reason().prop_map(Step::EndAll),
        ]
        .boxed()
    }

    fn preconditions(state: &Model, step: &Step) -> bool {
        let guard = |i: usize| state.sessions.get(i).is_some_and(|s| s.guard);
        match *step {
            Step::SetPhase(i, _) | Step::Touch(i) | Step::End(i, _) | Step::Drop(i) => guard(i),
            Step::Forget(i) | Step::CloneHandle(i) => guard(i),
            Step::TouchByHandle(h) | Step::EndByHandle(h, _) => h < state.handles.len(),
            Step::SetPhaseByHandle(h, _) => h < state.handles.len(),
            Step::EndById(i, _) => i < state.sessions.len(),
            Step::Start | Step::Advance(_) | Step::Reap(_) | Step::Snapshot => true,
            Step::BeginDrain | Step::EndAll(_) => true,
        }
    }

    fn apply(mut state: Model, step: &Step) -> Model {
        state.expect_end = false;
        state.expect_reaped.clear();
        state.expect_refused = false;
        let now = state.now;
        match *step {
            Step::Start if state.draining => {
                state.refused += 1;
                state.expect_refused = true;
            }
            Step::Start if state.max.is_some_and(|max| state.live() >= max) => {
                state.refused += 1;
                state.expect_refused = true;
            }
            Step::Start => state.sessions.push(ModelSession {
                ended: None,
                started: now,
                phase: Phase::Listening,
                last_activity: now,
                guard: true,
            }),
            Step::SetPhase(i, phase) => {
                // `set_phase` also touches, at the real clock, which is behind the virtual
                // one: no change to the virtual last activity.
                if state.sessions[i].ended.is_none() {
                    state.sessions[i].phase = phase;
                }
            }
            Step::SetPhaseByHandle(h, phase) => {
                let i = state.handles[h];
                state.expect_end = state.sessions[i].ended.is_none(); // what it returns
                if state.expect_end {
                    state.sessions[i].phase = phase;
                }
            }
            Step::Touch(i) => state.sessions[i].last_activity = now,
            Step::TouchByHandle(h) => state.sessions[state.handles[h]].last_activity = now,
            Step::End(i, reason) => state.expect_end = state.end(i, reason, Some(now)),
            Step::EndByHandle(h, reason) => {
                let i = state.handles[h];
                state.expect_end = state.end(i, reason, Some(now));
            }
            Step::EndById(i, reason) => state.expect_end = state.end(i, reason, None),
            Step::CloneHandle(i) => state.handles.push(i),
            Step::Drop(i) => {
                state.sessions[i].guard = false;
                state.end(i, EndReason::Dropped, None);
            }
            Step::Forget(i) => state.sessions[i].guard = false,
            Step::Advance(secs) => state.now += secs,
            Step::Reap(idle) => {
                for i in 0..state.sessions.len() {
                    let s = &state.sessions[i];
                    if s.ended.is_none() && now - s.last_activity > idle {
                        state.end(i, EndReason::Reaped, Some(now));
                        state.expect_reaped.insert(i);
                    }
                }
            }
            Step::Snapshot => {}
            Step::BeginDrain => {
                state.expect_first_drain = !state.draining;
                state.draining = true;
            }
            Step::EndAll(reason) => {
                state.expect_ended_all = 0;
                for i in 0..state.sessions.len() {
                    state.expect_ended_all += usize::from(state.end(i, reason, None));
                }
            }
        }
        state
    }
}

impl Model {
    /// Ends session `i` at virtual second `at` (`None`: at the real clock, before its
    /// virtual start, so it lasted zero); `true` if it was live.
    fn end(&mut self, i: usize, reason: EndReason, at: Option<u64>) -> bool {
        let session = &mut self.sessions[i];
        let live = session.ended.is_none();
        if live {
            session.ended = Some(reason);
            let lasted = at.map_or(0, |at| at - session.started);
            let index = EndReason::ALL.iter().position(|&r| r == reason).unwrap();
            // The first bound the duration does not exceed; past them all, the last bucket.
            let bucket = DurationHistogram::BOUNDS
                .iter()
                .position(|&bound| Duration::from_secs(lasted) <= bound)
                .unwrap_or(DurationHistogram::BUCKETS - 1);
            self.buckets[index][bucket] += 1;
            self.sums[index] += lasted;
        }
        live
    }
}

/// The tracker and everything the program holds.
struct System<C: Counter> {
    tracker: SessionTracker<C>,
    base: Instant,
    guards: Vec<Option<Session<C>>>,
    ids: Vec<livecount_session::SessionId>,
    handles: Vec<EndHandle<C>>,
}

struct SessionMachine<C>(PhantomData<C>);

fn guard<C: Counter>(sys: &System<C>, i: usize) -> &Session<C> {
    sys.guards[i]
        .as_ref()
        .expect("the precondition keeps the guard")
}

impl<C: Counter + Default + 'static> StateMachineTest for SessionMachine<C> {
    type SystemUnderTest = System<C>;
    type Reference = Model;

    fn init_test(model: &Model) -> System<C> {
        System {
            tracker: match model.max {
                Some(max) => SessionTracker::with_counters_and_max(C::default(), C::default(), max),
                None => SessionTracker::default(),
            },
            // An hour ahead: see the module docs.
            base: Instant::now() + Duration::from_secs(3600),
            guards: Vec::new(),
            ids: Vec::new(),
            handles: Vec::new(),
        }
    }

    fn apply(mut sys: System<C>, model: &Model, step: Step) -> System<C> {
        let now = sys.base + Duration::from_secs(model.now);
        match step {
            Step::Start if model.expect_refused => {
                let refused = sys.tracker.try_start().map(|s| s.id());
                let expected = match model.draining {
                    true => StartError::Draining,
                    false => StartError::AtCapacity {
                        max: model.max.expect("refused only when capped or draining"),
                    },
                };
                assert_eq!(refused, Err(expected));
            }
            Step::BeginDrain => {
                assert_eq!(sys.tracker.begin_drain(), model.expect_first_drain);
                assert!(sys.tracker.is_draining());
            }
            Step::EndAll(reason) => {
                assert_eq!(sys.tracker.end_all(reason), model.expect_ended_all);
            }
            Step::Start => {
                let session = sys.tracker.try_start_at(now).expect("the model has room");
                sys.ids.push(session.id());
                sys.guards.push(Some(session));
            }
            Step::SetPhase(i, phase) => {
                let live = model.sessions[i].ended.is_none();
                let session = sys.guards[i].as_mut().unwrap();
                assert_eq!(session.set_phase(phase), live);
            }
            Step::SetPhaseByHandle(h, phase) => {
                assert_eq!(sys.handles[h].set_phase(phase), model.expect_end);
            }
            Step::Touch(i) => guard(&sys, i).touch_at(now),
            Step::TouchByHandle(h) => sys.handles[h].touch_at(now),
            Step::End(i, reason) => {
                assert_eq!(guard(&sys, i).end_at(reason, now), model.expect_end);
            }
            Step::EndByHandle(h, reason) => {
                assert_eq!(sys.handles[h].end_at(reason, now), model.expect_end);
            }
            Step::EndById(i, reason) => {
                assert_eq!(sys.tracker.end(sys.ids[i], reason), model.expect_end);
            }
            Step::CloneHandle(i) => {
                let handle = guard(&sys, i).handle();
                sys.handles.push(handle);
            }
            Step::Drop(i) => drop(sys.guards[i].take()),
            Step::Forget(i) => std::mem::forget(sys.guards[i].take()),
            Step::Advance(_) | Step::Snapshot => {}
            Step::Reap(idle) => {
                let reaped: BTreeSet<usize> = sys
                    .tracker
                    .reap_at(now, Duration::from_secs(idle))
                    .iter()
                    .map(|info| sys.ids.iter().position(|&id| id == info.id).unwrap())
                    .collect();
                assert_eq!(reaped, model.expect_reaped);
            }
        }
        sys
    }

    fn check_invariants(sys: &System<C>, model: &Model) {
        let s = sys.tracker.snapshot();
        assert!(s.is_consistent(), "{s:?}");
        let live = || model.sessions.iter().filter(|m| m.ended.is_none());
        assert_eq!(s.started, model.sessions.len() as u64);
        assert_eq!(s.active, live().count() as u64);
        assert_eq!(s.ended, s.started - s.active);
        assert_eq!(sys.tracker.active(), s.active);
        assert_eq!(s.refused, model.refused);
        assert_eq!(sys.tracker.max_sessions(), model.max);
        assert_eq!(sys.tracker.admitted(), model.max.map(|_| model.live()));
        let generating = live().filter(|m| m.phase == Phase::Generating).count() as u64;
        assert_eq!(
            (s.generating, s.listening),
            (generating, s.active - generating)
        );
        for (index, reason) in EndReason::ALL.into_iter().enumerate() {
            let n = model.sessions.iter().filter(|m| m.ended == Some(reason));
            assert_eq!(s.ended_by(reason), n.count() as u64, "{reason}");
            let durations = s.durations.get(reason);
            assert_eq!(
                durations.buckets(),
                &model.buckets[index],
                "{reason}'s buckets"
            );
            assert_eq!(
                durations.sum(),
                Duration::from_secs(model.sums[index]),
                "{reason}"
            );
            assert_eq!(durations.count(), s.ended_by(reason), "{reason}");
        }
        let mut listed: Vec<_> = sys.tracker.sessions().iter().map(|i| i.id).collect();
        let mut expected: Vec<_> = (0..model.sessions.len())
            .filter(|&i| model.sessions[i].ended.is_none())
            .map(|i| sys.ids[i])
            .collect();
        listed.sort();
        expected.sort();
        assert_eq!(
            listed, expected,
            "the registry lists exactly the live sessions"
        );
        let distinct: BTreeSet<_> = sys.ids.iter().collect();
        assert_eq!(distinct.len(), sys.ids.len(), "two sessions had one id");
        for (handle, &i) in sys.handles.iter().zip(&model.handles) {
            let m = &model.sessions[i];
            assert_eq!(handle.phase(), m.ended.is_none().then_some(m.phase));
            assert_eq!(handle.reason(), m.ended);
        }
        for (i, m) in model.sessions.iter().enumerate() {
            if let Some(guard) = &sys.guards[i] {
                assert_eq!(guard.reason(), m.ended);
                assert_eq!(guard.phase(), m.ended.is_none().then_some(m.phase));
            }
        }
    }

    fn teardown(sys: System<C>, _: Model) {
        // Reap the forgotten guards so nothing is left counted. (Their slots stay referenced,
        // so the tracker state is never freed: a forgotten guard is a leak by definition.)
        sys.tracker
            .reap_at(sys.base + Duration::from_secs(1 << 40), Duration::ZERO);
        drop(sys);
    }
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    Config::with_cases(cases)
}

prop_state_machine! {
    #![proptest_config(config())]

    #[test]
    fn per_thread(sequential 1..64 => SessionMachine<PerThread>);
    #[test]
    fn sharded(sequential 1..64 => SessionMachine<Sharded>);
    #[test]
    fn striped(sequential 1..64 => SessionMachine<Striped>);
    #[test]
    fn single(sequential 1..64 => SessionMachine<Single>);
    #[test]
    fn reference(sequential 1..64 => SessionMachine<Reference>);
}
