//! Helpers shared by the loopback and end-to-end tests of the agent.

// Each test binary includes this module and uses only some of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;

use livecount_server::{AgentConfig, RunningAgent};
use tonic::transport::{Channel, Endpoint};

pub(crate) mod envoy;
pub(crate) mod grpc_client;
pub(crate) mod lb;
pub(crate) mod nginx;
pub(crate) mod otlp;

/// Kills (by PID) every process a test started, however the test ends.
pub(crate) struct Procs(pub(crate) Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A tonic channel to the agent's gRPC port.
pub(crate) async fn channel(a: &RunningAgent) -> Channel {
    Endpoint::from_shared(format!("http://{}", a.grpc.unwrap()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// An agent on loopback with every listener on a free port (HTTP, agent-check, gRPC),
/// reports every 0.2 s and 1 ms between chunks, plus `extra` options.
pub(crate) async fn agent(extra: &[&str]) -> RunningAgent {
    let mut args: Vec<String> = [
        "--http",
        "127.0.0.1:0",
        "--agent-check",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--report-secs",
        "0.2",
        "--chunk-gap-ms",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    RunningAgent::start(AgentConfig::from_args(&args).unwrap())
        .await
        .unwrap()
}

/// Waits until the tracker agrees: no session open; returns ended counts by reason.
pub(crate) async fn settled(a: &RunningAgent) -> BTreeMap<String, u64> {
    for _ in 0..500 {
        let s = a.agent.tracker().snapshot();
        if s.active == 0 {
            assert_eq!(s.started, s.ended, "{s:?}");
            return s
                .ended_by_reason
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.as_str().to_owned(), n))
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("sessions still open: {:?}", a.agent.tracker().snapshot());
}

/// The expected `settled` map.
pub(crate) fn reasons(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
    list.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}
