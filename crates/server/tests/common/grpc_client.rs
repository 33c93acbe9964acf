//! The gRPC C-core end-to-end tests' shared parts: the Python `grpcio` client
//! (`tests/lb/grpc_wrr_client.py`) from `scripts/lb_tools.sh`'s venv, its stubs, its runs as
//! child processes, and reading its JSON summary (C-core's own weights, from its trace).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Procs;
use super::lb::Fleet;

pub(crate) fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python with grpcio, or a loud panic.
pub(crate) fn python() -> PathBuf {
    let python = workspace().join(".tools/venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with grpcio and grpcio-tools not found: run scripts/lb_tools.sh",
        python.display()
    );
    python
}

/// Generates the Python stubs for the agent's protos into `dir/stubs`.
pub(crate) fn stubs(python: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("stubs");
    std::fs::create_dir_all(&out).unwrap();
    let proto = workspace().join("crates/server/proto");
    let status = Command::new(python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&proto)
        .arg(format!("--python_out={}", out.display()))
        .arg(format!("--grpc_python_out={}", out.display()))
        .arg(proto.join("livecount/agent/v1/agent.proto"))
        .status()
        .unwrap();
    assert!(status.success(), "grpc_tools.protoc failed");
    out
}

/// Runs of the Python client, each a child killed (by PID) if the test ends first.
pub(crate) struct Client {
    pub(crate) python: PathBuf,
    pub(crate) stubs: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) targets: String,
    pub(crate) procs: Procs,
}

impl Client {
    /// Starts a run called `name` with `args`; returns its index for [`Client::wait`].
    pub(crate) fn spawn(&mut self, name: &str, args: &[&str]) -> usize {
        let script = workspace().join("tests/lb/grpc_wrr_client.py");
        let child = Command::new(&self.python)
            .arg(script)
            .arg("--stubs")
            .arg(&self.stubs)
            .args(["--targets", &self.targets])
            .arg("--out")
            .arg(self.dir.join(format!("{name}.json")))
            .arg("--grpc-log")
            .arg(self.dir.join(format!("{name}.grpc.log")))
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("python starts");
        self.procs.0.push(child);
        self.procs.0.len() - 1
    }

    /// Waits up to `timeout` for run `i` (called `name`) to exit 0; returns its summary.
    pub(crate) async fn wait(&mut self, i: usize, name: &str, timeout: Duration) -> Value {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.procs.0[i].try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < timeout,
                "client run {name} did not finish within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(status.success(), "client run {name}: {status}");
        let text = std::fs::read_to_string(self.dir.join(format!("{name}.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    pub(crate) async fn run(&mut self, name: &str, args: &[&str], timeout: Duration) -> Value {
        let i = self.spawn(name, args);
        self.wait(i, name, timeout).await
    }
}

pub(crate) fn count(summary: &Value, key: &str) -> u64 {
    summary[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {summary}"))
}

/// Ended sessions by reason, summed over `reports`.
pub(crate) fn reasons(reports: &[livecount_report::LoadReport]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in reports {
        for (k, n) in &r.ended_by_reason {
            *out.entry(k.clone()).or_default() += n;
        }
    }
    out
}

/// `a - b`, reason by reason.
pub(crate) fn minus(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    a.iter()
        .map(|(k, n)| (k.clone(), n - b.get(k).copied().unwrap_or(0)))
        .collect()
}

/// A scheduler's weights (a map from C-core's subchannel address) as `b1 1.69, b2 …`, or
/// `None` unless every backend's weight is known.
pub(crate) fn labelled(scheduler: &Value, fleet: &Fleet) -> Option<String> {
    let scheduler = &scheduler["weights"];
    let weights: Option<Vec<String>> = fleet
        .backends
        .iter()
        .map(|b| {
            let w = scheduler[format!("{{127.0.0.1:{}}}", b.grpc)].as_f64()?;
            Some(format!("{} {w:.3}", b.name))
        })
        .collect();
    weights.map(|w| w.join(", "))
}

/// C-core's weights per backend, from a run summary: (reports used, min, median, max).
pub(crate) fn weights_seen(summary: &Value, fleet: &Fleet) -> Vec<Option<(u64, f64, f64, f64)>> {
    fleet
        .backends
        .iter()
        .map(|b| {
            let s = &summary["weights"]["weight_stats"][format!("{{127.0.0.1:{}}}", b.grpc)];
            Some((
                s["n"].as_u64()?,
                s["min"].as_f64()?,
                s["median"].as_f64()?,
                s["max"].as_f64()?,
            ))
        })
        .collect()
}
