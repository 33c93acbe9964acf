//! The agent's settings, from the command line, each with a default and a range check.

use std::net::SocketAddr;
use std::time::Duration;

use livecount_capacity::{CapacityConfig, ConfigError};

/// Everything `livecount-agent serve` can be told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// HTTP: WebSocket sessions at `/session`, `/metrics`, `/load`.
    pub http: SocketAddr,
    /// A separate address for `/metrics` and `/load` (a scrape port); they are always on
    /// `http` too. `None` = only there.
    pub metrics: Option<SocketAddr>,
    /// HAProxy agent-check responder; `None` = off.
    pub agent_check: Option<SocketAddr>,
    /// gRPC: sessions (`livecount.agent.v1.Agent/Converse`) and ORCA out-of-band load
    /// reports (`xds.service.orca.v3.OpenRcaService`); `None` = off.
    pub grpc: Option<SocketAddr>,
    /// A name for logs and `/load` (e.g. `b1`).
    pub name: String,
    /// Sessions above this are refused (HTTP 503) before the upgrade.
    pub max_sessions: u64,
    /// Longest session; it then ends `TimedOut` (close code 1000, "max session length").
    pub max_session: Duration,
    /// A session with no client frame for this long ends `Disconnected`, a missed
    /// heartbeat (close code 1008); `Reaped` is left to the ghost reaper.
    pub idle_timeout: Duration,
    /// A frame that waits this long for a client that stopped reading ends the session
    /// `Disconnected` (no CLI flag yet).
    pub write_timeout: Duration,
    /// An HTTP connection whose request head has not fully arrived this long after it
    /// started (or after the last response, on keep-alive) is closed (no CLI flag yet).
    pub header_read_timeout: Duration,
    /// At most this many HTTP connections not yet upgraded to a WebSocket; at the bound a
    /// new connection closes the oldest of them (no CLI flag yet).
    pub max_pending_connections: usize,
    /// Largest client message accepted, bytes; larger ones close the session with 1009.
    pub max_frame_bytes: usize,
    /// CPU burned per response chunk, so speaking sessions cost something.
    pub work: Duration,
    /// Pause between chunks (token pacing).
    pub chunk_gap: Duration,
    /// A background thread burning this share of one core (makes a backend "hot").
    pub background_load: f64,
    /// Cores the utilisation is measured against (default: the CPUs this process may use).
    pub cores: f64,
    /// Seconds between load reports (also the capacity model's window and interval).
    pub report_interval: Duration,
    /// Time given to open sessions on shutdown before they are ended `Shutdown`.
    pub drain: Duration,
    /// Hybrid capacity model parameters.
    pub capacity: CapacityConfig,
}

impl Default for AgentConfig {
    fn default() -> Self {
        let ten = Duration::from_secs(10);
        Self {
            http: "127.0.0.1:8080".parse().expect("a valid address"),
            metrics: None,
            agent_check: None,
            grpc: None,
            name: "agent".into(),
            max_sessions: 1000,
            max_session: Duration::from_secs(20 * 60),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            max_pending_connections: 256,
            max_frame_bytes: 16 * 1024,
            work: Duration::ZERO,
            chunk_gap: Duration::from_millis(20),
            background_load: 0.0,
            cores: std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
            report_interval: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            capacity: CapacityConfig::new(0.8, 2.0, ten, ten).expect("valid defaults"),
        }
    }
}

/// Usage text of `livecount-agent serve`.
pub const SERVE_USAGE: &str = "livecount-agent serve [options]
  --http ADDR              WebSocket /session, /metrics, /load (default 127.0.0.1:8080)
  --metrics ADDR           /metrics and /load also on a separate scrape address (default off)
  --agent-check ADDR       HAProxy agent-check responder (default off)
  --grpc ADDR              gRPC sessions (Agent/Converse) and ORCA load reports (default off)
  --name NAME              backend name in /load (default agent)
  --max-sessions N         refuse sessions above N with HTTP 503 (default 1000)
  --max-session-secs S     end sessions after S seconds, TimedOut (default 1200)
  --idle-timeout-secs S    end sessions silent for S seconds, Reaped (default 60)
  --max-frame-bytes B      close with 1009 above B bytes (default 16384)
  --work-ms MS             CPU burned per response chunk (default 0)
  --chunk-gap-ms MS        pause between chunks (default 20)
  --background-load F      burn F of one core in the background, 0..=1 (default 0)
  --cores C                cores utilisation is measured against (default: CPUs)
  --report-secs S          load report interval and capacity window (default 1)
  --drain-secs S           grace period on shutdown (default 2)
  --target U               capacity target utilisation, (0, 1] (default 0.8)
  --safety-scaler K        capacity safety scaler, >= 1 (default 2)";

impl AgentConfig {
    /// Parses `serve` options; unknown options and bad values are errors naming the flag.
    pub fn from_args(args: &[String]) -> Result<Self, String> {
        let mut c = AgentConfig::default();
        let (mut target, mut scaler) = (0.8, 2.0);
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let value = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value\n{SERVE_USAGE}"))?;
            let secs = |v: &str| parse_secs(flag, v);
            match flag.as_str() {
                "--http" => c.http = parse(flag, value, "an address like 127.0.0.1:8080")?,
                "--metrics" => c.metrics = Some(parse(flag, value, "an address")?),
                "--agent-check" => c.agent_check = Some(parse(flag, value, "an address")?),
                "--grpc" => c.grpc = Some(parse(flag, value, "an address")?),
                "--name" => c.name = value.clone(),
                "--max-sessions" => c.max_sessions = parse(flag, value, "a whole number")?,
                "--max-session-secs" => c.max_session = secs(value)?,
                "--idle-timeout-secs" => c.idle_timeout = secs(value)?,
                "--max-frame-bytes" => c.max_frame_bytes = parse(flag, value, "bytes")?,
                "--work-ms" => c.work = Duration::from_millis(parse(flag, value, "milliseconds")?),
                "--chunk-gap-ms" => {
                    c.chunk_gap = Duration::from_millis(parse(flag, value, "milliseconds")?)
                }
                "--background-load" => c.background_load = parse(flag, value, "a share 0..=1")?,
                "--cores" => c.cores = parse(flag, value, "a number of cores")?,
                "--report-secs" => c.report_interval = secs(value)?,
                "--drain-secs" => c.drain = secs(value)?,
                "--target" => target = parse(flag, value, "a share in (0, 1]")?,
                "--safety-scaler" => scaler = parse(flag, value, "a number >= 1")?,
                _ => return Err(format!("unknown option {flag}\n{SERVE_USAGE}")),
            }
        }
        if !(0.0..=1.0).contains(&c.background_load) {
            return Err(format!(
                "--background-load {} is out of range (allowed 0..=1)",
                c.background_load
            ));
        }
        if !(c.cores > 0.0 && c.cores.is_finite()) {
            return Err(format!("--cores {} is out of range (allowed > 0)", c.cores));
        }
        if c.report_interval.is_zero() || c.max_session.is_zero() || c.idle_timeout.is_zero() {
            return Err(
                "--report-secs, --max-session-secs and --idle-timeout-secs must be > 0".into(),
            );
        }
        c.capacity = CapacityConfig::new(target, scaler, c.report_interval, c.report_interval)
            .map_err(|e: ConfigError| format!("capacity: {e}"))?;
        Ok(c)
    }
}

fn parse<T: std::str::FromStr>(flag: &str, value: &str, what: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag} {value:?}: expected {what}"))
}

fn parse_secs(flag: &str, value: &str) -> Result<Duration, String> {
    let s: f64 = parse(flag, value, "seconds")?;
    Duration::try_from_secs_f64(s).map_err(|_| format!("{flag} {value:?}: expected seconds ≥ 0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_flags_and_names_bad_ones() {
        let c = AgentConfig::from_args(&args(
            "--http 127.0.0.1:9 --grpc 127.0.0.1:10 --work-ms 5 --report-secs 0.5",
        ))
        .unwrap();
        assert_eq!(c.http.port(), 9);
        assert_eq!(c.grpc.map(|a| a.port()), Some(10));
        assert_eq!(AgentConfig::default().grpc, None);
        assert_eq!(c.work, Duration::from_millis(5));
        assert_eq!(c.capacity.window(), Duration::from_millis(500));
        for (bad, names) in [
            ("--bogus 1", "--bogus"),
            ("--work-ms fast", "--work-ms"),
            ("--background-load 2", "--background-load"),
            ("--target 1.5", "target"),
            ("--http", "--http"),
            ("--grpc nowhere", "--grpc"),
        ] {
            let e = AgentConfig::from_args(&args(bad)).unwrap_err();
            assert!(e.contains(names), "{bad}: {e}");
        }
    }
}
