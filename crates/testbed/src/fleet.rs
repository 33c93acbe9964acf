//! The backends: one `livecount-agent` process per simulated backend, each in a cgroup
//! whose CPU quota is the backend's size, so its capacity, its utilisation and its
//! latency under load are real. [`crate::cgroup`] makes the groups, on v2 or v1.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use livecount_report::LoadReport;
use livecount_server::load_driver::fetch_load;
use livecount_server::ports::free_port;

use crate::cgroup::{Cgroups, FleetGroup};
use crate::scaling::{AgentShape, Scaling};

/// One agent process's addresses and limits.
#[derive(Debug, Clone)]
pub struct Backend {
    /// `b1`, `b2`, …
    pub name: String,
    /// WebSocket sessions, `/load`, `/metrics`.
    pub http: u16,
    /// gRPC sessions and ORCA.
    pub grpc: u16,
    /// HAProxy agent-check.
    pub agent_check: u16,
    /// Its CPU quota in cores (`--cores` too).
    pub cores: f64,
    /// Its stderr.
    pub log: PathBuf,
}

impl Backend {
    /// `127.0.0.1:<http>`.
    pub fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http)
    }
}

/// The running agents; dropping it kills them (by PID) and removes their cgroups.
#[derive(Debug)]
pub struct Fleet {
    /// The backends, in the scenario's group order.
    pub backends: Vec<Backend>,
    children: Vec<Child>,
    /// Dropped after the children are killed (fields drop after `Drop::drop`).
    cgroup: FleetGroup,
    /// Configs and logs.
    pub dir: PathBuf,
    /// Seconds between two of an agent's reports (`--report-secs`).
    pub report_secs: f64,
}

impl Fleet {
    /// The cgroup hierarchy its CPU quotas are in.
    pub fn cgroup_flavour(&self) -> crate::cgroup::Flavour {
        self.cgroup.flavour()
    }
}

impl Fleet {
    /// Starts one agent per backend of `shape`, each in its own CPU-limited cgroup under
    /// `livecount-testbed-<pid>-<tag>` (where [`Cgroups::detect`] finds room), and waits
    /// (up to 10 s each) until every `/load` answers.
    pub async fn start(
        agent: &Path,
        shape: &[AgentShape],
        scaling: &Scaling,
        dir: &Path,
    ) -> Result<Fleet, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tag = dir.file_name().and_then(|n| n.to_str()).unwrap_or("run");
        let name = format!("livecount-testbed-{}-{tag}", std::process::id());
        let cgroup = Cgroups::detect()?.fleet(&name)?;
        let mut fleet = Fleet {
            backends: Vec::new(),
            children: Vec::new(),
            cgroup,
            dir: dir.to_owned(),
            report_secs: scaling.report_secs,
        };
        for (i, s) in shape.iter().enumerate() {
            let b = Backend {
                name: format!("b{}", i + 1),
                http: free_port(),
                grpc: free_port(),
                agent_check: free_port(),
                cores: s.cores,
                log: dir.join(format!("b{}.log", i + 1)),
            };
            let group = fleet.cgroup.backend(&b.name, s.cores)?;
            let child = spawn(agent, &b, s, scaling, &group)?;
            fleet.children.push(child);
            fleet.backends.push(b);
        }
        for b in &fleet.backends {
            fleet.wait_for(b).await?;
        }
        Ok(fleet)
    }

    async fn wait_for(&self, b: &Backend) -> Result<(), String> {
        for _ in 0..100 {
            if fetch_load(&b.http_addr()).await.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let log = std::fs::read_to_string(&b.log).unwrap_or_default();
        Err(format!(
            "{} did not answer /load within 10 s:\n{log}",
            b.name
        ))
    }

    /// Every backend's report now (`None` for one that did not answer within 2 s).
    pub async fn loads(&self) -> Vec<Option<LoadReport>> {
        let mut out = Vec::with_capacity(self.backends.len());
        for b in &self.backends {
            out.push(load_report(&b.http_addr()).await);
        }
        out
    }

    /// CPU seconds each agent process used so far (`/proc/<pid>/stat`).
    pub fn cpu_seconds(&self) -> Vec<f64> {
        self.children
            .iter()
            .map(|c| proc_cpu_seconds(c.id()))
            .collect()
    }

    /// Whether every agent still runs.
    pub fn all_running(&mut self) -> Result<(), String> {
        for (c, b) in self.children.iter_mut().zip(&self.backends) {
            if let Ok(Some(status)) = c.try_wait() {
                let log = std::fs::read_to_string(&b.log).unwrap_or_default();
                return Err(format!("{} exited: {status}\n{log}", b.name));
            }
        }
        Ok(())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The report at `addr`'s `/load` (`None` if it did not answer within 2 s).
pub async fn load_report(addr: &str) -> Option<LoadReport> {
    fetch_load(addr)
        .await
        .and_then(|v| serde_json::from_value(v).ok())
}

/// Starts `b`'s agent inside `group`: a shell writes its own PID into the cgroup and then
/// `exec`s the agent, so every thread of the agent starts already limited.
fn spawn(
    agent: &Path,
    b: &Backend,
    s: &AgentShape,
    scaling: &Scaling,
    group: &Path,
) -> Result<Child, String> {
    let log = std::fs::File::create(&b.log).map_err(|e| format!("{}: {e}", b.log.display()))?;
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--name".into(),
        b.name.clone(),
        "--http".into(),
        format!("127.0.0.1:{}", b.http),
        "--grpc".into(),
        format!("127.0.0.1:{}", b.grpc),
        "--agent-check".into(),
        format!("127.0.0.1:{}", b.agent_check),
        "--cores".into(),
        format!("{}", s.cores),
        "--max-sessions".into(),
        s.max_sessions.to_string(),
    ];
    args.extend(scaling.agent_args());
    Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
        .arg(group)
        .arg(agent)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", agent.display()))
}

/// utime + stime of process `pid` in seconds (`/proc/<pid>/stat` fields 14 and 15), 0 if
/// it cannot be read.
fn proc_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command may hold spaces and parentheses: fields start after the last ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 overall are 12 and 13 after the state (field 3 is index 0 here).
    (ticks(11) + ticks(12)) / clock_ticks()
}

/// `getconf CLK_TCK` (100 on Linux nearly everywhere), asked once.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}
