//! An autoscaler that behaves like the Kubernetes HPA v2 controller, for fleets that grow
//! and shrink on their sessions.
//!
//! The arithmetic follows the HPA documentation,
//! <https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/>: its
//! *Algorithm details* (desired = ceil(current × metric ÷ target); no change while the
//! ratio is within the tolerance, 0.1 by default; pods missing a metric counted at the
//! target on a scale-down and at 0 on a scale-up; pods not yet ready counted at 0 on a
//! scale-up; no change if that reverses the direction) and its *Configurable scaling
//! behavior* (stabilization windows — scale-up 0 s, scale-down 300 s by default, the
//! lowest recommendation of the scale-up window and the highest of the scale-down window
//! bound the change; rate policies — scale-down 100 % per 15 s, scale-up the larger of
//! 100 % and 4 pods per 15 s, `selectPolicy: Max`, counted from the replicas at the start
//! of each policy's period). The controller syncs every 15 s
//! (`--horizontal-pod-autoscaler-sync-period`). Where the docs leave a detail open (how a
//! percent rounds, which timestamps fall inside a window), [`Hpa`] does what the
//! controller's source (`pkg/controller/podautoscaler/horizontal.go` and
//! `replica_calculator.go`) does: a scale-up percent rounds up, a scale-down percent
//! truncates, and a window `(now − w, now]` excludes its left end.
//!
//! The arithmetic is pure ([`Hpa`], [`replicas_for_pods`], [`replicas_for_value`]) and
//! tested on hand-computed cases; the engine feeds it (`engine/autoscale.rs`):
//!
//! * **signals** ([`Signal`]) from each backend's last load report, as a Prometheus scrape
//!   of `/metrics` would see it: utilisation (`cpu`), active sessions (`sessions`), and the
//!   fleet's Σ active ÷ Σ effective capacity (`capacity`), each backend's effective
//!   capacity by the hybrid model as the agent exports it
//!   (`livecount_capacity::BackendModel`, capped at the backend's session limit);
//! * **replicas**: a scale-up starts backends from the scenario's pool, ready
//!   `startup_s` later (and seen by the balancer after its health check); a scale-in
//!   ([`ScaleIn`]) first cancels backends still starting (the ReplicaSet deletes pods not
//!   yet ready first), then removes a ready one: at random or the emptiest, cut at once, or
//!   the emptiest drained up to a deadline.
//!
//! # What is not modelled
//!
//! Metric pipelines' own lags beyond the report interval (metrics-server's window,
//! prometheus-adapter's query), the scheduler finding no node, and the pod-deletion-cost
//! annotation lagging the true session count (the CronJob in `docs/autoscaling.md`
//! updates it every minute; here it is exact).

mod config;
mod hpa;

pub use config::{
    Autoscaler, PolicyKind, ScaleIn, ScalingPolicy, ScalingRules, ScalingRulesConfig, SelectPolicy,
    Signal, Variant,
};
pub use hpa::{Hpa, PodMetric, replicas_for_pods, replicas_for_value};
