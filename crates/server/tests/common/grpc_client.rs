//! The gRPC C-core end-to-end tests' shared parts: the Python `grpcio` client
//! (`tests/lb/grpc_wrr_client.py`) from `scripts/lb_tools.sh`'s venv, its stubs, its runs as
//! child processes, and reading its JSON summary (C-core's own weights, from its trace).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Procs;
use super::lb::{Fleet, WarmSession, new_sessions};

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

/// How C-core's trace names the subchannel of a backend whose gRPC port is `port`: the key
/// of its weight in every scheduler and in the run's `weight_stats`.
pub(crate) fn subchannel(port: u16) -> String {
    format!("{{127.0.0.1:{port}}}")
}

/// A scheduler's weights (a map from C-core's subchannel address) as `b1 1.69, b2 …`, or
/// `None` unless every backend's weight is known.
pub(crate) fn labelled(scheduler: &Value, fleet: &Fleet) -> Option<String> {
    let scheduler = &scheduler["weights"];
    let weights: Option<Vec<String>> = fleet
        .backends
        .iter()
        .map(|b| {
            let w = scheduler[subchannel(b.grpc)].as_f64()?;
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
            let s = &summary["weights"]["weight_stats"][subchannel(b.grpc)];
            Some((
                s["n"].as_u64()?,
                s["min"].as_f64()?,
                s["median"].as_f64()?,
                s["max"].as_f64()?,
            ))
        })
        .collect()
}

impl Client {
    /// A client of `fleet`'s three agents' `--grpc` addresses, its stubs generated into the
    /// fleet's directory.
    pub(crate) fn for_fleet(fleet: &Fleet) -> Client {
        let python = python();
        let stubs = stubs(&python, &fleet.dir);
        let targets = fleet
            .backends
            .iter()
            .map(|b| format!("127.0.0.1:{}", b.grpc))
            .collect::<Vec<_>>()
            .join(",");
        Client {
            python,
            stubs,
            dir: fleet.dir.clone(),
            targets,
            procs: Procs(Vec::new()),
        }
    }
}

/// The balancing wave's sessions.
const WAVE_SESSIONS: u64 = 60;

/// Seconds over which the wave's sessions start (evenly, within 50 ms).
const WAVE_RAMP: &str = "6";

/// The client's arguments for the balancing wave beside `--sessions` [`WAVE_SESSIONS`]: over
/// 6 s, each held 4–6 s, 30 % cancelled abruptly, after a 2.5 s warm-up that lets C-core
/// read the loaded reports before its first call.
const WAVE_ARGS: [&str; 12] = [
    "--ramp",
    WAVE_RAMP,
    "--hold-min",
    "4",
    "--hold-max",
    "6",
    "--kill-share",
    "0.3",
    "--seed",
    "7",
    "--warmup",
    "2.5",
];

/// What a balancing wave did: the client's summary and the agents' new sessions.
pub(crate) struct BalanceWave {
    /// The client's summary of the run (`balance.json`).
    pub(crate) run: Value,
    /// New sessions per backend over the wave (the warm-up sessions not among them).
    pub(crate) new: Vec<u64>,
    /// Sessions the client opened, closed with `bye`, and cancelled abruptly.
    pub(crate) opened: u64,
    pub(crate) closed: u64,
    pub(crate) cancelled: u64,
    /// Seconds from the wave's start until every backend settled.
    pub(crate) secs: f64,
}

impl BalanceWave {
    /// The client's counts, as the reports state them.
    pub(crate) fn summary(&self) -> String {
        format!(
            "Client: {} opened, {} closed with bye (`completed` on the agents), {} cancelled \
             (`cancelled` on the agents), 0 failed.",
            self.opened, self.closed, self.cancelled
        )
    }
}

/// The balancing wave both C-core tests run (`grpc_wrr_e2e`, `grpc_percall_e2e`): the run
/// called `balance` with `extra` arguments, [`WAVE_SESSIONS`] and [`WAVE_ARGS`], then the
/// `warm` sessions (one held on each cold backend, outside the wave's counts) closed and
/// every backend settled.
/// Checks that no session failed or was left open, and that the agents counted each
/// session once and each ending by its reason: `bye` `Completed` (the warm-up sessions'
/// too), a C-core cancel `Cancelled`, nothing else.
pub(crate) async fn balance_wave(
    client: &mut Client,
    fleet: &Fleet,
    warm: Vec<WarmSession>,
    extra: &[&str],
) -> BalanceWave {
    let recording = Instant::now();
    let before = fleet.loads().await;
    let sessions = WAVE_SESSIONS.to_string();
    let args: Vec<&str> = (extra.iter().copied())
        .chain(["--sessions", &sessions])
        .chain(WAVE_ARGS)
        .collect();
    let run = client.run("balance", &args, Duration::from_secs(45)).await;
    let warmed = warm.len() as u64;
    for w in warm {
        w.close().await;
    }
    let after = fleet.settled(&[0, 1, 2]).await;
    let secs = recording.elapsed().as_secs_f64();
    let new = new_sessions(&before, &after);
    let (opened, closed, cancelled) = (
        count(&run, "opened"),
        count(&run, "closed"),
        count(&run, "cancelled"),
    );
    eprintln!(
        "balance run: {opened} opened, {closed} closed, {cancelled} cancelled, failures {}; \
         new sessions per backend (b3 hot): {new:?}",
        run["failures"]
    );
    assert_eq!(count(&run, "failed"), 0, "{}", run["failures"]);
    assert_eq!(count(&run, "unfinished"), 0);
    assert_eq!(opened, WAVE_SESSIONS);
    assert!(cancelled > 0 && closed > 0);
    assert_eq!(closed + cancelled, WAVE_SESSIONS);
    assert_eq!(
        new.iter().sum::<u64>(),
        opened,
        "every session counted once"
    );
    let ended = minus(&reasons(&after), &reasons(&before));
    let expected: BTreeMap<String, u64> = ended
        .keys()
        .map(|k| {
            let n = match k.as_str() {
                "completed" => closed + warmed,
                "cancelled" => cancelled,
                _ => 0,
            };
            (k.clone(), n)
        })
        .collect();
    assert_eq!(
        ended, expected,
        "bye ends Completed (the warm-up sessions too) and a C-core cancel Cancelled, once each"
    );
    BalanceWave {
        run,
        new,
        opened,
        closed,
        cancelled,
        secs,
    }
}

/// The share of the wave's picks between cold backends `a` and `b` that C-core's weights
/// asked of `a`: `w_a ÷ (w_a + w_b)` of the scheduler in force, averaged over 600 instants
/// spread evenly across the ramp (the sessions start evenly across it), taking at each the
/// last scheduler built with both weights known (before the first, the first). `None` if
/// no scheduler knew both.
///
/// C-core's stride scheduler picks in the proportion of the weights it holds, and those
/// follow the agents' reports, which two equally loaded agents need not agree on: as
/// sessions arrive one report can advertise four times the headroom of the last (the
/// capacity model's feedback, docs/lb/grpc.md; seen: b2 49 k → 195 k → 85 k → 67 k over
/// three seconds while b1 held 47–49 k, and the wave split 24 / 36 as those weights asked).
/// So the split is judged against this, not against an even split.
pub(crate) fn asked_cold_share(run: &Value, fleet: &Fleet, a: usize, b: usize) -> Option<f64> {
    let weight = |s: &Value, i: usize| {
        s["weights"][subchannel(fleet.backends[i].grpc)]
            .as_f64()
            .filter(|w| *w > 0.0)
    };
    let known: Vec<(f64, f64)> = run["weights"]["schedulers"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let (wa, wb) = (weight(s, a)?, weight(s, b)?);
            Some((s["at"].as_f64()?, wa / (wa + wb)))
        })
        .collect();
    let first = known.first()?.1;
    let start = run["first_call_at"].as_f64()?;
    let ramp: f64 = WAVE_RAMP.parse().unwrap();
    const INSTANTS: usize = 600;
    let total: f64 = (0..INSTANTS)
        .map(|k| {
            let t = start + ramp * (k as f64 + 0.5) / INSTANTS as f64;
            known
                .iter()
                .take_while(|(at, _)| *at <= t)
                .last()
                .map_or(first, |(_, share)| *share)
        })
        .sum();
    Some(total / INSTANTS as f64)
}

/// C-core's weights per backend over `run` ([`weights_seen`]), printed, after checking that
/// it weighed every backend and the hot one below every cold one (by the median).
pub(crate) fn hot_weighs_least(run: &Value, fleet: &Fleet) -> Vec<Option<(u64, f64, f64, f64)>> {
    let weights = weights_seen(run, fleet);
    for (b, w) in fleet.backends.iter().zip(&weights) {
        eprintln!(
            "{}: C-core weights (reports used, min, median, max): {w:?}",
            b.name
        );
    }
    let median = |i: usize| weights[i].expect("C-core weighed every backend").2;
    let coldest = (0..weights.len())
        .filter(|&i| i != fleet.hot)
        .map(median)
        .fold(f64::INFINITY, f64::min);
    assert!(
        median(fleet.hot) < coldest,
        "the hot backend weighs least: {weights:?}"
    );
    weights
}

/// C-core's schedulers over `run` with every backend's weight known, as [`labelled`].
pub(crate) fn schedulers(run: &Value, fleet: &Fleet) -> Vec<String> {
    run["weights"]["schedulers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| labelled(s, fleet))
        .collect()
}

/// The report's table of C-core's weights per backend; `reports` names the reports it used.
pub(crate) fn weight_table(
    fleet: &Fleet,
    weights: &[Option<(u64, f64, f64, f64)>],
    reports: &str,
) -> String {
    let mut table = format!(
        "| backend | {reports} C-core used | min | median | max |\n\
         | --- | ---: | ---: | ---: | ---: |\n"
    );
    for (b, w) in fleet.backends.iter().zip(weights) {
        let (n, lo, mid, hi) = w.unwrap_or_default();
        table.push_str(&format!(
            "| {} | {n} | {lo:.3} | {mid:.3} | {hi:.3} |\n",
            b.name
        ));
    }
    table
}
