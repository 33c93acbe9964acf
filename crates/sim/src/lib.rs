//! A deterministic, seeded discrete-event simulator of one load balancer in front of a
//! fleet of backends serving long-lived sessions, for comparing routing policies.
//!
//! # Usage
//!
//! Describe a workload and a fleet in a TOML [`Scenario`] (see `crates/sim/scenarios/`),
//! then [`run`] it through some [`policy`]s; the CLI `lbsim run SCENARIO` does this and
//! writes JSON, a markdown report and SVG plots with [`report`].
//!
//! ```
//! use livecount_sim::{Scenario, run};
//!
//! let scenario = Scenario::from_toml_str(r#"
//!     description = "ten backends, sessions of about a minute"
//!     duration_s = 120
//!     [arrivals]
//!     target_concurrent = 200
//!     [sessions]
//!     duration = "lognormal"
//!     mean_s = 60
//!     [[backends]]
//!     count = 10
//! "#, "inline.toml")?;
//! let result = run(&scenario, &["round_robin".into(), "hybrid_p2c".into()], &mut |_, _| {});
//! for p in &result.policies {
//!     println!("{}: mean CV of sessions {:.3}", p.policy, p.summary.spread_cv_mean);
//! }
//! # Ok::<(), livecount_sim::ScenarioError>(())
//! ```
//!
//! # The model
//!
//! * **Workload**: Poisson arrivals whose rate may follow bursts, a diurnal sine or a flash
//!   crowd; long sessions (fixed, exponential, log-normal or Pareto lengths, capped by the
//!   server's maximum) mixed with a share of short request-like ones; listening ↔ speaking
//!   phases with different CPU costs; client cancellations and forced disconnects; waves
//!   in which every open session speaks at once.
//! * **Backends**: sizes, a hard session limit (rejects past it), a CPU curve that bends up
//!   near saturation, startup latency and time-to-first-stream that grow as 1 ÷ (1 − u)
//!   (M/M/1), deaths that count every session out, stale or lost or delayed reports, and
//!   rolling restarts ([`RollingRestart`]) that cut every open session or drain them up
//!   to a deadline; a cut client reconnects through the balancer with the rest of its
//!   session.
//!   Sessions may differ in their work (a log-normal cost factor), and backends may be slow
//!   in a way their CPU does not show.
//! * **Autoscaling** (optional, [`autoscaler`]): an HPA v2-like controller resizes the
//!   fleet from a pool on average CPU, active sessions per backend or the hybrid model's
//!   share of effective capacity, with the HPA's tolerance, stabilization windows and rate
//!   policies and a startup delay; a scale-in cuts a random backend, cuts the emptiest, or
//!   drains the emptiest to a deadline; every (signal, scale-in) pair is a row of the
//!   report ([`Variant`], [`run_variant`]).
//! * **The balancer** — one proxy or several independent ones — sees only reports, its own
//!   sends and open streams ([`policy::BackendView`]), the time to first stream of its own
//!   sessions, and Prequal probe replies (requests in flight and the latency at them, by
//!   the product's estimator, `livecount_capacity::PrequalLatency`, after a round trip,
//!   maybe lost); a health check notices deaths and revivals after a delay.
//! * **Evidence**: `lbsim run` repeats a scenario over 20 seeds and reports every metric's
//!   mean and 95 % interval ([`report::combine`]); a policy wins only where its interval
//!   clears every other's ([`report::verdict`]).
//!
//! Each session draws its plan from its own random stream keyed by (seed, arrival number),
//! so every policy replays exactly the same workload; policies get their own stream.
//!
//! # Correctness
//!
//! `tests/` check that a seed reproduces a run bit for bit, that every arrival (and every
//! reconnect after a restart's or a scale-in's cut) is assigned, rejected or dropped exactly
//! once and every assigned session ends exactly once, and each metric against a
//! hand-computed tiny scenario. The HPA's arithmetic is checked on hand-computed cases
//! (`autoscaler/hpa_tests.rs`), and the drained scale-in never cuts a session before its
//! deadline over many seeded runs (`engine/autoscale_tests.rs`).

#![warn(missing_docs)]
// One `unsafe` block in the crate: the prefetch hint in `engine/fetch_ahead.rs`.
#![deny(unsafe_code)]

mod arrivals;
pub mod autoscaler;
mod backend;
mod engine;
mod event_queue;
mod metrics;
pub mod policy;
pub mod report;
mod scenario;
mod scenario_error;
mod session_plan;
mod sim_result;
mod sim_rng;
mod validate;
pub mod workload;

pub use autoscaler::{Autoscaler, ScaleIn, Signal, Variant};
pub use engine::{run, run_policy, run_variant};
pub use scenario::{
    Arrivals, BackendGroup, Balancer, Capacity, CounterKind, Cpu, DurationDist, Failure, Latency,
    Pattern, Reload, Reports, RestartMode, RollingRestart, Scenario, Sessions, Stale, Wave,
};
pub use scenario_error::ScenarioError;
pub use sim_result::{
    AcrossSeeds, AutoscaleSummary, CdfPoint, CounterAccuracy, MetricStats, Percentiles,
    PolicyResult, PolicyStats, RestartSummary, ScenarioResult, SpreadSample, Summary,
};
pub use sim_rng::SimRng;
