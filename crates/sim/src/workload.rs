//! A scenario's workload as a list: every session's arrival, length, speaking phases and
//! ending, drawn exactly as the engine draws them, for a driver that replays the scenario
//! against real backends (the testbed).
//!
//! Arrivals and each session's plan (`SessionPlan`) come from the engine's own streams (the same
//! arrival process, the same per-session stream), so the list holds the sessions every
//! policy in `lbsim` sees. The speaking phases come from a stream of their own: the engine
//! draws them from the session's stream after its latencies, which depend on the backend
//! it lands on, so a replay draws them from the same distributions, not the same numbers.

use crate::arrivals::ArrivalProcess;
use crate::engine::STREAM_SESSIONS;
use crate::session_plan::{EndReason, SessionPlan};
use crate::{Scenario, SimRng};

/// The stream each session's speaking phases are drawn from (`+ id`).
const STREAM_PHASES: u64 = 9 << 40;

/// How a planned session ends, from the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannedEnd {
    /// The client says goodbye and closes cleanly at the end of its length.
    Completed,
    /// The session outlives the server's maximum length: the server ends it.
    TimedOut,
    /// The client cancels mid-session (a clean close, earlier than planned).
    Cancelled,
    /// The client's connection is cut without a close.
    Disconnected,
}

/// One session of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedSession {
    /// Arrival, seconds from the start.
    pub at_s: f64,
    /// A short, request-like session: it speaks at once for its whole length.
    pub short: bool,
    /// Seconds from arrival to its end.
    pub length_s: f64,
    /// How it ends.
    pub end: PlannedEnd,
    /// Speaking phases as `(offset from arrival, length)` in seconds, in order, each
    /// ending before `length_s`; the session listens in between.
    pub speaking: Vec<(f64, f64)>,
}

/// Every session `scenario` sends, in arrival order.
///
/// Scenarios with backend-side events (failures, restarts) still list their client side;
/// replaying those events is the replayer's business.
///
/// ```
/// use livecount_sim::{Scenario, workload};
///
/// let scenario = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 2\n\
///      [sessions]\nduration = 'exponential'\nmean_s = 20\n[[backends]]\ncount = 3",
///     "inline.toml",
/// )?;
/// let sessions = workload::plan(&scenario);
/// assert!((60..=200).contains(&sessions.len()), "about 120 arrivals");
/// assert!(sessions.windows(2).all(|w| w[0].at_s <= w[1].at_s));
/// assert_eq!(sessions, workload::plan(&scenario), "the same seed, the same workload");
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
pub fn plan(scenario: &Scenario) -> Vec<PlannedSession> {
    arrival_times(scenario)
        .into_iter()
        .enumerate()
        .map(|(id, at_s)| {
            let id = id as u64;
            let mut rng = SimRng::derive(scenario.seed, STREAM_SESSIONS + id);
            let plan = SessionPlan::draw(scenario, &mut rng);
            let mut phases = SimRng::derive(scenario.seed, STREAM_PHASES + id);
            PlannedSession {
                at_s,
                short: plan.short,
                length_s: plan.length,
                end: planned_end(plan.reason),
                speaking: speaking_phases(scenario, &plan, &mut phases),
            }
        })
        .collect()
}

/// The arrival instants in the engine's admission order: the Poisson (or patterned)
/// process merged with the bursts.
fn arrival_times(scenario: &Scenario) -> Vec<f64> {
    let mut process = ArrivalProcess::new(scenario);
    let mut times = Vec::new();
    let mut next = process.next_after(0.0);
    while let Some(t) = next {
        times.push(t);
        next = process.next_after(t);
    }
    if let Some((every, size)) = process.bursts() {
        let mut t = every;
        while t < process.horizon() {
            times.extend(std::iter::repeat_n(t, size as usize));
            t += every;
        }
        // Stable: a burst at the same instant as a Poisson arrival comes after it.
        times.sort_by(f64::total_cmp);
    }
    times
}

fn planned_end(reason: EndReason) -> PlannedEnd {
    match reason {
        EndReason::Completed => PlannedEnd::Completed,
        EndReason::TimedOut => PlannedEnd::TimedOut,
        EndReason::Cancelled => PlannedEnd::Cancelled,
        EndReason::Disconnected => PlannedEnd::Disconnected,
        // Only a backend gives these; a plan is the client's side.
        EndReason::BackendLost | EndReason::Shutdown => {
            unreachable!("a session plan never ends {}", reason.name())
        }
    }
}

/// Idle for an exponential time (mean `idle_mean_s`), then speaking for one (mean
/// `speaking_mean_s`), alternating until the session's end — the engine's phase process.
fn speaking_phases(scenario: &Scenario, plan: &SessionPlan, rng: &mut SimRng) -> Vec<(f64, f64)> {
    let s = &scenario.sessions;
    if plan.short {
        return vec![(0.0, plan.length)];
    }
    let mut out = Vec::new();
    if s.speaking_mean_s <= 0.0 {
        return out;
    }
    let mut t = rng.exponential(s.idle_mean_s);
    while t < plan.length {
        let speak = rng.exponential(s.speaking_mean_s).min(plan.length - t);
        out.push((t, speak));
        t += speak + rng.exponential(s.idle_mean_s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Scenario {
        let text = format!(
            "description = 'x'\nduration_s = 120\nseed = 7\n[arrivals]\nrate_per_s = 3\n{extra}\n\
             [sessions]\nduration = 'exponential'\nmean_s = 20\nidle_mean_s = 5\n\
             speaking_mean_s = 2\ncancel_share = 0.1\ndisconnect_share = 0.1\n\
             [[backends]]\ncount = 2"
        );
        Scenario::from_toml_str(&text, "t.toml").unwrap()
    }

    /// The list is the engine's workload: as many arrivals as `lbsim` counts.
    #[test]
    fn as_many_sessions_as_the_engine_admits() {
        for extra in [
            "",
            "pattern = 'bursts'\nburst_every_s = 30\nburst_size = 10",
        ] {
            let sc = scenario(extra);
            let planned = plan(&sc);
            let run = crate::run_policy(&sc, "round_robin", &mut |_| {});
            assert_eq!(planned.len() as u64, run.summary.arrivals, "{extra}");
            let ended = |name: &str| run.summary.ended.get(name).copied().unwrap_or(0);
            let count = |e: PlannedEnd| planned.iter().filter(|p| p.end == e).count() as u64;
            // Nothing dies here, so every end is the plan's own.
            assert_eq!(count(PlannedEnd::Cancelled), ended("cancelled"));
            assert_eq!(count(PlannedEnd::Disconnected), ended("disconnected"));
            assert_eq!(count(PlannedEnd::Completed), ended("completed"));
        }
    }

    #[test]
    fn phases_alternate_inside_the_session() {
        let sc = scenario("");
        let planned = plan(&sc);
        let mut speaking = 0.0;
        let mut total = 0.0;
        for p in &planned {
            let mut last_end = 0.0;
            for &(from, len) in &p.speaking {
                assert!(from >= last_end && len > 0.0 && from + len <= p.length_s + 1e-9);
                last_end = from + len;
                speaking += len;
            }
            total += p.length_s;
        }
        // Idle 5 s, speaking 2 s on average: about 2 ÷ 7 of the time speaking (the first
        // idle phase and the cut at the end pull it down a little).
        let share = speaking / total;
        assert!((0.18..0.32).contains(&share), "speaking share {share}");
    }
}
