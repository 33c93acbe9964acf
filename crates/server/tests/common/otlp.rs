//! The OTLP/gRPC receiver the end-to-end tests export to: `tests/lb/otlp_receiver.py`
//! (grpcio on the official protobufs, from `scripts/lb_tools.sh`), each request decoded and
//! written down as a JSON line — metrics to one file, traces to another.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Procs;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python with grpcio and the OTLP protobufs (metrics and traces), or a loud
/// panic.
fn python() -> PathBuf {
    let python = workspace().join(".tools/venv/bin/python");
    let ok = Command::new(&python)
        .args([
            "-c",
            "import grpc; \
             from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc; \
             from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with grpcio and opentelemetry-proto not found: run scripts/lb_tools.sh",
        python.display()
    );
    python
}

/// The receiver on a free loopback port; killed by PID when dropped.
pub(crate) struct Receiver {
    metrics: PathBuf,
    traces: PathBuf,
    pub(crate) port: u16,
    _procs: Procs,
}

impl Receiver {
    /// Starts it, its files in `dir`; waits (at most 20 s) for its port.
    pub(crate) fn start(dir: &Path) -> Self {
        let port_file = dir.join("otlp.port");
        let (metrics, traces) = (dir.join("metrics.jsonl"), dir.join("traces.jsonl"));
        let child = Command::new(python())
            .arg(workspace().join("tests/lb/otlp_receiver.py"))
            .arg("--port-file")
            .arg(&port_file)
            .arg("--out")
            .arg(&metrics)
            .arg("--traces-out")
            .arg(&traces)
            .args(["--max-seconds", "120"])
            .stdout(Stdio::null())
            .spawn()
            .expect("python starts");
        let mut procs = Procs(vec![child]);
        let start = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().expect("a port");
            }
            let exited = procs.0[0].try_wait().unwrap();
            assert!(exited.is_none(), "the receiver exited: {exited:?}");
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no receiver port in 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Receiver {
            metrics,
            traces,
            port,
            _procs: procs,
        }
    }

    /// `http://127.0.0.1:PORT`, for `--otlp-endpoint`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every metrics request received so far, decoded.
    pub(crate) fn metrics(&self) -> Vec<Value> {
        lines(&self.metrics)
    }

    /// Every trace request received so far, decoded (ids in hex).
    pub(crate) fn traces(&self) -> Vec<Value> {
        lines(&self.traces)
    }
}

/// The JSON lines of `path` (none yet: empty).
fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A protobuf JSON number: 64-bit integers come as strings, a zero as nothing; the
/// receiver sends doubles as strings too (their exact round-trip form, parsed here).
pub(crate) fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        Value::Number(n) => n.as_f64().unwrap(),
        Value::Null => 0.0,
        other => panic!("not a number: {other}"),
    }
}
