//! The simulator checked against real balancers: `lbtestbed` replays an `lbsim` scenario
//! through real `livecount-agent` processes behind Envoy and HAProxy, measures what
//! happened the way `lbsim` measures its runs, and sets the two side by side.
//!
//! # What is real
//!
//! * **Backends**: one `livecount-agent` per simulated backend, each in a cgroup (v2
//!   `cpu.max` or v1 CFS quota, see [`cgroup`]) whose quota is its size × `--core-scale`
//!   cores, so its utilisation (`getrusage`), its capacity and its latency under load are
//!   the machine's, not a model's. A speaking session's chunks burn CPU time
//!   (`livecount_server::conversation::burn`), so a throttled backend streams late instead
//!   of working less.
//! * **Balancers**: Envoy (`LEAST_REQUEST`; client-side WRR on out-of-band ORCA) and
//!   HAProxy (`roundrobin`, `leastconn`, `leastconn` + agent-check) from
//!   `scripts/lb_tools.sh`, configured from `deploy/` and `crates/testbed/configs/`.
//! * **Clients**: one gRPC `Converse` call per planned session, on its own connection,
//!   following [`livecount_sim::workload::plan`] — the simulator's own arrivals, lengths,
//!   speaking phases, cancellations and disconnects.
//!
//! # What is measured
//!
//! From the replayer's timestamps and every backend's `/load` polled every 250 ms:
//! overloaded assignments (a session started on a backend whose utilisation at the poll
//! before was above target), time above target, spread CV, startup and first-stream
//! percentiles, refused and dropped sessions, and at the end every backend's active = 0
//! and started = ended. [`compare`] sets them beside `lbsim`'s for the policy that models
//! each balancer and checks the ranking.
//!
//! # Running it
//!
//! ```text
//! scripts/lb_tools.sh                       # Envoy, HAProxy
//! cargo build --release -p livecount-server -p livecount-testbed
//! target/release/lbtestbed crates/sim/scenarios/testbed/heterogeneous.toml --repeats 3
//! ```
//!
//! It needs the cpu controller of cgroup v2 or v1 where it may make groups (root, or a
//! delegated v2 subtree such as `systemd-run --user --scope -p Delegate=yes` gives) and
//! says what is missing otherwise; `LIVECOUNT_TESTBED_CGROUP` names the group to use.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod balancer;
pub mod cgroup;
pub mod compare;
pub mod fleet;
pub mod measure;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run;
pub mod scaling;
pub mod timeline;
