//! The entry points: a scenario through policies ([`run`]), one policy ([`run_policy`]),
//! one policy with one autoscaler variant ([`run_variant`]).

use std::time::Instant;

use super::Engine;
use crate::autoscaler::Variant;
use crate::scenario::Scenario;
use crate::sim_result::{PolicyResult, ScenarioResult};

/// Runs `scenario` through each policy in `policies` (names from [`policy::NAMES`](crate::policy::NAMES)).
///
/// With an `[autoscaler]`, each policy runs once per [`Variant`] the scenario compares
/// ([`Autoscaler::variants`](crate::Autoscaler::variants)), each result labelled
/// `signal/scale_in` (prefixed `policy:` when several policies run).
///
/// `progress(run_index, fraction_of_arrival_horizon)` is called now and then.
///
/// ```
/// use livecount_sim::{Scenario, run};
///
/// let scenario = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 60\n[arrivals]\nrate_per_s = 2\n\
///      [sessions]\nduration = 'exponential'\nmean_s = 20\n[[backends]]\ncount = 3",
///     "inline.toml",
/// )?;
/// let result = run(&scenario, &["random".into(), "p2c_sessions".into()], &mut |_, _| {});
/// let s = &result.policies[1].summary;
/// assert_eq!(s.arrivals, s.assigned + s.rejected + s.dropped);
/// assert_eq!(s.ended.values().sum::<u64>(), s.assigned);
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
///
/// # Panics
///
/// On an unknown policy name (validate names with [`policy::by_name`](crate::policy::by_name) first).
pub fn run(
    scenario: &Scenario,
    policies: &[String],
    progress: &mut dyn FnMut(usize, f64),
) -> ScenarioResult {
    let variants: Vec<Option<Variant>> = match &scenario.autoscaler {
        Some(a) => a.variants().into_iter().map(Some).collect(),
        None => vec![None],
    };
    let runs: Vec<(&String, Option<Variant>)> = policies
        .iter()
        .flat_map(|name| variants.iter().map(move |v| (name, *v)))
        .collect();
    let results = runs
        .into_iter()
        .enumerate()
        .map(|(i, (name, variant))| {
            let mut r = run_variant(scenario, name, variant, &mut |f| progress(i, f));
            if variant.is_some() && policies.len() > 1 {
                r.policy = format!("{name}:{}", r.policy);
            }
            r
        })
        .collect();
    ScenarioResult {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        backends: scenario.backend_count(),
        duration_s: scenario.duration_s,
        target_utilisation: scenario.capacity.target,
        policies: results,
        across_seeds: None,
    }
}

/// Runs `scenario` through the policy called `name` (one copy per proxy); with an
/// `[autoscaler]`, its first [`Variant`] (see [`run_variant`]).
///
/// # Panics
///
/// On an unknown policy name.
pub fn run_policy(scenario: &Scenario, name: &str, progress: &mut dyn FnMut(f64)) -> PolicyResult {
    run_variant(scenario, name, default_variant(scenario), progress)
}

/// The variant an autoscaled scenario runs by default: its first.
pub(super) fn default_variant(scenario: &Scenario) -> Option<Variant> {
    scenario
        .autoscaler
        .as_ref()
        .and_then(|a| a.variants().first().copied())
}

/// Runs `scenario` through the policy called `name` with the autoscaler `variant` (which
/// needs the scenario's `[autoscaler]`; `None`: a fixed fleet). The result is labelled
/// with the variant (`signal/scale_in`) when there is one, else with the policy.
///
/// ```
/// use livecount_sim::{ScaleIn, Scenario, Signal, Variant, run_variant};
///
/// let s = Scenario::from_toml_str(
///     "description = 'x'\nduration_s = 300\n[arrivals]\ntarget_concurrent = 200\n\
///      [sessions]\nduration = 'exponential'\nmean_s = 60\n[[backends]]\ncount = 10\n\
///      [autoscaler]\nmin_replicas = 1\nmax_replicas = 8\nstartup_s = 20\n\
///      sessions_target = 50\ncpu_target = 0.6\ncapacity_target = 0.7\ndrain_deadline_s = 60",
///     "inline.toml",
/// )?;
/// let v = Variant { signal: Signal::Sessions, scale_in: ScaleIn::Drain };
/// let r = run_variant(&s, "p2c_sessions", Some(v), &mut |_| {});
/// assert_eq!(r.policy, "sessions/drain");
/// let a = r.summary.autoscale.unwrap();
/// assert!(a.peak_backends > 1, "it scaled up from one backend");
/// assert_eq!(a.cut, r.summary.ended["shutdown"]);
/// # Ok::<(), livecount_sim::ScenarioError>(())
/// ```
///
/// # Panics
///
/// On an unknown policy name, or a variant for a scenario without an autoscaler.
pub fn run_variant(
    scenario: &Scenario,
    name: &str,
    variant: Option<Variant>,
    progress: &mut dyn FnMut(f64),
) -> PolicyResult {
    let started = Instant::now();
    let mut engine = Engine::with_variant(scenario, name, variant);
    engine.run(progress);
    let name = match variant {
        Some(v) => v.label(),
        None => engine.proxies[0].policy.name().to_owned(),
    };
    let events = engine.events;
    let (summary, spread, startup_cdf, first_stream_cdf) = engine.finish();
    PolicyResult {
        policy: name,
        summary,
        spread,
        startup_cdf,
        first_stream_cdf,
        events,
        wall_s: started.elapsed().as_secs_f64(),
    }
}
