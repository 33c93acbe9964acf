//! The balancers under test: which real balancer, its configuration for a fleet, how it is
//! started and stopped, and the simulator policy that models it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use livecount_server::ports::free_port;

use crate::fleet::Fleet;

/// Envoy with client-side weighted round robin fed by out-of-band ORCA reports.
const ENVOY_ORCA: &str = include_str!("../../../deploy/envoy/envoy.yaml.in");
/// Envoy with least request.
const ENVOY_LEAST_REQUEST: &str = include_str!("../../../deploy/envoy/envoy-least-request.yaml.in");
/// HAProxy over HTTP/2 (gRPC).
const HAPROXY: &str = include_str!("../configs/haproxy-grpc.cfg.in");

/// The most instances of one balancer a run starts (Envoy base ids are reserved per
/// balancer for this many).
pub const MAX_INSTANCES: u32 = 16;

/// A balancer the testbed can put in front of the agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Balancer {
    /// Envoy `LEAST_REQUEST` (two choices, `active_request_bias` 1): its own open streams.
    EnvoyLeastRequest,
    /// Envoy client-side weighted round robin on out-of-band ORCA (the hybrid headroom).
    EnvoyOrcaWrr,
    /// HAProxy `roundrobin`: the floor.
    HaproxyRoundRobin,
    /// HAProxy `leastconn`: its own in-flight streams.
    HaproxyLeastconn,
    /// HAProxy `leastconn` weighted by agent-check (the hybrid headroom as a percentage).
    HaproxyAgentCheck,
}

impl Balancer {
    /// Every balancer, in the order tables list them.
    pub const ALL: [Balancer; 5] = [
        Balancer::HaproxyRoundRobin,
        Balancer::HaproxyLeastconn,
        Balancer::HaproxyAgentCheck,
        Balancer::EnvoyLeastRequest,
        Balancer::EnvoyOrcaWrr,
    ];

    /// Its name in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Balancer::EnvoyLeastRequest => "envoy_least_request",
            Balancer::EnvoyOrcaWrr => "envoy_orca_wrr",
            Balancer::HaproxyRoundRobin => "haproxy_roundrobin",
            Balancer::HaproxyLeastconn => "haproxy_leastconn",
            Balancer::HaproxyAgentCheck => "haproxy_agent_check",
        }
    }

    /// The `lbsim` policy that models it, and how closely.
    pub fn sim_policy(self) -> (&'static str, &'static str) {
        match self {
            Balancer::EnvoyLeastRequest => (
                "least_request_bias",
                "the same algorithm: P2C on this proxy's open streams, bias 1, equal weights",
            ),
            Balancer::EnvoyOrcaWrr => (
                "hybrid_weighted",
                "weights ∝ the hybrid model's headroom, weighted-random; Envoy's CSWRR runs an \
                 EDF schedule over the agents' ORCA weights (1000 × headroom-like, \
                 crates/report/src/orca.rs), rebuilt each second",
            ),
            Balancer::HaproxyRoundRobin => ("round_robin", "the same algorithm"),
            Balancer::HaproxyLeastconn => (
                "least_request_bias",
                "HAProxy takes the global minimum of in-flight streams; the model takes the \
                 smaller of two random hosts' (the closest policy the simulator has)",
            ),
            Balancer::HaproxyAgentCheck => (
                "hybrid_p2c",
                "HAProxy: least in-flight ÷ agent weight (headroom %); the model: the smaller \
                 share of effective capacity of two random hosts",
            ),
        }
    }

    fn is_envoy(self) -> bool {
        matches!(self, Balancer::EnvoyLeastRequest | Balancer::EnvoyOrcaWrr)
    }
}

/// A running balancer; dropping it kills its processes (by PID).
#[derive(Debug)]
pub struct Running {
    /// Where sessions connect.
    pub front: u16,
    /// The rendered configuration.
    pub config: String,
    balancer: Balancer,
    /// The configuration file, the Envoy base id and the restart epoch (its reloads).
    file: PathBuf,
    base_id: u32,
    epoch: u32,
    child: Child,
    /// Processes a reload replaced, still serving the streams they carried.
    retired: Vec<Child>,
    log: PathBuf,
}

impl Running {
    /// Its log so far (for errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails if the process has exited.
    pub fn running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("the balancer exited: {status}\n{}", self.log())),
            _ => Ok(()),
        }
    }

    /// Reloads it as its operators would, with the same configuration: HAProxy's `-sf` (a
    /// new process takes the port, the old one finishes the streams it carries) or Envoy's
    /// hot restart (the next `--restart-epoch` takes the listener over; the old process
    /// drains and serves its streams to their end). The new process counts from zero and
    /// learns the backends' state afresh. Fails if the new process exits within a second.
    pub async fn reload(&mut self, tools: &Tools) -> Result<(), String> {
        self.epoch += 1;
        let log = self.log.with_extension(format!("epoch{}.log", self.epoch));
        let child = spawn(
            self.balancer,
            tools,
            &self.file,
            self.base_id,
            self.epoch,
            Some(self.child.id()),
            &log,
        )?;
        let old = std::mem::replace(&mut self.child, child);
        self.retired.push(old);
        self.log = log;
        // The new process binds the port beside the old one (SO_REUSEPORT, or Envoy's
        // listener handed over), so a connection does not tell which one answered: the
        // new one has a second to settle, as an operator's reload gets none at all.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.running()?;
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for child in self
            .retired
            .iter_mut()
            .chain(std::iter::once(&mut self.child))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The tools the balancers need: `envoy` from `scripts/lb_tools.sh`'s venv, `haproxy`.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The Envoy binary.
    pub envoy: PathBuf,
    /// The HAProxy binary.
    pub haproxy: PathBuf,
}

impl Tools {
    /// The tools installed by `scripts/lb_tools.sh` under `workspace`.
    pub fn find(workspace: &Path) -> Tools {
        let haproxy = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("haproxy"));
        Tools {
            envoy: workspace.join(".tools/venv/bin/envoy"),
            haproxy,
        }
    }
}

/// Renders `balancer`'s configuration for `fleet` and starts instance `instance` of it (one
/// of several independent proxies over the same fleet: its own process, port and counts);
/// waits (up to 10 s) until its front port accepts connections and every backend is in
/// rotation for 2 s (Envoy's health checks and HAProxy's checks run every 0.5 s).
pub async fn start(
    balancer: Balancer,
    instance: u32,
    fleet: &Fleet,
    tools: &Tools,
) -> Result<Running, String> {
    let front = free_port();
    let name = format!("{}-{instance}", balancer.name());
    let log = fleet.dir.join(format!("{name}.log"));
    let config = render(balancer, fleet, front);
    let file = fleet.dir.join(if balancer.is_envoy() {
        format!("{name}.yaml")
    } else {
        format!("{name}.cfg")
    });
    std::fs::write(&file, &config).map_err(|e| format!("{}: {e}", file.display()))?;
    // A base id of our own: shared-memory names never meet another Envoy's (this
    // process's, another balancer's or another instance's).
    let base_id = std::process::id() % 10_000 * 256
        + balancer as u32 * MAX_INSTANCES
        + instance % MAX_INSTANCES;
    let child = spawn(balancer, tools, &file, base_id, 0, None, &log)?;
    let mut running = Running {
        front,
        config,
        balancer,
        file,
        base_id,
        epoch: 0,
        child,
        retired: Vec::new(),
        log,
    };
    for _ in 0..100 {
        running.running()?;
        if tokio::net::TcpStream::connect(("127.0.0.1", front))
            .await
            .is_ok()
        {
            // The checks mark every backend up after one or two rounds of 0.5 s.
            tokio::time::sleep(Duration::from_secs(2)).await;
            running.running()?;
            return Ok(running);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "{} did not listen within 10 s\n{}",
        balancer.name(),
        running.log()
    ))
}

/// Starts `balancer`'s process on `file`, logging to `log`: restart epoch `epoch` (Envoy),
/// replacing the process `replaces` (a reload).
fn spawn(
    balancer: Balancer,
    tools: &Tools,
    file: &Path,
    base_id: u32,
    epoch: u32,
    replaces: Option<u32>,
    log: &Path,
) -> Result<Child, String> {
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut command = if balancer.is_envoy() {
        if !tools.envoy.exists() {
            return Err(format!(
                "Envoy not found at {}: run scripts/lb_tools.sh",
                tools.envoy.display()
            ));
        }
        let mut c = Command::new(&tools.envoy);
        c.arg("-c")
            .arg(file)
            .args(["--concurrency", "1", "--base-id", &base_id.to_string()])
            .args(["--restart-epoch", &epoch.to_string()])
            // The old process serves its streams to the end of any run.
            .args(["--parent-shutdown-time-s", "3600", "--drain-time-s", "3000"])
            .args(["-l", "warning"]);
        c
    } else {
        let mut c = Command::new(&tools.haproxy);
        c.arg("-db").arg("-f").arg(file);
        if let Some(pid) = replaces {
            c.arg("-sf").arg(pid.to_string());
        }
        c
    };
    command
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| {
            format!(
                "starting {}: {e} (scripts/lb_tools.sh installs it)",
                balancer.name()
            )
        })
}

/// `balancer`'s configuration for `fleet`, listening on `front`.
pub fn render(balancer: Balancer, fleet: &Fleet, front: u16) -> String {
    let template = match balancer {
        Balancer::EnvoyLeastRequest => ENVOY_LEAST_REQUEST,
        Balancer::EnvoyOrcaWrr => ENVOY_ORCA,
        _ => HAPROXY,
    };
    // Every template names its first backend so; the line is repeated for each backend.
    let marker = "@GRPC1@";
    let mut out = String::new();
    for line in template.lines() {
        if is_endpoint_line(line) && !line.contains(marker) {
            continue; // the template's other backends: one line per fleet backend below
        }
        if line.contains(marker) {
            for (i, b) in fleet.backends.iter().enumerate() {
                let mut l = line
                    .replace("@GRPC1@", &b.grpc.to_string())
                    .replace("@AGENT1@", &b.agent_check.to_string())
                    .replace("server b1 ", &format!("server b{} ", i + 1));
                if balancer != Balancer::HaproxyAgentCheck && !balancer.is_envoy() {
                    l = drop_agent_check(&l);
                }
                out.push_str(&l);
                out.push('\n');
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    let balance = match balancer {
        Balancer::HaproxyRoundRobin => "roundrobin",
        _ => "leastconn",
    };
    let out = out
        .replace("@LISTEN@", &front.to_string())
        .replace("@FRONT@", &front.to_string())
        .replace("@ADMIN@", &free_port().to_string())
        .replace("@BALANCE@", balance);
    debug_assert!(!has_placeholder(&out), "a placeholder left in {out}");
    out
}

/// A template line naming a backend other than the first (`@GRPC2@`, `@GRPC3@`, …).
fn is_endpoint_line(line: &str) -> bool {
    line.contains("@GRPC") && !line.trim_start().starts_with('#')
}

/// The server line without its agent-check options.
fn drop_agent_check(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::new();
    let mut skip = 0;
    for w in words {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        match w {
            "agent-check" => {}
            "agent-addr" | "agent-port" | "agent-inter" => skip = 1,
            _ => out.push(w),
        }
    }
    out.join(" ")
}

/// Whether `text` still holds an `@NAME@` placeholder (uppercase letters and digits).
fn has_placeholder(text: &str) -> bool {
    let parts: Vec<&str> = text.split('@').collect();
    parts.len() > 2
        && parts[1..parts.len() - 1].iter().any(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_line_loses_only_its_agent_check() {
        let line = "    server b1 127.0.0.1:5 proto h2 weight 100 agent-check agent-addr 127.0.0.1 \
                    agent-port 6 agent-inter 500ms check inter 500ms fall 2 rise 2";
        assert_eq!(
            drop_agent_check(line),
            "    server b1 127.0.0.1:5 proto h2 weight 100 check inter 500ms fall 2 rise 2"
        );
        assert!(has_placeholder("a @GRPC1@ b"));
        assert!(!has_placeholder("\"@type\": x @ y"));
    }
}
