//! One testbed run: a fresh fleet, one balancer in front (as many independent instances of
//! it as the scenario has proxies), the workload replayed through it, the backends watched
//! throughout, and their counts checked at the end.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use livecount_sim::Scenario;
use livecount_sim::workload::{self, PlannedSession};
use serde::Serialize;
use tokio::time::Instant;

use crate::balancer::{self, Balancer, Tools};
use crate::fleet::Fleet;
use crate::measure::{Measured, measure};
use crate::replay::{End, Outcome, replay};
use crate::scaling::{AgentShape, Scaling};
use crate::timeline::{self, Sample};

/// How long every backend has, after the last session ended, to read active 0 and
/// started = ended.
const SETTLE: Duration = Duration::from_secs(15);

/// What a run needs besides the scenario.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `livecount-agent` binary.
    pub agent: PathBuf,
    /// Envoy and HAProxy.
    pub tools: Tools,
    /// Real cores per scenario core.
    pub core_scale: f64,
    /// Scratch directory for configs and logs.
    pub scratch: PathBuf,
}

/// One balancer's run on one seed.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The balancer.
    pub balancer: String,
    /// The workload's seed.
    pub seed: u64,
    /// The metrics.
    pub measured: Measured,
    /// The fleet's idle utilisation before the run (each backend's, then the mean).
    pub idle_utilisation: f64,
    /// CPU per second of speech the agents burned, in scenario cores (the scenario's
    /// `speaking_cost` is what it should be).
    pub speaking_cost_measured: f64,
    /// The polls (for the timelines).
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Every session's outcome that was not as planned, with why (at most 20).
    pub unplanned: Vec<String>,
    /// The balancer's rendered configuration.
    #[serde(skip)]
    pub config: String,
    /// The cgroup hierarchy the backends' CPU quotas were in.
    pub cgroup: crate::cgroup::Flavour,
}

/// Runs `scenario` (its own seed) through `balancer` on a fresh fleet.
pub async fn run(
    scenario: &Scenario,
    balancer: Balancer,
    setup: &Setup,
) -> Result<RunResult, String> {
    let (scaling, shapes) = Scaling::new(scenario, setup.core_scale)?;
    let plan = workload::plan(scenario);
    let dir = setup.scratch.join(format!(
        "{}-{}-{}",
        scenario.name,
        balancer.name(),
        scenario.seed
    ));
    let mut fleet = Fleet::start(&setup.agent, &shapes, &scaling, &dir).await?;
    let cgroup = fleet.cgroup_flavour();
    let idle = idle_utilisation(&fleet).await;
    // Independent instances over the same fleet, each counting only its own streams.
    let mut lbs = Vec::new();
    for instance in 0..scenario.balancer.proxies {
        lbs.push(balancer::start(balancer, instance, &fleet, &setup.tools).await?);
    }
    let fronts: Vec<SocketAddr> = lbs
        .iter()
        .map(|lb| SocketAddr::from(([127, 0, 0, 1], lb.front)))
        .collect();
    let addrs: Vec<String> = fleet.backends.iter().map(|b| b.http_addr()).collect();
    let zero = Instant::now() + Duration::from_millis(500);
    let (samples, poller) = timeline::record(addrs, zero);
    let cpu_before = fleet.cpu_seconds();
    tokio::time::sleep_until(zero).await;
    let (outcomes, reloaded) = tokio::join!(
        replay(&fronts, &scenario.balancer, &plan, &scaling),
        reload(&mut lbs, &scenario.balancer.reloads, zero, &setup.tools),
    );
    reloaded?;
    let wall = zero.elapsed().as_secs_f64();
    let cpu_after = fleet.cpu_seconds();
    let running = lbs
        .iter_mut()
        .try_for_each(|lb| lb.running())
        .and(fleet.all_running());
    let final_counts = settle(&fleet).await;
    poller.abort();
    running?;
    // The instances differ only in their ports: the first one's stands for all.
    let config = std::mem::take(&mut lbs[0].config);
    drop(lbs);
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cpu: f64 = cpu_after.iter().zip(&cpu_before).map(|(a, b)| a - b).sum();
    let sizes: Vec<f64> = shapes.iter().map(|s| s.size).collect();
    let measured = measure(
        &outcomes,
        &samples,
        &sizes,
        scaling.target,
        scenario.duration_s,
        final_counts,
        cpu / wall,
    );
    Ok(RunResult {
        balancer: balancer.name().to_owned(),
        seed: scenario.seed,
        idle_utilisation: idle,
        speaking_cost_measured: speaking_cost(cpu, idle, &shapes, &plan, &outcomes, wall, &scaling),
        unplanned: unplanned(&outcomes),
        measured,
        samples,
        config,
        cgroup,
    })
}

/// Reloads the instances `reloads` names at their instants (seconds from `zero`), in order.
async fn reload(
    lbs: &mut [balancer::Running],
    reloads: &[livecount_sim::Reload],
    zero: Instant,
    tools: &Tools,
) -> Result<(), String> {
    let mut order: Vec<&livecount_sim::Reload> = reloads.iter().collect();
    order.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    for r in order {
        tokio::time::sleep_until(zero + Duration::from_secs_f64(r.at_s)).await;
        let lb = lbs
            .get_mut(r.proxy as usize)
            .ok_or_else(|| format!("a reload of proxy {}: no such instance", r.proxy))?;
        lb.reload(tools)
            .await
            .map_err(|e| format!("reloading instance {} at {} s: {e}", r.proxy, r.at_s))?;
    }
    Ok(())
}

/// The mean utilisation the fleet reports with nothing open, over 3 s.
async fn idle_utilisation(fleet: &Fleet) -> f64 {
    tokio::time::sleep(Duration::from_secs(3)).await;
    let loads = fleet.loads().await;
    let u: Vec<f64> = loads.iter().flatten().map(|r| r.raw_utilisation).collect();
    u.iter().sum::<f64>() / u.len().max(1) as f64
}

/// Waits up to [`SETTLE`] for every backend to read active 0 and started = ended; returns
/// each one's last (active, started, ended).
async fn settle(fleet: &Fleet) -> Vec<(u64, u64, u64)> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let counts: Vec<(u64, u64, u64)> = fleet
            .loads()
            .await
            .iter()
            .map(|r| {
                r.as_ref()
                    .map_or((u64::MAX, 0, 0), |r| (r.active, r.started, r.ended))
            })
            .collect();
        let done = counts.iter().all(|&(a, s, e)| a == 0 && s == e);
        if done || Instant::now() >= deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// CPU per second of speech, in scenario cores: (CPU − the idle share) ÷ the seconds of
/// speech the opened sessions asked for, ÷ the core scale.
fn speaking_cost(
    cpu: f64,
    idle: f64,
    shapes: &[AgentShape],
    plan: &[PlannedSession],
    outcomes: &[Outcome],
    wall: f64,
    scaling: &Scaling,
) -> f64 {
    let idle_cpu: f64 = shapes.iter().map(|s| s.cores * idle * wall).sum();
    let speech: f64 = plan
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| !matches!(o.end, End::Refused(_)))
        .map(|(p, _)| {
            let phases: f64 = if p.short {
                0.0
            } else {
                p.speaking.iter().map(|s| s.1).sum()
            };
            // The greeting's chunk, and each phase's whole chunks.
            scaling.chunk_period_s() + phases
        })
        .sum();
    if speech <= 0.0 {
        return 0.0;
    }
    (cpu - idle_cpu).max(0.0) / speech / scaling.core_scale
}

/// The first 20 sessions that did not end as planned, and why.
fn unplanned(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| !matches!(o.end, End::Planned(_)))
        .take(20)
        .map(|o| format!("at {:.1} s: {:?}", o.at_s, o.end))
        .collect()
}

/// `livecount-agent` next to this executable, or one directory up (tests run from
/// `deps/`).
pub fn find_agent() -> Option<PathBuf> {
    beside_exe("livecount-agent")
}

/// The binary `name` next to this executable, or one directory up (tests run from
/// `deps/`).
pub fn beside_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir, dir.parent().unwrap_or(dir)]
        .iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
}

/// The workspace root (where `.tools/` lives).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
