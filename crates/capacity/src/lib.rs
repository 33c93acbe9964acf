//! Hybrid capacity model for session-aware routing: effective capacity, headroom and a
//! routing weight from a backend's active sessions and its utilisation.
//!
//! Pure and I/O-free: time is passed in, nothing sleeps or reads a clock. The model is the
//! unit-consistent reading of the hybrid model in "Scaling real-time AI agents with
//! session-aware load balancing" (Google Developers Blog, 2026-08-03), whose formula was an
//! image (n active sessions, utilisation u measured over the window w, target
//! utilisation t, safety scaler k ≥ 1, reporting interval r):
//!
//! ```text
//! pretend_qps             = n / w
//! cost_per_session        = u / pretend_qps
//! additional_session_rate = max(0, t - u) / cost_per_session / k
//! effective_capacity      = n + additional_session_rate * r
//! headroom                = effective_capacity - n
//! ```
//!
//! # Usage
//!
//! Build a [`CapacityConfig`] (validated: a bad value is a [`ConfigError`] naming the field
//! and its range), then either call [`Estimate::compute`] on one report, or keep a
//! [`BackendModel`] per backend, feed it reports and ask it for an [`Estimate`] at a time.
//!
//! # Example
//!
//! The article's cases, with t = 0.80, k = 2, w = r = 10 s:
//!
//! ```
//! use std::time::Duration;
//! use livecount_capacity::{CapacityConfig, Estimate};
//!
//! let ten = Duration::from_secs(10);
//! let config = CapacityConfig::new(0.80, 2.0, ten, ten)?;
//!
//! // Above target: no new sessions, capacity stays at 10.
//! assert_eq!(Estimate::compute(&config, 10, 0.90, None).effective_capacity, 10.0);
//!
//! // Half loaded: 80 + (0.8 - 0.4) / 0.05 / 2 * 10 = 120, not the naive 160 (that is k = 1).
//! let e = Estimate::compute(&config, 80, 0.40, None);
//! assert!((e.effective_capacity - 120.0).abs() < 1e-9);
//! # Ok::<(), livecount_capacity::ConfigError>(())
//! ```
//!
//! A balancer placing a session compares two backends' [`Standing`]s (power of two
//! choices on the share of the model's capacity in use, [`Standing::prefer`]): the
//! simulator's `hybrid_p2c` and livecount's endpoint picker both choose with it.
//!
//! Next to the model, the selection behind a Prequal probe's latency:
//! [`PrequalLatency::estimate`], the median latency of the fresh samples taken at about a
//! given requests-in-flight. `livecount-report`'s `PrequalEstimator` and the simulator's
//! backends both answer probes with it.
//!
//! # Rules for awkward inputs
//!
//! * Utilisation is clamped into [0, 1]; NaN reads as saturated (1.0): a garbled report
//!   offers no capacity. See [`sanitize_utilisation`].
//! * With n = 0 or u below [`MIN_MEASURABLE_UTILISATION`] the backend's cost is undefined:
//!   the caller's prior (the fleet's mean cost, as gRPC's weighted_round_robin gives
//!   unweighted endpoints the mean weight) is used, else [`DEFAULT_PRIOR_COST`]. Never an
//!   infinite capacity; headroom is capped at [`MAX_HEADROOM`].
//! * Every output is finite and ≥ 0 for every input.
//!
//! # Monotonicity, and what it applies to
//!
//! Effective capacity, headroom and weight are non-increasing in utilisation (for u ≥
//! [`MIN_MEASURABLE_UTILISATION`]; below it the prior takes over, which is a separate
//! regime) and in the safety scaler. In active sessions they are non-increasing **at fixed
//! cost per session** (u = cost · n / w, so more sessions means more load). At fixed
//! *utilisation* they *grow* with n: the same load spread over more sessions means each
//! session is cheaper. `tests/properties.rs` checks both, the latter as documented
//! behaviour.
//!
//! # Correctness
//!
//! Unit tests reproduce the article's numbers; proptest properties in
//! `tests/properties.rs` check non-negative finite outputs for any input, the monotonicity
//! above, that a larger safety scaler never admits more, that stale reports never raise
//! capacity, and that bad configuration is rejected.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod backend_model;
mod capacity_config;
mod config_error;
mod estimate;
mod prequal_latency;
mod standing;

pub use backend_model::BackendModel;
pub use capacity_config::{
    CapacityConfig, CapacityConfigBuilder, DEFAULT_COST_ALPHA, DEFAULT_PRIOR_COST,
};
pub use config_error::ConfigError;
pub use estimate::{
    Estimate, Freshness, MAX_HEADROOM, MIN_MEASURABLE_UTILISATION, additional_session_rate,
    cost_per_session, pretend_qps, sanitize_utilisation,
};
pub use prequal_latency::{PrequalLatency, PrequalSample};
pub use standing::Standing;
