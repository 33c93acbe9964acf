//! The balancers under test: which real balancer, its configuration for a fleet, how it is
//! started and stopped, and the simulator policy that models it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use livecount_server::ports::free_port;

use crate::fleet::{Backend, Fleet};

/// Envoy with client-side weighted round robin fed by out-of-band ORCA reports.
const ENVOY_ORCA: &str = include_str!("../../../deploy/envoy/envoy.yaml.in");
/// Envoy with least request.
const ENVOY_LEAST_REQUEST: &str = include_str!("../../../deploy/envoy/envoy-least-request.yaml.in");
/// Envoy asking livecount's endpoint picker (ext_proc) for each session.
const ENVOY_PICKER: &str = include_str!("../../../deploy/envoy/envoy-picker.yaml.in");
/// HAProxy over HTTP/2 (gRPC).
const HAPROXY: &str = include_str!("../configs/haproxy-grpc.cfg.in");
/// NGINX over HTTP/2 (gRPC).
const NGINX: &str = include_str!("../configs/nginx-grpc.conf.in");

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
    /// Envoy asking livecount's endpoint picker (`livecount-epp`, ext_proc) for each
    /// session: power of two choices on the hybrid model's capacity, from ORCA reports.
    EnvoyPicker,
    /// HAProxy `roundrobin`: the floor.
    HaproxyRoundRobin,
    /// HAProxy `leastconn`: its own in-flight streams.
    HaproxyLeastconn,
    /// HAProxy `leastconn` weighted by agent-check (the hybrid headroom as a percentage).
    HaproxyAgentCheck,
    /// NGINX `least_conn`: its own open upstream connections (one per stream).
    NginxLeastConn,
    /// NGINX `random two least_conn`: two servers at random, the one with fewer of its
    /// own open connections.
    NginxRandomTwo,
}

impl Balancer {
    /// Every balancer, in the order tables list them.
    pub const ALL: [Balancer; 8] = [
        Balancer::HaproxyRoundRobin,
        Balancer::HaproxyLeastconn,
        Balancer::HaproxyAgentCheck,
        Balancer::NginxLeastConn,
        Balancer::NginxRandomTwo,
        Balancer::EnvoyLeastRequest,
        Balancer::EnvoyOrcaWrr,
        Balancer::EnvoyPicker,
    ];

    /// Its name in tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Balancer::EnvoyLeastRequest => "envoy_least_request",
            Balancer::EnvoyOrcaWrr => "envoy_orca_wrr",
            Balancer::EnvoyPicker => "envoy_picker",
            Balancer::HaproxyRoundRobin => "haproxy_roundrobin",
            Balancer::HaproxyLeastconn => "haproxy_leastconn",
            Balancer::HaproxyAgentCheck => "haproxy_agent_check",
            Balancer::NginxLeastConn => "nginx_least_conn",
            Balancer::NginxRandomTwo => "nginx_random_two",
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
            Balancer::EnvoyPicker => (
                "hybrid_p2c",
                "the same choice (livecount-capacity's Standing::prefer: of two random \
                 backends, the smaller share of the hybrid capacity in use, counting its own \
                 placements since each report); the picker takes each backend's headroom \
                 from its ORCA report, the model computes it from the raw reports, and the \
                 picker passes over a backend at its hard limit",
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
            Balancer::NginxLeastConn => (
                "least_request_bias",
                "NGINX takes the global minimum of its open upstream connections (one per \
                 stream); the model takes the smaller of two random hosts' (the closest \
                 policy the simulator has)",
            ),
            Balancer::NginxRandomTwo => (
                "least_request_bias",
                "the same choice: two random hosts, the one with fewer of this proxy's open \
                 streams, equal weights",
            ),
        }
    }

    fn is_envoy(self) -> bool {
        matches!(
            self,
            Balancer::EnvoyLeastRequest | Balancer::EnvoyOrcaWrr | Balancer::EnvoyPicker
        )
    }

    fn is_nginx(self) -> bool {
        matches!(self, Balancer::NginxLeastConn | Balancer::NginxRandomTwo)
    }

    fn is_haproxy(self) -> bool {
        !self.is_envoy() && !self.is_nginx()
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
    /// The endpoint picker beside it ([`Balancer::EnvoyPicker`]); a reload keeps it.
    picker: Option<Child>,
}

impl Running {
    /// Its log so far (for errors).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails if the process has exited.
    pub fn running(&mut self) -> Result<(), String> {
        if let Some(picker) = &mut self.picker
            && let Ok(Some(status)) = picker.try_wait()
        {
            let log = std::fs::read_to_string(self.log.with_extension("picker.log"));
            return Err(format!(
                "the endpoint picker exited: {status}\n{}",
                log.unwrap_or_default()
            ));
        }
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
        if self.balancer.is_nginx() {
            // `nginx -s reload`, to the master by its PID: it re-reads the configuration
            // and starts new workers, whose upstream counts start from zero; the old
            // workers close their listeners and finish the streams they carry.
            signal(self.child.id(), "HUP")?;
            return self.settle_reload().await;
        }
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
        self.settle_reload().await
    }

    async fn settle_reload(&mut self) -> Result<(), String> {
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
        if self.balancer.is_nginx() {
            stop_nginx(&mut self.child);
            return;
        }
        for child in self
            .retired
            .iter_mut()
            .chain(std::iter::once(&mut self.child))
            .chain(self.picker.as_mut())
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `signal` (a name `kill` takes) to the process `pid`.
fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}

/// Stops an NGINX master and its workers by PID: SIGTERM (NGINX's fast shutdown: the master
/// stops its workers), up to 3 s for it to exit, then SIGKILL to the master and to every
/// worker it had (a master killed outright leaves its workers serving).
fn stop_nginx(master: &mut Child) {
    let pid = master.id();
    let workers =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let _ = signal(pid, "TERM");
    for _ in 0..150 {
        if let Ok(Some(_)) = master.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = master.kill();
    let _ = master.wait();
    for worker in workers.split_whitespace() {
        let _ = Command::new("kill").args(["-KILL", worker]).status();
    }
}

/// The tools the balancers need: `envoy` from `scripts/lb_tools.sh`'s venv, `haproxy`,
/// `nginx`.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The Envoy binary.
    pub envoy: PathBuf,
    /// The HAProxy binary.
    pub haproxy: PathBuf,
    /// The NGINX binary.
    pub nginx: PathBuf,
    /// `livecount-epp`, the endpoint picker (built beside `lbtestbed`).
    pub epp: PathBuf,
}

impl Tools {
    /// The tools installed by `scripts/lb_tools.sh` under `workspace`.
    pub fn find(workspace: &Path) -> Tools {
        let sbin = |name: &str| {
            [
                format!("/usr/sbin/{name}"),
                format!("/usr/local/sbin/{name}"),
            ]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from(name))
        };
        Tools {
            envoy: workspace.join(".tools/venv/bin/envoy"),
            haproxy: sbin("haproxy"),
            nginx: sbin("nginx"),
            epp: crate::run::beside_exe("livecount-epp")
                .unwrap_or_else(|| PathBuf::from("livecount-epp")),
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
    let (picker, picker_port) = if balancer == Balancer::EnvoyPicker {
        let port = free_port();
        let child = spawn_picker(tools, fleet, port, &log.with_extension("picker.log"))?;
        (Some(child), Some(port))
    } else {
        (None, None)
    };
    let config = render(balancer, &fleet.backends, front, picker_port);
    let file = fleet.dir.join(if balancer.is_envoy() {
        format!("{name}.yaml")
    } else if balancer.is_nginx() {
        // NGINX's prefix: its relative paths (temporary files) land under it.
        for sub in ["logs", "tmp"] {
            let dir = fleet.dir.join(&name).join(sub);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        format!("{name}.conf")
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
        picker,
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

/// Starts `livecount-epp` on loopback `port` over `fleet`'s gRPC endpoints (ORCA on each),
/// asking for reports as often as the agents publish them, logging to `log`.
fn spawn_picker(tools: &Tools, fleet: &Fleet, port: u16, log: &Path) -> Result<Child, String> {
    if !tools.epp.exists() {
        return Err(format!(
            "livecount-epp not found at {}: build it (cargo build --release -p livecount-epp)",
            tools.epp.display()
        ));
    }
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut c = Command::new(&tools.epp);
    c.args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--report-secs", &fleet.report_secs.to_string()])
        .args(["--report-ttl-secs", &(4.0 * fleet.report_secs).to_string()]);
    for b in &fleet.backends {
        c.args(["--backend", &format!("127.0.0.1:{}", b.grpc)]);
    }
    c.stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting livecount-epp: {e}"))
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
    } else if balancer.is_nginx() {
        // In the foreground, unprivileged, with a prefix of its own (the file's stem) and
        // its error log on stderr (the run's log).
        let prefix = file.with_extension("");
        let mut c = Command::new(&tools.nginx);
        c.arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(file)
            .args(["-e", "stderr"])
            .arg("-g")
            .arg(format!(
                "daemon off; pid {};",
                prefix.join("logs/nginx.pid").display()
            ));
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

/// `balancer`'s configuration for `backends`, listening on `front`, asking the endpoint
/// picker at `picker` ([`Balancer::EnvoyPicker`]: its one replica serves both of the
/// template's pools; the testbed plays gRPC sessions only).
pub fn render(balancer: Balancer, backends: &[Backend], front: u16, picker: Option<u16>) -> String {
    let template = match balancer {
        Balancer::EnvoyLeastRequest => ENVOY_LEAST_REQUEST,
        Balancer::EnvoyOrcaWrr => ENVOY_ORCA,
        Balancer::EnvoyPicker => ENVOY_PICKER,
        b if b.is_nginx() => NGINX,
        _ => HAPROXY,
    };
    // Every template names its first backend so; the line is repeated for each backend.
    let first = |line: &str| line.contains("@GRPC1@") || line.contains("@HTTP1@");
    let mut out = String::new();
    for line in template.lines() {
        if is_endpoint_line(line) && !first(line) {
            continue; // the template's other backends: one line per fleet backend below
        }
        if first(line) {
            for (i, b) in backends.iter().enumerate() {
                let mut l = line
                    .replace("@GRPC1@", &b.grpc.to_string())
                    .replace("@HTTP1@", &b.http.to_string())
                    .replace("@AGENT1@", &b.agent_check.to_string())
                    .replace("server b1 ", &format!("server b{} ", i + 1));
                if balancer.is_haproxy() && balancer != Balancer::HaproxyAgentCheck {
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
        Balancer::NginxLeastConn => "least_conn",
        Balancer::NginxRandomTwo => "random two least_conn",
        _ => "leastconn",
    };
    let picker = picker.map_or_else(String::new, |p| p.to_string());
    let out = out
        .replace("@PICKER_GRPC1@", &picker)
        .replace("@PICKER_WS1@", &picker)
        .replace("@LISTEN@", &front.to_string())
        .replace("@FRONT@", &front.to_string())
        .replace("@ADMIN@", &free_port().to_string())
        .replace("@BALANCE@", balance);
    debug_assert!(!has_placeholder(&out), "a placeholder left in {out}");
    out
}

/// A template line naming a backend (`@GRPC1@`, `@HTTP2@`, …).
fn is_endpoint_line(line: &str) -> bool {
    (line.contains("@GRPC") || line.contains("@HTTP")) && !line.trim_start().starts_with('#')
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

    fn backends(n: u16) -> Vec<Backend> {
        (1..=n)
            .map(|i| Backend {
                name: format!("b{i}"),
                http: 41_000 + i,
                grpc: 42_000 + i,
                agent_check: 43_000 + i,
                cores: 1.0,
                log: PathBuf::from("/dev/null"),
            })
            .collect()
    }

    #[test]
    fn every_balancer_names_each_backend_once_and_fills_every_placeholder() {
        for n in [1, 3, 5] {
            for balancer in Balancer::ALL {
                let config = render(balancer, &backends(n), 40_000, Some(39_999));
                assert!(!has_placeholder(&config), "{config}");
                assert!(config.contains("40000"), "{balancer:?}: no front\n{config}");
                for i in 1..=n {
                    let port = format!("127.0.0.1:{}", 42_000 + i);
                    let at = format!("port_value: {}", 42_000 + i);
                    let lines = config
                        .lines()
                        .filter(|l| !l.trim_start().starts_with('#'))
                        .filter(|l| l.contains(&port) || l.contains(&at))
                        .count();
                    assert_eq!(lines, 1, "{balancer:?}: backend {i} of {n}\n{config}");
                }
                let agent = config.contains(&format!("agent-port {}", 43_001));
                assert_eq!(
                    agent,
                    balancer == Balancer::HaproxyAgentCheck,
                    "{balancer:?}"
                );
            }
        }
    }

    #[test]
    fn each_balancer_gets_its_own_algorithm() {
        let algorithm = |b| {
            let config = render(b, &backends(2), 40_000, Some(39_999));
            let line = config
                .lines()
                .map(str::trim)
                .find(|l| {
                    l.starts_with("balance ")
                        || l.starts_with("least_conn")
                        || l.starts_with("random ")
                        || l.starts_with("lb_policy:")
                        || l.starts_with("name: envoy.load_balancing_policies.")
                })
                .unwrap_or_else(|| panic!("{b:?}: no algorithm\n{config}"));
            line.to_owned()
        };
        assert_eq!(algorithm(Balancer::HaproxyRoundRobin), "balance roundrobin");
        assert_eq!(algorithm(Balancer::HaproxyLeastconn), "balance leastconn");
        assert_eq!(algorithm(Balancer::HaproxyAgentCheck), "balance leastconn");
        assert_eq!(algorithm(Balancer::NginxLeastConn), "least_conn;");
        assert_eq!(
            algorithm(Balancer::NginxRandomTwo),
            "random two least_conn;"
        );
        assert!(algorithm(Balancer::EnvoyLeastRequest).contains("LEAST_REQUEST"));
        assert!(algorithm(Balancer::EnvoyOrcaWrr).ends_with("client_side_weighted_round_robin"));
        assert!(algorithm(Balancer::EnvoyPicker).ends_with("override_host"));
        let picker = render(Balancer::EnvoyPicker, &backends(2), 40_000, Some(39_999));
        assert_eq!(picker.matches("port_value: 39999").count(), 2, "{picker}");
    }
}
